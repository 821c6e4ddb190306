#include "logging.h"

#include <QDateTime>
#include <QFile>
#include <QMutex>

#include <cstdio>

namespace sandcastle {

namespace {
QFile *logFile = nullptr;
QMutex logMutex;

/// Characters that reorder or break what a reader sees: bidirectional
/// controls (a name that displays as another, "Trojan Source") and the
/// Unicode line and paragraph separators.
bool deceptive(char16_t u) {
    return u == 0x061c || u == 0x200e || u == 0x200f || (u >= 0x2028 && u <= 0x202e) ||
           (u >= 0x2066 && u <= 0x2069);
}

/// One message, one line, nothing for a terminal to obey: control
/// characters (a newline that forges a log line, an escape sequence that
/// drives the terminal) become \xNN, deceptive ones \uNNNN, and a
/// backslash is doubled, so an escape in the log always means one was made.
/// Paths and names come from clients.
QString escaped(const QString &message) {
    QString out;
    out.reserve(message.size());
    for (QChar c : message) {
        const char16_t u = c.unicode();
        if (u < 0x20 || u == 0x7f || (u >= 0x80 && u < 0xa0))
            out += QStringLiteral("\\x%1").arg(uint(u), 2, 16, QLatin1Char('0'));
        else if (deceptive(u))
            out += QStringLiteral("\\u%1").arg(uint(u), 4, 16, QLatin1Char('0'));
        else if (u == u'\\')
            out += QStringLiteral("\\\\");
        else
            out += c;
    }
    return out;
}

void handler(QtMsgType type, const QMessageLogContext &, const QString &message) {
    const char *level = type == QtDebugMsg      ? "debug"
                        : type == QtInfoMsg     ? "info"
                        : type == QtWarningMsg  ? "warning"
                        : type == QtCriticalMsg ? "error"
                                                : "fatal";
    const QByteArray line = QStringLiteral("%1 %2 %3\n")
                                .arg(QDateTime::currentDateTimeUtc().toString(Qt::ISODateWithMs),
                                     QString::fromLatin1(level), escaped(message))
                                .toUtf8();
    QMutexLocker lock(&logMutex);
    fwrite(line.constData(), 1, size_t(line.size()), stderr);
    if (logFile) {
        logFile->write(line);
        logFile->flush();
    }
    if (type == QtFatalMsg)
        abort();
}
} // namespace

void installLogging(const QString &file) {
    if (!file.isEmpty()) {
        logFile = new QFile(file);
        // 0600 from the first byte (a new file), and for an older one too.
        const auto mine = QFile::ReadOwner | QFile::WriteOwner;
        if (!logFile->open(QIODevice::Append | QIODevice::Text, mine) ||
            !logFile->setPermissions(mine)) {
            delete logFile;
            logFile = nullptr;
        }
    }
    qInstallMessageHandler(handler);
}

} // namespace sandcastle
