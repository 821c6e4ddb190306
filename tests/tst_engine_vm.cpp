// The engine against real VMs (emulated where there is no KVM). One sandbox
// is booted for the suite and shared by the tests that do not test
// isolation; isolation and destroy use a second one.
#include "guest/guestchannel.h"
#include "sandbox/engine.h"
#include "support/service.h"

#include <QCryptographicHash>
#include <QDir>
#include <QRandomGenerator>
#include <QTemporaryDir>
#include <QTest>

using namespace sandcastle;
using Kind = EngineError::Kind;

namespace {

template <typename T> T await(QFuture<T> f, int timeoutMs = 300000) {
    if (!QTest::qWaitFor([&] { return f.isFinished(); }, timeoutMs))
        qFatal("timed out waiting for the engine");
    return f.result();
}

} // namespace

class TestEngineVm : public QObject {
    Q_OBJECT
private:
    QTemporaryDir dataDir{QStringLiteral("/tmp/sc-test-XXXXXX")};
    Engine *engine = nullptr;
    QString box; // the shared sandbox

    ExecResult run(const QString &command, const QString &cwd = {},
                   QList<QPair<QString, QString>> env = {}, int timeoutMs = 60000) {
        auto r = await(engine->exec(box, {command, cwd, env, timeoutMs}));
        if (!r)
            qFatal("exec failed: %s", qPrintable(r.error().message));
        return *r;
    }

private slots:
    void initTestCase() {
        EngineConfig config = EngineConfig::defaults();
        config.dataDir = dataDir.path();
        engine = new Engine(config, this);
        auto opened = engine->open();
        QVERIFY2(opened.has_value(), qPrintable(opened ? QString() : opened.error().message));
        qInfo("VMs: %s", qPrintable(engine->accelReason()));
        auto created = await(engine->create({QStringLiteral("small"), QStringLiteral("shared")}));
        QVERIFY2(created.has_value(), qPrintable(created ? QString() : created.error().message));
        box = created->id;
        QVERIFY(Engine::isValidId(box));
        qInfo("booted %s in %lld ms", qPrintable(box), created->bootMs);
    }

    void echoAndExitCodes() {
        ExecResult r = run(QStringLiteral("echo hello"));
        QCOMPARE(r.stdoutData, QByteArray("hello\n"));
        QCOMPARE(r.exitCode, 0);
        QVERIFY(!r.truncated);
        QCOMPARE(run(QStringLiteral("exit 3")).exitCode, 3);
        QCOMPARE(run(QStringLiteral("false")).exitCode, 1);
        QCOMPARE(run(QStringLiteral("kill -TERM $$")).exitCode, 128 + 15);
    }

    void runsAsSandboxWithoutStdin() {
        ExecResult r = run(QStringLiteral("id -un; id -u; cat; echo \"[$?]\""));
        QCOMPARE(r.stdoutData, QByteArray("sandbox\n1000\n[0]\n"));
    }

    void stderrIsSeparate() {
        ExecResult r = run(QStringLiteral("echo out; echo oops >&2; exit 2"));
        QCOMPARE(r.stdoutData, QByteArray("out\n"));
        QCOMPARE(r.stderrData, QByteArray("oops\n"));
        QCOMPARE(r.exitCode, 2);
    }

    void envIsPerCommand() {
        ExecResult r = run(QStringLiteral("echo \"$TASK_ID:$SECRET\""), {},
                           {{QStringLiteral("TASK_ID"), QStringLiteral("42")},
                            {QStringLiteral("SECRET"), QStringLiteral("it's \"quoted\" $x")}});
        QCOMPARE(r.stdoutData, QByteArray("42:it's \"quoted\" $x\n"));
        QCOMPARE(run(QStringLiteral("echo \"[$TASK_ID]\"")).stdoutData, QByteArray("[]\n"));
        QCOMPARE(run(QStringLiteral("echo $HOME")).stdoutData, QByteArray("/home/sandbox\n"));
    }

    void cwd() {
        QCOMPARE(run(QStringLiteral("pwd")).stdoutData, QByteArray("/home/sandbox\n"));
        QCOMPARE(run(QStringLiteral("pwd"), QStringLiteral("/workspace")).stdoutData,
                 QByteArray("/workspace\n"));
        auto missing =
            await(engine->exec(box, {QStringLiteral("pwd"), QStringLiteral("/no/such/dir")}));
        QVERIFY(!missing);
        QCOMPARE(int(missing.error().kind), int(Kind::NotFound));
        QVERIFY(missing.error().message.contains(QStringLiteral("/no/such/dir")));
    }

