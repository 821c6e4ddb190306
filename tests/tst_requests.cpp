// The API's request parsing, its one error-to-HTTP mapping and its Host
// and Origin checks, without VMs: the parsers are pure functions; the
// checks are tried over a real socket against an ApiServer in this
// process, whose service has an engine that is never opened (a request
// refused at the gate never reaches it).
#include "apiserver.h"
#include "json.h"
#include "requests.h"
#include "sandbox/engine.h"
#include "service/sandboxservice.h"
#include "support/service.h"

#include <QJsonDocument>
#include <QTemporaryDir>
#include <QTest>

using namespace sandcastle;
using namespace sandcastle::api;
using Kind = EngineError::Kind;

namespace {

/// The message of a refused parse, or a note that it was accepted.
template <typename T> QString refusal(const Result<T> &r) {
    return r ? QStringLiteral("(accepted)") : r.error().message;
}

QUrlQuery query(const char *text) {
    return QUrlQuery(QString::fromLatin1(text));
}

} // namespace

// A parse that must be refused as a bad request, with a message that
// contains `words` (what the field is and what is allowed). Hidden from
// moc, whose preprocessor does not read the raw strings passed to it.
#ifndef Q_MOC_RUN
#define QVERIFY_REFUSED(result, words)                                                             \
    do {                                                                                           \
        const auto &r_ = (result);                                                                 \
        QVERIFY2(!r_, "accepted, should be refused");                                              \
        QCOMPARE(r_.error().kind, Kind::InvalidArgument);                                          \
        QVERIFY2(r_.error().message.contains(QLatin1String(words)),                                \
                 qPrintable(r_.error().message));                                                  \
    } while (false)
#endif

class TestRequests : public QObject {
    Q_OBJECT

    // One in-process API server with the settings a test asks for.
    struct Server {
        QTemporaryDir dir{QStringLiteral("/tmp/sc-req-XXXXXX")};
        std::unique_ptr<Store> store;
        std::unique_ptr<Engine> engine;
        std::unique_ptr<SandboxService> service;
        std::unique_ptr<ApiServer> api;
        QString key;
        quint16 port = 0;
    };

    std::unique_ptr<Server> serve(const Settings &settings) {
        auto s = std::make_unique<Server>();
        if (!s->dir.isValid())
            return nullptr;
        auto opened = Store::open(s->dir.filePath(QStringLiteral("sandcastle.db")));
        if (!opened)
            return nullptr;
        s->store = std::move(*opened);
        auto account = s->store->createAccount(QStringLiteral("default"), 1'000'000);
        if (!account)
            return nullptr;
        auto key = s->store->createKey(account->id, QStringLiteral("test"));
        if (!key)
            return nullptr;
        s->key = key->second;
        EngineConfig config = EngineConfig::defaults();
        config.dataDir = s->dir.path();
        s->engine = std::make_unique<Engine>(config); // never opened: no libvirt, no VM
        s->service = std::make_unique<SandboxService>(s->engine.get(), s->store.get(), settings);
        s->api = std::make_unique<ApiServer>(s->service.get());
        auto port = s->api->start(QHostAddress::LocalHost, 0);
        if (!port)
            return nullptr;
        s->port = *port;
        return s;
    }

    /// GET /v1/sizes with these Host and Origin headers (no header for a
    /// null string), with or without the key; the status of the answer
    /// and its body.
    std::pair<int, QByteArray> ask(const Server &s, const QString &host, const QString &origin = {},
                                   bool withKey = true) {
        QByteArray head = "GET /v1/sizes HTTP/1.1\r\n";
        if (!host.isNull())
            head += "Host: " + host.toLatin1() + "\r\n";
        if (!origin.isNull())
            head += "Origin: " + origin.toLatin1() + "\r\n";
        if (withKey)
            head += "Authorization: Bearer " + s.key.toLatin1() + "\r\n";
        head += "Connection: close\r\n\r\n";
        testing::Http http(QStringLiteral("http://127.0.0.1:%1/v1").arg(s.port), {});
        auto [status, answer] = http.raw(head);
        return {status, answer.mid(answer.indexOf("\r\n\r\n") + 4)};
    }

private slots:
    // --- POST /v1/sandboxes ---------------------------------------------

