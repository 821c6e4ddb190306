// The desktop window end to end, in one process as `sandcastle serve` runs
// it: the real store, engine (a real VM, emulated here), sandbox service
// and REST server, and the real MainWindow on the offscreen platform. What
// happens over HTTP must show in the window without polling; what the
// window does must be what REST reports. One sandbox is shared by every
// case; screenshots of the main views go to BUILD_DIR/screenshots.
#include "apiserver.h"
#include "format.h"
#include "mainwindow.h"
#include "sandboxmodel.h"
#include "service/sandboxservice.h"
#include "support/service.h"
#include "trayicon.h"

#include <QApplication>
#include <QChartView>
#include <QComboBox>
#include <QLabel>
#include <QLineEdit>
#include <QLineSeries>
#include <QMessageBox>
#include <QPlainTextEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QSpinBox>
#include <QStatusBar>
#include <QTabWidget>
#include <QTableView>
#include <QTableWidget>
#include <QTemporaryDir>

#include <algorithm>

using namespace sandcastle;
using namespace testing;
using Col = ui::SandboxModel::Column;

class TestGuiVm : public QObject {
    Q_OBJECT
private:
    QTemporaryDir dir{QStringLiteral("/tmp/sc-gui-XXXXXX")};
    std::unique_ptr<Store> store;
    std::unique_ptr<Engine> engine;
    std::unique_ptr<SandboxService> service;
    std::unique_ptr<api::ApiServer> server;
    std::unique_ptr<ui::MainWindow> window;
    std::unique_ptr<Http> http;
    QString base;
    QString accountId;
    QString box; // the shared sandbox, created over REST

    template <typename T> T *find(const QString &name) {
        T *w = window->findChild<T *>(name);
        if (!w)
            qFatal("no widget %s", qPrintable(name));
        return w;
    }
    QTableView *table() { return find<QTableView>(QStringLiteral("sandboxTable")); }
    QAbstractItemModel *model() { return table()->model(); }
    int rowOf(const QString &id) {
        for (int r = 0; r < model()->rowCount(); ++r) {
            if (model()->index(r, Col::Id).data().toString() == id)
                return r;
        }
        return -1;
    }
    QString cell(const QString &id, int column) {
        return model()->index(rowOf(id), column).data().toString();
    }
    void showTab(const QString &title) {
        auto *tabs = find<QTabWidget>(QStringLiteral("tabs"));
        for (int i = 0; i < tabs->count(); ++i) {
            if (tabs->tabText(i) == title)
                tabs->setCurrentIndex(i);
        }
        QCOMPARE(tabs->tabText(tabs->currentIndex()), title);
    }
    void screenshot(const QString &name) {
        QDir().mkpath(QStringLiteral(BUILD_DIR "/screenshots"));
        QVERIFY(window->grab().save(QStringLiteral(BUILD_DIR "/screenshots/gui-%1.png").arg(name)));
    }
    /// The modal dialog called `name` once it is open.
    QMessageBox *dialog(const QString &name) {
        QMessageBox *box = nullptr;
        (void)QTest::qWaitFor(
            [&] {
                box = window->findChild<QMessageBox *>(name);
                return box && box->isVisible();
            },
            5000);
        return box && box->isVisible() ? box : nullptr;
    }
    QJsonObject sandboxOverRest(const QString &id) {
        Reply r = http->call("GET", QStringLiteral("/sandboxes/") + id);
        return r.json;
    }
    /// The time-left column shows the time from now to the record's
    /// expiry. "Now" is taken on both sides of reading the cell: the cell
    /// shows one of the two texts, even when a second or a minute turns
    /// between them.
    void timeLeftIsTheRecords(const QString &id) {
        const auto rec = store->sandbox(id);
        QVERIFY(rec);
        const qint64 before = nowMs();
        const QString shown = cell(id, Col::TimeLeft);
        const qint64 after = nowMs();
        const QString early = ui::durationText(rec->expiresAt - before);
        const QString late = ui::durationText(rec->expiresAt - after);
        QVERIFY2(shown == early || shown == late,
                 qPrintable(QStringLiteral("shown '%1', the record says '%2' to '%3'")
                                .arg(shown, early, late)));
    }
    template <typename T> static T await(QFuture<T> f, int ms = 300000) {
        if (!QTest::qWaitFor([&] { return f.isFinished(); }, ms))
            qFatal("future did not finish in %d ms", ms);
        return f.result();
    }

private slots:
    void initTestCase() {
        QVERIFY(dir.isValid());
        EngineConfig config = EngineConfig::defaults();
        config.dataDir = dir.path();
        auto opened = Store::open(dir.path() + QStringLiteral("/sandcastle.db"));
        QVERIFY2(opened, qPrintable(opened ? QString() : opened.error().message));
        store = std::move(*opened);
        auto account = store->createAccount(QStringLiteral("default"), 10'000'000);
        QVERIFY(account);
        accountId = account->id;
        auto key = store->createKey(accountId, QStringLiteral("test"));
        QVERIFY(key);
        engine = std::make_unique<Engine>(config);
        auto ok = engine->open();
        QVERIFY2(ok, qPrintable(ok ? QString() : ok.error().message));
        service = std::make_unique<SandboxService>(engine.get(), store.get(), Settings());
        QVERIFY(await(service->start(), 60000));
        server = std::make_unique<api::ApiServer>(service.get());
        auto port = server->start(QHostAddress::LocalHost, 0);
        QVERIFY(port);
        base = QStringLiteral("http://127.0.0.1:%1/v1").arg(*port);
        http = std::make_unique<Http>(base, key->second);
        window = std::make_unique<ui::MainWindow>(service.get());
        window->setApiUrl(base);
        window->show();
        QVERIFY(QTest::qWaitForWindowExposed(window.get()));
    }

