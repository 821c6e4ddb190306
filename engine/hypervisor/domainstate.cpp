#include "domainstate.h"

#include <libvirt/libvirt.h>

namespace sandcastle {

DomainState domainStateFromLibvirt(int virState) {
    switch (virState) {
    case VIR_DOMAIN_RUNNING:
    case VIR_DOMAIN_BLOCKED:
    case VIR_DOMAIN_PAUSED: // libvirt pauses briefly around some operations
    case VIR_DOMAIN_PMSUSPENDED:
        return DomainState::Running;
    case VIR_DOMAIN_SHUTDOWN:
        return DomainState::Stopping;
    case VIR_DOMAIN_SHUTOFF:
    case VIR_DOMAIN_CRASHED:
        return DomainState::Stopped;
    default:
        return DomainState::Unknown;
    }
}

QString domainStateName(DomainState state) {
    switch (state) {
    case DomainState::Running:
        return QStringLiteral("running");
    case DomainState::Stopping:
        return QStringLiteral("stopping");
    case DomainState::Stopped:
        return QStringLiteral("stopped");
    case DomainState::Unknown:
        break;
    }
    return QStringLiteral("unknown");
}

} // namespace sandcastle
