#include "limitedtcpserver.h"

#include "json.h"

#include <QJsonDocument>
#include <QTcpSocket>
#include <QtDebug>

namespace sandcastle::api {

LimitedTcpServer::LimitedTcpServer(qint64 limit, QObject *parent)
    : QTcpServer(parent)
    , limit_(limit) {}

void LimitedTcpServer::incomingConnection(qintptr descriptor) {
    auto *socket = new QTcpSocket(this);
    if (!socket->setSocketDescriptor(descriptor)) {
        delete socket;
        return;
    }
    // Bytes received since the server last answered on this connection.
    auto unanswered = std::make_shared<qint64>(0);
    connect(socket, &QTcpSocket::bytesWritten, socket, [unanswered](qint64) { *unanswered = 0; });
    connect(socket, &QTcpSocket::readyRead, socket, [this, socket, unanswered] {
        // QtHttpServer reads everything on each readyRead, so what is
        // available now is what just arrived.
        *unanswered += socket->bytesAvailable();
        if (*unanswered <= limit_)
            return;
        qInfo().noquote() << "request over" << limit_ << "bytes: answered 413 and closed";
        const QByteArray body =
            QJsonDocument(errorJson(QStringLiteral("payload_too_large"),
                                    QStringLiteral("the request is over %1 bytes (files are "
                                                   "limited to 100 MiB)")
                                        .arg(limit_)))
                .toJson(QJsonDocument::Compact);
        socket->readAll(); // drop what arrived, keep QtHttpServer from parsing it
        socket->write("HTTP/1.1 413 Payload Too Large\r\nContent-Type: application/json\r\n"
                      "Connection: close\r\nContent-Length: " +
                      QByteArray::number(body.size()) + "\r\n\r\n" + body);
        socket->disconnectFromHost();
    });
    addPendingConnection(socket); // QTcpServer then emits newConnection
}

} // namespace sandcastle::api
