// The schema, one migration per version. A migration is never edited once
// it has shipped: a change is a new entry at the end.
#include "migrations.h"

namespace sandcastle {

const QList<QStringList> &migrations() {
    static const QList<QStringList> steps = {
        // 1: the first record.
        {
            QStringLiteral("CREATE TABLE settings (key TEXT PRIMARY KEY, value TEXT NOT NULL)"),
            QStringLiteral("CREATE TABLE accounts ("
                           " id TEXT PRIMARY KEY, name TEXT NOT NULL,"
                           " balance_micros INTEGER NOT NULL DEFAULT 0,"
                           " created_at INTEGER NOT NULL)"),
            QStringLiteral("CREATE TABLE api_keys ("
                           " id TEXT PRIMARY KEY,"
                           " account_id TEXT NOT NULL REFERENCES accounts(id),"
                           " name TEXT NOT NULL, prefix TEXT NOT NULL,"
                           " hash TEXT NOT NULL UNIQUE,"
                           " created_at INTEGER NOT NULL, last_used_at INTEGER NOT NULL DEFAULT 0,"
                           " revoked_at INTEGER NOT NULL DEFAULT 0)"),
            QStringLiteral("CREATE TABLE sandboxes ("
                           " id TEXT PRIMARY KEY,"
                           " account_id TEXT NOT NULL REFERENCES accounts(id),"
                           " name TEXT NOT NULL, size TEXT NOT NULL,"
                           " vcpus INTEGER NOT NULL, memory_mib INTEGER NOT NULL,"
                           " disk_gib INTEGER NOT NULL,"
                           " status TEXT NOT NULL, status_reason TEXT NOT NULL DEFAULT '',"
                           " ending_status TEXT NOT NULL DEFAULT 'destroyed',"
                           " created_at INTEGER NOT NULL, expires_at INTEGER NOT NULL,"
                           " ended_at INTEGER NOT NULL DEFAULT 0,"
                           " timeout_minutes INTEGER NOT NULL,"
                           " rate_micros_per_hour INTEGER NOT NULL,"
                           " cost_micros INTEGER NOT NULL DEFAULT 0,"
                           " charged_until INTEGER NOT NULL,"
                           " boot_ms INTEGER NOT NULL DEFAULT 0)"),
            QStringLiteral("CREATE INDEX sandboxes_by_account"
                           " ON sandboxes(account_id, created_at DESC, id DESC)"),
            QStringLiteral("CREATE INDEX sandboxes_by_status ON sandboxes(status)"),
            QStringLiteral("CREATE TABLE execs ("
                           " id INTEGER PRIMARY KEY AUTOINCREMENT,"
                           " sandbox_id TEXT NOT NULL REFERENCES sandboxes(id),"
                           " command TEXT NOT NULL, cwd TEXT NOT NULL,"
                           " env_names TEXT NOT NULL, timeout_ms INTEGER NOT NULL,"
                           " status TEXT NOT NULL, started_at INTEGER NOT NULL,"
                           " finished_at INTEGER NOT NULL DEFAULT 0,"
                           " exit_code INTEGER NOT NULL DEFAULT 0,"
                           " duration_ms INTEGER NOT NULL DEFAULT 0,"
                           " stdout_bytes INTEGER NOT NULL DEFAULT 0,"
                           " stderr_bytes INTEGER NOT NULL DEFAULT 0,"
                           " truncated INTEGER NOT NULL DEFAULT 0,"
                           " stdout_preview TEXT NOT NULL DEFAULT '',"
                           " stderr_preview TEXT NOT NULL DEFAULT '',"
                           " error TEXT NOT NULL DEFAULT '')"),
            QStringLiteral("CREATE INDEX execs_by_sandbox ON execs(sandbox_id, id)"),
            QStringLiteral("CREATE INDEX execs_by_status ON execs(status)"),
            // Usage is one row per sandbox and minute (bucket), grants one
            // row each: small enough to keep, fine enough to chart.
            QStringLiteral("CREATE TABLE ledger ("
                           " id INTEGER PRIMARY KEY AUTOINCREMENT,"
                           " account_id TEXT NOT NULL REFERENCES accounts(id),"
                           " kind TEXT NOT NULL, sandbox_id TEXT NOT NULL DEFAULT '',"
                           " bucket INTEGER NOT NULL DEFAULT 0,"
                           " amount_micros INTEGER NOT NULL, note TEXT NOT NULL DEFAULT '',"
                           " created_at INTEGER NOT NULL)"),
            QStringLiteral("CREATE INDEX ledger_by_account ON ledger(account_id, id)"),
            QStringLiteral("CREATE INDEX ledger_by_bucket ON ledger(sandbox_id, bucket)"),
            QStringLiteral("CREATE TABLE idempotency ("
                           " account_id TEXT NOT NULL, key TEXT NOT NULL,"
                           " request_hash TEXT NOT NULL, sandbox_id TEXT NOT NULL,"
                           " created_at INTEGER NOT NULL, PRIMARY KEY (account_id, key))"),
            QStringLiteral("CREATE TABLE events ("
                           " id INTEGER PRIMARY KEY AUTOINCREMENT, sandbox_id TEXT NOT NULL,"
                           " at INTEGER NOT NULL, kind TEXT NOT NULL,"
                           " detail TEXT NOT NULL DEFAULT '')"),
            QStringLiteral("CREATE INDEX events_by_sandbox ON events(sandbox_id, id)"),
        },
        // 2: the network a sandbox has. Sandboxes from before had none.
        {
            QStringLiteral("ALTER TABLE sandboxes ADD COLUMN network TEXT NOT NULL DEFAULT 'none'"),
        },
        // 3: an exec keeps at most kStoredCommandBytes of its command, with
        // the whole command's length and SHA-256 (a command may be 1 MiB,
        // and rows are kept). Older rows are cut the same way; their hash
        // stays unknown ('').
        {
            QStringLiteral("ALTER TABLE execs ADD COLUMN command_bytes INTEGER NOT NULL DEFAULT 0"),
            QStringLiteral("ALTER TABLE execs ADD COLUMN command_sha256 TEXT NOT NULL DEFAULT ''"),
            QStringLiteral("UPDATE execs SET command_bytes = length(CAST(command AS BLOB))"),
            QStringLiteral("UPDATE execs SET command = CAST(substr(CAST(command AS BLOB), 1, 4096)"
                           " AS TEXT) WHERE command_bytes > 4096"),
        },
        // 4: a cap on billing (0: none), set when a sandbox is found dead:
        // when it died is unknown, so it is billed only what metering saw.
        {
            QStringLiteral("ALTER TABLE sandboxes ADD COLUMN bill_until INTEGER NOT NULL"
                           " DEFAULT 0"),
        },
    };
    return steps;
}

} // namespace sandcastle
