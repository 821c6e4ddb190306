// The REST API end to end: the real `sandcastle serve` process, real
// sockets, real VMs (emulated here). One sandbox is shared by the tests
// that do not test isolation or lifecycle; the real clients (the seeds'
// Python loop, their curl/jq flow, a generated hostile-input run) run
// against the same service. The last test kills the service with SIGKILL
// mid-work and checks what the restart makes of it.
#include "guestimage.h"
#include "sandbox/engine.h"
#include "support/service.h"

#include <QElapsedTimer>
#include <QJsonArray>
#include <QSqlDatabase>
#include <QSqlQuery>
#include <QTemporaryDir>

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace testing;

class TestApiVm : public QObject {
    Q_OBJECT
private:
    QTemporaryDir dir{QStringLiteral("/tmp/sc-api-XXXXXX")};
    std::unique_ptr<Service> service;
    std::unique_ptr<Http> http;
    QString box;      // shared sandbox
    QString shortBox; // created with a one-minute lifetime, checked last
    QString other;    // a second long-lived sandbox
    QString doomed;   // its time runs out while the service is down

    QString create(const QJsonObject &body = {{QStringLiteral("size"), QStringLiteral("small")}}) {
        Reply r = http->call("POST", QStringLiteral("/sandboxes"), body);
        if (r.status != 201)
            qFatal("create failed: %d %s", r.status, r.body.constData());
        return r.json.value(QStringLiteral("id")).toString();
    }
    Reply exec(const QString &id, const QJsonObject &body) {
        return http->call("POST", QStringLiteral("/sandboxes/%1/exec").arg(id), body);
    }
    QString status(const QString &id) {
        return http->call("GET", QStringLiteral("/sandboxes/") + id)
            .json.value(QStringLiteral("status"))
            .toString();
    }
    bool waitForStatus(const QString &id, const QString &wanted, int timeoutMs) {
        return QTest::qWaitFor([&] { return status(id) == wanted; }, timeoutMs);
    }
    /// Waits until `path` exists in sandbox `id` (a command says it runs
    /// by creating it), or until `request`, the command's own, has ended.
    bool waitForFile(const QString &id, const QString &path, QNetworkReply *request) {
        bool seen = false;
        (void)QTest::qWaitFor(
            [&] {
                if (request->isFinished())
                    return true;
                const Reply r =
                    exec(id, {{"command", QStringLiteral("test -e %1 && echo yes").arg(path)}});
                seen = r.json.value("stdout").toString() == QLatin1String("yes\n");
                return seen;
            },
            120000);
        return seen;
    }
    QString runClient(const QString &program, const QStringList &args, int *exitCode) {
        QProcess p;
        QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
        env.insert(QStringLiteral("SANDCASTLE_API"), service->base());
        env.insert(QStringLiteral("AAS_API_KEY"), service->key());
        p.setProcessEnvironment(env);
        p.start(program, args);
        // Event loop keeps running: the service is another process anyway.
        if (!QTest::qWaitFor([&] { return p.state() == QProcess::NotRunning; }, 900000))
            qWarning() << program << "did not finish in 15 minutes";
        *exitCode = p.exitCode();
        const QByteArray err = p.readAllStandardError();
        if (!err.isEmpty())
            qInfo().noquote() << program << "stderr:" << err.right(2000);
        return QString::fromUtf8(p.readAllStandardOutput());
    }

private slots:
    void initTestCase() {
        QVERIFY(dir.isValid());
        service = std::make_unique<Service>(dir.path());
        QVERIFY2(service->start(), "the service did not start");
        QVERIFY2(service->key().startsWith(QLatin1String("sc_")), "no key printed at first start");
        http = std::make_unique<Http>(service->base(), service->key());
        shortBox = create({{QStringLiteral("timeout_minutes"), 1}});
        box = create({{QStringLiteral("size"), QStringLiteral("small")},
                      {QStringLiteral("name"), QStringLiteral("shared")},
                      {QStringLiteral("timeout_minutes"), 60}});
        other = create({{QStringLiteral("timeout_minutes"), 60}});
        doomed = create({{QStringLiteral("timeout_minutes"), 60}});
    }

    void createdObjectHasTheContract() {
        Reply r = http->call("GET", QStringLiteral("/sandboxes/") + box);
        QCOMPARE(r.status, 200);
        QCOMPARE(r.json.value("id").toString(), box);
        QCOMPARE(r.json.value("name").toString(), QStringLiteral("shared"));
        QCOMPARE(r.json.value("size").toString(), QStringLiteral("small"));
        QCOMPARE(r.json.value("status").toString(), QStringLiteral("running"));
        QCOMPARE(r.json.value("timeout_minutes").toInt(), 60);
        QCOMPARE(r.json.value("vcpus").toInt(), 1);
        QCOMPARE(r.json.value("memory_mib").toInt(), 1024);
        QCOMPARE(r.json.value("disk_gib").toInt(), 8);
        QVERIFY(r.json.value("created_at").toString().endsWith(QLatin1Char('Z')));
        const auto created =
            QDateTime::fromString(r.json.value("created_at").toString(), Qt::ISODateWithMs);
        const auto expires =
            QDateTime::fromString(r.json.value("expires_at").toString(), Qt::ISODateWithMs);
        QCOMPARE(created.secsTo(expires), 3600);
        QVERIFY(r.json.value("cost_so_far").isDouble());
    }