    void statusBarSaysHowVmsRun() {
        const QString accel = find<QLabel>(QStringLiteral("accelStatus"))->text();
        if (engine->accelerated()) {
            QVERIFY2(accel.contains(QLatin1String("KVM")), qPrintable(accel));
        } else {
            QVERIFY2(accel.contains(QLatin1String("emulation")), qPrintable(accel));
            QVERIFY2(accel.contains(QLatin1String("slow")), qPrintable(accel));
        }
        QVERIFY(find<QLabel>(QStringLiteral("apiStatus"))->text().contains(base));
        QCOMPARE(find<QLabel>(QStringLiteral("liveStatus"))->text(),
                 QStringLiteral("0 live sandbox(es)"));
        QVERIFY(!ui::appIcon().isNull()); // the SVGs are compiled in
        QVERIFY(!ui::appIcon().pixmap(32, 32).isNull());
        // The tray's icon carries the live count (offscreen has no tray to show it in).
        QVERIFY(ui::TrayIcon::badged(0).pixmap(64, 64).toImage() !=
                ui::TrayIcon::badged(3).pixmap(64, 64).toImage());
        QVERIFY(ui::TrayIcon::badged(3).pixmap(64, 64).toImage() !=
                ui::TrayIcon::badged(4).pixmap(64, 64).toImage());
    }

