// A QTcpServer that refuses oversized requests before they are buffered.
// QtHttpServer 6.4 reads a whole request body into memory before any
// handler runs and has no limit, so a client could send gigabytes. This
// server sees each connection's bytes first (its readyRead slot is
// connected before QtHttpServer's) and cuts a connection off with a 413
// once more than `limit` bytes arrive without an answer in between.
#pragma once

#include <QTcpServer>

namespace sandcastle::api {

class LimitedTcpServer : public QTcpServer {
    Q_OBJECT
public:
    LimitedTcpServer(qint64 limit, QObject *parent = nullptr);

protected:
    void incomingConnection(qintptr descriptor) override;

private:
    qint64 limit_;
};

} // namespace sandcastle::api
