#include "apiserver.h"

#include "json.h"
#include "mcpserver.h"
#include "requestgate.h"
#include "requests.h"
#include "service/sandboxservice.h"
#include "service/settings.h"

#include <QElapsedTimer>
#include <QHttpServerRequest>
#include <QHttpServerResponder>
#include <QJsonArray>
#include <QJsonDocument>
#include <QPointer>
#include <QTcpServer>
#include <QTcpSocket>
#include <QTimer>
#include <QtDebug>

#include <atomic>

namespace sandcastle::api {

using Kind = EngineError::Kind;
using Method = QHttpServerRequest::Method;
using Status = QHttpServerResponder::StatusCode;

namespace {
// Requests refused before authentication (no valid key: 401; a Host or
// Origin of another site: 403) are counted, not logged one line each:
// anything that can reach the port (a web page in the user's browser)
// could otherwise fill the log.
std::atomic<qint64> refusedUnauthenticated{0};
std::atomic<qint64> refusedForeign{0};

void logRefusedCount() {
    if (const qint64 n = refusedUnauthenticated.exchange(0); n > 0)
        qInfo().noquote() << n << "request(s) without a valid API key refused (401)";
    if (const qint64 n = refusedForeign.exchange(0); n > 0)
        qInfo().noquote() << n << "request(s) from another site's Host or Origin refused (403)";
}
} // namespace

/// One request from arrival to answer. Copied out of QtHttpServer's
/// request object, which does not outlive the handler.
struct ApiServer::Call {
    Method method = Method::Unknown;
    QString methodName;
    QString path;
    QUrlQuery query;
    QHash<QByteArray, QByteArray> headers; // lower-case names
    QByteArray body;
    QString accountId;
    std::unique_ptr<QHttpServerResponder> responder;
    QPointer<QTcpSocket> socket; // null once the client is gone
    QElapsedTimer clock;
    bool answered = false;
    bool foreign = false; // refused for its Host or Origin: counted, not logged

