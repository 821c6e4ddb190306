#include "guestchannel.h"

#include "../async.h"

#include <QCoreApplication>
#include <QElapsedTimer>
#include <QPromise>
#include <QRandomGenerator>

#include <climits>

namespace sandcastle {

using proto::Frame;
using proto::Type;
using Kind = EngineError::Kind;

EngineError::Kind kindForAgentError(proto::ErrorCode code) {
    switch (code) {
    case proto::ErrorCode::NotFound:
        return Kind::NotFound;
    case proto::ErrorCode::PermissionDenied:
        return Kind::PermissionDenied;
    case proto::ErrorCode::InvalidArgument:
        return Kind::InvalidArgument;
    case proto::ErrorCode::TooLarge:
        return Kind::TooLarge;
    case proto::ErrorCode::NoSpace:
        return Kind::NoSpace;
    default:
        return Kind::Internal;
    }
}

namespace {

EngineError agentError(const Frame &f) {
    proto::PayloadReader r(f.payload);
    auto code = proto::ErrorCode(r.u32());
    QString message = QString::fromUtf8(r.bytes());
    if (!r.ok())
        return {Kind::Internal, QStringLiteral("the guest agent sent an unreadable error")};
    return {kindForAgentError(code), message};
}

EngineError rebuildImage(quint32 agentVersion) {
    return {Kind::Unavailable, QStringLiteral("the guest agent speaks protocol version %1, "
                                              "Sandcastle %2: rebuild the guest image")
                                   .arg(agentVersion)
                                   .arg(proto::kVersion)};
}

struct ReadyInfo {
    quint32 version = 0;
    QString agentVersion;
    quint64 session = 0;
    bool ok = false;
};

ReadyInfo readReady(const Frame &f) {
    proto::PayloadReader r(f.payload);
    ReadyInfo ready;
    ready.version = r.u32();
    ready.agentVersion = QString::fromUtf8(r.bytes());
    ready.session = r.u64();
    ready.ok = r.ok();
    return ready;
}

quint64 newSession() {
    quint64 session = 0;
    while (session == 0)
        session = QRandomGenerator::system()->generate64();
    return session;
}

} // namespace

/// When an operation gives up on the agent.
struct GuestChannel::Deadline {
    qint64 baseMs = 0;
    qint64 msPerMiB = 0; // more time for each MiB that has arrived
    QString what;        // "reading /path", for the message
    QString note;        // appended to it
    bool cancel = false; // tell the agent to drop the operation
};

/// One operation waiting for the agent. Completes exactly once: by a frame,
/// by its deadline, or by the connection going away.
class GuestChannel::Pending {
public:
    virtual ~Pending() = default;
    /// Handles a frame for this operation; true when the operation is done.
    /// Error frames never come here: they end any operation the same way.
    virtual bool onFrame(const Frame &f) = 0;
    virtual void fail(const EngineError &e) = 0;
    /// Bytes that have arrived: a read that keeps arriving earns more time.
    virtual qint64 received() const { return 0; }
    qint64 allowedMs() const {
        return deadline.baseMs + received() * deadline.msPerMiB / (1 << 20);
    }