    void createDefaults() {
        for (const QByteArray &body : {QByteArray(), QByteArray("  \n"), QByteArray("{}")}) {
            auto r = parseCreate(body, {});
            QVERIFY2(r, qPrintable(refusal(r)));
            QCOMPARE(r->size, QString());
            QCOMPARE(r->name, QString());
            QCOMPARE(r->timeoutMinutes, 0); // the setting's default
            QCOMPARE(r->internet, true);
            QCOMPARE(r->idempotencyKey, QString());
            QCOMPARE(r->requestHash, QString());
        }
        // null is the same as absent.
        auto r =
            parseCreate(R"({"size":null,"name":null,"timeout_minutes":null,"network":null})", {});
        QVERIFY2(r, qPrintable(refusal(r)));
        QCOMPARE(r->timeoutMinutes, 0);
        QCOMPARE(r->internet, true);
    }

    void createFields() {
        auto r = parseCreate(
            R"({"size":"medium","name":"agent-7","timeout_minutes":1440,"network":"none"})", {});
        QVERIFY2(r, qPrintable(refusal(r)));
        QCOMPARE(r->size, QStringLiteral("medium"));
        QCOMPARE(r->name, QStringLiteral("agent-7"));
        QCOMPARE(r->timeoutMinutes, 1440);
        QCOMPARE(r->internet, false);
        r = parseCreate(R"({"timeout_minutes":1,"network":"internet"})", {});
        QVERIFY2(r, qPrintable(refusal(r)));
        QCOMPARE(r->timeoutMinutes, 1);
        QCOMPARE(r->internet, true);
        // The longest name there may be; names are text, not just ASCII.
        r = parseCreate(QJsonDocument(QJsonObject{{"name", QString(128, QChar(0x00e9))}})
                            .toJson(QJsonDocument::Compact),
                        {});
        QVERIFY2(r, qPrintable(refusal(r)));
        QCOMPARE(r->name.size(), 128);
    }

    void createRefusals() {
        QVERIFY_REFUSED(parseCreate("{", {}), "not valid JSON");
        QVERIFY_REFUSED(parseCreate("[]", {}), "must be a JSON object");
        // A bare string: Qt 6.4 calls it invalid JSON, later versions parse it.
        const auto scalar = parseCreate("\"small\"", {});
        QVERIFY(!scalar);
        QCOMPARE(scalar.error().kind, Kind::InvalidArgument);
        QVERIFY_REFUSED(parseCreate(R"({"sise":"small"})", {}), "unknown field 'sise'");
        QVERIFY_REFUSED(parseCreate(R"({"sise":"small"})", {}),
                        "allowed fields: size, name, timeout_minutes, network");
        QVERIFY_REFUSED(parseCreate(R"({"size":2})", {}), "size must be a string");
        QVERIFY_REFUSED(parseCreate(R"({"name":["a"]})", {}), "name must be a string");
        QVERIFY_REFUSED(
            parseCreate(QJsonDocument(QJsonObject{{"name", QString(129, QLatin1Char('n'))}})
                            .toJson(QJsonDocument::Compact),
                        {}),
            "name is longer than 128 characters");
        QVERIFY_REFUSED(parseCreate(R"({"name":"a\u0000b"})", {}), "must not contain NUL");
        QVERIFY_REFUSED(parseCreate(R"({"name":"line\nbreak"})", {}), "control characters");
        QVERIFY_REFUSED(parseCreate("{\"name\":\"\\u001b[31mred\"}", {}), "control characters");
        for (const char *minutes : {"0", "1441", "-5", "1.5", "\"30\"", "true", "1e9"})
            QVERIFY_REFUSED(parseCreate(QByteArray(R"({"timeout_minutes":)") + minutes + "}", {}),
                            "timeout_minutes must be a whole number from 1 to 1440");
        QVERIFY_REFUSED(parseCreate(R"({"network":"lan"})", {}),
                        "network must be \"internet\" (the default) or \"none\"");
        QVERIFY_REFUSED(parseCreate(R"({"network":false})", {}), "network must be a string");
    }

    void createBodyOverTheLimitIsTooLarge() {
        QByteArray body = "{\"name\":\"" + QByteArray(kMaxJsonBody, 'a') + "\"}";
        auto r = parseCreate(body, {});
        QVERIFY(!r);
        QCOMPARE(r.error().kind, Kind::TooLarge);
        QCOMPARE(httpErrorFor(r.error().kind).status, 413);
    }

