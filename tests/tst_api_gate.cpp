// The API before authentication, attacked over raw sockets against the
// real service (no sandbox is booted): answers from the request's head
// alone (key, Host, size) without waiting for the body, a head sent a
// byte at a time, idle keep-alive connections, the connection limit, and
// requests that must still pass (pipelined, chunked).
#include "support/service.h"

#include <QTcpSocket>
#include <QTemporaryDir>

using namespace testing;

class TestApiGate : public QObject {
    Q_OBJECT
private:
    QTemporaryDir dir{QStringLiteral("/tmp/sc-gate-XXXXXX")};
    std::unique_ptr<Service> service;
    QByteArray hostHeader;

    /// A connected socket to the service.
    std::unique_ptr<QTcpSocket> connectSocket() {
        const QUrl url(service->base());
        auto s = std::make_unique<QTcpSocket>();
        s->connectToHost(url.host(), quint16(url.port()));
        if (!s->waitForConnected(5000))
            return nullptr;
        return s;
    }

    /// Reads until the server closes `s` or `timeoutMs` passes.
    static QByteArray readUntilClosed(QTcpSocket *s, int timeoutMs) {
        QByteArray answer;
        (void)QTest::qWaitFor(
            [&] {
                answer += s->readAll();
                return s->state() != QAbstractSocket::ConnectedState;
            },
            timeoutMs);
        return answer + s->readAll();
    }

    static int statusOf(const QByteArray &answer) {
        return answer.startsWith("HTTP/1.1 ") ? answer.mid(9, 3).toInt() : 0;
    }

    QByteArray head(const QByteArray &line, const QByteArray &more = {}) const {
        return line + " HTTP/1.1\r\n" + hostHeader + "Authorization: Bearer " +
               service->key().toLatin1() + "\r\n" + more + "\r\n";
    }

    void startService() {
        if (!service) // the same one again keeps the key of its first start
            service = std::make_unique<Service>(dir.path());
        QVERIFY(service->start());
        hostHeader = "Host: 127.0.0.1:" + QByteArray::number(QUrl(service->base()).port()) + "\r\n";
    }

private slots:
    void initTestCase() {
        QVERIFY(dir.isValid());
        admin(dir.path(), {"config", "set", "max_connections", "8"});
        startService();
    }

