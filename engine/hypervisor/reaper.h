// Reaping the processes libvirt daemonizes. libvirt starts each QEMU (VMs
// and capability probes) and passt detaches itself: their parent exits, so
// they are re-parented to PID 1, and a PID 1 that reaps late leaves them as
// zombies that libvirt waits on (a create stalled for minutes that way; see
// docs/engine.md). The engine becomes their parent instead and reaps them
// as soon as they end.
#pragma once

#include <sys/types.h>

namespace sandcastle {

/// Makes this process the reaper of its orphaned descendants
/// (PR_SET_CHILD_SUBREAPER) and starts a thread that reaps them on SIGCHLD.
/// Idempotent; false if the kernel refuses.
bool adoptOrphans();

/// Reaps the zombie children of this process that are adopted daemons:
/// outside `ownGroup` (a daemon calls setsid) and running a program of
/// their own (a name none of our threads bears). Both tests matter:
/// QProcess's children stay in our group and QProcess reaps them itself,
/// and libvirt's intermediate child (it calls setsid, forks QEMU and exits
/// without running a program) is waited for by libvirt. Returns how many
/// were reaped. The reaper thread calls it; tests call it directly.
int reapOrphans(pid_t ownGroup);

} // namespace sandcastle
