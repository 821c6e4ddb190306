#include "format.h"

#include "service/settings.h"

#include <QDateTime>
#include <QTextDocument>

namespace sandcastle::ui {

QString durationText(qint64 ms) {
    const qint64 s = std::max<qint64>(0, ms) / 1000;
    if (s < 60)
        return QStringLiteral("%1s").arg(s);
    if (s < 3600)
        return QStringLiteral("%1m %2s").arg(s / 60).arg(s % 60, 2, 10, QLatin1Char('0'));
    return QStringLiteral("%1h %2m").arg(s / 3600).arg((s % 3600) / 60, 2, 10, QLatin1Char('0'));
}

QString execDurationText(qint64 ms) {
    if (ms < 1000)
        return QStringLiteral("%1 ms").arg(std::max<qint64>(0, ms));
    if (ms < 60000)
        return QStringLiteral("%1 s").arg(double(ms) / 1000, 0, 'f', 1);
    return durationText(ms);
}

QString timeText(qint64 ms) {
    if (ms <= 0)
        return QStringLiteral("-");
    return QDateTime::fromMSecsSinceEpoch(ms).toString(QStringLiteral("yyyy-MM-dd HH:mm:ss"));
}

QString moneyText(qint64 micros) {
    // Four decimals: a small sandbox costs about $0.0008 a minute.
    const QString s = formatMoney(micros);
    const int dot = s.indexOf(QLatin1Char('.'));
    QString padded = s;
    if (dot >= 0 && s.size() - dot - 1 < 4)
        padded += QString(4 - (s.size() - dot - 1), QLatin1Char('0'));
    return QStringLiteral("$") + padded;
}

QIcon statusIcon(SandboxStatus status) {
    switch (status) {
    case SandboxStatus::Running:
        return QIcon(QStringLiteral(":/icons/status-running.svg"));
    case SandboxStatus::Creating:
        return QIcon(QStringLiteral(":/icons/status-creating.svg"));
    case SandboxStatus::Stopping:
        return QIcon(QStringLiteral(":/icons/status-stopping.svg"));
    case SandboxStatus::Error:
        return QIcon(QStringLiteral(":/icons/status-error.svg"));
    case SandboxStatus::Destroyed:
    case SandboxStatus::Expired:
        break;
    }
    return QIcon(QStringLiteral(":/icons/status-ended.svg"));
}

QIcon appIcon() {
    return QIcon(QStringLiteral(":/icons/sandcastle.svg"));
}

QString plainTip(const QString &text) {
    return Qt::convertFromPlainText(text, Qt::WhiteSpacePre);
}

} // namespace sandcastle::ui
