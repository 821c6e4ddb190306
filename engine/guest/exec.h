// What an exec asks for and what it returns.
#pragma once

#include <QByteArray>
#include <QList>
#include <QPair>
#include <QString>

namespace sandcastle {

constexpr qint64 kOutputCapBytes = 1 << 20; // per stream, as the API documents

struct ExecRequest {
    QString command;
    QString cwd;                        // empty: /home/sandbox
    QList<QPair<QString, QString>> env; // secrets: never logged or stored
    int timeoutMs = 60000;
    qint64 outputCap = kOutputCapBytes; // per stream
};

struct ExecResult {
    QByteArray stdoutData;
    QByteArray stderrData;
    int exitCode = 0;
    bool truncated = false; // a stream passed the cap, or the command timed out
    bool timedOut = false;
    qint64 durationMs = 0;
    qint64 stdoutBytes = 0; // what the command printed in all, kept or not
    qint64 stderrBytes = 0;
};

} // namespace sandcastle
