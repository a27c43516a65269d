#!/bin/sh
# PID 1 of a test guest. The host's / is the read-only root; everything the
# guest writes goes to tmpfs, results to the host through the oxeout share.
# Runs the command in $OXE_OUT/cmd, stores its status and reboots (QEMU is
# started with -no-reboot, so that ends the VM).
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export HOME=/root LANG=C

mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev 2>/dev/null
mkdir -p /dev/pts /dev/shm
mount -t devpts devpts /dev/pts
mount -t tmpfs tmpfs /dev/shm
for d in /tmp /run /var/tmp /var/log /root /mnt; do mount -t tmpfs tmpfs "$d"; done
mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null
mkdir -p /tmp/out
mount -t 9p -o trans=virtio,version=9p2000.L oxeout /tmp/out
export OXE_OUT=/tmp/out

hostname oxe-guest
ip link set lo up
ip link set eth0 up
ip addr add 10.77.0.1/24 dev eth0

# A module tree for this kernel, so modprobe and the rdma-link-oxe alias work:
# the reference drivers from the kernel build, and oxe itself in the oxe flavour.
rel=$(uname -r)
mount -t tmpfs tmpfs /lib/modules
mkdir -p "/lib/modules/$rel/extra"
cp -a "$OXE_KDIR/modroot/lib/modules/$rel/." "/lib/modules/$rel/" 2>/dev/null
# The rxe flavour (benchmarks against rdma_rxe) must never see oxe.
if [ "$OXE_FLAVOUR" = oxe ] && [ -f "$OXE_ROOT/rdma_oxe.ko" ]; then
	cp "$OXE_ROOT/rdma_oxe.ko" "/lib/modules/$rel/extra/"
fi
depmod -a "$rel"

ulimit -l unlimited
cd "$OXE_ROOT" || exit 1
echo "oxe-guest: running $(cat "$OXE_OUT/cmd")"
sh -c "$(cat "$OXE_OUT/cmd")"
echo $? >"$OXE_OUT/status"
sync
echo "oxe-guest: done, status $(cat "$OXE_OUT/status")"
busybox reboot -f 2>/dev/null || systemctl reboot -ff
