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

echo sandbox > /etc/hostname
printf '127.0.0.1 localhost\n127.0.1.1 sandbox\n::1 localhost\n' > /etc/hosts

# The kernel and its initramfs are taken out by the builder; the guest never
# boots from /boot. Caches and docs only cost image size.
rm -rf /boot/initrd.img* /var/cache/apt/archives/*.deb /var/lib/apt/lists/* \
  /usr/share/doc/* /usr/share/man/* /usr/share/info/*
