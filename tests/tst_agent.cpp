// The real agent loop, in a child process on one end of a socket pair,
// driven from the other end: what a host session may see of another
// session's work, what the agent frees when a session ends, and the leaks
// and stalls its error paths used to have. The last test puts a real
// GuestChannel in front of it, through a stand-in for QEMU's socket.
// Commands and file opens run as uid 1000, so these tests need root.
#include "agent/agent.h"
#include "agent/protocol.h"
#include "agent/sandboxfile.h"
#include "guest/guestchannel.h"

#include <QDir>
#include <QFile>
#include <QLocalServer>
#include <QLocalSocket>
#include <QSocketNotifier>
#include <QTemporaryDir>
#include <QTest>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <set>

using namespace sandcastle;
using namespace sandcastle::proto;

namespace {

std::string helloPayload(uint64_t session) {
    return PayloadWriter().u64(session).data();
}

std::string execPayload(const std::string &command, const QString &cwd,
                        uint32_t timeoutMs = 30000) {
    return PayloadWriter()
        .u32(timeoutMs)
        .u32(1u << 20)
        .bytes(command)
        .bytes(cwd.toStdString())
        .u32(0)
        .data();
}

// /proc/<pid>/fd holds symbolic links: to files, and dangling ones (pipes,
// sockets).
constexpr QDir::Filters kAllFds = QDir::AllEntries | QDir::System | QDir::NoDotAndDotDot;

/// The agent's loop in a child process; the test is its host.
class AgentProcess {
public:
    AgentProcess() {
        int sv[2];
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
            qFatal("socketpair: %s", strerror(errno));
        pid = fork();
        if (pid == 0)
            serve(sv[1]);
        close(sv[1]);
        host = sv[0];
        fcntl(host, F_SETFL, fcntl(host, F_GETFL) | O_NONBLOCK);
    }
    ~AgentProcess() {
        kill(pid, SIGKILL);
        waitpid(pid, nullptr, 0);
        closeHost();
    }

    void send(Type type, uint32_t id, std::string_view payload = {}) {
        sendRaw(encodeFrame(type, id, payload));
    }
    void sendRaw(std::string_view bytes) {
        size_t off = 0;
        while (off < bytes.size()) {
            pollfd p{host, POLLOUT, 0};
            poll(&p, 1, 1000);
            ssize_t n = write(host, bytes.data() + off, bytes.size() - off);
            if (n > 0)
                off += size_t(n);
            else if (n < 0 && errno != EAGAIN && errno != EINTR)
                qFatal("write to the agent: %s", strerror(errno));
        }
    }

    /// Reads frames into `frames` until one satisfies `until` (true) or
    /// `ms` pass (false). Frames read before are not looked at again.
    bool readUntil(const std::function<bool(const Frame &)> &until, int ms = 10000) {
        auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
        for (;;) {
            Frame f;
            while (reader_.next(f)) {
                frames.push_back(f);
                if (until(f))
                    return true;
            }
            auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                end - std::chrono::steady_clock::now());
            if (left.count() <= 0)
                return false;
            pollfd p{host, POLLIN, 0};
            poll(&p, 1, int(left.count()));
            char buf[65536];
            ssize_t n = read(host, buf, sizeof buf);
            if (n > 0)
                reader_.feed(buf, size_t(n));
        }
    }
    /// Reads whatever arrives for `ms`.
    void drain(int ms) {
        readUntil([](const Frame &) { return false; }, ms);
    }

    /// Starts a session and waits for its Ready; returns the Ready frame.
    Frame hello(uint32_t id, uint64_t session) {
        send(Type::Hello, id, helloPayload(session));
        Frame ready;
        readUntil([&](const Frame &f) {
            if (f.type == Type::Ready && f.id == id)
                ready = f;
            return f.type == Type::Ready && f.id == id;
        });
        return ready;
    }

    /// How many of the agent's descriptors are open on `path`.
    int descriptorsOn(const QString &path) const {
        int n = 0;
        const QString dir = QStringLiteral("/proc/%1/fd").arg(pid);
        for (const QString &fd : QDir(dir).entryList(kAllFds)) {
            if (QFile::symLinkTarget(dir + QLatin1Char('/') + fd) == path)
                ++n;
        }
        return n;
    }
    std::set<int> descriptors() const {
        std::set<int> out;
        const QString dir = QStringLiteral("/proc/%1/fd").arg(pid);
        for (const QString &fd : QDir(dir).entryList(kAllFds))
            out.insert(fd.toInt());
        return out;
    }

