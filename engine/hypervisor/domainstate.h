// libvirt's domain states mapped onto the few the engine cares about.
#pragma once

#include <QString>

namespace sandcastle {

enum class DomainState {
    Unknown,
    Running,  // running, blocked, paused by libvirt: the VM exists and lives
    Stopping, // shutting down
    Stopped,  // shut off or crashed: the VM is gone or must be cleaned up
};

/// Maps a `virDomainState` value (e.g. VIR_DOMAIN_RUNNING) to DomainState.
DomainState domainStateFromLibvirt(int virState);

QString domainStateName(DomainState state);

} // namespace sandcastle
