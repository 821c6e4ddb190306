#include "engine.h"

#include "../agent/protocol.h"
#include "../async.h"
#include "../guest/guestchannel.h"
#include "../hostresources.h"
#include "../hypervisor/accel.h"
#include "../hypervisor/libvirthypervisor.h"
#include "../hypervisor/reaper.h"
#include "../network/egress.h"

#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QFileInfo>
#include <QFileSystemWatcher>
#include <QProcess>
#include <QRandomGenerator>
#include <QRegularExpression>
#include <QThread>
#include <QTimer>
#include <QtDebug>

#include <algorithm>
#include <fcntl.h>
#include <linux/falloc.h>
#include <sys/stat.h>
#include <unistd.h>

namespace sandcastle {

using Kind = EngineError::Kind;

struct Engine::Sandbox {
    enum class State { Creating, Running, Destroying };
    SandboxInfo info;
    State state = State::Creating;
    GuestChannel *channel = nullptr;       // owned by the engine (QObject child)
    CreateTrace trace;                     // of the create
    QFileSystemWatcher *console = nullptr; // while waiting for the first console line
    bool createFinished = false;           // the create's outcome was given
};

namespace {

/// A sandbox's folder and what may still use it (any thread).
void removeSandboxFolder(const QString &dir) {
    // passt ends with its QEMU; this covers a create that failed before.
    egress::stopPasst(dir);
    QDir(dir).removeRecursively();
}

Result<void> createOverlay(const QString &base, const QString &overlay, int diskGiB) {
    QProcess p;
    p.start(QStringLiteral("qemu-img"),
            {QStringLiteral("create"), QStringLiteral("-q"), QStringLiteral("-f"),
             QStringLiteral("qcow2"), QStringLiteral("-F"), QStringLiteral("qcow2"),
             QStringLiteral("-b"), base, overlay, QStringLiteral("%1G").arg(diskGiB)});
    if (!p.waitForFinished(60000) || p.exitStatus() != QProcess::NormalExit || p.exitCode() != 0)
        return fail(Kind::Unavailable,
                    QStringLiteral("could not create the sandbox disk: %1 %2")
                        .arg(p.errorString(), QString::fromUtf8(p.readAllStandardError())));
    return {};
}

/// Frees all but about the last `keep` bytes of a file that another process
/// appends to (O_APPEND), when more than twice that is on disk. Collapsing
/// the head keeps the file short; where the filesystem cannot, punching it
/// out frees the blocks and leaves a hole (the size stays, the disk use
/// does not). Both are atomic against the appends.
void trimHead(const QString &path, qint64 keep) {
    const int fd = ::open(QFile::encodeName(path).constData(), O_RDWR | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return;
    struct stat st {};
    if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && qint64(st.st_blocks) * 512 > 2 * keep &&
        st.st_size > keep) {
        const off_t block = st.st_blksize > 0 ? st.st_blksize : 4096;
        const off_t cut = (st.st_size - keep) / block * block;
        if (cut > 0 && ::fallocate(fd, FALLOC_FL_COLLAPSE_RANGE, 0, cut) != 0)
            ::fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, cut);
    }
    ::close(fd);
}

} // namespace

EngineConfig EngineConfig::defaults() {
    EngineConfig c;
    const QString home =
        qEnvironmentVariable("XDG_DATA_HOME", QDir::homePath() + QStringLiteral("/.local/share"));
    const QString base = geteuid() == 0 ? QStringLiteral("/var/lib/sandcastle")
                                        : home + QStringLiteral("/sandcastle");
    c.dataDir = qEnvironmentVariable("SANDCASTLE_DATA_DIR", base);
    c.imageDir = qEnvironmentVariable("SANDCASTLE_IMAGE_DIR", base + QStringLiteral("/images"));
    c.libvirtUri = qEnvironmentVariable("SANDCASTLE_LIBVIRT_URI");
    bool ok = false;
    const int warnMs = qEnvironmentVariableIntValue("SANDCASTLE_CREATE_WARN_MS", &ok);
    if (ok && warnMs > 0)
        c.createWarnMs = warnMs;
    return c;
}