    void closeHost() {
        if (host >= 0)
            close(host);
        host = -1;
    }

    pid_t pid = -1;
    int host = -1;
    std::vector<Frame> frames;

private:
    [[noreturn]] static void serve(int port) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        signal(SIGPIPE, SIG_IGN);
        // Only the port: a copy of the test's descriptors (the host end
        // included) would keep the agent from ever seeing the host go.
        dup2(port, 3);
        close_range(4, ~0U, 0);
        fcntl(3, F_SETFL, fcntl(3, F_GETFL) | O_NONBLOCK);
        agent::Agent agent(3);
        _exit(agent.run());
    }
    FrameReader reader_;
};

std::string stdoutOf(const std::vector<Frame> &frames, uint32_t id, size_t from = 0) {
    std::string out;
    for (size_t i = from; i < frames.size(); ++i) {
        if (frames[i].type == Type::Stdout && frames[i].id == id)
            out += frames[i].payload;
    }
    return out;
}

QString errorText(const Frame &f) {
    PayloadReader r(f.payload);
    r.u32();
    return QString::fromStdString(r.bytes());
}

bool waitFor(const std::function<bool()> &condition, int ms) {
    return QTest::qWaitFor(condition, ms);
}

/// Stands in for QEMU: a UNIX socket a GuestChannel connects to, bridged to
/// the agent's port. The port stays open from one host connection to the
/// next, as a virtio port does, so the agent need not notice a reconnect.
class Bridge : public QObject {
public:
    Bridge(AgentProcess &agent, const QString &path)
        : agent_(agent)
        , notifier_(agent.host, QSocketNotifier::Read) {
        server_.listen(path);
        connect(&server_, &QLocalServer::newConnection, this, [this] {
            conn_ = server_.nextPendingConnection();
            delivered.emplace_back();
            readers_.emplace_back();
            connect(conn_, &QLocalSocket::readyRead, this, [this, c = conn_] {
                const QByteArray data = c->readAll();
                agent_.sendRaw(std::string_view(data.constData(), size_t(data.size())));
            });
        });
        connect(&notifier_, &QSocketNotifier::activated, this, [this] { fromAgent(); });
    }
    /// Frames each host connection got, in order of connection.
    std::vector<std::vector<Frame>> delivered;

private:
    void fromAgent() {
        char buf[65536];
        ssize_t n = read(agent_.host, buf, sizeof buf);
        if (n <= 0)
            return;
        if (!conn_ || conn_->state() != QLocalSocket::ConnectedState)
            return; // nobody connected: the bytes go nowhere
        conn_->write(buf, n);
        readers_.back().feed(buf, size_t(n));
        Frame f;
        while (readers_.back().next(f))
            delivered.back().push_back(f);
    }
    AgentProcess &agent_;
    QLocalServer server_;
    QLocalSocket *conn_ = nullptr;
    QSocketNotifier notifier_;
    std::vector<FrameReader> readers_;
};

} // namespace

class TestAgent : public QObject {
    Q_OBJECT
private:
    QTemporaryDir dir;
    QString file(const QString &name) const { return dir.filePath(name); }

private slots:
    void initTestCase() {
        if (geteuid() != 0)
            QSKIP("the agent runs commands and opens files as uid 1000: needs root");
        QVERIFY(dir.isValid());
        // Commands and the files helper run as uid 1000.
        QVERIFY(
            QFile::setPermissions(dir.path(), QFileDevice::ReadOwner | QFileDevice::WriteOwner |
                                                  QFileDevice::ExeOwner | QFileDevice::ReadOther |
                                                  QFileDevice::WriteOther | QFileDevice::ExeOther));
    }

