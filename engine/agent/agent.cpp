#include "agent.h"

#include "limits.h"
#include "sandboxfile.h"
#include "system.h"

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

namespace sandcastle::agent {

using proto::ErrorCode;
using proto::Type;

namespace {

constexpr size_t kOutHighWater = 1u << 20; // stop reading sources above this
constexpr int kPortRetryMs = 20;           // how often to look for a host that went away
constexpr const char *kAgentVersion = "0.1.0";

ErrorCode codeForErrno(int err) {
    switch (err) {
    case ENOENT:
        return ErrorCode::NotFound;
    case EACCES:
    case EPERM:
    case EROFS:
        return ErrorCode::PermissionDenied;
    case ENOSPC:
    case EDQUOT:
        return ErrorCode::NoSpace;
    case EISDIR:
    case ENOTDIR:
    case ENAMETOOLONG:
    case ELOOP:
        return ErrorCode::InvalidArgument;
    case EFBIG:
        return ErrorCode::TooLarge;
    default:
        return ErrorCode::Io;
    }
}

bool validPath(const std::string &p) {
    return !p.empty() && p[0] == '/' && p.find('\0') == std::string::npos && p.size() < 4096;
}

void setNonBlocking(int fd) {
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

} // namespace

struct Agent::Exec {
    pid_t pid = -1;
    int fds[2] = {-1, -1}; // stdout, stderr
    uint64_t cap = 0;
    uint64_t sent[2] = {0, 0};
    uint64_t total[2] = {0, 0};
    long long startMs = 0;
    long long deadlineMs = 0;
    bool timedOut = false;
    bool exited = false;
    int status = 0;
    std::string cgroup; // empty: no limits in this guest
};

struct Agent::Upload {
    int fd = -1;
    uint64_t written = 0;
};

struct Agent::Download {
    int fd = -1;
    uint64_t limit = 0;
    uint64_t sent = 0;
};

Agent::Agent(int portFd)
    : port_(portFd) {
    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGCHLD);
    sigprocmask(SIG_BLOCK, &mask, nullptr);
    sigFd_ = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
}

Agent::~Agent() {
    if (sigFd_ >= 0)
        close(sigFd_);
}

void Agent::send(Type type, uint32_t id, std::string_view payload) {
    if (!hostConnected_)
        return; // nobody to read it; a reconnecting host starts afresh
    out_ += proto::encodeFrame(type, id, payload);
}

void Agent::sendError(uint32_t id, ErrorCode code, const std::string &message) {
    send(Type::Error, id, proto::PayloadWriter().u32(uint32_t(code)).bytes(message).data());
}

bool Agent::outputRoom() const {
    return out_.size() - outPos_ < kOutHighWater;
}

int Agent::run(const std::function<void()> &afterReady) {
    send(Type::Ready, 0, proto::PayloadWriter().u32(proto::kVersion).bytes(kAgentVersion).data());
    flushPort();
    if (afterReady)
        afterReady();
    std::vector<pollfd> fds;
    std::vector<std::pair<uint32_t, int>> owners; // exec id and stream per pollfd
    for (;;) {
        fds.clear();
        owners.clear();
        long long now = nowMs();
        bool watchPort = hostConnected_ || now >= nextPortCheckMs_;
        short portEvents = POLLIN | (outPos_ < out_.size() ? POLLOUT : 0);
        fds.push_back({watchPort ? port_ : -1, portEvents, 0});
        fds.push_back({sigFd_, POLLIN, 0});
        int timeout = -1;
        for (auto &[id, e] : execs_) {
            for (int s = 0; s < 2; ++s) {
                if (e->fds[s] >= 0 && outputRoom()) {
                    fds.push_back({e->fds[s], POLLIN, 0});
                    owners.emplace_back(id, s);
                }
            }
            if (!e->exited && !e->timedOut && e->deadlineMs > 0) {
                long long left = std::max(0LL, e->deadlineMs - now);
                timeout = timeout < 0 ? int(left) : std::min(timeout, int(left));
            }
        }
        if (!downloads_.empty() && outputRoom())
            timeout = 0;
        if (!hostConnected_)
            timeout = timeout < 0 ? kPortRetryMs : std::min(timeout, kPortRetryMs);

        int n = poll(fds.data(), fds.size(), timeout);
        if (n < 0 && errno != EINTR)
            return 1;
        if (n > 0) {
            short re = fds[0].revents;
            if (re & POLLIN)
                readPort();
            else if (re & (POLLHUP | POLLERR))
                hostGone();
            if (hostConnected_ && (re & POLLOUT))
                flushPort();
            if (fds[1].revents & POLLIN)
                reapChildren();
            for (size_t i = 2; i < fds.size(); ++i) {
                if (!fds[i].revents)
                    continue;
                auto it = execs_.find(owners[i - 2].first);
                if (it != execs_.end())
                    readOutput(it->first, *it->second, owners[i - 2].second);
            }
        } else if (!hostConnected_) {
            nextPortCheckMs_ = 0; // look again on the next turn
        }
        checkDeadlines();
        pumpDownloads();
        for (auto it = execs_.begin(); it != execs_.end();) {
            auto next = std::next(it);
            if (it->second->exited)
                finishExec(it->first);
            it = next;
        }
        if (hostConnected_ && outPos_ < out_.size())
            flushPort();
    }
}

void Agent::hostGone() {
    // The host closed its end. Keep every command running; drop what was
    // queued for the old connection and any half-read frame, so a new host
    // starts on a frame boundary.
    hostConnected_ = false;
    nextPortCheckMs_ = nowMs() + kPortRetryMs;
    out_.clear();
    outPos_ = 0;
    reader_ = proto::FrameReader();
}

void Agent::readPort() {
    char buf[256 * 1024];
    ssize_t n = read(port_, buf, sizeof buf);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
        hostGone();
        return;
    }
    if (n < 0)
        return;
    hostConnected_ = true;
    reader_.feed(buf, size_t(n));
    uint64_t skippedBefore = reader_.skippedBytes();
    proto::Frame f;
    while (reader_.next(f))
        handleFrame(f);
    if (reader_.skippedBytes() != skippedBefore)
        sendError(0, ErrorCode::Malformed,
                  "skipped " + std::to_string(reader_.skippedBytes() - skippedBefore) +
                      " bytes that were not a frame");
}