    void refusedFromTheHeadAlone() {
        // Each head announces a body that never comes: the answer must not
        // wait for it (QtHttpServer alone buffers the whole body first).
        struct Case {
            QByteArray request;
            int status;
            QByteArray type;
        };
        const QByteArray bigUpload = "Content-Length: 50000000\r\n";
        const QList<Case> cases = {
            {"PUT /v1/sandboxes/sbx_x/files?path=/tmp/a HTTP/1.1\r\n" + hostHeader +
                 "Authorization: Bearer sc_" + QByteArray(40, 'c') + "\r\n" + bigUpload + "\r\n",
             401, "unauthorized"},
            {"POST /mcp HTTP/1.1\r\n" + hostHeader + bigUpload + "\r\n", 401, "unauthorized"},
            {"PUT /v1/sandboxes/sbx_x/files?path=/tmp/a HTTP/1.1\r\nHost: evil.example:80\r\n" +
                 bigUpload + "\r\n",
             403, "forbidden"},
            {head("POST /v1/sandboxes", "Origin: http://evil.example\r\n" + bigUpload), 403,
             "forbidden"},
            // With a key: the route's limit (8 MiB for JSON and /mcp, 100 MiB for files).
            {head("POST /mcp", "Content-Length: 9000000\r\n"), 413, "payload_too_large"},
            {head("POST /v1/sandboxes", "Content-Length: 9000000\r\n"), 413, "payload_too_large"},
            {head("PUT /v1/sandboxes/sbx_x/files?path=/tmp/a", "Content-Length: 104857601\r\n"),
             413, "payload_too_large"},
            {head("POST /v1/sandboxes", "Content-Length: 12abc\r\n"), 400, "bad_request"},
            {"GET /v1/sandboxes HTTP/1.1\r\n" + hostHeader + " folded: line\r\n\r\n", 400,
             "bad_request"},
            // QtHttpServer would end this head at the bare "\n\n", unjudged.
            {"GET /v1/sandboxes HTTP/1.1\nHost: evil.example\nAuthorization: Bearer " +
                 service->key().toLatin1() + "\n\n",
             400, "bad_request"},
            {head("POST /v1/sandboxes", "Content-Length : 5\r\n"), 400, "bad_request"},
            // Outside the API nothing is served, so no body or socket is held.
            {"POST /x HTTP/1.1\r\n" + hostHeader + "Transfer-Encoding: chunked\r\n\r\n", 404,
             "not_found"},
        };
        for (const Case &c : cases) {
            auto s = connectSocket();
            QVERIFY(s);
            s->write(c.request);
            // A key holder's oversized body is read and dropped as it comes
            // (so the client can read the 413): that connection stays open
            // for the body it announced. Every other refusal closes it.
            const bool drains = c.status == 413;
            QByteArray answer;
            if (drains) {
                QVERIFY(QTest::qWaitFor(
                    [&] {
                        answer += s->readAll();
                        return answer.endsWith("}}");
                    },
                    20000));
            } else {
                answer = readUntilClosed(s.get(), 20000);
            }
            QVERIFY2(statusOf(answer) == c.status, (c.request + "\n->\n" + answer).constData());
            QVERIFY2(answer.contains("\"type\":\"" + c.type + "\""), answer.constData());
            QVERIFY2(drains || s->state() != QAbstractSocket::ConnectedState,
                     "the connection stays open");
        }
        // Refused before the key was known: counted, not logged one by one.
        QCOMPARE(Http(service->base(), service->key()).call("GET", "/sandboxes").status, 200);
        const QString log = service->log();
        QVERIFY(!log.contains(QLatin1String("evil.example")));
        QVERIFY2(log.contains(QLatin1String("request(s) from another site's Host or Origin "
                                            "refused (403)")),
                 qPrintable(log.right(1500)));
    }

    void aSlowHeadIsCutOff() {
        // A byte every 300 ms would keep a per-byte deadline alive for ever;
        // the head's deadline (10 s) runs from its first byte.
        auto s = connectSocket();
        QVERIFY(s);
        const QByteArray request = head("GET /v1/sandboxes");
        int sent = 0;
        QByteArray answer;
        QElapsedTimer sinceLast;
        sinceLast.start();
        const bool closed = QTest::qWaitFor(
            [&] {
                if (sinceLast.elapsed() >= 300 && sent < request.size() - 4) {
                    s->write(request.mid(sent++, 1));
                    sinceLast.restart();
                }
                answer += s->readAll();
                return s->state() != QAbstractSocket::ConnectedState;
            },
            60000);
        answer += s->readAll();
        QVERIFY2(closed, qPrintable(QStringLiteral("still open after %1 bytes").arg(sent)));
        QCOMPARE(statusOf(answer), 408);
        QVERIFY(sent < request.size() - 4);
        // A connection that never sends a byte is closed the same way.
        auto silent = connectSocket();
        QVERIFY(silent);
        QVERIFY(readUntilClosed(silent.get(), 30000).isEmpty() ||
                silent->state() != QAbstractSocket::ConnectedState);
        QCOMPARE(silent->state(), QAbstractSocket::UnconnectedState);
    }

