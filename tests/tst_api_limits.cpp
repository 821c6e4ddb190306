// Account limits through the real service and real VMs: the cap of 20
// live sandboxes (the 21st create is refused with 429), the host's limit
// across accounts (503), boots queued two at a time, and prepaid credit
// running out (the running sandbox is destroyed, the next create gets 402).
#include "support/service.h"

#include <QElapsedTimer>
#include <QJsonArray>
#include <QTemporaryDir>

#include <algorithm>

using namespace testing;

class TestApiLimits : public QObject {
    Q_OBJECT
private:
    QTemporaryDir dir{QStringLiteral("/tmp/sc-lim-XXXXXX")};
    std::unique_ptr<Service> service;
    std::unique_ptr<Http> http;
    QString richBox; // a sandbox of the first account
    const QRegularExpression account{QStringLiteral("(acct_[a-z2-7]+)")};

private slots:
    void initTestCase() {
        QVERIFY(dir.isValid());
        // A cent a second makes credit run out within a test.
        admin(dir.path(), {"config", "set", "rate.small", "36"});
        admin(dir.path(), {"config", "set", "signup_credit", "1000"});
        admin(dir.path(), {"config", "set", "max_host_sandboxes", "20"});
        admin(dir.path(), {"config", "set", "max_booting", "2"});
        int rc = -1;
        admin(dir.path(), {"config", "set", "rate.small", "-1"}, &rc);
        QCOMPARE(rc, 1); // refused, and not stored:
        QCOMPARE(admin(dir.path(), {"config", "get", "rate.small"}).trimmed(),
                 QStringLiteral("36.00"));
        service = std::make_unique<Service>(dir.path());
        QVERIFY(service->start());
        http = std::make_unique<Http>(service->base(), service->key());
    }

    void twentyFirstCreateIsRefused() {
        QList<QNetworkReply *> pending;
        for (int i = 0; i < 20; ++i)
            pending << http->send("POST", QStringLiteral("/sandboxes"),
                                  QByteArray(R"({"size":"small","name":"cap"})"));
        // Two boot at a time; the others say they wait for a slot.
        QStringList reasons;
        QElapsedTimer clock;
        clock.start();
        QVERIFY(QTest::qWaitFor(
            [&] {
                const Reply list = http->call("GET", QStringLiteral("/sandboxes?status=creating"));
                for (const QJsonValue &v : list.json.value("data").toArray())
                    reasons << v.toObject().value("status_reason").toString();
                QTest::qWait(250); // a look now and then, not a load of its own
                return std::all_of(pending.begin(), pending.end(),
                                   [](QNetworkReply *r) { return r->isFinished(); });
            },
            1500000));
        qInfo("20 creates, two booting at a time, took %lld s", clock.elapsed() / 1000);
        QVERIFY2(reasons.contains(QStringLiteral("waiting for a boot slot")),
                 qPrintable(reasons.join(QLatin1Char(','))));
        QStringList ids;
        for (QNetworkReply *r : pending) {
            Reply reply = Http::wait(r);
            QVERIFY2(reply.status == 201, reply.body.constData());
            ids << reply.json.value("id").toString();
        }
        QCOMPARE(qemuProcessesWith(dir.path()), 20);
        Reply refused = http->call("POST", QStringLiteral("/sandboxes"), QByteArray("{}"));
        QCOMPARE(refused.status, 429);
        QCOMPARE(refused.errorType(), QStringLiteral("rate_limited"));
        QVERIFY(refused.message().contains(QLatin1String("20")));
        QCOMPARE(qemuProcessesWith(dir.path()), 20);
        // Another account is within its own cap, but the host is full.
        // Accounts made by the admin start without credit; without some the
        // answer would be 402, which is checked before the host's room.
        const QString made = admin(dir.path(), {"accounts", "create", "--name", "neighbour"});
        admin(dir.path(), {"credit", "add", "1.00", "--account", account.match(made).captured(1)});
        Http neighbour(service->base(), keyIn(made));
        Reply full = neighbour.call("POST", QStringLiteral("/sandboxes"), QByteArray("{}"));
        QCOMPARE(full.status, 503);
        QVERIFY2(full.message().contains(QLatin1String("max_host_sandboxes")),
                 full.body.constData());
        QCOMPARE(qemuProcessesWith(dir.path()), 20);
        // Each boot waited its turn: the log names the queue among the phases.
        QVERIFY(service->log().contains(QRegularExpression(
            QStringLiteral("created sbx_\\w+ in \\d+ ms: queue \\d+ ms, overlay"))));

        QList<QNetworkReply *> deletes;
        for (const QString &id : ids)
            deletes << http->send("DELETE", QStringLiteral("/sandboxes/") + id);
        for (QNetworkReply *r : deletes)
            QCOMPARE(Http::wait(r).status, 200);
        QCOMPARE(qemuProcessesWith(dir.path()), 0);
        // Room again.
        Reply again = http->call("POST", QStringLiteral("/sandboxes"), QByteArray("{}"));
        QCOMPARE(again.status, 201);
        richBox = again.json.value("id").toString();
        QCOMPARE(
            http->call("DELETE", QStringLiteral("/sandboxes/") + again.json.value("id").toString())
                .status,
            200);
    }

