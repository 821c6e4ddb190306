// Read-only queries for the GUI: across accounts, and the ledger's usage
// rows summed per minute for the spend chart.
#include "store.h"

#include <QSqlQuery>

namespace sandcastle {

QList<SandboxRecord> Store::recentSandboxes(int limit) const {
    QList<SandboxRecord> out;
    QStringList ids;
    auto q = run(QStringLiteral("SELECT id FROM sandboxes ORDER BY created_at DESC, id DESC"
                                " LIMIT ?"),
                 {limit});
    while (q && q->next())
        ids << q->value(0).toString();
    // One row read each keeps the column mapping in one place (sandbox());
    // a local file and a few hundred rows at most.
    for (const QString &id : ids) {
        if (auto r = sandbox(id))
            out.append(*r);
    }
    return out;
}

QList<std::pair<qint64, qint64>> Store::usageByMinute(const QString &accountId,
                                                      qint64 since) const {
    QList<std::pair<qint64, qint64>> out;
    auto q = run(QStringLiteral("SELECT bucket, -SUM(amount_micros) FROM ledger"
                                " WHERE account_id = ? AND kind = 'usage' AND bucket >= ?"
                                " GROUP BY bucket ORDER BY bucket"),
                 {accountId, since / 60000});
    while (q && q->next())
        out.append({q->value(0).toLongLong(), q->value(1).toLongLong()});
    return out;
}

} // namespace sandcastle
