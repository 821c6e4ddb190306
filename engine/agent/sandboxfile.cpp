#include "sandboxfile.h"

#include "agent.h"

#include <fcntl.h>
#include <grp.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace sandcastle::agent {

namespace {

// The helper runs as `sandbox`, so the sandbox user may stop it, and the
// agent's one loop waits for it: an open takes milliseconds, so this is
// ample, and it bounds the stall.
constexpr int kHelperTimeoutMs = 2000;

/// Our own code for "a kernel interface, not a file" (no errno has this
/// value), told apart from the kernel's EACCES so the message can say which.
constexpr int kPseudo = -100000;

int makeParents(const std::string &path) {
    for (size_t i = 1; (i = path.find('/', i)) != std::string::npos; ++i) {
        const std::string dir = path.substr(0, i);
        if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST)
            return errno;
    }
    return 0;
}

/// In the child: open as `sandbox` and check what was opened. Returns the
/// descriptor, or -errno (or kPseudo).
int openChecked(const std::string &path, OpenFor purpose, mode_t mode) {
    if (purpose == OpenFor::Write) {
        if (int err = makeParents(path); err != 0)
            return -err;
    }
    open_how how{};
    // No O_TRUNC here: nothing is changed before the checks below.
    how.flags = O_CLOEXEC | O_NONBLOCK | O_NOCTTY |
                (purpose == OpenFor::Write ? O_WRONLY | O_CREAT : O_RDONLY);
    how.mode = purpose == OpenFor::Write ? (mode & 0777) : 0;
    how.resolve = RESOLVE_NO_MAGICLINKS;
    const int fd = int(syscall(SYS_openat2, AT_FDCWD, path.c_str(), &how, sizeof how));
    if (fd < 0)
        return -errno;
    struct statfs fs {};
    struct stat st {
    }, dev{};
    int err = 0;
    if (fstatfs(fd, &fs) != 0 || fstat(fd, &st) != 0)
        err = -errno;
    // devtmpfs reports tmpfs's magic: tell it by its device instead.
    else if (isPseudoFilesystem(long(fs.f_type)) ||
             (stat("/dev", &dev) == 0 && st.st_dev == dev.st_dev))
        err = kPseudo;
    else if (S_ISDIR(st.st_mode))
        err = -EISDIR;
    else if (!S_ISREG(st.st_mode))
        err = -EINVAL;
    else if (purpose == OpenFor::Write && ftruncate(fd, 0) != 0)
        err = -errno;
    if (err != 0) {
        close(fd);
        return err;
    }
    return fd;
}

/// In the child: become `sandbox` for good. Dropping the uid from 0 clears
/// every capability; the check makes sure of it.
bool dropToSandbox() {
    if (setgroups(0, nullptr) != 0 || setresgid(kSandboxGid, kSandboxGid, kSandboxGid) != 0 ||
        setresuid(kSandboxUid, kSandboxUid, kSandboxUid) != 0)
        return false;
    prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
    return geteuid() == kSandboxUid && getegid() == kSandboxGid && setuid(0) != 0;
}

void sendResult(int sock, int result) {
    const int fd = result >= 0 ? result : -1;
    const int code = result >= 0 ? 0 : result;
    iovec iov{const_cast<int *>(&code), sizeof code};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    if (fd >= 0) {
        msg.msg_control = control;
        msg.msg_controllen = sizeof control;
        cmsghdr *c = CMSG_FIRSTHDR(&msg);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(c), &fd, sizeof fd);
    }
    [[maybe_unused]] auto n = sendmsg(sock, &msg, MSG_NOSIGNAL);
}

/// In the parent: the child's answer: -errno/kPseudo, or a descriptor.
int receiveResult(int sock, int timeoutMs) {
    pollfd p{sock, POLLIN, 0};
    int ready;
    do {
        ready = poll(&p, 1, timeoutMs);
    } while (ready < 0 && errno == EINTR);
    if (ready <= 0)
        return -ETIMEDOUT;
    int code = -EIO;
    iovec iov{&code, sizeof code};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    if (recvmsg(sock, &msg, MSG_CMSG_CLOEXEC) != ssize_t(sizeof code))
        return -EIO;
    for (cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
            int fd;
            memcpy(&fd, CMSG_DATA(c), sizeof fd);
            if (code == 0)
                return fd;
            close(fd);
        }
    }
    return code == 0 ? -EIO : code;
}

std::string describe(const std::string &path, OpenFor purpose, int code) {
    const char *what = purpose == OpenFor::Write ? "writable" : "readable";
    switch (code) {
    case kPseudo:
        return path + ": a kernel interface (procfs, sysfs, cgroupfs or devices), not a file; "
                      "the files API does not touch these";
    case -EACCES:
    case -EPERM:
    case -EROFS:
        return path + ": not " + what + " by the sandbox user (" + strerror(-code) + ")";
    case -ELOOP:
        return path + ": goes through a link the files API does not follow (a /proc magic "
                      "link, or too many symbolic links)";
    case -EISDIR:
        return path + ": is a directory";
    case -EINVAL:
        return path + ": not a regular file";
    case -ETIMEDOUT:
        return path + ": opening it did not finish in time";
    default:
        return path + ": " + strerror(-code);
    }
}

} // namespace

bool isPseudoFilesystem(long type) {
    switch (static_cast<unsigned long>(type)) {
    case PROC_SUPER_MAGIC:
    case SYSFS_MAGIC:
    case CGROUP_SUPER_MAGIC:
    case CGROUP2_SUPER_MAGIC:
    case DEVPTS_SUPER_MAGIC:
    case DEBUGFS_MAGIC:
    case TRACEFS_MAGIC:
    case SECURITYFS_MAGIC:
    case BPF_FS_MAGIC:
    case 0x62656570: // configfs
    case EFIVARFS_MAGIC:
    case PSTOREFS_MAGIC:
    case NSFS_MAGIC:
    case 0x65735543: // fusectl
        return true;
    default:
        return false;
    }
}

int collectHelper(pid_t pid, int sock, int timeoutMs) {
    const int result = receiveResult(sock, timeoutMs);
    // Done with it either way. SIGKILL ends it even when stopped; it is
    // unreaped, so the pid is still ours. If it is not gone at once, the
    // agent's loop reaps it with the other children: never wait here.
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, WNOHANG);
    return result;
}

SandboxOpen openAsSandbox(const std::string &path, OpenFor purpose, mode_t mode) {
    int pair[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0)
        return {-1, errno, path + ": socketpair: " + strerror(errno)};
    const pid_t pid = fork();
    if (pid == 0) {
        close(pair[0]);
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, nullptr);
        sendResult(pair[1], dropToSandbox() ? openChecked(path, purpose, mode) : -EPERM);
        _exit(0);
    }
    close(pair[1]);
    if (pid < 0) {
        const int err = errno;
        close(pair[0]);
        return {-1, err, path + ": fork: " + strerror(err)};
    }
    const int result = collectHelper(pid, pair[0], kHelperTimeoutMs);
    close(pair[0]);
    if (result >= 0)
        return {result, 0, {}};
    return {-1, result == kPseudo ? EACCES : -result, describe(path, purpose, result)};
}

} // namespace sandcastle::agent