    void creditRunningOutDestroysAndRefuses() {
        const QString made = admin(dir.path(), {"accounts", "create", "--name", "poor"});
        const QString id = account.match(made).captured(1);
        QVERIFY(!id.isEmpty());
        Http poor(service->base(), keyIn(made));
        // Another account's sandboxes do not exist for this one.
        QVERIFY(!richBox.isEmpty()); // made by the test before
        QCOMPARE(poor.call("GET", QStringLiteral("/sandboxes/") + richBox).status, 404);
        QCOMPARE(poor.call("DELETE", QStringLiteral("/sandboxes/") + richBox).status, 404);
        QCOMPARE(poor.call("GET", QStringLiteral("/sandboxes")).json.value("data").toArray().size(),
                 0);
        Reply none = poor.call("POST", QStringLiteral("/sandboxes"), QByteArray("{}"));
        QCOMPARE(none.status, 402);
        QCOMPARE(none.errorType(), QStringLiteral("insufficient_credit"));

        // About 100 s: room for a boot slowed by a busy machine.
        admin(dir.path(), {"credit", "add", "1.00", "--account", id});
        Reply created = poor.call("POST", QStringLiteral("/sandboxes"), QByteArray("{}"));
        QCOMPARE(created.status, 201);
        const QString box = created.json.value("id").toString();
        QVERIFY(QTest::qWaitFor(
            [&] {
                return poor.call("GET", QStringLiteral("/sandboxes/") + box)
                           .json.value("status")
                           .toString() == QLatin1String("destroyed");
            },
            300000));
        Reply ended = poor.call("GET", QStringLiteral("/sandboxes/") + box);
        QVERIFY(ended.json.value("status_reason").toString().contains(QLatin1String("credit")));
        QCOMPARE(ended.json.value("cost_so_far").toDouble(), 1.00);
        QCOMPARE(qemuProcessesWith(box), 0);
        QCOMPARE(poor.call("GET", QStringLiteral("/account")).json.value("credit").toDouble(), 0.0);
        QCOMPARE(poor.call("POST", QStringLiteral("/sandboxes"), QByteArray("{}")).status, 402);
        // The other account is untouched by this one's poverty.
        Reply rich = http->call("GET", QStringLiteral("/account"));
        QVERIFY(rich.json.value("credit").toDouble() > 900);
    }

    void cleanupTestCase() {
        // What a failed test left running is destroyed (terminate alone
        // would leave it running, as Ctrl-C does)...
        if (service)
            service->destroyLiveAndTerminate();
        // ...and a QEMU or passt still there after that is a leak: it fails
        // the suite, and is killed so that later suites do not share the
        // machine with it.
        const QStringList left = reapLeftovers(dir.path());
        QVERIFY2(left.isEmpty(), qPrintable(left.join(QLatin1Char('\n'))));
    }
};

QTEST_GUILESS_MAIN(TestApiLimits)
#include "tst_api_limits.moc"
