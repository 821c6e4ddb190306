#include "hostresources.h"

#include <QFile>
#include <QList>

#include <sys/statvfs.h>

namespace sandcastle {

HostMemory parseMeminfo(const QByteArray &text) {
    HostMemory m;
    for (const QByteArray &line : text.split('\n')) {
        const QList<QByteArray> parts = line.simplified().split(' ');
        if (parts.size() < 2)
            continue;
        if (parts[0] == "MemTotal:")
            m.totalMiB = parts[1].toLongLong() / 1024;
        else if (parts[0] == "MemAvailable:")
            m.availableMiB = parts[1].toLongLong() / 1024;
    }
    return m;
}

HostMemory hostMemory() {
    QFile f(QStringLiteral("/proc/meminfo"));
    return f.open(QIODevice::ReadOnly) ? parseMeminfo(f.readAll()) : HostMemory{};
}

qint64 freeDiskBytes(const QString &path) {
    struct statvfs st {};
    if (::statvfs(QFile::encodeName(path).constData(), &st) != 0)
        return -1;
    return qint64(st.f_bavail) * qint64(st.f_frsize);
}

Result<void> checkRoomFor(const SandboxSize &size, const QString &dataDir, const HostMemory &memory,
                          qint64 freeBytes) {
    using Kind = EngineError::Kind;
    if (memory.totalMiB > 0 && memory.availableMiB < size.memoryMiB)
        return fail(Kind::Unavailable,
                    QStringLiteral("the host has %1 MiB of memory available and a %2 sandbox "
                                   "needs %3 MiB (%4 MiB short): destroy a sandbox, or use a "
                                   "smaller size")
                        .arg(memory.availableMiB)
                        .arg(size.name)
                        .arg(size.memoryMiB)
                        .arg(size.memoryMiB - memory.availableMiB));
    const qint64 need = qint64(size.diskGiB) << 30;
    if (freeBytes >= 0 && freeBytes < need)
        return fail(Kind::NoSpace,
                    QStringLiteral("the host has %1 MiB free in %2 and a %3 sandbox may fill "
                                   "%4 GiB (%5 MiB short): free disk space, or use a smaller "
                                   "size")
                        .arg(freeBytes >> 20)
                        .arg(dataDir, size.name)
                        .arg(size.diskGiB)
                        .arg((need - freeBytes) >> 20));
    return {};
}

int defaultHostSandboxLimit(const HostMemory &memory) {
    return int(std::max<qint64>(2, memory.totalMiB * 2 / 1024));
}

} // namespace sandcastle