Engine::Engine(EngineConfig config, QObject *parent)
    : QObject(parent)
    , config_(std::move(config))
    , ownBackend_(true) {
    pool_.setMaxThreadCount(4);
}

Engine::Engine(EngineConfig config, std::unique_ptr<Hypervisor> hypervisor, QObject *parent)
    : QObject(parent)
    , config_(std::move(config))
    , hypervisor_(std::move(hypervisor)) {
    pool_.setMaxThreadCount(4);
}

Engine::~Engine() {
    // VMs outlive the engine on purpose (a restart keeps them); the pool's
    // pending libvirt calls must finish before the backend goes away.
    pool_.waitForDone();
}

bool Engine::accelerated() const {
    return hypervisor_ && hypervisor_->accelerated();
}

Result<void> Engine::open() {
    QDir data(config_.dataDir);
    if (!data.mkpath(QStringLiteral("sandboxes")))
        return fail(Kind::Unavailable, QStringLiteral("cannot create %1").arg(config_.dataDir));
    // QEMU may run as another user (libvirt-qemu): it must reach the
    // per-sandbox folders, though it may not list them.
    for (const QString &dir : {config_.dataDir, config_.dataDir + QStringLiteral("/sandboxes")})
        QFile::setPermissions(dir, QFile::ReadOwner | QFile::WriteOwner | QFile::ExeOwner |
                                       QFile::ExeGroup | QFile::ExeOther);
    // So must every folder above it (QEMU's user and passt's): say which
    // one does not let them through, rather than fail at the first create.
    if (geteuid() == 0) {
        for (QDir up(QDir(config_.dataDir).absolutePath()); up.cdUp();) {
            if (!QFileInfo(up.path()).permission(QFile::ExeOther)) {
                notOpen_ = QStringLiteral("the data dir %1 is inside %2, which other users "
                                          "cannot enter; QEMU and passt run as other users: "
                                          "choose another SANDCASTLE_DATA_DIR or chmod o+x %2")
                               .arg(config_.dataDir, up.path());
                return fail(Kind::Unavailable, notOpen_);
            }
        }
    }
    auto image = GuestImage::load(config_.imageDir);
    if (!image) {
        notOpen_ = image.error().message;
        return std::unexpected(image.error());
    }
    image_ = *image;
    if (ownBackend_) {
        // QEMU and passt detach from us; we, not a PID 1 that may reap
        // late, must reap them (docs/engine.md).
        adoptOrphans();
        const QString qemuUser = QString::fromLatin1(LibvirtHypervisor::kQemuUser);
        if (geteuid() == 0) {
            // Before libvirt's first probe: it and QEMU must agree on KVM.
            if (QString note = ensureKvmAccess(qemuUser); !note.isEmpty())
                qWarning().noquote() << note;
        }
        AccelProbe accel = probeAccel();
        if (accel.kvm && geteuid() == 0 && kvmUsableBy(qemuUser) == false)
            accel = {false, QStringLiteral("QEMU's user %1 cannot open /dev/kvm: VMs are emulated")
                                .arg(qemuUser)};
        accelReason_ = accel.reason;
        hypervisor_ = std::make_unique<LibvirtHypervisor>(
            config_.libvirtUri, config_.dataDir + QStringLiteral("/libvirt"), accel.kvm);
    }
    auto opened = hypervisor_->open();
    open_ = opened.has_value();
    if (!opened)
        notOpen_ = opened.error().message;
    if (open_ && ownBackend_) {
        if (auto filter = egress::installHostFilter(dnsServers()); !filter) {
            netProblem_ = filter.error().message;
            // Fail closed from the start: the passt of a sandbox that ran
            // on from the last run would send its traffic unfiltered. Its
            // network is cut, as when the filter goes away later. As root
            // the filter may load later (nft fixed, its modules back):
            // checkNetwork keeps trying.
            filterMissing_ = geteuid() == 0;
            for (const QString &id : sandboxFolders())
                egress::stopPasst(sandboxDir(id));
        }
    }
    return opened;
}

