// Test and benchmark support: finding the QEMU processes of sandboxes.
#pragma once

#include <QDir>
#include <QFile>
#include <QList>

namespace testing {

/// The pids of the QEMU processes whose command line names `needle` (a
/// domain name, a sandbox id or a data dir).
inline QList<int> qemuPidsWith(const QString &needle) {
    QList<int> pids;
    for (const QString &pid : QDir(QStringLiteral("/proc")).entryList(QDir::Dirs)) {
        QFile cmdline(QStringLiteral("/proc/%1/cmdline").arg(pid));
        if (!pid.toInt() || !cmdline.open(QIODevice::ReadOnly))
            continue;
        const QByteArray c = cmdline.readAll();
        if (c.contains("qemu-system") && c.contains(needle.toUtf8()))
            pids.append(pid.toInt());
    }
    return pids;
}

inline int qemuProcessesWith(const QString &needle) {
    return int(qemuPidsWith(needle).size());
}

/// The pid of the QEMU process running `needle`, or 0.
inline int qemuPidWith(const QString &needle) {
    return qemuPidsWith(needle).value(0, 0);
}

} // namespace testing
