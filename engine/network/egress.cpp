#include "egress.h"

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QHostAddress>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLockFile>
#include <QMutex>
#include <QProcess>
#include <QRegularExpression>
#include <QSaveFile>
#include <QtDebug>

#include <algorithm>
#include <csignal>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

namespace sandcastle::egress {

using Kind = EngineError::Kind;

QStringList blockedRanges4() {
    // "This network", private, carrier-grade NAT, loopback, link-local (the
    // cloud metadata address 169.254.169.254 included), multicast and reserved.
    return {QStringLiteral("0.0.0.0/8"),      QStringLiteral("10.0.0.0/8"),
            QStringLiteral("100.64.0.0/10"),  QStringLiteral("127.0.0.0/8"),
            QStringLiteral("169.254.0.0/16"), QStringLiteral("172.16.0.0/12"),
            QStringLiteral("192.168.0.0/16"), QStringLiteral("224.0.0.0/3")};
}

QStringList blockedRanges6() {
    return {QStringLiteral("::1/128"), QStringLiteral("::ffff:0:0/96"), QStringLiteral("fc00::/7"),
            QStringLiteral("fe80::/10"), QStringLiteral("ff00::/8")};
}

QList<int> blockedTcpPorts() {
    return {25, 465, 587}; // SMTP, SMTPS, submission: no spam from sandboxes
}

QString hostRuleset(uint uid, const QStringList &dnsServers) {
    QStringList ports;
    for (int p : blockedTcpPorts())
        ports << QString::number(p);
    // The table is deleted (created first, so that there is one to delete)
    // and built again in one transaction: no packet sees a half-loaded
    // filter, and nothing added to the old one by hand (a rule, a chain, a
    // set element) survives. `dnsServers` is every service's list
    // (kResolverList), so no service's load drops another's resolvers.
    QString rules = QStringLiteral("add table inet sandcastle\n"
                                   "delete table inet sandcastle\n"
                                   "add table inet sandcastle\n"
                                   "add set inet sandcastle dns4 { type ipv4_addr; }\n"
                                   "add chain inet sandcastle output { type filter hook output "
                                   "priority 0; policy accept; }\n"
                                   "add chain inet sandcastle sandbox\n");
    if (!dnsServers.isEmpty())
        rules += QStringLiteral("add element inet sandcastle dns4 { %1 }\n")
                     .arg(dnsServers.join(QStringLiteral(", ")));
    rules +=
        QStringLiteral("add rule inet sandcastle output meta skuid %1 jump sandbox\n").arg(uid);
    const QString chain = QStringLiteral("add rule inet sandcastle sandbox ");
    const QString reject = QStringLiteral(" counter reject with icmpx admin-prohibited\n");
    rules += chain + QStringLiteral("ip daddr @dns4 udp dport 53 counter accept\n");
    rules += chain + QStringLiteral("ip daddr @dns4 tcp dport 53 counter accept\n");
    // Every address of the host, whichever interface it is on now.
    rules += chain + QStringLiteral("fib daddr type local") + reject;
    rules += chain + QStringLiteral("ip daddr { %1 }").arg(blockedRanges4().join(", ")) + reject;
    rules += chain + QStringLiteral("ip6 daddr { %1 }").arg(blockedRanges6().join(", ")) + reject;
    rules += chain + QStringLiteral("tcp dport { %1 } counter reject with tcp reset\n")
                         .arg(ports.join(QStringLiteral(", ")));
    return rules;
}

QStringList nameServers(const QString &resolvConf) {
    QFile f(resolvConf);
    QStringList out;
    if (!f.open(QIODevice::ReadOnly))
        return out;
    static const QRegularExpression line(QStringLiteral("^\\s*nameserver\\s+(\\S+)"));
    for (const QByteArray &raw : f.readAll().split('\n')) {
        auto m = line.match(QString::fromUtf8(raw));
        QHostAddress address;
        if (m.hasMatch() && address.setAddress(m.captured(1)) &&
            address.protocol() == QHostAddress::IPv4Protocol && !address.isLoopback())
            out << address.toString();
    }
    return out;
}

QStringList hostDnsServers() {
    // A loopback resolver (systemd-resolved's 127.0.0.53) is out of a
    // guest's reach; the servers it forwards to are not.
    QStringList servers = nameServers(QStringLiteral("/etc/resolv.conf"));
    if (servers.isEmpty())
        servers = nameServers(QStringLiteral("/run/systemd/resolve/resolv.conf"));
    return servers.mid(0, 3);
}

namespace {

/// `text` if it is an IPv4 address, in its usual form; else empty.
QString ipv4(const QString &text) {
    QHostAddress address;
    if (!address.setAddress(text.trimmed()) || address.protocol() != QHostAddress::IPv4Protocol)
        return {};
    return address.toString();
}

QString compact(const QJsonValue &value) {
    return QString::fromUtf8(QJsonDocument(QJsonArray{value}).toJson(QJsonDocument::Compact))
        .mid(1)
        .chopped(1);
}

/// Counter values move with every packet and set elements come out in the
/// kernel's hash order, which differs between two loads of the same set:
/// neither is a change to the filter.
QJsonValue normalised(const QJsonValue &value) {
    if (value.isArray()) {
        QJsonArray out;
        for (const QJsonValue &item : value.toArray())
            out.append(normalised(item));
        return out;
    }
    if (!value.isObject())
        return value;
    const QJsonObject in = value.toObject();
    QJsonObject out;
    for (auto it = in.begin(); it != in.end(); ++it) {
        if (it.key() == QLatin1String("counter") && it->isObject()) {
            out.insert(it.key(), QJsonValue::Null); // an anonymous counter: packets, bytes
            continue;
        }
        QJsonValue item = normalised(*it);
        if ((it.key() == QLatin1String("elem") || it.key() == QLatin1String("set")) &&
            item.isArray()) {
            QList<QPair<QString, QJsonValue>> keyed;
            for (const QJsonValue &element : item.toArray())
                keyed.append({compact(element), element});
            std::sort(keyed.begin(), keyed.end(),
                      [](const auto &a, const auto &b) { return a.first < b.first; });
            QJsonArray sorted;
            for (const auto &element : keyed)
                sorted.append(element.second);
            item = sorted;
        }
        out.insert(it.key(), item);
    }
    return out;
}

} // namespace

QStringList recordResolvers(const QString &file, const QStringList &servers,
                            const QStringList &seed) {
    QStringList known;
    auto add = [&known](const QString &text) {
        const QString address = ipv4(text);
        if (!address.isEmpty() && !known.contains(address))
            known << address;
    };
    QFile in(file);
    const bool listed = in.open(QIODevice::ReadOnly);
    for (const QByteArray &line : listed ? in.readAll().split('\n') : QList<QByteArray>())
        add(QString::fromUtf8(line));
    if (!listed)
        for (const QString &server : seed)
            add(server);
    const qsizetype before = listed ? known.size() : -1;
    for (const QString &server : servers)
        add(server);
    if (known.size() == before)
        return known;
    QSaveFile out(file);
    if (!QDir().mkpath(QFileInfo(file).path()) || !out.open(QIODevice::WriteOnly) ||
        out.write(known.join(QLatin1Char('\n')).toUtf8() + '\n') < 0 || !out.commit())
        qWarning().noquote() << "host filter: cannot write" << file
                             << "(another service's load may drop these resolvers):"
                             << out.errorString();
    return known;
}

std::optional<QJsonArray> normalisedTable(const QByteArray &nftJson) {
    QJsonParseError error{};
    const QJsonDocument doc = QJsonDocument::fromJson(nftJson, &error);
    const QJsonValue entries = doc.object().value(QLatin1String("nftables"));
    if (error.error != QJsonParseError::NoError || !entries.isArray())
        return std::nullopt;
    QJsonArray out;
    for (const QJsonValue &entry : entries.toArray()) {
        if (!entry.isObject())
            return std::nullopt;
        QJsonObject object = entry.toObject();
        if (object.contains(QLatin1String("metainfo")))
            continue; // nft's version
        // {"rule": {..., "handle": 35, ...}}: handles are new at each load.
        for (auto it = object.begin(); it != object.end(); ++it) {
            if (!it->isObject())
                continue;
            QJsonObject inner = it->toObject();
            inner.remove(QLatin1String("handle"));
            *it = inner;
        }
        out.append(normalised(object));
    }
    return out;
}

QString tableDifference(const QJsonArray &expected, const QJsonArray &listed) {
    if (expected == listed)
        return {};
    qsizetype i = 0;
    while (i < expected.size() && i < listed.size() && expected.at(i) == listed.at(i))
        ++i;
    auto shown = [](const QJsonValue &v) { return compact(v).left(400); };
    if (i < listed.size()) {
        QJsonArray fewer = listed;
        fewer.removeAt(i);
        if (fewer == expected)
            return QStringLiteral("added: ") + shown(listed.at(i));
    }
    if (i < expected.size()) {
        QJsonArray fewer = expected;
        fewer.removeAt(i);
        if (fewer == listed)
            return QStringLiteral("removed: ") + shown(expected.at(i));
    }
    if (i < expected.size() && i < listed.size())
        return QStringLiteral("changed: %1, was %2")
            .arg(shown(listed.at(i)), shown(expected.at(i)));
    return i < listed.size() ? QStringLiteral("added from: ") + shown(listed.at(i))
                             : QStringLiteral("removed from: ") + shown(expected.at(i));
}

QStringList dnsSetElements(const QJsonArray &table) {
    QStringList out;
    for (const QJsonValue &entry : table) {
        const QJsonObject set = entry.toObject().value(QLatin1String("set")).toObject();
        if (set.value(QLatin1String("name")).toString() != QLatin1String("dns4"))
            continue;
        for (const QJsonValue &element : set.value(QLatin1String("elem")).toArray())
            if (const QString address = ipv4(element.toString()); !address.isEmpty())
                out << address;
    }
    return out;
}

namespace {

struct NetUser {
    uid_t uid;
    gid_t gid;
};

/// The passt user. getpwnam_r: creates run on several pool threads at
/// once, and getpwnam's static buffer is not safe there.
std::optional<NetUser> netUser() {
    passwd entry{};
    passwd *found = nullptr;
    char buffer[4096];
    if (getpwnam_r(kNetUser, &entry, buffer, sizeof buffer, &found) != 0 || !found)
        return std::nullopt;
    return NetUser{entry.pw_uid, entry.pw_gid};
}

/// Runs `program` to completion; its standard output, or why it failed.
Result<QByteArray> run(const QString &program, const QStringList &args,
                       const QByteArray &input = {}) {
    QProcess p;
    p.start(program, args);
    if (!p.waitForStarted(10000))
        return fail(Kind::Unavailable,
                    QStringLiteral("cannot run %1: %2").arg(program, p.errorString()));
    p.write(input);
    p.closeWriteChannel();
    if (!p.waitForFinished(30000) || p.exitStatus() != QProcess::NormalExit || p.exitCode() != 0)
        return fail(
            Kind::Unavailable,
            QStringLiteral("%1 failed: %2")
                .arg(program, QString::fromUtf8(p.readAllStandardError()).trimmed().left(500)));
    return p.readAllStandardOutput();
}

/// One load or check at a time in this process (creates run on several
/// pool threads), and what the table looked like right after this
/// process's last load: what every later check compares against.
QMutex filterMutex;
QJsonArray loadedTable; // normalised; empty: not loaded by this process yet
QString lastReload;     // why the last reload that failed was tried (logged once)

Result<QByteArray> listTable() {
    return run(QStringLiteral("nft"),
               {QStringLiteral("-j"), QStringLiteral("list"), QStringLiteral("table"),
                QStringLiteral("inet"), QStringLiteral("sandcastle")});
}

/// Loads the table whole and keeps its listing. Under filterMutex.
Result<void> loadTable(uid_t uid, const QStringList &dnsServers) {
    const QString list = QLatin1String(kResolverList);
    // Other services on this host load the same table: one at a time, so
    // that the list each one reads is the list it loads.
    QDir().mkpath(QFileInfo(list).path());
    QLockFile lock(list + QStringLiteral(".lock"));
    if (!lock.tryLock(10000))
        qWarning().noquote() << "host filter: loading without the lock" << lock.fileName();
    QStringList seed;
    // No list yet, but a table: an earlier version loaded it, and its set
    // holds resolvers other services still give their sandboxes.
    if (!QFile::exists(list)) {
        if (auto listed = listTable()) {
            if (auto table = normalisedTable(*listed))
                seed = dnsSetElements(*table);
        }
    }
    const QStringList resolvers = recordResolvers(list, dnsServers, seed);
    if (auto loaded = run(QStringLiteral("nft"), {QStringLiteral("-f"), QStringLiteral("-")},
                          hostRuleset(uid, resolvers).toUtf8());
        !loaded)
        return std::unexpected(loaded.error());
    auto listed = listTable();
    if (!listed)
        return std::unexpected(listed.error());
    auto table = normalisedTable(*listed);
    if (!table || table->isEmpty())
        return fail(Kind::Unavailable,
                    QStringLiteral("`nft -j list table inet sandcastle` printed no table this "
                                   "version can read (%1)")
                        .arg(QString::fromUtf8(listed->left(200))));
    loadedTable = *table;
    return {};
}

} // namespace

Result<void> installHostFilter(const QStringList &dnsServers) {
    if (geteuid() != 0)
        return fail(Kind::Unavailable,
                    QStringLiteral("sandbox networking needs root (the host filter is an "
                                   "nftables table); run Sandcastle as root"));
    auto user = netUser();
    if (!user)
        return fail(Kind::Unavailable,
                    QStringLiteral("the user %1 is missing; run packaging/deps.sh (it creates it)")
                        .arg(QLatin1String(kNetUser)));
    QMutexLocker locked(&filterMutex);
    return loadTable(user->uid, dnsServers);
}

Result<void> ensureHostFilter(const QStringList &dnsServers) {
    auto user = netUser();
    if (geteuid() != 0 || !user)
        return installHostFilter(dnsServers); // says what is missing
    QMutexLocker locked(&filterMutex);
    // The whole table, not a few rules in it: an accept rule put in front
    // of the rejects, a range taken out of a set or an address added to
    // the DNS set leaves every rule this filter needs in place.
    QString why;
    if (loadedTable.isEmpty()) {
        why = QStringLiteral("not loaded by this process yet");
    } else if (auto listed = listTable(); !listed) {
        why = QStringLiteral("gone, or nft cannot list it: ") + listed.error().message;
    } else if (auto table = normalisedTable(*listed); !table) {
        why = QStringLiteral("its listing cannot be read");
    } else if (why = tableDifference(loadedTable, *table); why.isEmpty()) {
        const QStringList known = dnsSetElements(*table);
        for (const QString &server : dnsServers) {
            if (!known.contains(server))
                why = QStringLiteral("a resolver is new: ") + server;
        }
    }
    if (why.isEmpty())
        return {};
    // Removed by hand, by `nft flush ruleset` or a firewall reload,
    // changed, or a resolver is new: load it again, whole. While it cannot
    // be loaded (the engine retries every few seconds), say so once.
    if (why != lastReload)
        qInfo().noquote() << "host filter: loading it again (" + why + ")";
    auto loaded = loadTable(user->uid, dnsServers);
    lastReload = loaded ? QString() : why;
    return loaded;
}

QString passtSocket(const QString &dir) {
    return dir + QStringLiteral("/net/passt.sock");
}

Result<QString> startPasst(const QString &dir) {
    auto user = netUser();
    if (!user)
        return fail(Kind::Unavailable,
                    QStringLiteral("the user %1 is missing").arg(QLatin1String(kNetUser)));
    const QString netDir = dir + QStringLiteral("/net");
    const QString socket = passtSocket(dir);
    // QEMU parses the path inside a comma-separated option.
    if (socket.contains(QLatin1Char(',')))
        return fail(Kind::Unavailable,
                    QStringLiteral("the data folder's path must not contain a comma"));
    // passt binds its socket and writes its pid file as its own user.
    if (!QDir().mkpath(netDir) ||
        ::chown(netDir.toLocal8Bit().constData(), user->uid, user->gid) != 0 ||
        ::chmod(netDir.toLocal8Bit().constData(), 0755) != 0)
        return fail(Kind::Unavailable, QStringLiteral("cannot prepare %1").arg(netDir));
    QStringList args = {
        QStringLiteral("--quiet"),
        QStringLiteral("--one-off"), // ends when QEMU disconnects
        QStringLiteral("--ipv4-only"),
        QStringLiteral("--runas"),
        QLatin1String(kNetUser),
        QStringLiteral("--socket"),
        socket,
        QStringLiteral("--pid"),
        netDir + QStringLiteral("/passt.pid"),
        // Opened while passt is still root without capabilities: it can
        // only write where root owns the folder, not in its own.
        QStringLiteral("--log-file"),
        dir + QStringLiteral("/passt.log"),
        QStringLiteral("--address"),
        QLatin1String(kGuestAddress),
        QStringLiteral("--netmask"),
        QString::number(kGuestPrefix),
        QStringLiteral("--gateway"),
        QLatin1String(kGateway),
        QStringLiteral("--no-map-gw"), // the gateway is not the host's loopback
        // No --dns-forward: this passt sends forwarded queries to the
        // host's 127.0.0.1 whatever --dns says. The guest asks the
        // resolvers directly (the kernel command line names them).
        QStringLiteral("--tcp-ports"),
        QStringLiteral("none"),
        QStringLiteral("--udp-ports"),
        QStringLiteral("none"),
        QStringLiteral("--no-dhcp"),
    };
    // passt goes to the background once its socket listens.
    if (auto r = run(QStringLiteral("passt"), args); !r)
        return std::unexpected(r.error());
    return socket;
}

void stopPasst(const QString &dir) {
    const QString netDir = dir + QStringLiteral("/net");
    const QByteArray socket = passtSocket(dir).toLocal8Bit();
    // Only our passt: a pid may have been reused since it was written, so
    // it must have been started with `--socket` and this sandbox's socket.
    // Not just name it: QEMU's command line names it too, and a second call
    // (the pid file's passt already gone) would have stopped the VM.
    auto ours = [&](int pid) {
        QFile cmdline(QStringLiteral("/proc/%1/cmdline").arg(pid));
        return pid > 1 && cmdline.open(QIODevice::ReadOnly) &&
               cmdline.readAll().contains(QByteArray("\0--socket\0", 10) + socket + '\0');
    };
    QFile pidFile(netDir + QStringLiteral("/passt.pid"));
    if (pidFile.open(QIODevice::ReadOnly)) {
        const int pid = pidFile.readAll().trimmed().toInt();
        if (ours(pid)) {
            ::kill(pid, SIGTERM);
            return;
        }
    }
    // No pid file (the folder was removed while passt started, before QEMU
    // connected: --one-off would wait forever): find it by its socket.
    for (const QString &entry : QDir(QStringLiteral("/proc")).entryList(QDir::Dirs)) {
        bool numeric = false;
        const int pid = entry.toInt(&numeric);
        if (numeric && ours(pid))
            ::kill(pid, SIGTERM);
    }
}

} // namespace sandcastle::egress
