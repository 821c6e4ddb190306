// A sandbox's way out: one passt process per sandbox (user-mode networking
// over a UNIX socket that QEMU connects to), run as the dedicated user
// `sandcastle-net`, and a host nftables table that filters every packet
// that user sends. passt's `--no-map-gw` keeps the guest off the host's
// loopback; the table keeps it off the host's other addresses, private and
// link-local ranges, the metadata address and SMTP ports. The guest's own
// rules (packaging/guest/egress.nft) are a second layer inside the VM.
#pragma once

#include "../errors.h"

#include <QStringList>

namespace sandcastle::egress {

/// The guest's fixed addressing (set by the guest's boot script); passt
/// answers ARP for the gateway and forwards everything else.
inline constexpr char kGuestAddress[] = "10.0.2.15";
inline constexpr int kGuestPrefix = 24;
inline constexpr char kGateway[] = "10.0.2.2";
inline constexpr char kNetUser[] = "sandcastle-net";

/// IPv4 and IPv6 ranges no sandbox may reach (besides the host's own
/// addresses, which the host filter finds itself).
QStringList blockedRanges4();
QStringList blockedRanges6();
QList<int> blockedTcpPorts();

/// The nftables ruleset of the host filter, for `uid`, letting DNS through
/// to `dnsServers` only. Pure; replaces any earlier copy of the table.
QString hostRuleset(uint uid, const QStringList &dnsServers);

/// The IPv4 name servers of a resolv.conf file, loopback ones left out.
QStringList nameServers(const QString &resolvConf);
/// The resolvers sandboxes use by default: the host's (at most three),
/// or those behind a loopback stub such as systemd-resolved.
QStringList hostDnsServers();

/// Checks the host can filter sandbox traffic (root, nft, the user) and
/// loads the table. Without it no sandbox gets a network.
Result<void> installHostFilter(const QStringList &dnsServers);

/// Checks the host filter is loaded whole and knows `dnsServers`; loads it
/// again when not (a firewall reload or `nft flush ruleset` removes it).
Result<void> ensureHostFilter(const QStringList &dnsServers);

/// Where a sandbox's passt listens (the longest path in its folder).
QString passtSocket(const QString &dir);

/// Starts passt for one sandbox: its socket and pid file go to `dir/net/`,
/// its log to `dir`. Returns once the socket accepts QEMU. passt ends by
/// itself when QEMU disconnects (it serves one client), so it cannot
/// outlive its VM.
Result<QString> startPasst(const QString &dir);

/// Stops a sandbox's passt if it still runs (by its pid file, or by its
/// socket path when the pid file is gone).
void stopPasst(const QString &dir);

} // namespace sandcastle::egress
