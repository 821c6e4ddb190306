// The guest image's manifest, its age and the warning that asks for an
// update (`sandcastle image update`), and GET /v1/system's JSON for it.
#include "guestimage.h"
#include "json.h"

#include <QDateTime>
#include <QDir>
#include <QFile>
#include <QJsonArray>
#include <QTemporaryDir>
#include <QTest>

using namespace sandcastle;

namespace {

constexpr qint64 kDay = 24ll * 3600 * 1000;

qint64 utc(const char *iso) {
    return QDateTime::fromString(QString::fromLatin1(iso), Qt::ISODate).toMSecsSinceEpoch();
}

const QByteArray kManifest = R"({
  "kernel": "/img/rootfs-0123456789abcdef-20261001T120000Z/vmlinuz",
  "initrd": "/img/boot-fedcba9876543210/initrd.img",
  "base": "/img/rootfs-0123456789abcdef-20261001T120000Z/base.qcow2",
  "kernel_version": "6.1.0-50-amd64",
  "suite": "bookworm",
  "suites": ["bookworm", "bookworm-updates", "bookworm-security"],
  "rootfs": "rootfs-0123456789abcdef-20261001T120000Z",
  "rootfs_hash": "0123456789abcdef",
  "rootfs_built_at": "2026-10-01T12:00:00Z",
  "boot_hash": "fedcba9876543210",
  "format": 1
})";

bool writeFile(const QString &path, const QByteArray &data) {
    QFile f(path);
    return f.open(QIODevice::WriteOnly) && f.write(data) == data.size();
}

} // namespace

class TestGuestImage : public QObject {
    Q_OBJECT
private slots:
    void parsesTheManifest() {
        auto image = GuestImage::parse(kManifest, QStringLiteral("m.json"));
        QVERIFY(image);
        QCOMPARE(image->bootHash, QStringLiteral("fedcba9876543210"));
        QCOMPARE(image->rootfs, QStringLiteral("rootfs-0123456789abcdef-20261001T120000Z"));
        QCOMPARE(image->kernelVersion, QStringLiteral("6.1.0-50-amd64"));
        QCOMPARE(image->suites,
                 QStringList({QStringLiteral("bookworm"), QStringLiteral("bookworm-updates"),
                              QStringLiteral("bookworm-security")}));
        QCOMPARE(image->builtAt, utc("2026-10-01T12:00:00Z"));
        QVERIFY(!image->builtAtEstimated);
    }

    void refusesWhatItDoesNotUnderstand() {
        for (const QByteArray &bad :
             {QByteArray("not json"), QByteArray("{}"), QByteArray(R"({"format": 2})")}) {
            auto image = GuestImage::parse(bad, QStringLiteral("/x/manifest.json"));
            QVERIFY(!image);
            QCOMPARE(image.error().kind, EngineError::Kind::Unavailable);
            QVERIFY(image.error().message.contains(QStringLiteral("/x/manifest.json")));
        }
    }

