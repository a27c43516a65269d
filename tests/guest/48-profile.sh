#!/bin/sh
# make profile's guest side (tests/profile_guest.sh) on a short traced case:
# its two windows, the trace's and perf's, must fall inside the case's
# steady state. At stop 47 the trace's window came after perf record, which
# takes seconds to start and finish under TCG, and the case ended inside
# it: the timeline showed both CPUs half idle and the perftest processes
# exiting. On the plain kernel, the profile's own.
. "$(dirname "$0")/../lib.sh"

ktap_print_header
ktap_set_plan 4
out=/tmp/oxe-prof-test
rm -rf $out
mkdir -p $out
OXE_FLAVOUR=oxe OXE_OUT=$out OXE_PROF_TRACE=1 \
	sh tests/profile_guest.sh ib_write_bw -s 65536 >$out/log 2>&1
rc=$?
tail -5 $out/log | sed 's/^/# /'
echo "# result: $(cat $out/result.txt 2>/dev/null)"
check "make profile's guest side ran a traced ib_write_bw to its end (a figure)" \
	sh -c "[ $rc = 0 ] && grep -qE '^ +65536 +[0-9]+ ' $out/result.txt"
check "it found the case running at the end of both windows (no warning)" \
	sh -c "[ ! -e $out/ended.txt ] || { sed 's/^/# /' $out/ended.txt; false; }"
# The window itself: oxe's QP tasks ran in it, and neither perftest process
# exited in it.
turns=$(grep -c 'workqueue_execute_start: .*3oxe2qp2Qp' $out/trace.txt 2>/dev/null)
exits=$(grep -cE 'prev_comm=ib_write_bw .*prev_state=[ZX]' $out/trace.txt 2>/dev/null)
echo "# trace: ${turns:-0} turns of oxe's QP tasks, ${exits:-0} exits of ib_write_bw"
check "the trace's window is the case's steady state: oxe's tasks ran, ib_write_bw did not exit" \
	sh -c "[ ${turns:-0} -ge 100 ] && [ ${exits:-0} = 0 ]"
oxe_unload
check "module unloads after the profile" sh -c "[ ! -d /sys/module/rdma_oxe ]"
rm -rf $out
ktap_finished
