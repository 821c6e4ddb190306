// A sandbox's way out: one passt process per sandbox (user-mode networking
// over a UNIX socket that QEMU connects to), run as the dedicated user
// `sandcastle-net`, and a host nftables table that filters every packet
// that user sends. passt's `--no-map-gw` keeps the guest off the host's
// loopback; the table keeps it off the host's other addresses, private and
// link-local ranges, the metadata address and SMTP ports. The guest's own
// rules (packaging/guest/egress.nft) are a second layer inside the VM.
#pragma once

#include "../errors.h"

#include <QJsonArray>
#include <QStringList>

#include <optional>

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
/// to `dnsServers` only. Pure; replaces any earlier copy of the table whole
/// (whatever was added to it, or taken away, is gone), in one transaction.
QString hostRuleset(uint uid, const QStringList &dnsServers);

/// Where every Sandcastle service on this host lists the resolvers it gave
/// sandboxes (one IPv4 address a line). The table is host-wide and each
/// load replaces it whole, so its DNS set is filled from this list: one
/// service's load keeps another's resolvers, and an address added to the
/// set by hand is dropped. In /run: gone at a reboot, like the table.
inline constexpr char kResolverList[] = "/run/sandcastle/resolvers";

/// Adds `servers` to the list in `file` (written first with `seed`, what
/// the set held, when there is no list yet) and returns the whole list.
/// Lines that are not IPv4 addresses are ignored: they go into nft's input.
QStringList recordResolvers(const QString &file, const QStringList &servers,
                            const QStringList &seed = {});

/// A listing of the table (`nft -j list table inet sandcastle`) reduced to
/// what the filter does: no metainfo, no handles, no counter values, set
/// elements sorted. nullopt when the text is no such listing.
std::optional<QJsonArray> normalisedTable(const QByteArray &nftJson);
/// What differs between two normalised listings, for the log; empty when
/// they are the same.
QString tableDifference(const QJsonArray &expected, const QJsonArray &listed);
/// The IPv4 addresses in the set `dns4` of a normalised listing.
QStringList dnsSetElements(const QJsonArray &table);

/// The IPv4 name servers of a resolv.conf file, loopback ones left out.
QStringList nameServers(const QString &resolvConf);
/// The resolvers sandboxes use by default: the host's (at most three),
/// or those behind a loopback stub such as systemd-resolved.
QStringList hostDnsServers();

/// Checks the host can filter sandbox traffic (root, nft, the user) and
/// loads the table. Without it no sandbox gets a network.
Result<void> installHostFilter(const QStringList &dnsServers);

/// Checks the host filter is loaded and is, rule for rule and element for
/// element, what this process saw right after its last load (another
/// service's load of the same table is the same), and knows `dnsServers`.
/// Loads it again when not: a firewall reload or `nft flush ruleset`
/// removes it; a rule or set element added, changed or removed by hand.
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
