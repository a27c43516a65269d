#!/bin/sh
# Fault injection at every allocation of reg_mr, create_cq, create_qp and
# alloc_pd (tests/fault_test.c, through fail-nth). Each fails cleanly, and
# the pin counters return to their baseline. Needs the debug flavour.
. "$(dirname "$0")/../lib.sh"

F=/sys/kernel/debug
if [ -d $F/failslab ]; then
	for d in failslab fail_page_alloc; do
		echo N >$F/$d/ignore-gfp-wait
		echo 0 >$F/$d/verbose
	done
	echo N >$F/fail_page_alloc/ignore-gfp-highmem
	echo 0 >$F/fail_page_alloc/min-order
fi

before=$(pins)
oxe_load || { ktap_print_header; ktap_exit_fail_msg "rdma_oxe does not load"; }
rdma link add oxe0 type oxe netdev eth0 || { ktap_print_header; ktap_exit_fail_msg "rdma link add failed"; }
OXE_DEV=oxe0 tests/bin/fault_test
rc=$?
rdma link delete oxe0
oxe_unload
after=$(pins)
echo "# pinned pages system-wide: before $before, after $after"
if pins_back $before; then
	echo "ok 900 faults: system-wide pins back to baseline"
else
	echo "not ok 900 faults: system-wide pins back to baseline ($before -> $after)"
fi
exit $rc
