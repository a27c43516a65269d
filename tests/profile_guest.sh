#!/bin/sh
# make profile, in the guest: one perftest case on oxe0 (or rxe0 in the
# reference boot), profiled in its steady state. Server and client run on
# the device; once the client has run for OXE_PROF_WARM seconds:
#   - with OXE_PROF_TRACE, an ftrace window (the first
#     OXE_PROF_TRACE_KB KiB of events per CPU, about a second) of the workqueue and
#     scheduler events (trace.txt), which scripts/trace_summary.py turns into
#     a timeline summary: each CPU's busy and idle time, how long each task's
#     turns took, and who queued which task on which CPU;
#   - then perf record -a -g (cpu-clock) for OXE_PROF_SECS seconds, reported
#     by command and CPU, by command and object, by symbol, and for the
#     kernel workers alone.
# Results go to $OXE_OUT (perf.txt, trace.txt, result.txt).
# Usage: profile_guest.sh TOOL ARGS... (perftest's, without -d, -p and the
# server's address).
set -u
if [ "$OXE_FLAVOUR" = rxe ]; then
	modprobe rdma_rxe && rdma link add rxe0 type rxe netdev eth0 && dev=rxe0
else
	modprobe rdma_oxe ${OXE_MODPARAMS:-} && rdma link add oxe0 type oxe netdev eth0 && dev=oxe0
fi || exit 1
tool=$1
shift
secs=${OXE_PROF_SECS:-2}
warm=${OXE_PROF_WARM:-3}
# Long enough to cover the warm-up, the trace and the profile, with the
# seconds perf record takes to start under TCG (less and the profile took
# in the case's end, stop 48).
dur=$((warm + secs + 15))
case $tool in
*_lat) run="-n 1000000" ;;
*) run="-D $dur" ;;
esac
out=$OXE_OUT
# The trace's events are enabled before the case starts, with the ring
# buffer off: enabling one patches kernel text (its static key and call
# site), and a guest oopsed once on a stale int3 in __schedule when that
# patching ran in the middle of the load (stop 47, sched_switch; TCG). The
# window is then chosen with tracing_on alone, which patches nothing.
T=/sys/kernel/tracing
if [ -n "${OXE_PROF_TRACE:-}" ]; then
	mountpoint -q $T || mount -t tracefs nodev $T
	echo 0 >$T/tracing_on
	# Events from the start until the buffer is full (not the last ones):
	# the window then begins with this script's own fork of `sleep`, and
	# goes on with the case alone.
	echo "${OXE_PROF_TRACE_KB:-3000}" >$T/buffer_size_kb
	echo 0 >$T/options/overwrite
	for e in workqueue/workqueue_queue_work workqueue/workqueue_execute_start \
		workqueue/workqueue_execute_end sched/sched_switch sched/sched_wakeup; do
		echo 1 >$T/events/$e/enable
	done
	echo >$T/trace
fi
timeout $((dur + 60)) "$tool" -d $dev -F -p 19700 $run "$@" >"$out/server.txt" 2>&1 &
srv=$!
i=0
while ! ss -ltn | grep -q ':19700 ' && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
timeout $((dur + 60)) "$tool" -d $dev -F -p 19700 $run "$@" 10.77.0.1 >"$out/client.txt" 2>&1 &
cli=$!
sleep "$warm"
# Both windows while the case surely runs: the trace's first, then perf's
# at once, and only then the slow parts (perf record's own finish, reading
# the trace out), which once pushed a window past the case's end (its CPUs
# idle half the window; stop 48).
if [ -n "${OXE_PROF_TRACE:-}" ]; then
	echo 1 >$T/tracing_on
	sleep 1
	echo 0 >$T/tracing_on
	kill -0 $cli 2>/dev/null || echo "# the case ended inside the trace's window: its timeline is not steady state" >"$out/ended.txt"
fi
perf record -q -e cpu-clock -a -g -o /tmp/prof.data -- sleep "$secs" >/dev/null 2>&1
kill -0 $cli 2>/dev/null || echo "# the case ended inside the profile's window" >>"$out/ended.txt"
[ -z "${OXE_PROF_TRACE:-}" ] || cat $T/trace >"$out/trace.txt"
# A latency test is stopped here; a bandwidth test ends by itself.
case $tool in *_lat) kill $cli $srv 2>/dev/null ;; esac
wait $cli
wait $srv
case $tool in
*_lat) echo "(a latency test is stopped after its profile: no report)" ;;
*) grep -E '^ +[0-9]+ +[0-9]+ ' "$out/client.txt" | tail -1 ;;
esac >"$out/result.txt"
{
	echo "## by command and CPU"
	perf report -i /tmp/prof.data --stdio --no-children --sort comm,cpu -g none 2>/dev/null | grep -v '^#' | grep -v '^$' | head -20
	# Where each command's time goes: its own code and libraries, the
	# kernel's, oxe's (a poster's system calls are its own command's).
	echo "## by command and object"
	perf report -i /tmp/prof.data --stdio --no-children --sort comm,dso -g none 2>/dev/null | grep -v '^#' | grep -v '^$' | head -20
	echo "## by symbol"
	perf report -i /tmp/prof.data --stdio --no-children --sort dso,sym -g none 2>/dev/null | grep -v '^#' | grep -v '^$' | head -50
	echo "## kernel workers, by symbol"
	perf report -i /tmp/prof.data --stdio --no-children --sort comm,sym -g none 2>/dev/null | grep kworker | head -40
	echo "## the perftest processes, by symbol (the poster's system calls included)"
	perf report -i /tmp/prof.data --stdio --no-children --sort comm,sym -g none 2>/dev/null | grep " $tool " | head -40
	for sym in ${OXE_PROF_CALLERS:-}; do
		echo "## call chains into $sym"
		perf report -i /tmp/prof.data --stdio --no-children --sort comm,sym -S "$sym" \
			-g caller,2,callee --percent-limit 0.3 2>/dev/null | grep -v '^#' | grep -v '^$' | head -80
	done
} >"$out/perf.txt"
rdma link delete $dev
