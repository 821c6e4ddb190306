#include "guestimage.h"

#include <QFile>
#include <QFileInfo>
#include <QJsonDocument>
#include <QJsonObject>

namespace sandcastle {

Result<GuestImage> GuestImage::load(const QString &imageDir) {
    const QString path = imageDir + QStringLiteral("/current/manifest.json");
    QFile f(path);
    if (!f.open(QIODevice::ReadOnly))
        return fail(
            EngineError::Kind::Unavailable,
            QStringLiteral("no guest image in %1: build it with "
                           "packaging/guest/build-image.sh (the README's first command does)")
                .arg(imageDir));
    QJsonParseError err{};
    const QJsonObject o = QJsonDocument::fromJson(f.readAll(), &err).object();
    if (err.error != QJsonParseError::NoError || o.value(QStringLiteral("format")).toInt() != 1)
        return fail(
            EngineError::Kind::Unavailable,
            QStringLiteral(
                "%1 is not a guest image manifest Sandcastle understands; rebuild the image")
                .arg(path));
    GuestImage image{o.value(QStringLiteral("kernel")).toString(),
                     o.value(QStringLiteral("initrd")).toString(),
                     o.value(QStringLiteral("base")).toString(),
                     o.value(QStringLiteral("boot_hash")).toString()};
    for (const QString &file : {image.kernel, image.initrd, image.base}) {
        if (!QFileInfo(file).isReadable())
            return fail(
                EngineError::Kind::Unavailable,
                QStringLiteral("guest image file %1 is missing; rebuild the image").arg(file));
    }
    return image;
}

} // namespace sandcastle
