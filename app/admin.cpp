// Administration of the record from the command line: keys, credit,
// accounts and settings. Works whether or not the service runs (SQLite in
// WAL mode takes both); settings take effect at the service's next start.
#include "commands.h"
#include "service/settings.h"
#include "store/store.h"

#include <QDateTime>
#include <QDir>
#include <QTextStream>

#include "sandbox/engine.h"

namespace sandcastle {

namespace {

QTextStream out(stdout);
QTextStream err(stderr);

QString when(qint64 ms) {
    return ms ? QDateTime::fromMSecsSinceEpoch(ms, Qt::UTC).toString(Qt::ISODate)
              : QStringLiteral("-");
}

int usage(const QString &text) {
    err << "usage: sandcastle " << text << Qt::endl;
    return 2;
}

int failed(const EngineError &e) {
    err << "sandcastle: " << e.message << Qt::endl;
    return 1;
}

Result<QString> accountOf(Store &store, const QString &given) {
    if (!given.isEmpty()) {
        if (!store.account(given))
            return fail(EngineError::Kind::NotFound,
                        QStringLiteral("no account %1 (`sandcastle accounts list`)").arg(given));
        return given;
    }
    const auto all = store.accounts();
    if (all.isEmpty())
        return fail(EngineError::Kind::NotFound,
                    QStringLiteral("no account yet: `sandcastle serve` creates the first one"));
    return all.first().id;
}

int keys(Store &store, const QStringList &args, const QString &name, const QString &account) {
    const QString verb = args.value(0);
    if (verb == QLatin1String("create")) {
        auto id = accountOf(store, account);
        if (!id)
            return failed(id.error());
        auto key = store.createKey(*id, name.isEmpty() ? QStringLiteral("cli") : name);
        if (!key)
            return failed(key.error());
        out << "created " << key->first.id << " for " << *id << Qt::endl;
        out << "API key (shown once, keep it): " << key->second << Qt::endl;
        return 0;
    }
    if (verb == QLatin1String("list")) {
        for (const KeyRecord &k : store.keys())
            out << k.id << "  " << k.prefix << "...  account " << k.accountId << "  \"" << k.name
                << "\"  created " << when(k.createdAt) << "  last used " << when(k.lastUsedAt)
                << (k.revokedAt ? QStringLiteral("  REVOKED ") + when(k.revokedAt) : QString())
                << Qt::endl;
        return 0;
    }
    if (verb == QLatin1String("revoke") && args.size() == 2) {
        auto k = store.revokeKey(args.at(1));
        if (!k)
            return failed(k.error());
        out << "revoked " << k->id << " (" << k->prefix << "...)" << Qt::endl;
        return 0;
    }
    return usage(QStringLiteral("keys create [--name N] [--account ID] | keys list | keys "
                                "revoke KEY_ID"));
}

int credit(Store &store, const QStringList &args, const QString &account) {
    auto id = accountOf(store, account);
    if (!id)
        return failed(id.error());
    const QString verb = args.value(0);
    if (verb == QLatin1String("show") || verb.isEmpty()) {
        out << *id << " credit " << formatMoney(store.account(*id)->balanceMicros) << " USD"
            << Qt::endl;
        return 0;
    }
    if (verb == QLatin1String("add") && args.size() == 2) {
        auto amount = parseMoney(args.at(1));
        if (!amount)
            return failed(amount.error());
        auto balance = store.addCredit(*id, *amount, QStringLiteral("added from the command line"));
        if (!balance)
            return failed(balance.error());
        out << *id << " credit " << formatMoney(*balance) << " USD" << Qt::endl;
        return 0;
    }
    return usage(QStringLiteral("credit show | credit add AMOUNT [--account ID]"));
}

int accounts(Store &store, const QStringList &args, const QString &name) {
    const QString verb = args.value(0);
    if (verb == QLatin1String("list") || verb.isEmpty()) {
        for (const AccountRecord &a : store.accounts())
            out << a.id << "  \"" << a.name << "\"  credit " << formatMoney(a.balanceMicros)
                << "  live sandboxes " << store.liveCount(a.id).value_or(-1) << Qt::endl;
        return 0;
    }
    if (verb == QLatin1String("create")) {
        auto a = store.createAccount(name.isEmpty() ? QStringLiteral("account") : name, 0);
        auto key =
            a ? store.createKey(a->id, QStringLiteral("first key")) : std::unexpected(a.error());
        if (!key)
            return failed(key.error());
        out << "created account " << a->id << " with no credit (`sandcastle credit add AMOUNT "
            << "--account " << a->id << "`)" << Qt::endl;
        out << "API key (shown once, keep it): " << key->second << Qt::endl;
        return 0;
    }
    return usage(QStringLiteral("accounts list | accounts create [--name N]"));
}

int config(Store &store, const QStringList &args) {
    const QString verb = args.value(0);
    Settings current = Settings::fromStored(store.settings());
    if (verb == QLatin1String("list") || verb.isEmpty()) {
        for (const auto &[key, help] : Settings::describe())
            out << key << " = " << current.value(key) << "    # " << help << Qt::endl;
        return 0;
    }
    if (verb == QLatin1String("get") && args.size() == 2) {
        out << current.value(args.at(1)) << Qt::endl;
        return 0;
    }
    if (verb == QLatin1String("set") && args.size() == 3) {
        if (auto ok = current.set(args.at(1), args.at(2)); !ok)
            return failed(ok.error());
        if (auto ok = store.setSetting(args.at(1), current.value(args.at(1))); !ok)
            return failed(ok.error());
        out << args.at(1) << " = " << current.value(args.at(1))
            << " (takes effect at the next start of the service)" << Qt::endl;
        return 0;
    }
    if (verb == QLatin1String("unset") && args.size() == 2) {
        if (auto ok = store.removeSetting(args.at(1)); !ok)
            return failed(ok.error());
        return 0;
    }
    return usage(QStringLiteral("config list | config get KEY | config set KEY VALUE | config "
                                "unset KEY"));
}

} // namespace

int runAdmin(const QString &command, const QStringList &args, const QString &name,
             const QString &account) {
    const QString dir = EngineConfig::defaults().dataDir;
    if (!QDir().mkpath(dir)) {
        err << "sandcastle: cannot create the data dir " << dir << Qt::endl;
        return 1;
    }
    auto store = Store::open(dir + QStringLiteral("/sandcastle.db"));
    if (!store)
        return failed(store.error());
    if (command == QLatin1String("keys"))
        return keys(**store, args, name, account);
    if (command == QLatin1String("credit"))
        return credit(**store, args, account);
    if (command == QLatin1String("accounts"))
        return accounts(**store, args, name);
    return config(**store, args);
}

} // namespace sandcastle
