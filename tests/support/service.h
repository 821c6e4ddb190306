// Test support: the real `sandcastle serve` as a child process in its own
// data dir, and a small HTTP client over real sockets (QNetworkAccessManager
// for well-formed requests, a raw QTcpSocket for malformed ones).
#pragma once

#include "processes.h"

#include <QDir>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QNetworkAccessManager>
#include <QNetworkReply>
#include <QProcess>
#include <QRegularExpression>
#include <QTcpServer>
#include <QTcpSocket>
#include <QTest>

namespace testing {

inline QString sandcastleBinary() {
    return QStringLiteral(BUILD_DIR "/app/sandcastle");
}

/// The environment every child gets: our data dir, the shared image cache.
inline QProcessEnvironment serviceEnv(const QString &dataDir) {
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    env.insert(QStringLiteral("SANDCASTLE_DATA_DIR"), dataDir);
    return env;
}

/// Runs `sandcastle ARGS` to completion; returns its stdout (fails the
/// test on a non-zero exit).
inline QString admin(const QString &dataDir, const QStringList &args, int *exitCode = nullptr) {
    QProcess p;
    p.setProcessEnvironment(serviceEnv(dataDir));
    p.start(sandcastleBinary(), args);
    p.waitForFinished(30000);
    if (exitCode)
        *exitCode = p.exitCode();
    else if (p.exitCode() != 0)
        qWarning() << "sandcastle" << args << "failed:" << p.readAllStandardError();
    return QString::fromUtf8(p.readAllStandardOutput());
}

inline QString keyIn(const QString &text) {
    static const QRegularExpression re(QStringLiteral("(sc_[a-z2-7]{40})"));
    return re.match(text).captured(1);
}

class Service {
public:
    explicit Service(QString dataDir)
        : dataDir_(std::move(dataDir)) {}
    ~Service() { kill(); }

    /// Starts the service and waits for it to print its URL.
    bool start(int timeoutMs = 120000) {
        process_.reset(new QProcess);
        reported_ = false;
        process_->setProcessEnvironment(serviceEnv(dataDir_));
        process_->setProcessChannelMode(QProcess::SeparateChannels);
        process_->setStandardErrorFile(dataDir_ + QStringLiteral("/serve.stderr"),
                                       QIODevice::Append);
        QStringList args = {QStringLiteral("serve"), QStringLiteral("--port"),
                            QString::number(port_)};
        if (!listen_.isEmpty())
            args << QStringLiteral("--listen") << listen_;
        process_->start(sandcastleBinary(), args);
        static const QRegularExpression url(QStringLiteral("http://[0-9.]+:(\\d+)/v1"));
        QString seen;
        const bool ok = QTest::qWaitFor(
            [&] {
                seen += QString::fromUtf8(process_->readAllStandardOutput());
                return url.match(seen).hasMatch() || process_->state() == QProcess::NotRunning;
            },
            timeoutMs);
        if (!ok || !url.match(seen).hasMatch())
            return false;
        // Whatever address it listens on, the tests come in over loopback.
        base_ = QStringLiteral("http://127.0.0.1:%1/v1").arg(url.match(seen).captured(1));
        if (const QString k = keyIn(seen); !k.isEmpty())
            key_ = k;
        return true;
    }
    void kill() {
        reportUnexpectedExit();
        if (process_ && process_->state() != QProcess::NotRunning) {
            process_->kill(); // SIGKILL: no chance to tidy up
            process_->waitForFinished(10000);
        }
    }
    /// A service that ended on its own is a finding: its last words go to
    /// the test's output (the data dir is deleted with the test).
    void reportUnexpectedExit() {
        if (!process_ || process_->state() != QProcess::NotRunning || reported_)
            return;
        reported_ = true;
        QFile err(dataDir_ + QStringLiteral("/serve.stderr"));
        err.open(QIODevice::ReadOnly);
        qWarning().noquote() << "the service ended on its own: exit" << process_->exitCode()
                             << (process_->exitStatus() == QProcess::CrashExit ? "(crashed)" : "")
                             << "\n--- serve.stderr (end) ---\n"
                             << QString::fromUtf8(err.readAll().right(4000))
                             << "\n--- sandcastle.log (end) ---\n"
                             << log().right(4000);
    }
    /// Destroys every running sandbox of the first account (a test that
    /// failed half-way may leave one), then stops the service.
    void destroyLiveAndTerminate();
    void terminate() {
        reportUnexpectedExit();
        if (process_ && process_->state() != QProcess::NotRunning) {
            process_->terminate();
            process_->waitForFinished(30000);
        }
    }
    bool running() const { return process_ && process_->state() == QProcess::Running; }
    /// The port of the next start (0: any free one).
    void setPort(int port) { port_ = port; }
    /// The address of the next start (empty: the setting, loopback).
    void setListen(const QString &address) { listen_ = address; }
    QString base() const { return base_; }
    QString key() const { return key_; }
    QString dataDir() const { return dataDir_; }
    QString log() const {
        QFile f(dataDir_ + QStringLiteral("/sandcastle.log"));
        f.open(QIODevice::ReadOnly);
        return QString::fromUtf8(f.readAll());
    }

private:
    QString dataDir_;
    std::unique_ptr<QProcess> process_;
    QString base_;
    QString key_;
    int port_ = 0;
    QString listen_;
    bool reported_ = false;
};

/// A TCP port that is free right now.
inline int freePort() {
    QTcpServer probe;
    probe.listen(QHostAddress::LocalHost, 0);
    return probe.serverPort();
}

struct Reply {
    int status = 0;
    QByteArray body;
    QJsonObject json;
    QHash<QByteArray, QByteArray> headers;
    QString errorType() const {
        return json.value(QStringLiteral("error"))
            .toObject()
            .value(QStringLiteral("type"))
            .toString();
    }
    QString message() const {
        return json.value(QStringLiteral("error"))
            .toObject()
            .value(QStringLiteral("message"))
            .toString();
    }
};

class Http {
public:
    Http(QString base, QString key)
        : base_(std::move(base))
        , key_(std::move(key)) {}
    void setKey(const QString &key) { key_ = key; }