    void idempotencyKeyIsCheckedAndHashesTheParsedRequest() {
        auto a = parseCreate(R"({"size":"small","name":"x"})", "run-42");
        QVERIFY2(a, qPrintable(refusal(a)));
        QCOMPARE(a->idempotencyKey, QStringLiteral("run-42"));
        QCOMPARE(a->requestHash.size(), 64);
        QVERIFY(QByteArray::fromHex(a->requestHash.toLatin1()).toHex() ==
                a->requestHash.toLatin1());
        // The same request written differently: the same hash.
        auto b = parseCreate(
            "{ \"name\" : \"x\",\n \"size\": \"small\", \"network\": \"internet\" }", "run-42");
        QVERIFY2(b, qPrintable(refusal(b)));
        QCOMPARE(b->requestHash, a->requestHash);
        // Another request: another hash (each field counts).
        for (const char *other :
             {R"({"size":"medium","name":"x"})", R"({"size":"small","name":"y"})",
              R"({"size":"small","name":"x","timeout_minutes":5})",
              R"({"size":"small","name":"x","network":"none"})"}) {
            auto c = parseCreate(other, "run-42");
            QVERIFY2(c, qPrintable(refusal(c)));
            QVERIFY2(c->requestHash != a->requestHash, other);
        }
        QVERIFY(parseCreate("{}", QByteArray(255, 'k')));
        QVERIFY_REFUSED(parseCreate("{}", QByteArray(256, 'k')), "longer than 255");
        for (const QByteArray &key : {QByteArray("with space"), QByteArray("tab\t"),
                                      QByteArray("del\x7f"), QByteArray("caf\xc3\xa9")})
            QVERIFY_REFUSED(parseCreate("{}", key), "printable ASCII");
    }

    // --- POST /v1/sandboxes/{id}/exec -------------------------------------

    void execFields() {
        auto r = parseExec(R"({"command":"echo hi"})");
        QVERIFY2(r, qPrintable(refusal(r)));
        QCOMPARE(r->command, QStringLiteral("echo hi"));
        QCOMPARE(r->cwd, QString()); // the agent's default, /home/sandbox
        QCOMPARE(r->timeoutMs, 60000);
        QVERIFY(r->env.isEmpty());
        r = parseExec(
            R"({"command":"env","cwd":"/workspace","timeout_ms":3600000,"env":{"TASK_ID":"42","_x1":""}})");
        QVERIFY2(r, qPrintable(refusal(r)));
        QCOMPARE(r->cwd, QStringLiteral("/workspace"));
        QCOMPARE(r->timeoutMs, 3600000);
        QCOMPARE(r->env.size(), 2);
        QVERIFY(r->env.contains(
            QPair<QString, QString>(QStringLiteral("TASK_ID"), QStringLiteral("42"))));
        QVERIFY(r->env.contains(QPair<QString, QString>(QStringLiteral("_x1"), QString())));
        r = parseExec(R"({"command":"true","timeout_ms":1,"env":null,"cwd":null})");
        QVERIFY2(r, qPrintable(refusal(r)));
        QCOMPARE(r->timeoutMs, 1);
        // The longest command there may be.
        r = parseExec(QJsonDocument(QJsonObject{{"command", QString(1 << 20, QLatin1Char('x'))}})
                          .toJson(QJsonDocument::Compact));
        QVERIFY2(r, qPrintable(refusal(r)));
    }