    void authIsRequired() {
        Http anonymous(service->base(), {});
        Reply r = anonymous.call("GET", QStringLiteral("/sandboxes"));
        QCOMPARE(r.status, 401);
        QCOMPARE(r.errorType(), QStringLiteral("unauthorized"));
        Http wrong(service->base(), QStringLiteral("sc_") + QString(40, QLatin1Char('a')));
        QCOMPARE(wrong.call("GET", QStringLiteral("/sandboxes")).status, 401);

        // A key made on the command line works until it is revoked.
        const QString out = admin(dir.path(), {QStringLiteral("keys"), QStringLiteral("create"),
                                               QStringLiteral("--name"), QStringLiteral("t")});
        Http second(service->base(), keyIn(out));
        QCOMPARE(second.call("GET", QStringLiteral("/sandboxes/") + box).status, 200);
        static const QRegularExpression id(QStringLiteral("(key_[a-z2-7]+)"));
        admin(dir.path(),
              {QStringLiteral("keys"), QStringLiteral("revoke"), id.match(out).captured(1)});
        QCOMPARE(second.call("GET", QStringLiteral("/sandboxes/") + box).status, 401);
    }

    // GET /v1/system names the image new sandboxes get and its age, as
    // the manifest in the image folder says; the start-up log warns when
    // it wants an update.
    void systemReportsTheImage() {
        const QString imageDir = sandcastle::EngineConfig::defaults().imageDir;
        auto before = sandcastle::GuestImage::load(imageDir);
        QVERIFY2(before, before ? "" : qPrintable(before.error().message));
        Reply r = http->call("GET", QStringLiteral("/system"));
        auto after = sandcastle::GuestImage::load(imageDir);
        const qint64 now = QDateTime::currentMSecsSinceEpoch();
        QCOMPARE(r.status, 200);
        QCOMPARE(r.json.value("object").toString(), QStringLiteral("system"));
        QVERIFY(!r.json.value("version").toString().isEmpty());
        const QString accel = r.json.value("accelerator").toString();
        QVERIFY2(accel == QLatin1String("kvm") || accel == QLatin1String("tcg"), qPrintable(accel));
        const QJsonObject image = r.json.value("image").toObject();
        // Another suite's image build may move `current` meanwhile.
        const auto &seen =
            image.value("boot_hash").toString() == before->bootHash ? *before : *after;
        QCOMPARE(image.value("boot_hash").toString(), seen.bootHash);
        QCOMPARE(image.value("built_at").toString(),
                 QDateTime::fromMSecsSinceEpoch(seen.builtAt, Qt::UTC).toString(Qt::ISODateWithMs));
        QVERIFY(std::abs(image.value("age_days").toInt() - seen.ageDays(now)) <= 1);
        QCOMPARE(image.value("update_command").toString(),
                 QStringLiteral("sandcastle image update"));
        QCOMPARE(image.value("update_recommended").toBool(), !seen.ageWarning(now).isEmpty());
        QVERIFY2(!r.body.contains(imageDir.toUtf8()), r.body.constData()); // no host paths
        if (!before->ageWarning(now).isEmpty())
            QVERIFY(service->log().contains(QStringLiteral("`sandcastle image update`")));

        Http anonymous(service->base(), {});
        QCOMPARE(anonymous.call("GET", QStringLiteral("/system")).status, 401);
        Reply post = http->call("POST", QStringLiteral("/system"), QByteArray("{}"));
        QCOMPARE(post.status, 405);
        QCOMPARE(post.headers.value("allow"), QByteArray("GET"));
    }

