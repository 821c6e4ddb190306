#!/bin/sh
# Runs inside the guest root filesystem (chroot) once, at image build time.
# It makes the unprivileged user and removes every road to root.
set -eu

useradd --create-home --uid 1000 --user-group --shell /bin/bash sandbox
install -d -o sandbox -g sandbox -m 0755 /workspace

# No password for root, no sudo package, and no setuid/setgid binaries left:
# `sandbox` has no way to become root, even through a buggy helper.
passwd --lock root
find / -xdev -type f -perm /6000 -exec chmod ug-s {} +

# Agents install with `pip install --user` as the reference service's
# examples do; PEP 668's marker would refuse that.
rm -f /usr/lib/python3*/EXTERNALLY-MANAGED

# /bin/sh is dash, linked statically. Under emulation a dynamically linked
# program spends ~25 ms in the loader and libc start-up; a static one ~4 ms
# (docs/guest-image.md). Every exec, script and make recipe starts a shell,
# so this is the cheapest large speed-up there is. Same source, same Debian
# patches (but privmode, which needs a setuid shell we do not have, and the
# build-system ones), so behaviour is Debian's dash.
# The same suites as the binaries (updates and security included), so the
# source is the version of the dash package that is installed.
cat >/etc/apt/sources.list.d/sandcastle-src.list <<EOF
deb-src $SC_MIRROR $SC_SUITE main
deb-src $SC_MIRROR $SC_SUITE-updates main
deb-src $SC_SECURITY_MIRROR $SC_SUITE-security main
EOF
apt-get update -q
mkdir -p /tmp/dash-build
cd /tmp/dash-build
apt-get source -q --download-only dash
dpkg-source -q -x --skip-patches dash_*.dsc src
cd src
grep -vE '^(0012|0013|0020|9001|9002)' debian/patches/series | while read -r p; do
  patch -s -p1 <"debian/patches/$p"
done
touch aclocal.m4 configure Makefile.in src/Makefile.in config.h.in
./configure -q --enable-static --enable-fnmatch CFLAGS=-O2 >/dev/null
make -s -j"$(nproc)" >/dev/null
install -m 0755 src/dash /usr/bin/dash
cd /
rm -rf /tmp/dash-build /etc/apt/sources.list.d/sandcastle-src.list
/bin/sh -c 'test "$(echo ok)" = ok'

echo sandbox > /etc/hostname
printf '127.0.0.1 localhost\n127.0.1.1 sandbox\n::1 localhost\n' > /etc/hosts

# The kernel and its initramfs are taken out by the builder; the guest never
# boots from /boot. Caches and docs only cost image size.
rm -rf /boot/initrd.img* /var/cache/apt/archives/*.deb /var/lib/apt/lists/* \
  /usr/share/doc/* /usr/share/man/* /usr/share/info/*
