// Test and benchmark support: finding the QEMU and passt processes of
// sandboxes. Every lookup is scoped by a needle (a domain name, a sandbox
// id or a data dir): other suites run their own VMs on the same machine at
// the same time, and theirs are none of ours.
#pragma once

#include <QDir>
#include <QFile>
#include <QList>
#include <QStringList>
#include <QtCore/qtestsupport_core.h> // QTest::qWaitFor, without linking Qt Test

#include <signal.h>

namespace testing {

/// The command line of `pid`, arguments separated by NULs; empty for a
/// process that is gone, a zombie or a kernel thread.
inline QByteArray commandLineOf(int pid) {
    QFile cmdline(QStringLiteral("/proc/%1/cmdline").arg(pid));
    return cmdline.open(QIODevice::ReadOnly) ? cmdline.readAll() : QByteArray();
}

/// The pids of the processes whose command line names `needle` and for
/// which `isProgram(command line)` holds.
template <typename Predicate> QList<int> pidsWith(const QString &needle, Predicate isProgram) {
    QList<int> pids;
    const QByteArray n = needle.toUtf8();
    for (const QString &entry : QDir(QStringLiteral("/proc")).entryList(QDir::Dirs)) {
        const int pid = entry.toInt();
        if (!pid)
            continue;
        const QByteArray c = commandLineOf(pid);
        if (!c.isEmpty() && c.contains(n) && isProgram(c))
            pids.append(pid);
    }
    return pids;
}

/// The pids of the QEMU processes whose command line names `needle`.
inline QList<int> qemuPidsWith(const QString &needle) {
    return pidsWith(needle, [](const QByteArray &c) { return c.contains("qemu-system"); });
}

inline int qemuProcessesWith(const QString &needle) {
    return int(qemuPidsWith(needle).size());
}

/// The pid of the QEMU process running `needle`, or 0.
inline int qemuPidWith(const QString &needle) {
    return qemuPidsWith(needle).value(0, 0);
}

/// The pids of the passt processes whose command line names `needle` (a
/// sandbox's passt names its socket in the sandbox's folder). Debian's
/// `passt` runs `passt.avx2` where the CPU has it: the program's file name
/// starts with "passt".
inline QList<int> passtPidsWith(const QString &needle) {
    return pidsWith(needle, [](const QByteArray &c) {
        const QByteArray program = c.left(c.indexOf('\0'));
        return program.mid(program.lastIndexOf('/') + 1).startsWith("passt");
    });
}

/// The QEMU and passt processes of the sandboxes in `dataDir`, one
/// "pid: command line" a line, for a failure message.
inline QStringList leftoversIn(const QString &dataDir) {
    // The folder's own path with its slash: /tmp/sc-x-ab12 is not /tmp/sc-x-ab123.
    const QString needle = QDir::cleanPath(dataDir) + QLatin1Char('/');
    QStringList found;
    for (int pid : qemuPidsWith(needle) + passtPidsWith(needle)) {
        QByteArray c = commandLineOf(pid);
        c.replace('\0', ' ');
        found << QStringLiteral("%1: %2").arg(pid).arg(QString::fromUtf8(c.left(300)));
    }
    return found;
}

/// For a suite's cleanup: waits until the QEMU and passt processes of
/// `dataDir` have ended (a VM just destroyed takes a moment to exit, its
/// passt ends after it), at most `timeoutMs`; kills what is still there
/// then, so that a leak does not burden the next suite; returns what it
/// had to kill. The caller fails the test when that is not empty:
///
///     const QStringList left = testing::reapLeftovers(dir.path());
///     QVERIFY2(left.isEmpty(), qPrintable(left.join('\n')));
inline QStringList reapLeftovers(const QString &dataDir, int timeoutMs = 60000) {
    if (QTest::qWaitFor([&] { return leftoversIn(dataDir).isEmpty(); }, timeoutMs))
        return {};
    const QStringList left = leftoversIn(dataDir);
    const QString needle = QDir::cleanPath(dataDir) + QLatin1Char('/');
    for (int pid : qemuPidsWith(needle) + passtPidsWith(needle))
        ::kill(pid, SIGKILL);
    (void)QTest::qWaitFor([&] { return leftoversIn(dataDir).isEmpty(); }, 10000);
    return left;
}

} // namespace testing
