// The engine's C++ API: create a sandbox VM, run commands in it, move files
// in and out, destroy it. Everything is asynchronous: each call returns a
// future that completes on the engine's thread; the event loop never waits
// on a VM. The REST and MCP layers call this and nothing below it.
#pragma once

#include "../errors.h"
#include "../guest/exec.h"
#include "../guestimage.h"
#include "../hypervisor/hypervisor.h"
#include "../sizes.h"
#include "createtrace.h"

#include <QDateTime>
#include <QFuture>
#include <QHash>
#include <QObject>
#include <QThreadPool>

class QFileSystemWatcher;

#include <functional>
#include <memory>

namespace sandcastle {

class GuestChannel;

struct EngineConfig {
    QString dataDir;    // sandboxes/ (overlays, sockets, console logs), libvirt/
    QString imageDir;   // the guest image cache (shared by data dirs)
    QString libvirtUri; // empty: libvirt's embedded QEMU driver under dataDir
    int bootTimeoutMs = 180000;
    int createWarnMs = 15000;           // a create still going after this says so in the log
    int maxBooting = 0;                 // VMs booting at once, the rest wait; 0: the host's cores
    qint64 fileSizeLimit = 100ll << 20; // largest file read or written
    QStringList sandboxDns;             // sandboxes' DNS; empty: the host's resolv.conf
    bool userNamespaces = false;        // unprivileged user namespaces in guests

    /// Defaults: /var/lib/sandcastle for root (QEMU's user must read it),
    /// else ~/.local/share/sandcastle; SANDCASTLE_DATA_DIR,
    /// SANDCASTLE_IMAGE_DIR, SANDCASTLE_LIBVIRT_URI and
    /// SANDCASTLE_CREATE_WARN_MS override.
    static EngineConfig defaults();
};

struct CreateOptions {
    QString size = QStringLiteral("small");
    QString name;
    QString id;           // empty: a new one; the service picks it to record it first
    bool internet = true; // false: no network card at all
};

struct SandboxInfo {
    QString id;
    QString name;
    SandboxSize size;
    QString domainName;
    QString consoleLog;
    bool internet = false;
    QDateTime createdAt;
    qint64 bootMs = 0; // create() to the agent's first answer
};

class Engine : public QObject {
    Q_OBJECT
public:
    explicit Engine(EngineConfig config, QObject *parent = nullptr);
    /// With a given backend (tests); open() then skips the libvirt set-up.
    Engine(EngineConfig config, std::unique_ptr<Hypervisor> hypervisor, QObject *parent = nullptr);
    ~Engine() override;

    /// Connects to the hypervisor and finds the guest image. Blocking; call
    /// at start-up.
    Result<void> open();
    bool accelerated() const;
    QString accelReason() const { return accelReason_; }
    /// Empty when sandboxes can have a network; else why not.
    QString networkProblem() const { return netProblem_; }
    /// Checks the host filter is still loaded and unchanged, and loads it
    /// again if not; if that fails, cuts every sandbox's network (fail
    /// closed). After it failed to load (at start too) it keeps trying, and
    /// once it loads, creates with internet work again. The service calls
    /// it with every reconciliation; a failure is logged once.
    QFuture<Result<void>> checkNetwork();
    /// The resolvers sandboxes get now (the setting, else the host's).
    QStringList dnsServers() const;

    QFuture<Result<SandboxInfo>> create(const CreateOptions &options);
    /// Takes over a sandbox whose VM outlived an earlier run of the app:
    /// reconnects to its agent. Fails if the VM or its agent does not answer.
    /// `internet`: it was created with a network (its passt still runs,
    /// unless open() stopped it: the host filter could not be loaded).
    QFuture<Result<SandboxInfo>> attach(const QString &id, const QString &size, const QString &name,
                                        bool internet, int timeoutMs = 30000);
    QFuture<Result<ExecResult>> exec(const QString &id, const ExecRequest &request);
    QFuture<Result<void>> writeFile(const QString &id, const QString &path, const QByteArray &data);
    QFuture<Result<QByteArray>> readFile(const QString &id, const QString &path);
    /// Stops the VM, deletes its disk and files. Harmless to repeat.
    QFuture<Result<void>> destroy(const QString &id);

    /// Keeps each sandbox's serial console log to about its last 1 MiB on
    /// disk: QEMU appends the guest's console to the file without a bound
    /// (the embedded driver has no log daemon). The service calls it with
    /// its housekeeping.
    void capConsoleLogs();
    static constexpr qint64 kConsoleKeepBytes = 1 << 20;

    /// Every domain the hypervisor knows (off the event loop).
    QFuture<Result<QList<DomainStatus>>> listDomains();
    /// Sandbox folders on disk (sandboxes/<id>), for sweeping strays.
    QStringList sandboxFolders() const;

    QStringList sandboxIds() const { return sandboxes_.keys(); }
    std::optional<SandboxInfo> sandbox(const QString &id) const;
    /// The live channel to a sandbox's agent (tests reach it for raw bytes).
    GuestChannel *channel(const QString &id) const;
    Hypervisor *hypervisor() const { return hypervisor_.get(); }
    const EngineConfig &config() const { return config_; }

    static QString domainNameFor(const QString &id);
    /// The sandbox id of one of our domains, or empty for anyone else's.
    static QString idForDomain(const QString &domainName);
    static QString newId();
    static bool isValidId(const QString &id);
    /// Checks an exec request against the API's limits.
    static Result<void> validate(const ExecRequest &request);

signals:
    /// A create entered a new phase; `what` says what it waits on now.
    void createProgress(const QString &id, const QString &what);
    void sandboxReady(const QString &id);
    void sandboxDestroyed(const QString &id);
    /// The VM went away without being destroyed through the engine.
    void sandboxLost(const QString &id, const QString &reason);

private:
    struct Sandbox;
    Result<Sandbox *> running(const QString &id) const;
    /// Opens the agent channel of a started VM; `finish` gets the outcome.
    void connectAgent(std::shared_ptr<Sandbox> box, int timeoutMs,
                      std::function<void(Result<SandboxInfo>)> finish);
    /// Moves a create to `phase` (any thread): the signal, on this thread.
    void enterPhase(const std::shared_ptr<Sandbox> &box, CreatePhase phase);
    /// Logs when a create is still going `atMs` after it began, then again
    /// at each doubling.
    void watchCreate(const std::shared_ptr<Sandbox> &box, int atMs);
    /// Waits for the guest's first console line (the kernel reached userspace).
    void watchConsole(const std::shared_ptr<Sandbox> &box);
    void stopWatchingConsole(Sandbox &box);
    /// A boot finished (or failed): the next queued create may start.
    void releaseBootSlot();
    QString sandboxDir(const QString &id) const;
    void dropChannel(Sandbox &box);

    EngineConfig config_;
    std::unique_ptr<Hypervisor> hypervisor_;
    bool ownBackend_ = false;
    bool open_ = false;
    QString notOpen_ = QStringLiteral("VMs are not available: the engine is not open");
    QString accelReason_;
    QString netProblem_;
    // The host filter should be loaded but is not (it failed to load, at
    // start or later): no passt may run, and checkNetwork keeps trying.
    bool filterMissing_ = false;
    GuestImage image_;
    QThreadPool pool_;
    QHash<QString, std::shared_ptr<Sandbox>> sandboxes_;
    int booting_ = 0;                        // creates holding a boot slot
    QList<std::function<void()>> bootQueue_; // creates waiting for one
};

} // namespace sandcastle
