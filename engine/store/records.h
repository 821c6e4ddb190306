// The rows of the record (SQLite), as the rest of the engine sees them.
// Times are milliseconds since the Unix epoch (UTC); money is in
// micro-units of the account's currency (1 USD = 1,000,000).
#pragma once

#include <QString>
#include <QStringList>

#include <optional>

namespace sandcastle {

enum class SandboxStatus { Creating, Running, Stopping, Destroyed, Expired, Error };

QString statusName(SandboxStatus status);
std::optional<SandboxStatus> statusFromName(const QString &name);
/// Creating, running and stopping sandboxes hold a VM (and count against the cap).
bool isLive(SandboxStatus status);

struct AccountRecord {
    QString id;
    QString name;
    qint64 balanceMicros = 0;
    qint64 createdAt = 0;
};

struct KeyRecord {
    QString id; // public handle, e.g. key_ab12cd34; never the secret
    QString accountId;
    QString name;
    QString prefix; // first characters of the secret, to recognise it
    qint64 createdAt = 0;
    qint64 lastUsedAt = 0;
    qint64 revokedAt = 0;
};

struct SandboxRecord {
    QString id;
    QString accountId;
    QString name;
    QString size;
    int vcpus = 0;
    int memoryMiB = 0;
    int diskGiB = 0;
    QString network = QStringLiteral("internet"); // "internet" or "none"
    SandboxStatus status = SandboxStatus::Creating;
    QString statusReason; // why it ended, when it did not end by DELETE
    // While stopping: the status it ends in (expired, destroyed or error),
    // so a restart in the middle finishes the job the same way.
    SandboxStatus endingStatus = SandboxStatus::Destroyed;
    qint64 createdAt = 0;
    qint64 expiresAt = 0;
    qint64 endedAt = 0; // 0 while live
    int timeoutMinutes = 0;
    qint64 rateMicrosPerHour = 0;
    qint64 costMicros = 0;
    qint64 chargedUntil = 0; // metering has billed up to this moment
    qint64 bootMs = 0;
};

/// The most of a command the record keeps (UTF-8 bytes, cut at a character).
constexpr int kStoredCommandBytes = 4096;

struct ExecRecord {
    qint64 id = 0;
    QString sandboxId;
    QString command;         // at most kStoredCommandBytes of it
    qint64 commandBytes = 0; // the whole command's length in UTF-8
    QString commandSha256;   // of the whole command (hex); '' for rows before v3
    QString cwd;
    QStringList envNames; // names only: values are secrets and never stored
    int timeoutMs = 0;
    QString status; // running, finished, failed, interrupted
    qint64 startedAt = 0;
    qint64 finishedAt = 0;
    int exitCode = 0;
    qint64 durationMs = 0;
    qint64 stdoutBytes = 0;
    qint64 stderrBytes = 0;
    bool truncated = false;
    QString stdoutPreview; // the tail of each stream, for the command log
    QString stderrPreview;
    QString error; // why it did not finish (failed, interrupted)
};

struct LedgerEntry {
    qint64 id = 0;
    QString accountId;
    QString kind; // grant, usage
    QString sandboxId;
    qint64 amountMicros = 0; // grants positive, usage negative
    QString note;
    qint64 at = 0;
};

/// What one metering pass did to one account.
struct ChargeOutcome {
    QString accountId;
    qint64 balanceMicros = 0;
};

} // namespace sandcastle