    void restCreateShowsBeforeItAnswers() {
        QCOMPARE(model()->rowCount(), 0);
        // What the window shows is noted as it changes, not sampled: a
        // check made after a fixed time would pass or fail by the speed of
        // the machine. The slots go when `scope` does.
        QObject scope;
        QNetworkReply *pending = nullptr;
        int announced = 0;
        bool pendingOnAnnounce = false;
        QString nameOnAnnounce, statusOnAnnounce;
        QStringList statusesBeforeAnswer;
        // The model was connected to the service when the window was made,
        // before this: when this slot runs, the model has had the signal.
        connect(service.get(), &SandboxService::sandboxChanged, &scope, [&] {
            if (announced++ > 0)
                return;
            pendingOnAnnounce = pending && !pending->isFinished();
            if (model()->rowCount() == 1) {
                nameOnAnnounce = model()->index(0, Col::Name).data().toString();
                statusOnAnnounce = model()->index(0, Col::Status).data().toString();
            }
        });
        const auto noteStatus = [&] {
            if (pending && !pending->isFinished() && model()->rowCount() > 0)
                statusesBeforeAnswer << model()->index(0, Col::Status).data().toString();
        };
        connect(model(), &QAbstractItemModel::rowsInserted, &scope, noteStatus);
        connect(model(), &QAbstractItemModel::dataChanged, &scope, noteStatus);
        pending = http->send(
            "POST", QStringLiteral("/sandboxes"),
            QJsonDocument(QJsonObject{{QStringLiteral("name"), QStringLiteral("agent-1")},
                                      {QStringLiteral("timeout_minutes"), 30}})
                .toJson(QJsonDocument::Compact));
        // The row comes from the service's signal when the create is
        // recorded, long before the VM has booted and REST answers: it is
        // in the model when the service announces the record, while the
        // request is still pending.
        QVERIFY(QTest::qWaitFor([&] { return announced > 0 || pending->isFinished(); }, 600000));
        QVERIFY2(announced > 0, "the service never announced the new sandbox");
        QVERIFY2(pendingOnAnnounce, "REST answered before the service announced the create");
        QCOMPARE(nameOnAnnounce, QStringLiteral("agent-1"));
        QVERIFY2(statusOnAnnounce.startsWith(QLatin1String("creating")),
                 qPrintable(statusOnAnnounce));
        Reply created = Http::wait(pending);
        QCOMPARE(created.status, 201);
        box = created.json.value(QStringLiteral("id")).toString();
        QCOMPARE(model()->index(0, Col::Id).data().toString(), box);
        // The status column said what the create waited on, before REST answered.
        QVERIFY2(
            std::any_of(statusesBeforeAnswer.cbegin(), statusesBeforeAnswer.cend(),
                        [](const QString &s) { return s.startsWith(QLatin1String("creating: ")); }),
            qPrintable(statusesBeforeAnswer.join(QStringLiteral(" > "))));
        // Already running: the service announces it before it answers REST.
        QCOMPARE(cell(box, Col::Status), QStringLiteral("running"));
        QVERIFY(cell(box, Col::Size).startsWith(QLatin1String("small")));
        // 30 minutes, counting down from the record's expiry.
        QCOMPARE(store->sandbox(box)->timeoutMinutes, 30);
        timeLeftIsTheRecords(box);
        QVERIFY(cell(box, Col::Spend).startsWith(QLatin1Char('$')));
        QTRY_COMPARE(find<QLabel>(QStringLiteral("liveStatus"))->text(),
                     QStringLiteral("1 live sandbox(es)"));
        table()->selectRow(rowOf(box));
        screenshot(QStringLiteral("sandboxes"));
    }

    void commandBoxRunsAndIsLogged() {
        table()->selectRow(rowOf(box));
        QVERIFY(find<QLabel>(QStringLiteral("detailTitle"))->text().contains(box));
        // Names and messages come from agents and guests: shown as text, never as markup.
        for (const char *name : {"detailTitle", "detailMessage"})
            QCOMPARE(find<QLabel>(QLatin1String(name))->textFormat(), Qt::PlainText);
        auto *command = find<QLineEdit>(QStringLiteral("commandBox"));
        QVERIFY(command->isEnabled());
        const QString line = QStringLiteral("echo hello-from-the-window; pwd");
        command->setText(line);
        find<QPushButton>(QStringLiteral("runButton"))->click();
        auto *output = find<QPlainTextEdit>(QStringLiteral("commandOutput"));
        QTRY_VERIFY_WITH_TIMEOUT(output->toPlainText().contains(QLatin1String("[exit 0")), 60000);
        QVERIFY(
            output->toPlainText().contains(QLatin1String("hello-from-the-window\n/home/sandbox")));

        auto *log = find<QTableWidget>(QStringLiteral("commandLog"));
        QTRY_COMPARE(log->rowCount(), 1);
        QCOMPARE(log->item(0, 1)->text(), line);
        QCOMPARE(log->item(0, 2)->text(), QStringLiteral("/home/sandbox"));
        QCOMPARE(log->item(0, 4)->text(), QStringLiteral("0"));
        QVERIFY(log->item(0, 6)->text().contains(QLatin1String("hello-from-the-window")));
        // Recorded like any other exec: REST's command log has it.
        Reply execs = http->call("GET", QStringLiteral("/sandboxes/%1/execs").arg(box));
        QCOMPARE(execs.status, 200);
        QCOMPARE(execs.json.value("data").toArray().first().toObject().value("command").toString(),
                 line);

        // An agent's exec over REST shows up in the log; its env value does not.
        const QString secret = QStringLiteral("s3cret-value-4711");
        Reply ran = http->call(
            "POST", QStringLiteral("/sandboxes/%1/exec").arg(box),
            QJsonObject{
                {QStringLiteral("command"), QStringLiteral("echo token=$API_TOKEN; exit 3")},
                {QStringLiteral("env"), QJsonObject{{QStringLiteral("API_TOKEN"), secret}}}});
        QCOMPARE(ran.status, 200);
        QVERIFY(ran.json.value("stdout").toString().contains(secret)); // the caller gets it
        QTRY_COMPARE(log->rowCount(), 2);
        QCOMPARE(log->item(0, 3)->text(), QStringLiteral("API_TOKEN"));
        QCOMPARE(log->item(0, 4)->text(), QStringLiteral("3"));
        QVERIFY(log->item(0, 6)->text().contains(QLatin1String("token=")));
        for (int r = 0; r < log->rowCount(); ++r) {
            for (int c = 0; c < log->columnCount(); ++c) {
                QVERIFY(!log->item(r, c)->text().contains(secret));
                QVERIFY(!log->item(r, c)->toolTip().contains(secret));
            }
        }

        // The serial console of the running VM is tailed (the boot is quiet:
        // the initramfs and the agent say hello).
        auto *console = find<QPlainTextEdit>(QStringLiteral("consoleLog"));
        QTRY_VERIFY_WITH_TIMEOUT(
            console->toPlainText().contains(QLatin1String("sandcastle-agent: ready")), 5000);
        screenshot(QStringLiteral("detail"));
    }

