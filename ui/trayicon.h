// The system-tray icon: the app icon with the number of live sandboxes on
// it; a click shows the window. Only made when the desktop has a tray.
#pragma once

#include <QSystemTrayIcon>

namespace sandcastle::ui {

class TrayIcon : public QSystemTrayIcon {
    Q_OBJECT
public:
    explicit TrayIcon(QObject *parent = nullptr);
    void setLiveCount(int count);

    /// The app icon with `count` drawn on a badge (none for 0).
    static QIcon badged(int count);

signals:
    void showWindowRequested();
    void quitRequested();
};

} // namespace sandcastle::ui