    void logIsNoWriteChannel() {
        // Requests without a valid key are counted, not logged one by one.
        Http wrong(service->base(), QStringLiteral("sc_") + QString(40, QLatin1Char('b')));
        for (int i = 0; i < 30; ++i)
            QCOMPARE(wrong.call("GET", QStringLiteral("/sandboxes?unauth-probe")).status, 401);
        // A path that would forge a log line and colour the terminal.
        const QUrl base(service->base());
        const QByteArray forged =
            "GET /v1/sandboxes/x%1b%5b31mred%0a2026-01-01T00:00:00.000Z%20"
            "info%20forged%E2%80%AEdi%E2%80%A8lo HTTP/1.1\r\nHost: 127.0.0.1:" +
            QByteArray::number(base.port()) + "\r\nAuthorization: Bearer " +
            service->key().toLatin1() + "\r\n\r\n";
        const int status = http->raw(forged).first;
        QVERIFY2(status == 404 || status == 400, qPrintable(QString::number(status)));
        QCOMPARE(http->call("GET", QStringLiteral("/sandboxes?limit=2")).status, 200);
        const QString log = service->log();
        QVERIFY2(!log.contains(QStringLiteral("unauth-probe")), "a refused request was logged");
        // Counted in one or more lines (earlier tests' refusals, a quiet minute).
        static const QRegularExpression counted(
            QStringLiteral("(\\d+) request\\(s\\) without a valid API key refused"));
        int total = 0;
        for (auto it = counted.globalMatch(log); it.hasNext();)
            total += it.next().captured(1).toInt();
        QVERIFY2(total >= 30, qPrintable(QString::number(total)));
        QVERIFY(!log.contains(QChar(0x1b)));
        // Bidirectional overrides and Unicode line separators are escaped too.
        QVERIFY(!log.contains(QChar(0x202e)));
        QVERIFY(!log.contains(QChar(0x2028)));
        QVERIFY2(log.contains(QStringLiteral("forged\\u202edi\\u2028lo")),
                 qPrintable(log.right(2000)));
        QVERIFY(!log.contains(QStringLiteral("\n2026-01-01T00:00:00.000Z info forged")));
        QVERIFY2(log.contains(QStringLiteral("x\\x1b[31mred\\x0a2026-01-01")),
                 qPrintable(log.right(2000)));
    }

    void keysAreHashedAtRest() {
        QFile db(dir.path() + QStringLiteral("/sandcastle.db"));
        QVERIFY(db.open(QIODevice::ReadOnly));
        QByteArray all = db.readAll();
        QFile wal(dir.path() + QStringLiteral("/sandcastle.db-wal"));
        if (wal.open(QIODevice::ReadOnly))
            all += wal.readAll();
        QVERIFY(!all.isEmpty());
        QVERIFY(!all.contains(service->key().toUtf8()));
        QVERIFY(!all.contains(service->key().mid(10).toUtf8()));
    }

    void hostAndOriginAreChecked() {
        const QString port = QUrl(service->base()).port() > 0
                                 ? QString::number(QUrl(service->base()).port())
                                 : QString();
        auto get = [&](const QByteArray &host, const QByteArray &origin) {
            QByteArray req = "GET /v1/sizes HTTP/1.1\r\nHost: " + host +
                             "\r\nAuthorization: Bearer " + service->key().toUtf8() + "\r\n";
            if (!origin.isEmpty())
                req += "Origin: " + origin + "\r\n";
            return http->raw(req + "Connection: close\r\n\r\n").first;
        };
        const QByteArray p = port.toUtf8();
        QCOMPARE(get("127.0.0.1:" + p, {}), 200);
        QCOMPARE(get("localhost:" + p, {}), 200);
        QCOMPARE(get("evil.example:" + p, {}), 403); // DNS rebinding
        QCOMPARE(get("127.0.0.1.nip.io:" + p, {}), 403);
        QCOMPARE(get("127.0.0.1:" + p, "http://evil.example"), 403);
        QCOMPARE(get("127.0.0.1:" + p, "null"), 403);
        QCOMPARE(get("127.0.0.1:" + p, "http://localhost:" + p), 200);
    }

    void execFollowsTheContract() {
        Reply r = exec(box, {{"command", "echo out; echo err >&2; id -un; pwd; exit 3"}});
        QCOMPARE(r.status, 200);
        QCOMPARE(r.json.value("stdout").toString(),
                 QStringLiteral("out\nsandbox\n/home/sandbox\n"));
        QCOMPARE(r.json.value("stderr").toString(), QStringLiteral("err\n"));
        QCOMPARE(r.json.value("exit_code").toInt(), 3);
        QCOMPARE(r.json.value("truncated").toBool(), false);
        QVERIFY(r.json.value("duration_ms").isDouble());

        r = exec(box, {{"command", "pwd; echo $TOKEN"},
                       {"cwd", "/workspace"},
                       {"env", QJsonObject{{"TOKEN", "s3cret-value-123"}}}});
        QCOMPARE(r.json.value("stdout").toString(),
                 QStringLiteral("/workspace\ns3cret-value-123\n"));

        r = exec(box, {{"command", "echo before; sleep 30"}, {"timeout_ms", 1500}});
        QCOMPARE(r.json.value("exit_code").toInt(), 124);
        QCOMPARE(r.json.value("truncated").toBool(), true);
        QCOMPARE(r.json.value("stdout").toString(), QStringLiteral("before\n"));

        r = exec(box, {{"command", "head -c 3000000 /dev/zero | tr '\\0' x"}});
        QCOMPARE(r.json.value("stdout").toString().size(), 1 << 20);
        QCOMPARE(r.json.value("truncated").toBool(), true);
    }