    void execRefusals() {
        for (const char *body :
             {"", "{}", R"({"command":null})", R"({"command":["ls"]})", R"({"command":42})"})
            QVERIFY_REFUSED(parseExec(body), "command is required and must be a string");
        QVERIFY_REFUSED(parseExec(R"({"command":""})"), "command must not be empty");
        QVERIFY_REFUSED(parseExec(R"({"command":"  \n"})"), "command must not be empty");
        QVERIFY_REFUSED(parseExec(R"({"command":"a\u0000b"})"), "must not contain NUL");
        QVERIFY_REFUSED(parseExec(QJsonDocument(QJsonObject{{"command", QString((1 << 20) + 1,
                                                                                QLatin1Char('x'))}})
                                      .toJson(QJsonDocument::Compact)),
                        "command is longer than");
        QVERIFY_REFUSED(parseExec(R"({"command":"ls","args":["-l"]})"), "unknown field 'args'");
        for (const char *timeout : {"0", "3600001", "-1", "2.5", "\"60\""})
            QVERIFY_REFUSED(
                parseExec(QByteArray(R"({"command":"ls","timeout_ms":)") + timeout + "}"),
                "timeout_ms must be a whole number from 1 to 3600000");
        QVERIFY_REFUSED(parseExec(R"({"command":"ls","cwd":"workspace"})"),
                        "cwd must be an absolute path");
        QVERIFY_REFUSED(parseExec(R"({"command":"ls","cwd":5})"), "cwd must be a string");
        QVERIFY_REFUSED(parseExec(R"({"command":"ls","env":["A=1"]})"),
                        "env must be an object of string values");
        QVERIFY_REFUSED(parseExec(R"({"command":"ls","env":{"A":1}})"), "env.A must be a string");
        for (const char *name : {"1A", "A-B", "A B", "", "Ä"})
            QVERIFY_REFUSED(parseExec(QJsonDocument(QJsonObject{{"command", "ls"},
                                                                {"env", QJsonObject{{name, "v"}}}})
                                          .toJson(QJsonDocument::Compact)),
                            "is not a valid variable name");
        QVERIFY_REFUSED(parseExec(R"({"command":"ls","env":{"A":"x\u0000y"}})"), "contains NUL");
        QJsonObject many;
        for (int i = 0; i < 257; ++i)
            many.insert(QStringLiteral("V%1").arg(i), QStringLiteral("v"));
        QVERIFY_REFUSED(parseExec(QJsonDocument(QJsonObject{{"command", "ls"}, {"env", many}})
                                      .toJson(QJsonDocument::Compact)),
                        "more than 256 variables");
        many.remove(QStringLiteral("V0"));
        QVERIFY(parseExec(QJsonDocument(QJsonObject{{"command", "ls"}, {"env", many}})
                              .toJson(QJsonDocument::Compact)));
    }

    // --- POST /v1/sandboxes/{id}/extend -------------------------------------

    void extend() {
        auto r = parseExtend(R"({"additional_minutes":30})");
        QVERIFY2(r, qPrintable(refusal(r)));
        QCOMPARE(*r, 30);
        QCOMPARE(*parseExtend(R"({"additional_minutes":1})"), 1);
        QCOMPARE(*parseExtend(R"({"additional_minutes":1440})"), 1440);
        for (const char *body : {"", "{}", R"({"additional_minutes":null})"})
            QVERIFY_REFUSED(parseExtend(body), "additional_minutes is required (1 to 1440)");
        for (const char *minutes : {"0", "1441", "-1", "0.5", "\"10\""})
            QVERIFY_REFUSED(parseExtend(QByteArray(R"({"additional_minutes":)") + minutes + "}"),
                            "additional_minutes must be a whole number from 1 to 1440");
        QVERIFY_REFUSED(parseExtend(R"({"minutes":5})"), "unknown field 'minutes'");
    }

    // --- query strings ------------------------------------------------------

    void list() {
        auto r = parseList(QUrlQuery());
        QVERIFY2(r, qPrintable(refusal(r)));
        QCOMPARE(r->limit, 20);
        QCOMPARE(r->startingAfter, QString());
        QVERIFY(!r->status);
        r = parseList(query("limit=100&starting_after=sbx_abc&status=running"));
        QVERIFY2(r, qPrintable(refusal(r)));
        QCOMPARE(r->limit, 100);
        QCOMPARE(r->startingAfter, QStringLiteral("sbx_abc"));
        QVERIFY(r->status && *r->status == SandboxStatus::Running);
        for (const char *status :
             {"creating", "running", "stopping", "destroyed", "expired", "error"}) {
            r = parseList(QUrlQuery(QStringLiteral("status=") + QLatin1String(status)));
            QVERIFY2(r, status);
            QCOMPARE(statusName(*r->status), QLatin1String(status));
        }
        QCOMPARE(parseList(query("limit=1"))->limit, 1);
        for (const char *limit :
             {"limit=0", "limit=101", "limit=-1", "limit=ten", "limit=", "limit=2.0"})
            QVERIFY_REFUSED(parseList(query(limit)), "limit must be a whole number from 1 to 100");
        QVERIFY_REFUSED(parseList(query("status=Running")), "status must be one of");
        QVERIFY_REFUSED(parseList(query("status=")), "status must be one of");
        QVERIFY_REFUSED(parseList(query("page=2")), "unknown query parameter 'page'");
        QVERIFY_REFUSED(parseList(query("page=2")), "allowed: limit, starting_after, status");
    }

