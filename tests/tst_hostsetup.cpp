// Host set-up without VMs: /dev/kvm made usable for QEMU's user the way
// udev would, the reasons given when libvirt probes QEMU again, and the
// reaping of daemonized children.
#include "hostresources.h"
#include "hypervisor/accel.h"
#include "hypervisor/capscache.h"
#include "hypervisor/reaper.h"

#include <QFile>
#include <QProcess>
#include <QTemporaryDir>
#include <QTest>

#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace sandcastle;

namespace {

QByteArray capsXml(const QByteArray &qemuCtime, bool kvm) {
    return "<qemuCaps>\n  <emulator>/usr/bin/qemu-system-x86_64</emulator>\n  <qemuctime>" +
           qemuCtime + "</qemuctime>\n  <selfctime>1796038726</selfctime>\n" +
           "  <selfvers>9000000</selfvers>\n  <flag name='sdl'/>\n" +
           (kvm ? QByteArray("  <flag name='kvm'/>\n") : QByteArray()) +
           "  <flag name='tcg'/>\n  <microcodeVersion>0</microcodeVersion>\n</qemuCaps>\n";
}

/// /proc/<pid>/stat's fields after the command name ("S 1234 ...").
QList<QByteArray> procStat(pid_t pid) {
    QFile f(QStringLiteral("/proc/%1/stat").arg(pid));
    if (!f.open(QIODevice::ReadOnly))
        return {};
    const QByteArray s = f.readAll();
    const int close = s.lastIndexOf(')');
    return close > 0 ? s.mid(close + 2).split(' ') : QList<QByteArray>();
}

/// The process's state letter, or 0 when it is gone (reaped).
char procState(pid_t pid) {
    const auto fields = procStat(pid);
    return fields.isEmpty() || fields[0].isEmpty() ? 0 : fields[0][0];
}

pid_t procParent(pid_t pid) {
    const auto fields = procStat(pid);
    return fields.size() > 1 ? fields[1].toInt() : 0;
}

} // namespace

class TestHostSetup : public QObject {
    Q_OBJECT
private slots:
    void modeBitsDecideAccess() {
        struct stat st {};
        st.st_uid = 0;
        st.st_gid = 107;
        st.st_mode = S_IFCHR | 0600;
        QVERIFY(!canReadWrite(st, 64055, {107, 64055}));
        QVERIFY(canReadWrite(st, 0, {0}));
        st.st_mode = S_IFCHR | 0660;
        QVERIFY(canReadWrite(st, 64055, {107, 64055}));
        QVERIFY(!canReadWrite(st, 1000, {1000}));
        st.st_mode = S_IFCHR | 0640; // the group may read only
        QVERIFY(!canReadWrite(st, 64055, {107}));
        st.st_mode = S_IFCHR | 0666;
        QVERIFY(canReadWrite(st, 1000, {1000}));
    }

    void kvmNodeIsGivenToGroupKvm() {
        if (geteuid() != 0)
            QSKIP("needs root (mknod, chown)");
        passwd *pw = getpwnam("libvirt-qemu");
        group *kvm = getgrnam("kvm");
        if (!pw || !kvm)
            QSKIP("no libvirt-qemu user or kvm group (packaging/deps.sh installs them)");
        if (QFile::exists(QStringLiteral("/run/udev/control")))
            QSKIP("udev runs here; its rules decide");
        QTemporaryDir dir;
        // A character device node like /dev/kvm (here /dev/null's numbers),
        // root's alone, as on a host without udev.
        const QByteArray node = QFile::encodeName(dir.filePath(QStringLiteral("kvm")));
        QVERIFY(::mknod(node.constData(), S_IFCHR | 0600, makedev(1, 3)) == 0);
        QCOMPARE(kvmUsableBy(QStringLiteral("libvirt-qemu"), QString::fromLocal8Bit(node)),
                 std::optional<bool>(false));

        const QString note =
            ensureKvmAccess(QStringLiteral("libvirt-qemu"), QString::fromLocal8Bit(node));
        QVERIFY2(note.contains(QStringLiteral("made it root:kvm 0660")), qPrintable(note));
        struct stat st {};
        QVERIFY(::stat(node.constData(), &st) == 0);
        QCOMPARE(st.st_mode & 07777, mode_t(0660));
        QCOMPARE(st.st_uid, uid_t(0));
        QCOMPARE(st.st_gid, kvm->gr_gid);
        QCOMPARE(kvmUsableBy(QStringLiteral("libvirt-qemu"), QString::fromLocal8Bit(node)),
                 std::optional<bool>(true));
        // Nothing more to do the second time.
        QVERIFY(ensureKvmAccess(QStringLiteral("libvirt-qemu"), QString::fromLocal8Bit(node))
                    .isEmpty());
    }

