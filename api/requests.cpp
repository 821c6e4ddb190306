#include "requests.h"

#include <QCryptographicHash>
#include <QJsonDocument>
#include <QJsonObject>

#include <cmath>

namespace sandcastle::api {

using Kind = EngineError::Kind;

namespace {

std::unexpected<EngineError> bad(const QString &message) {
    return fail(Kind::InvalidArgument, message);
}

/// The body as a JSON object; an empty body is an empty object.
Result<QJsonObject> objectOf(const QByteArray &body, const QStringList &allowed) {
    if (body.size() > kMaxJsonBody)
        return fail(Kind::TooLarge,
                    QStringLiteral("the request body is over %1 bytes").arg(kMaxJsonBody));
    if (body.trimmed().isEmpty())
        return QJsonObject();
    QJsonParseError error;
    const QJsonDocument doc = QJsonDocument::fromJson(body, &error);
    if (error.error != QJsonParseError::NoError)
        return bad(QStringLiteral("the body is not valid JSON: %1 at byte %2")
                       .arg(error.errorString())
                       .arg(error.offset));
    if (!doc.isObject())
        return bad(QStringLiteral("the body must be a JSON object"));
    const QJsonObject o = doc.object();
    for (auto it = o.begin(); it != o.end(); ++it) {
        if (!allowed.contains(it.key()))
            return bad(QStringLiteral("unknown field '%1'; allowed fields: %2")
                           .arg(it.key().left(64), allowed.join(QStringLiteral(", "))));
    }
    return o;
}

/// An optional integer field in [min, max]; `fallback` when absent or null.
Result<qint64> integer(const QJsonObject &o, const QString &key, qint64 min, qint64 max,
                       qint64 fallback) {
    const QJsonValue v = o.value(key);
    if (v.isUndefined() || v.isNull())
        return fallback;
    const double d = v.toDouble();
    if (!v.isDouble() || std::floor(d) != d || d < double(min) || d > double(max))
        return bad(
            QStringLiteral("%1 must be a whole number from %2 to %3").arg(key).arg(min).arg(max));
    return qint64(d);
}

/// An optional string field of at most `maxLength` characters.
Result<QString> string(const QJsonObject &o, const QString &key, int maxLength) {
    const QJsonValue v = o.value(key);
    if (v.isUndefined() || v.isNull())
        return QString();
    if (!v.isString())
        return bad(QStringLiteral("%1 must be a string").arg(key));
    const QString s = v.toString();
    if (s.size() > maxLength)
        return bad(QStringLiteral("%1 is longer than %2 characters").arg(key).arg(maxLength));
    if (s.contains(QChar(0)))
        return bad(QStringLiteral("%1 must not contain NUL characters").arg(key));
    return s;
}

Result<int> intParam(const QUrlQuery &q, const QString &key, int min, int max, int fallback) {
    if (!q.hasQueryItem(key))
        return fallback;
    bool ok = false;
    const int v = q.queryItemValue(key).toInt(&ok);
    if (!ok || v < min || v > max)
        return bad(
            QStringLiteral("%1 must be a whole number from %2 to %3").arg(key).arg(min).arg(max));
    return v;
}

} // namespace

Result<CreateRequest> parseCreate(const QByteArray &body, const QByteArray &idempotencyKey) {
    auto o = objectOf(body, {QStringLiteral("size"), QStringLiteral("name"),
                             QStringLiteral("timeout_minutes"), QStringLiteral("network")});
    if (!o)
        return std::unexpected(o.error());
    CreateRequest r;
    auto size = string(*o, QStringLiteral("size"), 32);
    auto name = string(*o, QStringLiteral("name"), 128);
    auto minutes = integer(*o, QStringLiteral("timeout_minutes"), 1, 1440, 0);
    auto network = string(*o, QStringLiteral("network"), 16);
    if (!network)
        return std::unexpected(network.error());
    if (!network->isEmpty() && *network != QLatin1String("internet") &&
        *network != QLatin1String("none"))
        return bad(QStringLiteral("network must be \"internet\" (the default) or \"none\""));
    r.internet = *network != QLatin1String("none");
    if (!size)
        return std::unexpected(size.error());
    if (!name)
        return std::unexpected(name.error());
    if (!minutes)
        return std::unexpected(minutes.error());
    for (QChar c : *name) {
        if (c.category() == QChar::Other_Control)
            return bad(QStringLiteral("name must not contain control characters"));
    }
    r.size = *size;
    r.name = *name;
    r.timeoutMinutes = int(*minutes);
    if (!idempotencyKey.isEmpty()) {
        if (idempotencyKey.size() > 255)
            return bad(QStringLiteral("Idempotency-Key is longer than 255 characters"));
        for (char c : idempotencyKey) {
            if (c < 0x21 || c > 0x7e)
                return bad(QStringLiteral("Idempotency-Key must be printable ASCII"));
        }
        r.idempotencyKey = QString::fromLatin1(idempotencyKey);
        // The request as parsed, so formatting differences do not count.
        const QByteArray canonical =
            QJsonDocument(QJsonObject{{QStringLiteral("size"), r.size},
                                      {QStringLiteral("name"), r.name},
                                      {QStringLiteral("timeout_minutes"), r.timeoutMinutes},
                                      {QStringLiteral("internet"), r.internet}})
                .toJson(QJsonDocument::Compact);
        r.requestHash = QString::fromLatin1(
            QCryptographicHash::hash(canonical, QCryptographicHash::Sha256).toHex());
    }
    return r;
}

Result<ExecRequest> parseExec(const QByteArray &body) {
    auto o = objectOf(body, {QStringLiteral("command"), QStringLiteral("timeout_ms"),
                             QStringLiteral("cwd"), QStringLiteral("env")});
    if (!o)
        return std::unexpected(o.error());
    if (!o->value(QStringLiteral("command")).isString())
        return bad(QStringLiteral("command is required and must be a string (a shell command "
                                  "line, run with /bin/sh -c)"));
    ExecRequest r;
    auto command = string(*o, QStringLiteral("command"), 1 << 20);
    auto cwd = string(*o, QStringLiteral("cwd"), 4096);
    auto timeout = integer(*o, QStringLiteral("timeout_ms"), 1, 3600000, 60000);
    if (!command)
        return std::unexpected(command.error());
    if (!cwd)
        return std::unexpected(cwd.error());
    if (!timeout)
        return std::unexpected(timeout.error());
    r.command = *command;
    r.cwd = *cwd;
    r.timeoutMs = int(*timeout);
    const QJsonValue env = o->value(QStringLiteral("env"));
    if (!env.isUndefined() && !env.isNull()) {
        if (!env.isObject())
            return bad(QStringLiteral("env must be an object of string values, e.g. "
                                      "{\"TASK_ID\": \"42\"}"));
        const QJsonObject vars = env.toObject();
        if (vars.size() > 256)
            return bad(QStringLiteral("env has more than 256 variables"));
        for (auto it = vars.begin(); it != vars.end(); ++it) {
            if (!it.value().isString())
                return bad(QStringLiteral("env.%1 must be a string").arg(it.key().left(64)));
            r.env.append({it.key(), it.value().toString()});
        }
    }
    if (auto ok = Engine::validate(r); !ok)
        return std::unexpected(ok.error());
    return r;
}

Result<int> parseExtend(const QByteArray &body) {
    auto o = objectOf(body, {QStringLiteral("additional_minutes")});
    if (!o)
        return std::unexpected(o.error());
    if (!o->contains(QStringLiteral("additional_minutes")))
        return bad(QStringLiteral("additional_minutes is required (1 to 1440)"));
    auto minutes = integer(*o, QStringLiteral("additional_minutes"), 1, 1440, 0);
    if (!minutes)
        return std::unexpected(minutes.error());
    if (*minutes == 0)
        return bad(QStringLiteral("additional_minutes is required (1 to 1440)"));
    return int(*minutes);
}

Result<void> onlyParams(const QUrlQuery &query, const QStringList &allowed) {
    for (const auto &[key, value] : query.queryItems()) {
        if (!allowed.contains(key))
            return bad(QStringLiteral("unknown query parameter '%1'%2")
                           .arg(key.left(64), allowed.isEmpty()
                                                  ? QString()
                                                  : QStringLiteral("; allowed: ") +
                                                        allowed.join(QStringLiteral(", "))));
    }
    return {};
}

Result<ListQuery> parseList(const QUrlQuery &query) {
    if (auto ok = onlyParams(query, {QStringLiteral("limit"), QStringLiteral("starting_after"),
                                     QStringLiteral("status")});
        !ok)
        return std::unexpected(ok.error());
    ListQuery q;
    auto limit = intParam(query, QStringLiteral("limit"), 1, 100, 20);
    if (!limit)
        return std::unexpected(limit.error());
    q.limit = *limit;
    q.startingAfter = query.queryItemValue(QStringLiteral("starting_after"));
    if (query.hasQueryItem(QStringLiteral("status"))) {
        q.status = statusFromName(query.queryItemValue(QStringLiteral("status")));
        if (!q.status)
            return bad(QStringLiteral("status must be one of creating, running, stopping, "
                                      "destroyed, expired, error"));
    }
    return q;
}

Result<ExecsQuery> parseExecsQuery(const QUrlQuery &query) {
    if (auto ok = onlyParams(query, {QStringLiteral("limit"), QStringLiteral("before")}); !ok)
        return std::unexpected(ok.error());
    ExecsQuery q;
    auto limit = intParam(query, QStringLiteral("limit"), 1, 500, 50);
    auto before = intParam(query, QStringLiteral("before"), 1, INT_MAX, 0);
    if (!limit)
        return std::unexpected(limit.error());
    if (!before)
        return std::unexpected(before.error());
    q.limit = *limit;
    q.before = *before;
    return q;
}

Result<QString> parseFilePath(const QUrlQuery &query) {
    if (auto ok = onlyParams(query, {QStringLiteral("path")}); !ok)
        return std::unexpected(ok.error());
    const QString path = query.queryItemValue(QStringLiteral("path"), QUrl::FullyDecoded);
    if (path.isEmpty())
        return bad(QStringLiteral("the query needs ?path=/absolute/path/of/the/file"));
    if (!path.startsWith(QLatin1Char('/')) || path.contains(QChar(0)) || path.size() > 4096)
        return bad(QStringLiteral("path must be an absolute path in the sandbox, such as "
                                  "/workspace/main.py"));
    return path;
}

} // namespace sandcastle::api
