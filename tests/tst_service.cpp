// The sandbox service and its reconciler against a fake hypervisor, with
// a real engine and a real SQLite record, and no VM: libvirt's answers
// are what the test says they are, so its faults can be had on demand
// (a state libvirt cannot tell, a list that fails, a domain that vanished,
// a boot that hangs while the sandbox is deleted, a record that cannot be
// written). Runs in seconds.
#include "hostresources.h"
#include "hypervisor/hypervisor.h"
#include "sandbox/engine.h"
#include "service/sandboxservice.h"
#include "store/store.h"
#include "support/processes.h"

#include <QJsonDocument>
#include <QJsonObject>
#include <QMutex>
#include <QProcess>
#include <QSemaphore>
#include <QSignalSpy>
#include <QSqlDatabase>
#include <QSqlQuery>
#include <QTemporaryDir>
#include <QTest>

#include <unistd.h>

using namespace sandcastle;

namespace {

/// What the fake hypervisor answers, shared with the test (the engine
/// owns the fake and calls it from its thread pool).
struct Libvirt {
    QMutex mutex;
    QList<DomainStatus> domains;
    bool listFails = false;
    QStringList destroyed;
    int starts = 0;
    bool holdStarts = false;
    QString failStarts; // a start that fails with this message

    QSemaphore released;

    QList<DomainStatus> snapshot() {
        QMutexLocker lock(&mutex);
        return domains;
    }
};

class FakeHypervisor : public Hypervisor {
public:
    explicit FakeHypervisor(std::shared_ptr<Libvirt> libvirt)
        : libvirt_(std::move(libvirt)) {}
    Result<void> open() override { return {}; }
    bool accelerated() const override { return false; }
    Result<void> startDomain(const DomainSpec &spec) override {
        bool hold = false;
        {
            QMutexLocker lock(&libvirt_->mutex);
            ++libvirt_->starts;
            hold = libvirt_->holdStarts;
            if (!libvirt_->failStarts.isEmpty())
                return fail(EngineError::Kind::Unavailable, libvirt_->failStarts);
        }
        if (hold) // a boot that hangs until the test lets it go
            libvirt_->released.acquire();
        QMutexLocker lock(&libvirt_->mutex);
        libvirt_->domains.append({spec.name, DomainState::Running});
        return {};
    }
    Result<void> destroyDomain(const QString &name) override {
        QMutexLocker lock(&libvirt_->mutex);
        libvirt_->domains.removeIf([&](const DomainStatus &d) { return d.name == name; });
        libvirt_->destroyed << name;
        return {};
    }
    Result<QList<DomainStatus>> listDomains() override {
        QMutexLocker lock(&libvirt_->mutex);
        if (libvirt_->listFails)
            return fail(EngineError::Kind::Unavailable,
                        QStringLiteral("internal error: client socket is closed"));
        return libvirt_->domains;
    }

private:
    std::shared_ptr<Libvirt> libvirt_;
};

template <typename T> T await(QFuture<T> f) {
    if (!QTest::qWaitFor([&] { return f.isFinished(); }, 30000))
        qFatal("a future did not finish within 30 s");
    return f.result();
}

} // namespace

class TestService : public QObject {
    Q_OBJECT
private:
    QTemporaryDir dir{QStringLiteral("/tmp/sc-svc-XXXXXX")};
    std::shared_ptr<Libvirt> libvirt;
    std::unique_ptr<Store> store;
    std::unique_ptr<Engine> engine;
    std::unique_ptr<SandboxService> service;
    QString accountId;

