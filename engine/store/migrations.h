// The database schema as a list of migrations: entry i takes a database
// from version i to version i + 1 (PRAGMA user_version).
#pragma once

#include <QList>
#include <QStringList>

namespace sandcastle {

const QList<QStringList> &migrations();

} // namespace sandcastle