    void extendFromTheWindow() {
        table()->selectRow(rowOf(box));
        const QJsonObject before = sandboxOverRest(box);
        QCOMPARE(before.value("timeout_minutes").toInt(), 30);
        find<QSpinBox>(QStringLiteral("extendMinutes"))->setValue(10);
        find<QPushButton>(QStringLiteral("extendButton"))->click();
        const QJsonObject after = sandboxOverRest(box);
        QCOMPARE(after.value("timeout_minutes").toInt(), 40);
        const auto expires = [](const QJsonObject &o) {
            return QDateTime::fromString(o.value("expires_at").toString(), Qt::ISODateWithMs);
        };
        QCOMPARE(expires(before).secsTo(expires(after)), 600);
        QVERIFY(find<QLabel>(QStringLiteral("detailMessage"))
                    ->text()
                    .contains(QLatin1String("Extended by 10")));
        QCOMPARE(store->sandbox(box)->timeoutMinutes, 40);
        timeLeftIsTheRecords(box);
    }

    void spendShowsCreditChartAndAddsCredit() {
        showTab(QStringLiteral("Spend"));
        service->tick(); // bill the running sandbox now, as the timer would
        auto *credit = find<QLabel>(QStringLiteral("creditLabel"));
        const auto balance = [&] { return store->account(accountId)->balanceMicros; };
        QVERIFY(balance() < 10'000'000);
        QTRY_COMPARE(credit->text(), QStringLiteral("Credit left: ") + ui::moneyText(balance()));

        auto *chartView = find<QChartView>(QStringLiteral("spendChart"));
        auto *series = qobject_cast<QLineSeries *>(chartView->chart()->series().value(0));
        QVERIFY(series);
        QTRY_VERIFY(series->count() >= 2);
        QCOMPARE(series->points().last().y(), double(10'000'000 - balance()) / 1e6);
        auto *perSandbox = find<QTableWidget>(QStringLiteral("spendPerSandbox"));
        QVERIFY(perSandbox->rowCount() >= 1);
        QVERIFY(perSandbox->item(0, 0)->text().contains(box));
        auto *rates = find<QTableWidget>(QStringLiteral("rates"));
        QCOMPARE(rates->rowCount(), 3);
        QCOMPARE(rates->item(0, 3)->text(), QStringLiteral("$0.0500"));

        auto *amount = find<QLineEdit>(QStringLiteral("creditAmount"));
        auto *message = find<QLabel>(QStringLiteral("creditMessage"));
        const qint64 was = balance();
        amount->setText(QStringLiteral("lots"));
        find<QPushButton>(QStringLiteral("addCreditButton"))->click();
        QVERIFY2(message->text().contains(QLatin1String("is not an amount")),
                 qPrintable(message->text()));
        QCOMPARE(balance(), was);
        amount->setText(QStringLiteral("2.5"));
        find<QPushButton>(QStringLiteral("addCreditButton"))->click();
        QVERIFY(balance() >= was + 2'500'000 - 1000); // metering may run in between
        QCOMPARE(credit->text(), QStringLiteral("Credit left: ") + ui::moneyText(balance()));
        Reply account = http->call("GET", QStringLiteral("/account"));
        QCOMPARE(account.status, 200);
        screenshot(QStringLiteral("spend"));
    }