    Deadline deadline;
    QElapsedTimer started;
};

namespace {

template <typename T> class PendingOf : public GuestChannel::Pending {
public:
    PendingOf()
        : promise_(std::make_shared<QPromise<Result<T>>>()) {
        promise_->start();
    }
    ~PendingOf() override {
        fail({Kind::Unavailable, QStringLiteral("the guest channel was closed")});
    }
    QFuture<Result<T>> future() { return promise_->future(); }
    void resolve(Result<T> r) {
        if (done_)
            return;
        done_ = true;
        // Complete from the event loop, never from inside the channel's own
        // frame handling: a continuation may use or delete the channel.
        QMetaObject::invokeMethod(
            QCoreApplication::instance(),
            [p = promise_, r = std::move(r)]() mutable {
                p->addResult(std::move(r));
                p->finish();
            },
            Qt::QueuedConnection);
    }
    void fail(const EngineError &e) override { resolve(std::unexpected(e)); }

private:
    std::shared_ptr<QPromise<Result<T>>> promise_;
    bool done_ = false;
};

class HelloPending : public PendingOf<QString> {
public:
    explicit HelloPending(quint64 session)
        : session_(session) {}
    bool onFrame(const Frame &f) override {
        if (f.type != Type::Ready)
            return false;
        const ReadyInfo ready = readReady(f);
        if (!ready.ok || ready.version != proto::kVersion) {
            fail(rebuildImage(ready.version));
            return true;
        }
        if (ready.session != session_)
            return false; // an answer to an earlier session's Hello
        resolve(ready.agentVersion);
        succeeded = true;
        return true;
    }
    bool succeeded = false;

private:
    quint64 session_;
};

class PingPending : public PendingOf<void> {
public:
    bool onFrame(const Frame &f) override {
        if (f.type != Type::Pong)
            return false;
        resolve({});
        return true;
    }
};

class ExecPending : public PendingOf<ExecResult> {
public:
    explicit ExecPending(qint64 cap)
        : cap_(cap) {}
    bool onFrame(const Frame &f) override {
        switch (f.type) {
        case Type::Stdout:
            append(result_.stdoutData, f.payload);
            return false;
        case Type::Stderr:
            append(result_.stderrData, f.payload);
            return false;
        case Type::Exited: {
            proto::PayloadReader r(f.payload);
            result_.exitCode = r.i32();
            result_.timedOut = r.u8() != 0;
            result_.durationMs = r.u32();
            result_.stdoutBytes = qint64(r.u64());
            result_.stderrBytes = qint64(r.u64());
            if (!r.ok()) {
                fail({Kind::Internal,
                      QStringLiteral("the guest agent sent an unreadable exit status")});
                return true;
            }
            result_.truncated = result_.timedOut || result_.stdoutBytes > cap_ ||
                                result_.stderrBytes > cap_ || overflow_;
            resolve(std::move(result_));
            return true;
        }
        default:
            return false;
        }
    }

private:
    // The cap holds here too: a hostile guest that ignores it cannot make
    // the host buffer more than `cap` bytes per stream.
    void append(QByteArray &to, const std::string &data) {
        qint64 room = cap_ - to.size();
        if (qint64(data.size()) > room)
            overflow_ = true;
        if (room > 0)
            to.append(data.data(), qsizetype(std::min<qint64>(room, qint64(data.size()))));
    }
    qint64 cap_;
    bool overflow_ = false;
    ExecResult result_;
};

class WritePending : public PendingOf<qint64> {
public:
    bool onFrame(const Frame &f) override {
        if (f.type != Type::Done)
            return false;
        proto::PayloadReader r(f.payload);
        resolve(qint64(r.u64()));
        return true;
    }
};

class ReadPending : public PendingOf<QByteArray> {
public:
    explicit ReadPending(qint64 limit)
        : limit_(limit) {}
    bool onFrame(const Frame &f) override {
        switch (f.type) {
        case Type::ReadData:
            if (data_.size() + qint64(f.payload.size()) > limit_) {
                fail({Kind::TooLarge,
                      QStringLiteral("the file is larger than %1 bytes").arg(limit_)});
                return true;
            }
            data_.append(f.payload.data(), qsizetype(f.payload.size()));
            return false;
        case Type::Done:
            resolve(std::move(data_));
            return true;
        default:
            return false;
        }
    }
    qint64 received() const override { return data_.size(); }

private:
    qint64 limit_;
    QByteArray data_;
};

} // namespace

GuestChannel::GuestChannel(QString socketPath, QObject *parent)
    : QObject(parent)
    , path_(std::move(socketPath)) {
    retry_.setSingleShot(true);
    retry_.setInterval(50);
    connect(&retry_, &QTimer::timeout, this, &GuestChannel::tryConnect);
    connect(&socket_, &QLocalSocket::readyRead, this, &GuestChannel::onReadyRead);
    connect(&socket_, &QLocalSocket::disconnected, this, &GuestChannel::onDisconnected);
    connect(&socket_, &QLocalSocket::connected, this, &GuestChannel::sendHello);
    connect(&socket_, &QLocalSocket::errorOccurred, this, [this](QLocalSocket::LocalSocketError) {
        // Before the agent is up, the socket may not exist yet: try again.
        if (!up_ && helloId_ && pending_.count(helloId_))
            retry_.start();
    });
}

GuestChannel::~GuestChannel() {
    socket_.disconnect(this);
    pending_.clear(); // fails what is still waiting
}

void GuestChannel::setDeadlines(const Deadlines &deadlines) {
    deadlines_ = deadlines;
}

bool GuestChannel::isConnected() const {
    return up_ && socket_.state() == QLocalSocket::ConnectedState;
}

quint32 GuestChannel::add(std::unique_ptr<Pending> pending) {
    quint32 id = nextId_++;
    if (nextId_ == 0)
        nextId_ = 1; // 0 is the agent's "not about a request"
    pending_[id] = std::move(pending);
    return id;
}

void GuestChannel::send(proto::Type type, quint32 id, std::string_view payload) {
    std::string frame = proto::encodeFrame(type, id, payload);
    socket_.write(frame.data(), qint64(frame.size()));
}

void GuestChannel::sendHello() {
    send(Type::Hello, helloId_, proto::PayloadWriter().u64(session_).data());
}

void GuestChannel::sendRaw(const QByteArray &bytes) {
    socket_.write(bytes);
}

void GuestChannel::tryConnect() {
    if (socket_.state() == QLocalSocket::UnconnectedState)
        socket_.connectToServer(path_);
}

QFuture<Result<QString>> GuestChannel::connectToAgent(int timeoutMs) {
    session_ = newSession();
    auto hello = std::make_unique<HelloPending>(session_);
    auto future = hello->future();
    reader_ = proto::FrameReader();
    helloRepeats_ = 0;
    helloId_ = add(std::move(hello));
    const quint32 id = helloId_;
    QTimer::singleShot(timeoutMs, this, [this, id, timeoutMs] {
        auto it = pending_.find(id);
        if (it == pending_.end())
            return;
        it->second->fail({Kind::Timeout, QStringLiteral("the guest agent did not answer within "
                                                        "%1 s; the console log says why")
                                             .arg(timeoutMs / 1000)});
        pending_.erase(it);
        retry_.stop();
        socket_.abort();
    });
    tryConnect();
    return future;
}

void GuestChannel::disconnectFromAgent() {
    retry_.stop();
    socket_.abort();
}

void GuestChannel::onReadyRead() {
    QByteArray data = socket_.readAll();
    reader_.feed(data.constData(), size_t(data.size()));
    Frame f;
    while (reader_.next(f)) {
        if (up_)
            dispatch(f);
        else
            handshake(f);
    }
}

void GuestChannel::handshake(const Frame &f) {
    // Until the Ready that names our session, whatever arrives was meant
    // for an earlier session (whose request ids ours reuse): ignored.
    auto it = pending_.find(helloId_);
    if (!helloId_ || it == pending_.end())
        return;
    auto &hello = static_cast<HelloPending &>(*it->second);
    bool done = false;
    if (f.type == Type::Ready && f.id == 0) {
        // The agent announces itself when it starts; our Hello may have
        // come before it listened. Say it again: a repeat is harmless. A
        // few times only: a guest that announces itself in a loop and
        // reads nothing would pile our Hellos up in the socket's buffer.
        if (const ReadyInfo ready = readReady(f); ready.version != proto::kVersion) {
            hello.fail(rebuildImage(ready.version));
            done = true;
        } else if (++helloRepeats_ <= kMaxHelloRepeats && socket_.bytesToWrite() < 4096) {
            sendHello();
        }
    } else if (f.type == Type::Ready && f.id == helloId_) {
        done = hello.onFrame(f);
    } else if (f.type == Type::Error && f.id == helloId_ &&
               proto::PayloadReader(f.payload).u32() ==
                   uint32_t(proto::ErrorCode::UnsupportedVersion)) {
        // An agent that does not speak our version refuses our Hello. Other
        // errors with this id may be an earlier session's (ids repeat).
        hello.fail({Kind::Unavailable,
                    QStringLiteral("the guest agent does not speak protocol version %1 (%2): "
                                   "rebuild the guest image")
                        .arg(proto::kVersion)
                        .arg(agentError(f).message)});
        done = true;
    }
    if (!done)
        return;
    up_ = hello.succeeded;
    pending_.erase(it);
    helloId_ = 0;
}

void GuestChannel::dispatch(const Frame &f) {
    auto it = pending_.find(f.id);
    if (it == pending_.end())
        return; // a late answer to something that already timed out
    bool done = true;
    if (f.type == Type::Error)
        it->second->fail(agentError(f));
    else
        done = it->second->onFrame(f);
    if (done)
        pending_.erase(it);
}

void GuestChannel::onDisconnected() {
    bool wasUp = up_;
    up_ = false;
    failAll({Kind::Unavailable, QStringLiteral("the connection to the guest agent was lost "
                                               "(the VM stopped or was destroyed)")});
    if (wasUp)
        emit lost(QStringLiteral("guest agent connection lost"));
}

void GuestChannel::failAll(const EngineError &error) {
    auto pending = std::move(pending_);
    pending_.clear();
    helloId_ = 0;
    for (auto &[id, p] : pending)
        p->fail(error);
}

template <typename P> auto GuestChannel::start(std::unique_ptr<P> pending, Deadline deadline) {
    auto future = pending->future();
    if (!isConnected()) {
        pending->fail({Kind::Unavailable, QStringLiteral("the guest agent is not connected")});
        return std::make_pair(quint32(0), future);
    }
    pending->deadline = std::move(deadline);
    pending->started.start();
    const qint64 ms = pending->allowedMs();
    const quint32 id = add(std::move(pending));
    armDeadline(id, ms);
    return std::make_pair(id, future);
}

void GuestChannel::armDeadline(quint32 id, qint64 ms) {
    QTimer::singleShot(int(std::clamp<qint64>(ms, 0, INT_MAX)), this,
                       [this, id] { onDeadline(id); });
}

void GuestChannel::onDeadline(quint32 id) {
    auto it = pending_.find(id);
    if (it == pending_.end())
        return; // answered meanwhile
    Pending &p = *it->second;
    const qint64 allowed = p.allowedMs();
    if (const qint64 left = allowed - p.started.elapsed(); left > 0) {
        armDeadline(id, left); // a read that kept arriving has earned more time
        return;
    }
    // Also frees the agent's side: an upload's descriptor, a download, or
    // the command's processes.
    if (p.deadline.cancel)
        send(Type::Cancel, id);
    p.fail({Kind::Timeout,
            QStringLiteral("the guest agent did not finish %1 within %2 s%3")
                .arg(p.deadline.what, QString::number(allowed / 1000.0, 'g', 4), p.deadline.note)});
    pending_.erase(it);
}

QFuture<Result<ExecResult>> GuestChannel::exec(const ExecRequest &request) {
    proto::PayloadWriter w;
    w.u32(quint32(request.timeoutMs))
        .u32(quint32(request.outputCap))
        .bytes(request.command.toStdString())
        .bytes(request.cwd.toStdString())
        .u32(quint32(request.env.size()));
    for (const auto &[name, value] : request.env)
        w.bytes(name.toStdString()).bytes(value.toStdString());
    if (w.data().size() > proto::kMaxPayload)
        return readyFuture<Result<ExecResult>>(std::unexpected(EngineError{
            Kind::TooLarge,
            QStringLiteral("command and env together exceed %1 bytes").arg(proto::kMaxPayload)}));
    // The agent enforces the timeout; this is the backstop for an agent that
    // never reports back (a hostile or wedged guest).
    Deadline deadline{qint64(request.timeoutMs) + deadlines_.execGraceMs, 0,
                      QStringLiteral("the command"),
                      QStringLiteral(" (its timeout and %1 s more)")
                          .arg(deadlines_.execGraceMs / 1000.0, 0, 'g', 4),
                      true};
    auto [id, future] = start(std::make_unique<ExecPending>(request.outputCap), deadline);
    if (id)
        send(Type::Exec, id, w.data());
    return future;
}

QFuture<Result<qint64>> GuestChannel::writeFile(const QString &path, const QByteArray &data,
                                                int mode) {
    Deadline deadline{deadlines_.fileFloorMs + data.size() * deadlines_.fileMsPerMiB / (1 << 20),
                      0,
                      QStringLiteral("writing %1").arg(path),
                      {},
                      true};
    auto [id, future] = start(std::make_unique<WritePending>(), deadline);
    if (!id)
        return future;
    send(Type::WriteOpen, id,
         proto::PayloadWriter().bytes(path.toStdString()).u32(quint32(mode)).data());
    for (qsizetype off = 0; off < data.size(); off += qsizetype(proto::kChunkSize)) {
        qsizetype n = std::min<qsizetype>(qsizetype(proto::kChunkSize), data.size() - off);
        send(Type::WriteData, id, std::string_view(data.constData() + off, size_t(n)));
    }
    send(Type::WriteClose, id);
    return future;
}

QFuture<Result<QByteArray>> GuestChannel::readFile(const QString &path, qint64 limit) {
    // The size is known only as it arrives, so the deadline grows with it.
    Deadline deadline{deadlines_.fileFloorMs,
                      deadlines_.fileMsPerMiB,
                      QStringLiteral("reading %1").arg(path),
                      {},
                      true};
    auto [id, future] = start(std::make_unique<ReadPending>(limit), deadline);
    if (id)
        send(Type::ReadOpen, id,
             proto::PayloadWriter().bytes(path.toStdString()).u64(quint64(limit)).data());
    return future;
}

QFuture<Result<void>> GuestChannel::ping() {
    auto [id, future] =
        start(std::make_unique<PingPending>(),
              Deadline{deadlines_.pingMs, 0, QStringLiteral("answering a ping"), {}, false});
    if (id)
        send(Type::Ping, id);
    return future;
}

} // namespace sandcastle
