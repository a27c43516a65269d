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
# The repo and the kernel build may live under a directory that tmpfs is about
# to cover (/tmp, /root): bind them to fixed places first.
mount -t tmpfs tmpfs /run
mkdir -p /run/oxe/root /run/oxe/kdir
mount --bind "$OXE_ROOT" /run/oxe/root
mount --bind "$OXE_KDIR" /run/oxe/kdir
export OXE_ROOT=/run/oxe/root OXE_KDIR=/run/oxe/kdir
for d in /tmp /var/tmp /var/log /root /mnt; do mount -t tmpfs tmpfs "$d"; done
mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null
mkdir -p /tmp/out
mount -t 9p -o trans=virtio,version=9p2000.L oxeout /tmp/out
export OXE_OUT=/tmp/out

hostname oxe-guest
ip link set lo up
ip link set eth0 up
ip addr add "${OXE_IP:-10.77.0.1}/24" dev eth0

# A module tree for this kernel, so modprobe and the rdma-link-oxe alias work:
# the reference drivers from the kernel build, and oxe itself in the oxe
# flavour (the rxe flavour, for comparisons with rdma_rxe, never sees oxe).
# It lives in tmpfs; a modprobe wrapper points modprobe, and the kernel's
# module autoloader, at it.
rel=$(uname -r)
modroot=/tmp/modroot
mkdir -p "$modroot/lib/modules/$rel/extra" /tmp/bin
cp -a "$OXE_KDIR/modroot/lib/modules/$rel/." "$modroot/lib/modules/$rel/"
if [ "$OXE_FLAVOUR" = oxe ] && [ -f "$OXE_ROOT/rdma_oxe.ko" ]; then
	cp "$OXE_ROOT/rdma_oxe.ko" "$modroot/lib/modules/$rel/extra/"
fi
depmod -b "$modroot" "$rel"
real_modprobe=$(command -v modprobe)
printf '#!/bin/sh\nexec %s -d %s "$@"\n' "$real_modprobe" "$modroot" >/tmp/bin/modprobe
printf '#!/bin/sh\nexec %s -b %s "$@"\n' "$(command -v modinfo)" "$modroot" >/tmp/bin/modinfo
chmod +x /tmp/bin/modprobe /tmp/bin/modinfo
echo /tmp/bin/modprobe >/proc/sys/kernel/modprobe
export PATH=/tmp/bin:$PATH

ulimit -l unlimited
echo "oxe-guest: running $(cat "$OXE_OUT/cmd")"
if cd "$OXE_ROOT"; then
	sh -c "$(cat "$OXE_OUT/cmd")"
	echo $? >"$OXE_OUT/status"
else
	echo 1 >"$OXE_OUT/status"
fi
sync
echo "oxe-guest: done, status $(cat "$OXE_OUT/status")"
busybox reboot -f 2>/dev/null || systemctl reboot -ff