QStringList Engine::dnsServers() const {
    // Read at every create: a laptop that moves changes its resolvers.
    return config_.sandboxDns.isEmpty() ? egress::hostDnsServers() : config_.sandboxDns;
}

QFuture<Result<void>> Engine::checkNetwork() {
    if (!open_ || !ownBackend_ || (!netProblem_.isEmpty() && !filterMissing_))
        return readyFuture<Result<void>>({});
    QStringList dirs;
    for (const auto &box : std::as_const(sandboxes_)) {
        if (box->info.internet)
            dirs << sandboxDir(box->info.id);
    }
    // No passt runs: nothing to guard (every create checks for itself).
    if (dirs.isEmpty() && !filterMissing_)
        return readyFuture<Result<void>>({});
    return runInPool(&pool_,
                     [dns = dnsServers(), dirs] {
                         auto r = egress::ensureHostFilter(dns);
                         // Fail closed: without the filter no sandbox keeps a
                         // way out. Off the event loop: without a pid file,
                         // stopPasst reads every process's command line.
                         if (!r) {
                             for (const QString &dir : dirs)
                                 egress::stopPasst(dir);
                         }
                         return r;
                     })
        .then(this, [this](Result<void> r) -> Result<void> {
            if (r) {
                if (filterMissing_) {
                    netProblem_.clear();
                    qInfo().noquote() << "host filter: loaded; sandboxes can have internet "
                                         "access again";
                }
                filterMissing_ = false;
                return r;
            }
            const QString problem = QStringLiteral("the host filter is not loaded and cannot be "
                                                   "loaded (%1); sandbox networks were cut")
                                        .arg(r.error().message);
            if (problem != netProblem_) // once, not at every check while it lasts
                qWarning().noquote() << "sandbox networking:" << problem;
            filterMissing_ = true;
            netProblem_ = problem;
            return fail(r.error().kind, problem);
        });
}

QString Engine::domainNameFor(const QString &id) {
    return QStringLiteral("sandcastle-") + id;
}

QString Engine::idForDomain(const QString &domainName) {
    static const QString prefix = QStringLiteral("sandcastle-");
    if (!domainName.startsWith(prefix))
        return {};
    const QString id = domainName.mid(prefix.size());
    return isValidId(id) ? id : QString();
}

QString Engine::newId() {
    // 20 base32 characters: 100 random bits, safe in paths and domain names.
    static const char alphabet[] = "abcdefghijklmnopqrstuvwxyz234567";
    QString id = QStringLiteral("sbx_");
    for (int i = 0; i < 20; ++i)
        id += QLatin1Char(alphabet[QRandomGenerator::system()->bounded(32)]);
    return id;
}

bool Engine::isValidId(const QString &id) {
    static const QRegularExpression re(QStringLiteral("^sbx_[a-z2-7]{20}$"));
    return re.match(id).hasMatch();
}

QString Engine::sandboxDir(const QString &id) const {
    return config_.dataDir + QStringLiteral("/sandboxes/") + id;
}

std::optional<SandboxInfo> Engine::sandbox(const QString &id) const {
    auto it = sandboxes_.find(id);
    if (it == sandboxes_.end())
        return std::nullopt;
    return (*it)->info;
}

GuestChannel *Engine::channel(const QString &id) const {
    auto it = sandboxes_.find(id);
    return it == sandboxes_.end() ? nullptr : (*it)->channel;
}

Result<Engine::Sandbox *> Engine::running(const QString &id) const {
    if (!open_)
        return fail(Kind::Unavailable, notOpen_);
    auto it = sandboxes_.find(id);
    if (it == sandboxes_.end())
        return fail(Kind::NotFound, QStringLiteral("no sandbox %1").arg(id));
    if ((*it)->state != Sandbox::State::Running)
        return fail(Kind::Conflict, QStringLiteral("sandbox %1 is %2, not running")
                                        .arg(id, (*it)->state == Sandbox::State::Creating
                                                     ? QStringLiteral("still starting")
                                                     : QStringLiteral("being destroyed")));
    return it->get();
}