    void shellSyntax() {
        QCOMPARE(run(QStringLiteral("echo a b c | wc -w")).stdoutData.trimmed(), QByteArray("3"));
        QCOMPARE(
            run(QStringLiteral("echo x > /tmp/r && cat < /tmp/r && echo y >> /tmp/r && cat /tmp/r"))
                .stdoutData,
            QByteArray("x\nx\ny\n"));
        ExecResult heredoc =
            run(QStringLiteral("cat > /workspace/task.py <<'PY'\nprint(6 * 7)\nPY\n"
                               "python3 /workspace/task.py"));
        QCOMPARE(heredoc.stdoutData, QByteArray("42\n"));
        QCOMPARE(heredoc.exitCode, 0);
    }

    void badRequestsAreRefused() {
        auto empty = await(engine->exec(box, {QStringLiteral("  ")}));
        QVERIFY(!empty);
        QCOMPARE(int(empty.error().kind), int(Kind::InvalidArgument));
        auto badEnv =
            await(engine->exec(box, {QStringLiteral("true"), {}, {{QStringLiteral("A=B"), {}}}}));
        QVERIFY(!badEnv);
        QCOMPARE(int(badEnv.error().kind), int(Kind::InvalidArgument));
        auto badTimeout = await(engine->exec(box, {QStringLiteral("true"), {}, {}, 0}));
        QVERIFY(!badTimeout);
        auto unknown = await(
            engine->exec(QStringLiteral("sbx_aaaaaaaaaaaaaaaaaaaa"), {QStringLiteral("true")}));
        QVERIFY(!unknown);
        QCOMPARE(int(unknown.error().kind), int(Kind::NotFound));
    }

    void twoExecsAtOnce() {
        // The slow one starts first; the quick one must not wait for it.
        auto slow = engine->exec(box, {QStringLiteral("sleep 3; echo slow")});
        auto quick = engine->exec(box, {QStringLiteral("echo quick")});
        auto q = await(quick);
        QVERIFY(q.has_value());
        QCOMPARE(q->stdoutData, QByteArray("quick\n"));
        QVERIFY2(!slow.isFinished(), "the quick exec waited for the slow one");
        auto s = await(slow);
        QVERIFY(s.has_value());
        QCOMPARE(s->stdoutData, QByteArray("slow\n"));
    }

    void timeoutKillsTheGroup() {
        ExecResult r =
            run(QStringLiteral("echo before; sleep 60 & sleep 60; echo never"), {}, {}, 2000);
        QCOMPARE(r.exitCode, 124);
        QVERIFY(r.timedOut);
        QVERIFY(r.truncated);
        QCOMPARE(r.stdoutData, QByteArray("before\n"));
        // Killed close to its timeout (generous upper bound: a shared, emulated machine).
        QVERIFY2(r.durationMs >= 2000 && r.durationMs < 15000,
                 qPrintable(QString::number(r.durationMs)));
        // The whole process group went, the background sleep included.
        QCOMPARE(run(QStringLiteral("pgrep -c -x sleep || true")).stdoutData.trimmed(),
                 QByteArray("0"));
    }

    void outputIsCapped() {
        ExecResult r = run(QStringLiteral("head -c 5242880 /dev/zero | tr '\\0' a; echo done >&2"));
        QCOMPARE(r.stdoutData.size(), qsizetype(1 << 20));
        QVERIFY(r.stdoutData.count('a') == r.stdoutData.size());
        QVERIFY(r.truncated);
        QCOMPARE(r.stdoutBytes, qint64(5 << 20));
        QCOMPARE(r.stderrData, QByteArray("done\n"));
        QCOMPARE(r.exitCode, 0);
    }

    void backgroundProcessOutlivesTheExec() {
        ExecResult r = run(QStringLiteral("nohup sleep 300 >/dev/null 2>&1 & echo started"));
        QCOMPARE(r.stdoutData, QByteArray("started\n"));
        QCOMPARE(run(QStringLiteral("pgrep -c -x sleep")).stdoutData.trimmed(), QByteArray("1"));
        run(QStringLiteral("pkill -x sleep; true"));
    }

    void binaryFileRoundTrip() {
        QByteArray data(10 << 20, Qt::Uninitialized);
        QRandomGenerator gen(7);
        gen.fillRange(reinterpret_cast<quint32 *>(data.data()), data.size() / 4);
        const QString path = QStringLiteral("/workspace/deep/new/dir/blob.bin");
        auto w = await(engine->writeFile(box, path, data));
        QVERIFY2(w.has_value(), qPrintable(w ? QString() : w.error().message));
        auto back = await(engine->readFile(box, path));
        QVERIFY(back.has_value());
        QCOMPARE(back->size(), data.size());
        QVERIFY(*back == data);
        // The guest sees the same bytes, in a file that belongs to sandbox.
        ExecResult r =
            run(QStringLiteral("sha256sum %1 | cut -d' ' -f1; stat -c %U:%G %1 /workspace/deep")
                    .arg(path));
        QCOMPARE(r.stdoutData, QCryptographicHash::hash(data, QCryptographicHash::Sha256).toHex() +
                                   "\nsandbox:sandbox\nsandbox:sandbox\n");
    }

