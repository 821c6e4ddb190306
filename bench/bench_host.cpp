// Host set-up benchmark: run by hand, prints figures (never a pass/fail test).
//
//   build/bench/bench_host [--rounds N]
//
// What a create and a destroy cost when libvirt probes QEMU's capabilities
// again at every create (what a /dev/kvm that QEMU's user cannot open did),
// and when the daemonized QEMU processes are reaped by the engine or left
// to PID 1. A probe is forced by changing the QEMU binary's ctime (chmod to
// its own mode), which libvirt takes for a new QEMU; PID 1 gets the orphans
// when the bench switches PR_SET_CHILD_SUBREAPER off. The four kinds are
// interleaved, round by round, so that ratios hold on a noisy machine.
#include "sandbox/engine.h"
#include "support.h"

#include <QCommandLineParser>
#include <QCoreApplication>
#include <QElapsedTimer>
#include <QStandardPaths>
#include <QTemporaryDir>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <sys/prctl.h>
#include <sys/stat.h>

using namespace sandcastle;
using bench::await;
using bench::stats;

int main(int argc, char **argv) {
    QCoreApplication app(argc, argv);
    QCommandLineParser parser;
    parser.setApplicationDescription(QStringLiteral("Sandcastle host set-up benchmark."));
    parser.addHelpOption();
    QCommandLineOption rounds(QStringLiteral("rounds"), QStringLiteral("Creates of each kind."),
                              QStringLiteral("N"), QStringLiteral("5"));
    parser.addOption(rounds);
    parser.process(app);
    const int n = parser.value(rounds).toInt();

    const QByteArray qemu =
        QFile::encodeName(QStandardPaths::findExecutable(QStringLiteral("qemu-system-x86_64")));
    struct stat qemuStat {};
    if (qemu.isEmpty() || ::stat(qemu.constData(), &qemuStat) != 0) {
        fprintf(stderr, "bench: qemu-system-x86_64 not found\n");
        return 1;
    }
    QTemporaryDir data(QStringLiteral("/tmp/sc-bench-host-XXXXXX"));
    EngineConfig config = EngineConfig::defaults();
    config.dataDir = data.path();
    Engine engine(config);
    if (auto opened = engine.open(); !opened) {
        fprintf(stderr, "bench: %s\n", qPrintable(opened.error().message));
        return 1;
    }
    printf("VMs: %s\n", qPrintable(engine.accelReason()));
    // The first create probes QEMU in any case: not counted.
    auto warm = await(engine.create({QStringLiteral("small"), {}, {}, false}));
    if (!warm) {
        fprintf(stderr, "bench: create failed: %s\n", qPrintable(warm.error().message));
        return 1;
    }
    await(engine.destroy(warm->id));

    struct Kind {
        const char *name;
        bool reaper;
        bool probe;
        QList<double> create, destroy;
    };
    QList<Kind> kinds = {{"engine reaps, cache kept", true, false, {}, {}},
                         {"engine reaps, probe at each create", true, true, {}, {}},
                         {"PID 1 reaps, cache kept", false, false, {}, {}},
                         {"PID 1 reaps, probe at each create", false, true, {}, {}}};
    for (int round = 0; round < n; ++round) {
        for (Kind &k : kinds) {
            ::prctl(PR_SET_CHILD_SUBREAPER, k.reaper ? 1 : 0);
            // A new ctime. This stales every libvirt's cache of this QEMU
            // on the host, libvirtd's too: each probes once more, no harm.
            if (k.probe && ::chmod(qemu.constData(), qemuStat.st_mode & 07777) != 0) {
                fprintf(stderr, "bench: cannot chmod %s (run as root): %s\n", qemu.constData(),
                        strerror(errno));
                return 1;
            }
            QElapsedTimer clock;
            clock.start();
            auto box = await(engine.create({QStringLiteral("small"), {}, {}, false}));
            if (!box) {
                fprintf(stderr, "bench: create failed: %s\n", qPrintable(box.error().message));
                return 1;
            }
            k.create << clock.nsecsElapsed() / 1e6;
            clock.restart();
            await(engine.destroy(box->id));
            k.destroy << clock.nsecsElapsed() / 1e6;
            fprintf(stderr, "  round %d %-36s create %7.0f ms  destroy %6.0f ms\n", round + 1,
                    k.name, k.create.last(), k.destroy.last());
        }
    }
    ::prctl(PR_SET_CHILD_SUBREAPER, 1);

    printf("\n%d creates of each kind, network none; medians (p95), ms\n", n);
    printf("%-36s %18s %18s\n", "", "create -> ready", "destroy");
    const double base = stats(kinds[0].create).median;
    for (const Kind &k : kinds) {
        const auto c = stats(k.create), d = stats(k.destroy);
        printf("%-36s %8.0f (%7.0f) %8.0f (%7.0f)   create x%.2f\n", k.name, c.median, c.p95,
               d.median, d.p95, c.median / base);
    }
    return 0;
}