QFuture<Result<SandboxInfo>> Engine::create(const CreateOptions &options) {
    auto size = findSize(options.size);
    if (!size)
        return failedFuture<SandboxInfo>(
            Kind::InvalidArgument,
            QStringLiteral("unknown size '%1': use small, medium or large").arg(options.size));
    if (!open_)
        return failedFuture<SandboxInfo>(Kind::Unavailable, notOpen_);
    if (options.internet && !netProblem_.isEmpty())
        return failedFuture<SandboxInfo>(
            Kind::Unavailable,
            QStringLiteral("sandboxes cannot have internet access here: %1 (a sandbox "
                           "with network \"none\" can still be created)")
                .arg(netProblem_));

    if (auto room =
            checkRoomFor(*size, config_.dataDir, hostMemory(), freeDiskBytes(config_.dataDir));
        !room)
        return failedFuture<SandboxInfo>(room.error());
    if (!options.id.isEmpty() && (!isValidId(options.id) || sandboxes_.contains(options.id)))
        return failedFuture<SandboxInfo>(
            Kind::InvalidArgument,
            QStringLiteral("sandbox id %1 is malformed or taken").arg(options.id.left(64)));
    // `sandcastle image update` moves `current` while the service runs: new
    // sandboxes take the new image without a restart; running ones keep the
    // files they started on (the builder never deletes a layer).
    if (auto latest = GuestImage::load(config_.imageDir);
        latest && latest->bootHash != image_.bootHash) {
        qInfo().noquote() << "guest image changed: new sandboxes use" << latest->rootfs
                          << "(boot layer" << latest->bootHash + QStringLiteral(")");
        image_ = *latest;
    }
    auto box = std::make_shared<Sandbox>();
    SandboxInfo &info = box->info;
    info.id = options.id.isEmpty() ? newId() : options.id;
    info.name = options.name;
    info.size = *size;
    info.internet = options.internet;
    info.domainName = domainNameFor(info.id);
    info.createdAt = QDateTime::currentDateTimeUtc();
    const QString dir = sandboxDir(info.id);
    info.consoleLog = dir + QStringLiteral("/console.log");
    const QString socket = dir + QStringLiteral("/agent.sock");
    const QString longest = egress::passtSocket(dir);
    if (longest.toLocal8Bit().size() > 107)
        return failedFuture<SandboxInfo>(
            Kind::Unavailable,
            QStringLiteral("the data folder's path is too long for a UNIX socket "
                           "(%1); choose a shorter SANDCASTLE_DATA_DIR")
                .arg(longest));
    if (!QDir().mkpath(dir))
        return failedFuture<SandboxInfo>(Kind::Unavailable,
                                         QStringLiteral("cannot create %1").arg(dir));
    // 0711: QEMU's and passt's users pass through to what they were given;
    // nobody else lists it or reads the disk (docs/security.md).
    QFile::setPermissions(dir, QFile::ReadOwner | QFile::WriteOwner | QFile::ExeOwner |
                                   QFile::ExeGroup | QFile::ExeOther);
    sandboxes_.insert(info.id, box);

    DomainSpec spec;
    spec.name = info.domainName;
    spec.vcpus = size->vcpus;
    spec.memoryMiB = size->memoryMiB;
    spec.kernel = image_.kernel;
    spec.initrd = image_.initrd;
    spec.cmdline = guestKernelCmdline(hypervisor_->accelerated());
    if (config_.userNamespaces)
        spec.cmdline += QStringLiteral(" sandcastle.userns=1");
    spec.base = image_.base;
    spec.overlay = dir + QStringLiteral("/disk.qcow2");
    spec.consoleLog = info.consoleLog;
    spec.agentSocket = socket;
    spec.agentPortName = QString::fromLatin1(proto::kPortName);
    spec.qgaSocket = qEnvironmentVariableIsSet("SANDCASTLE_BENCH_QGA")
                         ? dir + QStringLiteral("/qga.sock")
                         : QString();

    auto promise = std::make_shared<QPromise<Result<SandboxInfo>>>();
    promise->start();
    // Called once per create, always after `boot` took a slot.
    auto finish = [this, promise, box](Result<SandboxInfo> r) {
        // The boot deadline may have answered already; the late outcome of
        // the step it gave up on changes nothing then.
        if (std::exchange(box->createFinished, true))
            return;
        stopWatchingConsole(*box);
        releaseBootSlot();
        if (r)
            qInfo().noquote() << "created" << box->info.id << "in" << box->trace.elapsedMs()
                              << "ms:" << box->trace.summary();
        else
            qWarning().noquote() << "create" << box->info.id << "failed in"
                                 << phaseName(box->trace.current()) << "after"
                                 << box->trace.elapsedMs()
                                 << "ms (" + box->trace.summary() + "):" << r.error().message;
        if (!r) {
            // Leave nothing behind: no domain, no overlay, no record.
            const QString id = box->info.id;
            dropChannel(*box);
            sandboxes_.remove(id);
            Hypervisor *hv = hypervisor_.get();
            const QString domain = box->info.domainName;
            runInPool(&pool_, [hv, domain, dir = sandboxDir(id)] {
                auto r = hv->destroyDomain(domain);
                removeSandboxFolder(dir);
                return r;
            });
        }
        promise->addResult(std::move(r));
        promise->finish();
    };

    Hypervisor *hv = hypervisor_.get();
    const int diskGiB = size->diskGiB;
    const QStringList dns = options.internet ? dnsServers() : QStringList();
    // The guest's boot script points its resolver at these and lets DNS
    // to them (and only them) through its own rules.
    if (!dns.isEmpty())
        spec.cmdline += QStringLiteral(" sandcastle.dns=") + dns.join(QLatin1Char(','));
    qInfo().noquote() << "creating" << info.id << "(" + size->name + ","
                      << (options.internet ? "internet)" : "no network)");
    watchCreate(box, config_.createWarnMs);
    auto boot = [this, box, finish, hv, spec, diskGiB, dir, dns, internet = options.internet] {
        if (box->state == Sandbox::State::Destroying) {
            finish(fail(Kind::Conflict, QStringLiteral("destroyed while it waited to boot")));
            return;
        }
        // Checked again now: the boots before this one, queued behind the
        // same look at the host, have taken their memory since.
        if (auto room = checkRoomFor(box->info.size, config_.dataDir, hostMemory(),
                                     freeDiskBytes(config_.dataDir));
            !room) {
            finish(std::unexpected(room.error()));
            return;
        }
        // A step that hangs (libvirt, qemu-img) must not hold the boot slot
        // for ever, or every later create would wait behind it. The agent's
        // own wait is bootTimeoutMs; this is the whole boot's.
        QTimer::singleShot(
            2 * config_.bootTimeoutMs, this, [box, finish, ms = 2 * config_.bootTimeoutMs] {
                if (box->createFinished)
                    return;
                // What the hung step still does is undone when it returns.
                box->state = Sandbox::State::Destroying;
                finish(fail(Kind::Timeout,
                            QStringLiteral("the boot did not finish within %1 s (stuck in %2)")
                                .arg(ms / 1000)
                                .arg(phaseName(box->trace.current()))));
            });
        enterPhase(box, CreatePhase::Overlay);
        runInPool(&pool_,
                  [this, box, hv, spec, diskGiB, dir, dns, internet]() mutable -> Result<void> {
                      if (auto r = createOverlay(spec.base, spec.overlay, diskGiB); !r)
                          return r;
                      if (internet) {
                          // Never a passt without the filter: it may have been
                          // flushed since the last check, or a resolver is new.
                          enterPhase(box, CreatePhase::HostFilter);
                          if (auto r = egress::ensureHostFilter(dns); !r)
                              return r;
                          enterPhase(box, CreatePhase::Passt);
                          auto socket = egress::startPasst(dir);
                          if (!socket)
                              return std::unexpected(socket.error());
                          spec.netSocket = *socket;
                      }
                      enterPhase(box, CreatePhase::DomainStart);
                      return hv->startDomain(spec);
                  })
            .then(this, [this, box, hv, finish](Result<void> started) {
                if (box->createFinished) {
                    // Given up on by the boot deadline: what this step made
                    // since (a domain, a passt) goes too.
                    if (started)
                        runInPool(&pool_, [hv, domain = box->info.domainName,
                                           dir = sandboxDir(box->info.id)] {
                            auto r = hv->destroyDomain(domain);
                            removeSandboxFolder(dir);
                            return r;
                        });
                    return;
                }
                if (started && box->state == Sandbox::State::Destroying)
                    started =
                        fail(Kind::Conflict, QStringLiteral("destroyed while it was starting"));
                if (!started) {
                    finish(std::unexpected(started.error()));
                    return;
                }
                enterPhase(box, CreatePhase::Kernel);
                watchConsole(box);
                connectAgent(box, config_.bootTimeoutMs, [box, finish](Result<SandboxInfo> r) {
                    box->info.bootMs = box->trace.elapsedMs();
                    if (r)
                        r->bootMs = box->info.bootMs;
                    finish(std::move(r));
                });
            });
    };
    // Under emulation a boot storm takes the CPU that running commands
    // need: at most so many boots at once, the rest wait their turn.
    const int bootSlots = config_.maxBooting > 0 ? config_.maxBooting : QThread::idealThreadCount();
    if (booting_ < bootSlots) {
        ++booting_;
        boot();
    } else {
        enterPhase(box, CreatePhase::Queue);
        bootQueue_.append(std::move(boot));
    }
    return promise->future();
}

