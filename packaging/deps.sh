#!/usr/bin/env bash
# Installs the Debian packages Sandcastle needs to build, test and run, but
# only when one is missing (a second run costs a dpkg query, no network).
set -euo pipefail

packages=(
  # build
  cmake g++ make pkg-config qt6-base-dev qt6-httpserver-dev qt6-websockets-dev libgl-dev libvirt-dev clang-format
  # the desktop window (ui/): widgets, charts (they need Qt's OpenGL headers), SVG icons;
  # the Wayland platform plugin (X11's comes with Qt)
  qt6-charts-dev libqt6opengl6-dev qt6-svg-dev qt6-wayland
  # run: the record (Qt's SQLite driver)
  libqt6sql6-sqlite
  # run: libvirt's embedded QEMU driver and QEMU itself
  libvirt-daemon-driver-qemu libvirt-daemon-system qemu-system-x86 qemu-utils
  # run: sandbox networking (a passt per sandbox, the host's nftables filter)
  passt nftables
  # guest image builder
  mmdebstrap busybox-static cpio e2fsprogs jq
  # end-to-end tests: the seeds' own clients
  python3 python3-requests curl openssl
  # network tests: a test host in a network namespace (HTTP, git, DNS)
  iproute2 git dnsmasq-base
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
# Node.js and npm run the MCP SDK in the tests; a machine that already has
# them (from any source) keeps its own.
command -v npm >/dev/null 2>&1 || missing+=(nodejs npm)
sudo=""
[ "$(id -u)" = 0 ] || sudo=sudo
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  $sudo apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
# The user every sandbox's passt runs as: the host filter matches its
# packets (docs/security.md). No home, no shell, no login.
if ! getent passwd sandcastle-net >/dev/null; then
  $sudo useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin sandcastle-net
fi