    void noDeviceNoChange() {
        QTemporaryDir dir;
        const QString file = dir.filePath(QStringLiteral("kvm"));
        QVERIFY(ensureKvmAccess(QStringLiteral("libvirt-qemu"), file).isEmpty());
        // A regular file is no KVM device: left alone.
        QFile f(file);
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.close();
        QVERIFY(f.setPermissions(QFile::ReadOwner | QFile::WriteOwner));
        QCOMPARE(kvmUsableBy(QStringLiteral("libvirt-qemu"), file), std::nullopt);
        QVERIFY(ensureKvmAccess(QStringLiteral("libvirt-qemu"), file).isEmpty());
        struct stat st {};
        QVERIFY(::stat(QFile::encodeName(file).constData(), &st) == 0);
        QCOMPARE(st.st_mode & 07777, mode_t(0600));
    }

    void roomIsCheckedBeforeACreate() {
        const HostMemory m = parseMeminfo("MemTotal:       24576000 kB\nMemFree:  100 kB\n"
                                          "MemAvailable:     512000 kB\n");
        QCOMPARE(m.totalMiB, 24000);
        QCOMPARE(m.availableMiB, 500);
        const SandboxSize small = *findSize(QStringLiteral("small"));
        auto memory = checkRoomFor(small, QStringLiteral("/data"), m, qint64(100) << 30);
        QVERIFY(!memory);
        QCOMPARE(int(memory.error().kind), int(EngineError::Kind::Unavailable));
        QVERIFY2(memory.error().message.contains(QStringLiteral("524 MiB short")),
                 qPrintable(memory.error().message));
        const HostMemory plenty{24000, 20000};
        auto disk = checkRoomFor(small, QStringLiteral("/data"), plenty, qint64(3) << 30);
        QVERIFY(!disk);
        QCOMPARE(int(disk.error().kind), int(EngineError::Kind::NoSpace));
        QVERIFY2(disk.error().message.contains(QStringLiteral("3072 MiB free in /data")) &&
                     disk.error().message.contains(QStringLiteral("5120 MiB short")),
                 qPrintable(disk.error().message));
        QVERIFY(checkRoomFor(small, QStringLiteral("/data"), plenty, qint64(8) << 30));
        QCOMPARE(defaultHostSandboxLimit(plenty), 46);
        QCOMPARE(defaultHostSandboxLimit(HostMemory{512, 100}), 2);
        // This host's own figures parse.
        QVERIFY(hostMemory().totalMiB > 0);
        QVERIFY(freeDiskBytes(QStringLiteral("/")) > 0);
    }

    void reprobeReasons() {
        const QByteArray old = capsXml("1796038730", false);
        QCOMPARE(reprobeReason(old, capsXml("1796099999", false), false),
                 QStringLiteral("the QEMU binary changed"));
        QVERIFY(reprobeReason(old, capsXml("1796038730", true), true)
                    .contains(QStringLiteral("KVM became usable")));
        // The loop of the issue: the cache says KVM, QEMU's user cannot use it.
        const QString loop = reprobeReason(capsXml("1", true), capsXml("1", true), false);
        QVERIFY2(loop.contains(QStringLiteral("says KVM is available but QEMU's user cannot "
                                              "read /dev/kvm")),
                 qPrintable(loop));
        QVERIFY(reprobeReason(old, old, std::nullopt)
                    .startsWith(QStringLiteral("nothing the cache records changed")));
    }