    void requestsThatMustStillPass() {
        // Two pipelined requests in one write, then a chunked body.
        auto s = connectSocket();
        QVERIFY(s);
        s->write(head("GET /v1/account") + head("GET /v1/sizes"));
        QByteArray answers;
        QVERIFY(QTest::qWaitFor(
            [&] {
                answers += s->readAll();
                return answers.count("HTTP/1.1 200") == 2;
            },
            20000));
        QVERIFY(answers.contains("\"credit\""));
        QVERIFY(answers.contains("\"small\""));
        // A pipelined request is checked again by the handlers.
        auto second = connectSocket();
        QVERIFY(second);
        second->write(head("GET /v1/account") +
                      "GET /v1/account HTTP/1.1\r\nHost: evil.example\r\n"
                      "Authorization: Bearer " +
                      service->key().toLatin1() + "\r\n\r\n");
        QByteArray both;
        QVERIFY(QTest::qWaitFor(
            [&] {
                both += second->readAll();
                return both.contains("HTTP/1.1 200") && both.contains("HTTP/1.1 403");
            },
            20000));
        // Chunked: the body reaches the handler, which finds bad JSON.
        s->write(head("POST /v1/sandboxes", "Transfer-Encoding: chunked\r\n") +
                 "3\r\n{\"s\r\n0\r\n\r\n");
        QByteArray chunked;
        QVERIFY(QTest::qWaitFor(
            [&] {
                chunked += s->readAll();
                return chunked.contains("\r\n\r\n{");
            },
            20000));
        QCOMPARE(statusOf(chunked), 400);
        // A chunked body over the JSON limit is cut off as it arrives.
        auto big = connectSocket();
        QVERIFY(big);
        big->write(head("POST /v1/sandboxes", "Transfer-Encoding: chunked\r\n"));
        const QByteArray chunk = "100000\r\n" + QByteArray(0x100000, ' ') + "\r\n";
        int chunks = 0;
        QByteArray answer;
        QVERIFY(QTest::qWaitFor(
            [&] {
                // Nine MiB, then wait: a client still sending when the
                // server closes may lose the answer to a reset.
                if (chunks < 9 && big->bytesToWrite() < (1 << 20)) {
                    big->write(chunk);
                    ++chunks;
                }
                answer += big->readAll();
                return big->state() != QAbstractSocket::ConnectedState;
            },
            60000));
        answer += big->readAll();
        QCOMPARE(statusOf(answer), 413);
    }

    void connectionsAreLimited() {
        // Eight connections held open (silent, within the head's 10 s)...
        std::vector<std::unique_ptr<QTcpSocket>> held;
        for (int i = 0; i < 8; ++i) {
            held.push_back(connectSocket());
            QVERIFY(held.back());
        }
        // ... the ninth is answered 503 and closed.
        auto ninth = connectSocket();
        QVERIFY(ninth);
        const QByteArray refused = readUntilClosed(ninth.get(), 20000);
        QVERIFY2(statusOf(refused) == 503, refused.constData());
        QVERIFY(refused.contains("max_connections"));
        // Once they are gone there is room again.
        held.clear();
        QVERIFY(QTest::qWaitFor(
            [&] {
                return Http(service->base(), service->key()).call("GET", "/account").status == 200;
            },
            20000));
    }

    void idleConnectionsAreClosed() {
        service->terminate();
        admin(dir.path(), {"config", "set", "http_idle_timeout_s", "2"});
        admin(dir.path(), {"config", "set", "http_header_timeout_s", "2"});
        startService();
        auto s = connectSocket();
        QVERIFY(s);
        s->write(head("GET /v1/account"));
        QByteArray answer;
        QVERIFY(QTest::qWaitFor(
            [&] {
                answer += s->readAll();
                return answer.contains("\"credit\"");
            },
            20000));
        QCOMPARE(statusOf(answer), 200);
        // Kept alive after the answer, then closed once idle, quietly; blank
        // lines (allowed between requests) do not keep it alive.
        QElapsedTimer sinceBlank;
        sinceBlank.start();
        QVERIFY(QTest::qWaitFor(
            [&] {
                if (sinceBlank.elapsed() > 500 && s->state() == QAbstractSocket::ConnectedState) {
                    s->write("\r\n");
                    sinceBlank.restart();
                }
                return s->state() != QAbstractSocket::ConnectedState;
            },
            30000));
    }

    void cleanupTestCase() {
        if (service)
            service->terminate();
    }
};

QTEST_GUILESS_MAIN(TestApiGate)
#include "tst_api_gate.moc"
