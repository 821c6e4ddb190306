#include "reaper.h"

#include <QDir>
#include <QFile>
#include <QtDebug>

#include <atomic>
#include <csignal>
#include <fcntl.h>
#include <mutex>
#include <poll.h>
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

struct Stat {
    QByteArray name;
    char state = 0;
    pid_t ppid = 0;
    pid_t pgrp = 0;
};

/// Fields of /proc/<pid>/stat after the command name (which may hold
/// spaces and parentheses, hence the last ')').
bool readStat(const QString &pid, Stat *out) {
    QFile f(QStringLiteral("/proc/") + pid + QStringLiteral("/stat"));
    if (!f.open(QIODevice::ReadOnly))
        return false;
    const QByteArray line = f.readAll();
    const int open = line.indexOf('('), close = line.lastIndexOf(')');
    if (open < 0 || close < open)
        return false;
    out->name = line.mid(open + 1, close - open - 1);
    const QList<QByteArray> fields = line.mid(close + 2).split(' ');
    if (fields.size() < 3 || fields[0].isEmpty())
        return false;
    out->state = fields[0][0];
    out->ppid = fields[1].toInt();
    out->pgrp = fields[2].toInt();
    return true;
}

} // namespace

int reapOrphans(pid_t ownGroup) {
    const pid_t self = getpid();
    int reaped = 0;
    const QStringList pids =
        QDir(QStringLiteral("/proc")).entryList(QDir::Dirs | QDir::NoDotAndDotDot);
    for (const QString &name : pids) {
        bool numeric = false;
        const pid_t pid = name.toInt(&numeric);
        Stat st;
        if (!numeric || !readStat(name, &st) || st.ppid != self || st.state != 'Z' ||
            st.pgrp == ownGroup ||
            !(st.name.startsWith("qemu-system") || st.name.startsWith("passt")))
            continue;
        // Only this pid: never one a QProcess or libvirt waits for itself.
        if (::waitpid(pid, nullptr, WNOHANG) == pid)
            ++reaped;
    }
    return reaped;
}

bool adoptOrphans() {
    static std::once_flag once;
    static std::atomic<bool> ok = false;
    std::call_once(once, [] {
        if (::prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) {
            qWarning().noquote() << "cannot become the reaper of daemonized QEMU processes:"
                                 << strerror(errno);
            return;
        }
        if (::pipe2(wakePipe, O_CLOEXEC | O_NONBLOCK) != 0)
            return;
        struct sigaction action {};
        action.sa_sigaction = onChild;
        action.sa_flags = SA_SIGINFO | SA_RESTART | SA_NOCLDSTOP;
        sigemptyset(&action.sa_mask);
        if (::sigaction(SIGCHLD, &action, &previous) != 0)
            return;
        const pid_t group = getpgrp();
        std::thread([group] {
            // Any zombies from before the handler was in place first.
            reapOrphans(group);
            char buf[64];
            for (;;) {
                pollfd p{wakePipe[0], POLLIN, 0};
                if (::poll(&p, 1, -1) < 0 && errno != EINTR)
                    return;
                while (::read(wakePipe[0], buf, sizeof buf) > 0) {
                }
                reapOrphans(group);
            }
        }).detach();
        ok = true;
    });
    return ok;
}

} // namespace sandcastle