    void fileErrors() {
        auto denied = await(engine->writeFile(box, QStringLiteral("/etc/evil"), "x"));
        QVERIFY(!denied);
        QCOMPARE(int(denied.error().kind), int(Kind::PermissionDenied));
        auto shadow = await(engine->readFile(box, QStringLiteral("/etc/shadow")));
        QVERIFY(!shadow);
        QCOMPARE(int(shadow.error().kind), int(Kind::PermissionDenied));
        auto missing = await(engine->readFile(box, QStringLiteral("/home/sandbox/nope")));
        QVERIFY(!missing);
        QCOMPARE(int(missing.error().kind), int(Kind::NotFound));
        auto relative = await(engine->readFile(box, QStringLiteral("relative/path")));
        QVERIFY(!relative);
        QCOMPARE(int(relative.error().kind), int(Kind::InvalidArgument));
        auto dir = await(engine->readFile(box, QStringLiteral("/workspace")));
        QVERIFY(!dir);
        QCOMPARE(int(dir.error().kind), int(Kind::InvalidArgument));
        QCOMPARE(run(QStringLiteral("test -e /etc/evil; echo $?")).stdoutData, QByteArray("1\n"));
    }

    void stateIsKeptBetweenExecs() {
        run(QStringLiteral(
            "echo remembered > ~/state && mkdir -p ~/proj && cd ~/proj && git init -q"));
        QCOMPARE(run(QStringLiteral("cat ~/state")).stdoutData, QByteArray("remembered\n"));
        QCOMPARE(run(QStringLiteral("test -d proj/.git && echo yes")).stdoutData,
                 QByteArray("yes\n"));
    }

    void agentSurvivesGarbageAndReconnects() {
        GuestChannel *channel = engine->channel(box);
        QVERIFY(channel);
        channel->sendRaw(QByteArray("\x00\x01 this is not a frame \xff\xfe", 26));
        channel->sendRaw(QByteArray(4096, 'S'));
        QVERIFY(await(channel->ping()).has_value());
        run(QStringLiteral("nohup sleep 300 >/dev/null 2>&1 &"));

        channel->disconnectFromAgent();
        QVERIFY(!channel->isConnected());
        auto again = await(channel->connectToAgent(30000));
        QVERIFY2(again.has_value(), qPrintable(again ? QString() : again.error().message));
        QCOMPARE(run(QStringLiteral("echo back; pgrep -c -x sleep")).stdoutData,
                 QByteArray("back\n1\n"));
        run(QStringLiteral("pkill -x sleep; true"));
    }

    void twoSandboxesAreIsolatedAndDestroyLeavesNothing() {
        auto second = await(engine->create({QStringLiteral("small"), QStringLiteral("second")}));
        QVERIFY2(second.has_value(), qPrintable(second ? QString() : second.error().message));
        const QString other = second->id;
        QVERIFY(await(engine->writeFile(box, QStringLiteral("/workspace/mine"), "A")).has_value());
        auto r = await(engine->exec(
            other, {QStringLiteral("ls /workspace; test -e /workspace/mine; echo $?")}));
        QVERIFY(r.has_value());
        QCOMPARE(r->stdoutData, QByteArray("1\n"));

        const QString domain = Engine::domainNameFor(other);
        QCOMPARE(testing::qemuProcessesWith(domain), 1);
        const QString dir = dataDir.filePath(QStringLiteral("sandboxes/") + other);
        QVERIFY(QFile::exists(dir + QStringLiteral("/disk.qcow2")));

        auto destroyed = await(engine->destroy(other));
        QVERIFY2(destroyed.has_value(),
                 qPrintable(destroyed ? QString() : destroyed.error().message));
        QCOMPARE(testing::qemuProcessesWith(domain), 0);
        QVERIFY(!QFile::exists(dir));
        auto domains = engine->hypervisor()->listDomains();
        QVERIFY(domains.has_value());
        for (const auto &d : *domains)
            QVERIFY(d.name != domain);
        QVERIFY(!engine->sandbox(other).has_value());
        // Again: harmless. And the shared sandbox did not notice.
        QVERIFY(await(engine->destroy(other)).has_value());
        QCOMPARE(run(QStringLiteral("cat /workspace/mine")).stdoutData, QByteArray("A"));
        auto gone = await(engine->exec(other, {QStringLiteral("true")}));
        QVERIFY(!gone);
        QCOMPARE(int(gone.error().kind), int(Kind::NotFound));
    }

    void cleanupTestCase() {
        if (!box.isEmpty()) {
            QVERIFY(await(engine->destroy(box)).has_value());
            QCOMPARE(testing::qemuProcessesWith(Engine::domainNameFor(box)), 0);
        }
    }
};

QTEST_GUILESS_MAIN(TestEngineVm)
#include "tst_engine_vm.moc"
