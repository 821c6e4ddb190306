#include "guestimage.h"

#include <QDateTime>
#include <QFile>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>

namespace sandcastle {

namespace {
constexpr qint64 kDayMs = 24ll * 3600 * 1000;

QString day(qint64 ms) {
    return QDateTime::fromMSecsSinceEpoch(ms, Qt::UTC).toString(QStringLiteral("yyyy-MM-dd"));
}
} // namespace

Result<GuestImage> GuestImage::load(const QString &imageDir) {
    const QString path = imageDir + QStringLiteral("/current/manifest.json");
    QFile f(path);
    if (!f.open(QIODevice::ReadOnly))
        return fail(
            EngineError::Kind::Unavailable,
            QStringLiteral("no guest image in %1: build it with "
                           "packaging/guest/build-image.sh (the README's first command does)")
                .arg(imageDir));
    auto image = parse(f.readAll(), path);
    if (!image)
        return image;
    for (const QString &file : {image->kernel, image->initrd, image->base}) {
        if (!QFileInfo(file).isReadable())
            return fail(
                EngineError::Kind::Unavailable,
                QStringLiteral("guest image file %1 is missing; rebuild the image").arg(file));
    }
    return image;
}

Result<GuestImage> GuestImage::parse(const QByteArray &manifest, const QString &path) {
    QJsonParseError err{};
    const QJsonObject o = QJsonDocument::fromJson(manifest, &err).object();
    if (err.error != QJsonParseError::NoError || o.value(QStringLiteral("format")).toInt() != 1)
        return fail(
            EngineError::Kind::Unavailable,
            QStringLiteral(
                "%1 is not a guest image manifest Sandcastle understands; rebuild the image")
                .arg(path));
    GuestImage image;
    image.kernel = o.value(QStringLiteral("kernel")).toString();
    image.initrd = o.value(QStringLiteral("initrd")).toString();
    image.base = o.value(QStringLiteral("base")).toString();
    image.bootHash = o.value(QStringLiteral("boot_hash")).toString();
    image.rootfs = o.value(QStringLiteral("rootfs")).toString();
    if (image.rootfs.isEmpty() && !image.base.isEmpty())
        image.rootfs = QFileInfo(QFileInfo(image.base).path()).fileName();
    image.kernelVersion = o.value(QStringLiteral("kernel_version")).toString();
    for (const QJsonValue &s : o.value(QStringLiteral("suites")).toArray())
        image.suites << s.toString();
    // Builders before the security suite named only the release.
    if (image.suites.isEmpty() && o.contains(QStringLiteral("suite")))
        image.suites << o.value(QStringLiteral("suite")).toString();
    const QDateTime built =
        QDateTime::fromString(o.value(QStringLiteral("rootfs_built_at")).toString(), Qt::ISODate);
    if (built.isValid()) {
        image.builtAt = built.toMSecsSinceEpoch();
    } else if (const QFileInfo base(image.base); base.exists()) {
        // Built before the builder recorded the time: the base image is
        // written minutes after its packages were fetched, and never again.
        image.builtAt = base.lastModified().toMSecsSinceEpoch();
        image.builtAtEstimated = true;
    }
    return image;
}

int GuestImage::ageDays(qint64 nowMs) const {
    if (builtAt <= 0)
        return -1;
    return int(std::max<qint64>(0, nowMs - builtAt) / kDayMs);
}

QString GuestImage::describe(qint64 nowMs) const {
    QString text;
    if (builtAt <= 0) {
        text = QStringLiteral("build time unknown");
    } else {
        const int days = ageDays(nowMs);
        text = QStringLiteral("built %1%2 (%3)")
                   .arg(day(builtAt),
                        builtAtEstimated ? QStringLiteral(" or shortly before") : QString())
                   .arg(days == 0   ? QStringLiteral("today")
                        : days == 1 ? QStringLiteral("1 day ago")
                                    : QStringLiteral("%1 days ago").arg(days));
    }
    if (!suites.isEmpty())
        text += QStringLiteral(", packages from %1").arg(suites.join(QStringLiteral(", ")));
    if (!kernelVersion.isEmpty())
        text += QStringLiteral(", kernel %1").arg(kernelVersion);
    return text;
}

QString GuestImage::ageWarning(qint64 nowMs) const {
    const QString how = QStringLiteral("`%1` (as root) rebuilds it with the archive's current "
                                       "packages; new sandboxes get it, running ones keep theirs")
                            .arg(QLatin1String(kUpdateCommand));
    if (outdated(nowMs))
        return QStringLiteral("the guest image was built %1 days ago (%2), more than %3: new "
                              "sandboxes lack the security updates since. %4")
            .arg(ageDays(nowMs))
            .arg(day(builtAt))
            .arg(kMaxAgeDays)
            .arg(how);
    // An image from before the builder added the security suite has none
    // of its updates, however young it is.
    const bool security = std::any_of(suites.begin(), suites.end(), [](const QString &s) {
        return s.endsWith(QLatin1String("-security"));
    });
    if (!suites.isEmpty() && !security)
        return QStringLiteral("the guest image's packages come from %1 without its security "
                              "suite: new sandboxes lack its security updates. %2")
            .arg(suites.join(QStringLiteral(", ")), how);
    return {};
}

} // namespace sandcastle