void Agent::flushPort() {
    while (outPos_ < out_.size()) {
        ssize_t n = write(port_, out_.data() + outPos_, out_.size() - outPos_);
        if (n > 0) {
            outPos_ += size_t(n);
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno != EAGAIN)
            hostGone();
        break;
    }
    if (outPos_ == out_.size() || outPos_ > (4u << 20)) {
        out_.erase(0, outPos_);
        outPos_ = 0;
    }
}

void Agent::handleFrame(const proto::Frame &f) {
    if (f.version != proto::kVersion) {
        sendError(f.id, ErrorCode::UnsupportedVersion,
                  "agent speaks protocol version " + std::to_string(proto::kVersion));
        return;
    }
    switch (f.type) {
    case Type::Hello:
        send(Type::Ready, f.id,
             proto::PayloadWriter().u32(proto::kVersion).bytes(kAgentVersion).data());
        break;
    case Type::Ping:
        send(Type::Pong, f.id);
        break;
    case Type::Exec:
        startExec(f);
        break;
    case Type::Cancel:
        if (auto it = execs_.find(f.id); it != execs_.end() && !it->second->exited) {
            kill(-it->second->pid, SIGKILL);
            limits::killAll(it->second->cgroup);
        }
        break;
    case Type::WriteOpen:
        openUpload(f);
        break;
    case Type::WriteData:
        if (auto it = uploads_.find(f.id); it != uploads_.end()) {
            Upload &u = *it->second;
            size_t off = 0;
            while (off < f.payload.size()) {
                ssize_t n = write(u.fd, f.payload.data() + off, f.payload.size() - off);
                if (n < 0 && errno == EINTR)
                    continue;
                if (n <= 0) {
                    int err = n < 0 ? errno : EIO;
                    sendError(f.id, codeForErrno(err), std::string("write: ") + strerror(err));
                    close(u.fd);
                    uploads_.erase(it);
                    return;
                }
                off += size_t(n);
            }
            u.written += off;
        }
        break;
    case Type::WriteClose:
        if (auto it = uploads_.find(f.id); it != uploads_.end()) {
            uint64_t written = it->second->written;
            if (close(it->second->fd) != 0)
                sendError(f.id, codeForErrno(errno), std::string("close: ") + strerror(errno));
            else
                send(Type::Done, f.id, proto::PayloadWriter().u64(written).data());
            uploads_.erase(it);
        }
        break;
    case Type::ReadOpen:
        openDownload(f);
        break;
    default:
        sendError(f.id, ErrorCode::UnknownType,
                  "unknown frame type " + std::to_string(int(f.type)));
    }
}