    /// A running sandbox in the record, created `minutesAgo` and billed for
    /// its first minute, and its domain in `domain`'s state.
    QString runningSandbox(const QString &id, int minutesAgo, DomainState domain) {
        const qint64 created = nowMs() - minutesAgo * 60'000ll;
        SandboxRecord r;
        r.id = id;
        r.accountId = accountId;
        r.size = QStringLiteral("small");
        r.vcpus = 1;
        r.memoryMiB = 512;
        r.diskGiB = 1;
        r.status = SandboxStatus::Running;
        r.createdAt = created;
        r.expiresAt = created + 24 * 3600 * 1000ll;
        r.timeoutMinutes = 1440;
        r.rateMicrosPerHour = 3'600'000; // 1000 micros a second
        r.chargedUntil = created;
        r.network = QStringLiteral("none");
        if (!store->insertSandbox(r))
            qFatal("insert failed");
        // Billed for its first minute, as a tick would have done then.
        if (!store->meter(created + 60'000))
            qFatal("meter failed");
        QMutexLocker lock(&libvirt->mutex);
        libvirt->domains.append({Engine::domainNameFor(id), domain});
        return id;
    }

    SandboxStatus statusOf(const QString &id) const { return store->sandbox(id)->status; }

    /// A create first checks the host has the size's disk free (8 GiB for
    /// small) under the data dir; a small tmpfs (CI's fresh root) has not.
    bool roomForASandbox() const {
        return freeDiskBytes(dir.path()) >=
               (qint64(findSize(QStringLiteral("small"))->diskGiB) << 30) + (256 << 20);
    }

private slots:
    void initTestCase() {
        QVERIFY(dir.isValid());
        // A guest image the engine accepts; no VM ever boots from it.
        const QString image = dir.path() + QStringLiteral("/image/current");
        QVERIFY(QDir().mkpath(image));
        for (const char *f : {"vmlinuz", "initrd.img"}) {
            QFile file(image + QLatin1Char('/') + QLatin1String(f));
            QVERIFY(file.open(QIODevice::WriteOnly));
        }
        QCOMPARE(QProcess::execute(QStringLiteral("qemu-img"),
                                   {QStringLiteral("create"), QStringLiteral("-q"),
                                    QStringLiteral("-f"), QStringLiteral("qcow2"),
                                    image + QStringLiteral("/base.qcow2"), QStringLiteral("1M")}),
                 0);
        QFile manifest(image + QStringLiteral("/manifest.json"));
        QVERIFY(manifest.open(QIODevice::WriteOnly));
        manifest.write(QJsonDocument(QJsonObject{
                                         {"format", 1},
                                         {"kernel", image + QStringLiteral("/vmlinuz")},
                                         {"initrd", image + QStringLiteral("/initrd.img")},
                                         {"base", image + QStringLiteral("/base.qcow2")},
                                         {"boot_hash", "fake"},
                                     })
                           .toJson());
        manifest.close();

        auto opened = Store::open(dir.path() + QStringLiteral("/sandcastle.db"));
        QVERIFY(opened);
        store = std::move(*opened);
        accountId = store->createAccount(QStringLiteral("t"), 100'000'000)->id;

        libvirt = std::make_shared<Libvirt>();
        // Found at start: one whose state libvirt cannot tell right now.
        runningSandbox(QStringLiteral("sbx_unknownunknownunknow"), 5, DomainState::Unknown);

        EngineConfig config = EngineConfig::defaults();
        config.dataDir = dir.path();
        config.imageDir = dir.path() + QStringLiteral("/image");
        config.bootTimeoutMs = 2000; // the whole boot's deadline is twice this
        engine = std::make_unique<Engine>(config, std::make_unique<FakeHypervisor>(libvirt));
        auto ok = engine->open();
        QVERIFY2(ok, qPrintable(ok ? QString() : ok.error().message));
        Settings settings;
        settings.reconcileIntervalMs = 600'000; // passes run when a test asks
        service = std::make_unique<SandboxService>(engine.get(), store.get(), settings);
        QVERIFY(await(service->start()));
    }

    void aStateLibvirtCannotTellEndsNothing() {
        // Before: anything but Running counted as dead, and a transient
        // libvirt error destroyed a live sandbox.
        const QString id = QStringLiteral("sbx_unknownunknownunknow");
        QCOMPARE(statusOf(id), SandboxStatus::Running);
        QVERIFY(await(service->reconcile()));
        QCOMPARE(statusOf(id), SandboxStatus::Running);
        QVERIFY(libvirt->destroyed.isEmpty());
    }

    void aFailedListEndsNothing() {
        const QString id =
            runningSandbox(QStringLiteral("sbx_listfailslistfailsli"), 3, DomainState::Running);
        libvirt->listFails = true;
        QVERIFY(!await(service->reconcile()));
        libvirt->listFails = false;
        QCOMPARE(statusOf(id), SandboxStatus::Running);
        QVERIFY(libvirt->destroyed.isEmpty());
        // Gone before the next pass, which would try to take it over.
        QVERIFY(await(service->destroy(accountId, id)));
    }

    void aVanishedDomainEndsItsSandboxBilledAsSeen() {
        const QString id =
            runningSandbox(QStringLiteral("sbx_vanishedvanishedvani"), 30, DomainState::Running);
        {
            QMutexLocker lock(&libvirt->mutex);
            libvirt->domains.removeIf(
                [&](const DomainStatus &d) { return d.name == Engine::domainNameFor(id); });
        }
        QVERIFY(await(service->reconcile()));
        QVERIFY(QTest::qWaitFor([&] { return statusOf(id) == SandboxStatus::Error; }, 30000));
        const SandboxRecord r = *store->sandbox(id);
        QVERIFY2(r.statusReason.contains(QLatin1String("gone")), qPrintable(r.statusReason));
        // Seen running for its first minute; when it died is unknown.
        QCOMPARE(r.costMicros, 60'000);
        // The one libvirt could not tell about is still there.
        QCOMPARE(statusOf(QStringLiteral("sbx_unknownunknownunknow")), SandboxStatus::Running);
    }

    void deleteWhileBooting() {
        if (!roomForASandbox())
            QSKIP("less free disk under the data dir than a small sandbox may fill");
        libvirt->holdStarts = true;
        CreateRequest request;
        request.internet = false;
        auto created = service->create(accountId, request);
        QVERIFY(QTest::qWaitFor(
            [&] {
                QMutexLocker lock(&libvirt->mutex);
                return libvirt->starts == 1;
            },
            30000));
        const auto live = *store->liveSandboxes();
        QString id;
        for (const SandboxRecord &r : live)
            if (r.status == SandboxStatus::Creating)
                id = r.id;
        QVERIFY(!id.isEmpty());
        auto deleted = service->destroy(accountId, id);
        libvirt->holdStarts = false;
        libvirt->released.release(); // the hung boot returns now
        auto outcome = await(created);
        QVERIFY(!outcome);
        QCOMPARE(outcome.error().kind, EngineError::Kind::Conflict);
        auto gone = await(deleted);
        QVERIFY2(gone, qPrintable(gone ? QString() : gone.error().message));
        QCOMPARE(gone->status, SandboxStatus::Destroyed);
        QVERIFY(QTest::qWaitFor(
            [&] {
                for (const DomainStatus &d : libvirt->snapshot())
                    if (d.name == Engine::domainNameFor(id))
                        return false;
                return true;
            },
            30000));
        QVERIFY(!QFileInfo::exists(dir.path() + QStringLiteral("/sandboxes/") + id));
    }

    void aHungBootIsGivenUpAndCleanedUp() {
        if (!roomForASandbox())
            QSKIP("less free disk under the data dir than a small sandbox may fill");
        libvirt->holdStarts = true;
        CreateRequest request;
        request.internet = false;
        auto outcome = await(service->create(accountId, request));
        QVERIFY(!outcome);
        QCOMPARE(outcome.error().kind, EngineError::Kind::Timeout);
        QVERIFY2(outcome.error().message.contains(QLatin1String("domain start")),
                 qPrintable(outcome.error().message));
        // The hung step returns later and starts its domain: it is undone.
        libvirt->holdStarts = false;
        libvirt->released.release();
        QVERIFY(QTest::qWaitFor(
            [&] {
                for (const DomainStatus &d : libvirt->snapshot())
                    if (d.state == DomainState::Running &&
                        !d.name.contains(QLatin1String("unknown")))
                        return false;
                return true;
            },
            30000));
    }

    void aFailedStartLeavesNoPasst() {
        if (!roomForASandbox())
            QSKIP("less free disk under the data dir than a small sandbox may fill");
        // With internet, passt runs for the sandbox before its domain
        // starts; a start that fails must not leave it (or the folder).
        if (geteuid() != 0)
            QSKIP("passt runs as sandcastle-net behind the host filter: root only");
        libvirt->failStarts = QStringLiteral("internal error: qemu unexpectedly closed");
        CreateRequest request;
        request.internet = true;
        auto outcome = await(service->create(accountId, request));
        libvirt->failStarts.clear();
        QVERIFY(!outcome);
        // passt sandboxes itself in a user namespace, which a chroot (CI's
        // fresh root) may not create: then there is no passt to leave.
        if (outcome.error().message.contains(QLatin1String("user namespace")))
            QSKIP(qPrintable(QStringLiteral("passt cannot run here: ") + outcome.error().message));
        QVERIFY2(outcome.error().message.contains(QLatin1String("unexpectedly closed")),
                 qPrintable(outcome.error().message));
        const QString sandboxes = dir.path() + QStringLiteral("/sandboxes/");
        QVERIFY(
            QTest::qWaitFor([&] { return testing::passtPidsWith(sandboxes).isEmpty(); }, 30000));
        QVERIFY(QTest::qWaitFor(
            [&] { return QDir(sandboxes).entryList(QDir::Dirs | QDir::NoDotAndDotDot).isEmpty(); },
            30000));
    }

    void aRecordThatCannotBeWrittenStartsNoVm() {
        const int starts = libvirt->starts;
        {
            QSqlDatabase db = QSqlDatabase::addDatabase(QStringLiteral("QSQLITE"), "fault");
            db.setDatabaseName(dir.path() + QStringLiteral("/sandcastle.db"));
            QVERIFY(db.open());
            QVERIFY(QSqlQuery(db).exec(
                QStringLiteral("CREATE TRIGGER full BEFORE INSERT ON sandboxes BEGIN SELECT "
                               "RAISE(ABORT, 'no room'); END")));
            db.close();
        }
        QSqlDatabase::removeDatabase("fault");
        CreateRequest request;
        request.internet = false;
        auto refused = await(service->create(accountId, request));
        QVERIFY(!refused);
        QCOMPARE(libvirt->starts, starts);
    }

    void aTickIsOneSignalForAll() {
        // Before, each tick emitted sandboxChanged for every live sandbox,
        // and the window read the record once per emission.
        QVERIFY(!store->liveSandboxes()->isEmpty());
        QSignalSpy changed(service.get(), &SandboxService::sandboxChanged);
        QSignalSpy ticked(service.get(), &SandboxService::liveTicked);
        service->tick();
        QVERIFY(ticked.size() >= 1); // the service's own clock may tick too
        QCOMPARE(changed.size(), 0);
    }

    void cleanupTestCase() {
        service.reset();
        engine.reset();
    }
};

QTEST_GUILESS_MAIN(TestService)
#include "tst_service.moc"