void Engine::releaseBootSlot() {
    --booting_;
    if (bootQueue_.isEmpty())
        return;
    ++booting_;
    // Not from inside the create that just ended: from the event loop.
    QMetaObject::invokeMethod(this, bootQueue_.takeFirst(), Qt::QueuedConnection);
}

void Engine::enterPhase(const std::shared_ptr<Sandbox> &box, CreatePhase phase) {
    box->trace.enter(phase);
    QMetaObject::invokeMethod(
        this,
        [this, box, phase] {
            if (box->state == Sandbox::State::Creating && box->trace.current() == phase)
                emit createProgress(box->info.id, phaseDescription(phase));
        },
        Qt::QueuedConnection);
}

void Engine::watchCreate(const std::shared_ptr<Sandbox> &box, int atMs) {
    // Timed from the create's start: warnings at 1x, 2x, 4x ... the threshold.
    const qint64 wait = std::max<qint64>(0, atMs - box->trace.elapsedMs());
    QTimer::singleShot(int(wait), this, [this, box, atMs] {
        if (box->state != Sandbox::State::Creating || sandboxes_.value(box->info.id) != box)
            return;
        qWarning().noquote() << "create" << box->info.id
                             << "is slow:" << box->trace.elapsedMs() / 1000
                             << "s so far, waiting on" << phaseName(box->trace.current()) << "for"
                             << box->trace.inPhaseMs() / 1000 << "s (" + box->trace.summary() + ")";
        watchCreate(box, atMs * 2);
    });
}

