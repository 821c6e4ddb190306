// Watches libvirt's QEMU capabilities cache. libvirt probes each QEMU
// binary once and keeps the answer in `<libvirt root>/cache/qemu/
// capabilities/`; it probes again only when it finds the answer stale (QEMU,
// libvirt, the kernel or microcode changed, or KVM's usability disagrees
// with what was probed). A probe costs seconds under emulation, so one at
// every create is a fault worth a warning that says why.
#pragma once

#include <QByteArray>
#include <QHash>
#include <QMutex>
#include <QString>
#include <QStringList>

#include <optional>

namespace sandcastle {

/// Why libvirt rewrote a capabilities file, from the file before and after.
/// `kvmUsable`: whether QEMU's user may read /dev/kvm now, libvirt's own
/// test (unknown: nullopt).
QString reprobeReason(const QByteArray &before, const QByteArray &after,
                      std::optional<bool> kvmUsable);

class CapsCacheWatch {
public:
    explicit CapsCacheWatch(QString dir)
        : dir_(std::move(dir)) {}

    /// Looks at the cache files again; for each one rewritten since the last
    /// look, a line saying so and why. The first look only takes note.
    /// Thread-safe (creates run on a pool).
    QStringList check(std::optional<bool> kvmUsable);

private:
    struct Seen {
        quint64 inode = 0;
        qint64 mtimeNs = 0;
        QByteArray contents;
    };
    QString dir_;
    QMutex mutex_;
    QHash<QString, Seen> seen_;
};

} // namespace sandcastle
