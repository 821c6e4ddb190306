#include "consoletail.h"

#include <QFontDatabase>
#include <QScrollBar>

namespace sandcastle::ui {

namespace {
constexpr qint64 kTail = 64 * 1024;
} // namespace

ConsoleTail::ConsoleTail(QWidget *parent)
    : QPlainTextEdit(parent) {
    setObjectName(QStringLiteral("consoleLog"));
    setReadOnly(true);
    setMaximumBlockCount(5000);
    setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
    setLineWrapMode(NoWrap);
    // QEMU appends without telling anyone, and inotify on a file QEMU's
    // user owns is not reliable across data dirs: a cheap size check.
    timer_.setInterval(500);
    connect(&timer_, &QTimer::timeout, this, &ConsoleTail::poll);
}

void ConsoleTail::follow(const QString &path) {
    if (path == path_)
        return;
    clear();
    path_ = path;
    offset_ = -1;
    if (path_.isEmpty()) {
        timer_.stop();
        return;
    }
    poll();
    timer_.start();
}

void ConsoleTail::poll() {
    QFile f(path_);
    if (!f.open(QIODevice::ReadOnly)) {
        if (offset_ < 0)
            setPlaceholderText(tr("No console log (the sandbox's VM is gone)."));
        return;
    }
    if (offset_ < 0 || f.size() < offset_)
        offset_ = std::max<qint64>(0, f.size() - kTail);
    if (f.size() == offset_)
        return;
    f.seek(offset_);
    const QByteArray chunk = f.read(kTail);
    offset_ += chunk.size();
    // The serial console ends lines with CR LF and may carry escape codes.
    QString text = QString::fromUtf8(chunk);
    text.remove(QLatin1Char('\r'));
    const bool atEnd = verticalScrollBar()->value() == verticalScrollBar()->maximum();
    moveCursor(QTextCursor::End);
    insertPlainText(text);
    if (atEnd)
        verticalScrollBar()->setValue(verticalScrollBar()->maximum());
}

} // namespace sandcastle::ui