void Engine::watchConsole(const std::shared_ptr<Sandbox> &box) {
    // QEMU appends the guest's serial console to this file; the
    // initramfs's first line means the kernel is up.
    box->console = new QFileSystemWatcher(this);
    auto check = [this, box] {
        if (QFileInfo(box->info.consoleLog).size() == 0)
            return;
        if (box->trace.current() == CreatePhase::Kernel)
            enterPhase(box, CreatePhase::Agent);
        stopWatchingConsole(*box);
    };
    connect(box->console, &QFileSystemWatcher::fileChanged, this, check);
    box->console->addPath(box->info.consoleLog);
    check();
}

void Engine::stopWatchingConsole(Sandbox &box) {
    if (!box.console)
        return;
    box.console->disconnect(this); // this may run inside its own signal
    box.console->deleteLater();
    box.console = nullptr;
}

void Engine::connectAgent(std::shared_ptr<Sandbox> box, int timeoutMs,
                          std::function<void(Result<SandboxInfo>)> finish) {
    const QString id = box->info.id;
    box->channel = new GuestChannel(sandboxDir(id) + QStringLiteral("/agent.sock"), this);
    connect(box->channel, &GuestChannel::lost, this, [this, id](const QString &reason) {
        auto it = sandboxes_.find(id);
        if (it != sandboxes_.end() && (*it)->state == Sandbox::State::Running)
            emit sandboxLost(id, reason);
    });
    box->channel->connectToAgent(timeoutMs).then(
        this, [this, box, finish = std::move(finish)](Result<QString> hello) {
            if (box->state == Sandbox::State::Destroying) {
                finish(fail(Kind::Conflict, QStringLiteral("destroyed while it was starting")));
                return;
            }
            if (!hello) {
                EngineError e = hello.error();
                e.message += QStringLiteral(" (console log: %1)").arg(box->info.consoleLog);
                finish(std::unexpected(e));
                return;
            }
            box->state = Sandbox::State::Running;
            emit sandboxReady(box->info.id);
            finish(box->info);
        });
}

