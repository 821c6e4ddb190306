// The libvirt backend. By default it embeds libvirt's QEMU driver in this
// process (`qemu:///embed?root=...`): no daemon to install or start.
#pragma once

#include "capscache.h"
#include "hypervisor.h"

#include <QString>

#include <memory>

#include <sys/types.h>

struct _virConnect;

namespace sandcastle {

class LibvirtHypervisor final : public Hypervisor {
public:
    /// `uri` empty means the embedded driver rooted at `embedRoot`.
    LibvirtHypervisor(QString uri, QString embedRoot, bool kvm);
    ~LibvirtHypervisor() override;

    Result<void> open() override;
    bool accelerated() const override { return kvm_; }
    Result<void> startDomain(const DomainSpec &spec) override;
    Result<void> destroyDomain(const QString &name) override;
    Result<QList<DomainStatus>> listDomains() override;

    QString uri() const { return uri_; }
    /// The user QEMU runs as when the app runs as root.
    static constexpr const char *kQemuUser = "libvirt-qemu";

private:
    Result<void> writeEmbedConfig();
    /// Warns when libvirt probed QEMU again (embedded driver only).
    void checkCapabilitiesCache();

    struct ConnDeleter {
        void operator()(_virConnect *c) const;
    };
    QString uri_;
    QString embedRoot_;
    bool kvm_;
    uid_t qemuUid_ = 0; // QEMU's user when we run as root, else 0
    gid_t qemuGid_ = 0;
    std::unique_ptr<_virConnect, ConnDeleter> conn_;
    std::unique_ptr<CapsCacheWatch> caps_;
};

} // namespace sandcastle
