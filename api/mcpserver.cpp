#include "mcpserver.h"

#include "async.h"
#include "mcptools.h"
#include "store/store.h"

#include <QCoreApplication>
#include <QJsonArray>
#include <QJsonDocument>
#include <QUuid>

namespace sandcastle::api {

namespace {

// JSON-RPC 2.0 error codes.
constexpr int kParseError = -32700;
constexpr int kInvalidRequest = -32600;
constexpr int kMethodNotFound = -32601;
constexpr int kInvalidParams = -32602;

constexpr int kMaxSessions = 10000;

QJsonObject rpcError(const QJsonValue &id, int code, const QString &message) {
    return {{QStringLiteral("jsonrpc"), QStringLiteral("2.0")},
            {QStringLiteral("id"), id},
            {QStringLiteral("error"),
             QJsonObject{{QStringLiteral("code"), code}, {QStringLiteral("message"), message}}}};
}

QJsonObject rpcResult(const QJsonValue &id, const QJsonObject &result) {
    return {{QStringLiteral("jsonrpc"), QStringLiteral("2.0")},
            {QStringLiteral("id"), id},
            {QStringLiteral("result"), result}};
}

McpReply json(int status, const QJsonObject &body) {
    return {status,
            QJsonDocument(body).toJson(QJsonDocument::Compact),
            {{"Content-Type", "application/json"}}};
}

QFuture<McpReply> now(McpReply reply) {
    return readyFuture<McpReply>(std::move(reply));
}

} // namespace

const QStringList &McpServer::protocolVersions() {
    static const QStringList versions = {QStringLiteral("2025-11-25"), QStringLiteral("2025-06-18"),
                                         QStringLiteral("2025-03-26"), QStringLiteral("2024-11-05"),
                                         QStringLiteral("2024-10-07")};
    return versions;
}

McpServer::McpServer(SandboxService *service, QObject *parent)
    : QObject(parent)
    , service_(service) {}

QFuture<McpReply> McpServer::handle(const McpRequest &request) {
    const QByteArray sessionId = request.headers.value("mcp-session-id");
    if (request.method == "GET")
        // No server-initiated stream: the transport allows a 405 here.
        return now({405, {}, {{"Allow", "POST, DELETE"}}});
    if (request.method == "DELETE") {
        auto it = sessions_.find(QString::fromLatin1(sessionId));
        if (it == sessions_.end() || it->accountId != request.accountId)
            return now(json(404, rpcError({}, kInvalidRequest, QStringLiteral("no such session"))));
        sessions_.erase(it);
        return now({200, {}, {}});
    }
    if (request.method != "POST")
        return now({405, {}, {{"Allow", "POST, DELETE"}}});

    const QByteArray version = request.headers.value("mcp-protocol-version");
    if (!version.isEmpty() && !protocolVersions().contains(QString::fromLatin1(version)))
        return now(json(400, rpcError({}, kInvalidRequest,
                                      QStringLiteral("unsupported MCP-Protocol-Version %1; "
                                                     "supported: %2")
                                          .arg(QString::fromLatin1(version.left(40)),
                                               protocolVersions().join(QStringLiteral(", "))))));
    QJsonParseError parseError;
    const QJsonDocument doc = QJsonDocument::fromJson(request.body, &parseError);
    if (parseError.error != QJsonParseError::NoError)
        return now(
            json(400, rpcError({}, kParseError,
                               QStringLiteral("parse error: %1").arg(parseError.errorString()))));
    if (!doc.isObject())
        return now(json(400, rpcError({}, kInvalidRequest,
                                      QStringLiteral("send one JSON-RPC message per request "
                                                     "(batches are not supported)"))));
    const QJsonObject message = doc.object();
    const QJsonValue id = message.value(QStringLiteral("id"));
    const QJsonValue method = message.value(QStringLiteral("method"));
    if (message.value(QStringLiteral("jsonrpc")).toString() != QLatin1String("2.0"))
        return now(json(400, rpcError(id.isUndefined() ? QJsonValue() : id, kInvalidRequest,
                                      QStringLiteral("jsonrpc must be \"2.0\""))));
    // Notifications and responses need no answer.
    if (id.isUndefined() || !method.isString())
        return now({202, {}, {}});
    if (!id.isString() && !id.isDouble())
        return now(json(
            400, rpcError({}, kInvalidRequest, QStringLiteral("id must be a string or a number"))));

    if (method.toString() != QLatin1String("initialize")) {
        if (sessionId.isEmpty())
            return now(json(400, rpcError(id, kInvalidRequest,
                                          QStringLiteral("missing Mcp-Session-Id header: send "
                                                         "initialize first"))));
        auto it = sessions_.find(QString::fromLatin1(sessionId));
        if (it == sessions_.end() || it->accountId != request.accountId)
            return now(json(404, rpcError(id, kInvalidRequest,
                                          QStringLiteral("unknown or expired session: "
                                                         "initialize again"))));
        it->lastUsed = nowMs();
    }
    auto newSession = std::make_shared<QString>();
    return dispatch(request.accountId, message, newSession.get())
        .then(this, [newSession](QJsonObject response) {
            McpReply reply = json(200, response);
            if (!newSession->isEmpty())
                reply.headers.append({"Mcp-Session-Id", newSession->toLatin1()});
            return reply;
        });
}

QJsonObject McpServer::initialize(const QString &accountId, const QJsonValue &id,
                                  const QJsonObject &params, QString *newSession) {
    const QString asked = params.value(QStringLiteral("protocolVersion")).toString();
    // A version we know is echoed; otherwise we offer our newest.
    const QString version = protocolVersions().contains(asked) ? asked : protocolVersions().first();
    if (sessions_.size() >= kMaxSessions) {
        auto oldest = sessions_.begin();
        for (auto it = sessions_.begin(); it != sessions_.end(); ++it) {
            if (it->lastUsed < oldest->lastUsed)
                oldest = it;
        }
        sessions_.erase(oldest);
    }
    *newSession = QUuid::createUuid().toString(QUuid::WithoutBraces);
    sessions_.insert(*newSession, {accountId, version, nowMs()});
    return rpcResult(
        id, {{QStringLiteral("protocolVersion"), version},
             {QStringLiteral("capabilities"),
              QJsonObject{
                  {QStringLiteral("tools"), QJsonObject{{QStringLiteral("listChanged"), false}}}}},
             {QStringLiteral("serverInfo"),
              QJsonObject{{QStringLiteral("name"), QStringLiteral("sandcastle")},
                          {QStringLiteral("title"), QStringLiteral("Sandcastle")},
                          {QStringLiteral("version"), QCoreApplication::applicationVersion()}}},
             {QStringLiteral("instructions"),
              QStringLiteral("Sandcastle gives you disposable Linux VMs. create_sandbox once per "
                             "task, run_command for each step (state persists between commands), "
                             "write_file/read_file to move files, destroy_sandbox when done.")}});
}

QFuture<QJsonObject> McpServer::dispatch(const QString &accountId, const QJsonObject &message,
                                         QString *newSession) {
    const QJsonValue id = message.value(QStringLiteral("id"));
    const QString method = message.value(QStringLiteral("method")).toString();
    const QJsonValue paramsValue = message.value(QStringLiteral("params"));
    if (!paramsValue.isUndefined() && !paramsValue.isObject())
        return readyFuture(
            rpcError(id, kInvalidParams, QStringLiteral("params must be an object")));
    const QJsonObject params = paramsValue.toObject();
    if (method == QLatin1String("initialize"))
        return readyFuture(initialize(accountId, id, params, newSession));
    if (method == QLatin1String("ping"))
        return readyFuture(rpcResult(id, {}));
    if (method == QLatin1String("tools/list"))
        return readyFuture(rpcResult(id, {{QStringLiteral("tools"), mcpToolList()}}));
    if (method == QLatin1String("tools/call")) {
        const QString name = params.value(QStringLiteral("name")).toString();
        const QJsonValue args = params.value(QStringLiteral("arguments"));
        if (!isMcpTool(name))
            return readyFuture(rpcError(id, kInvalidParams,
                                        QStringLiteral("unknown tool '%1': tools/list shows the "
                                                       "tools")
                                            .arg(name.left(64))));
        if (!args.isUndefined() && !args.isNull() && !args.isObject())
            return readyFuture(
                rpcError(id, kInvalidParams, QStringLiteral("arguments must be an object")));
        return callMcpTool(service_, accountId, name, args.toObject())
            .then(this, [id](QJsonObject result) { return rpcResult(id, result); });
    }
    return readyFuture(rpcError(id, kMethodNotFound,
                                QStringLiteral("method '%1' is not supported; this server offers "
                                               "initialize, ping, tools/list and tools/call")
                                    .arg(method.left(64))));
}

} // namespace sandcastle::api
