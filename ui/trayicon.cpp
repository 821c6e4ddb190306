#include "trayicon.h"

#include "format.h"

#include <QMenu>
#include <QPainter>

namespace sandcastle::ui {

TrayIcon::TrayIcon(QObject *parent)
    : QSystemTrayIcon(parent) {
    auto *menu = new QMenu;
    menu->addAction(tr("Show Sandcastle"), this, &TrayIcon::showWindowRequested);
    menu->addAction(tr("Quit…"), this, &TrayIcon::quitRequested);
    setContextMenu(menu);
    connect(this, &QObject::destroyed, menu, &QObject::deleteLater);
    connect(this, &QSystemTrayIcon::activated, this, [this](ActivationReason reason) {
        if (reason == Trigger || reason == DoubleClick)
            emit showWindowRequested();
    });
    setLiveCount(0);
}

void TrayIcon::setLiveCount(int count) {
    setIcon(badged(count));
    setToolTip(tr("Sandcastle: %n live sandbox(es)", nullptr, count));
}

QIcon TrayIcon::badged(int count) {
    QPixmap pixmap = appIcon().pixmap(64, 64);
    if (count > 0) {
        QPainter p(&pixmap);
        p.setRenderHint(QPainter::Antialiasing);
        const QRectF badge(28, 28, 36, 36);
        p.setBrush(QColor(0xe0, 0x5a, 0x47));
        p.setPen(QPen(Qt::white, 3));
        p.drawEllipse(badge.adjusted(1.5, 1.5, -1.5, -1.5));
        QFont f = p.font();
        f.setPixelSize(count > 9 ? 17 : 22);
        f.setBold(true);
        p.setFont(f);
        p.drawText(badge, Qt::AlignCenter,
                   count > 99 ? QStringLiteral("99+") : QString::number(count));
    }
    return QIcon(pixmap);
}

} // namespace sandcastle::ui