    void execsQuery() {
        auto r = parseExecsQuery(QUrlQuery());
        QVERIFY2(r, qPrintable(refusal(r)));
        QCOMPARE(r->limit, 50);
        QCOMPARE(r->before, 0); // from the newest
        r = parseExecsQuery(query("limit=500&before=17"));
        QVERIFY2(r, qPrintable(refusal(r)));
        QCOMPARE(r->limit, 500);
        QCOMPARE(r->before, 17);
        for (const char *limit : {"limit=0", "limit=501", "limit=x"})
            QVERIFY_REFUSED(parseExecsQuery(query(limit)),
                            "limit must be a whole number from 1 to 500");
        for (const char *before : {"before=0", "before=-3", "before=abc", "before=99999999999"})
            QVERIFY_REFUSED(parseExecsQuery(query(before)), "before must be a whole number from 1");
        QVERIFY_REFUSED(parseExecsQuery(query("status=finished")),
                        "unknown query parameter 'status'; allowed: limit, before");
    }

    void filePath() {
        auto r = parseFilePath(query("path=/workspace/main.py"));
        QVERIFY2(r, qPrintable(refusal(r)));
        QCOMPARE(*r, QStringLiteral("/workspace/main.py"));
        // Percent-encoding is decoded: the path is the file's real name.
        r = parseFilePath(query("path=%2Fworkspace%2Fa%20b%2B%C3%A9.txt"));
        QVERIFY2(r, qPrintable(refusal(r)));
        QCOMPARE(*r, QStringLiteral("/workspace/a b+\u00e9.txt"));
        QCOMPARE(
            *parseFilePath(QUrlQuery(QStringLiteral("path=/") + QString(4095, QLatin1Char('a')))),
            QStringLiteral("/") + QString(4095, QLatin1Char('a')));
        for (const char *empty : {"", "path=", "other=1&path="})
            QVERIFY2(!parseFilePath(query(empty)), empty);
        QVERIFY_REFUSED(parseFilePath(QUrlQuery()), "the query needs ?path=/absolute/path");
        for (const char *bad : {"path=workspace/a", "path=./a", "path=%2Fa%00b", "path=~/a"})
            QVERIFY_REFUSED(parseFilePath(query(bad)), "path must be an absolute path");
        QVERIFY_REFUSED(
            parseFilePath(QUrlQuery(QStringLiteral("path=/") + QString(4096, QLatin1Char('a')))),
            "path must be an absolute path");
        QVERIFY_REFUSED(parseFilePath(query("path=/a&mode=0600")),
                        "unknown query parameter 'mode'");
    }

    void onlyNamedParams() {
        QVERIFY(onlyParams(QUrlQuery(), {}));
        QVERIFY(onlyParams(query("a=1&b=2"), {QStringLiteral("a"), QStringLiteral("b")}));
        auto r = onlyParams(query("a=1"), {});
        QVERIFY(!r);
        QCOMPARE(r.error().kind, Kind::InvalidArgument);
        // Nothing allowed: nothing to list after the name.
        QCOMPARE(r.error().message, QStringLiteral("unknown query parameter 'a'"));
        r = onlyParams(query("b=1&c=2"), {QStringLiteral("b")});
        QCOMPARE(r.error().message, QStringLiteral("unknown query parameter 'c'; allowed: b"));
        // A long name is cut in the message (it is the client's text).
        r = onlyParams(QUrlQuery(QString(500, QLatin1Char('z')) + QStringLiteral("=1")), {});
        QVERIFY(!r);
        QVERIFY(r.error().message.size() < 120);
    }

    // --- errors -------------------------------------------------------------

