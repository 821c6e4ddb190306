#include "egress.h"

#include <QDir>
#include <QFile>
#include <QHostAddress>
#include <QProcess>
#include <QRegularExpression>
#include <QtDebug>

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
    // Created if missing, then the chain is rewritten: one transaction, so
    // no packet sees a half-loaded filter. The DNS set only grows: several
    // services (data dirs) may share the host, each adding its resolvers.
    QString rules = QStringLiteral("add table inet sandcastle\n"
                                   "add set inet sandcastle dns4 { type ipv4_addr; }\n"
                                   "add chain inet sandcastle output { type filter hook output "
                                   "priority 0; policy accept; }\n"
                                   "add chain inet sandcastle sandbox\n"
                                   "flush chain inet sandcastle output\n"
                                   "flush chain inet sandcastle sandbox\n");
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
    auto loaded = run(QStringLiteral("nft"), {QStringLiteral("-f"), QStringLiteral("-")},
                      hostRuleset(user->uid, dnsServers).toUtf8());
    if (!loaded)
        return std::unexpected(loaded.error());
    return {};
}

Result<void> ensureHostFilter(const QStringList &dnsServers) {
    auto user = netUser();
    if (!user)
        return installHostFilter(dnsServers); // says what is missing
    auto table = run(QStringLiteral("nft"), {QStringLiteral("list"), QStringLiteral("table"),
                                             QStringLiteral("inet"), QStringLiteral("sandcastle")});
    const QString listed = table ? QString::fromUtf8(*table) : QString();
    bool whole = table &&
                 listed.contains(QStringLiteral("meta skuid %1 jump sandbox").arg(user->uid)) &&
                 listed.contains(QStringLiteral("fib daddr type local")) &&
                 listed.contains(QStringLiteral("dport { 25, 465, 587 }"));
    for (const QString &server : dnsServers)
        whole =
            whole && listed.contains(QRegularExpression(
                         QStringLiteral("[ {]%1[,\\s}]").arg(QRegularExpression::escape(server))));
    if (whole)
        return {};
    // Removed by hand, by `nft flush ruleset` or a firewall reload, or a
    // resolver is new: load it again (the same transaction as at start).
    qInfo().noquote() << "host filter: loading it again (it was changed, or a resolver is new)";
    return installHostFilter(dnsServers);
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
    // its command line must name this sandbox's socket.
    auto ours = [&](int pid) {
        QFile cmdline(QStringLiteral("/proc/%1/cmdline").arg(pid));
        return pid > 1 && cmdline.open(QIODevice::ReadOnly) && cmdline.readAll().contains(socket);
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