void Agent::startExec(const proto::Frame &f) {
    proto::PayloadReader r(f.payload);
    uint32_t timeoutMs = r.u32();
    uint32_t cap = r.u32();
    std::string command = r.bytes();
    std::string cwd = r.bytes();
    uint32_t nEnv = r.u32();
    std::vector<std::string> env = {
        "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "HOME=/home/sandbox",
        "USER=sandbox",
        "LOGNAME=sandbox",
        "SHELL=/bin/bash",
        "LANG=C.UTF-8",
        "TERM=dumb",
    };
    for (uint32_t i = 0; i < nEnv && r.ok(); ++i) {
        std::string name = r.bytes();
        std::string value = r.bytes();
        env.push_back(name + "=" + value);
    }
    if (!r.ok() || !r.atEnd() || nEnv > 4096) {
        sendError(f.id, ErrorCode::Malformed, "exec payload does not parse");
        return;
    }
    if (execs_.count(f.id)) {
        sendError(f.id, ErrorCode::InvalidArgument, "request id already in use");
        return;
    }
    if (cwd.empty())
        cwd = "/home/sandbox";

    int out[2], err[2], status[2];
    if (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0 || pipe2(status, O_CLOEXEC) != 0) {
        sendError(f.id, ErrorCode::Io, std::string("pipe: ") + strerror(errno));
        return;
    }
    std::vector<char *> envp;
    for (auto &s : env)
        envp.push_back(s.data());
    envp.push_back(nullptr);

    const std::string cgroup = limits::createFor(++execSerial_);
    pid_t pid = fork();
    if (pid == 0) {
        // The child: a new session (its own process group, killed as one),
        // stdin at /dev/null, the unprivileged user, then the shell.
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, nullptr);
        signal(SIGPIPE, SIG_DFL);
        setsid();
        int devnull = open("/dev/null", O_RDONLY);
        dup2(devnull, 0);
        dup2(out[1], 1);
        dup2(err[1], 2);
        int stage = 0;
        auto fail = [&](int which) {
            int msg[2] = {which, errno};
            ssize_t ignored = write(status[1], msg, sizeof msg);
            (void)ignored;
            _exit(127);
        };
        // Into the command's cgroup while still root (the files are root's).
        if (!limits::enter(cgroup))
            fail(stage = 4);
        if (setgroups(0, nullptr) != 0 || setgid(kSandboxGid) != 0 || setuid(kSandboxUid) != 0)
            fail(stage = 1);
        if (chdir(cwd.c_str()) != 0)
            fail(stage = 2);
        char *argv[] = {const_cast<char *>("sh"), const_cast<char *>("-c"), command.data(),
                        nullptr};
        execve("/bin/sh", argv, envp.data());
        fail(stage = 3);
    }
    close(out[1]);
    close(err[1]);
    close(status[1]);
    if (pid < 0) {
        close(out[0]);
        close(err[0]);
        close(status[0]);
        sendError(f.id, ErrorCode::Io, std::string("fork: ") + strerror(errno));
        return;
    }
    // The status pipe closes on a successful exec (CLOEXEC): a few ms at most.
    int msg[2] = {0, 0};
    ssize_t got;
    do {
        got = read(status[0], msg, sizeof msg);
    } while (got < 0 && errno == EINTR);
    close(status[0]);
    if (got == ssize_t(sizeof msg)) {
        close(out[0]);
        close(err[0]);
        std::string text = msg[0] == 1   ? "dropping privileges"
                           : msg[0] == 2 ? "cwd " + cwd
                           : msg[0] == 4 ? "too many processes in the sandbox (limit 4096): "
                                           "end some, or wait for a runaway command's timeout"
                                         : "starting /bin/sh";
        sendError(f.id,
                  msg[1] == ENOENT || msg[1] == ENOTDIR ? ErrorCode::NotFound
                                                        : codeForErrno(msg[1]),
                  text + ": " + strerror(msg[1]));
        return; // the child is reaped with the others
    }
    auto e = std::make_unique<Exec>();
    e->pid = pid;
    e->fds[0] = out[0];
    e->fds[1] = err[0];
    setNonBlocking(out[0]);
    setNonBlocking(err[0]);
    e->cap = cap;
    e->startMs = nowMs();
    e->deadlineMs = timeoutMs > 0 ? e->startMs + timeoutMs : 0;
    e->cgroup = cgroup;
    execs_[f.id] = std::move(e);
}

void Agent::readOutput(uint32_t id, Exec &e, int s) {
    char buf[proto::kChunkSize];
    ssize_t n = read(e.fds[s], buf, sizeof buf);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    if (n <= 0) {
        close(e.fds[s]);
        e.fds[s] = -1;
        return;
    }
    e.total[s] += uint64_t(n);
    // Past the cap the bytes are read and dropped, so the command never
    // blocks on a full pipe and nothing accumulates here.
    if (e.sent[s] < e.cap) {
        size_t forward = size_t(std::min<uint64_t>(uint64_t(n), e.cap - e.sent[s]));
        e.sent[s] += forward;
        send(s == 0 ? Type::Stdout : Type::Stderr, id, std::string_view(buf, forward));
    }
}