    // Defect: a new session numbers its requests from 1 again, and the
    // agent kept the old session's commands under the same ids.
    void aNewSessionNeverSeesTheOldOnesCommands() {
        AgentProcess agent;
        QCOMPARE(agent.hello(100, 0x1111).type, Type::Ready);
        const QString done = file(QStringLiteral("old-done"));
        agent.send(Type::Exec, 1,
                   execPayload("echo OLD-START; sleep 2; echo OLD-END; touch " + done.toStdString(),
                               dir.path()));
        QVERIFY(agent.readUntil([](const Frame &f) {
            return f.type == Type::Stdout && f.payload.find("OLD-START") != std::string::npos;
        }));

        // A new host (the service restarted) that the agent did not see go.
        const Frame ready = agent.hello(100, 0x2222);
        QCOMPARE(ready.type, Type::Ready);
        const size_t sessionStart = agent.frames.size();
        agent.send(Type::Exec, 1, execPayload("echo NEW", dir.path()));
        Frame answer;
        QVERIFY(agent.readUntil([&](const Frame &f) {
            if (f.id == 1 && (f.type == Type::Exited || f.type == Type::Error))
                answer = f;
            return f.id == 1 && (f.type == Type::Exited || f.type == Type::Error);
        }));
        QVERIFY2(answer.type == Type::Exited, qPrintable(errorText(answer)));
        QCOMPARE(stdoutOf(agent.frames, 1, sessionStart), std::string("NEW\n"));

        // The old command runs to its end, and nothing of it reaches the new
        // session.
        QVERIFY(waitFor([&] { return QFile::exists(done); }, 15000));
        agent.drain(300);
        int exits = 0;
        for (size_t i = sessionStart; i < agent.frames.size(); ++i) {
            QVERIFY2(agent.frames[i].payload.find("OLD") == std::string::npos,
                     "the old session's output reached the new one");
            exits += agent.frames[i].type == Type::Exited;
        }
        QCOMPARE(exits, 1);

        // Ready names the session it answers.
        PayloadReader r(ready.payload);
        QCOMPARE(r.u32(), uint32_t(kVersion));
        r.bytes();
        QCOMPARE(r.u64(), uint64_t(0x2222));
        QVERIFY(r.ok());
    }

    void aRepeatedHelloKeepsTheSession() {
        AgentProcess agent;
        agent.hello(100, 0x1111);
        agent.send(Type::Exec, 1, execPayload("sleep 1; echo STILL-MINE", dir.path()));
        agent.hello(101, 0x1111); // e.g. a Hello sent again after an unsolicited Ready
        QVERIFY(
            agent.readUntil([](const Frame &f) { return f.type == Type::Exited && f.id == 1; }));
        QCOMPARE(stdoutOf(agent.frames, 1), std::string("STILL-MINE\n"));
    }

    void requestsNeedASession() {
        AgentProcess agent;
        agent.send(Type::Exec, 1, execPayload("echo NO", dir.path()));
        Frame answer;
        QVERIFY(agent.readUntil([&](const Frame &f) {
            answer = f;
            return f.id == 1;
        }));
        QCOMPARE(answer.type, Type::Error);
        agent.send(Type::Ping, 2);
        QVERIFY(agent.readUntil([](const Frame &f) { return f.type == Type::Pong && f.id == 2; }));
    }

    // Defect: the agent kept uploads and downloads open when the host
    // went away, and a new session never closed them either.
    void hostGoneReleasesTransfers() {
        AgentProcess agent;
        const QString up = file(QStringLiteral("upload")), down = file(QStringLiteral("download"));
        openTransfers(agent, up, down);
        if (QTest::currentTestFailed())
            return;
        agent.closeHost();
        QVERIFY2(waitFor([&] { return agent.descriptorsOn(up) == 0; }, 3000),
                 "the upload stayed open after the host went");
        QVERIFY2(waitFor([&] { return agent.descriptorsOn(down) == 0; }, 3000),
                 "the download stayed open after the host went");
    }

    void aNewSessionReleasesTransfers() {
        AgentProcess agent;
        const QString up = file(QStringLiteral("upload2")),
                      down = file(QStringLiteral("download2"));
        openTransfers(agent, up, down);
        if (QTest::currentTestFailed())
            return;
        // Reads nothing meanwhile: the download is held up by backpressure,
        // so only the session's end can close it.
        agent.send(Type::Hello, 100, helloPayload(0x2222));
        QVERIFY2(waitFor([&] { return agent.descriptorsOn(up) == 0; }, 3000),
                 "the upload stayed open into the next session");
        QVERIFY2(waitFor([&] { return agent.descriptorsOn(down) == 0; }, 3000),
                 "the download stayed open into the next session");
    }

