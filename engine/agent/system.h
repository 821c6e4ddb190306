// What the agent does to the guest system itself: bring it up as PID 1 and
// find its virtio-serial port. Plain POSIX, no Qt.
#pragma once

#include <string>

namespace sandcastle::agent {

/// When the agent is PID 1: mounts /proc, /sys, /dev/pts, /tmp and the
/// rest, sets the hostname, brings loopback up and runs the boot script's
/// "early" phase.
void initSystem();

void loopbackUp();

/// Runs `/run/sandcastle/boot.sh <phase>` if the initramfs brought one;
/// waits for it when `wait` is set. False when it failed (or could not run).
bool runBootScript(const char *phase, bool wait);

/// Path of the /dev node of the virtio port named `name`, or empty.
/// There is no udev in the guest, so /dev/virtio-ports/ does not exist.
std::string findPort(const std::string &name);

/// Monotonic milliseconds.
long long nowMs();

/// Writes a line to the console (serial log); for boot and fatal messages.
void logLine(const std::string &line);

} // namespace sandcastle::agent
