#include "system.h"

#include "limits.h"

#include <dirent.h>
#include <fcntl.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

namespace sandcastle::agent {

long long nowMs() {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

void logLine(const std::string &line) {
    int fd = open("/dev/console", O_WRONLY | O_NOCTTY | O_CLOEXEC);
    if (fd < 0)
        fd = dup(STDERR_FILENO);
    std::string l = "sandcastle-agent: " + line + "\n";
    ssize_t ignored = write(fd, l.data(), l.size());
    (void)ignored;
    close(fd);
}

static void mountOrLog(const char *src, const char *target, const char *type, unsigned long flags,
                       const char *data) {
    mkdir(target, 0755);
    if (mount(src, target, type, flags, data) != 0 && errno != EBUSY)
        logLine(std::string("mount ") + target + ": " + strerror(errno));
}

void initSystem() {
    // /run was mounted by the initramfs (it holds this binary).
    mountOrLog("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr);
    mountOrLog("sysfs", "/sys", "sysfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr);
    mountOrLog("devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC,
               "gid=5,mode=620,ptmxmode=666");
    mountOrLog("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777");
    mountOrLog("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777");
    mountOrLog("cgroup2", "/sys/fs/cgroup", "cgroup2", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr);
    sethostname("sandbox", 7);
    umask(022);
    setenv("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", 1);

    loopbackUp();
    limits::setup();
    if (!runBootScript("early", true)) {
        // The early phase loads the guest's egress rules: fail closed.
        logLine("the early boot phase failed; powering off");
        sync();
        reboot(RB_POWER_OFF);
    }
}

void loopbackUp() {
    // An ioctl, not `ip link`: exec'ing a dynamically linked program costs
    // ~25 ms under emulation, on the create -> ready path.
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    ifreq ifr{};
    strncpy(ifr.ifr_name, "lo", IFNAMSIZ - 1);
    if (fd < 0 || ioctl(fd, SIOCGIFFLAGS, &ifr) != 0 ||
        (ifr.ifr_flags |= IFF_UP, ioctl(fd, SIOCSIFFLAGS, &ifr) != 0))
        logLine(std::string("loopback: ") + strerror(errno));
    if (fd >= 0)
        close(fd);
}

bool runBootScript(const char *phase, bool wait) {
    // Boot steps that are easier in shell come with the initramfs. "early"
    // runs before the agent answers, so no command can come before it (the
    // place for the guest's own rules); "late" runs after, off the ready path.
    if (access("/run/sandcastle/boot.sh", X_OK) != 0)
        return true;
    pid_t pid = fork();
    if (pid == 0) {
        execl("/bin/sh", "sh", "/run/sandcastle/boot.sh", phase, (char *)nullptr);
        _exit(127);
    }
    if (pid < 0)
        return false;
    if (!wait)
        return true; // reaped by the agent's loop, like any orphan
    int status = 0;
    while (pid > 0 && waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        logLine(std::string("boot.sh ") + phase + " failed with status " + std::to_string(status));
        return false;
    }
    return true;
}

std::string findPort(const std::string &name) {
    DIR *dir = opendir("/sys/class/virtio-ports");
    if (!dir)
        return {};
    std::string found;
    while (dirent *e = readdir(dir)) {
        if (e->d_name[0] == '.')
            continue;
        std::string base = std::string("/sys/class/virtio-ports/") + e->d_name;
        FILE *f = fopen((base + "/name").c_str(), "re");
        if (!f)
            continue;
        char buf[256] = {0};
        if (fgets(buf, sizeof buf, f)) {
            std::string n(buf);
            while (!n.empty() && (n.back() == '\n' || n.back() == '\r'))
                n.pop_back();
            if (n == name)
                found = std::string("/dev/") + e->d_name;
        }
        fclose(f);
        if (!found.empty())
            break;
    }
    closedir(dir);
    return found;
}

} // namespace sandcastle::agent