    void envValuesAreNeverStored() {
        // The previous test ran with TOKEN=s3cret-value-123; the record
        // keeps the name, and the value nowhere (not even in previews).
        Reply log = http->call("GET", QStringLiteral("/sandboxes/%1/execs").arg(box));
        QCOMPARE(log.status, 200);
        bool sawName = false;
        for (const QJsonValue &e : log.json.value("data").toArray())
            sawName = sawName || e.toObject().value("env_names").toArray().contains("TOKEN");
        QVERIFY(sawName);
        QVERIFY(!log.body.contains("s3cret-value-123"));
        QByteArray all;
        for (const char *name : {"sandcastle.db", "sandcastle.db-wal", "sandcastle.log"}) {
            QFile f(dir.path() + QLatin1Char('/') + QLatin1String(name));
            if (f.open(QIODevice::ReadOnly))
                all += f.readAll();
        }
        QVERIFY(all.contains("TOKEN"));
        QVERIFY(!all.contains("s3cret-value-123"));
    }

    void badRequestsGetActionableErrors() {
        struct Case {
            QByteArray method;
            QString path;
            QByteArray body;
            int status;
            QString type;
        };
        const QString e = QStringLiteral("/sandboxes/%1/exec").arg(box);
        const QList<Case> cases = {
            {"POST", "/sandboxes", "{not json", 400, "invalid_request"},
            {"POST", "/sandboxes", "[1,2]", 400, "invalid_request"},
            {"POST", "/sandboxes", R"({"size":"small","colour":"red"})", 400, "invalid_request"},
            {"POST", "/sandboxes", R"({"size":7})", 400, "invalid_request"},
            {"POST", "/sandboxes", R"({"size":"huge"})", 400, "invalid_request"},
            {"POST", "/sandboxes", R"({"timeout_minutes":1441})", 400, "invalid_request"},
            {"POST", "/sandboxes", R"({"timeout_minutes":2.5})", 400, "invalid_request"},
            {"POST", e, "{}", 400, "invalid_request"},
            {"POST", e, R"({"command":""})", 400, "invalid_request"},
            {"POST", e, R"({"command":"true","timeout_ms":3600001})", 400, "invalid_request"},
            {"POST", e, R"({"command":"true","env":{"1X":"y"}})", 400, "invalid_request"},
            {"POST", e, R"({"command":"true","env":["A=B"]})", 400, "invalid_request"},
            {"POST", e, R"({"command":"true","cwd":"relative"})", 400, "invalid_request"},
            {"POST", e, R"({"command":"true","cwd":"/nonexistent"})", 404, "not_found"},
            {"GET", "/sandboxes/sbx_aaaaaaaaaaaaaaaaaaaa", {}, 404, "not_found"},
            {"GET", "/sandboxes/../../etc/passwd", {}, 404, "not_found"},
            {"POST", "/sandboxes/sbx_aaaaaaaaaaaaaaaaaaaa/exec", R"({"command":"true"})", 404,
             "not_found"},
            {"GET", "/sandboxes?limit=0", {}, 400, "invalid_request"},
            {"GET", "/sandboxes?limit=101", {}, 400, "invalid_request"},
            {"GET", "/sandboxes?status=zombie", {}, 400, "invalid_request"},
            {"GET", "/nowhere", {}, 404, "not_found"},
            {"PATCH", "/sandboxes", "{}", 405, "method_not_allowed"},
            {"GET",
             QStringLiteral("/sandboxes/%1/files?path=relative").arg(box),
             {},
             400,
             "invalid_request"},
            {"GET",
             QStringLiteral("/sandboxes/%1/files?path=/nope").arg(box),
             {},
             404,
             "not_found"},
            {"GET",
             QStringLiteral("/sandboxes/%1/files?path=/etc/shadow").arg(box),
             {},
             403,
             "forbidden"},
            {"PUT", QStringLiteral("/sandboxes/%1/files?path=/etc/x").arg(box), "x", 403,
             "forbidden"},
            {"POST", QStringLiteral("/sandboxes/%1/extend").arg(box), R"({"additional_minutes":0})",
             400, "invalid_request"},
        };
        for (const Case &c : cases) {
            Reply r = http->call(c.method, c.path, c.body);
            QVERIFY2(r.status == c.status && r.errorType() == c.type,
                     qPrintable(
                         QStringLiteral("%1 %2 %3 -> %4 %5")
                             .arg(QString::fromLatin1(c.method), c.path, QString::fromUtf8(c.body))
                             .arg(r.status)
                             .arg(QString::fromUtf8(r.body))));
            QVERIFY2(r.message().size() > 15, qPrintable(r.message()));
        }
    }