    void cancelAbandonsAnUpload() {
        AgentProcess agent;
        agent.hello(100, 0x1111);
        const QString up = file(QStringLiteral("cancelled"));
        agent.send(Type::WriteOpen, 5, PayloadWriter().bytes(up.toStdString()).u32(0644).data());
        agent.send(Type::Ping, 6);
        QVERIFY(agent.readUntil([](const Frame &f) { return f.type == Type::Pong; }));
        QCOMPARE(agent.descriptorsOn(up), 1);
        agent.send(Type::Cancel, 5);
        QVERIFY(waitFor([&] { return agent.descriptorsOn(up) == 0; }, 3000));
    }

    // Defect: when the second pipe2 failed, the first pipe stayed open.
    void aPartialPipeFailureLeaksNothing() {
        AgentProcess agent;
        agent.hello(100, 0x1111);
        const std::set<int> before = agent.descriptors();
        // Room for exactly one pipe: the stdout pipe opens, stderr's fails.
        int free1 = -1, free2 = -1;
        for (int fd = 0; free2 < 0; ++fd) {
            if (before.count(fd))
                continue;
            (free1 < 0 ? free1 : free2) = fd;
        }
        rlimit old{};
        QCOMPARE(prlimit(agent.pid, RLIMIT_NOFILE, nullptr, &old), 0);
        rlimit tight = old;
        tight.rlim_cur = rlim_t(free2 + 1);
        QCOMPARE(prlimit(agent.pid, RLIMIT_NOFILE, &tight, nullptr), 0);
        agent.send(Type::Exec, 3, execPayload("true", dir.path()));
        Frame answer;
        const bool answered = agent.readUntil([&](const Frame &f) {
            answer = f;
            return f.id == 3;
        });
        QCOMPARE(prlimit(agent.pid, RLIMIT_NOFILE, &old, nullptr), 0);
        QVERIFY(answered);
        QCOMPARE(answer.type, Type::Error);
        QVERIFY2(errorText(answer).contains(QStringLiteral("pipe")), qPrintable(errorText(answer)));
        QCOMPARE(agent.descriptors(), before);
    }

    void aCommandThatCannotStartReportsOnlyTheError() {
        AgentProcess agent;
        agent.hello(100, 0x1111);
        agent.send(Type::Exec, 4, execPayload("true", file(QStringLiteral("no-such-dir"))));
        Frame answer;
        QVERIFY(agent.readUntil([&](const Frame &f) {
            answer = f;
            return f.id == 4;
        }));
        QCOMPARE(answer.type, Type::Error);
        QCOMPARE(PayloadReader(answer.payload).u32(), uint32_t(ErrorCode::NotFound));
        agent.drain(500);
        for (const Frame &f : agent.frames)
            QVERIFY(!(f.type == Type::Exited && f.id == 4));
        // The agent still serves.
        agent.send(Type::Exec, 5, execPayload("echo fine", dir.path()));
        QVERIFY(
            agent.readUntil([](const Frame &f) { return f.type == Type::Exited && f.id == 5; }));
        QCOMPARE(stdoutOf(agent.frames, 5), std::string("fine\n"));
    }

