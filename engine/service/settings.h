// The service's settings, stored in the record's settings table. Every
// value is checked when it is set; an invalid value is refused with a
// message and never stored.
#pragma once

#include "../errors.h"

#include <QHash>
#include <QMap>
#include <QStringList>

namespace sandcastle {

struct Settings {
    int port = 8765;
    QString listenAddress = QStringLiteral("127.0.0.1");
    int maxLiveSandboxes = 20; // per account
    int maxHostSandboxes = 0;  // across accounts; 0: two per GiB of the host's memory
    int maxBooting = 0;        // VMs booting at once; 0: the host's cores
    QString defaultSize = QStringLiteral("small");
    int defaultTimeoutMinutes = 15;
    qint64 signupCreditMicros = 10'000'000;   // credit of the first account
    QMap<QString, qint64> ratesMicrosPerHour; // per size
    QString libvirtUri;                       // empty: the embedded driver
    int reconcileIntervalMs = 5000;
    QStringList allowedOrigins;         // besides the loopback origins of the port
    QStringList sandboxDns;             // empty: the host's resolvers
    bool sandboxUserNamespaces = false; // unprivileged user namespaces in guests
    int maxConnections = 128;           // open API connections
    int httpHeaderTimeoutS = 10;        // for a request's head to arrive
    int httpIdleTimeoutS = 120;         // an idle keep-alive connection, a stalled body
    int retentionDays = 90;             // exec rows and events kept; 0: for ever

    Settings();
    /// The stored values over the defaults. Values are checked when stored,
    /// so a bad one here was written by hand: it is skipped with a warning.
    static Settings fromStored(const QHash<QString, QString> &stored);
    /// Applies one `key = value`; refuses unknown keys and invalid values.
    Result<void> set(const QString &key, const QString &value);
    /// Every key, with a line of help each.
    static QList<std::pair<QString, QString>> describe();
    /// The current value of `key` as it would be stored.
    QString value(const QString &key) const;
};

/// "0.05" -> 50000 micro-units; refuses negatives and more than 6 decimals.
Result<qint64> parseMoney(const QString &text);
/// 50000 -> "0.05".
QString formatMoney(qint64 micros);

} // namespace sandcastle
