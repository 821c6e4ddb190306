// MCP end to end with the official SDK (`tests/mcp/client.mjs`, the npm
// package pinned in tests/mcp/package.json) against the real service and
// real VMs, over Streamable HTTP and over stdio (`sandcastle mcp`).
#include "support/service.h"

#include <QJsonArray>
#include <QJsonDocument>
#include <QTemporaryDir>

using namespace testing;

class TestMcpVm : public QObject {
    Q_OBJECT
private:
    QTemporaryDir dir{QStringLiteral("/tmp/sc-mcp-XXXXXX")};
    std::unique_ptr<Service> service;
    QString brokeKey; // an account with no credit

    void runClient(const QString &mode) {
        QProcess p;
        p.setWorkingDirectory(QStringLiteral(SOURCE_DIR "/tests/mcp"));
        p.setProcessChannelMode(QProcess::MergedChannels);
        QString root = service->base();
        root.chop(3); // without /v1
        p.start(QStringLiteral("node"), {QStringLiteral("client.mjs"), mode, root, service->key(),
                                         sandcastleBinary(), brokeKey});
        QVERIFY(QTest::qWaitFor([&] { return p.state() == QProcess::NotRunning; }, 600000));
        const QString out = QString::fromUtf8(p.readAll());
        qInfo().noquote() << out;
        QCOMPARE(p.exitCode(), 0);
        QVERIFY(out.contains(QStringLiteral("all %1 checks passed").arg(mode)));
    }

private slots:
    void initTestCase() {
        QVERIFY2(QFile::exists(QStringLiteral(SOURCE_DIR "/tests/mcp/node_modules/"
                                                         "@modelcontextprotocol/sdk/package.json")),
                 "the MCP SDK is not installed: npm ci --prefix tests/mcp (packaging/test.sh "
                 "does it)");
        QVERIFY(dir.isValid());
        service = std::make_unique<Service>(dir.path());
        service->setPort(freePort()); // the same port after a restart
        QVERIFY(service->start());
        brokeKey = keyIn(admin(dir.path(), {QStringLiteral("accounts"), QStringLiteral("create"),
                                            QStringLiteral("--name"), QStringLiteral("broke")}));
        QVERIFY(!brokeKey.isEmpty());
    }
    void streamableHttp() { runClient(QStringLiteral("http")); }
    void stdio() { runClient(QStringLiteral("stdio")); }
    void stdioSurvivesARestartOfTheService() {
        QProcess mcp;
        QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
        env.insert(QStringLiteral("AAS_API_KEY"), service->key());
        QString root = service->base();
        root.chop(3);
        env.insert(QStringLiteral("SANDCASTLE_URL"), root);
        mcp.setProcessEnvironment(env);
        mcp.start(sandcastleBinary(), {QStringLiteral("mcp")});
        QVERIFY(mcp.waitForStarted());
        auto ask = [&](const QByteArray &line) {
            mcp.write(line + "\n");
            if (!line.contains("\"id\""))
                return QJsonObject();
            if (!QTest::qWaitFor([&] { return mcp.canReadLine(); }, 30000))
                return QJsonObject();
            return QJsonDocument::fromJson(mcp.readLine()).object();
        };
        QJsonObject init = ask(R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":)"
                               R"({"protocolVersion":"2025-06-18","capabilities":{},)"
                               R"("clientInfo":{"name":"t","version":"1"}}})");
        QCOMPARE(init.value("result").toObject().value("protocolVersion").toString(),
                 QStringLiteral("2025-06-18"));
        ask(R"({"jsonrpc":"2.0","method":"notifications/initialized"})");
        QVERIFY(ask(R"({"jsonrpc":"2.0","id":2,"method":"tools/list"})")
                    .value("result")
                    .toObject()
                    .contains("tools"));
        // Sessions live in the service's memory: a restart forgets them.
        service->terminate();
        QVERIFY(service->start());
        QJsonObject after = ask(R"({"jsonrpc":"2.0","id":3,"method":"tools/list"})");
        QVERIFY2(after.value("result").toObject().contains("tools"),
                 QJsonDocument(after).toJson().constData());
        QCOMPARE(after.value("id").toInt(), 3);
        // A line that is not JSON gets its JSON-RPC error (with a null id).
        QJsonObject bad = ask(R"(not json, "id")");
        QCOMPARE(bad.value("error").toObject().value("code").toInt(), -32700);
        mcp.closeWriteChannel();
        QVERIFY(mcp.waitForFinished(10000));
        QCOMPARE(mcp.exitCode(), 0);
    }

    void cleanupTestCase() {
        // A client that failed half-way leaves its sandbox: destroy it.
        if (service)
            service->destroyLiveAndTerminate();
        QTRY_COMPARE_WITH_TIMEOUT(qemuProcessesWith(dir.path()), 0, 60000);
    }
};

QTEST_GUILESS_MAIN(TestMcpVm)
#include "tst_mcp_vm.moc"
