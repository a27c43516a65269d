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

# oxe's tracepoints (events/oxe): two cases again with the events on, and
# each event seen with what it says; perf lists them.
n=900
traced() {
	n=$((n + 1))
	if grep -q "$2" /tmp/oxe-trace; then echo "ok $n trace: $1"; else
		echo "not ok $n trace: $1 (no \"$2\")"
		rc=1
	fi
}
tr=/sys/kernel/tracing
[ -d $tr/events ] || mount -t tracefs nodev $tr
echo 0 >$tr/tracing_on
echo >$tr/trace
echo 1 >$tr/events/oxe/enable
echo 1 >$tr/tracing_on
OXE_DEV=oxe0 tests/bin/dp_test -r dp.stale_rkey_after_dereg >/dev/null 2>&1
OXE_DEV=oxe0 tests/bin/dp_test -t retry_exceeded_when_the_peer_never_answers >/dev/null 2>&1
echo 0 >$tr/tracing_on
echo 0 >$tr/events/oxe/enable
cat $tr/trace >/tmp/oxe-trace
echo >$tr/trace
grep -c ' oxe_' /tmp/oxe-trace | sed 's/^/# oxe events traced: /'
traced "oxe_mr_reg: a pinned registration with its keys and pages" "oxe_mr_reg: pinned lkey=0x[0-9a-f]* rkey=.* pinned=[1-9]"
traced "oxe_mr_dereg: its release" "oxe_mr_dereg: lkey=0x[0-9a-f]* unpinned=[1-9]"
traced "oxe_qp_state: RESET -> INIT -> RTR -> RTS" "oxe_qp_state: qpn=[0-9]* RTR -> RTS"
traced "oxe_qp_state: a QP failing goes to ERR" "oxe_qp_state: qpn=[0-9]* RTS -> ERR"
traced "oxe_cqe_error: the stale rkey's REM_ACCESS_ERR" "oxe_cqe_error: .*REM_ACCESS_ERR"
traced "oxe_retransmit: the timer sending again" "oxe_retransmit: .*(timeout) try=[1-9]"
traced "oxe_cqe_error: RETRY_EXC_ERR when the peer never answers" "oxe_cqe_error: .*RETRY_EXC_ERR"
perf list 'oxe:*' 2>/dev/null >/tmp/oxe-trace
traced "perf list shows the events" "oxe:oxe_retransmit"

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
