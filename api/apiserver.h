// The REST API on the embedded HTTP server. Each request is parsed into a
// typed request, checked (Host, Origin, key), handed to the sandbox
// service and answered when the service's future finishes: the event loop
// never waits on a VM. A client that goes away before its answer is ready
// is noticed (the socket is watched) and the answer is dropped; the work
// itself completes and is recorded.
#pragma once

#include "errors.h"

#include <QAbstractHttpServer>
#include <QHostAddress>

#include <memory>
#include <optional>

namespace sandcastle {
class SandboxService;
}

namespace sandcastle::api {

class McpServer;
struct GateVerdict;
struct RequestHead;

class ApiServer : public QAbstractHttpServer {
    Q_OBJECT
public:
    explicit ApiServer(SandboxService *service, QObject *parent = nullptr);
    ~ApiServer() override;

    /// Listens on `address`:`port` (0: any free port). Returns the port.
    Result<quint16> start(const QHostAddress &address, quint16 port);
    quint16 port() const { return port_; }

    struct Call;

protected:
    bool handleRequest(const QHttpServerRequest &request, QTcpSocket *socket) override;
    void missingHandler(const QHttpServerRequest &request, QTcpSocket *socket) override;

private:
    /// What the gate answers from a request's head alone.
    GateVerdict admit(const RequestHead &head) const;
    /// Why a request looks made by a web page (DNS rebinding, CSRF), if it does.
    std::optional<QString> foreignRequest(const QHash<QByteArray, QByteArray> &headers) const;
    /// The account of the request's API key.
    Result<QString> accountOf(const QHash<QByteArray, QByteArray> &headers) const;
    bool authenticate(Call &call) const;
    void route(const std::shared_ptr<Call> &call);
    void sandboxes(const std::shared_ptr<Call> &call);
    void sandbox(const std::shared_ptr<Call> &call, const QString &id, const QString &action);
    void files(const std::shared_ptr<Call> &call, const QString &id);
    void mcp(const std::shared_ptr<Call> &call);

    SandboxService *service_;
    McpServer *mcp_;
    quint16 port_ = 0;
};

} // namespace sandcastle::api
