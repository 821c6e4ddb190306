#include "json.h"

#include "sandbox/engine.h"
#include "sizes.h"

#include <QCoreApplication>
#include <QDateTime>
#include <QJsonArray>

namespace sandcastle::api {

using Kind = EngineError::Kind;

namespace {
QJsonValue orNull(const QString &s) {
    return s.isEmpty() ? QJsonValue(QJsonValue::Null) : QJsonValue(s);
}
double money(qint64 micros) {
    return double(micros) / 1e6;
}
} // namespace

QString timestamp(qint64 ms) {
    return QDateTime::fromMSecsSinceEpoch(ms, Qt::UTC).toString(Qt::ISODateWithMs);
}

QJsonObject sandboxJson(const SandboxRecord &r) {
    return {
        {QStringLiteral("id"), r.id},
        {QStringLiteral("object"), QStringLiteral("sandbox")},
        {QStringLiteral("name"), orNull(r.name)},
        {QStringLiteral("size"), r.size},
        {QStringLiteral("status"), statusName(r.status)},
        {QStringLiteral("status_reason"), orNull(r.statusReason)},
        {QStringLiteral("created_at"), timestamp(r.createdAt)},
        {QStringLiteral("expires_at"), timestamp(r.expiresAt)},
        {QStringLiteral("ended_at"), r.endedAt ? QJsonValue(timestamp(r.endedAt)) : QJsonValue()},
        {QStringLiteral("timeout_minutes"), r.timeoutMinutes},
        {QStringLiteral("vcpus"), r.vcpus},
        {QStringLiteral("memory_mib"), r.memoryMiB},
        {QStringLiteral("disk_gib"), r.diskGiB},
        {QStringLiteral("network"), r.network},
        {QStringLiteral("cost_so_far"), money(r.costMicros)},
        {QStringLiteral("currency"), QStringLiteral("USD")},
        {QStringLiteral("price_per_hour"), money(r.rateMicrosPerHour)},
    };
}

QJsonObject execResultJson(const ExecResult &r) {
    return {
        {QStringLiteral("stdout"), QString::fromUtf8(r.stdoutData)},
        {QStringLiteral("stderr"), QString::fromUtf8(r.stderrData)},
        {QStringLiteral("exit_code"), r.exitCode},
        {QStringLiteral("truncated"), r.truncated},
        {QStringLiteral("timed_out"), r.timedOut},
        {QStringLiteral("duration_ms"), r.durationMs},
        {QStringLiteral("stdout_bytes"), r.stdoutBytes},
        {QStringLiteral("stderr_bytes"), r.stderrBytes},
    };
}

QJsonObject execRecordJson(const ExecRecord &e) {
    QJsonObject o{
        {QStringLiteral("id"), e.id},
        {QStringLiteral("command"), e.command},
        {QStringLiteral("command_bytes"), e.commandBytes},
        {QStringLiteral("command_sha256"), orNull(e.commandSha256)},
        {QStringLiteral("cwd"), e.cwd},
        {QStringLiteral("env_names"), QJsonArray::fromStringList(e.envNames)},
        {QStringLiteral("timeout_ms"), e.timeoutMs},
        {QStringLiteral("status"), e.status},
        {QStringLiteral("started_at"), timestamp(e.startedAt)},
        {QStringLiteral("finished_at"),
         e.finishedAt ? QJsonValue(timestamp(e.finishedAt)) : QJsonValue()},
        {QStringLiteral("error"), orNull(e.error)},
    };
    if (e.status == QLatin1String("finished")) {
        o.insert(QStringLiteral("exit_code"), e.exitCode);
        o.insert(QStringLiteral("duration_ms"), e.durationMs);
        o.insert(QStringLiteral("stdout_bytes"), e.stdoutBytes);
        o.insert(QStringLiteral("stderr_bytes"), e.stderrBytes);
        o.insert(QStringLiteral("truncated"), e.truncated);
        o.insert(QStringLiteral("stdout_tail"), e.stdoutPreview);
        o.insert(QStringLiteral("stderr_tail"), e.stderrPreview);
    }
    return o;
}

QJsonObject accountJson(const AccountRecord &a, int live, const Settings &settings) {
    return {
        {QStringLiteral("id"), a.id},
        {QStringLiteral("name"), a.name},
        {QStringLiteral("credit"), money(a.balanceMicros)},
        {QStringLiteral("currency"), QStringLiteral("USD")},
        {QStringLiteral("live_sandboxes"), live},
        {QStringLiteral("max_live_sandboxes"), settings.maxLiveSandboxes},
    };
}

QJsonObject sizesJson(const Settings &settings) {
    QJsonArray data;
    for (const SandboxSize &s : sandboxSizes())
        data.append(QJsonObject{
            {QStringLiteral("name"), s.name},
            {QStringLiteral("vcpus"), s.vcpus},
            {QStringLiteral("memory_mib"), s.memoryMiB},
            {QStringLiteral("disk_gib"), s.diskGiB},
            {QStringLiteral("price_per_hour"), money(settings.ratesMicrosPerHour.value(s.name))},
            {QStringLiteral("currency"), QStringLiteral("USD")},
            {QStringLiteral("default"), s.name == settings.defaultSize},
        });
    return {{QStringLiteral("data"), data}};
}

QJsonObject systemJson(const QString &version, const QString &accelerator,
                       const Result<GuestImage> &image, qint64 nowMs) {
    QJsonValue imageJson;
    if (image) {
        // No paths: they say nothing a client can use and name host folders.
        QJsonObject o{
            {QStringLiteral("built_at"),
             image->builtAt > 0 ? QJsonValue(timestamp(image->builtAt)) : QJsonValue()},
            {QStringLiteral("built_at_estimated"), image->builtAtEstimated},
            {QStringLiteral("age_days"),
             image->builtAt > 0 ? QJsonValue(image->ageDays(nowMs)) : QJsonValue()},
            {QStringLiteral("max_age_days"), GuestImage::kMaxAgeDays},
            {QStringLiteral("boot_hash"), image->bootHash},
            {QStringLiteral("rootfs"), orNull(image->rootfs)},
            {QStringLiteral("kernel_version"), orNull(image->kernelVersion)},
            {QStringLiteral("suites"), QJsonArray::fromStringList(image->suites)},
            {QStringLiteral("update_recommended"), !image->ageWarning(nowMs).isEmpty()},
            {QStringLiteral("update_command"), QLatin1String(GuestImage::kUpdateCommand)},
        };
        imageJson = o;
    }
    return {
        {QStringLiteral("object"), QStringLiteral("system")},
        {QStringLiteral("version"), version},
        {QStringLiteral("accelerator"), orNull(accelerator)},
        {QStringLiteral("image"), imageJson},
    };
}

QJsonObject systemJson(const Engine &engine) {
    const QString accelerator = !engine.hypervisor()   ? QString()
                                : engine.accelerated() ? QStringLiteral("kvm")
                                                       : QStringLiteral("tcg");
    return systemJson(QCoreApplication::applicationVersion(), accelerator,
                      GuestImage::load(engine.config().imageDir),
                      QDateTime::currentMSecsSinceEpoch());
}

HttpError httpErrorFor(Kind kind) {
    switch (kind) {
    case Kind::InvalidArgument:
        return {400, QStringLiteral("invalid_request")};
    case Kind::NotFound:
        return {404, QStringLiteral("not_found")};
    case Kind::Conflict:
        return {409, QStringLiteral("conflict")};
    case Kind::PermissionDenied:
        return {403, QStringLiteral("forbidden")};
    case Kind::TooLarge:
        return {413, QStringLiteral("payload_too_large")};
    case Kind::NoSpace:
        return {507, QStringLiteral("insufficient_storage")};
    case Kind::Unavailable:
        return {503, QStringLiteral("unavailable")};
    case Kind::Timeout:
        return {504, QStringLiteral("timeout")};
    case Kind::QuotaExceeded:
        return {429, QStringLiteral("rate_limited")};
    case Kind::NoCredit:
        return {402, QStringLiteral("insufficient_credit")};
    case Kind::Internal:
        break;
    }
    return {500, QStringLiteral("internal")};
}

QJsonObject errorJson(const QString &type, const QString &message) {
    return {{QStringLiteral("error"),
             QJsonObject{{QStringLiteral("type"), type}, {QStringLiteral("message"), message}}}};
}

} // namespace sandcastle::api
