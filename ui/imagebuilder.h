// Runs the guest image builder (packaging/guest/build-image.sh --agent
// AGENT) and turns its step lines ("[guest image 12s] 2/4 ...") into
// progress. A cached image finishes in seconds; a full build takes minutes
// and needs root (debootstrap, mounts).
#pragma once

#include <QObject>
#include <QProcess>

namespace sandcastle::ui {

class ImageBuilder : public QObject {
    Q_OBJECT
public:
    explicit ImageBuilder(QObject *parent = nullptr);
    /// The script and agent of this build tree (or the installed ones).
    static QString defaultScript();
    static QString defaultAgent();

    void start(const QString &script, const QString &agent);
    bool running() const { return process_.state() != QProcess::NotRunning; }

    /// Percent done after one line of the builder's output; -1 when the
    /// line is not one of its steps.
    static int progressOf(const QString &line);

signals:
    void progress(int percent, const QString &line);
    void finished(bool ok, const QString &message);

private:
    void readLines();

    QProcess process_;
    QByteArray pending_;
    QString lastError_;
};

} // namespace sandcastle::ui
