#include "logging.h"

#include <QDateTime>
#include <QFile>
#include <QMutex>

#include <cstdio>

namespace sandcastle {

namespace {
QFile *logFile = nullptr;
QMutex logMutex;

void handler(QtMsgType type, const QMessageLogContext &, const QString &message) {
    const char *level = type == QtDebugMsg      ? "debug"
                        : type == QtInfoMsg     ? "info"
                        : type == QtWarningMsg  ? "warning"
                        : type == QtCriticalMsg ? "error"
                                                : "fatal";
    const QByteArray line = QStringLiteral("%1 %2 %3\n")
                                .arg(QDateTime::currentDateTimeUtc().toString(Qt::ISODateWithMs),
                                     QString::fromLatin1(level), message)
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
        if (!logFile->open(QIODevice::Append | QIODevice::Text)) {
            delete logFile;
            logFile = nullptr;
        }
    }
    qInstallMessageHandler(handler);
}

} // namespace sandcastle
