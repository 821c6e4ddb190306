#!/bin/busybox sh
# The initramfs's /init: load the virtio and ext4 modules, mount the root
# filesystem and hand over to the Sandcastle agent, which becomes PID 1.
# The first line below is the "first userspace line" the benchmark's bare
# QEMU floor waits for; keep it first.
/bin/busybox echo "sandcastle-initramfs: start"
export PATH=/bin
busybox mount -t proc proc /proc
busybox mount -t sysfs sysfs /sys
busybox mount -t devtmpfs devtmpfs /dev

fail() {
  echo "sandcastle-initramfs: $*" >/dev/console
  busybox poweroff -f
}

# Modules in dependency order (written by the builder from modules.dep).
while read -r m; do
  busybox insmod "/modules/$m" || fail "could not load $m"
done </modules.list
# With a network card (virtio_net has probed it by now): nf_tables and the
# rest of what the guest's egress rules need.
if [ -e /sys/class/net/eth0 ]; then
  while read -r m; do
    busybox insmod "/modules/$m" || fail "could not load $m"
  done </modules-net.list
fi

# virtio_blk probes synchronously, but allow the device node a moment.
i=0
while [ ! -b /dev/vda ]; do
  i=$((i + 1))
  [ $i -gt 500 ] && fail "no root disk /dev/vda"
  busybox usleep 10000
done

busybox mkdir -p /newroot
busybox mount -t ext4 -o rw,noatime /dev/vda /newroot || fail "cannot mount /dev/vda"
busybox mount -t tmpfs -o mode=0755,nosuid,nodev run /newroot/run
busybox mkdir -m 0700 /newroot/run/sandcastle
busybox cp /sandcastle-agent /newroot/run/sandcastle/agent
busybox cp /boot.sh /newroot/run/sandcastle/boot.sh
busybox cp /egress.nft /newroot/run/sandcastle/egress.nft
busybox umount /proc /sys
busybox mount --move /dev /newroot/dev
exec busybox switch_root /newroot /run/sandcastle/agent
