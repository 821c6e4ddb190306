// The host side of the agent protocol against a scripted peer on a local
// socket. The real agent is tested in tst_engine_vm; this suite covers what
// a real agent never does on purpose: ignoring the output cap, sending
// garbage, vanishing mid-request, or never answering.
#include "guest/guestchannel.h"

#include <QLocalServer>
#include <QLocalSocket>
#include <QTemporaryDir>
#include <QTest>

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
                    if (f.type == Type::Hello && answerHello)
                        send(Type::Ready, f.id, PayloadWriter().u32(kVersion).bytes("stub").data());
                    else
                        received.push_back(f);
                }
            });
        });
    }
    void send(Type t, uint32_t id, std::string_view payload = {}) {
        std::string frame = encodeFrame(t, id, payload);
        peer->write(frame.data(), qint64(frame.size()));
        peer->flush();
    }
    QLocalServer server;
    QLocalSocket *peer = nullptr;
    FrameReader reader;
    std::vector<Frame> received;
    bool answerHello = true;
};

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
};

QTEST_GUILESS_MAIN(TestGuestChannel)
#include "tst_guestchannel.moc"
