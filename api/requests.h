// Parsing of API request bodies and queries into typed requests. Strict:
// unknown fields, wrong types and out-of-range values are refused with a
// message that names the field and says what is allowed.
#pragma once

#include "errors.h"
#include "guest/exec.h"
#include "service/sandboxservice.h"

#include <QByteArray>
#include <QUrlQuery>

namespace sandcastle::api {

constexpr qint64 kMaxJsonBody = 8ll << 20; // commands carry base64 sources

Result<CreateRequest> parseCreate(const QByteArray &body, const QByteArray &idempotencyKey);
Result<ExecRequest> parseExec(const QByteArray &body);
/// additional_minutes.
Result<int> parseExtend(const QByteArray &body);

struct ListQuery {
    int limit = 20;
    QString startingAfter;
    std::optional<SandboxStatus> status;
};
Result<ListQuery> parseList(const QUrlQuery &query);

struct ExecsQuery {
    int limit = 50;
    qint64 before = 0;
};
Result<ExecsQuery> parseExecsQuery(const QUrlQuery &query);

/// The `path` of a files request: absolute, no NUL, nothing else in the query.
Result<QString> parseFilePath(const QUrlQuery &query);

/// Fails for any query parameter not in `allowed`.
Result<void> onlyParams(const QUrlQuery &query, const QStringList &allowed);

} // namespace sandcastle::api
