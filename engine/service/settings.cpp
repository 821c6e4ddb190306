#include "settings.h"

#include "../sizes.h"

#include <QHostAddress>
#include <QRegularExpression>
#include <QUrl>
#include <QtDebug>

namespace sandcastle {

using Kind = EngineError::Kind;

namespace {

Result<int> parseInt(const QString &key, const QString &text, int min, int max) {
    bool ok = false;
    const int v = text.trimmed().toInt(&ok);
    if (!ok || v < min || v > max)
        return fail(Kind::InvalidArgument,
                    QStringLiteral("%1 must be a whole number from %2 to %3, not '%4'")
                        .arg(key)
                        .arg(min)
                        .arg(max)
                        .arg(text.left(40)));
    return v;
}

/// Settings that are a whole number in a range, set and read alike: one
/// row each instead of a branch in set() and another in value().
struct IntSetting {
    const char *key;
    int Settings::*field;
    int min;
    int max;
};

const IntSetting *intSetting(const QString &key) {
    static const IntSetting table[] = {
        {"port", &Settings::port, 0, 65535},
        {"max_live_sandboxes", &Settings::maxLiveSandboxes, 1, 1000},
        {"max_host_sandboxes", &Settings::maxHostSandboxes, 0, 10000},
        {"max_booting", &Settings::maxBooting, 0, 256},
        {"default_timeout_minutes", &Settings::defaultTimeoutMinutes, 1, 1440},
        {"reconcile_interval_ms", &Settings::reconcileIntervalMs, 500, 600000},
        {"max_connections", &Settings::maxConnections, 8, 10000},
        {"http_header_timeout_s", &Settings::httpHeaderTimeoutS, 1, 600},
        {"http_idle_timeout_s", &Settings::httpIdleTimeoutS, 1, 3600},
        {"retention_days", &Settings::retentionDays, 0, 36500},
    };
    for (const IntSetting &s : table)
        if (key == QLatin1String(s.key))
            return &s;
    return nullptr;
}

} // namespace

Result<qint64> parseMoney(const QString &text) {
    static const QRegularExpression re(QStringLiteral("^(\\d{1,9})(?:\\.(\\d{1,6}))?$"));
    auto m = re.match(text.trimmed());
    if (!m.hasMatch())
        return fail(Kind::InvalidArgument,
                    QStringLiteral("'%1' is not an amount: write it like 10 or 0.05 (at most 6 "
                                   "decimals)")
                        .arg(text.left(40)));
    const QString fraction = m.captured(2).leftJustified(6, QLatin1Char('0'));
    return m.captured(1).toLongLong() * 1'000'000 + fraction.toLongLong();
}

QString formatMoney(qint64 micros) {
    const QString sign = micros < 0 ? QStringLiteral("-") : QString();
    micros = std::abs(micros);
    QString fraction = QStringLiteral("%1").arg(micros % 1'000'000, 6, 10, QLatin1Char('0'));
    while (fraction.size() > 2 && fraction.endsWith(QLatin1Char('0')))
        fraction.chop(1);
    return QStringLiteral("%1%2.%3").arg(sign).arg(micros / 1'000'000).arg(fraction);
}

Settings::Settings() {
    // Local prices are notional: they exist so a runaway agent is bounded
    // the way the hosted service bounds it. docs/api.md lists them.
    ratesMicrosPerHour = {{QStringLiteral("small"), 50'000},
                          {QStringLiteral("medium"), 100'000},
                          {QStringLiteral("large"), 200'000}};
}

QList<std::pair<QString, QString>> Settings::describe() {
    return {
        {QStringLiteral("port"), QStringLiteral("TCP port of the API (0 picks a free one)")},
        {QStringLiteral("listen_address"),
         QStringLiteral("address the API listens on (loopback unless you mean otherwise)")},
        {QStringLiteral("max_live_sandboxes"),
         QStringLiteral("live sandboxes per account before create answers 429")},
        {QStringLiteral("max_host_sandboxes"),
         QStringLiteral("live sandboxes on this host, all accounts, before create answers 503 "
                        "(0: two per GiB of memory)")},
        {QStringLiteral("max_booting"),
         QStringLiteral("VMs that boot at once; more creates wait their turn (0: the host's "
                        "cores)")},
        {QStringLiteral("default_size"), QStringLiteral("size when create names none")},
        {QStringLiteral("default_timeout_minutes"),
         QStringLiteral("lifetime when create names none (1-1440)")},
        {QStringLiteral("signup_credit"), QStringLiteral("credit of the first account")},
        {QStringLiteral("rate.small"), QStringLiteral("price per hour of a small sandbox")},
        {QStringLiteral("rate.medium"), QStringLiteral("price per hour of a medium sandbox")},
        {QStringLiteral("rate.large"), QStringLiteral("price per hour of a large sandbox")},
        {QStringLiteral("libvirt_uri"),
         QStringLiteral("libvirt connection (empty: embedded driver in the data dir)")},
        {QStringLiteral("reconcile_interval_ms"),
         QStringLiteral("how often the record is compared with libvirt (500-600000)")},
        {QStringLiteral("allowed_origins"),
         QStringLiteral("extra browser origins allowed to call the API, comma separated")},
        {QStringLiteral("sandbox_dns"),
         QStringLiteral("IPv4 resolvers for sandboxes, comma separated (empty: the host's)")},
        {QStringLiteral("sandbox_user_namespaces"),
         QStringLiteral("on: user namespaces in sandboxes (Chromium's sandbox, rootless "
                        "containers); off (default): a smaller kernel attack surface")},
        {QStringLiteral("max_connections"),
         QStringLiteral("open API connections before new ones are answered 503 (8-10000)")},
        {QStringLiteral("http_header_timeout_s"),
         QStringLiteral("seconds for a request's head to arrive before 408 (1-600)")},
        {QStringLiteral("http_idle_timeout_s"),
         QStringLiteral("seconds an idle API connection, or a stalled upload, stays open "
                        "(1-3600)")},
        {QStringLiteral("retention_days"),
         QStringLiteral("days commands and events of ended sandboxes are kept (0: for ever; "
                        "the ledger is always kept)")},
    };
}

/// The service runs as root: a libvirt URI must not make it run a program
/// (qemu+ext, ssh's command=) or talk to a socket of someone's choosing.
/// Only local QEMU and qemu+ssh/qemu+tls, and of their parameters only
/// those that choose nothing to run. libvirt splits parameters on '&' and
/// ';' and compares names without case, so this does too.
static Result<void> checkLibvirtUri(const QString &value) {
    if (value.isEmpty())
        return {};
    const auto refused = [] {
        return fail(EngineError::Kind::InvalidArgument,
                    QStringLiteral("libvirt_uri must be qemu:///system, qemu:///session, "
                                   "qemu:///embed?root=..., or qemu+ssh:// / qemu+tls:// with "
                                   "only keyfile, known_hosts, pkipath, no_verify, no_tty or "
                                   "mode as parameters"));
    };
    const QUrl url(value, QUrl::StrictMode);
    static const QStringList schemes = {QStringLiteral("qemu"), QStringLiteral("qemu+ssh"),
                                        QStringLiteral("qemu+tls")};
    if (!url.isValid() || !schemes.contains(url.scheme()) ||
        (url.scheme() == QLatin1String("qemu") && !url.host().isEmpty()) ||
        url.host().startsWith(QLatin1Char('-')) || url.userName().startsWith(QLatin1Char('-')))
        return refused();
    static const QStringList remote = {QStringLiteral("keyfile"), QStringLiteral("known_hosts"),
                                       QStringLiteral("pkipath"), QStringLiteral("no_verify"),
                                       QStringLiteral("no_tty"),  QStringLiteral("mode")};
    const QString query = url.query(QUrl::FullyEncoded);
    for (const QString &pair :
         query.split(QRegularExpression(QStringLiteral("[&;]")), Qt::SkipEmptyParts)) {
        const QString name =
            QUrl::fromPercentEncoding(pair.section(QLatin1Char('='), 0, 0).toUtf8()).toLower();
        const bool allowed = url.scheme() == QLatin1String("qemu") ? name == QLatin1String("root")
                                                                   : remote.contains(name);
        if (!allowed)
            return refused();
    }
    return {};
}

Result<void> Settings::set(const QString &key, const QString &value) {
    if (auto *number = intSetting(key)) {
        auto v = parseInt(key, value, number->min, number->max);
        if (!v)
            return std::unexpected(v.error());
        this->*number->field = *v;
    } else if (key == QLatin1String("listen_address")) {
        static const QRegularExpression re(QStringLiteral("^[0-9a-fA-F.:]{2,45}$"));
        if (!re.match(value).hasMatch())
            return fail(Kind::InvalidArgument,
                        QStringLiteral("listen_address must be an IP address such as 127.0.0.1"));
        listenAddress = value;
    } else if (key == QLatin1String("default_size")) {
        if (!findSize(value))
            return fail(Kind::InvalidArgument,
                        QStringLiteral("default_size must be small, medium or large"));
        defaultSize = value;
    } else if (key == QLatin1String("signup_credit")) {
        auto v = parseMoney(value);
        if (!v)
            return std::unexpected(v.error());
        signupCreditMicros = *v;
    } else if (key.startsWith(QLatin1String("rate."))) {
        const QString size = key.mid(5);
        if (!findSize(size))
            return fail(Kind::InvalidArgument,
                        QStringLiteral("unknown setting %1: rates are rate.small, rate.medium "
                                       "and rate.large")
                            .arg(key.left(40)));
        auto v = parseMoney(value);
        if (!v)
            return std::unexpected(v.error());
        ratesMicrosPerHour[size] = *v;
    } else if (key == QLatin1String("libvirt_uri")) {
        if (auto ok = checkLibvirtUri(value); !ok)
            return ok;
        libvirtUri = value;
    } else if (key == QLatin1String("allowed_origins")) {
        QStringList origins;
        for (const QString &o : value.split(QLatin1Char(','), Qt::SkipEmptyParts)) {
            const QUrl url(o.trimmed(), QUrl::StrictMode);
            if (!url.isValid() || url.host().isEmpty() || !url.path().isEmpty() ||
                (url.scheme() != QLatin1String("http") && url.scheme() != QLatin1String("https")))
                return fail(Kind::InvalidArgument,
                            QStringLiteral("'%1' is not an origin such as http://localhost:3000")
                                .arg(o.left(80)));
            origins << o.trimmed();
        }
        allowedOrigins = origins;
    } else if (key == QLatin1String("sandbox_dns")) {
        QStringList servers;
        for (const QString &part : value.split(QLatin1Char(','), Qt::SkipEmptyParts)) {
            QHostAddress address;
            if (!address.setAddress(part.trimmed()) ||
                address.protocol() != QHostAddress::IPv4Protocol || address.isLoopback())
                return fail(Kind::InvalidArgument,
                            QStringLiteral("'%1' is not an IPv4 resolver a sandbox can reach "
                                           "(such as 1.1.1.1; loopback is the host's own)")
                                .arg(part.left(80)));
            servers << address.toString();
        }
        if (servers.size() > 3)
            return fail(Kind::InvalidArgument,
                        QStringLiteral("sandbox_dns takes at most three resolvers"));
        sandboxDns = servers;
    } else if (key == QLatin1String("sandbox_user_namespaces")) {
        if (value != QLatin1String("on") && value != QLatin1String("off"))
            return fail(Kind::InvalidArgument,
                        QStringLiteral("sandbox_user_namespaces is on or off"));
        sandboxUserNamespaces = value == QLatin1String("on");
    } else {
        return fail(Kind::InvalidArgument,
                    QStringLiteral("unknown setting '%1': `sandcastle config list` shows them")
                        .arg(key.left(40)));
    }
    return {};
}

QString Settings::value(const QString &key) const {
    if (key == QLatin1String("listen_address"))
        return listenAddress;
    if (key == QLatin1String("default_size"))
        return defaultSize;
    if (key == QLatin1String("signup_credit"))
        return formatMoney(signupCreditMicros);
    if (key.startsWith(QLatin1String("rate.")))
        return formatMoney(ratesMicrosPerHour.value(key.mid(5)));
    if (key == QLatin1String("libvirt_uri"))
        return libvirtUri;
    if (key == QLatin1String("allowed_origins"))
        return allowedOrigins.join(QLatin1Char(','));
    if (key == QLatin1String("sandbox_dns"))
        return sandboxDns.join(QLatin1Char(','));
    if (key == QLatin1String("sandbox_user_namespaces"))
        return sandboxUserNamespaces ? QStringLiteral("on") : QStringLiteral("off");
    if (auto *number = intSetting(key))
        return QString::number(this->*number->field);
    return {};
}

Settings Settings::fromStored(const QHash<QString, QString> &stored) {
    Settings s;
    for (auto it = stored.begin(); it != stored.end(); ++it) {
        if (auto r = s.set(it.key(), it.value()); !r)
            qWarning().noquote() << "ignoring stored setting:" << r.error().message;
    }
    return s;
}

} // namespace sandcastle