    void errorMapping_data() {
        QTest::addColumn<int>("kind");
        QTest::addColumn<int>("status");
        QTest::addColumn<QString>("type");
        QTest::newRow("InvalidArgument")
            << int(Kind::InvalidArgument) << 400 << QStringLiteral("invalid_request");
        QTest::newRow("NoCredit") << int(Kind::NoCredit) << 402
                                  << QStringLiteral("insufficient_credit");
        QTest::newRow("PermissionDenied")
            << int(Kind::PermissionDenied) << 403 << QStringLiteral("forbidden");
        QTest::newRow("NotFound") << int(Kind::NotFound) << 404 << QStringLiteral("not_found");
        QTest::newRow("Conflict") << int(Kind::Conflict) << 409 << QStringLiteral("conflict");
        QTest::newRow("TooLarge") << int(Kind::TooLarge) << 413
                                  << QStringLiteral("payload_too_large");
        QTest::newRow("QuotaExceeded")
            << int(Kind::QuotaExceeded) << 429 << QStringLiteral("rate_limited");
        QTest::newRow("Internal") << int(Kind::Internal) << 500 << QStringLiteral("internal");
        QTest::newRow("Unavailable")
            << int(Kind::Unavailable) << 503 << QStringLiteral("unavailable");
        QTest::newRow("Timeout") << int(Kind::Timeout) << 504 << QStringLiteral("timeout");
        QTest::newRow("NoSpace") << int(Kind::NoSpace) << 507
                                 << QStringLiteral("insufficient_storage");
    }

    void errorMapping() {
        QFETCH(int, kind);
        QFETCH(int, status);
        QFETCH(QString, type);
        const HttpError e = httpErrorFor(Kind(kind));
        QCOMPARE(e.status, status);
        QCOMPARE(e.type, type);
        // docs/api.md lists each type with its status ("`not_found` 404").
        QFile doc(QStringLiteral(SOURCE_DIR "/docs/api.md"));
        QVERIFY(doc.open(QIODevice::ReadOnly));
        const QString text = QString::fromUtf8(doc.readAll()).simplified();
        QVERIFY2(
            text.contains(QStringLiteral("`%1` %2").arg(type).arg(status)) ||
                text.contains(QStringLiteral("%2 `%1`").arg(type).arg(status)),
            qPrintable(QStringLiteral("docs/api.md does not list `%1` %2").arg(type).arg(status)));
        // The envelope every error has.
        const QJsonObject body = errorJson(e.type, QStringLiteral("why"));
        QCOMPARE(body.keys(), QStringList{QStringLiteral("error")});
        QCOMPARE(body.value("error").toObject().value("type").toString(), type);
        QCOMPARE(body.value("error").toObject().value("message").toString(), QStringLiteral("why"));
    }

    void everyKindHasItsOwnStatus() {
        // Two kinds on one status would make a client unable to tell them apart.
        QSet<int> statuses;
        const QList<Kind> kinds = {Kind::InvalidArgument,  Kind::NotFound, Kind::Conflict,
                                   Kind::PermissionDenied, Kind::TooLarge, Kind::NoSpace,
                                   Kind::Unavailable,      Kind::Timeout,  Kind::QuotaExceeded,
                                   Kind::NoCredit,         Kind::Internal};
        for (Kind k : kinds)
            statuses.insert(httpErrorFor(k).status);
        QCOMPARE(statuses.size(), kinds.size());
    }

    // --- Host and Origin ----------------------------------------------------

    void hostMustBeThisMachine() {
        auto s = serve(Settings());
        QVERIFY(s);
        const QString p = QString::number(s->port);
        for (const QString &host :
             {QStringLiteral("127.0.0.1:") + p, QStringLiteral("localhost:") + p,
              QStringLiteral("[::1]:") + p, QStringLiteral("LocalHost:") + p,
              QStringLiteral("127.0.0.1"), QStringLiteral("localhost"), QStringLiteral("[::1]")}) {
            const auto [status, body] = ask(*s, host);
            QVERIFY2(status == 200,
                     qPrintable(host + QStringLiteral(": ") + QString::number(status) +
                                QLatin1Char(' ') + QString::fromUtf8(body)));
        }
        // DNS rebinding: a name that resolves to us is still another site.
        for (const QString &host :
             {QStringLiteral("evil.example:") + p, QStringLiteral("evil.example"),
              QStringLiteral("127.0.0.1.evil.example:") + p, QStringLiteral("localhost.evil:") + p,
              QStringLiteral("127.0.0.1:") + QString::number(s->port + 1),
              QStringLiteral("127.0.0.2:") + p, QStringLiteral("0.0.0.0:") + p,
              QStringLiteral("::1:") + p, QStringLiteral("192.168.1.10:") + p, QString(""),
              QStringLiteral("127.0.0.1:") + p + QStringLiteral("@evil.example")}) {
            const auto [status, body] = ask(*s, host);
            QVERIFY2(status == 403,
                     qPrintable(host + QStringLiteral(": ") + QString::number(status)));
            const QJsonObject error =
                QJsonDocument::fromJson(body).object().value("error").toObject();
            QCOMPARE(error.value("type").toString(), QStringLiteral("forbidden"));
            QVERIFY2(
                error.value("message").toString().contains(QLatin1String("is not this machine")),
                body.constData());
        }
        // No Host at all is not this machine either (HTTP/1.1 needs one).
        const int noHost = ask(*s, QString()).first;
        QVERIFY2(noHost == 403 || noHost == 400, qPrintable(QString::number(noHost)));
        // Checked before the key: a foreign page learns nothing about keys.
        QCOMPARE(ask(*s, QStringLiteral("evil.example"), {}, false).first, 403);
        QCOMPARE(ask(*s, QStringLiteral("127.0.0.1:") + p, {}, false).first, 401);
    }

