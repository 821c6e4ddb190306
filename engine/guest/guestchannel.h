// The host end of the agent protocol over one sandbox's virtio-serial
// socket. Asynchronous: every operation returns a future that completes on
// the channel's thread when the agent answers, or fails when its deadline
// passes; nothing here ever waits, and nothing waits on the guest forever.
#pragma once

#include "../agent/protocol.h"
#include "../errors.h"
#include "exec.h"

#include <QFuture>
#include <QLocalSocket>
#include <QObject>
#include <QTimer>

#include <memory>
#include <unordered_map>

namespace sandcastle {

class GuestChannel : public QObject {
    Q_OBJECT
public:
    explicit GuestChannel(QString socketPath, QObject *parent = nullptr);
    ~GuestChannel() override;

    /// How long an operation may take before it fails with Timeout (and the
    /// agent is told to drop it). docs/protocol.md gives the reasons.
    struct Deadlines {
        int pingMs = 10000;
        int fileFloorMs = 60000; // every file operation gets this much
        int fileMsPerMiB = 1000; // and this per MiB written, or read so far
        int execGraceMs = 30000; // past the command's own timeout
    };
    /// For operations started from now on.
    void setDeadlines(const Deadlines &deadlines);

    /// Connects (retrying while the socket is not there yet) and waits for
    /// the agent's Ready. Each call is a new session: the agent stops
    /// reporting what an earlier one started. Result: the agent's version.
    QFuture<Result<QString>> connectToAgent(int timeoutMs);

    QFuture<Result<ExecResult>> exec(const ExecRequest &request);
    /// Writes `data` to `path` in the guest as user `sandbox`, parents created.
    QFuture<Result<qint64>> writeFile(const QString &path, const QByteArray &data, int mode = 0644);
    /// Reads `path` as user `sandbox`; files over `limit` bytes are refused.
    QFuture<Result<QByteArray>> readFile(const QString &path, qint64 limit);
    QFuture<Result<void>> ping();

    /// Closes the connection; pending operations fail. The agent keeps running.
    void disconnectFromAgent();
    bool isConnected() const;
    /// Sends bytes as they are (tests use it to send garbage).
    void sendRaw(const QByteArray &bytes);

    class Pending;

signals:
    /// The connection broke after it was up (QEMU ended, or the guest died).
    void lost(const QString &reason);

private:
    struct Deadline;
    quint32 add(std::unique_ptr<Pending> pending);
    /// Registers `pending` and returns its id with its future; id 0 (and
    /// the future already failed) when the agent is not connected.
    template <typename P> auto start(std::unique_ptr<P> pending, Deadline deadline);
    void armDeadline(quint32 id, qint64 ms);
    void onDeadline(quint32 id);
    void send(proto::Type type, quint32 id, std::string_view payload = {});
    void sendHello();
    void onReadyRead();
    void handshake(const proto::Frame &f);
    void dispatch(const proto::Frame &f);
    void onDisconnected();
    void tryConnect();
    void failAll(const EngineError &error);

    QString path_;
    QLocalSocket socket_;
    proto::FrameReader reader_;
    quint32 nextId_ = 1;
    std::unordered_map<quint32, std::unique_ptr<Pending>> pending_;
    quint32 helloId_ = 0;
    int helloRepeats_ = 0; // Hellos said again this connect
    static constexpr int kMaxHelloRepeats = 8;
    quint64 session_ = 0; // this connection's nonce, named in Hello and Ready
    QTimer retry_;
    bool up_ = false;
    Deadlines deadlines_;
};

/// The engine error kind for an error code the agent sent.
EngineError::Kind kindForAgentError(proto::ErrorCode code);

} // namespace sandcastle
