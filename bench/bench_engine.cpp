// Engine benchmark: run by hand, prints figures (never a pass/fail test).
//
//   build/bench/bench_engine [--boots N] [--execs N]
//
// Everything is measured side by side in one run so ratios hold on a noisy
// shared machine: the bare-QEMU boot floor is interleaved with engine
// creates, and qemu-guest-agent's guest-exec runs in the same guest as our
// own exec path.
#include "../tests/support/processes.h"
#include "guest/guestchannel.h"
#include "hypervisor/domainspec.h"
#include "sandbox/engine.h"
#include "support.h"

#include <QCommandLineParser>
#include <QCoreApplication>
#include <QDir>
#include <QElapsedTimer>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLocalSocket>
#include <QProcess>
#include <QThread>

#include <algorithm>
#include <cstdio>

using namespace sandcastle;
using bench::await;
using bench::Stats;
using bench::stats;

namespace {

template <typename T> T orDie(Result<T> r, const char *what) {
    if (!r) {
        fprintf(stderr, "bench: %s failed: %s\n", what, qPrintable(r.error().message));
        exit(1);
    }
    return std::move(*r);
}

void orDie(Result<void> r, const char *what) {
    if (!r) {
        fprintf(stderr, "bench: %s failed: %s\n", what, qPrintable(r.error().message));
        exit(1);
    }
}

/// VmRSS or VmHWM of a process, in KiB.
qint64 procStatusKiB(qint64 pid, const char *field) {
    QFile f(QStringLiteral("/proc/%1/status").arg(pid));
    if (!f.open(QIODevice::ReadOnly))
        return -1;
    for (const QByteArray &line : f.readAll().split('\n')) {
        if (line.startsWith(field))
            return line.mid(qstrlen(field)).trimmed().split(' ').first().toLongLong();
    }
    return -1;
}

/// Bare QEMU, same kernel, initramfs, machine and accelerator as a sandbox,
/// timed from process start to the initramfs's first line on the console.
double bareQemuBootMs(const QJsonObject &image, bool kvm) {
    QProcess qemu;
    qemu.setProcessChannelMode(QProcess::MergedChannels);
    QElapsedTimer clock;
    clock.start();
    qemu.start(QStringLiteral("qemu-system-x86_64"),
               {QStringLiteral("-M"),          QStringLiteral("q35"),
                QStringLiteral("-accel"),      kvm ? QStringLiteral("kvm") : QStringLiteral("tcg"),
                QStringLiteral("-m"),          QStringLiteral("1024"),
                QStringLiteral("-smp"),        QStringLiteral("1"),
                QStringLiteral("-nodefaults"), QStringLiteral("-no-user-config"),
                QStringLiteral("-display"),    QStringLiteral("none"),
                QStringLiteral("-serial"),     QStringLiteral("stdio"),
                QStringLiteral("-kernel"),     image.value(QStringLiteral("kernel")).toString(),
                QStringLiteral("-initrd"),     image.value(QStringLiteral("initrd")).toString(),
                QStringLiteral("-append"),     guestKernelCmdline(kvm)});
    QByteArray seen;
    double ms = -1;
    while (qemu.waitForReadyRead(60000)) {
        seen += qemu.readAll();
        if (seen.contains("sandcastle-initramfs: start")) {
            ms = clock.nsecsElapsed() / 1e6;
            break;
        }
    }
    qemu.kill();
    qemu.waitForFinished();
    return ms;
}

/// qemu-guest-agent over its virtio-serial socket: guest-exec of /bin/true,
/// then guest-exec-status polled every millisecond until it has exited.
class QgaClient {
public:
    bool open(const QString &path) {
        for (int i = 0; i < 300 && sock_.state() != QLocalSocket::ConnectedState; ++i) {
            sock_.connectToServer(path);
            if (!sock_.waitForConnected(1000))
                QThread::msleep(100);
        }
        // guest-sync until qemu-ga answers (it starts during boot).
        for (int i = 0; i < 600; ++i) {
            QJsonObject r = call(
                QStringLiteral("{\"execute\":\"guest-sync\",\"arguments\":{\"id\":%1}}").arg(i),
                500);
            if (r.value(QStringLiteral("return")).toInt(-1) == i)
                return true;
        }
        return false;
    }
    QJsonObject call(const QString &json, int timeoutMs = 10000) {
        sock_.write(json.toUtf8() + '\n');
        sock_.flush();
        QElapsedTimer t;
        t.start();
        while (t.elapsed() < timeoutMs) {
            int nl = buf_.indexOf('\n');
            if (nl >= 0) {
                QByteArray line = buf_.left(nl);
                buf_.remove(0, nl + 1);
                QJsonObject o = QJsonDocument::fromJson(line).object();
                if (!o.isEmpty())
                    return o;
                continue;
            }
            if (sock_.waitForReadyRead(timeoutMs))
                buf_ += sock_.readAll();
        }
        return {};
    }
    double execTrueMs() {
        QElapsedTimer t;
        t.start();
        QJsonObject r = call(QStringLiteral("{\"execute\":\"guest-exec\",\"arguments\":{\"path\":"
                                            "\"/bin/true\",\"capture-output\":true}}"));
        int pid = r.value(QStringLiteral("return")).toObject().value(QStringLiteral("pid")).toInt();
        for (;;) {
            QJsonObject s = call(
                QStringLiteral("{\"execute\":\"guest-exec-status\",\"arguments\":{\"pid\":%1}}")
                    .arg(pid));
            if (s.value(QStringLiteral("return"))
                    .toObject()
                    .value(QStringLiteral("exited"))
                    .toBool())
                break;
            QThread::usleep(1000);
        }
        return t.nsecsElapsed() / 1e6;
    }

private:
    QLocalSocket sock_;
    QByteArray buf_;
};

} // namespace