    void filesRoundTripAndLimits() {
        QByteArray data(3 << 20, Qt::Uninitialized);
        for (int i = 0; i < data.size(); ++i)
            data[i] = char((i * 7919) >> 3);
        const QString path =
            QStringLiteral("/sandboxes/%1/files?path=/workspace/deep/dir/blob.bin").arg(box);
        QNetworkReply *put = http->send("PUT", path, data);
        QCOMPARE(Http::wait(put).status, 200);
        Reply got = http->call("GET", path);
        QCOMPARE(got.status, 200);
        QCOMPARE(got.body, data);
        Reply owner = exec(box, {{"command", "stat -c %U /workspace/deep/dir/blob.bin"}});
        QCOMPARE(owner.json.value("stdout").toString(), QStringLiteral("sandbox\n"));

        QByteArray tooBig((100 << 20) + 1, 'x');
        Reply big = Http::wait(http->send(
            "PUT", QStringLiteral("/sandboxes/%1/files?path=/workspace/big").arg(box), tooBig));
        QCOMPARE(big.status, 413);
        QCOMPARE(big.errorType(), QStringLiteral("payload_too_large"));
    }

    void listPaginatesNewestFirst() {
        Reply page = http->call("GET", QStringLiteral("/sandboxes?limit=1"));
        QCOMPARE(page.status, 200);
        QCOMPARE(page.json.value("data").toArray().size(), 1);
        QCOMPARE(page.json.value("has_more").toBool(), true);
        const QString first =
            page.json.value("data").toArray()[0].toObject().value("id").toString();
        QCOMPARE(first, doomed); // created last
        Reply next =
            http->call("GET", QStringLiteral("/sandboxes?limit=3&starting_after=") + first);
        const QJsonArray rest = next.json.value("data").toArray();
        QCOMPARE(rest.size(), 3);
        QCOMPARE(rest[0].toObject().value("id").toString(), other);
        QCOMPARE(rest[1].toObject().value("id").toString(), box);
        QCOMPARE(rest[2].toObject().value("id").toString(), shortBox);
        QCOMPARE(next.json.value("has_more").toBool(), false);
        Reply running = http->call("GET", QStringLiteral("/sandboxes?status=running&limit=100"));
        for (const QJsonValue &v : running.json.value("data").toArray())
            QCOMPARE(v.toObject().value("status").toString(), QStringLiteral("running"));
    }

    void hostFilesArePrivate() {
        auto mode = [](const QString &path) {
            struct stat st {};
            return ::stat(QFile::encodeName(path).constData(), &st) == 0 ? int(st.st_mode & 07777)
                                                                         : -1;
        };
        QCOMPARE(mode(dir.filePath(QStringLiteral("sandcastle.db"))), 0600);
        QCOMPARE(mode(dir.filePath(QStringLiteral("sandcastle.log"))), 0600);
        const QString folder = dir.filePath(QStringLiteral("sandboxes/") + box);
        QCOMPARE(mode(folder), 0711);
        QCOMPARE(mode(folder + QStringLiteral("/disk.qcow2")), 0600);
    }

    void hostFilesAreClosedToOtherUsers() {
        // Trying it as another user takes root (setpriv).
        if (geteuid() != 0)
            QSKIP("needs root to act as another local user");
        const QString folder = dir.filePath(QStringLiteral("sandboxes/") + box);
        // Another local user can neither list a sandbox's folder nor read its disk.
        for (const QStringList &command :
             {QStringList{QStringLiteral("ls"), folder},
              QStringList{QStringLiteral("head"), QStringLiteral("-c1"),
                          folder + QStringLiteral("/disk.qcow2")}}) {
            QProcess p;
            p.start(QStringLiteral("setpriv"),
                    QStringList{QStringLiteral("--reuid=nobody"), QStringLiteral("--regid=nogroup"),
                                QStringLiteral("--clear-groups")} +
                        command);
            QVERIFY(p.waitForFinished(10000));
            QVERIFY2(p.exitCode() != 0, qPrintable(command.join(QLatin1Char(' '))));
        }
    }

    void creatingSaysWhatItWaitsOn() {
        static const QStringList phases = {
            QStringLiteral("waiting for a boot slot"),  QStringLiteral("creating the disk"),
            QStringLiteral("checking the host filter"), QStringLiteral("starting the network"),
            QStringLiteral("starting the VM"),          QStringLiteral("booting the kernel"),
            QStringLiteral("waiting for the agent")};
        QNetworkReply *pending =
            http->send("POST", QStringLiteral("/sandboxes"), R"({"name":"phases"})");
        // Another client watches the list while the create is under way.
        QStringList seen;
        QVERIFY(QTest::qWaitFor(
            [&] {
                Reply list = http->call("GET", QStringLiteral("/sandboxes?status=creating"));
                for (const QJsonValue &v : list.json.value("data").toArray()) {
                    const QString reason = v.toObject().value("status_reason").toString();
                    // Null for a moment, before the first phase is recorded.
                    if (v.toObject().value("name").toString() == QStringLiteral("phases") &&
                        !reason.isEmpty() && (seen.isEmpty() || seen.last() != reason))
                        seen << reason;
                }
                QTest::qWait(50); // phases last hundreds of ms: no need to hammer
                return pending->isFinished();
            },
            300000));
        Reply created = Http::wait(pending);
        QCOMPARE(created.status, 201);
        const QString id = created.json.value("id").toString();
        QCOMPARE(created.json.value("status").toString(), QStringLiteral("running"));
        QVERIFY(created.json.value("status_reason").isNull());
        QVERIFY2(!seen.isEmpty(), "the create was never seen with a reason");
        for (const QString &reason : seen)
            QVERIFY2(phases.contains(reason), qPrintable(seen.join(QStringLiteral(" > "))));
        // The log has one line with every phase's time.
        const QString log = service->log();
        const QRegularExpression line(
            QStringLiteral("created %1 in \\d+ ms: overlay \\d+ ms, host filter \\d+ ms, passt "
                           "\\d+ ms, domain start \\d+ ms, first console line \\d+ ms, agent "
                           "hello \\d+ ms")
                .arg(id));
        QVERIFY2(line.match(log).hasMatch(), qPrintable(log.right(1500)));
        QCOMPARE(http->call("DELETE", QStringLiteral("/sandboxes/") + id).status, 200);
    }

