#include "requestgate.h"

#include "json.h"

#include <QJsonDocument>
#include <QPointer>
#include <QTcpSocket>
#include <QTimer>
#include <QUrl>
#include <QtDebug>

#include <algorithm>
#include <cctype>

namespace sandcastle::api {

namespace {

QByteArray reasonPhrase(int status) {
    switch (status) {
    case 400:
        return "Bad Request";
    case 401:
        return "Unauthorized";
    case 403:
        return "Forbidden";
    case 404:
        return "Not Found";
    case 408:
        return "Request Timeout";
    case 413:
        return "Payload Too Large";
    case 431:
        return "Request Header Fields Too Large";
    case 503:
        return "Service Unavailable";
    default:
        return "Error";
    }
}

/// The whole answer to a refused request; the connection closes after it.
QByteArray responseFor(const GateVerdict &verdict) {
    const QByteArray body = QJsonDocument(verdict.error).toJson(QJsonDocument::Compact);
    QByteArray out = "HTTP/1.1 " + QByteArray::number(verdict.status) + ' ' +
                     reasonPhrase(verdict.status) +
                     "\r\nContent-Type: application/json\r\nConnection: close\r\n"
                     "Cache-Control: no-store\r\nContent-Length: " +
                     QByteArray::number(body.size()) + "\r\n";
    for (const auto &[name, value] : verdict.headers)
        out += name + ": " + value + "\r\n";
    return out + "\r\n" + body;
}

} // namespace

GateVerdict refusal(int status, const QString &type, const QString &message) {
    GateVerdict v;
    v.status = status;
    v.error = errorJson(type, message);
    return v;
}

bool parseRequestHead(const QByteArray &head, RequestHead *out) {
    const QList<QByteArray> lines = head.split('\n');
    const QList<QByteArray> request = lines.value(0).trimmed().split(' ');
    if (request.size() != 3 || !request.at(2).startsWith("HTTP/1.") || request.at(0).isEmpty())
        return false;
    out->method = request.at(0);
    const QUrl url(QString::fromLatin1(request.at(1)));
    out->path = url.path();
    out->headers.clear();
    int fields = 0;
    for (qsizetype i = 1; i < lines.size(); ++i) {
        const QByteArray line = lines.at(i).endsWith('\r') ? lines.at(i).chopped(1) : lines.at(i);
        if (line.isEmpty())
            continue;
        const qsizetype colon = line.indexOf(':');
        // Folded lines (a leading space) are obsolete and a smuggling tool;
        // a name is a token (no space before the colon), and QtHttpServer
        // drops every header of a head with more than 100.
        if (colon <= 0 || ++fields > 100)
            return false;
        const QByteArray name = line.left(colon).toLower();
        static const QByteArray tchar = "!#$%&'*+-.^_`|~";
        for (char c : name)
            if (!std::isalnum(static_cast<unsigned char>(c)) && !tchar.contains(c))
                return false;
        const QByteArray value = line.mid(colon + 1).trimmed();
        if (name == "content-length" && out->headers.contains(name) &&
            out->headers.value(name) != value)
            return false;
        out->headers.insert(name, value);
    }
    return true;
}

/// One connection's reading of its requests: where the current head or
/// body stands, and the deadline that applies to it.
class GateConnection : public QObject {
public:
    GateConnection(RequestGate *gate, QTcpSocket *socket)
        : QObject(socket)
        , gate_(gate)
        , socket_(socket) {
        deadline_.setSingleShot(true);
        connect(&deadline_, &QTimer::timeout, this, &GateConnection::expired);
        // Connected before QtHttpServer's own slot, so this runs first and
        // may answer and drop the bytes before they are parsed there.
        connect(socket, &QTcpSocket::readyRead, this, &GateConnection::arrived);
        connect(socket, &QTcpSocket::bytesWritten, this, &GateConnection::answered);
        ++gate_->open_;
        armTimer();
    }
    ~GateConnection() override {
        if (gate_) // at shutdown the sockets go with the gate
            --gate_->open_;
    }

private:
    enum class Phase { Head, Body, ChunkedBody };

