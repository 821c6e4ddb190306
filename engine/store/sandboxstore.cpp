// The record of sandboxes, their execs and their lifecycle events.
#include "store.h"

#include "transaction.h"

#include <QCryptographicHash>
#include <QSqlDatabase>
#include <QSqlError>
#include <QSqlQuery>

namespace sandcastle {

using Kind = EngineError::Kind;

QString statusName(SandboxStatus status) {
    switch (status) {
    case SandboxStatus::Creating:
        return QStringLiteral("creating");
    case SandboxStatus::Running:
        return QStringLiteral("running");
    case SandboxStatus::Stopping:
        return QStringLiteral("stopping");
    case SandboxStatus::Destroyed:
        return QStringLiteral("destroyed");
    case SandboxStatus::Expired:
        return QStringLiteral("expired");
    case SandboxStatus::Error:
        break;
    }
    return QStringLiteral("error");
}

std::optional<SandboxStatus> statusFromName(const QString &name) {
    for (auto s : {SandboxStatus::Creating, SandboxStatus::Running, SandboxStatus::Stopping,
                   SandboxStatus::Destroyed, SandboxStatus::Expired, SandboxStatus::Error}) {
        if (statusName(s) == name)
            return s;
    }
    return std::nullopt;
}

bool isLive(SandboxStatus status) {
    return status == SandboxStatus::Creating || status == SandboxStatus::Running ||
           status == SandboxStatus::Stopping;
}

namespace {

const QString kSandboxColumns = QStringLiteral(
    "id, account_id, name, size, vcpus, memory_mib, disk_gib, status, status_reason,"
    " ending_status, created_at, expires_at, ended_at, timeout_minutes, rate_micros_per_hour,"
    " cost_micros, charged_until, boot_ms, network");

SandboxRecord sandboxFrom(const QSqlQuery &q) {
    SandboxRecord r;
    r.id = q.value(0).toString();
    r.accountId = q.value(1).toString();
    r.name = q.value(2).toString();
    r.size = q.value(3).toString();
    r.vcpus = q.value(4).toInt();
    r.memoryMiB = q.value(5).toInt();
    r.diskGiB = q.value(6).toInt();
    r.status = statusFromName(q.value(7).toString()).value_or(SandboxStatus::Error);
    r.statusReason = q.value(8).toString();
    r.endingStatus = statusFromName(q.value(9).toString()).value_or(SandboxStatus::Destroyed);
    r.createdAt = q.value(10).toLongLong();
    r.expiresAt = q.value(11).toLongLong();
    r.endedAt = q.value(12).toLongLong();
    r.timeoutMinutes = q.value(13).toInt();
    r.rateMicrosPerHour = q.value(14).toLongLong();
    r.costMicros = q.value(15).toLongLong();
    r.chargedUntil = q.value(16).toLongLong();
    r.bootMs = q.value(17).toLongLong();
    r.network = q.value(18).toString();
    return r;
}

const QString kExecColumns = QStringLiteral(
    "id, sandbox_id, command, cwd, env_names, timeout_ms, status, started_at, finished_at,"
    " exit_code, duration_ms, stdout_bytes, stderr_bytes, truncated, stdout_preview,"
    " stderr_preview, error, command_bytes, command_sha256");

ExecRecord execFrom(const QSqlQuery &q) {
    ExecRecord e;
    e.id = q.value(0).toLongLong();
    e.sandboxId = q.value(1).toString();
    e.command = q.value(2).toString();
    e.cwd = q.value(3).toString();
    e.envNames = q.value(4).toString().split(QLatin1Char(','), Qt::SkipEmptyParts);
    e.timeoutMs = q.value(5).toInt();
    e.status = q.value(6).toString();
    e.startedAt = q.value(7).toLongLong();
    e.finishedAt = q.value(8).toLongLong();
    e.exitCode = q.value(9).toInt();
    e.durationMs = q.value(10).toLongLong();
    e.stdoutBytes = q.value(11).toLongLong();
    e.stderrBytes = q.value(12).toLongLong();
    e.truncated = q.value(13).toBool();
    e.stdoutPreview = q.value(14).toString();
    e.stderrPreview = q.value(15).toString();
    e.error = q.value(16).toString();
    e.commandBytes = q.value(17).toLongLong();
    e.commandSha256 = q.value(18).toString();
    return e;
}

template <typename T> Result<void> done(const Result<T> &r) {
    if (!r)
        return std::unexpected(r.error());
    return {};
}

} // namespace

Result<void> Store::insertSandbox(const SandboxRecord &r, const QString &idempotencyKey,
                                  const QString &requestHash) {
    Transaction t(*this);
    if (auto ok = t.begun(); !ok)
        return ok;
    auto q = run(QStringLiteral("INSERT INTO sandboxes(%1) VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?,"
                                " ?, ?, ?, ?, ?, ?, ?, ?, ?)")
                     .arg(kSandboxColumns),
                 {r.id, r.accountId, r.name, r.size, r.vcpus, r.memoryMiB, r.diskGiB,
                  statusName(r.status), r.statusReason, statusName(r.endingStatus), r.createdAt,
                  r.expiresAt, r.endedAt, r.timeoutMinutes, r.rateMicrosPerHour, r.costMicros,
                  r.chargedUntil, r.bootMs, r.network});
    if (q && !idempotencyKey.isEmpty())
        q = run(QStringLiteral("INSERT INTO idempotency(account_id, key, request_hash,"
                               " sandbox_id, created_at) VALUES(?, ?, ?, ?, ?)"
                               " ON CONFLICT(account_id, key) DO UPDATE SET"
                               " request_hash = excluded.request_hash,"
                               " sandbox_id = excluded.sandbox_id,"
                               " created_at = excluded.created_at"),
                {r.accountId, idempotencyKey, requestHash, r.id, r.createdAt});
    if (q)
        q = run(QStringLiteral("INSERT INTO events(sandbox_id, at, kind, detail)"
                               " VALUES(?, ?, 'created', ?)"),
                {r.id, r.createdAt, r.size});
    if (!q)
        return std::unexpected(q.error());
    return t.commit();
}

std::optional<SandboxRecord> Store::sandbox(const QString &id) const {
    auto q =
        run(QStringLiteral("SELECT %1 FROM sandboxes WHERE id = ?").arg(kSandboxColumns), {id});
    if (!q || !q->next())
        return std::nullopt;
    return sandboxFrom(*q);
}

Result<QList<SandboxRecord>> Store::liveSandboxes() const {
    auto q = run(QStringLiteral("SELECT %1 FROM sandboxes WHERE status IN"
                                " ('creating', 'running', 'stopping') ORDER BY created_at")
                     .arg(kSandboxColumns));
    if (!q)
        return std::unexpected(q.error());
    QList<SandboxRecord> out;
    while (q->next())
        out.append(sandboxFrom(*q));
    return out;
}

Result<int> Store::liveCount(const QString &accountId) const {
    auto q = run(QStringLiteral("SELECT COUNT(*) FROM sandboxes WHERE (? = '' OR account_id = ?)"
                                " AND status IN ('creating', 'running', 'stopping')"),
                 {accountId, accountId});
    if (!q)
        return std::unexpected(q.error());
    if (!q->next())
        return fail(Kind::Internal, QStringLiteral("database: no count of live sandboxes"));
    return q->value(0).toInt();
}

Result<QList<SandboxRecord>> Store::listSandboxes(const QString &accountId, int limit,
                                                  const QString &startingAfter,
                                                  std::optional<SandboxStatus> status) const {
    QString sql =
        QStringLiteral("SELECT %1 FROM sandboxes WHERE account_id = ?").arg(kSandboxColumns);
    QVariantList binds{accountId};
    if (!startingAfter.isEmpty()) {
        auto cursor = sandbox(startingAfter);
        if (!cursor || cursor->accountId != accountId)
            return fail(Kind::InvalidArgument,
                        QStringLiteral("starting_after: no sandbox %1 in this account")
                            .arg(startingAfter.left(64)));
        sql += QStringLiteral(" AND (created_at < ? OR (created_at = ? AND id < ?))");
        binds << cursor->createdAt << cursor->createdAt << cursor->id;
    }
    if (status) {
        sql += QStringLiteral(" AND status = ?");
        binds << statusName(*status);
    }
    sql += QStringLiteral(" ORDER BY created_at DESC, id DESC LIMIT ?");
    binds << limit;
    auto q = run(sql, binds);
    if (!q)
        return std::unexpected(q.error());
    QList<SandboxRecord> out;
    while (q->next())
        out.append(sandboxFrom(*q));
    return out;
}

Result<void> Store::setRunning(const QString &id, qint64 bootMs) {
    Transaction t(*this);
    if (auto ok = t.begun(); !ok)
        return ok;
    auto q = run(QStringLiteral("UPDATE sandboxes SET status = 'running', boot_ms = ?,"
                                " status_reason = '' WHERE id = ? AND status = 'creating'"),
                 {bootMs, id});
    if (!q)
        return std::unexpected(q.error());
    if (q->numRowsAffected() == 0)
        return fail(Kind::Conflict,
                    QStringLiteral("sandbox %1 is no longer being created").arg(id.left(64)));
    if (auto ok =
            addEvent(id, QStringLiteral("running"), QStringLiteral("booted in %1 ms").arg(bootMs));
        !ok)
        return ok;
    return t.commit();
}

Result<bool> Store::setCreatingReason(const QString &id, const QString &what) {
    auto q = run(QStringLiteral("UPDATE sandboxes SET status_reason = ?"
                                " WHERE id = ? AND status = 'creating' AND status_reason != ?"),
                 {what, id, what});
    if (!q)
        return std::unexpected(q.error());
    return q->numRowsAffected() > 0;
}

Result<void> Store::setStopping(const QString &id, SandboxStatus ending, const QString &reason,
                                bool billToEnd) {
    Transaction t(*this);
    if (auto ok = t.begun(); !ok)
        return ok;
    // The cap is what metering has billed so far (charged_until).
    auto q = run(QStringLiteral("UPDATE sandboxes SET status = 'stopping', ending_status = ?,"
                                " status_reason = ?,"
                                " bill_until = CASE WHEN ? THEN bill_until ELSE charged_until END"
                                " WHERE id = ? AND status IN ('creating', 'running', 'stopping')"),
                 {statusName(ending), reason, billToEnd, id});
    if (!q)
        return std::unexpected(q.error());
    if (auto ok = addEvent(id, QStringLiteral("stopping"), reason); !ok)
        return ok;
    return t.commit();
}

Result<void> Store::setEnded(const QString &id, SandboxStatus status, const QString &reason,
                             qint64 endedAt) {
    Transaction t(*this);
    if (auto ok = t.begun(); !ok)
        return ok;
    // This sandbox's last seconds, up to its cap if it has one; the others
    // are the tick's business.
    if (auto m = meterIn(endedAt, id); !m)
        return std::unexpected(m.error());
    auto q = run(QStringLiteral("UPDATE sandboxes SET status = ?, status_reason = ?,"
                                " ended_at = ? WHERE id = ?"),
                 {statusName(status), reason, endedAt, id});
    if (!q)
        return std::unexpected(q.error());
    if (q->numRowsAffected() == 0)
        return fail(Kind::NotFound, QStringLiteral("no sandbox %1").arg(id.left(64)));
    if (auto ok = addEvent(id, statusName(status), reason); !ok)
        return ok;
    return t.commit();
}

Result<void> Store::setExpiresAt(const QString &id, qint64 expiresAt, int timeoutMinutes) {
    Transaction t(*this);
    if (auto ok = t.begun(); !ok)
        return ok;
    auto q = run(QStringLiteral("UPDATE sandboxes SET expires_at = ?, timeout_minutes = ?"
                                " WHERE id = ?"),
                 {expiresAt, timeoutMinutes, id});
    if (!q)
        return std::unexpected(q.error());
    if (auto ok = addEvent(id, QStringLiteral("extended"),
                           QStringLiteral("lifetime %1 minutes").arg(timeoutMinutes));
        !ok)
        return ok;
    return t.commit();
}

std::optional<std::pair<QString, QString>> Store::idempotent(const QString &accountId,
                                                             const QString &key, qint64 now) const {
    auto q = run(QStringLiteral("SELECT sandbox_id, request_hash FROM idempotency"
                                " WHERE account_id = ? AND key = ? AND created_at > ?"),
                 {accountId, key, now - 24 * 3600 * 1000ll});
    if (!q || !q->next())
        return std::nullopt;
    return std::pair{q->value(0).toString(), q->value(1).toString()};
}

Result<qint64> Store::beginExec(const ExecRecord &e) {
    const QByteArray command = e.command.toUtf8();
    QByteArray kept = command.left(kStoredCommandBytes);
    // Not in the middle of a UTF-8 sequence.
    if (kept.size() < command.size()) {
        int cut = int(kept.size());
        while (cut > 0 && (quint8(command[cut]) & 0xC0) == 0x80)
            --cut;
        kept.truncate(cut);
    }
    auto q = run(QStringLiteral("INSERT INTO execs(sandbox_id, command, cwd, env_names,"
                                " timeout_ms, status, started_at, command_bytes, command_sha256)"
                                " VALUES(?, ?, ?, ?, ?, 'running', ?, ?, ?)"),
                 {e.sandboxId, QString::fromUtf8(kept), e.cwd, e.envNames.join(QLatin1Char(',')),
                  e.timeoutMs, e.startedAt, qint64(command.size()),
                  QString::fromLatin1(
                      QCryptographicHash::hash(command, QCryptographicHash::Sha256).toHex())});
    if (!q)
        return std::unexpected(q.error());
    return q->lastInsertId().toLongLong();
}

Result<void> Store::finishExec(const ExecRecord &e) {
    return done(run(QStringLiteral("UPDATE execs SET status = ?, finished_at = ?, exit_code = ?,"
                                   " duration_ms = ?, stdout_bytes = ?, stderr_bytes = ?,"
                                   " truncated = ?, stdout_preview = ?, stderr_preview = ?,"
                                   " error = ? WHERE id = ?"),
                    {e.status, e.finishedAt, e.exitCode, e.durationMs, e.stdoutBytes, e.stderrBytes,
                     e.truncated, e.stdoutPreview, e.stderrPreview, e.error, e.id}));
}

QList<ExecRecord> Store::execs(const QString &sandboxId, int limit, qint64 beforeId) const {
    QList<ExecRecord> out;
    auto q = run(QStringLiteral("SELECT %1 FROM execs WHERE sandbox_id = ? AND (? = 0 OR id < ?)"
                                " ORDER BY id DESC LIMIT ?")
                     .arg(kExecColumns),
                 {sandboxId, beforeId, beforeId, limit});
    while (q && q->next())
        out.append(execFrom(*q));
    return out;
}

Result<int> Store::interruptExecs(const QString &sandboxId, const QString &reason) {
    auto q = run(QStringLiteral("UPDATE execs SET status = 'interrupted', error = ?,"
                                " finished_at = ? WHERE status = 'running' AND"
                                " (? = '' OR sandbox_id = ?)"),
                 {reason, nowMs(), sandboxId, sandboxId});
    if (!q)
        return std::unexpected(q.error());
    return q->numRowsAffected();
}

Result<PruneCounts> Store::prune(qint64 cutoff, qint64 now) {
    Transaction tx(*this);
    if (auto ok = tx.begun(); !ok)
        return std::unexpected(ok.error());
    PruneCounts counts;
    const QString ended =
        QStringLiteral(" WHERE sandbox_id IN (SELECT id FROM sandboxes WHERE ended_at > 0 AND"
                       " ended_at < ?)");
    auto q = run(QStringLiteral("DELETE FROM execs") + ended, {cutoff});
    if (!q)
        return std::unexpected(q.error());
    counts.execs = q->numRowsAffected();
    q = run(QStringLiteral("DELETE FROM events") + ended, {cutoff});
    if (!q)
        return std::unexpected(q.error());
    counts.events = q->numRowsAffected();
    // Keys answer for 24 hours (idempotent()); older ones only take room.
    q = run(QStringLiteral("DELETE FROM idempotency WHERE created_at <= ?"),
            {now - 24 * 3600 * 1000ll});
    if (!q)
        return std::unexpected(q.error());
    counts.idempotencyKeys = q->numRowsAffected();
    if (auto ok = tx.commit(); !ok)
        return std::unexpected(ok.error());
    return counts;
}

Result<void> Store::addEvent(const QString &sandboxId, const QString &kind, const QString &detail) {
    return done(
        run(QStringLiteral("INSERT INTO events(sandbox_id, at, kind, detail) VALUES(?, ?, ?, ?)"),
            {sandboxId, nowMs(), kind, detail}));
}

} // namespace sandcastle