    void longExecBlocksNothingAndDisconnectIsSafe() {
        // A ten-minute command holds its request open...
        QNetworkReply *longOne =
            http->send("POST", QStringLiteral("/sandboxes/%1/exec").arg(box),
                       R"({"command":"touch /tmp/long-runs; sleep 600","timeout_ms":700000})");
        // It runs in the guest (it says so itself)...
        QVERIFY(waitForFile(box, QStringLiteral("/tmp/long-runs"), longOne));
        QVERIFY(!longOne->isFinished());
        // ...while listing and other commands answer.
        QElapsedTimer t;
        t.start();
        QCOMPARE(http->call("GET", QStringLiteral("/sandboxes")).status, 200);
        QCOMPARE(exec(other, {{"command", "echo other"}}).json.value("stdout").toString(),
                 QStringLiteral("other\n"));
        QCOMPARE(exec(box, {{"command", "echo same-box"}}).json.value("stdout").toString(),
                 QStringLiteral("same-box\n"));
        QVERIFY(!longOne->isFinished());
        qInfo() << "list and two execs answered in" << t.elapsed() << "ms while a long exec ran";
        longOne->abort(); // the client goes away mid-exec
        longOne->deleteLater();

        // A command whose client leaves still completes and is recorded.
        // It waits for a file that appears only after its client left, so
        // the client leaves mid-command however fast or slow the machine.
        QNetworkReply *leaving = http->send(
            "POST", QStringLiteral("/sandboxes/%1/exec").arg(box),
            R"({"command":"touch /tmp/leaving-runs; while [ ! -e /tmp/leaving-go ]; do sleep 0.1; done; echo recorded-after-disconnect"})");
        QVERIFY(waitForFile(box, QStringLiteral("/tmp/leaving-runs"), leaving));
        QVERIFY(!leaving->isFinished());
        leaving->abort();
        leaving->deleteLater();
        QCOMPARE(exec(box, {{"command", "touch /tmp/leaving-go"}}).status, 200);
        QVERIFY(QTest::qWaitFor(
            [&] {
                // The polls above are in the log too: look further than a page.
                Reply log =
                    http->call("GET", QStringLiteral("/sandboxes/%1/execs?limit=500").arg(box));
                for (const QJsonValue &v : log.json.value("data").toArray()) {
                    const QJsonObject e = v.toObject();
                    if (e.value("command").toString().contains("recorded-after-disconnect"))
                        return e.value("status").toString() == QLatin1String("finished") &&
                               e.value("stdout_tail").toString() ==
                                   QLatin1String("recorded-after-disconnect\n");
                }
                return false;
            },
            60000));
        QVERIFY(service->running());
        QCOMPARE(exec(box, {{"command", "echo alive"}}).json.value("stdout").toString(),
                 QStringLiteral("alive\n"));
    }

    void extendMovesExpiryWithinADay() {
        Reply before = http->call("GET", QStringLiteral("/sandboxes/") + box);
        Reply r = http->call("POST", QStringLiteral("/sandboxes/%1/extend").arg(box),
                             QJsonObject{{"additional_minutes", 30}});
        QCOMPARE(r.status, 200);
        const auto was =
            QDateTime::fromString(before.json.value("expires_at").toString(), Qt::ISODateWithMs);
        const auto now =
            QDateTime::fromString(r.json.value("expires_at").toString(), Qt::ISODateWithMs);
        QCOMPARE(was.secsTo(now), 1800);
        QCOMPARE(r.json.value("timeout_minutes").toInt(), 90);
        Reply tooFar = http->call("POST", QStringLiteral("/sandboxes/%1/extend").arg(box),
                                  QJsonObject{{"additional_minutes", 1440}});
        QCOMPARE(tooFar.status, 400);
        QVERIFY(tooFar.message().contains(QLatin1String("24 hours")));
    }

