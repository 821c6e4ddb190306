// The host side of the agent protocol against a scripted peer on a local
// socket. The real agent is tested in tst_engine_vm (and its loop in
// tst_agent); this suite covers what a real agent never does on purpose:
// ignoring the output cap, sending garbage, vanishing mid-request, never
// answering, or answering for an earlier host session.
#include "guest/guestchannel.h"

#include <QLocalServer>
#include <QLocalSocket>
#include <QTemporaryDir>
#include <QTest>

#include <functional>

using namespace sandcastle;
using namespace sandcastle::proto;

namespace {

/// A peer that answers Hello and then does whatever the test scripts.
class StubAgent : public QObject {
    Q_OBJECT
public:
    explicit StubAgent(const QString &path) {
        server.listen(path);
        connect(&server, &QLocalServer::newConnection, this, [this] {
            peer = server.nextPendingConnection();
            connect(peer, &QLocalSocket::readyRead, this, [this] {
                QByteArray data = peer->readAll();
                reader.feed(data.constData(), size_t(data.size()));
                Frame f;
                while (reader.next(f)) {
                    if (f.type != Type::Hello) {
                        received.push_back(f);
                        continue;
                    }
                    sessions.push_back(PayloadReader(f.payload).u64());
                    if (onHello)
                        onHello(f);
                    else if (answerHello)
                        ready(f.id, sessions.back());
                }
            });
        });
    }
    void send(Type t, uint32_t id, std::string_view payload = {}) {
        std::string frame = encodeFrame(t, id, payload);
        peer->write(frame.data(), qint64(frame.size()));
        peer->flush();
    }
    void ready(uint32_t id, uint64_t session, uint32_t version = kVersion) {
        send(Type::Ready, id, PayloadWriter().u32(version).bytes("stub").u64(session).data());
    }
    QLocalServer server;
    QLocalSocket *peer = nullptr;
    FrameReader reader;
    std::vector<Frame> received;
    bool answerHello = true;
    std::function<void(const Frame &hello)> onHello; // instead of the plain answer
    std::vector<uint64_t> sessions;                  // what each Hello named
};

/// Deadlines short enough for a test; none of them is meant to fire unless
/// the test says so.
GuestChannel::Deadlines shortDeadlines() {
    GuestChannel::Deadlines d;
    d.pingMs = 300;
    d.fileFloorMs = 300;
    d.fileMsPerMiB = 0;
    return d;
}

bool cancelled(const StubAgent &agent, uint32_t id) {
    return std::any_of(agent.received.begin(), agent.received.end(),
                       [&](const Frame &f) { return f.type == Type::Cancel && f.id == id; });
}

template <typename T> T await(QFuture<T> f) {
    if (!QTest::qWaitFor([&] { return f.isFinished(); }, 10000))
        qFatal("future did not finish");
    return f.result();
}

} // namespace

class TestGuestChannel : public QObject {
    Q_OBJECT
private:
    QTemporaryDir dir;
    QString path() const { return dir.filePath(QStringLiteral("agent.sock")); }

private slots:
    void connectsWhenTheSocketAppearsLater() {
        GuestChannel channel(path());
        auto hello = channel.connectToAgent(5000);
        QTest::qWait(200); // the socket does not exist yet; the channel retries
        StubAgent agent(path());
        auto version = await(hello);
        QVERIFY2(version.has_value(), qPrintable(version ? QString() : version.error().message));
        QCOMPARE(*version, QStringLiteral("stub"));
        QVERIFY(channel.isConnected());
    }

    void helloTimesOut() {
        StubAgent agent(path());
        agent.answerHello = false;
        GuestChannel channel(path());
        auto r = await(channel.connectToAgent(300));
        QVERIFY(!r);
        QCOMPARE(int(r.error().kind), int(EngineError::Kind::Timeout));
    }

