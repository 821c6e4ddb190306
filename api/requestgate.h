// The listening socket's gate: it sees every connection's bytes before
// QtHttpServer does. QtHttpServer 6.4 buffers a whole request, body and
// all, before a handler runs, with no size limit and no timeouts, so any
// local process or web page that can reach the port could hold sockets
// open or fill memory without a key. The gate reads each request's head
// itself and answers from it alone, before the body is buffered: the
// connection limit, a deadline for the head, an idle deadline between
// requests, Host, Origin and the key (through `check`), and the body's
// size against the route's limit. A request that passes goes on to
// QtHttpServer untouched.
#pragma once

#include <QHash>
#include <QJsonObject>
#include <QTcpServer>

#include <functional>

namespace sandcastle::api {

/// A request line and its headers, as the gate read them.
struct RequestHead {
    QByteArray method;
    QString path;                          // decoded, without the query
    QHash<QByteArray, QByteArray> headers; // lower-case names
};

/// What the gate does with a head: let it through with a body limit, or
/// answer `status` with `error` and close the connection.
struct GateVerdict {
    int status = 0; // 0: let it through
    QJsonObject error;
    QList<std::pair<QByteArray, QByteArray>> headers;
    qint64 bodyLimit = 0;
};

struct GateLimits {
    int maxConnections = 128;
    int headTimeoutMs = 10'000;  // from a head's first byte to its end
    int idleTimeoutMs = 120'000; // with no request unanswered, and within a body
    qint64 maxHeadBytes = 16 * 1024;
};

class RequestGate : public QTcpServer {
    Q_OBJECT
public:
    using Check = std::function<GateVerdict(const RequestHead &)>;

    RequestGate(const GateLimits &limits, Check check, QObject *parent = nullptr);
    int openConnections() const { return open_; }

protected:
    void incomingConnection(qintptr descriptor) override;

private:
    friend class GateConnection;
    GateLimits limits_;
    Check check_;
    int open_ = 0;
};

/// A verdict that answers `status` with the error `type` and `message`.
GateVerdict refusal(int status, const QString &type, const QString &message);

/// Splits a head ("GET /p HTTP/1.1\r\nName: v\r\n...") into its parts;
/// false when it is not HTTP/1.x. Exposed for tests.
bool parseRequestHead(const QByteArray &head, RequestHead *out);

} // namespace sandcastle::api
