// The VM backend interface. The engine talks to VMs only through this; the
// libvirt implementation is the real one, and tests that must run without
// VMs may use a fake. Calls block: the engine runs them on a thread pool.
#pragma once

#include "../errors.h"
#include "domainspec.h"
#include "domainstate.h"

#include <QList>
#include <QString>

namespace sandcastle {

struct DomainStatus {
    QString name;
    DomainState state = DomainState::Unknown;
};

class Hypervisor {
public:
    virtual ~Hypervisor() = default;

    /// Connects to the hypervisor. Call once before anything else.
    virtual Result<void> open() = 0;

    /// Whether VMs run with hardware acceleration (KVM) or are emulated.
    virtual bool accelerated() const = 0;

    /// Defines and boots a transient domain; returns when QEMU runs.
    virtual Result<void> startDomain(const DomainSpec &spec) = 0;

    /// Stops the domain and waits for its QEMU process to end. A domain
    /// that does not exist is not an error: destroying twice is harmless.
    virtual Result<void> destroyDomain(const QString &name) = 0;

    /// Every domain the hypervisor knows, running or not.
    virtual Result<QList<DomainStatus>> listDomains() = 0;
};

} // namespace sandcastle
