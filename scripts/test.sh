#!/usr/bin/env bash
# The whole suite: host tests, module build (clippy-clean), then the in-guest
# KTAP tests under QEMU, each guest suite on the kernel flavour it needs.
# Ends with one line `N passed, N failed, N skipped` and exits non-zero on any
# failure; the lines before it say how long each step and each suite took.
#   scripts/test.sh                  everything (`make test`, `.ci/run`)
#   scripts/test.sh --quick          the editing tier (`make check`): host
#                                    tests, lints, module build, the core guest
#                                    suites on the plain kernel
#   scripts/test.sh 20-mr 30-dp      only these guest suites
#   OXE_FLAVOUR=kasan|debug|plain    every guest suite on that flavour
set -uo pipefail
. "$(dirname "$0")/lib.sh"

# Which kernel a guest suite runs on. kasan (KASAN, lockdep, kmemleak, debug
# objects, fault injection, Rust assertions) for every suite that drives
# oxe's own memory handling, lifetimes and error paths: there a bug is a
# use-after-free or a leak that only KASAN and kmemleak see. perftest runs the
# same data path as 30-dp, only longer and through a stock tool: on KASAN
# under TCG it cost a third of the suite's time and finds nothing 30-dp and
# 60-stress do not, so it runs on the plain kernel, the one the benchmarks
# and `make run` use.
suite_flavour() {
	case $1 in
	40-perftest | 46-wire-dp | 47-link | 48-profile) echo plain ;;
	*) echo kasan ;;
	esac
}
# The quick tier: what an edit most often breaks, on the plain kernel.
QUICK_SUITES="10-device 20-mr 30-dp 35-kverbs"

quick=0
if [[ ${1:-} == --quick ]]; then
	quick=1
	shift
fi

pass=0 fail=0 skip=0
result() { # result ok|fail|skip DESCRIPTION
	case $1 in
	ok) pass=$((pass + 1)); echo "ok - $2" ;;
	skip) skip=$((skip + 1)); echo "ok - $2 # SKIP" ;;
	*) fail=$((fail + 1)); echo "not ok - $2" ;;
	esac
}
times=()
t_start=$SECONDS
timed() { # timed NAME SECONDS-AT-START
	times+=("$(printf '%-34s %5d s' "$1" $((SECONDS - $2)))")
}
finish() {
	for t in "${times[@]}"; do echo "# time: $t"; done
	echo "# time: $(printf '%-34s %5d s' total $((SECONDS - t_start)))"
	echo "$pass passed, $fail failed, $skip skipped"
	((fail == 0))
	exit
}

t=$SECONDS
"$OXE_ROOT/scripts/setup.sh" || { result fail "setup"; finish; }
timed setup $t

# Host: kernel-independent logic, formatting and lints.
t=$SECONDS
out=$(cd "$OXE_ROOT/rust/common" && cargo test 2>&1)
echo "$out" | grep -E '^test |test result' | sed 's/^/# /'
while read -r p f; do
	pass=$((pass + p)); fail=$((fail + f))
done < <(echo "$out" | sed -nE 's/^test result: [a-zA-Z]+\. ([0-9]+) passed; ([0-9]+) failed.*/\1 \2/p')
echo "$out" | grep -q '^test result' || result fail "host cargo test did not run"
if (cd "$OXE_ROOT/rust/common" && cargo fmt --check >/dev/null 2>&1) &&
   rustfmt --check --edition 2021 --config-path "$OXE_ROOT/rust/common" "$OXE_ROOT/rust/oxe.rs" >/dev/null 2>&1; then
	result ok "rustfmt clean"
else
	result fail "rustfmt clean (run make fmt)"
fi
if (cd "$OXE_ROOT/rust/common" && cargo clippy --quiet --all-targets -- -D warnings 2>&1); then
	result ok "host crate clippy clean"
else
	result fail "host crate clippy clean"
fi
# The pyverbs comparison gives one line per test either driver ran, whatever
# rxe's racy tests do (its count once moved with them).
if pc=$(python3 "$OXE_ROOT/scripts/pyverbs_compare.py" --self-test 2>&1); then
	result ok "pyverbs comparison: a line per test, rxe's outcome or not"
else
	echo "$pc" | sed 's/^/# /'
	result fail "pyverbs comparison: a line per test, rxe's outcome or not"
fi
# make bench's report reads loopback and two-guest results apart.
if br=$(python3 "$OXE_ROOT/scripts/bench_report.py" --self-test 2>&1); then
	result ok "bench report: loopback and two-guest rounds, floors and goals"