    void arrived() {
        // While an answer is owed, what arrives is a pipelined request.
        // QtHttpServer 6.4 parses one request per read and leaves the rest
        // unread for a queued readyRead, so the gate cannot tell new bytes
        // from those it saw; it leaves them to the handlers, which check
        // Host, Origin and the key again. Only a client whose first request
        // passed the gate with a key gets this far.
        if (unanswered_ > 0 && phase_ == Phase::Head)
            return;
        if (drainLeft_ >= 0) { // the rest of a body answered 413
            drainLeft_ -= socket_->bytesAvailable();
            socket_->readAll();
            if (drainLeft_ <= 0)
                socket_->disconnectFromHost();
            else
                deadline_.start(gate_->limits_.idleTimeoutMs);
            return;
        }
        // Otherwise QtHttpServer has read everything before: what is
        // available now is what just arrived.
        QByteArray data = socket_->peek(socket_->bytesAvailable());
        // Blank lines between requests are allowed, but renew nothing.
        const bool blank =
            phase_ == Phase::Head && !headStarted_ &&
            std::all_of(data.begin(), data.end(), [](char c) { return c == '\r' || c == '\n'; });
        while (!data.isEmpty() && !closing_) {
            if (unanswered_ > 0 && phase_ == Phase::Head)
                break; // pipelined: see above
            switch (phase_) {
            case Phase::Head:
                data = readHead(data);
                break;
            case Phase::Body: {
                const qint64 n = std::min<qint64>(bodyLeft_, data.size());
                bodyLeft_ -= n;
                data.remove(0, n);
                if (bodyLeft_ == 0)
                    requestDone();
                break;
            }
            case Phase::ChunkedBody:
                // The end of a chunked body is not worth parsing here:
                // bytes count against the limit until the answer.
                bodyLeft_ -= data.size();
                data.clear();
                if (bodyLeft_ < 0)
                    refuse(tooLarge());
                break;
            }
        }
        if (!closing_ && !blank)
            armTimer();
    }

    /// Takes head bytes from `data`; returns what follows the head.
    QByteArray readHead(const QByteArray &data) {
        if (head_.isEmpty()) {
            // Blank lines between requests are allowed (RFC 9112 2.2).
            qsizetype skip = 0;
            while (skip < data.size() && (data.at(skip) == '\r' || data.at(skip) == '\n'))
                ++skip;
            if (skip == data.size())
                return {};
            headStarted_ = true;
            head_ = data.mid(skip);
        } else {
            head_ += data;
        }
        const qsizetype end = head_.indexOf("\r\n\r\n");
        // QtHttpServer also ends a head at a bare "\n\n": a head with a
        // bare LF must not slip past the gate unjudged, so it is refused.
        if (const QByteArray head = end < 0 ? head_ : head_.left(end + 2);
            head.count('\n') != head.count("\r\n")) {
            refuse(refusal(400, QStringLiteral("bad_request"),
                           QStringLiteral("lines of an HTTP head end with CRLF")));
            return {};
        }
        // Whole or not yet, a head over the limit is refused.
        if ((end < 0 ? head_.size() : end) > gate_->limits_.maxHeadBytes) {
            refuse(refusal(431, QStringLiteral("headers_too_large"),
                           QStringLiteral("the request's head is over %1 bytes")
                               .arg(gate_->limits_.maxHeadBytes)));
            return {};
        }
        if (end < 0)
            return {};
        const QByteArray rest = head_.mid(end + 4);
        const QByteArray head = head_.left(end);
        head_.clear();
        headStarted_ = false;
        judge(head);
        if (drainLeft_ >= 0) { // refuse() dropped what came with the head
            drainLeft_ -= rest.size();
            if (drainLeft_ <= 0)
                socket_->disconnectFromHost();
        }
        return closing_ ? QByteArray() : rest;
    }

    void judge(const QByteArray &head) {
        RequestHead parsed;
        if (!parseRequestHead(head, &parsed))
            return refuse(refusal(400, QStringLiteral("bad_request"),
                                  QStringLiteral("not an HTTP/1.1 request")));
        GateVerdict verdict = gate_->check_(parsed);
        if (verdict.status != 0)
            return refuse(verdict);
        limit_ = verdict.bodyLimit;
        ++unanswered_;
        if (parsed.headers.value("transfer-encoding").toLower().contains("chunked")) {
            phase_ = Phase::ChunkedBody;
            bodyLeft_ = limit_;
            return;
        }
        bool ok = true;
        const QByteArray length = parsed.headers.value("content-length", "0");
        const qint64 size = length.toLongLong(&ok);
        if (!ok || size < 0 || length.startsWith('+'))
            return refuse(refusal(400, QStringLiteral("bad_request"),
                                  QStringLiteral("Content-Length is not a number")));
        if (size > limit_) {
            // A key holder's client is sending that body now: it is read
            // and dropped, never buffered, and the connection closed at its
            // end, so the client gets to read the 413 (many report a reset
            // instead when the server closes while they still send).
            drainLeft_ = size;
            return refuse(tooLarge());
        }
        bodyLeft_ = size;
        phase_ = Phase::Body;
        if (size == 0)
            requestDone();
    }