    void hostMayBeTheListenAddress() {
        // Listening on a LAN address (setting listen_address): that address
        // is this machine too; another one still is not.
        Settings v4;
        v4.listenAddress = QStringLiteral("192.168.1.10");
        auto s = serve(v4);
        QVERIFY(s);
        const QString p = QString::number(s->port);
        QCOMPARE(ask(*s, QStringLiteral("192.168.1.10:") + p).first, 200);
        QCOMPARE(ask(*s, QStringLiteral("127.0.0.1:") + p).first, 200);
        QCOMPARE(ask(*s, QStringLiteral("192.168.1.11:") + p).first, 403);
        Settings v6;
        v6.listenAddress = QStringLiteral("fd00::5");
        s = serve(v6);
        QVERIFY(s);
        const QString p6 = QString::number(s->port);
        QCOMPARE(ask(*s, QStringLiteral("[fd00::5]:") + p6).first, 200);
        QCOMPARE(ask(*s, QStringLiteral("fd00::5:") + p6).first, 403);
    }

    void originMustBeOursOrAllowed() {
        Settings settings;
        settings.allowedOrigins = {QStringLiteral("https://app.example")};
        auto s = serve(settings);
        QVERIFY(s);
        const QString p = QString::number(s->port);
        const QString host = QStringLiteral("127.0.0.1:") + p;
        for (const QString &origin :
             {QStringLiteral("http://127.0.0.1:") + p, QStringLiteral("http://localhost:") + p,
              QStringLiteral("http://[::1]:") + p, QStringLiteral("https://app.example")}) {
            const auto [status, body] = ask(*s, host, origin);
            QVERIFY2(status == 200,
                     qPrintable(origin + QStringLiteral(": ") + QString::number(status) +
                                QLatin1Char(' ') + QString::fromUtf8(body)));
        }
        // A web page elsewhere (CSRF), also one on this machine's other
        // ports, or on our address with another scheme.
        for (const QString &origin :
             {QStringLiteral("http://evil.example"), QStringLiteral("null"), QString(""),
              QStringLiteral("http://127.0.0.1"),
              QStringLiteral("http://127.0.0.1:") + QString::number(s->port + 1),
              QStringLiteral("https://127.0.0.1:") + p,
              QStringLiteral("http://127.0.0.1:") + p + QStringLiteral(".evil.example"),
              QStringLiteral("https://app.example.evil"), QStringLiteral("http://app.example"),
              QStringLiteral("https://app.example/")}) {
            const auto [status, body] = ask(*s, host, origin);
            QVERIFY2(status == 403,
                     qPrintable(origin + QStringLiteral(": ") + QString::number(status)));
            const QJsonObject error =
                QJsonDocument::fromJson(body).object().value("error").toObject();
            QCOMPARE(error.value("type").toString(), QStringLiteral("forbidden"));
            QVERIFY2(error.value("message").toString().contains(QLatin1String("allowed_origins")),
                     body.constData());
        }
        // Without the setting, the listed origin is foreign again.
        auto plain = serve(Settings());
        QVERIFY(plain);
        QCOMPARE(ask(*plain, QStringLiteral("127.0.0.1:") + QString::number(plain->port),
                     QStringLiteral("https://app.example"))
                     .first,
                 403);
    }
};

QTEST_GUILESS_MAIN(TestRequests)
#include "tst_requests.moc"