    void idempotencyKeyReturnsTheSameSandbox() {
        const QList<std::pair<QByteArray, QByteArray>> key{{"Idempotency-Key", "run-42"}};
        const QByteArray body = R"({"size":"small","name":"idem"})";
        // Two at once: the second waits for the first's boot.
        QNetworkReply *a = http->send("POST", QStringLiteral("/sandboxes"), body, key);
        QNetworkReply *b = http->send("POST", QStringLiteral("/sandboxes"), body, key);
        Reply ra = Http::wait(a), rb = Http::wait(b);
        QCOMPARE(ra.status, 201);
        QCOMPARE(rb.status, 201);
        const QString id = ra.json.value("id").toString();
        QCOMPARE(rb.json.value("id").toString(), id);
        QVERIFY(ra.headers.contains("idempotent-replayed") ||
                rb.headers.contains("idempotent-replayed"));
        Reply again = http->call("POST", QStringLiteral("/sandboxes"), body, key);
        QCOMPARE(again.json.value("id").toString(), id);
        Reply other = http->call("POST", QStringLiteral("/sandboxes"),
                                 QByteArray(R"({"size":"medium"})"), key);
        QCOMPARE(other.status, 409);
        // Delete is idempotent.
        Reply d1 = http->call("DELETE", QStringLiteral("/sandboxes/") + id);
        QCOMPARE(d1.status, 200);
        QCOMPARE(d1.json.value("status").toString(), QStringLiteral("destroyed"));
        Reply d2 = http->call("DELETE", QStringLiteral("/sandboxes/") + id);
        QCOMPARE(d2.status, 200);
        QCOMPARE(d2.json.value("ended_at"), d1.json.value("ended_at"));
        QCOMPARE(qemuProcessesWith(id), 0);
        QVERIFY(!QDir(dir.path() + QStringLiteral("/sandboxes/") + id).exists());
        Reply late = exec(id, {{"command", "true"}});
        QCOMPARE(late.status, 409);
        QCOMPARE(late.errorType(), QStringLiteral("conflict"));
    }

    void seedPythonWorkspaceLoop() {
        int rc = -1;
        const QString out =
            runClient(QStringLiteral("python3"),
                      {QStringLiteral(SOURCE_DIR "/tests/clients/workspace_loop.py")}, &rc);
        qInfo().noquote() << out;
        QCOMPARE(rc, 0);
        const QJsonObject r = QJsonDocument::fromJson(out.toUtf8()).object();
        QCOMPARE(r.value("final_exit").toInt(), 0);
        QCOMPARE(r.value("stdout").toString(), QStringLiteral("sum=6\n"));
        QCOMPARE(r.value("attempts").toInt(), 2); // the bug, then the fix
        QCOMPARE(r.value("failed_exits").toArray().size(), 1);
        QCOMPARE(r.value("after_delete").toString(), QStringLiteral("destroyed"));
    }

    void seedCurlFlow() {
        int rc = -1;
        const QString out =
            runClient(QStringLiteral("bash"),
                      {QStringLiteral(SOURCE_DIR "/tests/clients/curl_flow.sh")}, &rc);
        qInfo().noquote() << out;
        QCOMPARE(rc, 0);
        QVERIFY(out.contains(QLatin1String("sandbox=sbx_")));
        QVERIFY(out.contains(QLatin1String("step0=0")));
        QVERIFY(out.contains(QLatin1String("step2=0 task 42")));
        QVERIFY(out.contains(QLatin1String("deleted=destroyed")));
    }

    void generatedHostileRequests() {
        int rc = -1;
        const QString out =
            runClient(QStringLiteral("python3"),
                      {QStringLiteral(SOURCE_DIR "/tests/clients/fuzz.py"), service->base(),
                       service->key(), box, QStringLiteral("1200")},
                      &rc);
        qInfo().noquote() << out;
        QCOMPARE(rc, 0);
        QVERIFY(service->running());
        QCOMPARE(http->call("GET", QStringLiteral("/sandboxes/") + box).status, 200);
    }

    void shortSandboxExpires() {
        // Created first with timeout_minutes 1: by now its time is nearly up.
        QVERIFY(waitForStatus(shortBox, QStringLiteral("expired"), 120000));
        Reply r = http->call("GET", QStringLiteral("/sandboxes/") + shortBox);
        QVERIFY(r.json.value("status_reason").toString().contains(QLatin1String("expired")));
        QCOMPARE(qemuProcessesWith(shortBox), 0);
        QCOMPARE(exec(shortBox, {{"command", "true"}}).status, 409);
    }