    void send(int status, const QByteArray &body, const QByteArray &contentType,
              const QList<std::pair<QByteArray, QByteArray>> &extra = {}) {
        if (answered)
            return;
        answered = true;
        const QString line = QStringLiteral("%1 %2 -> %3 (%4 ms)")
                                 .arg(methodName, path.left(200))
                                 .arg(status)
                                 .arg(clock.elapsed());
        // QtHttpServer 6.4 writes to a raw socket pointer: writing after the
        // client went away would crash, so look first.
        const bool quiet = status == 401 || foreign; // counted instead
        if (status == 401)
            ++refusedUnauthenticated;
        else if (!foreign)
            logRefusedCount(); // so the count stands in order among the lines
        if (!socket || socket->state() != QAbstractSocket::ConnectedState) {
            if (!quiet)
                qInfo().noquote() << line << "- client gone, answer dropped";
            return;
        }
        if (!quiet)
            qInfo().noquote() << line;
        responder->writeStatusLine(Status(status));
        if (!contentType.isEmpty())
            responder->writeHeader("Content-Type", contentType);
        responder->writeHeader("Content-Length", QByteArray::number(body.size()));
        responder->writeHeader("Cache-Control", "no-store");
        for (const auto &[k, v] : extra)
            responder->writeHeader(k, v);
        responder->writeBody(body);
    }
    void json(int status, const QJsonObject &o,
              const QList<std::pair<QByteArray, QByteArray>> &extra = {}) {
        send(status, QJsonDocument(o).toJson(QJsonDocument::Compact), "application/json", extra);
    }
    void error(const EngineError &e) {
        const HttpError h = httpErrorFor(e.kind);
        json(h.status, errorJson(h.type, e.message));
    }
    void error(int status, const QString &type, const QString &message,
               const QList<std::pair<QByteArray, QByteArray>> &extra = {}) {
        json(status, errorJson(type, message), extra);
    }
};

namespace {

QString methodName(Method m) {
    switch (m) {
    case Method::Get:
        return QStringLiteral("GET");
    case Method::Put:
        return QStringLiteral("PUT");
    case Method::Delete:
        return QStringLiteral("DELETE");
    case Method::Post:
        return QStringLiteral("POST");
    case Method::Head:
        return QStringLiteral("HEAD");
    case Method::Options:
        return QStringLiteral("OPTIONS");
    case Method::Patch:
        return QStringLiteral("PATCH");
    default:
        return QStringLiteral("OTHER");
    }
}

void methodNotAllowed(ApiServer::Call &call, const QByteArray &allow) {
    call.error(405, QStringLiteral("method_not_allowed"),
               QStringLiteral("%1 is not allowed on %2; use %3")
                   .arg(call.methodName, call.path.left(200), QString::fromLatin1(allow)),
               {{"Allow", allow}});
}

/// Answers `call` when `future` finishes, with `ok` turning a value into JSON.
template <typename T, typename Fn>
void answerLater(QObject *context, const std::shared_ptr<ApiServer::Call> &call,
                 QFuture<Result<T>> future, Fn ok) {
    future.then(context, [call, ok](Result<T> r) {
        if (!r)
            call->error(r.error());
        else if constexpr (std::is_void_v<T>)
            ok(*call, true);
        else
            ok(*call, *r);
    });
}

} // namespace

ApiServer::ApiServer(SandboxService *service, QObject *parent)
    : QAbstractHttpServer(parent)
    , service_(service)
    , mcp_(new McpServer(service, this)) {
    // A quiet minute after refused requests still reports them.
    auto *summary = new QTimer(this);
    summary->setInterval(60000);
    connect(summary, &QTimer::timeout, this, [] { logRefusedCount(); });
    summary->start();
}

ApiServer::~ApiServer() = default;

Result<quint16> ApiServer::start(const QHostAddress &address, quint16 port) {
    const Settings &settings = service_->settings();
    GateLimits limits;
    limits.maxConnections = settings.maxConnections;
    limits.headTimeoutMs = settings.httpHeaderTimeoutS * 1000;
    limits.idleTimeoutMs = settings.httpIdleTimeoutS * 1000;
    auto *server = new RequestGate(
        limits, [this](const RequestHead &head) { return admit(head); }, this);
    if (!server->listen(address, port)) {
        const QString why = server->errorString();
        delete server;
        return fail(Kind::Unavailable,
                    QStringLiteral("cannot listen on %1:%2: %3 (another Sandcastle running? "
                                   "choose another port with --port)")
                        .arg(address.toString())
                        .arg(port)
                        .arg(why));
    }
    bind(server);
    port_ = server->serverPort();
    return port_;
}

GateVerdict ApiServer::admit(const RequestHead &head) const {
    if (auto foreign = foreignRequest(head.headers)) {
        ++refusedForeign;
        return refusal(403, QStringLiteral("forbidden"), *foreign);
    }
    // Nothing outside the API is served: answered here, so no path lets
    // a client without a key send a body or hold a connection.
    if (head.path != QLatin1String("/mcp") && head.path != QLatin1String("/v1") &&
        !head.path.startsWith(QLatin1String("/v1/")))
        return refusal(404, QStringLiteral("not_found"),
                       QStringLiteral("no such endpoint %1: the API lives under /v1 (see "
                                      "docs/api.md)")
                           .arg(head.path.left(200)));
    if (auto account = accountOf(head.headers); !account) {
        ++refusedUnauthenticated;
        GateVerdict unauthorized =
            refusal(401, QStringLiteral("unauthorized"), account.error().message);
        unauthorized.headers = {{"WWW-Authenticate", "Bearer"}};
        return unauthorized;
    }
    GateVerdict verdict;
    // Only file uploads may be larger than a JSON body (/mcp included).
    verdict.bodyLimit = head.method == "PUT" && head.path.endsWith(QLatin1String("/files"))
                            ? service_->engine()->config().fileSizeLimit
                            : kMaxJsonBody;
    return verdict;
}

void ApiServer::missingHandler(const QHttpServerRequest &, QTcpSocket *) {
    // Every request is handled in handleRequest(); nothing is missing.
}

bool ApiServer::handleRequest(const QHttpServerRequest &request, QTcpSocket *socket) {
    auto call = std::make_shared<Call>();
    call->clock.start();
    call->method = request.method();
    call->methodName = methodName(call->method);
    call->path = request.url().path();
    call->query = request.query();
    for (const auto &[name, value] : request.headers())
        call->headers.insert(name.toLower(), value);
    call->body = request.body();
    call->responder = std::make_unique<QHttpServerResponder>(makeResponder(request, socket));
    call->socket = socket;
    // The gate checked the first request of the connection; pipelined ones
    // reach here unjudged (api/requestgate.cpp), so Host and Origin again.
    if (auto foreign = foreignRequest(call->headers)) {
        ++refusedForeign;
        call->foreign = true;
        call->error(403, QStringLiteral("forbidden"), *foreign);
        return true;
    }
    route(call);
    return true;
}

std::optional<QString>
ApiServer::foreignRequest(const QHash<QByteArray, QByteArray> &headers) const {
    const QString port = QString::number(port_);
    const QString host = QString::fromLatin1(headers.value("host")).toLower();
    const QString listen = service_->settings().listenAddress;
    QStringList hosts{QStringLiteral("127.0.0.1"), QStringLiteral("localhost"),
                      QStringLiteral("[::1]")};
    if (listen != QLatin1String("127.0.0.1") && listen != QLatin1String("::1"))
        hosts << (listen.contains(QLatin1Char(':')) ? QStringLiteral("[%1]").arg(listen) : listen);
    bool hostOk = false;
    for (const QString &h : hosts)
        hostOk = hostOk || host == h || host == h + QLatin1Char(':') + port;
    if (!hostOk)
        return QStringLiteral("Host '%1' is not this machine: Sandcastle answers only "
                              "requests addressed to 127.0.0.1, localhost or [::1] (this "
                              "stops web pages using DNS rebinding)")
            .arg(host.left(100));
    if (!headers.contains("origin"))
        return std::nullopt;
    const QString origin = QString::fromLatin1(headers.value("origin"));
    QStringList origins = service_->settings().allowedOrigins;
    for (const QString &h : hosts)
        origins << QStringLiteral("http://%1:%2").arg(h, port);
    if (origins.contains(origin))
        return std::nullopt;
    return QStringLiteral("Origin '%1' is not allowed to call this API; a browser page "
                          "must be added with `sandcastle config set allowed_origins ...`")
        .arg(origin.left(100));
}

Result<QString> ApiServer::accountOf(const QHash<QByteArray, QByteArray> &headers) const {
    const QByteArray header = headers.value("authorization");
    const QByteArray scheme = header.left(7).toLower();
    if (header.isEmpty() || scheme != "bearer ")
        return fail(Kind::PermissionDenied,
                    QStringLiteral("missing API key: send the header 'Authorization: Bearer "
                                   "<key>' (`sandcastle keys create` makes a key)"));
    auto key = service_->store()->authenticate(QString::fromLatin1(header.mid(7).trimmed()));
    if (!key)
        return fail(Kind::PermissionDenied,
                    QStringLiteral("the API key is not valid or was revoked (`sandcastle keys "
                                   "list` shows the keys)"));
    return key->accountId;
}

bool ApiServer::authenticate(Call &call) const {
    auto account = accountOf(call.headers);
    if (!account) {
        // The gate let this request through a moment ago; a key revoked
        // since then ends here.
        call.error(401, QStringLiteral("unauthorized"), account.error().message,
                   {{"WWW-Authenticate", "Bearer"}});
        return false;
    }
    call.accountId = *account;
    return true;
}

void ApiServer::route(const std::shared_ptr<Call> &call) {
    const QStringList parts = call->path.split(QLatin1Char('/'), Qt::SkipEmptyParts);
    if (parts.size() == 1 && parts.first() == QLatin1String("mcp")) {
        if (authenticate(*call))
            mcp(call);
        return;
    }
    if (parts.value(0) != QLatin1String("v1")) {
        call->error(404, QStringLiteral("not_found"),
                    QStringLiteral("no such endpoint %1: the API lives under /v1 (see "
                                   "docs/api.md)")
                        .arg(call->path.left(200)));
        return;
    }
    if (!authenticate(*call))
        return;
    const QString top = parts.value(1);
    if (parts.size() == 2 && top == QLatin1String("sizes")) {
        if (call->method != Method::Get)
            return methodNotAllowed(*call, "GET");
        call->json(200, sizesJson(service_->settings()));
    } else if (parts.size() == 2 && top == QLatin1String("system")) {
        if (call->method != Method::Get)
            return methodNotAllowed(*call, "GET");
        call->json(200, systemJson(*service_->engine()));
    } else if (parts.size() == 2 && top == QLatin1String("account")) {
        if (call->method != Method::Get)
            return methodNotAllowed(*call, "GET");
        auto account = service_->store()->account(call->accountId);
        auto live = service_->store()->liveCount(call->accountId);
        if (!account || !live)
            return call->error(
                live ? EngineError{Kind::Internal, QStringLiteral("the account cannot be read")}
                     : live.error());
        call->json(200, accountJson(*account, *live, service_->settings()));
    } else if (parts.size() == 2 && top == QLatin1String("sandboxes")) {
        sandboxes(call);
    } else if ((parts.size() == 3 || parts.size() == 4) && top == QLatin1String("sandboxes")) {
        sandbox(call, parts.at(2), parts.value(3));
    } else {
        call->error(
            404, QStringLiteral("not_found"),
            QStringLiteral("no such endpoint %1 (see docs/api.md)").arg(call->path.left(200)));
    }
}

void ApiServer::mcp(const std::shared_ptr<Call> &call) {
    McpRequest request{call->accountId, call->methodName.toLatin1(), call->headers, call->body};
    mcp_->handle(request).then(this, [call](McpReply reply) {
        QByteArray contentType;
        QList<std::pair<QByteArray, QByteArray>> extra;
        for (const auto &[name, value] : reply.headers) {
            if (name == "Content-Type")
                contentType = value;
            else
                extra.append({name, value});
        }
        call->send(reply.status, reply.body, contentType, extra);
    });
}

void ApiServer::sandboxes(const std::shared_ptr<Call> &call) {
    if (call->method == Method::Get) {
        auto q = parseList(call->query);
        if (!q)
            return call->error(q.error());
        // One more than asked tells whether there is a next page.
        auto rows = service_->list(call->accountId, q->limit + 1, q->startingAfter, q->status);
        if (!rows)
            return call->error(rows.error());
        QJsonArray data;
        for (int i = 0; i < std::min<int>(q->limit, rows->size()); ++i)
            data.append(sandboxJson(rows->at(i)));
        call->json(200, {{QStringLiteral("data"), data},
                         {QStringLiteral("has_more"), rows->size() > q->limit}});
        return;
    }
    if (call->method != Method::Post)
        return methodNotAllowed(*call, "GET, POST");
    if (auto ok = onlyParams(call->query, {}); !ok)
        return call->error(ok.error());
    auto request = parseCreate(call->body, call->headers.value("idempotency-key"));
    if (!request)
        return call->error(request.error());
    answerLater(
        this, call, service_->create(call->accountId, *request), [](Call &c, const SandboxView &v) {
            QList<std::pair<QByteArray, QByteArray>> extra;
            if (v.replayed)
                extra.append(std::pair<QByteArray, QByteArray>("Idempotent-Replayed", "true"));
            c.json(201, sandboxJson(v.record), extra);
        });
}

void ApiServer::sandbox(const std::shared_ptr<Call> &call, const QString &id,
                        const QString &action) {
    if (action.isEmpty()) {
        if (call->method == Method::Get) {
            auto box = service_->get(call->accountId, id);
            return box ? call->json(200, sandboxJson(*box)) : call->error(box.error());
        }
        if (call->method != Method::Delete)
            return methodNotAllowed(*call, "GET, DELETE");
        return answerLater(this, call, service_->destroy(call->accountId, id),
                           [](Call &c, const SandboxRecord &r) { c.json(200, sandboxJson(r)); });
    }
    if (action == QLatin1String("exec")) {
        if (call->method != Method::Post)
            return methodNotAllowed(*call, "POST");
        auto request = parseExec(call->body);
        if (!request)
            return call->error(request.error());
        return answerLater(this, call, service_->exec(call->accountId, id, *request),
                           [](Call &c, const ExecResult &r) { c.json(200, execResultJson(r)); });
    }
    if (action == QLatin1String("execs")) {
        if (call->method != Method::Get)
            return methodNotAllowed(*call, "GET");
        auto q = parseExecsQuery(call->query);
        if (!q)
            return call->error(q.error());
        auto rows = service_->execs(call->accountId, id, q->limit, q->before);
        if (!rows)
            return call->error(rows.error());
        QJsonArray data;
        for (const ExecRecord &e : *rows)
            data.append(execRecordJson(e));
        return call->json(200, {{QStringLiteral("data"), data}});
    }
    if (action == QLatin1String("extend")) {
        if (call->method != Method::Post)
            return methodNotAllowed(*call, "POST");
        auto minutes = parseExtend(call->body);
        if (!minutes)
            return call->error(minutes.error());
        auto box = service_->extend(call->accountId, id, *minutes);
        return box ? call->json(200, sandboxJson(*box)) : call->error(box.error());
    }
    if (action == QLatin1String("files"))
        return files(call, id);
    call->error(404, QStringLiteral("not_found"),
                QStringLiteral("no such endpoint %1: a sandbox has exec, execs, extend and files")
                    .arg(call->path.left(200)));
}

void ApiServer::files(const std::shared_ptr<Call> &call, const QString &id) {
    if (call->method != Method::Get && call->method != Method::Put)
        return methodNotAllowed(*call, "GET, PUT");
    auto path = parseFilePath(call->query);
    if (!path)
        return call->error(path.error());
    if (call->method == Method::Get) {
        return answerLater(
            this, call, service_->readFile(call->accountId, id, *path),
            [](Call &c, const QByteArray &data) { c.send(200, data, "application/octet-stream"); });
    }
    const qint64 limit = service_->engine()->config().fileSizeLimit;
    if (call->body.size() > limit)
        return call->error({Kind::TooLarge, QStringLiteral("files are limited to %1 bytes (%2 "
                                                           "MiB); split it or fetch it from "
                                                           "inside the sandbox")
                                                .arg(limit)
                                                .arg(limit >> 20)});
    const qint64 size = call->body.size();
    answerLater(this, call, service_->writeFile(call->accountId, id, *path, call->body),
                [path = *path, size](Call &c, bool) {
                    c.json(200, {{QStringLiteral("path"), path}, {QStringLiteral("bytes"), size}});
                });
}

} // namespace sandcastle::api
