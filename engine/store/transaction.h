// The record's transactions (internal to store/).
#pragma once

#include "store.h"

#include <QSqlQuery>

namespace sandcastle {

/// BEGIN IMMEDIATE ... COMMIT; rolled back unless committed. IMMEDIATE
/// takes the write lock at the start, so a transaction that reads and then
/// writes cannot fail half-way because the command line wrote in between
/// (the busy timeout waits for the lock instead).
class Transaction {
public:
    explicit Transaction(const Store &store)
        : store_(store)
        , begun_(store.run(QStringLiteral("BEGIN IMMEDIATE"))) {}
    ~Transaction() {
        if (begun_ && !done_)
            store_.run(QStringLiteral("ROLLBACK"));
    }
    Result<void> begun() const {
        if (!begun_)
            return std::unexpected(begun_.error());
        return {};
    }
    Result<void> commit() {
        done_ = true;
        if (auto r = store_.run(QStringLiteral("COMMIT")); !r) {
            store_.run(QStringLiteral("ROLLBACK"));
            return std::unexpected(r.error());
        }
        return {};
    }

private:
    const Store &store_;
    Result<QSqlQuery> begun_;
    bool done_ = false;
};

} // namespace sandcastle
