#include "imagebuilder.h"

#include <QCoreApplication>
#include <QFileInfo>
#include <QRegularExpression>

namespace sandcastle::ui {

ImageBuilder::ImageBuilder(QObject *parent)
    : QObject(parent) {
    process_.setProcessChannelMode(QProcess::MergedChannels);
    connect(&process_, &QProcess::readyRead, this, &ImageBuilder::readLines);
    connect(&process_, &QProcess::finished, this, [this](int code, QProcess::ExitStatus status) {
        readLines();
        const bool ok = status == QProcess::NormalExit && code == 0;
        if (ok)
            emit progress(100, tr("ready"));
        emit finished(ok, ok ? tr("The guest image is ready; new sandboxes use it.")
                             : tr("The image build failed (exit %1): %2")
                                   .arg(code)
                                   .arg(lastError_.isEmpty() ? tr("see its output") : lastError_));
    });
    connect(&process_, &QProcess::errorOccurred, this, [this](QProcess::ProcessError e) {
        if (e == QProcess::FailedToStart)
            emit finished(false, tr("Could not start bash: %1").arg(process_.errorString()));
    });
}

QString ImageBuilder::defaultScript() {
    return QStringLiteral(SANDCASTLE_SOURCE_DIR "/packaging/guest/build-image.sh");
}

QString ImageBuilder::defaultAgent() {
    // The app is build/app/sandcastle; the agent build/engine/agent/.
    return QFileInfo(QCoreApplication::applicationDirPath() +
                     QStringLiteral("/../engine/agent/sandcastle-agent"))
        .canonicalFilePath();
}

void ImageBuilder::start(const QString &script, const QString &agent) {
    if (running())
        return;
    pending_.clear();
    lastError_.clear();
    emit progress(0, tr("starting the image builder"));
    process_.start(QStringLiteral("bash"), {script, QStringLiteral("--agent"), agent});
}

int ImageBuilder::progressOf(const QString &line) {
    static const QRegularExpression step(QStringLiteral("^\\[guest image +\\d+s\\] (.*)$"));
    static const QRegularExpression nOfM(QStringLiteral("^(\\d)/(\\d) "));
    const auto m = step.match(line);
    if (!m.hasMatch())
        return -1;
    const QString what = m.captured(1);
    // Four root-filesystem steps take ~90% of a full build; the boot layer
    // (initramfs) the rest.
    if (const auto n = nOfM.match(what); n.hasMatch())
        return (n.captured(1).toInt() - 1) * 90 / std::max(1, n.captured(2).toInt());
    if (what.startsWith(QLatin1String("root filesystem")))
        return 90;
    if (what.startsWith(QLatin1String("building the initramfs")) ||
        what.startsWith(QLatin1String("boot layer")))
        return 95;
    if (what.startsWith(QLatin1String("ready")))
        return 100;
    return -1;
}

void ImageBuilder::readLines() {
    pending_ += process_.readAll();
    int nl;
    while ((nl = pending_.indexOf('\n')) >= 0) {
        const QString line = QString::fromUtf8(pending_.left(nl)).trimmed();
        pending_.remove(0, nl + 1);
        if (line.startsWith(QLatin1String("guest image: ")))
            lastError_ = line;
        const int p = progressOf(line);
        if (p >= 0)
            emit progress(p, line);
    }
}

} // namespace sandcastle::ui
