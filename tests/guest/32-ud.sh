#!/bin/sh
# UD QPs, address handles and the GSI QP: tests/ud_test.c (kselftest
# harness) through the stock libibverbs, then the kernel's MAD layer on
# QP1. Afterwards no QP or AH is left and the module unloads.
. "$(dirname "$0")/../lib.sh"

oxe_load || { ktap_print_header; ktap_exit_fail_msg "rdma_oxe does not load"; }
mark="oxe-ud-$$"
echo "$mark" >/dev/kmsg
rdma link add oxe0 type oxe netdev eth0 || { ktap_print_header; ktap_exit_fail_msg "rdma link add failed"; }

OXE_DEV=oxe0 tests/bin/ud_test
rc=$?

# The MAD layer made QP1 on the new device (before, it logged "Couldn't
# create ib_mad QP1").
if ! dmesg | sed -n "/$mark/,\$p" | grep -qi "ib_mad\|QP1" && rdma res show qp 2>/dev/null | grep "oxe0" | grep -q "lqpn 1 .*type GSI"; then
	echo "ok 901 ud: the MAD layer has its GSI QP (QP1) on oxe0, no error logged"
else
	dmesg | sed -n "/$mark/,\$p" | grep -i "mad\|qp1" | sed 's/^/# /'
	rdma res show qp 2>/dev/null | sed 's/^/# /'
	echo "not ok 901 ud: the MAD layer has its GSI QP (QP1) on oxe0, no error logged"
	rc=1
fi

left=$(rdma res show qp 2>/dev/null | grep "oxe0" | grep -vc "type GSI")
rdma link delete oxe0
oxe_unload
if [ "$left" = 0 ] && ! [ -d /sys/module/rdma_oxe ]; then
	echo "ok 900 ud: no QPs left but QP1, module unloaded"
else
	echo "not ok 900 ud: no QPs left but QP1, module unloaded ($left left)"
	rc=1
fi
exit $rc
