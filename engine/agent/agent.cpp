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
#include <utility>
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

void closeFd(int &fd) {
    if (fd >= 0)
        close(fd);
    fd = -1;
}

/// Opens `n` close-on-exec pipes, or none: a failure closes those already
/// opened (errno is the failure's).
bool openPipes(int (*pipes)[2], int n) {
    for (int i = 0; i < n; ++i) {
        if (pipe2(pipes[i], O_CLOEXEC) == 0)
            continue;
        const int err = errno;
        for (int j = 0; j < i; ++j) {
            close(pipes[j][0]);
            close(pipes[j][1]);
        }
        errno = err;
        return false;
    }
    return true;
}

/// Why a command's child could not exec, as the status pipe reports it.
std::string startFailure(int stage, const std::string &cwd) {
    switch (stage) {
    case 1:
        return "dropping privileges";
    case 2:
        return "cwd " + cwd;
    case 4:
        return "too many processes in the sandbox (limit 4096): end some, or wait for a "
               "runaway command's timeout";
    default:
        return "starting /bin/sh";
    }
}

/// The forked child of an exec: a new session (its own process group,
/// killed as one), stdin at /dev/null, the command's cgroup, the
/// unprivileged user, then the shell. On failure it writes {stage, errno}
/// to the status pipe, which otherwise closes on exec.
[[noreturn]] void runCommand(int out, int err, int status, const std::string &cgroup,
                             const std::string &cwd, std::string &command,
                             std::vector<char *> &envp) {
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    signal(SIGPIPE, SIG_DFL);
    setsid();
    // Close-on-exec: only its copy at fd 0 reaches the command.
    const int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (devnull < 0 || dup2(devnull, 0) < 0)
        close(0); // no stdin rather than the agent's own
    dup2(out, 1);
    dup2(err, 2);
    auto fail = [&](int stage) {
        int msg[2] = {stage, errno};
        ssize_t ignored = write(status, msg, sizeof msg);
        (void)ignored;
        _exit(127);
    };
    // Into the command's cgroup while still root (the files are root's).
    if (!limits::enter(cgroup))
        fail(4);
    if (setgroups(0, nullptr) != 0 || setgid(kSandboxGid) != 0 || setuid(kSandboxUid) != 0)
        fail(1);
    if (chdir(cwd.c_str()) != 0)
        fail(2);
    char *argv[] = {const_cast<char *>("sh"), const_cast<char *>("-c"), command.data(), nullptr};
    execve("/bin/sh", argv, envp.data());
    fail(3);
    _exit(127); // not reached: fail() exits
}

} // namespace

struct Agent::Exec {
    uint32_t id = 0;       // the request, in the session that started it
    bool detached = false; // nobody to report to: its session ended, or it never started
    pid_t pid = -1;
    int statusFd = -1;     // open until the child has exec'd or said why it could not
    std::string cwd;       // for the message if it could not
    int fds[2] = {-1, -1}; // stdout, stderr
    uint64_t cap = 0;
    uint64_t sent[2] = {0, 0};
    uint64_t total[2] = {0, 0};
    long long startMs = 0;
    long long deadlineMs = 0;
    bool timedOut = false;
    bool exited = false;
    int waitStatus = 0;
    std::string cgroup; // empty: no limits in this guest
    ~Exec() {
        closeFd(statusFd);
        closeFd(fds[0]);
        closeFd(fds[1]);
    }
};

// Transfers own their descriptor: whichever way one ends, erasing it closes it.
struct Agent::Upload {
    int fd = -1;
    uint64_t written = 0;
    ~Upload() { closeFd(fd); }
};

