// `sandcastle mcp`: MCP over stdio for agents that launch MCP servers as
// commands. A thin bridge: each JSON-RPC line from stdin is POSTed to the
// running service's /mcp with the API key, and each answer is written to
// stdout as one line. The service does the work; when it is not running,
// requests get a JSON-RPC error that says so (and stderr says it too).
#include "commands.h"

#include <QCoreApplication>
#include <QDir>
#include <QFile>
#include <QJsonDocument>
#include <QJsonObject>
#include <QNetworkAccessManager>
#include <QNetworkReply>
#include <QThread>

#include <cstdio>
#include <functional>
#include <iostream>
#include <string>

namespace sandcastle {

namespace {

/// Key and URL: environment first, then ~/.config/sandcastle/config.json.
struct Endpoint {
    QString url = QStringLiteral("http://127.0.0.1:8765");
    QString key;
};

Endpoint endpoint() {
    Endpoint e;
    const QString config =
        qEnvironmentVariable("XDG_CONFIG_HOME", QDir::homePath() + QStringLiteral("/.config")) +
        QStringLiteral("/sandcastle/config.json");
    QFile f(config);
    if (f.open(QIODevice::ReadOnly)) {
        const QJsonObject o = QJsonDocument::fromJson(f.readAll()).object();
        e.url = o.value(QStringLiteral("url")).toString(e.url);
        e.key = o.value(QStringLiteral("api_key")).toString();
    }
    for (const char *name : {"AAS_API_KEY", "SANDCASTLE_API_KEY"}) {
        if (qEnvironmentVariableIsSet(name))
            e.key = qEnvironmentVariable(name);
    }
    if (qEnvironmentVariableIsSet("SANDCASTLE_URL"))
        e.url = qEnvironmentVariable("SANDCASTLE_URL");
    while (e.url.endsWith(QLatin1Char('/')))
        e.url.chop(1);
    if (e.url.endsWith(QLatin1String("/v1")))
        e.url.chop(3);
    return e;
}

void writeLine(const QByteArray &json) {
    fwrite(json.constData(), 1, size_t(json.size()), stdout);
    fputc('\n', stdout);
    fflush(stdout);
}

/// Reads stdin on its own thread; lines arrive on the main thread.
class StdinReader : public QThread {
    Q_OBJECT
signals:
    void line(const QByteArray &line);

protected:
    void run() override {
        std::string s;
        while (std::getline(std::cin, s)) {
            if (!s.empty())
                emit line(QByteArray::fromStdString(s));
        }
    }
};

class Bridge : public QObject {
public:
    explicit Bridge(Endpoint e)
        : endpoint_(std::move(e)) {}

    void forward(const QByteArray &line) { post(line, false, {}); }

