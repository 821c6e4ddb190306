#include "reaper.h"

#include <QtDebug>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <mutex>
#include <poll.h>
#include <set>
#include <string>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

namespace sandcastle {

namespace {

int wakePipe[2] = {-1, -1};
struct sigaction previous {};

void onChild(int sig, siginfo_t *info, void *context) {
    const int saved = errno;
    const char c = 1;
    [[maybe_unused]] auto n = ::write(wakePipe[1], &c, 1); // non-blocking: a full pipe is a wake-up
    errno = saved;
    // Whoever handled SIGCHLD before us (Qt's process code may) still gets it.
    if (previous.sa_flags & SA_SIGINFO) {
        if (previous.sa_sigaction)
            previous.sa_sigaction(sig, info, context);
    } else if (previous.sa_handler != SIG_DFL && previous.sa_handler != SIG_IGN) {
        previous.sa_handler(sig);
    }
}

// Plain POSIX below: the thread may wake while the process exits, when
// Qt's statics may already be gone.

std::string readSmallFile(const std::string &path) {
    char buf[1024];
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return {};
    const ssize_t n = ::read(fd, buf, sizeof buf);
    ::close(fd);
    return n > 0 ? std::string(buf, size_t(n)) : std::string();
}

struct Stat {
    std::string name;
    char state = 0;
    pid_t ppid = 0;
    pid_t pgrp = 0;
};

/// /proc/<pid>/stat: the name is between the first '(' and the last ')'
/// (it may hold both), the fields follow.
bool readStat(const std::string &pid, Stat *out) {
    const std::string line = readSmallFile("/proc/" + pid + "/stat");
    const size_t open = line.find('('), close = line.rfind(')');
    if (open == std::string::npos || close == std::string::npos || close < open ||
        close + 2 >= line.size())
        return false;
    out->name = line.substr(open + 1, close - open - 1);
    out->state = line[close + 2];
    return sscanf(line.c_str() + close + 3, "%d %d", &out->ppid, &out->pgrp) == 2;
}

/// The names of this process's threads: a child that was forked and never
/// ran a program of its own (libvirt's intermediate child) still bears one.
std::set<std::string> threadNames() {
    std::set<std::string> names;
    DIR *dir = ::opendir("/proc/self/task");
    if (!dir)
        return names;
    while (dirent *e = ::readdir(dir)) {
        if (e->d_name[0] == '.')
            continue;
        std::string comm = readSmallFile(std::string("/proc/self/task/") + e->d_name + "/comm");
        if (!comm.empty() && comm.back() == '\n')
            comm.pop_back();
        names.insert(comm);
    }
    ::closedir(dir);
    return names;
}

} // namespace

int reapOrphans(pid_t ownGroup) {
    const pid_t self = getpid();
    std::set<std::string> ours;
    bool oursRead = false;
    int reaped = 0;
    DIR *proc = ::opendir("/proc");
    if (!proc)
        return 0;
    while (dirent *e = ::readdir(proc)) {
        char *end = nullptr;
        const long pid = strtol(e->d_name, &end, 10);
        Stat st;
        if (pid <= 0 || *end != '\0' || !readStat(e->d_name, &st) || st.ppid != self ||
            st.state != 'Z' || st.pgrp == ownGroup)
            continue;
        if (!oursRead) {
            ours = threadNames();
            oursRead = true;
        }
        if (ours.count(st.name))
            continue;
        // Only this pid: never one a QProcess or libvirt waits for itself.
        if (::waitpid(pid_t(pid), nullptr, WNOHANG) == pid)
            ++reaped;
    }
    ::closedir(proc);
    return reaped;
}

bool adoptOrphans() {
    static std::once_flag once;
    static std::atomic<bool> ok = false;
    std::call_once(once, [] {
        // Reaping first, adoption last: adopted orphans that nobody reaps
        // would be worse than a PID 1 that reaps late.
        if (::pipe2(wakePipe, O_CLOEXEC | O_NONBLOCK) != 0 ||
            ::sigaction(SIGCHLD, nullptr, &previous) != 0) {
            qWarning().noquote() << "cannot reap daemonized QEMU processes:" << strerror(errno);
            return;
        }
        struct sigaction action {};
        action.sa_sigaction = onChild;
        action.sa_flags = SA_SIGINFO | SA_RESTART | SA_NOCLDSTOP;
        sigemptyset(&action.sa_mask);
        if (::sigaction(SIGCHLD, &action, nullptr) != 0) {
            qWarning().noquote() << "cannot reap daemonized QEMU processes:" << strerror(errno);
            return;
        }
        const pid_t group = getpgrp();
        std::thread([group] {
            char buf[64];
            for (;;) {
                reapOrphans(group);
                pollfd p{wakePipe[0], POLLIN, 0};
                if (::poll(&p, 1, -1) < 0 && errno != EINTR)
                    break;
                while (::read(wakePipe[0], buf, sizeof buf) > 0) {
                }
            }
            // Nobody reaps from here on: give the orphans back to PID 1.
            ::prctl(PR_SET_CHILD_SUBREAPER, 0);
        }).detach();
        if (::prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) {
            qWarning().noquote() << "cannot become the reaper of daemonized QEMU processes:"
                                 << strerror(errno);
            return;
        }
        ok = true;
    });
    return ok;
}

} // namespace sandcastle
