#include "mcptools.h"

#include "async.h"
#include "json.h"
#include "requests.h"
#include "service/sandboxservice.h"

#include <QJsonDocument>

namespace sandcastle::api {

namespace {

QJsonObject prop(const char *type, const QString &description, QJsonObject extra = {}) {
    extra.insert(QStringLiteral("type"), QLatin1String(type));
    extra.insert(QStringLiteral("description"), description);
    return extra;
}

QJsonObject schema(const QJsonObject &properties, const QStringList &required) {
    return {{QStringLiteral("type"), QStringLiteral("object")},
            {QStringLiteral("properties"), properties},
            {QStringLiteral("required"), QJsonArray::fromStringList(required)},
            {QStringLiteral("additionalProperties"), false}};
}

const QJsonObject kSandboxId =
    prop("string", QStringLiteral("The sandbox's id, as create_sandbox returned it (sbx_...)."),
         {{QStringLiteral("pattern"), QStringLiteral("^sbx_[a-z2-7]{20}$")}});

QJsonObject tool(const QString &name, const QString &title, const QString &description,
                 const QJsonObject &input, bool readOnly, bool destructive) {
    return {{QStringLiteral("name"), name},
            {QStringLiteral("title"), title},
            {QStringLiteral("description"), description},
            {QStringLiteral("inputSchema"), input},
            {QStringLiteral("annotations"),
             QJsonObject{{QStringLiteral("readOnlyHint"), readOnly},
                         {QStringLiteral("destructiveHint"), destructive},
                         {QStringLiteral("openWorldHint"), false}}}};
}

QJsonObject textResult(const QString &text, const QJsonObject &structured, bool isError = false) {
    QJsonObject r{{QStringLiteral("content"),
                   QJsonArray{QJsonObject{{QStringLiteral("type"), QStringLiteral("text")},
                                          {QStringLiteral("text"), text}}}},
                  {QStringLiteral("isError"), isError}};
    if (!structured.isEmpty())
        r.insert(QStringLiteral("structuredContent"), structured);
    return r;
}

QJsonObject errorResult(const EngineError &e) {
    const HttpError h = httpErrorFor(e.kind);
    return textResult(
        QStringLiteral("Error (%1): %2").arg(h.type, e.message),
        {{QStringLiteral("error"),
          QJsonObject{{QStringLiteral("type"), h.type}, {QStringLiteral("message"), e.message}}}},
        true);
}

QFuture<QJsonObject> ready(const QJsonObject &o) {
    return readyFuture<QJsonObject>(o);
}

QString compact(const QJsonObject &o) {
    return QString::fromUtf8(QJsonDocument(o).toJson(QJsonDocument::Indented));
}

/// Turns a service future into a tool result.
template <typename T, typename Fn>
QFuture<QJsonObject> later(SandboxService *service, QFuture<Result<T>> f, Fn ok) {
    return f.then(service, [ok](Result<T> r) -> QJsonObject {
        if (!r)
            return errorResult(r.error());
        if constexpr (std::is_void_v<T>)
            return ok(true);
        else
            return ok(*r);
    });
}

QJsonObject sandboxResult(const SandboxRecord &r, const QString &what) {
    const QJsonObject o = sandboxJson(r);
    return textResult(QStringLiteral("%1\n%2").arg(what, compact(o)), o);
}

/// The sandbox_id argument, checked, and the arguments without it.
Result<QString> takeId(QJsonObject &args) {
    const QJsonValue v = args.take(QStringLiteral("sandbox_id"));
    if (!v.isString() || v.toString().isEmpty())
        return fail(EngineError::Kind::InvalidArgument,
                    QStringLiteral("sandbox_id is required: the id create_sandbox returned "
                                   "(list_sandboxes shows them)"));
    return v.toString();
}

QByteArray bytesOf(const QJsonObject &o) {
    return QJsonDocument(o).toJson(QJsonDocument::Compact);
}

QJsonArray buildToolList() {
    const QJsonObject size =
        prop("string",
             QStringLiteral("small (1 vCPU, 1 GiB), medium (2 vCPUs, 2 GiB) or large (4 vCPUs, "
                            "4 GiB). Default small."),
             {{QStringLiteral("enum"), QJsonArray{"small", "medium", "large"}}});
    return {
        tool(QStringLiteral("create_sandbox"), QStringLiteral("Create a sandbox"),
             QStringLiteral("Creates a disposable Linux VM (Debian 12 with Python 3, Node.js, git, "
                            "curl, build-essential) for this task and returns its id. Files and "
                            "installed packages persist between commands until the sandbox is "
                            "destroyed or its lifetime ends. Destroy it when done."),
             schema({{QStringLiteral("size"), size},
                     {QStringLiteral("name"), prop("string", QStringLiteral("A label for people."),
                                                   {{QStringLiteral("maxLength"), 128}})},
                     {QStringLiteral("timeout_minutes"),
                      prop("integer",
                           QStringLiteral("Lifetime in minutes (default 15, at most 1440); the "
                                          "sandbox is destroyed when it ends."),
                           {{QStringLiteral("minimum"), 1}, {QStringLiteral("maximum"), 1440}})},
                     {QStringLiteral("network"),
                      prop("string",
                           QStringLiteral("internet (default): outbound HTTP(S), DNS, git, pip, "
                                          "npm; private addresses, the host and SMTP are "
                                          "blocked. none: no network at all."),
                           {{QStringLiteral("enum"), QJsonArray{"internet", "none"}}})}},
                    {}),
             false, false),
        tool(QStringLiteral("run_command"), QStringLiteral("Run a shell command"),
             QStringLiteral("Runs a shell command line in the sandbox with /bin/sh -c as the "
                            "unprivileged user 'sandbox' (no sudo), stdin empty, in cwd (default "
                            "/home/sandbox). Returns stdout, stderr and exit_code; a non-zero exit "
                            "code is a normal result to read. Each stream is capped at 1 MiB "
                            "(truncated=true): pipe long output through tail. On timeout the "
                            "command is killed and exit_code is 124."),
             schema({{QStringLiteral("sandbox_id"), kSandboxId},
                     {QStringLiteral("command"),
                      prop("string",
                           QStringLiteral("The command line, e.g. 'pip install --user "
                                          "requests && python3 main.py'."),
                           {{QStringLiteral("minLength"), 1}})},
                     {QStringLiteral("timeout_ms"),
                      prop("integer",
                           QStringLiteral("Milliseconds before the command is killed "
                                          "(default 60000, at most 3600000)."),
                           {{QStringLiteral("minimum"), 1}, {QStringLiteral("maximum"), 3600000}})},
                     {QStringLiteral("cwd"),
                      prop("string", QStringLiteral("Absolute working directory."))},
                     {QStringLiteral("env"),
                      prop("object",
                           QStringLiteral("Extra environment variables for this command only "
                                          "(values are never stored)."),
                           {{QStringLiteral("additionalProperties"),
                             QJsonObject{{QStringLiteral("type"), QStringLiteral("string")}}}})}},
                    {QStringLiteral("sandbox_id"), QStringLiteral("command")}),
             false, false),
        tool(QStringLiteral("write_file"), QStringLiteral("Write a file"),
             QStringLiteral("Writes text (or base64-decoded bytes) to an absolute path in the "
                            "sandbox, creating parent directories, owned by 'sandbox'. Paths "
                            "outside what 'sandbox' may write (e.g. /etc) are refused. Up to "
                            "100 MiB."),
             schema(
                 {{QStringLiteral("sandbox_id"), kSandboxId},
                  {QStringLiteral("path"),
                   prop("string", QStringLiteral("Absolute path, e.g. /workspace/main.py."))},
                  {QStringLiteral("content"), prop("string", QStringLiteral("The content."))},
                  {QStringLiteral("encoding"),
                   prop("string", QStringLiteral("utf8 (default) or base64."),
                        {{QStringLiteral("enum"), QJsonArray{"utf8", "base64"}}})}},
                 {QStringLiteral("sandbox_id"), QStringLiteral("path"), QStringLiteral("content")}),
             false, false),
        tool(QStringLiteral("read_file"), QStringLiteral("Read a file"),
             QStringLiteral("Reads a file from the sandbox. Text comes back as UTF-8; use "
                            "encoding=base64 for binary files."),
             schema({{QStringLiteral("sandbox_id"), kSandboxId},
                     {QStringLiteral("path"), prop("string", QStringLiteral("Absolute path."))},
                     {QStringLiteral("encoding"),
                      prop("string", QStringLiteral("utf8 (default) or base64."),
                           {{QStringLiteral("enum"), QJsonArray{"utf8", "base64"}}})}},
                    {QStringLiteral("sandbox_id"), QStringLiteral("path")}),
             true, false),
        tool(QStringLiteral("extend_sandbox"), QStringLiteral("Extend a sandbox's lifetime"),
             QStringLiteral("Moves the sandbox's expiry later by additional_minutes; the whole "
                            "lifetime stays within 24 hours of its creation."),
             schema({{QStringLiteral("sandbox_id"), kSandboxId},
                     {QStringLiteral("additional_minutes"),
                      prop("integer", QStringLiteral("Minutes to add."),
                           {{QStringLiteral("minimum"), 1}, {QStringLiteral("maximum"), 1440}})}},
                    {QStringLiteral("sandbox_id"), QStringLiteral("additional_minutes")}),
             false, false),
        tool(QStringLiteral("destroy_sandbox"), QStringLiteral("Destroy a sandbox"),
             QStringLiteral("Destroys the sandbox's VM and its disk; everything in it is lost. "
                            "Safe to repeat."),
             schema({{QStringLiteral("sandbox_id"), kSandboxId}}, {QStringLiteral("sandbox_id")}),
             false, true),
        tool(
            QStringLiteral("list_sandboxes"), QStringLiteral("List sandboxes"),
            QStringLiteral("Lists this account's sandboxes, newest first, with status and "
                           "expiry."),
            schema({{QStringLiteral("status"),
                     prop("string", QStringLiteral("Only sandboxes with this status."),
                          {{QStringLiteral("enum"), QJsonArray{"creating", "running", "stopping",
                                                               "destroyed", "expired", "error"}}})},
                    {QStringLiteral("limit"),
                     prop("integer", QStringLiteral("At most this many (default 20)."),
                          {{QStringLiteral("minimum"), 1}, {QStringLiteral("maximum"), 100}})}},
                   {}),
            true, false),
    };
}

} // namespace

QJsonArray mcpToolList() {
    // Built once: tools/call looks names up in it on every call.
    static const QJsonArray tools = buildToolList();
    return tools;
}

bool isMcpTool(const QString &name) {
    for (const QJsonValue &t : mcpToolList()) {
        if (t.toObject().value(QStringLiteral("name")).toString() == name)
            return true;
    }
    return false;
}

QFuture<QJsonObject> callMcpTool(SandboxService *service, const QString &accountId,
                                 const QString &name, const QJsonObject &arguments) {
    QJsonObject args = arguments;
    if (name == QLatin1String("create_sandbox")) {
        auto request = parseCreate(bytesOf(args), {});
        if (!request)
            return ready(errorResult(request.error()));
        return later(service, service->create(accountId, *request), [](const SandboxView &v) {
            return sandboxResult(v.record,
                                 QStringLiteral("Created sandbox %1 (running).").arg(v.record.id));
        });
    }
    if (name == QLatin1String("list_sandboxes")) {
        QUrlQuery q;
        for (auto it = args.begin(); it != args.end(); ++it)
            q.addQueryItem(it.key(), it.value().isDouble() ? QString::number(it.value().toInteger())
                                                           : it.value().toString());
        auto list = parseList(q);
        if (!list)
            return ready(errorResult(list.error()));
        auto rows = service->list(accountId, list->limit, {}, list->status);
        if (!rows)
            return ready(errorResult(rows.error()));
        QJsonArray data;
        QStringList lines;
        for (const SandboxRecord &r : *rows) {
            data.append(sandboxJson(r));
            lines << QStringLiteral("%1  %2  %3  expires %4")
                         .arg(r.id, statusName(r.status), r.size, timestamp(r.expiresAt));
        }
        return ready(textResult(lines.isEmpty() ? QStringLiteral("No sandboxes.")
                                                : lines.join(QLatin1Char('\n')),
                                {{QStringLiteral("sandboxes"), data}}));
    }
    auto id = takeId(args);
    if (!id)
        return ready(errorResult(id.error()));
    if (name == QLatin1String("run_command")) {
        auto request = parseExec(bytesOf(args));
        if (!request)
            return ready(errorResult(request.error()));
        return later(service, service->exec(accountId, *id, *request), [](const ExecResult &r) {
            const QJsonObject o = execResultJson(r);
            QString text =
                QStringLiteral("exit_code: %1%2\n--- stdout ---\n%3\n--- stderr ---\n%4")
                    .arg(r.exitCode)
                    .arg(r.truncated ? QStringLiteral(" (output truncated)") : QString())
                    .arg(QString::fromUtf8(r.stdoutData), QString::fromUtf8(r.stderrData));
            return textResult(text, o);
        });
    }
    if (name == QLatin1String("destroy_sandbox")) {
        if (!args.isEmpty())
            return ready(errorResult({EngineError::Kind::InvalidArgument,
                                      QStringLiteral("destroy_sandbox takes only sandbox_id")}));
        return later(service, service->destroy(accountId, *id), [](const SandboxRecord &r) {
            return sandboxResult(
                r, QStringLiteral("Sandbox %1 is %2.").arg(r.id, statusName(r.status)));
        });
    }
    if (name == QLatin1String("extend_sandbox")) {
        auto minutes = parseExtend(bytesOf(args));
        if (!minutes)
            return ready(errorResult(minutes.error()));
        auto r = service->extend(accountId, *id, *minutes);
        if (!r)
            return ready(errorResult(r.error()));
        return ready(sandboxResult(
            *r,
            QStringLiteral("Sandbox %1 now expires at %2.").arg(r->id, timestamp(r->expiresAt))));
    }
    // write_file and read_file
    const QString encoding = args.take(QStringLiteral("encoding")).toString(QStringLiteral("utf8"));
    if (encoding != QLatin1String("utf8") && encoding != QLatin1String("base64"))
        return ready(errorResult({EngineError::Kind::InvalidArgument,
                                  QStringLiteral("encoding must be utf8 or base64")}));
    const QJsonValue path = args.take(QStringLiteral("path"));
    QUrlQuery q;
    q.addQueryItem(QStringLiteral("path"), path.toString());
    auto checked =
        path.isString()
            ? parseFilePath(q)
            : Result<QString>(std::unexpected(EngineError{EngineError::Kind::InvalidArgument,
                                                          QStringLiteral("path is required")}));
    if (!checked)
        return ready(errorResult(checked.error()));
    if (name == QLatin1String("read_file")) {
        if (!args.isEmpty())
            return ready(
                errorResult({EngineError::Kind::InvalidArgument,
                             QStringLiteral("unknown argument '%1'").arg(args.keys().first())}));
        return later(service, service->readFile(accountId, *id, *checked),
                     [encoding, p = *checked](const QByteArray &data) {
                         const QString content = encoding == QLatin1String("base64")
                                                     ? QString::fromLatin1(data.toBase64())
                                                     : QString::fromUtf8(data);
                         return textResult(content, {{QStringLiteral("path"), p},
                                                     {QStringLiteral("bytes"), data.size()},
                                                     {QStringLiteral("encoding"), encoding},
                                                     {QStringLiteral("content"), content}});
                     });
    }
    const QJsonValue content = args.take(QStringLiteral("content"));
    if (!content.isString() || !args.isEmpty())
        return ready(errorResult({EngineError::Kind::InvalidArgument,
                                  QStringLiteral("write_file takes sandbox_id, path, content "
                                                 "(a string) and optionally encoding")}));
    QByteArray data = content.toString().toUtf8();
    if (encoding == QLatin1String("base64")) {
        auto decoded =
            QByteArray::fromBase64Encoding(data, QByteArray::AbortOnBase64DecodingErrors);
        if (!decoded)
            return ready(errorResult({EngineError::Kind::InvalidArgument,
                                      QStringLiteral("content is not valid base64")}));
        data = *decoded;
    }
    const qint64 size = data.size();
    return later(
        service, service->writeFile(accountId, *id, *checked, data), [size, p = *checked](bool) {
            return textResult(QStringLiteral("Wrote %1 bytes to %2.").arg(size).arg(p),
                              {{QStringLiteral("path"), p}, {QStringLiteral("bytes"), size}});
        });
}

} // namespace sandcastle::api
