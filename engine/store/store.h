// The record: one SQLite database (WAL) holding accounts, API keys,
// sandboxes, every exec, the credit ledger, idempotency keys, lifecycle
// events and settings. Synchronous and single-threaded (the thread that
// opened it): each call is one short transaction on a local file.
#pragma once

#include "../errors.h"
#include "records.h"

#include <QHash>
#include <QList>
#include <QSqlDatabase>
#include <QVariantList>

#include <memory>

class QSqlQuery;

namespace sandcastle {

class Transaction;

struct PruneCounts {
    int execs = 0;
    int events = 0;
    int idempotencyKeys = 0;
};

class Store {
public:
    /// Opens (creating if needed) and migrates the database at `path`.
    /// Refuses a database written by a newer Sandcastle.
    static Result<std::unique_ptr<Store>> open(const QString &path);
    ~Store();
    Store(const Store &) = delete;
    Store &operator=(const Store &) = delete;

    /// The schema version this build writes (PRAGMA user_version).
    static int latestVersion();
    int version() const;
    QString path() const { return path_; }

    // Settings: raw strings; Settings (settings.h) parses and validates.
    QHash<QString, QString> settings() const;
    Result<void> setSetting(const QString &key, const QString &value);
    Result<void> removeSetting(const QString &key);

    // Accounts and credit.
    /// The account and its first credit, in one transaction.
    Result<AccountRecord> createAccount(const QString &name, qint64 creditMicros);
    /// On a record without accounts, makes one with `creditMicros` and a
    /// key, all or nothing; returns the key and its secret. Nothing when an
    /// account exists (another process may have made it meanwhile).
    Result<std::optional<std::pair<KeyRecord, QString>>> ensureFirstAccount(const QString &name,
                                                                            qint64 creditMicros);
    std::optional<AccountRecord> account(const QString &id) const;
    QList<AccountRecord> accounts() const;
    /// Adds (or with a negative amount, removes) credit; a ledger entry each.
    Result<qint64> addCredit(const QString &accountId, qint64 micros, const QString &note);
    QList<LedgerEntry> ledger(const QString &accountId, int limit) const;
    /// Bills every live sandbox up to `now` (at most to its expiry) at its
    /// rate, never past an account's balance, in one transaction. Returns
    /// each touched account.
    Result<QList<ChargeOutcome>> meter(qint64 now);

    // API keys: only a SHA-256 of each secret is stored.
    /// Returns the record and the secret, which is shown once and not kept.
    Result<std::pair<KeyRecord, QString>> createKey(const QString &accountId, const QString &name);
    QList<KeyRecord> keys() const;
    /// Revokes by key id (key_...) or by the secret's prefix.
    Result<KeyRecord> revokeKey(const QString &idOrPrefix);
    /// The live key with this secret, if any.
    std::optional<KeyRecord> authenticate(const QString &secret);

    // Sandboxes.
    /// Inserts a new sandbox (and its idempotency key, when given) at once.
    Result<void> insertSandbox(const SandboxRecord &record, const QString &idempotencyKey = {},
                               const QString &requestHash = {});
    std::optional<SandboxRecord> sandbox(const QString &id) const;
    /// An error is an error, never an empty list: the reconciler destroys
    /// VMs the record does not know.
    Result<QList<SandboxRecord>> liveSandboxes() const;
    /// Sandboxes holding a VM, of one account (empty: of all).
    Result<int> liveCount(const QString &accountId) const;
    /// Newest first; `startingAfter` is the id of the last row of the
    /// previous page. Returns up to `limit` rows.
    Result<QList<SandboxRecord>> listSandboxes(const QString &accountId, int limit,
                                               const QString &startingAfter,
                                               std::optional<SandboxStatus> status) const;
    /// From creating to running; Conflict when it is no longer creating.
    Result<void> setRunning(const QString &id, qint64 bootMs);
    /// While it is creating: what the create waits on (status_reason).
    /// True when that changed the record.
    Result<bool> setCreatingReason(const QString &id, const QString &what);
    /// Marks the sandbox stopping (it will end as `ending`) with a reason.
    /// Without `billToEnd` (found dead: when it died is unknown) it is never
    /// billed past what metering had seen, whoever meters next.
    Result<void> setStopping(const QString &id, SandboxStatus ending, const QString &reason,
                             bool billToEnd = true);
    /// Final status, billing this sandbox up to `endedAt` (or its cap)
    /// first, in one transaction.
    Result<void> setEnded(const QString &id, SandboxStatus status, const QString &reason,
                          qint64 endedAt);
    Result<void> setExpiresAt(const QString &id, qint64 expiresAt, int timeoutMinutes);
    /// The sandbox created with this idempotency key (and the hash of the
    /// request that created it) within the last 24 hours.
    std::optional<std::pair<QString, QString>> idempotent(const QString &accountId,
                                                          const QString &key, qint64 now) const;

    // Execs.
    Result<qint64> beginExec(const ExecRecord &record);
    Result<void> finishExec(const ExecRecord &record);
    QList<ExecRecord> execs(const QString &sandboxId, int limit, qint64 beforeId = 0) const;
    /// Execs still marked running (after a crash, or when their sandbox
    /// went away) become interrupted with `reason`.
    Result<int> interruptExecs(const QString &sandboxId, const QString &reason);

    /// Retention: the commands and events of sandboxes that ended before
    /// `cutoff`, and idempotency keys older than a day at `now`, are
    /// deleted. Sandbox rows and the ledger are kept, so totals stay exact.
    Result<PruneCounts> prune(qint64 cutoff, qint64 now);

    // Lifecycle events (created, running, extended, expired, ...).
    Result<void> addEvent(const QString &sandboxId, const QString &kind,
                          const QString &detail = {});

    // Reports for the GUI (reports.cpp).
    /// Every account's sandboxes, newest first, up to `limit`.
    QList<SandboxRecord> recentSandboxes(int limit) const;
    /// Usage charged per minute (bucket: ms since the epoch / 60000, amount
    /// positive) for an account since `since` ms, oldest first.
    QList<std::pair<qint64, qint64>> usageByMinute(const QString &accountId, qint64 since) const;

private:
    friend class Transaction;
    explicit Store(QString path, QString connection);
    Result<void> migrate();
    Result<QSqlQuery> run(const QString &sql, const QVariantList &binds = {}) const;
    /// meter()'s work inside the caller's transaction; `onlyId`: one sandbox.
    Result<QList<ChargeOutcome>> meterIn(qint64 now, const QString &onlyId);
    Result<qint64> addCreditIn(const QString &accountId, qint64 micros, const QString &note);
    Result<AccountRecord> insertAccount(const QString &name, qint64 creditMicros);
    Result<std::pair<KeyRecord, QString>> insertKey(const QString &accountId, const QString &name);
    QSqlDatabase db() const;

    QString path_;
    QString connection_;
};

/// The current time as the record stores it.
qint64 nowMs();

} // namespace sandcastle