QFuture<Result<SandboxInfo>> Engine::attach(const QString &id, const QString &size,
                                            const QString &name, bool internet, int timeoutMs) {
    auto found = findSize(size);
    if (!isValidId(id) || !found || sandboxes_.contains(id))
        return failedFuture<SandboxInfo>(
            Kind::InvalidArgument, QStringLiteral("cannot attach sandbox %1").arg(id.left(64)));
    if (!open_)
        return failedFuture<SandboxInfo>(Kind::Unavailable, notOpen_);
    auto box = std::make_shared<Sandbox>();
    box->info.id = id;
    box->info.name = name;
    box->info.size = *found;
    box->info.internet = internet;
    box->info.domainName = domainNameFor(id);
    box->info.consoleLog = sandboxDir(id) + QStringLiteral("/console.log");
    sandboxes_.insert(id, box);
    auto promise = std::make_shared<QPromise<Result<SandboxInfo>>>();
    promise->start();
    connectAgent(box, timeoutMs, [this, box, promise](Result<SandboxInfo> r) {
        if (!r && sandboxes_.value(box->info.id) == box) {
            // The caller decides whether to destroy the VM; only forget it.
            dropChannel(*box);
            sandboxes_.remove(box->info.id);
        }
        promise->addResult(std::move(r));
        promise->finish();
    });
    return promise->future();
}

Result<void> Engine::validate(const ExecRequest &request) {
    if (request.command.trimmed().isEmpty())
        return fail(Kind::InvalidArgument, QStringLiteral("command must not be empty"));
    if (request.command.contains(QChar(0)))
        return fail(Kind::InvalidArgument,
                    QStringLiteral("command must not contain NUL characters"));
    if (request.timeoutMs < 1 || request.timeoutMs > 3600000)
        return fail(Kind::InvalidArgument,
                    QStringLiteral("timeout_ms must be between 1 and 3600000"));
    if (!request.cwd.isEmpty() && !request.cwd.startsWith(QLatin1Char('/')))
        return fail(Kind::InvalidArgument, QStringLiteral("cwd must be an absolute path"));
    static const QRegularExpression name(QStringLiteral("^[A-Za-z_][A-Za-z0-9_]{0,127}$"));
    for (const auto &[key, value] : request.env) {
        if (!name.match(key).hasMatch())
            return fail(
                Kind::InvalidArgument,
                QStringLiteral("env name '%1' is not a valid variable name").arg(key.left(64)));
        if (value.contains(QChar(0)))
            return fail(Kind::InvalidArgument,
                        QStringLiteral("env value of %1 contains NUL").arg(key));
    }
    if (request.outputCap < 0 || request.outputCap > (64ll << 20))
        return fail(Kind::InvalidArgument, QStringLiteral("output cap out of range"));
    return {};
}

