// The engine against real VMs (emulated where there is no KVM). One sandbox
// is booted for the suite and shared by the tests that do not test
// isolation; isolation and destroy use a second one.
#include "guest/guestchannel.h"
#include "sandbox/engine.h"
#include "support/service.h"

#include <QCryptographicHash>
#include <QDir>
#include <QMutex>
#include <QRandomGenerator>
#include <QRegularExpression>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>

#include <sys/stat.h>
#include <unistd.h>

using namespace sandcastle;
using Kind = EngineError::Kind;

namespace {

template <typename T> T await(QFuture<T> f, int timeoutMs = 300000) {
    if (!QTest::qWaitFor([&] { return f.isFinished(); }, timeoutMs))
        qFatal("timed out waiting for the engine");
    return f.result();
}

// The engine's log lines, kept for the tests that check what it says. The
// many "is slow" lines (the suite sets a 1 ms threshold) are not echoed.
QStringList logLines; // under logMutex: pool threads log too
QMutex logMutex;
QtMessageHandler echo = nullptr;
void keepLog(QtMsgType type, const QMessageLogContext &context, const QString &message) {
    QMutexLocker lock(&logMutex);
    logLines << message;
    if (!message.contains(QStringLiteral(" is slow: ")))
        echo(type, context, message);
}

QStringList linesWith(const QString &needle) {
    QMutexLocker lock(&logMutex);
    return logLines.filter(needle);
}

/// The parent of a process, from /proc/<pid>/stat (0 when it is gone).
int parentOf(int pid) {
    QFile f(QStringLiteral("/proc/%1/stat").arg(pid));
    if (!f.open(QIODevice::ReadOnly))
        return 0;
    const QByteArray stat = f.readAll();
    return stat.mid(stat.lastIndexOf(')') + 2).split(' ').value(1).toInt();
}

/// Zombie children of ours named like QEMU or passt ("pid (name) ppid").
QStringList zombies() {
    QStringList out;
    for (const QString &pid : QDir(QStringLiteral("/proc")).entryList(QDir::Dirs)) {
        QFile f(QStringLiteral("/proc/%1/stat").arg(pid));
        if (!pid.toInt() || !f.open(QIODevice::ReadOnly))
            continue;
        const QByteArray stat = f.readAll();
        const int open = stat.indexOf('('), close = stat.lastIndexOf(')');
        const QByteArray name = stat.mid(open + 1, close - open - 1);
        const QList<QByteArray> rest = stat.mid(close + 2).split(' ');
        if (rest.size() > 1 && rest[0] == "Z" && rest[1].toInt() == getpid() &&
            (name.startsWith("qemu-system") || name.startsWith("passt")))
            out << QStringLiteral("%1 (%2) parent %3")
                       .arg(pid, QString::fromLatin1(name), QString::fromLatin1(rest[1]));
    }
    return out;
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
        echo = qInstallMessageHandler(keepLog);
        EngineConfig config = EngineConfig::defaults();
        config.dataDir = dataDir.path();
        config.createWarnMs = 1; // every create here is "slow": the warning is tested
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
        // Killed by its timeout: not before it, and before the sleep it was
        // in could end ("never" would follow). How soon after the timeout
        // is a question of speed, for a benchmark, not for a test.
        QCOMPARE(r.stdoutData, QByteArray("before\n"));
        QVERIFY2(r.durationMs >= 2000, qPrintable(QString::number(r.durationMs)));
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

    void consoleLogIsCapped() {
        // A guest that floods its serial console (simulated here by
        // appending to the file QEMU writes) fills no more than ~2 MiB.
        const QString log = engine->sandbox(box)->consoleLog;
        QFile f(log);
        QVERIFY(f.open(QIODevice::Append));
        const QByteArray line(1023, 'x');
        for (int i = 0; i < 4096; ++i)
            f.write(line + '\n');
        f.write("the last line\n");
        f.close();
        auto onDisk = [&] {
            struct stat st {};
            ::stat(QFile::encodeName(log).constData(), &st);
            return qint64(st.st_blocks) * 512;
        };
        QVERIFY(onDisk() > 4 * Engine::kConsoleKeepBytes);
        engine->capConsoleLogs();
        QVERIFY2(onDisk() <= 2 * Engine::kConsoleKeepBytes, qPrintable(QString::number(onDisk())));
        QVERIFY(f.open(QIODevice::ReadOnly));
        QVERIFY(f.size() >= Engine::kConsoleKeepBytes);
        f.seek(f.size() - 14);
        QCOMPARE(f.read(14), QByteArray("the last line\n"));
        f.close();
        // The sandbox still answers.
        QCOMPARE(run(QStringLiteral("echo fine")).stdoutData, QByteArray("fine\n"));
    }

    void createReportsItsPhases() {
        // The shared sandbox's create (initTestCase): one line with every phase.
        const QString created = linesWith(QStringLiteral("created ") + box).value(0);
        for (const char *phase : {"overlay", "host filter", "passt", "domain start",
                                  "first console line", "agent hello"})
            QVERIFY2(created.contains(QStringLiteral(", %1 ").arg(QLatin1String(phase))) ||
                         created.contains(QStringLiteral(": %1 ").arg(QLatin1String(phase))),
                     qPrintable(QStringLiteral("no %1 in: %2").arg(QLatin1String(phase), created)));
        // A create past its threshold names the phase it waits on.
        const QString slow =
            logLines.filter(QStringLiteral("create ") + box + QStringLiteral(" is slow")).value(0);
        QVERIFY2(
            QRegularExpression(QStringLiteral("waiting on (queue|overlay|host filter|passt|domain "
                                              "start|first console line|agent hello) for"))
                .match(slow)
                .hasMatch(),
            qPrintable(slow));

        // While it runs, the create says what it waits on, in phase order.
        QSignalSpy progress(engine, &Engine::createProgress);
        auto other = await(
            engine->create({QStringLiteral("small"), QStringLiteral("phases"), QString(), false}));
        QVERIFY2(other.has_value(), qPrintable(other ? QString() : other.error().message));
        const QStringList order = {
            QStringLiteral("creating the disk"), QStringLiteral("starting the VM"),
            QStringLiteral("booting the kernel"), QStringLiteral("waiting for the agent")};
        int last = -1;
        QStringList seen;
        for (const auto &args : std::as_const(progress)) {
            QCOMPARE(args.at(0).toString(), other->id);
            const int at = int(order.indexOf(args.at(1).toString()));
            seen << args.at(1).toString();
            QVERIFY2(at > last, qPrintable(seen.join(QStringLiteral(" > "))));
            last = at;
        }
        QVERIFY2(seen.size() >= 2, qPrintable(seen.join(QStringLiteral(" > "))));
        QVERIFY(await(engine->destroy(other->id)).has_value());
    }

    void nodeIs22AndNpmInstallsATarball() {
        ExecResult r = run(QStringLiteral("node --version && npm --version"));
        QCOMPARE(r.exitCode, 0);
        QVERIFY2(r.stdoutData.startsWith("v22."), r.stdoutData.constData());
        // A package made and installed here (no registry needed).
        r = run(QStringLiteral(
                    "set -e; mkdir -p /tmp/pkg /tmp/app; cd /tmp/pkg; "
                    "printf '{\"name\":\"sc-local\",\"version\":\"1.0.0\",\"main\":\"i.js\"}' "
                    "> package.json; echo 'module.exports = 6 * 7' > i.js; npm pack --silent; "
                    "cd /tmp/app; npm install --offline --no-audit --no-fund --silent "
                    "/tmp/pkg/sc-local-1.0.0.tgz; node -e 'console.log(require(\"sc-local\"))'"),
                QString(), {}, 180000);
        QVERIFY2(r.exitCode == 0, r.stderrData.constData());
        QVERIFY2(r.stdoutData.endsWith("42\n"), r.stdoutData.constData());
    }

    void qemuIsProbedOnceAndLeavesNoZombies() {
        // libvirt's capability cache, written by the first create.
        const QDir caps(dataDir.filePath(QStringLiteral("libvirt/cache/qemu/capabilities")));
        const QFileInfoList files = caps.entryInfoList({QStringLiteral("*.xml")}, QDir::Files);
        QCOMPARE(files.size(), 1);
        auto stamp = [&] {
            struct stat st {};
            ::stat(QFile::encodeName(files[0].filePath()).constData(), &st);
            return QPair<qint64, qint64>(qint64(st.st_ino), qint64(st.st_mtim.tv_sec) * 1000000000 +
                                                                st.st_mtim.tv_nsec);
        };
        const auto before = stamp();
        // The running VMs' QEMU processes are ours to reap, not PID 1's.
        const int qemu = testing::qemuPidWith(Engine::domainNameFor(box));
        QVERIFY(qemu > 0);
        QCOMPARE(parentOf(qemu), int(getpid()));
        // 20 creates and destroys, four at a time, half with a network (passt).
        for (int round = 0; round < 5; ++round) {
            QList<QFuture<Result<SandboxInfo>>> creates;
            for (int i = 0; i < 4; ++i)
                creates << engine->create(
                    {QStringLiteral("small"), QStringLiteral("churn"), QString(), i % 2 == 0});
            for (auto &c : creates) {
                auto info = await(c);
                QVERIFY2(info.has_value(), qPrintable(info ? QString() : info.error().message));
                QVERIFY(await(engine->destroy(info->id)).has_value());
            }
        }
        QVERIFY2(stamp() == before, "libvirt rewrote its capabilities cache: it probed QEMU again");
        QCOMPARE(linesWith(QStringLiteral("probed QEMU's capabilities again")), QStringList());
        // Every QEMU and passt that ended was reaped (by us, their adopter).
        QTRY_VERIFY2_WITH_TIMEOUT(zombies().isEmpty(),
                                  qPrintable(zombies().join(QStringLiteral("; "))), 10000);
    }

    void cleanupTestCase() {
        const bool destroyed = box.isEmpty() || await(engine->destroy(box)).has_value();
        // A QEMU or passt of this data dir still running now is a leak: it
        // fails the suite, and is killed so that later suites do not share
        // the machine with it.
        const QStringList left = testing::reapLeftovers(dataDir.path());
        QVERIFY(destroyed);
        QVERIFY2(left.isEmpty(), qPrintable(left.join(QLatin1Char('\n'))));
    }
};

QTEST_GUILESS_MAIN(TestEngineVm)
#include "tst_engine_vm.moc"