void Agent::reapChildren() {
    signalfd_siginfo info;
    while (read(sigFd_, &info, sizeof info) > 0) {
    }
    int status = 0;
    pid_t pid;
    while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
        // Orphans (background processes whose parent ended) land on PID 1
        // and are reaped here too; only our direct children are reported.
        for (auto &[id, e] : execs_) {
            if (e->pid == pid) {
                e->exited = true;
                e->status = status;
            }
        }
    }
}

void Agent::finishExec(uint32_t id) {
    Exec &e = *execs_[id];
    // What the command wrote before it ended is in the pipes; take it, but
    // a background process that keeps writing must not hold the reply.
    for (int s = 0; s < 2; ++s) {
        for (int i = 0; i < 64 && e.fds[s] >= 0; ++i) {
            uint64_t before = e.total[s];
            readOutput(id, e, s);
            if (e.fds[s] >= 0 && e.total[s] == before)
                break; // nothing more right now
        }
        if (e.fds[s] >= 0) {
            close(e.fds[s]);
            e.fds[s] = -1;
        }
    }
    int code = WIFEXITED(e.status) ? WEXITSTATUS(e.status) : 128 + WTERMSIG(e.status);
    if (e.timedOut)
        code = 124;
    proto::PayloadWriter w;
    w.i32(code)
        .u8(e.timedOut ? 1 : 0)
        .u32(uint32_t(nowMs() - e.startMs))
        .u64(e.total[0])
        .u64(e.total[1]);
    send(Type::Exited, id, w.data());
    limits::release(e.cgroup); // after the reply: off the command's path
    execs_.erase(id);
}

void Agent::checkDeadlines() {
    long long now = nowMs();
    for (auto &[id, e] : execs_) {
        if (!e->exited && !e->timedOut && e->deadlineMs > 0 && now >= e->deadlineMs) {
            e->timedOut = true;
            kill(-e->pid, SIGKILL);
            limits::killAll(e->cgroup); // also what left the process group
        }
    }
}

void Agent::openUpload(const proto::Frame &f) {
    proto::PayloadReader r(f.payload);
    std::string path = r.bytes();
    uint32_t mode = r.u32();
    if (!r.ok() || !r.atEnd() || !validPath(path)) {
        sendError(f.id, ErrorCode::InvalidArgument, "path must be absolute");
        return;
    }
    SandboxOpen opened = openAsSandbox(path, OpenFor::Write, mode);
    if (opened.fd < 0) {
        sendError(f.id, codeForErrno(opened.err), opened.message);
        return;
    }
    const int fd = opened.fd;
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    auto u = std::make_unique<Upload>();
    u->fd = fd;
    uploads_[f.id] = std::move(u);
}

void Agent::openDownload(const proto::Frame &f) {
    proto::PayloadReader r(f.payload);
    std::string path = r.bytes();
    uint64_t limit = r.u64();
    if (!r.ok() || !r.atEnd() || !validPath(path)) {
        sendError(f.id, ErrorCode::InvalidArgument, "path must be absolute");
        return;
    }
    SandboxOpen opened = openAsSandbox(path, OpenFor::Read);
    if (opened.fd < 0) {
        sendError(f.id, codeForErrno(opened.err), opened.message);
        return;
    }
    const int fd = opened.fd;
    struct stat st {};
    if (fstat(fd, &st) != 0) {
        close(fd);
        sendError(f.id, codeForErrno(errno), path + ": " + strerror(errno));
        return;
    }
    if (uint64_t(st.st_size) > limit) {
        close(fd);
        sendError(f.id, ErrorCode::TooLarge,
                  path + ": " + std::to_string(st.st_size) + " bytes, limit " +
                      std::to_string(limit));
        return;
    }
    auto d = std::make_unique<Download>();
    d->fd = fd;
    d->limit = limit;
    downloads_[f.id] = std::move(d);
}

void Agent::pumpDownloads() {
    // One chunk per download per turn, so several transfers share the port.
    for (auto it = downloads_.begin(); it != downloads_.end() && outputRoom();) {
        Download &d = *it->second;
        char buf[proto::kChunkSize];
        ssize_t n = read(d.fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        bool finished = n <= 0;
        if (n > 0) {
            d.sent += uint64_t(n);
            if (d.sent > d.limit) {
                sendError(it->first, ErrorCode::TooLarge, "file grew past the size limit");
                finished = true;
            } else {
                send(Type::ReadData, it->first, std::string_view(buf, size_t(n)));
            }
        } else if (n == 0) {
            send(Type::Done, it->first, proto::PayloadWriter().u64(d.sent).data());
        } else {
            sendError(it->first, codeForErrno(errno), std::string("read: ") + strerror(errno));
        }
        if (finished) {
            close(d.fd);
            it = downloads_.erase(it);
        } else {
            ++it;
        }
    }
}

} // namespace sandcastle::agent
