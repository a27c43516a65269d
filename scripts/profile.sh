#!/usr/bin/env bash
# `make profile`: where the time goes in one perftest case, on the plain
# kernel (the benchmarks' guest): a system-wide perf profile of its steady
# state and, with --trace, a timeline of oxe's tasks from the scheduler's
# and the workqueue's own events (scripts/trace_summary.py). Profile before
# changing anything (BENCHMARKS.md, "Profiling").
#   scripts/profile.sh [-r] [--trace] TOOL ARGS...
#   make profile CASE="ib_write_bw -s 65536 -q 4" [TRACE=1] [RXE=1]
# -r profiles rdma_rxe instead, in its own boot. OXE_MODPARAMS applies to
# oxe; OXE_PROF_SECS (2) and OXE_PROF_WARM (3) set the profile's length and
# the warm-up before it; OXE_PROF_CALLERS="sym ..." adds the call chains
# into each of those symbols (who spins on which mutex, say). The results
# stay in the printed directory.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
vmflag=()
trace=
while (($#)); do
	case $1 in
	-r) vmflag=(-r) ;;
	--trace) trace=1 ;;
	*) break ;;
	esac
	shift
done
(($#)) || die "usage: profile.sh [-r] [--trace] TOOL ARGS... (a perftest, e.g. ib_write_bw -s 65536 -q 4)"
kdir=$("$OXE_ROOT/scripts/build-kernel.sh" plain)
KDIR=$kdir "$OXE_ROOT/scripts/build-module.sh" >/dev/null
out=$(mktemp -d /tmp/oxe-profile.XXXXXX)
"$OXE_ROOT/qemu/run-vm.sh" "${vmflag[@]}" -k "$kdir" -o "$out" -t 600 -- \
	env OXE_MODPARAMS="${OXE_MODPARAMS:-}" OXE_PROF_SECS="${OXE_PROF_SECS:-2}" \
	OXE_PROF_WARM="${OXE_PROF_WARM:-3}" OXE_PROF_TRACE="$trace" \
	OXE_PROF_CALLERS="${OXE_PROF_CALLERS:-}" \
	tests/profile_guest.sh "$@"
echo "# $* on $([[ ${#vmflag[@]} -gt 0 ]] && echo rdma_rxe || echo oxe): $(cat "$out/result.txt" 2>/dev/null)"
cat "$out/perf.txt"
if [[ -n $trace && -s $out/trace.txt ]]; then
	echo "## timeline (ftrace)"
	"$OXE_ROOT/scripts/trace_summary.py" "$out/trace.txt"
fi
# A window the case did not fill is no steady state.
[[ ! -f $out/ended.txt ]] || cat "$out/ended.txt"
log "results in $out"
