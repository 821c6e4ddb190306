// Files opened for the host exactly as a command running as `sandbox`
// would open them. The agent is root; switching only the filesystem uid
// (setfsuid) left it root's effective uid and capabilities, which some
// kernel checks use instead (writes under /proc/sys, uid_map,
// oom_score_adj, capability-gated reads such as /proc/kallsyms). So a
// short-lived child drops to uid/gid 1000 with no groups and no
// capabilities, opens the file, and hands the descriptor back over a
// socket pair. Pseudo filesystems are refused, whoever could open them,
// and magic links (/proc/<pid>/root, /proc/<pid>/fd/N) are never followed.
#pragma once

#include <sys/types.h>

#include <string>

namespace sandcastle::agent {

struct SandboxOpen {
    int fd = -1;         // a regular file, or -1
    int err = 0;         // errno when fd is -1
    std::string message; // why, for the host (names the path)
};

enum class OpenFor { Read, Write };

/// Opens `path` as `sandbox`; for writing, creates missing parent folders
/// (0755) and the file (`mode`), and truncates it. Never blocks on a FIFO.
SandboxOpen openAsSandbox(const std::string &path, OpenFor purpose, mode_t mode = 0644);

/// True for filesystems whose files are kernel interfaces, not data:
/// procfs, sysfs, cgroups, debugfs and the like.
bool isPseudoFilesystem(long type);

/// The agent's side of a files helper `pid` that answers on `sock`: its
/// answer (a descriptor, or -errno) within `timeoutMs`, else -ETIMEDOUT.
/// The helper is killed either way and never waited for.
int collectHelper(pid_t pid, int sock, int timeoutMs);

} // namespace sandcastle::agent
