// The Model Context Protocol at /mcp (Streamable HTTP): JSON-RPC messages
// POSTed one at a time, answered with application/json (no SSE stream:
// GET answers 405, which the transport allows). Sessions are created by
// `initialize` (Mcp-Session-Id) and belong to the account whose key made
// them. Tools map one to one onto the sandbox service's operations.
// Knows nothing of sockets: the HTTP layer authenticates, checks Origin,
// and writes the McpReply.
#pragma once

#include <QByteArray>
#include <QFuture>
#include <QHash>
#include <QJsonObject>
#include <QObject>

namespace sandcastle {
class SandboxService;
}

namespace sandcastle::api {

struct McpRequest {
    QString accountId;
    QByteArray method;                     // GET, POST, DELETE
    QHash<QByteArray, QByteArray> headers; // lower-case names
    QByteArray body;
};

struct McpReply {
    int status = 200;
    QByteArray body; // empty: no body
    QList<std::pair<QByteArray, QByteArray>> headers;
};

class McpServer : public QObject {
    Q_OBJECT
public:
    explicit McpServer(SandboxService *service, QObject *parent = nullptr);

    QFuture<McpReply> handle(const McpRequest &request);

    /// Protocol revisions understood, newest first.
    static const QStringList &protocolVersions();

private:
    struct Session {
        QString accountId;
        QString protocolVersion;
        qint64 lastUsed = 0;
    };
    /// Answers one JSON-RPC request; returns the response object.
    QFuture<QJsonObject> dispatch(const QString &accountId, const QJsonObject &message,
                                  QString *newSession);
    QJsonObject initialize(const QString &accountId, const QJsonValue &id,
                           const QJsonObject &params, QString *newSession);

    SandboxService *service_;
    QHash<QString, Session> sessions_;
};

} // namespace sandcastle::api