struct Agent::Download {
    int fd = -1;
    uint64_t limit = 0;
    uint64_t sent = 0;
    ~Download() { closeFd(fd); }
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

std::string Agent::readyPayload() const {
    return proto::PayloadWriter().u32(proto::kVersion).bytes(kAgentVersion).u64(session_).data();
}

bool Agent::outputRoom() const {
    return out_.size() - outPos_ < kOutHighWater;
}

int Agent::run(const std::function<void()> &afterReady) {
    send(Type::Ready, 0, readyPayload());
    flushPort();
    if (afterReady)
        afterReady();
    std::vector<pollfd> fds;
    std::vector<std::pair<uint64_t, int>> owners; // exec serial and stream per pollfd
    for (;;) {
        fds.clear();
        owners.clear();
        long long now = nowMs();
        bool watchPort = hostConnected_ || now >= nextPortCheckMs_;
        short portEvents = POLLIN | (outPos_ < out_.size() ? POLLOUT : 0);
        fds.push_back({watchPort ? port_ : -1, portEvents, 0});
        fds.push_back({sigFd_, POLLIN, 0});
        int timeout = -1;
        for (auto &[serial, e] : execs_) {
            // Stream 2 is the status pipe. A detached command's output is
            // dropped, so it never waits for room.
            for (int s = 0; s < 3; ++s) {
                int fd = s < 2 ? e->fds[s] : e->statusFd;
                if (fd >= 0 && (s == 2 || e->detached || outputRoom())) {
                    fds.push_back({fd, POLLIN, 0});
                    owners.emplace_back(serial, s);
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
                if (it == execs_.end())
                    continue;
                if (owners[i - 2].second == 2)
                    checkStarted(*it->second);
                else
                    readOutput(*it->second, owners[i - 2].second);
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
    // The host closed its end, and with it its session. Keep every command
    // running; drop what was queued for the old connection and any
    // half-read frame, so a new host starts on a frame boundary.
    hostConnected_ = false;
    nextPortCheckMs_ = nowMs() + kPortRetryMs;
    out_.clear();
    outPos_ = 0;
    reader_ = proto::FrameReader();
    endSession();
}

void Agent::endSession() {
    // Nobody will ask for the ended session's work again, and a new session
    // may reuse its request ids: commands run on to their end (their
    // timeout still holds) but report to nobody; transfers are abandoned.
    for (auto &[serial, e] : execs_)
        e->detached = true;
    uploads_.clear();
    downloads_.clear();
    session_ = 0;
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
    if (f.type == Type::Hello) {
        hello(f);
        return;
    }
    if (f.type == Type::Ping) {
        send(Type::Pong, f.id);
        return;
    }
    if (session_ == 0) {
        // Work without a session could not be told apart from the next
        // session's, whose ids it may share.
        sendError(f.id, ErrorCode::InvalidArgument, "no session: send Hello first");
        return;
    }
    switch (f.type) {
    case Type::Exec:
        startExec(f);
        break;
    case Type::Cancel:
        cancel(f.id);
        break;
    case Type::WriteOpen:
        openUpload(f);
        break;
    case Type::WriteData:
        writeData(f);
        break;
    case Type::WriteClose:
        closeUpload(f.id);
        break;
    case Type::ReadOpen:
        openDownload(f);
        break;
    default:
        sendError(f.id, ErrorCode::UnknownType,
                  "unknown frame type " + std::to_string(int(f.type)));
    }
}

void Agent::hello(const proto::Frame &f) {
    proto::PayloadReader r(f.payload);
    const uint64_t session = r.u64();
    if (!r.ok() || !r.atEnd() || session == 0) {
        sendError(f.id, ErrorCode::Malformed, "hello must name a session");
        return;
    }
    // The same session may say Hello twice (after our announcement); only
    // another one ends the current session's work.
    if (session != session_) {
        endSession();
        session_ = session;
    }
    send(Type::Ready, f.id, readyPayload());
}

void Agent::cancel(uint32_t id) {
    if (Exec *e = findExec(id); e && !e->exited) {
        kill(-e->pid, SIGKILL);
        kill(e->pid, SIGKILL); // not yet a group leader if it is still starting
        limits::killAll(e->cgroup);
    }
    uploads_.erase(id);
    downloads_.erase(id);
}

void Agent::writeData(const proto::Frame &f) {
    auto it = uploads_.find(f.id);
    if (it == uploads_.end())
        return;
    Upload &u = *it->second;
    size_t off = 0;
    while (off < f.payload.size()) {
        ssize_t n = write(u.fd, f.payload.data() + off, f.payload.size() - off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            int err = n < 0 ? errno : EIO;
            sendError(f.id, codeForErrno(err), std::string("write: ") + strerror(err));
            uploads_.erase(it);
            return;
        }
        off += size_t(n);
    }
    u.written += off;
}

void Agent::closeUpload(uint32_t id) {
    auto it = uploads_.find(id);
    if (it == uploads_.end())
        return;
    uint64_t written = it->second->written;
    if (close(std::exchange(it->second->fd, -1)) != 0)
        sendError(id, codeForErrno(errno), std::string("close: ") + strerror(errno));
    else
        send(Type::Done, id, proto::PayloadWriter().u64(written).data());
    uploads_.erase(it);
}

Agent::Exec *Agent::findExec(uint32_t id) {
    for (auto &[serial, e] : execs_) {
        if (e->id == id && !e->detached)
            return e.get();
    }
    return nullptr;
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
    if (findExec(f.id)) {
        sendError(f.id, ErrorCode::InvalidArgument, "request id already in use");
        return;
    }
    if (cwd.empty())
        cwd = "/home/sandbox";

    int pipes[3][2]; // stdout, stderr, exec status
    if (!openPipes(pipes, 3)) {
        sendError(f.id, ErrorCode::Io, std::string("pipe: ") + strerror(errno));
        return;
    }
    std::vector<char *> envp;
    for (auto &s : env)
        envp.push_back(s.data());
    envp.push_back(nullptr);

    const uint64_t serial = ++execSerial_;
    const std::string cgroup = limits::createFor(serial);
    pid_t pid = fork();
    if (pid == 0)
        runCommand(pipes[0][1], pipes[1][1], pipes[2][1], cgroup, cwd, command, envp);
    const int forkErr = errno;
    for (auto &p : pipes)
        close(p[1]);
    if (pid < 0) {
        for (auto &p : pipes)
            close(p[0]);
        limits::release(cgroup);
        sendError(f.id, ErrorCode::Io, std::string("fork: ") + strerror(forkErr));
        return;
    }
    // Whether the exec happened comes on the status pipe, read in the loop:
    // the child is the sandbox user's before it execs, and a stopped child
    // must not stop the agent.
    auto e = std::make_unique<Exec>();
    e->id = f.id;
    e->pid = pid;
    e->statusFd = pipes[2][0];
    e->cwd = cwd;
    e->fds[0] = pipes[0][0];
    e->fds[1] = pipes[1][0];
    for (auto &p : pipes)
        setNonBlocking(p[0]);
    e->cap = cap;
    e->startMs = nowMs();
    e->deadlineMs = timeoutMs > 0 ? e->startMs + timeoutMs : 0;
    e->cgroup = cgroup;
    execs_[serial] = std::move(e);
}

void Agent::checkStarted(Exec &e) {
    int msg[2] = {0, 0};
    ssize_t got = read(e.statusFd, msg, sizeof msg);
    if (got < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    closeFd(e.statusFd);
    if (got != ssize_t(sizeof msg))
        return; // closed on exec: the command runs
    // It never ran: the error is the answer. The entry stays, detached,
    // until the child is reaped, so its cgroup is released then.
    closeFd(e.fds[0]);
    closeFd(e.fds[1]);
    if (!e.detached)
        sendError(e.id,
                  msg[1] == ENOENT || msg[1] == ENOTDIR ? ErrorCode::NotFound
                                                        : codeForErrno(msg[1]),
                  startFailure(msg[0], e.cwd) + ": " + strerror(msg[1]));
    e.detached = true;
}

void Agent::readOutput(Exec &e, int s) {
    char buf[proto::kChunkSize];
    ssize_t n = read(e.fds[s], buf, sizeof buf);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    if (n <= 0) {
        closeFd(e.fds[s]);
        return;
    }
    e.total[s] += uint64_t(n);
    // Past the cap the bytes are read and dropped, so the command never
    // blocks on a full pipe and nothing accumulates here.
    if (e.sent[s] < e.cap && !e.detached) {
        size_t forward = size_t(std::min<uint64_t>(uint64_t(n), e.cap - e.sent[s]));
        e.sent[s] += forward;
        send(s == 0 ? Type::Stdout : Type::Stderr, e.id, std::string_view(buf, forward));
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
        // and are reaped here too, as are the files helpers; only our
        // commands are reported.
        for (auto &[serial, e] : execs_) {
            if (e->pid == pid) {
                e->exited = true;
                e->waitStatus = status;
            }
        }
    }
}

void Agent::finishExec(uint64_t serial) {
    Exec &e = *execs_[serial];
    // A child that ended has written its status, if any: an exec that
    // failed answers with the error, not with an exit code.
    if (e.statusFd >= 0)
        checkStarted(e);
    // What the command wrote before it ended is in the pipes; take it, but
    // a background process that keeps writing must not hold the reply.
    for (int s = 0; s < 2; ++s) {
        for (int i = 0; i < 64 && e.fds[s] >= 0; ++i) {
            uint64_t before = e.total[s];
            readOutput(e, s);
            if (e.fds[s] >= 0 && e.total[s] == before)
                break; // nothing more right now
        }
        closeFd(e.fds[s]);
    }
    if (!e.detached) {
        int code =
            WIFEXITED(e.waitStatus) ? WEXITSTATUS(e.waitStatus) : 128 + WTERMSIG(e.waitStatus);
        if (e.timedOut)
            code = 124;
        proto::PayloadWriter w;
        w.i32(code)
            .u8(e.timedOut ? 1 : 0)
            .u32(uint32_t(nowMs() - e.startMs))
            .u64(e.total[0])
            .u64(e.total[1]);
        send(Type::Exited, e.id, w.data());
    }
    limits::release(e.cgroup); // after the reply: off the command's path
    execs_.erase(serial);
}

void Agent::checkDeadlines() {
    long long now = nowMs();
    for (auto &[serial, e] : execs_) {
        if (!e->exited && !e->timedOut && e->deadlineMs > 0 && now >= e->deadlineMs) {
            e->timedOut = true;
            kill(-e->pid, SIGKILL);
            kill(e->pid, SIGKILL);      // not yet a group leader if it is still starting
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
            it = downloads_.erase(it);
        } else {
            ++it;
        }
    }
}

} // namespace sandcastle::agent