    void capHoldsAgainstAGuestThatIgnoresIt() {
        StubAgent agent(path());
        GuestChannel channel(path());
        QVERIFY(await(channel.connectToAgent(5000)).has_value());
        ExecRequest req{QStringLiteral("yes"), {}, {}, 1000, 1000};
        auto f = channel.exec(req);
        QVERIFY(QTest::qWaitFor([&] { return !agent.received.empty(); }, 5000));
        const uint32_t id = agent.received.back().id;
        for (int i = 0; i < 10; ++i)
            agent.send(Type::Stdout, id, std::string(600, 'y'));
        agent.send(Type::Exited, id, PayloadWriter().i32(0).u8(0).u32(5).u64(6000).u64(0).data());
        auto r = await(f);
        QVERIFY(r.has_value());
        QCOMPARE(r->stdoutData.size(), 1000);
        QVERIFY(r->truncated);
        QCOMPARE(r->stdoutBytes, 6000);
    }

    void garbageFromTheGuestIsSkipped() {
        StubAgent agent(path());
        GuestChannel channel(path());
        QVERIFY(await(channel.connectToAgent(5000)).has_value());
        auto f = channel.ping();
        QVERIFY(QTest::qWaitFor([&] { return !agent.received.empty(); }, 5000));
        agent.peer->write("\xff\xfe garbage that is no frame \x00\x01", 32);
        agent.send(Type::Pong, agent.received.back().id);
        QVERIFY(await(f).has_value());
    }

    void agentErrorsKeepTheirKind() {
        StubAgent agent(path());
        GuestChannel channel(path());
        QVERIFY(await(channel.connectToAgent(5000)).has_value());
        auto f = channel.readFile(QStringLiteral("/etc/shadow"), 100);
        QVERIFY(QTest::qWaitFor([&] { return !agent.received.empty(); }, 5000));
        agent.send(
            Type::Error, agent.received.back().id,
            PayloadWriter().u32(uint32_t(ErrorCode::PermissionDenied)).bytes("denied").data());
        auto r = await(f);
        QVERIFY(!r);
        QCOMPARE(int(r.error().kind), int(EngineError::Kind::PermissionDenied));
        QCOMPARE(r.error().message, QStringLiteral("denied"));
    }

    void oversizedReadIsRefused() {
        StubAgent agent(path());
        GuestChannel channel(path());
        QVERIFY(await(channel.connectToAgent(5000)).has_value());
        auto f = channel.readFile(QStringLiteral("/big"), 10);
        QVERIFY(QTest::qWaitFor([&] { return !agent.received.empty(); }, 5000));
        agent.send(Type::ReadData, agent.received.back().id, std::string(11, 'z'));
        auto r = await(f);
        QVERIFY(!r);
        QCOMPARE(int(r.error().kind), int(EngineError::Kind::TooLarge));
    }

    void disconnectFailsWhatIsPending() {
        StubAgent agent(path());
        GuestChannel channel(path());
        QVERIFY(await(channel.connectToAgent(5000)).has_value());
        auto f = channel.exec(ExecRequest{QStringLiteral("sleep 100"), {}, {}, 100000});
        QVERIFY(QTest::qWaitFor([&] { return !agent.received.empty(); }, 5000));
        agent.peer->abort();
        auto r = await(f);
        QVERIFY(!r);
        QCOMPARE(int(r.error().kind), int(EngineError::Kind::Unavailable));
        QVERIFY(!channel.isConnected());
    }
    // Defect: ping and the file operations waited for the agent forever.
    void pingTimesOut() {
        StubAgent agent(path());
        GuestChannel channel(path());
        channel.setDeadlines(shortDeadlines());
        QVERIFY(await(channel.connectToAgent(5000)).has_value());
        auto f = channel.ping(); // the stub never answers
        QTRY_VERIFY_WITH_TIMEOUT(f.isFinished(), 5000);
        QVERIFY(!f.result());
        QCOMPARE(int(f.result().error().kind), int(EngineError::Kind::Timeout));
        QVERIFY(channel.isConnected()); // one lost answer is not a lost connection
    }