    void cacheWatchReportsRewritesOnly() {
        QTemporaryDir dir;
        CapsCacheWatch watch(dir.path());
        QVERIFY(watch.check(false).isEmpty()); // no file yet
        auto write = [&](const QByteArray &xml) {
            // libvirt writes a new file and renames it into place.
            QFile f(dir.filePath(QStringLiteral("new")));
            QVERIFY(f.open(QIODevice::WriteOnly));
            f.write(xml);
            f.close();
            QFile::remove(dir.filePath(QStringLiteral("abc.xml")));
            QVERIFY(QFile::rename(f.fileName(), dir.filePath(QStringLiteral("abc.xml"))));
        };
        write(capsXml("1", false));
        QVERIFY(watch.check(false).isEmpty()); // the first look takes note
        QVERIFY(watch.check(false).isEmpty()); // unchanged
        write(capsXml("2", false));
        const QStringList lines = watch.check(false);
        QCOMPARE(lines.size(), 1);
        QVERIFY2(lines[0].contains(QStringLiteral("abc.xml was rewritten")) &&
                     lines[0].endsWith(QStringLiteral("the QEMU binary changed")),
                 qPrintable(lines[0]));
        QVERIFY(watch.check(false).isEmpty());
    }

    void reapsOnlyAdoptedDaemons() {
        auto child = [](bool ownGroup, const char *name) {
            const pid_t pid = fork();
            if (pid == 0) {
                if (!ownGroup)
                    setsid();
                if (name) // as if it ran that program; else it keeps our thread's name
                    prctl(PR_SET_NAME, name);
                _exit(0);
            }
            return pid;
        };
        // QEMU that left our group, as libvirt daemonizes it: reaped.
        const pid_t qemu = child(false, "qemu-system-x86");
        // A QProcess child running QEMU stays in our group: its owner reaps it.
        const pid_t ours = child(true, "qemu-system-x86");
        // libvirt's intermediate child also leaves the group, but runs no
        // program (it bears the name of the thread that forked it), and
        // libvirt waits for it itself.
        const pid_t libvirts = child(false, nullptr);
        for (pid_t pid : {qemu, ours, libvirts})
            QTRY_COMPARE(procState(pid), 'Z');
        QCOMPARE(reapOrphans(getpgrp()), 1);
        QCOMPARE(procState(qemu), char(0)); // gone
        QCOMPARE(procState(ours), 'Z');
        QCOMPARE(procState(libvirts), 'Z');
        QCOMPARE(waitpid(ours, nullptr, 0), ours);
        QCOMPARE(waitpid(libvirts, nullptr, 0), libvirts);
    }

    void adoptsAndReapsDaemonizedGrandchildren() {
        QVERIFY(adoptOrphans());
        int report[2], end[2]; // child -> test: the grandchild's pid; test -> grandchild: end
        QVERIFY(pipe(report) == 0 && pipe(end) == 0);
        // Double fork with setsid, as libvirt starts QEMU: the grandchild
        // is re-parented to us when its parent exits.
        const pid_t child = fork();
        if (child == 0) {
            const pid_t grandchild = fork();
            if (grandchild == 0) {
                setsid();
                prctl(PR_SET_NAME, "passt");
                char c;
                [[maybe_unused]] auto n = read(end[0], &c, 1);
                _exit(0);
            }
            [[maybe_unused]] auto n = write(report[1], &grandchild, sizeof grandchild);
            _exit(0);
        }
        pid_t grandchild = 0;
        QCOMPARE(read(report[0], &grandchild, sizeof grandchild), ssize_t(sizeof grandchild));
        QCOMPARE(waitpid(child, nullptr, 0), child);
        QVERIFY(grandchild > 0);
        QVERIFY(procState(grandchild) != 0);
        QVERIFY(procState(grandchild) != 'Z');
        QCOMPARE(procParent(grandchild), getpid()); // adopted by us, not by PID 1
        // Let it end: nobody here calls waitpid for it, the reaper must.
        QCOMPARE(write(end[1], "x", 1), ssize_t(1));
        QTRY_COMPARE_WITH_TIMEOUT(procState(grandchild), char(0), 10000);
        for (int fd : {report[0], report[1], end[0], end[1]})
            close(fd);
    }

    void processesStillGetTheirExitCodes() {
        // With the reaper live, QProcess still reaps (and reports) its own.
        QVERIFY(adoptOrphans());
        for (int i = 0; i < 20; ++i) {
            QProcess p;
            p.start(QStringLiteral("sh"), {QStringLiteral("-c"), QStringLiteral("exit 7")});
            QVERIFY(p.waitForFinished(10000));
            QCOMPARE(p.exitStatus(), QProcess::NormalExit);
            QCOMPARE(p.exitCode(), 7);
        }
    }
};

QTEST_GUILESS_MAIN(TestHostSetup)
#include "tst_hostsetup.moc"
