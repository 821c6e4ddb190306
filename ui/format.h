// How the GUI writes times, durations and money.
#pragma once

#include "store/records.h"

#include <QIcon>
#include <QString>

namespace sandcastle::ui {

/// 42s, 3m 05s, 2h 10m.
QString durationText(qint64 ms);
/// 640 ms, 4.2 s, then as durationText (commands are often short).
QString execDurationText(qint64 ms);
/// Local wall-clock time of a record timestamp (ms since the epoch).
QString timeText(qint64 ms);
/// Money of the record (micro-units) as "$0.0123".
QString moneyText(qint64 micros);
/// The status icon of the sandbox table.
QIcon statusIcon(SandboxStatus status);
/// The app icon (also the tray's and the .desktop file's).
QIcon appIcon();
/// Text from a user, an agent or a guest as a tooltip: shown as it is, never
/// as HTML (a tooltip takes anything that looks like markup for markup).
QString plainTip(const QString &text);

} // namespace sandcastle::ui
