#!/bin/sh
# The data path through the stock libibverbs: tests/dp_test.c (kselftest
# harness). Afterwards nothing is left pinned, no MR or QP remains, and the
# module unloads.
. "$(dirname "$0")/../lib.sh"


before=$(pins)
oxe_load || { ktap_print_header; ktap_exit_fail_msg "rdma_oxe does not load"; }
rdma link add oxe0 type oxe netdev eth0 || { ktap_print_header; ktap_exit_fail_msg "rdma link add failed"; }

OXE_DEV=oxe0 tests/bin/dp_test
rc=$?

left=$(rdma res show qp 2>/dev/null | grep "oxe0" | grep -vc "type GSI")
rdma link delete oxe0
oxe_unload
after=$(pins)
echo "# pinned pages system-wide: before $before, after $after; QPs left: $left"
if pins_back $before && [ "$left" = 0 ]; then
	echo "ok 900 dp: no pins and no QPs left, module unloaded"
else
	echo "not ok 900 dp: no pins and no QPs left, module unloaded"
fi
exit $rc
