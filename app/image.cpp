// `sandcastle image status|update`: the guest image's age, and bringing its
// packages up to date. An update runs the image builder with --refresh: a
// new root filesystem from the archive's current packages (the security
// suite included) becomes `current`. The old layers stay on disk, because
// running sandboxes' disks are overlays on their base.
#include "commands.h"
#include "guestimage.h"
#include "imagebuilder.h"
#include "sandbox/engine.h"

#include <QCoreApplication>
#include <QDateTime>
#include <QFileInfo>
#include <QProcess>
#include <QTextStream>

#include <csignal>
#include <unistd.h>

namespace sandcastle {

namespace {

QTextStream out(stdout);
QTextStream err(stderr);

qint64 now() {
    return QDateTime::currentMSecsSinceEpoch();
}

int status(const QString &imageDir) {
    auto image = GuestImage::load(imageDir);
    if (!image) {
        err << "sandcastle: " << image.error().message << Qt::endl;
        return 1;
    }
    out << "guest image in " << imageDir << ": root filesystem " << image->rootfs << ", boot layer "
        << image->bootHash << Qt::endl;
    out << image->describe(now()) << Qt::endl;
    if (const QString warning = image->ageWarning(now()); !warning.isEmpty())
        out << "warning: " << warning << Qt::endl;
    else
        out << "`" << GuestImage::kUpdateCommand
            << "` (as root) rebuilds it with the archive's current packages; the service "
               "warns when it is older than "
            << GuestImage::kMaxAgeDays << " days" << Qt::endl;
    return 0;
}

int update(const QString &imageDir) {
    const QString script = ui::ImageBuilder::defaultScript();
    const QString agent = ui::ImageBuilder::defaultAgent();
    if (!QFileInfo(script).isFile()) {
        err << "sandcastle: the image builder " << script << " is missing" << Qt::endl;
        return 1;
    }
    if (agent.isEmpty()) {
        err << "sandcastle: no sandcastle-agent next to this program (build/engine/agent/); "
               "build Sandcastle first (packaging/build.sh)"
            << Qt::endl;
        return 1;
    }
    if (::geteuid() != 0) {
        // The same folder under sudo: root's default is another one.
        err << "sandcastle: updating the image needs root (mmdebstrap, file ownership): sudo "
               "SANDCASTLE_IMAGE_DIR="
            << imageDir << " " << QCoreApplication::applicationFilePath() << " image update"
            << Qt::endl;
        return 1;
    }
    out << "rebuilding the guest image in " << imageDir
        << " from the archive's current packages (takes minutes; downloads ~400 MB)" << Qt::endl;
    QProcess builder;
    builder.setProcessChannelMode(QProcess::ForwardedChannels);
    builder.start(QStringLiteral("bash"),
                  {script, QStringLiteral("--refresh"), QStringLiteral("--agent"), agent,
                   QStringLiteral("--cache"), imageDir});
    if (!builder.waitForStarted()) {
        err << "sandcastle: cannot start bash: " << builder.errorString() << Qt::endl;
        return 1;
    }
    // Ctrl-C reaches the builder as well (same process group): it removes
    // what it half built and exits; this process waits to say so. Ignored
    // only after the start: an ignored signal would be inherited.
    std::signal(SIGINT, SIG_IGN);
    builder.waitForFinished(-1);
    std::signal(SIGINT, SIG_DFL);
    if (builder.exitStatus() != QProcess::NormalExit || builder.exitCode() != 0) {
        err << "sandcastle: the image update failed (exit " << builder.exitCode()
            << "); the current image is unchanged" << Qt::endl;
        return 1;
    }
    auto image = GuestImage::load(imageDir);
    if (!image) {
        err << "sandcastle: " << image.error().message << Qt::endl;
        return 1;
    }
    out << "current image: root filesystem " << image->rootfs << ", " << image->describe(now())
        << Qt::endl;
    out << "New sandboxes get it (a running service takes it at its next create); running "
           "sandboxes keep theirs. The older layers stay in "
        << imageDir << ": running sandboxes' disks are overlays on them." << Qt::endl;
    return 0;
}

} // namespace

int runImage(const QStringList &args) {
    const QString imageDir = EngineConfig::defaults().imageDir;
    const QString verb = args.value(0);
    if ((verb == QLatin1String("status") || verb.isEmpty()) && args.size() <= 1)
        return status(imageDir);
    if (verb == QLatin1String("update") && args.size() == 1)
        return update(imageDir);
    err << "usage: sandcastle image status | image update" << Qt::endl;
    return 2;
}

} // namespace sandcastle