    /// Posts one message; `then` (if any) runs after a successful answer
    /// instead of the answer being written out.
    void post(const QByteArray &line, bool retried, std::function<void()> then) {
        const QJsonObject message = QJsonDocument::fromJson(line).object();
        const QJsonValue id = message.value(QStringLiteral("id"));
        if (message.value(QStringLiteral("method")).toString() == QLatin1String("initialize") &&
            !then)
            initialize_ = line;
        QNetworkRequest request(QUrl(endpoint_.url + QStringLiteral("/mcp")));
        request.setHeader(QNetworkRequest::ContentTypeHeader, "application/json");
        request.setRawHeader("Accept", "application/json, text/event-stream");
        request.setRawHeader("Authorization", "Bearer " + endpoint_.key.toUtf8());
        if (!session_.isEmpty())
            request.setRawHeader("Mcp-Session-Id", session_);
        if (!version_.isEmpty())
            request.setRawHeader("MCP-Protocol-Version", version_);
        request.setTransferTimeout(0); // commands may run for an hour
        ++inFlight_;
        QNetworkReply *reply = nam_.post(request, line);
        connect(reply, &QNetworkReply::finished, this, [this, reply, id, line, retried, then] {
            reply->deleteLater();
            --inFlight_;
            const int status = reply->attribute(QNetworkRequest::HttpStatusCodeAttribute).toInt();
            const QByteArray body = reply->readAll();
            if (reply->hasRawHeader("Mcp-Session-Id"))
                session_ = reply->rawHeader("Mcp-Session-Id");
            const QJsonObject answer = QJsonDocument::fromJson(body).object();
            const QString version = answer.value(QStringLiteral("result"))
                                        .toObject()
                                        .value(QStringLiteral("protocolVersion"))
                                        .toString();
            if (!version.isEmpty())
                version_ = version.toLatin1();
            if (then && (status == 200 || status == 202)) {
                then();
                return finishIfDone();
            }
            if (status == 404 && !session_.isEmpty() && !initialize_.isEmpty() && !retried) {
                // The service restarted (sessions live in its memory): open
                // a new session the way the client opened the first, then
                // send this message again.
                session_.clear();
                reinitialize(line);
                return finishIfDone();
            }
            if (status == 202)
                return finishIfDone();
            // Every JSON-RPC answer goes back, also errors with a null id.
            if (answer.contains(QStringLiteral("jsonrpc"))) {
                writeLine(QJsonDocument(answer).toJson(QJsonDocument::Compact));
                return finishIfDone();
            }
            QString why;
            if (status == 0)
                why = QStringLiteral("Sandcastle is not running at %1 (%2): start it with "
                                     "`sandcastle serve`, or set SANDCASTLE_URL")
                          .arg(endpoint_.url, reply->errorString());
            else if (status == 401)
                why = QStringLiteral("the API key was refused: set AAS_API_KEY (or api_key in "
                                     "~/.config/sandcastle/config.json) to a key from "
                                     "`sandcastle keys create`");
            else
                why = QStringLiteral("Sandcastle answered HTTP %1: %2")
                          .arg(status)
                          .arg(QString::fromUtf8(body.left(300)));
            fprintf(stderr, "sandcastle mcp: %s\n", qPrintable(why));
            writeLine(QJsonDocument(QJsonObject{{QStringLiteral("jsonrpc"), QStringLiteral("2.0")},
                                                {QStringLiteral("id"), id},
                                                {QStringLiteral("error"),
                                                 QJsonObject{{QStringLiteral("code"), -32000},
                                                             {QStringLiteral("message"), why}}}})
                          .toJson(QJsonDocument::Compact));
            finishIfDone();
        });
    }
    void reinitialize(const QByteArray &pending) {
        post(initialize_, true, [this, pending] {
            post(R"({"jsonrpc":"2.0","method":"notifications/initialized"})", true,
                 [this, pending] { post(pending, true, {}); });
        });
    }

    void inputEnded() {
        inputEnded_ = true;
        finishIfDone();
    }

private:
    void finishIfDone() {
        if (inputEnded_ && inFlight_ == 0)
            QCoreApplication::quit();
    }

    Endpoint endpoint_;
    QNetworkAccessManager nam_;
    QByteArray session_;
    QByteArray initialize_; // the client's own, replayed after a restart
    QByteArray version_;
    int inFlight_ = 0;
    bool inputEnded_ = false;
};

} // namespace

int runMcpStdio() {
    const Endpoint e = endpoint();
    if (e.key.isEmpty()) {
        fprintf(stderr, "sandcastle mcp: no API key: set AAS_API_KEY (or api_key in "
                        "~/.config/sandcastle/config.json) to a key from `sandcastle keys "
                        "create`\n");
        return 2;
    }
    Bridge bridge(e);
    StdinReader reader;
    QObject::connect(&reader, &StdinReader::line, &bridge, &Bridge::forward);
    QObject::connect(&reader, &QThread::finished, &bridge, [&] { bridge.inputEnded(); });
    reader.start();
    const int rc = QCoreApplication::exec();
    reader.wait(100);
    return rc;
}

} // namespace sandcastle

#include "mcpstdio.moc"
