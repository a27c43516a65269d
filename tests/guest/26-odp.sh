#!/bin/sh
# On-demand paging through the stock libibverbs and librxe:
# tests/odp_test.c (kselftest harness). Its reclaim case maps the guest
# kernel's vmlinux, a file whose clean page cache can be reclaimed without
# swap. Its memory-pressure case runs in a memory cgroup limited to 12 MiB
# with swap on zram (256 MiB). Afterwards no MR is left on oxe0, the pins are
# back and the module unloads.
. "$(dirname "$0")/../lib.sh"

[ -f "$OXE_KDIR/vmlinux" ] && export OXE_ODP_FILE="$OXE_KDIR/vmlinux"
cg=/sys/fs/cgroup
if [ -b /dev/zram0 ] && echo 256M >/sys/block/zram0/disksize && mkswap /dev/zram0 >/dev/null &&
	swapon /dev/zram0; then
	mountpoint -q $cg || mount -t cgroup2 none $cg
	echo +memory >$cg/cgroup.subtree_control
	mkdir -p $cg/oxe-odp
	echo 12M >$cg/oxe-odp/memory.max
	export OXE_MEMCG=$cg/oxe-odp
else
	echo "# no swap on zram: the memory-pressure case skips"
fi
harness_suite odp tests/bin/odp_test
rc=$?
if [ -n "$OXE_MEMCG" ]; then
	grep -E '^(pswpin|pswpout) ' /proc/vmstat | sed 's/^/# swap: /'
	swapoff /dev/zram0
	echo 1 >/sys/block/zram0/reset
	rmdir $OXE_MEMCG
fi
exit $rc