    void keysAreCreatedOnceAndRevoked() {
        showTab(QStringLiteral("Keys"));
        find<QLineEdit>(QStringLiteral("keyName"))->setText(QStringLiteral("from-window"));
        find<QPushButton>(QStringLiteral("createKeyButton"))->click();
        const QString secret = find<QLineEdit>(QStringLiteral("keySecret"))->text();
        QVERIFY2(!keyIn(secret).isEmpty(), qPrintable(secret));
        Http withNewKey(base, secret);
        QCOMPARE(withNewKey.call("GET", QStringLiteral("/sandboxes/") + box).status, 200);

        static const QRegularExpression idRe(QStringLiteral("(key_[a-z2-7]+)"));
        const QString id =
            idRe.match(find<QLabel>(QStringLiteral("keysMessage"))->text()).captured(1);
        QVERIFY(!id.isEmpty());
        auto *keys = find<QTableWidget>(QStringLiteral("keysTable"));
        int row = -1;
        for (int r = 0; r < keys->rowCount(); ++r) {
            if (keys->item(r, 0)->text() == id)
                row = r;
            // Secrets are never listed, only their prefixes.
            for (int c = 0; c < keys->columnCount(); ++c)
                QVERIFY(!keys->item(r, c)->text().contains(secret));
        }
        QVERIFY(row >= 0);
        screenshot(QStringLiteral("keys"));
        keys->selectRow(row);
        find<QPushButton>(QStringLiteral("revokeKeyButton"))->click();
        QCOMPARE(withNewKey.call("GET", QStringLiteral("/sandboxes/") + box).status, 401);
        QCOMPARE(http->call("GET", QStringLiteral("/sandboxes/") + box).status, 200);
    }

    void settingsRefuseInvalidValues() {
        showTab(QStringLiteral("Settings"));
        auto *cap = find<QLineEdit>(QStringLiteral("setting_max_live_sandboxes"));
        auto *size = find<QLineEdit>(QStringLiteral("setting_default_size"));
        auto *timeout = find<QLineEdit>(QStringLiteral("setting_default_timeout_minutes"));
        auto *port = find<QLineEdit>(QStringLiteral("setting_port"));
        auto *message = find<QLabel>(QStringLiteral("settingsMessage"));
        auto *save = find<QPushButton>(QStringLiteral("saveSettingsButton"));
        QCOMPARE(cap->text(), QStringLiteral("20"));

        // One bad value: nothing is stored, not even the good one beside it.
        size->setText(QStringLiteral("medium"));
        cap->setText(QStringLiteral("lots"));
        save->click();
        QVERIFY2(
            message->text().contains(QLatin1String("max_live_sandboxes must be a whole number")),
            qPrintable(message->text()));
        QVERIFY(!store->settings().contains(QStringLiteral("max_live_sandboxes")));
        QVERIFY(!store->settings().contains(QStringLiteral("default_size")));
        screenshot(QStringLiteral("settings-refused"));

        cap->setText(QStringLiteral("20"));
        size->setText(QStringLiteral("small"));
        port->setText(QStringLiteral("70000"));
        save->click();
        QVERIFY2(message->text().contains(QLatin1String("port must be")),
                 qPrintable(message->text()));
        QVERIFY(!store->settings().contains(QStringLiteral("port")));

        port->setText(QStringLiteral("8765"));
        timeout->setText(QStringLiteral("45"));
        save->click();
        QVERIFY2(message->text().startsWith(QLatin1String("Saved default_timeout_minutes")),
                 qPrintable(message->text()));
        QCOMPARE(store->settings().value(QStringLiteral("default_timeout_minutes")),
                 QStringLiteral("45"));
        QCOMPARE(store->settings().size(), 1);
    }