else
	echo "$br" | sed 's/^/# /'
	result fail "bench report: loopback and two-guest rounds, floors and goals"
fi
if deps=$("$OXE_ROOT/scripts/deps.sh" 2>&1); then
	result ok "module dependencies point one way (scripts/deps.sh)"
else
	echo "$deps" | tail -1 | sed 's/^/# /'
	result fail "module dependencies point one way (scripts/deps.sh)"
fi
timed "host: cargo test, rustfmt, clippy" $t

# The guest suites to run, grouped by flavour (plain first: its kernel is
# the one `make run` needs anyway and is built first).
suites=("$@")
if ((${#suites[@]} == 0)); then
	if ((quick)); then
		read -ra suites <<<"$QUICK_SUITES"
	else
		for f in "$OXE_ROOT"/tests/guest/*.sh; do suites+=("$(basename "$f" .sh)"); done
		suites+=(pair pyverbs)
	fi
fi
# "pair": the two-guest link (scripts/two-guests.sh), part of the full suite.
pair=0 pyverbs=0
declare -A by_flavour=()
for s in "${suites[@]}"; do
	s=$(basename "$s" .sh)
	[[ $s == pair ]] && { pair=1; continue; }
	[[ $s == pyverbs ]] && { pyverbs=1; continue; }
	[[ -f $OXE_ROOT/tests/guest/$s.sh ]] || { result fail "no guest suite $s"; continue; }
	fl=${OXE_FLAVOUR:-$(suite_flavour "$s")}
	((quick)) && fl=${OXE_FLAVOUR:-plain}
	by_flavour[$fl]+="$s "
done

# run_guest FLAVOUR SUITES...: kernel, module (clippy-clean) and test
# programs for that flavour, one guest boot, then the suites' KTAP counted.
run_guest() {
	local flavour=$1 kdir out_dir vm_rc f name line plan seen t
	shift
	t=$SECONDS
	kdir=$("$OXE_ROOT/scripts/build-kernel.sh" "$flavour") || { result fail "$flavour kernel build"; return 1; }
	timed "$flavour kernel" $t
	t=$SECONDS
	if KDIR=$kdir "$OXE_ROOT/scripts/build-module.sh" --clippy >/dev/null; then
		result ok "rdma_oxe.ko builds against the $flavour kernel, clippy and warning clean"
	else
		result fail "rdma_oxe.ko builds against the $flavour kernel, clippy and warning clean"
		return 1
	fi
	# The guests must load what `make run` and the benchmarks build: a plain
	# build of the same source is byte-identical (clippy-driver compiles
	# with MIR optimisations off, and its module used to be the one tested).
	local ko
	ko=$(mktemp)
	cp "$OXE_ROOT/rdma_oxe.ko" "$ko"
	if KDIR=$kdir "$OXE_ROOT/scripts/build-module.sh" >/dev/null && cmp -s "$ko" "$OXE_ROOT/rdma_oxe.ko"; then
		result ok "the $flavour module the guests load is the plain build, not clippy-driver's"
	else
		result fail "the $flavour module the guests load is the plain build, not clippy-driver's"
	fi
	rm -f "$ko"
	if ! make -s -C "$OXE_ROOT" KDIR="$kdir" tests >/dev/null; then
		result fail "test programs build"
		return 1
	fi
	timed "module + test programs ($flavour)" $t
	(($#)) || return 0

	t=$SECONDS
	out_dir=$(mktemp -d /tmp/oxe-test.XXXXXX)
	"$OXE_ROOT/qemu/run-vm.sh" -k "$kdir" -o "$out_dir" -t 3000 -- \
		env OXE_FUZZ_SEEDS="${OXE_FUZZ_SEEDS:-}" tests/guest-run.sh "$@"
	vm_rc=$?
	for f in "$out_dir"/ktap/*.ktap; do
		[[ -f $f ]] || continue
		name=$(basename "$f" .ktap)
		while IFS= read -r line; do
			case $line in
			"not ok "*) result fail "$name: ${line#not ok }" ;;
			"ok "*"# SKIP"*) result skip "$name: ${line#ok }" ;;
			"ok "*) result ok "$name: ${line#ok }" ;;
			esac
		done <"$f"
		# A plan that was not met (a script died half way) is a failure too.
		plan=$(sed -nE 's/^1\.\.([0-9]+).*/\1/p' "$f" | head -1)
		seen=$(grep -cE '^(ok|not ok) [0-9]+ ' "$f")
		[[ -z $plan ]] || ((seen >= plan)) || result fail "$name: planned $plan cases, ran $seen"
	done
	[[ -n $(ls "$out_dir"/ktap 2>/dev/null) ]] || result fail "no guest test ran on $flavour"
	if ((vm_rc == 90)); then
		result fail "$flavour guest: kernel console is clean (see $out_dir/kernel-reports.txt)"
	elif [[ -f $out_dir/status ]]; then
		result ok "$flavour guest: kernel console is clean: no WARN, BUG, Oops, KASAN or lockdep report"
	else
		result fail "$flavour guest finished (see $out_dir/console.log)"
	fi
	echo "# $flavour guest output kept in $out_dir"
	# guest-run.sh notes when the suites started (the boot before it) and
	# how long each took.
	if [[ -f $out_dir/times ]]; then
		while read -r name secs; do
			times+=("$(printf '%-34s %5d s' "  $flavour: $name" "$secs")")
		done <"$out_dir/times"
	fi
	timed "$flavour guest (boot + suites)" $t
}

# The module must build against the plain kernel (`make run`, benchmarks)
# even when no suite runs there.
[[ -n ${by_flavour[plain]:-} ]] || by_flavour[plain]=""
for fl in plain debug kasan; do
	[[ -v by_flavour[$fl] ]] || continue
	# shellcheck disable=SC2086 # a list of suite names
	run_guest "$fl" ${by_flavour[$fl]} || continue
done

# Two guests on a private link, on the plain kernel (interoperability, not
# memory checks: the wire's memory handling runs on kasan in 45-wire): oxe
# against rdma_rxe, the whole list each way; then oxe against oxe, a part of it.
# pair_run NAME DRIVER_A DRIVER_B: KTAP results as "NAME a: ..." / "NAME b: ...".
pair_run() {
	local name=$1 t=$SECONDS prc=0 out line
	out=$("$OXE_ROOT/scripts/two-guests.sh" "$2" "$3" 2>&1) || prc=$?
	while IFS= read -r line; do
		case $line in
		[ab]": not ok "*) result fail "$name ${line%%:*}: ${line#*not ok }" ;;
		[ab]": ok "*) result ok "$name ${line%%:*}: ${line#*: ok }" ;;
		"# "*) echo "$line" ;;
		esac
	done <<<"$out"
	if ((prc == 0)); then
		result ok "$name: both guests finished, kernel consoles clean"
	else
		result fail "$name: both guests finished, kernel consoles clean (exit $prc)"
	fi
	timed "two guests, $2 and $3 ($name)" $t
}
if ((pair)); then
	pair_run pair oxe rxe
	# oxe at both ends: one line per perftest with -n and one with -a (each
	# guest is client or server of each, oxe both), and the data checks.
	OXE_PAIR_ONLY='^10.77.0.1 ib_(write|send)_bw -[na]|^10.77.0.2 ib_read_bw -[na]|^10.77.0.1 ib_atomic_bw|^10.77.0.1 ib_write_lat -[na]|^10.77.0.2 ib_read_lat -n|^10.77.0.1 ib_read_lat -a|^10.77.0.2 ib_send_lat -n|^10.77.0.1 ib_send_lat -a|-q 4|ibv_rc_pingpong -s 65536|ibv_uc_pingpong|ibv_ud_pingpong|rping|mckey|xfer_check|@ipv6' \
		pair_run pair-oxe oxe oxe
fi

# rdma-core's pyverbs suite on rdma_rxe and on oxe, one plain boot each:
# what passes on rxe passes on oxe (scripts/pyverbs-compare.sh).
if ((pyverbs)); then
	t=$SECONDS
	prc=0
	out=$("$OXE_ROOT/scripts/pyverbs-compare.sh" 2>&1) || prc=$?
	while IFS= read -r line; do
		case $line in
		"not ok - "*) result fail "${line#not ok - }" ;;
		"ok - "*"# SKIP"*) result skip "${line#ok - }" ;;
		"ok - "*) result ok "${line#ok - }" ;;
		"# "*) echo "$line" ;;
		esac
	done <<<"$out"
	((prc == 0)) || grep -q '^not ok' <<<"$out" || result fail "pyverbs comparison ran (exit $prc)"
	timed "pyverbs on rxe and oxe" $t
fi
finish
