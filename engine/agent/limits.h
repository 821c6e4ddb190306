// Resource limits for the commands the agent runs, with cgroup v2: every
// command gets a cgroup of its own under /sys/fs/cgroup/sandbox. The
// parent caps memory below the guest's RAM (so the kernel's OOM killer acts
// inside it, never on the agent) and the number of processes; each command
// caps its own process count, so a fork bomb in one command leaves room to
// start others. On OOM the whole offending command is killed (oom.group).
// The agent itself stays outside, with the OOM killer told to spare it.
// `sandbox` cannot write any of these files, so a command cannot leave.
#pragma once

#include <cstdint>
#include <string>

namespace sandcastle::agent::limits {

/// Sets up the parent cgroup once at boot. False when cgroup v2 is not
/// usable: commands then run without limits (and the console log says so).
bool setup();

/// Creates the cgroup of one command; empty when limits are unavailable.
std::string createFor(uint64_t serial);

/// In the forked child, before dropping root: moves it into `cgroup`.
bool enter(const std::string &cgroup);

/// The command has ended: its cgroup, once empty, serves a later command.
void release(const std::string &cgroup);

/// Kills every process of the command, also those that left its process
/// group (setsid, double fork).
void killAll(const std::string &cgroup);

/// Removes command cgroups whose processes have all ended (but the spare ones).
void sweep();

} // namespace sandcastle::agent::limits