    // Defect: the agent waited for its files helper (uid 1000, so the
    // sandbox user may stop it) up to 10 s, then without bound.
    void aStoppedHelperBeforeItAnswers() {
        int pair[2];
        QCOMPARE(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair), 0);
        const pid_t pid = fork();
        if (pid == 0) {
            raise(SIGSTOP);
            _exit(0);
        }
        close(pair[1]);
        auto start = std::chrono::steady_clock::now();
        const int result = agent::collectHelper(pid, pair[0], 300);
        auto took = std::chrono::steady_clock::now() - start;
        close(pair[0]);
        QCOMPARE(result, -ETIMEDOUT);
        QVERIFY(took < std::chrono::seconds(2));
        expectKilled(pid);
    }

    void aStoppedHelperAfterItAnswered() {
        int pair[2];
        QCOMPARE(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair), 0);
        const pid_t pid = fork();
        if (pid == 0) {
            const int code = -ENOENT;
            [[maybe_unused]] auto n = ::send(pair[1], &code, sizeof code, MSG_NOSIGNAL);
            raise(SIGSTOP); // before its exit: a blocking waitpid would never return
            _exit(0);
        }
        close(pair[1]);
        auto start = std::chrono::steady_clock::now();
        const int result = agent::collectHelper(pid, pair[0], 5000);
        auto took = std::chrono::steady_clock::now() - start;
        close(pair[0]);
        QCOMPARE(result, -ENOENT);
        QVERIFY(took < std::chrono::seconds(2));
        expectKilled(pid);
    }

    // Defect 1 end to end: the service restarts (a new GuestChannel) while
    // a command runs; the new channel's first exec gets the old one's id.
    void reconnectWithACommandStillRunning() {
        AgentProcess agent;
        const QString socketPath = file(QStringLiteral("agent.sock"));
        Bridge bridge(agent, socketPath);
        const QString done = file(QStringLiteral("old-command-done"));

        auto *first = new GuestChannel(socketPath);
        auto hello = first->connectToAgent(5000);
        QTRY_VERIFY_WITH_TIMEOUT(hello.isFinished(), 10000);
        QVERIFY(hello.result().has_value());
        auto old = first->exec(
            ExecRequest{QStringLiteral("echo OLD-START; sleep 2; echo OLD-END; touch ") + done,
                        dir.path(),
                        {},
                        30000});
        QTRY_VERIFY_WITH_TIMEOUT(std::any_of(bridge.delivered[0].begin(), bridge.delivered[0].end(),
                                             [](const Frame &f) { return f.type == Type::Stdout; }),
                                 10000);
        const uint32_t oldId = std::find_if(bridge.delivered[0].begin(), bridge.delivered[0].end(),
                                            [](const Frame &f) { return f.type == Type::Stdout; })
                                   ->id;
        delete first;
        QTRY_VERIFY_WITH_TIMEOUT(old.isFinished(), 5000);

        GuestChannel second(socketPath);
        auto again = second.connectToAgent(5000);
        QTRY_VERIFY_WITH_TIMEOUT(again.isFinished(), 10000);
        QVERIFY(again.result().has_value());
        auto fresh =
            second.exec(ExecRequest{QStringLiteral("sleep 3; echo NEW"), dir.path(), {}, 30000});
        QTRY_VERIFY_WITH_TIMEOUT(fresh.isFinished(), 15000);
        auto r = fresh.result();
        QVERIFY2(r.has_value(), qPrintable(r ? QString() : r.error().message));
        QCOMPARE(r->stdoutData, QByteArray("NEW\n"));
        QCOMPARE(r->exitCode, 0);

        QVERIFY(QFile::exists(done)); // the old command ran to its end
        bool sawOldId = false;
        for (const Frame &f : bridge.delivered[1]) {
            QVERIFY2(f.payload.find("OLD") == std::string::npos,
                     "the old command's output reached the new channel");
            sawOldId = sawOldId || (f.id == oldId && f.type == Type::Exited);
        }
        QVERIFY(sawOldId); // the ids did collide: the new exec had the old one's
    }

private:
    /// Opens an upload and a download, and leaves both open.
    void openTransfers(AgentProcess &agent, const QString &up, const QString &down) {
        agent.hello(100, 0x1111);
        QFile big(down);
        // Sparse and far larger than any buffer: read through, it would keep
        // the download open for a minute.
        QVERIFY(big.open(QIODevice::WriteOnly));
        QVERIFY(big.resize(64ll << 30));
        big.close();
        agent.send(Type::WriteOpen, 5, PayloadWriter().bytes(up.toStdString()).u32(0644).data());
        agent.send(Type::WriteData, 5, "partial");
        agent.send(Type::ReadOpen, 6,
                   PayloadWriter().bytes(down.toStdString()).u64(1ull << 40).data());
        QVERIFY(waitFor([&] { return agent.descriptorsOn(up) == 1; }, 5000));
        QVERIFY(waitFor([&] { return agent.descriptorsOn(down) == 1; }, 5000));
    }

    static void expectKilled(pid_t pid) {
        int status = 0;
        pid_t got = 0;
        for (int i = 0; i < 100 && got == 0; ++i) {
            got = waitpid(pid, &status, WNOHANG);
            if (got == 0)
                usleep(10000);
        }
        QCOMPARE(got, pid);
        QVERIFY(WIFSIGNALED(status));
        QCOMPARE(WTERMSIG(status), SIGKILL);
    }
};

QTEST_GUILESS_MAIN(TestAgent)
#include "tst_agent.moc"
