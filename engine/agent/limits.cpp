#include "limits.h"

#include "system.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

namespace sandcastle::agent::limits {

namespace {

const char kParent[] = "/sys/fs/cgroup/sandbox";
bool enabled = false;
// Empty command cgroups kept for the next commands: creating and removing
// a cgroup per command doubled the cost of a short exec under emulation.
std::vector<std::string> spare;
constexpr size_t kMaxSpare = 16;
uint64_t createdSinceSweep = 0;

bool populated(const std::string &cgroup) {
    FILE *f = fopen((cgroup + "/cgroup.events").c_str(), "re");
    if (!f)
        return true;
    char line[64];
    bool busy = true;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "populated ", 10) == 0)
            busy = line[10] != '0';
    }
    fclose(f);
    return busy;
}

bool writeFile(const std::string &path, const std::string &value) {
    int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    bool ok = write(fd, value.data(), value.size()) == ssize_t(value.size());
    close(fd);
    return ok;
}

long long memTotalBytes() {
    FILE *f = fopen("/proc/meminfo", "re");
    if (!f)
        return 0;
    long long kib = 0;
    char line[256];
    while (fgets(line, sizeof line, f)) {
        if (sscanf(line, "MemTotal: %lld kB", &kib) == 1)
            break;
    }
    fclose(f);
    return kib * 1024;
}

} // namespace

bool setup() {
    // The agent is the one process the OOM killer must never pick.
    writeFile("/proc/self/oom_score_adj", "-1000");
    for (const char *controller : {"+memory", "+pids", "+cpu"}) {
        if (!writeFile("/sys/fs/cgroup/cgroup.subtree_control", controller))
            logLine(std::string("cgroup controller ") + controller + ": " + strerror(errno));
    }
    if (mkdir(kParent, 0755) != 0 && errno != EEXIST) {
        logLine(std::string("no command limits: ") + kParent + ": " + strerror(errno));
        return false;
    }
    const std::string parent = kParent;
    // Leave the kernel, the agent and the page cache room to breathe.
    const long long total = memTotalBytes();
    const long long reserve = std::max(160LL << 20, total / 8);
    bool ok = total > reserve &&
              writeFile(parent + "/memory.max", std::to_string(total - reserve)) &&
              writeFile(parent + "/pids.max", "4096") &&
              writeFile(parent + "/cgroup.subtree_control", "+memory") &&
              writeFile(parent + "/cgroup.subtree_control", "+pids");
    // Commands share the CPU as equals, however many processes each has:
    // a fork bomb does not starve the command run next to it.
    writeFile(parent + "/cgroup.subtree_control", "+cpu");
    writeFile(parent + "/memory.swap.max", "0");
    writeFile(parent + "/cpu.weight", "50"); // the agent answers first
    if (!ok) {
        logLine(std::string("no command limits: cannot configure ") + kParent + ": " +
                strerror(errno));
        return false;
    }
    enabled = true;
    return true;
}

std::string createFor(uint64_t serial) {
    if (!enabled)
        return {};
    while (!spare.empty()) {
        std::string path = std::move(spare.back());
        spare.pop_back();
        if (!populated(path))
            return path;
    }
    if (++createdSinceSweep >= 64) {
        createdSinceSweep = 0;
        sweep();
    }
    const std::string path = std::string(kParent) + "/cmd-" + std::to_string(serial);
    if (mkdir(path.c_str(), 0755) != 0 && errno != EEXIST) {
        logLine("cgroup " + path + ": " + strerror(errno));
        return {};
    }
    writeFile(path + "/pids.max", "1024");
    writeFile(path + "/memory.oom.group", "1");
    return path;
}

bool enter(const std::string &cgroup) {
    // The agent's own OOM immunity is inherited by fork: give it back, or
    // the OOM killer finds nobody to kill and the command livelocks.
    writeFile("/proc/self/oom_score_adj", "0");
    return cgroup.empty() || writeFile(cgroup + "/cgroup.procs", "0");
}

void release(const std::string &cgroup) {
    // Still populated: the command left background processes behind (a
    // server, say); the cgroup stays theirs until a sweep finds it empty.
    if (!cgroup.empty() && spare.size() < kMaxSpare && !populated(cgroup))
        spare.push_back(cgroup);
}

void killAll(const std::string &cgroup) {
    if (!cgroup.empty())
        writeFile(cgroup + "/cgroup.kill", "1");
}

void sweep() {
    DIR *dir = opendir(kParent);
    if (!dir)
        return;
    while (dirent *e = readdir(dir)) {
        const std::string path = std::string(kParent) + "/" + e->d_name;
        if (strncmp(e->d_name, "cmd-", 4) == 0 &&
            std::find(spare.begin(), spare.end(), path) == spare.end())
            rmdir(path.c_str()); // EBUSY while populated
    }
    closedir(dir);
}

} // namespace sandcastle::agent::limits
