#include "libvirthypervisor.h"

#include "accel.h"

#include <QDir>
#include <QFile>
#include <QStringList>
#include <QtDebug>

#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>

#include <fcntl.h>
#include <grp.h>
#include <mutex>
#include <pwd.h>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>

namespace sandcastle {

namespace {

struct DomainDeleter {
    void operator()(virDomainPtr d) const { virDomainFree(d); }
};
using DomainPtr = std::unique_ptr<virDomain, DomainDeleter>;

QString lastError() {
    const char *msg = virGetLastErrorMessage();
    return msg ? QString::fromUtf8(msg) : QStringLiteral("unknown libvirt error");
}

void ignoreLibvirtErrors(void *, virErrorPtr) {}

/// libvirt's embedded driver needs its default event loop registered and
/// run for the whole life of the connection; one thread for the process.
void startEventLoop(const QString &logFile) {
    static std::once_flag once;
    std::call_once(once, [&] {
        // libvirt logs warnings to stderr by default; keep them in a file.
        const bool ours = !qEnvironmentVariableIsSet("LIBVIRT_LOG_OUTPUTS");
        if (ours)
            qputenv("LIBVIRT_LOG_OUTPUTS", ("3:file:" + logFile).toLocal8Bit());
        virInitialize(); // reads the variable
        // Children (the tools the app starts) must not log into our file.
        if (ours)
            qunsetenv("LIBVIRT_LOG_OUTPUTS");
        virSetErrorFunc(nullptr, ignoreLibvirtErrors); // errors are returned, not printed
        virEventRegisterDefaultImpl();
        std::thread([] {
            for (;;)
                virEventRunDefaultImpl();
        }).detach();
    });
}

} // namespace

void LibvirtHypervisor::ConnDeleter::operator()(_virConnect *c) const {
    virConnectClose(c);
}

LibvirtHypervisor::LibvirtHypervisor(QString uri, QString embedRoot, bool kvm)
    : uri_(std::move(uri))
    , embedRoot_(std::move(embedRoot))
    , kvm_(kvm) {
    if (uri_.isEmpty())
        uri_ = QStringLiteral("qemu:///embed?root=") + embedRoot_;
}

LibvirtHypervisor::~LibvirtHypervisor() = default;

Result<void> LibvirtHypervisor::writeEmbedConfig() {
    if (!QDir().mkpath(embedRoot_ + QStringLiteral("/etc")))
        return fail(EngineError::Kind::Unavailable,
                    QStringLiteral("cannot create %1").arg(embedRoot_));
    QStringList lines = {
        // No virtlogd in embedded mode: QEMU writes its own log files.
        QStringLiteral("stdio_handler = \"file\""),
    };
    if (geteuid() == 0) {
        // QEMU never runs as root: as root we hand it to libvirt's own user.
        passwd *pw = getpwnam(kQemuUser);
        if (!pw)
            return fail(EngineError::Kind::Unavailable,
                        QStringLiteral("user %1 is missing; install the package "
                                       "libvirt-daemon-system (it creates the user QEMU runs as)")
                            .arg(QString::fromLatin1(kQemuUser)));
        group *gr = getgrgid(pw->pw_gid);
        lines << QStringLiteral("user = \"%1\"").arg(QString::fromLatin1(kQemuUser))
              << QStringLiteral("group = \"%1\"").arg(QString::fromUtf8(gr ? gr->gr_name : "kvm"));
        qemuUid_ = pw->pw_uid;
        qemuGid_ = pw->pw_gid;
    }
    // libvirt must not chown shared files (the base image is used by every
    // sandbox, and a killed process would leave it chowned): the engine
    // hands QEMU exactly the per-sandbox overlay, nothing else.
    lines << QStringLiteral("dynamic_ownership = 0") << QStringLiteral("remember_owner = 0");
    QFile conf(embedRoot_ + QStringLiteral("/etc/qemu.conf"));
    if (!conf.open(QIODevice::WriteOnly | QIODevice::Truncate))
        return fail(EngineError::Kind::Unavailable,
                    QStringLiteral("cannot write %1").arg(conf.fileName()));
    conf.write(lines.join(QLatin1Char('\n')).toUtf8() + '\n');
    return {};
}

Result<void> LibvirtHypervisor::open() {
    startEventLoop(embedRoot_ + QStringLiteral(".log"));
    if (uri_.startsWith(QStringLiteral("qemu:///embed"))) {
        if (auto r = writeEmbedConfig(); !r)
            return r;
        caps_ = std::make_unique<CapsCacheWatch>(embedRoot_ +
                                                 QStringLiteral("/cache/qemu/capabilities"));
    }
    virConnectPtr c = virConnectOpen(uri_.toUtf8().constData());
    if (!c)
        return fail(EngineError::Kind::Unavailable,
                    QStringLiteral("cannot open libvirt connection %1: %2").arg(uri_, lastError()));
    conn_.reset(c);
    return {};
}

Result<void> LibvirtHypervisor::startDomain(const DomainSpec &spec) {
    DomainSpec s = spec;
    s.kvm = kvm_;
    // QEMU gets exactly its own disk and network socket, nothing shared.
    // Never through a link: passt's folder belongs to passt's user, who
    // could otherwise point the socket's name at any file root may chown.
    for (const QString &path : {spec.overlay, spec.netSocket}) {
        struct stat st {};
        if (qemuUid_ == 0 || path.isEmpty())
            continue;
        const QByteArray native = path.toLocal8Bit();
        if (::lstat(native.constData(), &st) != 0 || S_ISLNK(st.st_mode) ||
            ::fchownat(AT_FDCWD, native.constData(), qemuUid_, qemuGid_, AT_SYMLINK_NOFOLLOW) != 0)
            return fail(EngineError::Kind::Unavailable,
                        QStringLiteral("cannot hand %1 to QEMU's user").arg(path));
    }
    // The disk is QEMU's alone (qemu-img made it 0644); as root it was
    // checked above not to be a link, and the folder is ours.
    if (::chmod(QFile::encodeName(spec.overlay).constData(), 0600) != 0)
        return fail(EngineError::Kind::Unavailable,
                    QStringLiteral("cannot make %1 private").arg(spec.overlay));
    const QByteArray xml = buildDomainXml(s).toUtf8();
    DomainPtr dom(virDomainCreateXML(conn_.get(), xml.constData(), 0));
    checkCapabilitiesCache();
    if (!dom)
        return fail(EngineError::Kind::Unavailable,
                    QStringLiteral("libvirt could not start the VM: %1").arg(lastError()));
    return {};
}

void LibvirtHypervisor::checkCapabilitiesCache() {
    if (!caps_)
        return;
    // As libvirt judges its cache: may QEMU's user read /dev/kvm?
    std::optional<bool> kvmUsable;
    if (geteuid() == 0)
        kvmUsable = kvmUsableBy(QString::fromLatin1(kQemuUser), QStringLiteral("/dev/kvm"), true);
    else if (QFile::exists(QStringLiteral("/dev/kvm")))
        kvmUsable = ::access("/dev/kvm", R_OK) == 0;
    for (const QString &line : caps_->check(kvmUsable))
        qWarning().noquote() << line;
}

Result<void> LibvirtHypervisor::destroyDomain(const QString &name) {
    DomainPtr dom(virDomainLookupByName(conn_.get(), name.toUtf8().constData()));
    if (!dom)
        return {}; // already gone
    if (virDomainDestroy(dom.get()) != 0) {
        // It may have ended on its own between lookup and destroy.
        if (virDomainIsActive(dom.get()) == 1)
            return fail(EngineError::Kind::Internal,
                        QStringLiteral("could not stop VM %1: %2").arg(name, lastError()));
    }
    if (virDomainIsPersistent(dom.get()) == 1)
        virDomainUndefine(dom.get());
    return {};
}

Result<QList<DomainStatus>> LibvirtHypervisor::listDomains() {
    virDomainPtr *doms = nullptr;
    int n = virConnectListAllDomains(conn_.get(), &doms, 0);
    if (n < 0)
        return fail(EngineError::Kind::Unavailable,
                    QStringLiteral("cannot list VMs: %1").arg(lastError()));
    QList<DomainStatus> out;
    for (int i = 0; i < n; ++i) {
        DomainPtr dom(doms[i]);
        int state = 0, reason = 0;
        DomainStatus st;
        st.name = QString::fromUtf8(virDomainGetName(dom.get()));
        // On failure the state stays Unknown, which ends nothing: the
        // reconciler asks again (docs/engine.md).
        if (virDomainGetState(dom.get(), &state, &reason, 0) == 0)
            st.state = domainStateFromLibvirt(state);
        out.append(st);
    }
    free(doms);
    return out;
}

} // namespace sandcastle