    /// Starts a request; the caller waits on the reply (or aborts it).
    QNetworkReply *send(const QByteArray &method, const QString &path, const QByteArray &body = {},
                        const QList<std::pair<QByteArray, QByteArray>> &headers = {}) {
        QNetworkRequest request(QUrl(base_ + path));
        if (!key_.isEmpty())
            request.setRawHeader("Authorization", "Bearer " + key_.toUtf8());
        if (!body.isEmpty())
            request.setHeader(QNetworkRequest::ContentTypeHeader, "application/json");
        for (const auto &[k, v] : headers)
            request.setRawHeader(k, v);
        request.setTransferTimeout(0);
        return nam_.sendCustomRequest(request, method, body);
    }

    static Reply wait(QNetworkReply *reply, int timeoutMs = 600000) {
        if (!QTest::qWaitFor([&] { return reply->isFinished(); }, timeoutMs))
            qFatal("no HTTP answer within %d ms", timeoutMs);
        Reply r;
        r.status = reply->attribute(QNetworkRequest::HttpStatusCodeAttribute).toInt();
        r.body = reply->readAll();
        r.json = QJsonDocument::fromJson(r.body).object();
        for (const auto &[k, v] : reply->rawHeaderPairs())
            r.headers.insert(k.toLower(), v);
        reply->deleteLater();
        return r;
    }

    Reply call(const QByteArray &method, const QString &path, const QByteArray &body = {},
               const QList<std::pair<QByteArray, QByteArray>> &headers = {}) {
        return wait(send(method, path, body, headers));
    }
    Reply call(const QByteArray &method, const QString &path, const QJsonObject &body,
               const QList<std::pair<QByteArray, QByteArray>> &headers = {}) {
        return call(method, path, QJsonDocument(body).toJson(QJsonDocument::Compact), headers);
    }

    /// Sends `bytes` as they are over a fresh connection; returns the
    /// status of the answer (0: none) and the answer.
    std::pair<int, QByteArray> raw(const QByteArray &bytes, int timeoutMs = 30000) {
        const QUrl url(base_);
        QTcpSocket s;
        s.connectToHost(url.host(), quint16(url.port()));
        if (!s.waitForConnected(5000))
            return {0, {}};
        s.write(bytes);
        QByteArray answer;
        // A server that closes without answering is a result too (status 0).
        (void)QTest::qWaitFor(
            [&] {
                answer += s.readAll();
                const int end = answer.indexOf("\r\n\r\n");
                if (end < 0)
                    return s.state() != QAbstractSocket::ConnectedState;
                static const QRegularExpression len(QStringLiteral("(?i)content-length: *(\\d+)"));
                auto m = len.match(QString::fromLatin1(answer.left(end)));
                return !m.hasMatch() || answer.size() >= end + 4 + m.captured(1).toInt();
            },
            timeoutMs);
        const int status = answer.startsWith("HTTP/1.1 ") ? answer.mid(9, 3).toInt() : 0;
        return {status, answer};
    }

private:
    QString base_;
    QString key_;
    QNetworkAccessManager nam_;
};

inline void Service::destroyLiveAndTerminate() {
    if (running()) {
        Http http(base_, key_);
        Reply live = http.call("GET", QStringLiteral("/sandboxes?status=running&limit=100"));
        for (const QJsonValue &v : live.json.value("data").toArray())
            http.call("DELETE",
                      QStringLiteral("/sandboxes/") + v.toObject().value("id").toString());
    }
    terminate();
}

} // namespace testing
