#!/usr/bin/env bash
# make bench: everything oxe claims about speed, in one run. ROUNDS rounds
# (default 2) of two boots of the plain kernel, oxe then rdma_rxe (never in
# one kernel), the same guest size; each boot runs tests/bench_guest.sh:
# the floors, reg+dereg, and perftest at three sizes with one and four QPs,
# atomics and latencies, and in oxe's boot the perftests again with every
# packet through the RoCEv2 path (wire_loopback=1, like-for-like with rxe's
# loopback). Then PAIR_ROUNDS rounds (default ROUNDS; PAIR=0: none) of the
# two-guest link, oxe<->oxe then rxe<->rxe (scripts/two-guests.sh's
# benchmark list: the link's ceilings and the seven perftests with their
# defaults). scripts/bench_report.py then prints medians, oxe/rxe, the
# spread between rounds and the goals of issue 14, and writes CSV, JSON and
# PNG plots (gnuplot) to OUT (default out/bench).
# BENCH_UPDATE=1 also puts the table and plots into BENCHMARKS.md and
# docs/bench/. BENCH_RAW=DIR reports on an earlier run's raw results.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
rounds=${ROUNDS:-2}
out=${OUT:-$OXE_ROOT/out/bench}
if ! command -v gnuplot >/dev/null; then
	log "installing gnuplot-nox (the plots)"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends gnuplot-nox >/dev/null ||
		log "no gnuplot: tables only"
fi
mkdir -p "$out"
if [[ -n ${BENCH_RAW:-} ]]; then
	raw=$BENCH_RAW
else
	raw=$(mktemp -d /tmp/oxe-bench.XXXXXX)
	t0=$(date +%s)
	bench_boots "$raw" "$rounds" --wire tests/bench_guest.sh
	[[ ${PAIR:-1} == 0 ]] || pair_boots "$raw" "${PAIR_ROUNDS:-$rounds}" pair-
	log "benchmark boots took $(($(date +%s) - t0)) s"
fi
args=("$raw" "$out")
[[ ${BENCH_UPDATE:-0} != 1 ]] || args+=(--update "$OXE_ROOT")
python3 "$OXE_ROOT/scripts/bench_report.py" "${args[@]}"
echo "raw results in $raw; table, CSV, JSON and plots in $out"
