// Opening and migrating the record; settings, accounts, credit and keys.
// Sandboxes, execs and events are in sandboxstore.cpp.
#include "store.h"

#include "migrations.h"
#include "transaction.h"

#include <QCryptographicHash>
#include <QDateTime>
#include <QFile>
#include <QRandomGenerator>
#include <QSqlError>
#include <QSqlQuery>
#include <QUuid>

#include <limits>

namespace sandcastle {

using Kind = EngineError::Kind;

qint64 nowMs() {
    return QDateTime::currentMSecsSinceEpoch();
}

namespace {

QString randomBase32(int n) {
    static const char alphabet[] = "abcdefghijklmnopqrstuvwxyz234567";
    QString s;
    for (int i = 0; i < n; ++i)
        s += QLatin1Char(alphabet[QRandomGenerator::system()->bounded(32)]);
    return s;
}

// Keys are 200 random bits, so a fast hash is enough: there is nothing to
// guess, and lookups by hash stay an index probe.
QString hashSecret(const QString &secret) {
    return QString::fromLatin1(
        QCryptographicHash::hash(secret.toUtf8(), QCryptographicHash::Sha256).toHex());
}

constexpr qint64 kMsPerHour = 3600000;

} // namespace

Store::Store(QString path, QString connection)
    : path_(std::move(path))
    , connection_(std::move(connection)) {}

Store::~Store() {
    {
        QSqlDatabase d = QSqlDatabase::database(connection_, false);
        if (d.isOpen())
            d.close();
    }
    QSqlDatabase::removeDatabase(connection_);
}

QSqlDatabase Store::db() const {
    return QSqlDatabase::database(connection_, false);
}

Result<QSqlQuery> Store::run(const QString &sql, const QVariantList &binds) const {
    QSqlQuery q(db());
    if (!q.prepare(sql))
        return fail(Kind::Internal,
                    QStringLiteral("database: %1 (%2)").arg(q.lastError().text(), sql.left(60)));
    for (const QVariant &v : binds) {
        // A null QString binds as SQL NULL; the schema wants ''.
        if (v.typeId() == QMetaType::QString && v.toString().isNull())
            q.addBindValue(QStringLiteral(""));
        else
            q.addBindValue(v);
    }
    if (!q.exec()) {
        const QString text = q.lastError().text();
        // A full disk is the one database failure a user can act on:
        // SQLITE_FULL (13), as the driver reports sqlite3_errcode().
        if (q.lastError().nativeErrorCode() == QLatin1String("13"))
            return fail(Kind::NoSpace,
                        QStringLiteral("the database could not be written: the disk is full "
                                       "(%1); free space and retry")
                            .arg(path_));
        return fail(Kind::Internal, QStringLiteral("database: %1").arg(text));
    }
    return q;
}

Result<std::unique_ptr<Store>> Store::open(const QString &path) {
    const QString connection = QStringLiteral("store-") + QUuid::createUuid().toString();
    // SQLite gives the -wal and -shm files the database file's mode: make
    // it private before SQLite creates any of them.
    if (!QFile::exists(path)) {
        QFile f(path);
        // Created 0600: never readable by others, not even for a moment.
        if (f.open(QIODevice::WriteOnly | QIODevice::NewOnly, QFile::ReadOwner | QFile::WriteOwner))
            f.close();
    }
    std::unique_ptr<Store> store(new Store(path, connection));
    {
        QSqlDatabase d = QSqlDatabase::addDatabase(QStringLiteral("QSQLITE"), connection);
        d.setDatabaseName(path);
        d.setConnectOptions(QStringLiteral("QSQLITE_BUSY_TIMEOUT=5000"));
        if (!d.open())
            return fail(
                Kind::Unavailable,
                QStringLiteral("cannot open the database %1: %2").arg(path, d.lastError().text()));
    }
    // WAL: the service and the command line (keys, credit) share the file;
    // synchronous=NORMAL keeps every committed write across a crash of the
    // app (only a power cut can lose the last transactions).
    for (const char *pragma :
         {"PRAGMA journal_mode=WAL", "PRAGMA synchronous=NORMAL", "PRAGMA foreign_keys=ON"}) {
        if (auto r = store->run(QString::fromLatin1(pragma)); !r)
            return std::unexpected(r.error());
    }
    if (auto r = store->migrate(); !r)
        return std::unexpected(r.error());
    for (const QString &file : {path, path + QStringLiteral("-wal"), path + QStringLiteral("-shm")})
        QFile::setPermissions(file, QFile::ReadOwner | QFile::WriteOwner);
    return store;
}

int Store::latestVersion() {
    return int(migrations().size());
}

int Store::version() const {
    auto q = run(QStringLiteral("PRAGMA user_version"));
    return q && q->next() ? q->value(0).toInt() : -1;
}

Result<void> Store::migrate() {
    const int current = version();
    if (current > latestVersion())
        return fail(Kind::Unavailable,
                    QStringLiteral("the database %1 has schema version %2, newer than this "
                                   "Sandcastle understands (%3): run a newer Sandcastle or "
                                   "point SANDCASTLE_DATA_DIR elsewhere")
                        .arg(path_)
                        .arg(current)
                        .arg(latestVersion()));
    if (current < 0)
        return fail(Kind::Unavailable,
                    QStringLiteral("cannot read the schema version of %1").arg(path_));
    for (int v = current; v < latestVersion(); ++v) {
        Transaction t(*this);
        if (auto ok = t.begun(); !ok)
            return ok;
        // Another process may have migrated while this one waited.
        if (version() > v)
            continue;
        for (const QString &sql : migrations().at(v)) {
            if (auto r = run(sql); !r)
                return fail(Kind::Internal, QStringLiteral("migration to version %1 failed: %2")
                                                .arg(v + 1)
                                                .arg(r.error().message));
        }
        if (auto r = run(QStringLiteral("PRAGMA user_version=%1").arg(v + 1)); !r)
            return std::unexpected(r.error());
        if (auto ok = t.commit(); !ok)
            return ok;
    }
    return {};
}

QHash<QString, QString> Store::settings() const {
    QHash<QString, QString> out;
    if (auto q = run(QStringLiteral("SELECT key, value FROM settings"))) {
        while (q->next())
            out.insert(q->value(0).toString(), q->value(1).toString());
    }
    return out;
}

Result<void> Store::setSetting(const QString &key, const QString &value) {
    auto q = run(QStringLiteral("INSERT INTO settings(key, value) VALUES(?, ?)"
                                " ON CONFLICT(key) DO UPDATE SET value = excluded.value"),
                 {key, value});
    if (!q)
        return std::unexpected(q.error());
    return {};
}

Result<void> Store::removeSetting(const QString &key) {
    auto q = run(QStringLiteral("DELETE FROM settings WHERE key = ?"), {key});
    if (!q)
        return std::unexpected(q.error());
    return {};
}

namespace {
AccountRecord accountFrom(const QSqlQuery &q) {
    return {q.value(0).toString(), q.value(1).toString(), q.value(2).toLongLong(),
            q.value(3).toLongLong()};
}
const QString kAccountColumns = QStringLiteral("id, name, balance_micros, created_at");
} // namespace

Result<AccountRecord> Store::createAccount(const QString &name, qint64 creditMicros) {
    Transaction t(*this);
    if (auto ok = t.begun(); !ok)
        return std::unexpected(ok.error());
    auto a = insertAccount(name, creditMicros);
    if (!a)
        return a;
    if (auto ok = t.commit(); !ok)
        return std::unexpected(ok.error());
    return a;
}

Result<AccountRecord> Store::insertAccount(const QString &name, qint64 creditMicros) {
    AccountRecord a{QStringLiteral("acct_") + randomBase32(12), name, 0, nowMs()};
    if (auto q = run(QStringLiteral("INSERT INTO accounts(id, name, balance_micros, created_at)"
                                    " VALUES(?, ?, 0, ?)"),
                     {a.id, a.name, a.createdAt});
        !q)
        return std::unexpected(q.error());
    if (creditMicros != 0) {
        auto balance = addCreditIn(a.id, creditMicros, QStringLiteral("initial credit"));
        if (!balance)
            return std::unexpected(balance.error());
        a.balanceMicros = *balance;
    }
    return a;
}

Result<std::optional<std::pair<KeyRecord, QString>>>
Store::ensureFirstAccount(const QString &name, qint64 creditMicros) {
    // createAccount opens a transaction of its own and SQLite has no
    // nested ones: this checks and makes account, credit and key in one.
    Transaction t(*this);
    if (auto ok = t.begun(); !ok)
        return std::unexpected(ok.error());
    auto count = run(QStringLiteral("SELECT COUNT(*) FROM accounts"));
    if (!count || !count->next())
        return std::unexpected(
            count ? EngineError{Kind::Internal, QStringLiteral("cannot count accounts")}
                  : count.error());
    if (count->value(0).toLongLong() > 0)
        return std::nullopt;
    auto account = insertAccount(name, creditMicros);
    if (!account)
        return std::unexpected(account.error());
    auto key = insertKey(account->id, QStringLiteral("first key"));
    if (!key)
        return std::unexpected(key.error());
    if (auto ok = t.commit(); !ok)
        return std::unexpected(ok.error());
    return std::optional(*key);
}

std::optional<AccountRecord> Store::account(const QString &id) const {
    auto q = run(QStringLiteral("SELECT %1 FROM accounts WHERE id = ?").arg(kAccountColumns), {id});
    if (!q || !q->next())
        return std::nullopt;
    return accountFrom(*q);
}

QList<AccountRecord> Store::accounts() const {
    QList<AccountRecord> out;
    if (auto q = run(
            QStringLiteral("SELECT %1 FROM accounts ORDER BY created_at").arg(kAccountColumns))) {
        while (q->next())
            out.append(accountFrom(*q));
    }
    return out;
}

Result<qint64> Store::addCredit(const QString &accountId, qint64 micros, const QString &note) {
    Transaction t(*this);
    if (auto ok = t.begun(); !ok)
        return std::unexpected(ok.error());
    auto balance = addCreditIn(accountId, micros, note);
    if (!balance)
        return balance;
    if (auto ok = t.commit(); !ok)
        return std::unexpected(ok.error());
    return balance;
}

Result<qint64> Store::addCreditIn(const QString &accountId, qint64 micros, const QString &note) {
    if (!account(accountId))
        return fail(Kind::NotFound, QStringLiteral("no account %1").arg(accountId));
    auto up = run(QStringLiteral("UPDATE accounts SET balance_micros = balance_micros + ?"
                                 " WHERE id = ?"),
                  {micros, accountId});
    if (!up)
        return std::unexpected(up.error());
    auto row = run(QStringLiteral("INSERT INTO ledger(account_id, kind, amount_micros, note,"
                                  " created_at) VALUES(?, 'grant', ?, ?, ?)"),
                   {accountId, micros, note, nowMs()});
    if (!row)
        return std::unexpected(row.error());
    auto after = account(accountId);
    if (!after)
        return fail(Kind::Internal, QStringLiteral("account %1 vanished").arg(accountId));
    return after->balanceMicros;
}

QList<LedgerEntry> Store::ledger(const QString &accountId, int limit) const {
    QList<LedgerEntry> out;
    auto q = run(QStringLiteral("SELECT id, account_id, kind, sandbox_id, amount_micros, note,"
                                " created_at FROM ledger WHERE account_id = ?"
                                " ORDER BY id DESC LIMIT ?"),
                 {accountId, limit});
    while (q && q->next())
        out.append({q->value(0).toLongLong(), q->value(1).toString(), q->value(2).toString(),
                    q->value(3).toString(), q->value(4).toLongLong(), q->value(5).toString(),
                    q->value(6).toLongLong()});
    return out;
}

Result<QList<ChargeOutcome>> Store::meter(qint64 now) {
    Transaction t(*this);
    if (auto ok = t.begun(); !ok)
        return std::unexpected(ok.error());
    auto out = meterIn(now, {});
    if (!out)
        return out;
    if (auto ok = t.commit(); !ok)
        return std::unexpected(ok.error());
    return out;
}

Result<QList<ChargeOutcome>> Store::meterIn(qint64 now, const QString &onlyId) {
    QHash<QString, qint64> balances;
    auto live = run(QStringLiteral("SELECT id, account_id, created_at, rate_micros_per_hour,"
                                   " cost_micros, charged_until, expires_at, bill_until"
                                   " FROM sandboxes"
                                   " WHERE status IN ('creating', 'running', 'stopping')"
                                   " AND (? = '' OR id = ?)"),
                    {onlyId, onlyId});
    if (!live)
        return std::unexpected(live.error());
    while (live->next()) {
        const QString id = live->value(0).toString();
        const QString accountId = live->value(1).toString();
        const qint64 createdAt = live->value(2).toLongLong();
        const qint64 rate = live->value(3).toLongLong();
        const qint64 cost = live->value(4).toLongLong();
        // Time past the expiry is never billed (e.g. when the app was down),
        // nor past the cap of a sandbox found dead.
        const qint64 cap = live->value(7).toLongLong();
        const qint64 upTo = std::min(
            {now, live->value(6).toLongLong(), cap > 0 ? cap : std::numeric_limits<qint64>::max()});
        if (upTo <= live->value(5).toLongLong())
            continue;
        if (!balances.contains(accountId)) {
            auto account = this->account(accountId);
            if (!account)
                return fail(Kind::Internal,
                            QStringLiteral("sandbox %1 has no account %2").arg(id, accountId));
            balances.insert(accountId, account->balanceMicros);
        }
        // The cost is computed from the start each time, so rounding never
        // accumulates; what the balance cannot cover is not billed.
        const qint64 due = std::max<qint64>(0, rate * (upTo - createdAt) / kMsPerHour - cost);
        const qint64 charge = std::min(due, std::max<qint64>(0, balances[accountId]));
        balances[accountId] -= charge;
        const qint64 bucket = upTo / 60000;
        Result<QSqlQuery> ok =
            run(QStringLiteral("UPDATE sandboxes SET cost_micros = cost_micros + ?,"
                               " charged_until = ? WHERE id = ?"),
                {charge, upTo, id});
        if (ok && charge > 0) {
            ok = run(QStringLiteral("UPDATE ledger SET amount_micros = amount_micros - ?"
                                    " WHERE sandbox_id = ? AND bucket = ? AND kind = 'usage'"),
                     {charge, id, bucket});
            if (ok && ok->numRowsAffected() == 0)
                ok = run(QStringLiteral("INSERT INTO ledger(account_id, kind, sandbox_id, bucket,"
                                        " amount_micros, created_at)"
                                        " VALUES(?, 'usage', ?, ?, ?, ?)"),
                         {accountId, id, bucket, -charge, upTo});
            if (ok)
                ok = run(QStringLiteral("UPDATE accounts SET balance_micros = balance_micros - ?"
                                        " WHERE id = ?"),
                         {charge, accountId});
        }
        if (!ok)
            return std::unexpected(ok.error());
    }
    QList<ChargeOutcome> out;
    for (auto it = balances.begin(); it != balances.end(); ++it)
        out.append({it.key(), it.value()});
    return out;
}

namespace {
KeyRecord keyFrom(const QSqlQuery &q) {
    return {q.value(0).toString(),  q.value(1).toString(),   q.value(2).toString(),
            q.value(3).toString(),  q.value(4).toLongLong(), q.value(5).toLongLong(),
            q.value(6).toLongLong()};
}
const QString kKeyColumns =
    QStringLiteral("id, account_id, name, prefix, created_at, last_used_at, revoked_at");
} // namespace

Result<std::pair<KeyRecord, QString>> Store::createKey(const QString &accountId,
                                                       const QString &name) {
    if (!account(accountId))
        return fail(Kind::NotFound, QStringLiteral("no account %1").arg(accountId));
    return insertKey(accountId, name);
}

Result<std::pair<KeyRecord, QString>> Store::insertKey(const QString &accountId,
                                                       const QString &name) {
    const QString secret = QStringLiteral("sc_") + randomBase32(40);
    KeyRecord k{
        QStringLiteral("key_") + randomBase32(12), accountId, name, secret.left(10), nowMs(), 0, 0};
    auto q = run(QStringLiteral("INSERT INTO api_keys(id, account_id, name, prefix, hash,"
                                " created_at) VALUES(?, ?, ?, ?, ?, ?)"),
                 {k.id, k.accountId, k.name, k.prefix, hashSecret(secret), k.createdAt});
    if (!q)
        return std::unexpected(q.error());
    return std::pair{k, secret};
}

QList<KeyRecord> Store::keys() const {
    QList<KeyRecord> out;
    auto q = run(QStringLiteral("SELECT %1 FROM api_keys ORDER BY created_at").arg(kKeyColumns));
    while (q && q->next())
        out.append(keyFrom(*q));
    return out;
}

Result<KeyRecord> Store::revokeKey(const QString &idOrPrefix) {
    auto q =
        run(QStringLiteral("SELECT %1 FROM api_keys WHERE id = ? OR prefix = ?").arg(kKeyColumns),
            {idOrPrefix, idOrPrefix});
    if (!q)
        return std::unexpected(q.error());
    QList<KeyRecord> found;
    while (q->next())
        found.append(keyFrom(*q));
    if (found.isEmpty())
        return fail(Kind::NotFound,
                    QStringLiteral("no key %1: `sandcastle keys list` shows them").arg(idOrPrefix));
    if (found.size() > 1)
        return fail(Kind::Conflict,
                    QStringLiteral("%1 matches several keys: use the key id").arg(idOrPrefix));
    KeyRecord k = found.first();
    if (k.revokedAt == 0) {
        k.revokedAt = nowMs();
        if (auto up = run(QStringLiteral("UPDATE api_keys SET revoked_at = ? WHERE id = ?"),
                          {k.revokedAt, k.id});
            !up)
            return std::unexpected(up.error());
    }
    return k;
}

std::optional<KeyRecord> Store::authenticate(const QString &secret) {
    if (!secret.startsWith(QLatin1String("sc_")) || secret.size() > 200)
        return std::nullopt;
    auto q = run(QStringLiteral("SELECT %1 FROM api_keys WHERE hash = ? AND revoked_at = 0")
                     .arg(kKeyColumns),
                 {hashSecret(secret)});
    if (!q || !q->next())
        return std::nullopt;
    KeyRecord k = keyFrom(*q);
    // Last use is for the key list; a write per request would be waste.
    const qint64 now = nowMs();
    if (now - k.lastUsedAt > 60000) {
        run(QStringLiteral("UPDATE api_keys SET last_used_at = ? WHERE id = ?"), {now, k.id});
        k.lastUsedAt = now;
    }
    return k;
}

} // namespace sandcastle