    GateVerdict tooLarge() const {
        return refusal(413, QStringLiteral("payload_too_large"),
                       QStringLiteral("the request body is over %1 bytes on this route (JSON "
                                      "bodies: 8 MiB, files: 100 MiB)")
                           .arg(limit_));
    }

    void requestDone() {
        phase_ = Phase::Head;
        served_ = true;
    }

    void answered() {
        // An answer went out: nothing is owed any more (clients send one
        // request at a time), and a chunked body is over.
        unanswered_ = 0;
        if (phase_ == Phase::ChunkedBody)
            phase_ = Phase::Head;
        if (!closing_)
            armTimer();
    }

    void armTimer() {
        // Until its first request is whole, a connection has the head's
        // deadline, counted from the connection or the head's first byte,
        // never renewed by further bytes: else a byte every few seconds, or
        // none at all, would hold the socket for ever.
        const bool awaitingHead =
            phase_ == Phase::Head && (headStarted_ || (!served_ && unanswered_ == 0));
        if (awaitingHead) {
            if (!(deadline_.isActive() && headTimed_))
                deadline_.start(gate_->limits_.headTimeoutMs);
            headTimed_ = true;
            return;
        }
        headTimed_ = false;
        // Between requests, and within a body, the idle deadline, renewed
        // by every byte. A request being answered (an exec may take an
        // hour) has none here; a chunked one (its end is not parsed here)
        // keeps the idle deadline until its answer.
        if (phase_ == Phase::Body || phase_ == Phase::ChunkedBody ||
            (phase_ == Phase::Head && unanswered_ == 0))
            deadline_.start(gate_->limits_.idleTimeoutMs);
        else
            deadline_.stop();
    }

    void expired() {
        if (drainLeft_ >= 0) {
            socket_->disconnectFromHost();
            return;
        }
        if (phase_ == Phase::Head && !headStarted_) {
            socket_->disconnectFromHost(); // nothing begun: close quietly
            return;
        }
        refuse(refusal(408, QStringLiteral("request_timeout"),
                       phase_ == Phase::Head
                           ? QStringLiteral("the request's head did not arrive within %1 s")
                                 .arg(gate_->limits_.headTimeoutMs / 1000.0)
                           : QStringLiteral("the request's body stalled for %1 s")
                                 .arg(gate_->limits_.idleTimeoutMs / 1000.0)));
    }

    void refuse(const GateVerdict &verdict) {
        closing_ = true;
        deadline_.stop();
        socket_->readAll(); // keep QtHttpServer from parsing what arrived
        socket_->write(responseFor(verdict));
        if (drainLeft_ >= 0)
            deadline_.start(gate_->limits_.idleTimeoutMs);
        else
            socket_->disconnectFromHost();
    }

    QPointer<RequestGate> gate_;
    QTcpSocket *socket_;
    QTimer deadline_;
    Phase phase_ = Phase::Head;
    QByteArray head_;
    bool headStarted_ = false;
    bool headTimed_ = false;
    bool closing_ = false;
    bool served_ = false; // a whole request came in on this connection
    qint64 bodyLeft_ = 0;
    qint64 drainLeft_ = -1; // >= 0: bytes of a refused body still to drop
    qint64 limit_ = 0;
    int unanswered_ = 0;
};

RequestGate::RequestGate(const GateLimits &limits, Check check, QObject *parent)
    : QTcpServer(parent)
    , limits_(limits)
    , check_(std::move(check)) {}

void RequestGate::incomingConnection(qintptr descriptor) {
    auto *socket = new QTcpSocket(this);
    if (!socket->setSocketDescriptor(descriptor)) {
        delete socket;
        return;
    }
    connect(socket, &QTcpSocket::disconnected, socket, &QObject::deleteLater);
    if (open_ >= limits_.maxConnections) {
        // Answered and closed here, never handed to QtHttpServer.
        static qint64 refused = 0;
        if (refused++ % 100 == 0)
            qWarning().noquote() << "more than" << limits_.maxConnections
                                 << "connections open: refusing new ones (503); the setting "
                                    "max_connections raises the limit";
        GateVerdict busy =
            refusal(503, QStringLiteral("unavailable"),
                    QStringLiteral("too many open connections (max_connections is %1); close "
                                   "idle ones and retry")
                        .arg(limits_.maxConnections));
        busy.headers = {{"Retry-After", "1"}};
        socket->write(responseFor(busy));
        socket->disconnectFromHost();
        return;
    }
    new GateConnection(this, socket);
    addPendingConnection(socket); // QTcpServer then emits newConnection
}

} // namespace sandcastle::api