    void readFileTimesOutAndIsCancelled() {
        StubAgent agent(path());
        GuestChannel channel(path());
        channel.setDeadlines(shortDeadlines());
        QVERIFY(await(channel.connectToAgent(5000)).has_value());
        auto f = channel.readFile(QStringLiteral("/wedged"), 1 << 20);
        QTRY_VERIFY_WITH_TIMEOUT(f.isFinished(), 5000);
        QVERIFY(!f.result());
        QCOMPARE(int(f.result().error().kind), int(EngineError::Kind::Timeout));
        QVERIFY2(f.result().error().message.contains(QStringLiteral("/wedged")),
                 qPrintable(f.result().error().message));
        // The agent is told to drop the transfer, so neither side keeps it.
        const uint32_t id = agent.received.front().id;
        QTRY_VERIFY_WITH_TIMEOUT(cancelled(agent, id), 5000);
        // A late answer is ignored, and the channel still serves.
        agent.send(Type::Done, id, PayloadWriter().u64(0).data());
        auto ping = channel.ping();
        QTRY_VERIFY_WITH_TIMEOUT(agent.received.back().type == Type::Ping, 5000);
        agent.send(Type::Pong, agent.received.back().id);
        QVERIFY(await(ping).has_value());
    }

    void writeFileTimesOutAndIsCancelled() {
        StubAgent agent(path());
        GuestChannel channel(path());
        channel.setDeadlines(shortDeadlines());
        QVERIFY(await(channel.connectToAgent(5000)).has_value());
        auto f = channel.writeFile(QStringLiteral("/wedged"), QByteArray(100000, 'x'));
        QTRY_VERIFY_WITH_TIMEOUT(f.isFinished(), 5000);
        QVERIFY(!f.result());
        QCOMPARE(int(f.result().error().kind), int(EngineError::Kind::Timeout));
        QTRY_VERIFY_WITH_TIMEOUT(cancelled(agent, agent.received.front().id), 5000);
    }

    void aReadThatKeepsArrivingGetsMoreTime() {
        StubAgent agent(path());
        GuestChannel channel(path());
        GuestChannel::Deadlines d = shortDeadlines();
        d.fileFloorMs = 1000;
        d.fileMsPerMiB = 64000; // each 64 KiB that arrives: 4 s more
        channel.setDeadlines(d);
        QVERIFY(await(channel.connectToAgent(5000)).has_value());
        auto f = channel.readFile(QStringLiteral("/slow"), 1 << 20);
        QTRY_VERIFY_WITH_TIMEOUT(!agent.received.empty(), 5000);
        const uint32_t id = agent.received.front().id;
        agent.send(Type::ReadData, id, std::string(64 * 1024, 'r'));
        QTest::qWait(2000); // past the floor, well within what the data earned
        QVERIFY(!f.isFinished());
        agent.send(Type::Done, id, PayloadWriter().u64(64 * 1024).data());
        auto r = await(f);
        QVERIFY2(r.has_value(), qPrintable(r ? QString() : r.error().message));
        QCOMPARE(r->size(), 64 * 1024);
    }