    // Images built before the builder recorded the time: the base file's
    // time stands in, and the missing security suite is noticed.
    void olderManifestFallsBackToTheBaseFile() {
        QTemporaryDir dir;
        const QString rootfs = dir.path() + QStringLiteral("/rootfs-63f18474a24464eb");
        QVERIFY(QDir().mkpath(rootfs));
        QVERIFY(writeFile(rootfs + QStringLiteral("/base.qcow2"), "qcow"));
        const QDateTime written = QDateTime::fromMSecsSinceEpoch(utc("2026-09-01T08:00:00Z"));
        QFile base(rootfs + QStringLiteral("/base.qcow2"));
        QVERIFY(base.open(QIODevice::ReadWrite));
        QVERIFY(base.setFileTime(written, QFileDevice::FileModificationTime));
        base.close();
        const QByteArray old = QStringLiteral(R"({"kernel": "%1/vmlinuz", "initrd": "i",
            "base": "%1/base.qcow2", "kernel_version": "6.1.0-50-amd64", "suite": "bookworm",
            "rootfs_hash": "63f18474a24464eb", "boot_hash": "ad4a09ace9ac9821", "format": 1})")
                                   .arg(rootfs)
                                   .toUtf8();
        auto image = GuestImage::parse(old, QStringLiteral("m.json"));
        QVERIFY(image);
        QCOMPARE(image->builtAt, written.toMSecsSinceEpoch());
        QVERIFY(image->builtAtEstimated);
        QCOMPARE(image->rootfs, QStringLiteral("rootfs-63f18474a24464eb"));
        QCOMPARE(image->suites, QStringList{QStringLiteral("bookworm")});
        // Young, but without the security suite: still worth an update.
        const QString warning = image->ageWarning(written.toMSecsSinceEpoch() + kDay);
        QVERIFY2(warning.contains(QStringLiteral("without its security suite")),
                 qPrintable(warning));
        QVERIFY(warning.contains(QStringLiteral("sandcastle image update")));
        QVERIFY(image->describe(written.toMSecsSinceEpoch())
                    .contains(QStringLiteral("2026-09-01 or shortly before (today)")));
    }

    void ageAndWarning() {
        auto image = GuestImage::parse(kManifest, QStringLiteral("m.json"));
        QVERIFY(image);
        const qint64 built = image->builtAt;
        QCOMPARE(image->ageDays(built), 0);
        QCOMPARE(image->ageDays(built - kDay), 0); // a clock behind the builder's
        QCOMPARE(image->ageDays(built + kDay - 1), 0);
        QCOMPARE(image->ageDays(built + kDay), 1);
        QVERIFY(image->describe(built + kDay).contains(QStringLiteral("(1 day ago)")));
        QVERIFY(image->describe(built).contains(QStringLiteral("built 2026-10-01 (today)")));
        QVERIFY(image->describe(built).contains(QStringLiteral("bookworm-security")));

        // 30 whole days is still fine; the 31st day is not.
        const qint64 lastFine = built + 31 * kDay - 1;
        QCOMPARE(image->ageDays(lastFine), 30);
        QVERIFY(!image->outdated(lastFine));
        QCOMPARE(image->ageWarning(lastFine), QString());
        const qint64 old = built + 31 * kDay;
        QVERIFY(image->outdated(old));
        const QString warning = image->ageWarning(old);
        QVERIFY2(warning.contains(QStringLiteral("built 31 days ago (2026-10-01), more than 30")),
                 qPrintable(warning));
        QVERIFY(warning.contains(QStringLiteral("`sandcastle image update` (as root)")));
        QVERIFY(warning.contains(QStringLiteral("running ones keep theirs")));

        GuestImage unknown;
        QCOMPARE(unknown.ageDays(old), -1);
        QCOMPARE(unknown.ageWarning(old), QString());
        QVERIFY(unknown.describe(old).startsWith(QStringLiteral("build time unknown")));
    }

    void loadNeedsTheFiles() {
        QTemporaryDir dir;
        QVERIFY(!GuestImage::load(dir.path()));
        QVERIFY(GuestImage::load(dir.path())
                    .error()
                    .message.contains(QStringLiteral("build-image.sh")));
        const QString boot = dir.path() + QStringLiteral("/boot-1");
        QVERIFY(QDir().mkpath(boot));
        QVERIFY(QFile::link(QStringLiteral("boot-1"), dir.path() + QStringLiteral("/current")));
        QByteArray manifest = kManifest;
        manifest.replace("/img/rootfs-0123456789abcdef-20261001T120000Z", boot.toUtf8())
            .replace("/img/boot-fedcba9876543210", boot.toUtf8());
        QVERIFY(writeFile(boot + QStringLiteral("/manifest.json"), manifest));
        auto missing = GuestImage::load(dir.path());
        QVERIFY(!missing);
        QVERIFY(missing.error().message.contains(QStringLiteral("is missing")));
        for (const char *file : {"/vmlinuz", "/initrd.img", "/base.qcow2"})
            QVERIFY(writeFile(boot + QLatin1String(file), "x"));
        auto image = GuestImage::load(dir.path());
        QVERIFY2(image, image ? "" : qPrintable(image.error().message));
        QCOMPARE(image->builtAt, utc("2026-10-01T12:00:00Z"));
    }

    void systemJson() {
        auto image = GuestImage::parse(kManifest, QStringLiteral("m.json"));
        const qint64 now = image->builtAt + 3 * kDay + 5000;
        const QJsonObject o =
            api::systemJson(QStringLiteral("0.3.0"), QStringLiteral("tcg"), image, now);
        QCOMPARE(o.value("object").toString(), QStringLiteral("system"));
        QCOMPARE(o.value("version").toString(), QStringLiteral("0.3.0"));
        QCOMPARE(o.value("accelerator").toString(), QStringLiteral("tcg"));
        const QJsonObject i = o.value("image").toObject();
        QCOMPARE(i.value("built_at").toString(), QStringLiteral("2026-10-01T12:00:00.000Z"));
        QCOMPARE(i.value("age_days").toInt(), 3);
        QCOMPARE(i.value("max_age_days").toInt(), 30);
        QCOMPARE(i.value("built_at_estimated").toBool(), false);
        QCOMPARE(i.value("boot_hash").toString(), QStringLiteral("fedcba9876543210"));
        QCOMPARE(i.value("kernel_version").toString(), QStringLiteral("6.1.0-50-amd64"));
        QCOMPARE(i.value("suites").toArray().size(), 3);
        QCOMPARE(i.value("update_recommended").toBool(), false);
        QCOMPARE(i.value("update_command").toString(), QStringLiteral("sandcastle image update"));
        QVERIFY(!i.contains(QStringLiteral("base"))); // no host paths
        const QJsonObject later =
            api::systemJson({}, {}, image, image->builtAt + 40 * kDay).value("image").toObject();
        QCOMPARE(later.value("age_days").toInt(), 40);
        QCOMPARE(later.value("update_recommended").toBool(), true);

        const QJsonObject none =
            api::systemJson(QStringLiteral("0.3.0"), {},
                            fail(EngineError::Kind::Unavailable, QStringLiteral("no image")), now);
        QVERIFY(none.value("image").isNull());
        QVERIFY(none.value("accelerator").isNull());
    }
};

QTEST_GUILESS_MAIN(TestGuestImage)
#include "tst_guestimage.moc"
