// What the host has room for: memory and disk, read before each create so
// that a sandbox that cannot fit is refused with the shortfall named,
// instead of failing half-way or starving the others.
#pragma once

#include "errors.h"
#include "sizes.h"

#include <QByteArray>
#include <QString>

namespace sandcastle {

struct HostMemory {
    qint64 totalMiB = 0;
    qint64 availableMiB = 0;
};

/// Parses /proc/meminfo's text (MemTotal, MemAvailable).
HostMemory parseMeminfo(const QByteArray &text);
HostMemory hostMemory();

/// Free bytes for an unprivileged writer on the filesystem holding `path`.
qint64 freeDiskBytes(const QString &path);

/// Refuses a sandbox of `size` when the host lacks the memory (Unavailable,
/// 503) or the disk under `dataDir` (NoSpace, 507) it may use.
Result<void> checkRoomFor(const SandboxSize &size, const QString &dataDir, const HostMemory &memory,
                          qint64 freeBytes);

/// Live sandboxes the host takes when the setting leaves it to us: two per
/// GiB of memory (guests touch little of their memory, and free page
/// reporting hands back what they free), at least 2.
int defaultHostSandboxLimit(const HostMemory &memory);

} // namespace sandcastle