    // Defect 1, the host's half: until the agent's Ready names this
    // session, whatever arrives belongs to an earlier one.
    void framesBeforeOurReadyAreAnEarlierSessions() {
        StubAgent agent(path());
        agent.onHello = [&](const Frame &hello) {
            // Left over from a session whose request ids this one reuses.
            agent.send(Type::Error, hello.id,
                       PayloadWriter().u32(uint32_t(ErrorCode::Io)).bytes("stale").data());
            agent.send(Type::Stdout, hello.id + 1, "stale output");
            agent.send(Type::Exited, hello.id + 1,
                       PayloadWriter().i32(7).u8(0).u32(1).u64(12).u64(0).data());
            agent.ready(hello.id, agent.sessions.back() + 1); // another session's Ready
            agent.ready(hello.id, agent.sessions.back());
        };
        GuestChannel channel(path());
        auto hello = await(channel.connectToAgent(5000));
        QVERIFY2(hello.has_value(), qPrintable(hello ? QString() : hello.error().message));
        auto f = channel.exec(ExecRequest{QStringLiteral("true"), {}, {}, 1000});
        QTRY_VERIFY_WITH_TIMEOUT(!agent.received.empty(), 5000);
        const uint32_t id = agent.received.back().id;
        agent.send(Type::Exited, id, PayloadWriter().i32(0).u8(0).u32(1).u64(0).u64(0).data());
        auto r = await(f);
        QVERIFY(r.has_value());
        QCOMPARE(r->exitCode, 0);
        QVERIFY(r->stdoutData.isEmpty());
    }

    void eachConnectIsANewSession() {
        StubAgent agent(path());
        GuestChannel channel(path());
        QVERIFY(await(channel.connectToAgent(5000)).has_value());
        channel.disconnectFromAgent();
        QVERIFY(await(channel.connectToAgent(5000)).has_value());
        GuestChannel other(path());
        QVERIFY(await(other.connectToAgent(5000)).has_value());
        QCOMPARE(agent.sessions.size(), size_t(3));
        QVERIFY(agent.sessions[0] != 0);
        QVERIFY(agent.sessions[0] != agent.sessions[1]);
        QVERIFY(agent.sessions[1] != agent.sessions[2]);
    }

    void anAnnouncementIsAnsweredWithHello() {
        // The agent's unsolicited Ready (it has just started, and our Hello
        // may have been lost) names no session: the host says Hello again.
        StubAgent agent(path());
        agent.onHello = [&](const Frame &hello) {
            if (agent.sessions.size() == 1)
                agent.ready(0, 0);
            else
                agent.ready(hello.id, agent.sessions.back());
        };
        GuestChannel channel(path());
        auto hello = await(channel.connectToAgent(5000));
        QVERIFY2(hello.has_value(), qPrintable(hello ? QString() : hello.error().message));
        QCOMPARE(agent.sessions.size(), size_t(2));
        QCOMPARE(agent.sessions[0], agent.sessions[1]);
    }

    void announcementsInALoopAreAnsweredAFewTimes() {
        // A hostile guest announcing itself without end must not make the
        // host queue Hellos without end (each repeat is 24 bytes).
        StubAgent agent(path());
        agent.onHello = [&](const Frame &) {
            for (int i = 0; i < 50; ++i)
                agent.ready(0, 0);
        };
        GuestChannel channel(path());
        auto hello = channel.connectToAgent(2000);
        auto r = await(hello);
        QVERIFY(!r); // it never said Ready for our session
        QVERIFY2(agent.sessions.size() <= 1 + 8,
                 qPrintable(QString::number(agent.sessions.size())));
        QVERIFY(agent.sessions.size() >= 2); // it was answered at all
    }

    void anOlderAgentIsToldToRebuild() {
        StubAgent agent(path());
        agent.onHello = [&](const Frame &hello) {
            agent.send(Type::Error, hello.id,
                       PayloadWriter()
                           .u32(uint32_t(ErrorCode::UnsupportedVersion))
                           .bytes("agent speaks protocol version 1")
                           .data());
        };
        GuestChannel channel(path());
        auto r = await(channel.connectToAgent(5000));
        QVERIFY(!r);
        QCOMPARE(int(r.error().kind), int(EngineError::Kind::Unavailable));
        QVERIFY2(r.error().message.contains(QStringLiteral("rebuild the guest image")),
                 qPrintable(r.error().message));
    }
};

QTEST_GUILESS_MAIN(TestGuestChannel)
#include "tst_guestchannel.moc"