QFuture<Result<ExecResult>> Engine::exec(const QString &id, const ExecRequest &request) {
    auto box = running(id);
    if (!box)
        return failedFuture<ExecResult>(box.error());
    if (auto ok = validate(request); !ok)
        return failedFuture<ExecResult>(ok.error());
    return (*box)->channel->exec(request);
}

QFuture<Result<void>> Engine::writeFile(const QString &id, const QString &path,
                                        const QByteArray &data) {
    auto box = running(id);
    if (!box)
        return failedFuture<void>(box.error());
    if (!path.startsWith(QLatin1Char('/')) || path.contains(QChar(0)))
        return failedFuture<void>(Kind::InvalidArgument, QStringLiteral("path must be absolute"));
    if (data.size() > config_.fileSizeLimit)
        return failedFuture<void>(
            Kind::TooLarge,
            QStringLiteral("files are limited to %1 bytes").arg(config_.fileSizeLimit));
    return (*box)->channel->writeFile(path, data).then(this, [](Result<qint64> r) -> Result<void> {
        if (!r)
            return std::unexpected(r.error());
        return {};
    });
}

QFuture<Result<QByteArray>> Engine::readFile(const QString &id, const QString &path) {
    auto box = running(id);
    if (!box)
        return failedFuture<QByteArray>(box.error());
    if (!path.startsWith(QLatin1Char('/')) || path.contains(QChar(0)))
        return failedFuture<QByteArray>(Kind::InvalidArgument,
                                        QStringLiteral("path must be absolute"));
    return (*box)->channel->readFile(path, config_.fileSizeLimit);
}

QFuture<Result<void>> Engine::destroy(const QString &id) {
    if (!isValidId(id))
        return failedFuture<void>(Kind::NotFound, QStringLiteral("no sandbox %1").arg(id.left(64)));
    if (!open_)
        return failedFuture<void>(Kind::Unavailable, notOpen_);
    auto it = sandboxes_.find(id);
    if (it != sandboxes_.end()) {
        (*it)->state = Sandbox::State::Destroying;
        dropChannel(**it);
    }
    Hypervisor *hv = hypervisor_.get();
    const QString domain = domainNameFor(id);
    // Off the event loop: removing a disk of gigabytes, and finding a
    // passt among every process, take their time.
    return runInPool(&pool_,
                     [hv, domain, dir = sandboxDir(id)] {
                         auto r = hv->destroyDomain(domain);
                         if (r)
                             removeSandboxFolder(dir);
                         return r;
                     })
        .then(this, [this, id](Result<void> r) -> Result<void> {
            if (!r)
                return r;
            if (sandboxes_.remove(id))
                emit sandboxDestroyed(id);
            return {};
        });
}

void Engine::capConsoleLogs() {
    for (const auto &box : std::as_const(sandboxes_))
        trimHead(box->info.consoleLog, kConsoleKeepBytes);
}

QFuture<Result<QList<DomainStatus>>> Engine::listDomains() {
    if (!open_)
        return failedFuture<QList<DomainStatus>>(Kind::Unavailable, notOpen_);
    Hypervisor *hv = hypervisor_.get();
    return runInPool(&pool_, [hv] { return hv->listDomains(); });
}

QStringList Engine::sandboxFolders() const {
    QStringList out;
    for (const QString &name : QDir(config_.dataDir + QStringLiteral("/sandboxes"))
                                   .entryList(QDir::Dirs | QDir::NoDotAndDotDot)) {
        if (isValidId(name))
            out << name;
    }
    return out;
}

void Engine::dropChannel(Sandbox &box) {
    if (!box.channel)
        return;
    // This may run inside the channel's own `lost` signal (a VM that died
    // is destroyed right away): the channel must outlive this call.
    box.channel->disconnect(this);
    box.channel->disconnectFromAgent(); // pending operations fail now
    box.channel->deleteLater();
    box.channel = nullptr;
}

} // namespace sandcastle
