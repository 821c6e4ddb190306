// The tail of a sandbox's serial console log (kernel and boot messages,
// written by QEMU to the sandbox folder). Follows the file while it grows.
#pragma once

#include <QFile>
#include <QPlainTextEdit>
#include <QTimer>

namespace sandcastle::ui {

class ConsoleTail : public QPlainTextEdit {
    Q_OBJECT
public:
    explicit ConsoleTail(QWidget *parent = nullptr);
    /// Follows `path` from its last 64 KiB on; an empty path clears.
    void follow(const QString &path);

private:
    void poll();

    QString path_;
    qint64 offset_ = 0;
    QTimer timer_;
};

} // namespace sandcastle::ui
