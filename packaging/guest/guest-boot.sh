#!/bin/sh
# Run by the agent (root, PID 1) in two phases:
#   early: before the agent answers the host, so nothing the user runs can
#          come before it. It is on the create -> ready path: keep it short.
#   late:  right after the agent has answered, in the background.
case "$1" in
early)
  # The network card exists only for sandboxes with internet access (passt
  # behind it answers ARP for the gateway 10.0.2.2). The rules come first:
  # the link is down until they are in. DNS may go to the resolvers the
  # host names on the kernel command line, and nowhere else private. Any
  # failure fails the boot: the agent powers off rather than run without.
  if [ -e /sys/class/net/eth0 ]; then
    dns=""
    for arg in $(cat /proc/cmdline); do
      case "$arg" in sandcastle.dns=*) dns=${arg#sandcastle.dns=} ;; esac
    done
    case "$dns" in *[!0-9.,]*) exit 1 ;; esac
    {
      cat /run/sandcastle/egress.nft
      [ -z "$dns" ] || echo "insert rule inet sandcastle_guest output ip daddr { $dns } meta l4proto { tcp, udp } th dport 53 accept"
    } | nft -f - || exit 1
    echo 1 >/proc/sys/net/ipv6/conf/eth0/disable_ipv6 || exit 1
    # One `ip` for the three steps: each exec counts under emulation.
    ip -batch - <<EOF || exit 1
link set eth0 up
addr add 10.0.2.15/24 dev eth0
route add default via 10.0.2.2
EOF
  fi
  : >/etc/resolv.conf
  IFS=,
  for server in $dns; do
    echo "nameserver $server" >>/etc/resolv.conf
  done
  unset IFS
  # A harder kernel for `sandbox` (docs/security.md): no kernel addresses,
  # no kernel log, and, unless the host's setting allows them (Chromium's
  # sandbox and rootless containers need them), no user namespaces, the
  # usual road from uid 1000 to a kernel exploit. Module loading ends last:
  # everything the rules above need is loaded by now.
  userns=0
  for arg in $(cat /proc/cmdline); do
    case "$arg" in sandcastle.userns=1) userns=1 ;; esac
  done
  echo 2 >/proc/sys/kernel/kptr_restrict || exit 1
  echo 1 >/proc/sys/kernel/dmesg_restrict || exit 1
  if [ "$userns" = 0 ]; then
    echo 0 >/proc/sys/user/max_user_namespaces || exit 1
  fi
  echo 1 >/proc/sys/kernel/modules_disabled || exit 1
  ;;
late)
  # The overlay is as large as the sandbox size's disk; the filesystem in
  # the base is smaller. Grow it online.
  resize2fs /dev/vda >/dev/null 2>&1 &
  # Only the benchmark attaches this port: it compares our exec path with
  # qemu-guest-agent's guest-exec in the same guest.
  for p in /sys/class/virtio-ports/*; do
    [ -e "$p/name" ] || continue
    if [ "$(cat "$p/name")" = org.sandcastle.qga.0 ]; then
      qemu-ga --method=virtio-serial --path="/dev/${p##*/}" >/dev/null 2>&1 &
    fi
  done
  ;;
esac
exit 0