    void killedServiceRestartsClean() {
        // Work in flight when the service dies: a command in the shared
        // sandbox, a create still booting; a finished command before it.
        QCOMPARE(exec(box, {{"command", "echo finished-before-kill > /workspace/mark"}}).status,
                 200);
        const int vmsBefore = qemuProcessesWith(dir.path());
        QNetworkReply *running = http->send("POST", QStringLiteral("/sandboxes/%1/exec").arg(box),
                                            R"({"command":"sleep 300"})");
        QNetworkReply *booting = http->send("POST", QStringLiteral("/sandboxes"), QByteArray("{}"));
        // Killed once the new VM's QEMU runs, before its agent answers.
        QVERIFY(QTest::qWaitFor([&] { return qemuProcessesWith(dir.path()) > vmsBefore; }, 60000));
        service->kill();
        running->abort();
        booting->abort();

        // A VM the record knows nothing of: its row is gone (a restored
        // backup, a hand edit); the VM itself still runs.
        const QString stray = other;
        {
            QSqlDatabase db = QSqlDatabase::addDatabase(QStringLiteral("QSQLITE"), "raw");
            db.setDatabaseName(dir.path() + QStringLiteral("/sandcastle.db"));
            QVERIFY(db.open());
            // And one whose lifetime ends while nothing runs to see it.
            QVERIFY(QSqlQuery(db).exec(
                QStringLiteral("UPDATE sandboxes SET expires_at = %1 WHERE id = '%2'")
                    .arg(QDateTime::currentMSecsSinceEpoch() - 1000)
                    .arg(doomed)));
            for (const char *table : {"execs", "events", "ledger", "sandboxes"})
                QVERIFY(QSqlQuery(db).exec(
                    QStringLiteral("DELETE FROM %1 WHERE %2 = '%3'")
                        .arg(QLatin1String(table),
                             QLatin1String(qstrcmp(table, "sandboxes") ? "sandbox_id" : "id"),
                             stray)));
            db.close();
        }
        QSqlDatabase::removeDatabase("raw");
        QCOMPARE(qemuProcessesWith(stray), 1);

        QVERIFY(service->start());
        http = std::make_unique<Http>(service->base(), service->key());
        // The shared sandbox was taken over and keeps its state.
        Reply r = exec(box, {{"command", "cat /workspace/mark"}});
        QCOMPARE(r.status, 200);
        QCOMPARE(r.json.value("stdout").toString(), QStringLiteral("finished-before-kill\n"));
        // Expired while the service was down: destroyed at the start.
        QVERIFY(waitForStatus(doomed, QStringLiteral("expired"), 60000));
        QCOMPARE(qemuProcessesWith(doomed), 0);
        // The stray VM is gone; the half-created sandbox ended in error.
        QVERIFY(QTest::qWaitFor([&] { return qemuProcessesWith(stray) == 0; }, 60000));
        QVERIFY(!QDir(dir.path() + QStringLiteral("/sandboxes/") + stray).exists());
        Reply list = http->call("GET", QStringLiteral("/sandboxes?status=error&limit=100"));
        QVERIFY(list.json.value("data").toArray().size() >= 1);
        // Every QEMU process and folder belongs to a live record.
        Reply live = http->call("GET", QStringLiteral("/sandboxes?status=running&limit=100"));
        QStringList liveIds;
        for (const QJsonValue &v : live.json.value("data").toArray())
            liveIds << v.toObject().value("id").toString();
        QCOMPARE(qemuProcessesWith(dir.path()), liveIds.size());
        for (const QString &folder : QDir(dir.path() + QStringLiteral("/sandboxes"))
                                         .entryList(QDir::Dirs | QDir::NoDotAndDotDot))
            QVERIFY2(liveIds.contains(folder), qPrintable(folder));
        // Exec records: the finished one kept, the cut one marked.
        Reply log = http->call("GET", QStringLiteral("/sandboxes/%1/execs?limit=500").arg(box));
        bool finished = false, interrupted = false;
        for (const QJsonValue &v : log.json.value("data").toArray()) {
            const QJsonObject e = v.toObject();
            if (e.value("command").toString().contains("finished-before-kill"))
                finished = e.value("status").toString() == QLatin1String("finished");
            if (e.value("command").toString() == QLatin1String("sleep 300"))
                interrupted = e.value("status").toString() == QLatin1String("interrupted");
        }
        QVERIFY(finished);
        QVERIFY(interrupted);

        // A VM killed from outside is noticed and recorded as an error.
        const int pid = qemuPidWith(box);
        QVERIFY(pid > 0);
        ::kill(pid, SIGKILL);
        QVERIFY(waitForStatus(box, QStringLiteral("error"), 60000));
        QVERIFY(http->call("GET", QStringLiteral("/sandboxes/") + box)
                    .json.value("status_reason")
                    .toString()
                    .contains(QLatin1String("unexpectedly")));
        QVERIFY(!QDir(dir.path() + QStringLiteral("/sandboxes/") + box).exists());
    }

    void cleanupTestCase() {
        if (service)
            service->destroyLiveAndTerminate();
        // A QEMU or passt left after every sandbox was destroyed is a leak:
        // it fails the suite, and is killed so that later suites do not
        // share the machine with it.
        const QStringList left = reapLeftovers(dir.path());
        QVERIFY2(left.isEmpty(), qPrintable(left.join(QLatin1Char('\n'))));
    }
};

QTEST_GUILESS_MAIN(TestApiVm)
#include "tst_api_vm.moc"
