#!/bin/sh
# A kernel storage protocol end to end over oxe0: an NVMe-over-Fabrics RDMA
# target (nvmet-rdma, a memory-backed null_blk namespace) and the NVMe RDMA
# host (nvme-rdma, Debian's nvme-cli) in one guest. rdma_cm connects them
# (ib_cm over QP1); the I/O is the kernel's fast registration (REG_MR,
# LOCAL_INV, SEND_WITH_INV), RDMA READ/WRITE with kernel MRs and inline
# SENDs. A pattern over the whole namespace is written and read back, then
# everything is taken down: no MR, QP or device left, the modules unload.
. "$(dirname "$0")/../lib.sh"

NQN=nqn.2026-12.org.oxe:nvme-test
HOSTNQN=nqn.2014-08.org.nvmexpress:uuid:0e0e0e0e-0e0e-4e0e-8e0e-0e0e0e0e0e0e
CFG=/sys/kernel/config
MB=64
IP=10.77.0.1

ktap_print_header
ktap_set_plan 9
command -v nvme >/dev/null || ktap_exit_fail_msg "nvme-cli is not installed (scripts/setup.sh installs it)"
oxe_load || ktap_exit_fail_msg "rdma_oxe does not load"
rdma link add oxe0 type oxe netdev eth0 || ktap_exit_fail_msg "rdma link add failed"
mountpoint -q $CFG || mount -t configfs none $CFG

# The namespace: null_blk, memory-backed (configfs, whose directory name is
# the disk's), $MB MiB.
nullb_up() {
	modprobe null_blk nr_devices=0 &&
		mkdir $CFG/nullb/nullb0 &&
		echo $MB >$CFG/nullb/nullb0/size &&
		echo 1 >$CFG/nullb/nullb0/memory_backed &&
		echo 1 >$CFG/nullb/nullb0/power &&
		wait_for 10 test -b /dev/nullb0
}
check "a memory-backed null_blk of $MB MiB" nullb_up

# The target: one subsystem with the null_blk namespace, one RDMA port on
# oxe0's address.
target_up() {
	modprobe nvmet-rdma || return 1
	s=$CFG/nvmet/subsystems/$NQN p=$CFG/nvmet/ports/1
	mkdir $s && echo 1 >$s/attr_allow_any_host &&
		mkdir $s/namespaces/1 && echo -n /dev/nullb0 >$s/namespaces/1/device_path &&
		echo 1 >$s/namespaces/1/enable &&
		mkdir $p && echo rdma >$p/addr_trtype && echo ipv4 >$p/addr_adrfam &&
		echo $IP >$p/addr_traddr && echo 4420 >$p/addr_trsvcid &&
		ln -s $s $p/subsystems/$NQN
}
check "nvmet-rdma target listening on $IP:4420 over oxe0" target_up
dmesg | grep -i nvmet | tail -3 | sed 's/^/# /'

# The host: discover, then connect; the namespace appears as a block device.
# The guest has no other NVMe device: the first namespace is the fabric's.
dev=
host_up() {
	modprobe nvme-rdma || return 1
	nvme discover -t rdma -a $IP -s 4420 --hostnqn=$HOSTNQN | sed 's/^/# /'
	nvme connect -t rdma -a $IP -s 4420 -n $NQN --hostnqn=$HOSTNQN | sed 's/^/# /'
	for i in $(seq 60); do
		dev=$(ls /dev/nvme*n1 2>/dev/null | head -1)
		[ -b "$dev" ] && grep -qx $NQN /sys/class/nvme/nvme*/subsysnqn && return 0
		sleep 1
	done
	return 1
}
check "nvme discover and connect over rdma: a block device appears" host_up
echo "# namespace $dev, $(cat /sys/block/${dev#/dev/}/size 2>/dev/null) sectors"
rdma res show qp | grep -v GSI | sed 's/^/# /'

# A pattern over the whole namespace through nvme-rdma, read back through
# nvme-rdma and straight from null_blk on the target side.
head -c $((MB << 20)) /dev/urandom >/tmp/pattern
t0=$(date +%s)
check "write $MB MiB through nvme-rdma (O_DIRECT)" \
	dd if=/tmp/pattern of=$dev bs=1M oflag=direct status=none
t1=$(date +%s)
check "read $MB MiB back through nvme-rdma: every byte right" \
	sh -c "dd if=$dev bs=1M iflag=direct status=none | cmp - /tmp/pattern"
t2=$(date +%s)
echo "# write $((t1 - t0)) s, read $((t2 - t1)) s"
check "the target's null_blk holds the same bytes" \
	sh -c "dd if=/dev/nullb0 bs=1M iflag=direct status=none | cmp - /tmp/pattern"
rm -f /tmp/pattern

# Down: the host disconnects, the target and null_blk go, then oxe0 and the
# module; nothing of the fabric may hold the device.
host_down() {
	nvme disconnect -n $NQN | sed 's/^/# /'
	modprobe -r nvme-rdma nvme-fabrics
}
check "nvme disconnect, nvme-rdma unloads" host_down
target_down() {
	s=$CFG/nvmet/subsystems/$NQN p=$CFG/nvmet/ports/1
	rm $p/subsystems/$NQN && rmdir $p &&
		echo 0 >$s/namespaces/1/enable && rmdir $s/namespaces/1 && rmdir $s &&
		modprobe -r nvmet-rdma nvmet &&
		rmdir $CFG/nullb/nullb0 && modprobe -r null_blk
}
check "the target and null_blk come down and unload" target_down
left() { ! rdma res show qp | grep -v "type GSI" | grep -q oxe0 && ! rdma res show mr | grep -q oxe0; }
all_down() {
	left || { rdma res show | sed 's/^/# /'; return 1; }
	rdma link delete oxe0 && oxe_unload && ! oxe_loaded
}
check "no QP or MR left on oxe0; the link and the module go" all_down
ktap_finished