int main(int argc, char **argv) {
    QCoreApplication app(argc, argv);
    QCommandLineParser parser;
    parser.setApplicationDescription(
        QStringLiteral("Sandcastle engine benchmark (prints figures)."));
    parser.addHelpOption();
    QCommandLineOption boots(QStringLiteral("boots"), QStringLiteral("Cold boots of each kind."),
                             QStringLiteral("n"), QStringLiteral("5"));
    QCommandLineOption execs(QStringLiteral("execs"), QStringLiteral("Exec round trips."),
                             QStringLiteral("n"), QStringLiteral("200"));
    parser.addOptions({boots, execs});
    parser.process(app);
    const int nBoots = parser.value(boots).toInt();
    const int nExecs = parser.value(execs).toInt();

    // A data dir of its own: the benchmark never touches the user's sandboxes.
    qputenv("SANDCASTLE_BENCH_QGA", "1");
    EngineConfig config = EngineConfig::defaults();
    config.dataDir = QStringLiteral("/tmp/sc-bench-%1").arg(QCoreApplication::applicationPid());
    Engine engine(config);
    orDie(engine.open(), "open");
    QFile manifestFile(config.imageDir + QStringLiteral("/current/manifest.json"));
    manifestFile.open(QIODevice::ReadOnly);
    const QJsonObject image = QJsonDocument::fromJson(manifestFile.readAll()).object();
    const bool kvm = engine.accelerated();
    printf("Sandcastle engine benchmark: %s, %d CPUs\n", kvm ? "KVM" : "emulated (TCG)",
           QThread::idealThreadCount());

    // 1. Cold boots, interleaved with the bare-QEMU floor: with a network
    // (passt, guest rules, addresses) and without one.
    QList<double> floorMs, createMs, offlineMs;
    for (int i = 0; i < nBoots; ++i) {
        floorMs << bareQemuBootMs(image, kvm);
        for (bool internet : {true, false}) {
            QElapsedTimer t;
            t.start();
            CreateOptions options;
            options.internet = internet;
            SandboxInfo box = orDie(await(engine.create(options)), "create");
            (internet ? createMs : offlineMs) << t.nsecsElapsed() / 1e6;
            orDie(await(engine.destroy(box.id)), "destroy");
        }
    }
    Stats fl = stats(floorMs), cr = stats(createMs), off = stats(offlineMs);
    printf("\ncold boot, %d runs each (median / min)\n", nBoots);
    printf("  bare qemu to first userspace line   %8.0f / %6.0f ms\n", fl.median, fl.min);
    printf("  engine create -> agent ready        %8.0f / %6.0f ms\n", cr.median, cr.min);
    printf("  the same, network \"none\"           %8.0f / %6.0f ms\n", off.median, off.min);
    printf("  ratio create / floor (medians)      %8.2f\n", cr.median / fl.median);
    printf("  ratio internet / none (medians)     %8.2f\n", cr.median / off.median);

    // 2. One sandbox for the rest: exec round trips, ours and qemu-ga's.
    SandboxInfo box = orDie(await(engine.create({})), "create");
    const qint64 qemu = testing::qemuPidWith(box.domainName);
    const qint64 idleRss = procStatusKiB(qemu, "VmRSS:");
    auto exec = [&](const QString &cmd, qint64 cap = kOutputCapBytes) {
        return orDie(await(engine.exec(box.id, {cmd, {}, {}, 600000, cap})), "exec");
    };
    exec(QStringLiteral("true")); // warm the page cache
    QList<double> trueMs, binTrueMs, pingMs, qgaMs;
    for (int i = 0; i < nExecs; ++i) {
        QElapsedTimer t;
        t.start();
        exec(QStringLiteral("true"));
        trueMs << t.nsecsElapsed() / 1e6;
    }
    for (int i = 0; i < nExecs / 2; ++i) {
        QElapsedTimer t;
        t.start();
        exec(QStringLiteral("/bin/true"));
        binTrueMs << t.nsecsElapsed() / 1e6;
        t.restart();
        orDie(await(engine.channel(box.id)->ping()), "ping");
        pingMs << t.nsecsElapsed() / 1e6;
    }
    QgaClient qga;
    const bool haveQga = qga.open(config.dataDir + QStringLiteral("/sandboxes/") + box.id +
                                  QStringLiteral("/qga.sock"));
    for (int i = 0; haveQga && i < nExecs / 2; ++i)
        qgaMs << qga.execTrueMs();
    Stats tr = stats(trueMs), bt = stats(binTrueMs), pg = stats(pingMs), qg = stats(qgaMs);
    printf("\nexec round trip (median / p95)\n");
    printf("  protocol ping                        %7.2f / %6.2f ms  (%lld runs)\n", pg.median,
           pg.p95, qsizetype(pingMs.size()));
    printf("  exec `true` (sh -c, builtin)         %7.1f / %6.1f ms  (%lld runs)\n", tr.median,
           tr.p95, qsizetype(trueMs.size()));
    printf("  exec `/bin/true` (sh -c + exec)      %7.1f / %6.1f ms  (%lld runs)\n", bt.median,
           bt.p95, qsizetype(binTrueMs.size()));
    if (haveQga) {
        printf("  qemu-ga guest-exec /bin/true + poll  %7.1f / %6.1f ms  (%lld runs)\n", qg.median,
               qg.p95, qsizetype(qgaMs.size()));
        printf("  ratio exec `true` / guest-exec       %7.2f\n", tr.median / qg.median);
    } else {
        printf("  qemu-ga did not answer: no comparison\n");
    }

    // 3. Output: throughput, and memory staying flat for 100 MiB.
    const qint64 self = QCoreApplication::applicationPid();
    printf("\nsmall sandbox (guest memory %d MiB): QEMU RSS %lld MiB idle after boot, %lld MiB "
           "after the execs above\n",
           box.size.memoryMiB, idleRss / 1024, procStatusKiB(qemu, "VmRSS:") / 1024);
    {
        QElapsedTimer t;
        t.start();
        ExecResult r = exec(QStringLiteral("head -c 10485760 /dev/zero"), 16 << 20);
        double s = t.nsecsElapsed() / 1e9;
        printf("\noutput: 10 MiB command, all of it returned: %.2f s, %.1f MiB/s (%lld bytes)\n", s,
               10 / s, qsizetype(r.stdoutData.size()));
    }
    qint64 hostBefore = procStatusKiB(self, "VmRSS:"), qemuBefore = procStatusKiB(qemu, "VmRSS:");
    QByteArray agentBefore =
        exec(QStringLiteral("grep VmHWM /proc/1/status")).stdoutData.simplified();
    QElapsedTimer t;
    t.start();
    ExecResult big = exec(QStringLiteral("head -c 104857600 /dev/zero"));
    double bigS = t.nsecsElapsed() / 1e9;
    qint64 hostAfter = procStatusKiB(self, "VmRSS:"), qemuAfter = procStatusKiB(qemu, "VmRSS:");
    QByteArray agentAfter =
        exec(QStringLiteral("grep VmHWM /proc/1/status")).stdoutData.simplified();
    printf("output: 100 MiB command with the 1 MiB cap: %.2f s, kept %lld bytes, counted %lld, "
           "truncated %s\n",
           bigS, qsizetype(big.stdoutData.size()), big.stdoutBytes, big.truncated ? "yes" : "no");
    printf("  host process RSS   %6lld -> %6lld KiB\n", hostBefore, hostAfter);
    printf("  QEMU RSS           %6lld -> %6lld KiB\n", qemuBefore, qemuAfter);
    printf("  guest agent peak   %s -> %s\n", agentBefore.constData(), agentAfter.constData());

    orDie(await(engine.destroy(box.id)), "destroy");
    QDir(config.dataDir).removeRecursively();
    return 0;
}