    void guestImageRebuildReportsProgress() {
        showTab(QStringLiteral("Settings"));
        auto *progress = find<QProgressBar>(QStringLiteral("imageProgress"));
        auto *status = find<QLabel>(QStringLiteral("imageStatus"));
        find<QPushButton>(QStringLiteral("rebuildImageButton"))->click();
        // The guest_image fixture built it, so this finds the cached layers.
        QTRY_COMPARE_WITH_TIMEOUT(progress->value(), 100, 120000);
        QTRY_VERIFY2_WITH_TIMEOUT(status->text().contains(QLatin1String("image is ready")),
                                  qPrintable(status->text()), 10000);
        QVERIFY(find<QPushButton>(QStringLiteral("rebuildImageButton"))->isEnabled());
        // The current image's build date and age, as plain text.
        auto *age = find<QLabel>(QStringLiteral("imageAge"));
        QCOMPARE(age->textFormat(), Qt::PlainText);
        QVERIFY2(age->text().startsWith(QLatin1String("Current image: built ")),
                 qPrintable(age->text()));
        QVERIFY(age->text().contains(QLatin1String("sandcastle image update")));
        screenshot(QStringLiteral("settings"));
    }

    void closingAsksAndKeepsSandboxes() {
        showTab(QStringLiteral("Sandboxes"));
        window->close();
        QMessageBox *ask = dialog(QStringLiteral("confirmClose"));
        QVERIFY(ask);
        QVERIFY(ask->text().contains(QLatin1String("1 sandbox(es) still run")));
        QVERIFY(window->isVisible()); // nothing happens before the answer
        ask->findChild<QPushButton *>(QStringLiteral("keepRunning"))->click();
        QTRY_VERIFY(!window->isVisible());
        QCOMPARE(sandboxOverRest(box).value("status").toString(), QStringLiteral("running"));
        window->show();
        QVERIFY(QTest::qWaitForWindowExposed(window.get()));
    }

    void destroyFromTheWindow() {
        showTab(QStringLiteral("Sandboxes"));
        table()->selectRow(rowOf(box));
        find<QPushButton>(QStringLiteral("destroyButton"))->click();
        QMessageBox *confirm = dialog(QStringLiteral("confirmDestroy"));
        QVERIFY(confirm);
        QVERIFY(confirm->text().contains(box));
        QCOMPARE(sandboxOverRest(box).value("status").toString(), QStringLiteral("running"));
        confirm->button(QMessageBox::Yes)->click();
        QTRY_COMPARE_WITH_TIMEOUT(sandboxOverRest(box).value("status").toString(),
                                  QStringLiteral("destroyed"), 60000);
        // Gone from the live filter, listed as destroyed under "all".
        QTRY_COMPARE(rowOf(box), -1);
        QTRY_COMPARE(find<QLabel>(QStringLiteral("liveStatus"))->text(),
                     QStringLiteral("0 live sandbox(es)"));
        QCOMPARE(qemuProcessesWith(box), 0);
        auto *filter = find<QComboBox>(QStringLiteral("sandboxFilter"));
        filter->setCurrentIndex(filter->findText(QStringLiteral("All")));
        QVERIFY(rowOf(box) >= 0);
        QCOMPARE(cell(box, Col::Status), QStringLiteral("destroyed"));
        QCOMPARE(cell(box, Col::TimeLeft), QStringLiteral("-"));
        screenshot(QStringLiteral("sandboxes-all"));
    }

    void cleanupTestCase() {
        if (service) {
            for (const SandboxRecord &r : store->liveSandboxes().value_or(QList<SandboxRecord>()))
                await(service->destroy(r.accountId, r.id), 60000);
        }
        window.reset();
        server.reset();
        service.reset();
        engine.reset();
        // Every sandbox was destroyed: a QEMU or passt still running is a
        // leak and fails the suite; it is killed all the same, so that it
        // does not burden the suites after this one.
        const QStringList left = reapLeftovers(dir.path());
        QVERIFY2(left.isEmpty(), qPrintable(left.join(QLatin1Char('\n'))));
    }
};

int main(int argc, char **argv) {
    // Offscreen unless told otherwise: the suite runs without a display.
    if (qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM"))
        qputenv("QT_QPA_PLATFORM", "offscreen");
    QApplication app(argc, argv);
    TestGuiVm test;
    return QTest::qExec(&test, argc, argv);
}

#include "tst_gui_vm.moc"
