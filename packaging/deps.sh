#!/usr/bin/env bash
# Installs the Debian packages Sandcastle needs to build, test and run, but
# only when one is missing (a second run costs a dpkg query, no network).
set -euo pipefail

packages=(
  # build
  cmake g++ make pkg-config qt6-base-dev qt6-httpserver-dev libgl-dev libvirt-dev clang-format
  # the desktop window (ui/): widgets, charts (they need Qt's OpenGL headers), SVG icons;
  # the Wayland platform plugin (X11's comes with Qt)
  qt6-charts-dev libqt6opengl6-dev qt6-svg-dev qt6-wayland
  # run: the record (Qt's SQLite driver)
  libqt6sql6-sqlite
  # run: libvirt's embedded QEMU driver and QEMU itself
  libvirt-daemon-driver-qemu libvirt-daemon-system qemu-system-x86 qemu-utils
  # guest image builder
  mmdebstrap busybox-static cpio e2fsprogs jq
  # end-to-end tests: the seeds' own clients
  python3 python3-requests curl
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
# Node.js and npm run the MCP SDK in the tests; a machine that already has
# them (from any source) keeps its own.
command -v npm >/dev/null 2>&1 || missing+=(nodejs npm)
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "installing: ${missing[*]}"
sudo=""
[ "$(id -u)" = 0 ] || sudo=sudo
$sudo apt-get update -q
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
