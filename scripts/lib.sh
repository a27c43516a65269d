# Shared settings for oxe's scripts. Sourced, not run.
# shellcheck shell=bash

OXE_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# Everything large (kernel source, builds, apt lists) lives outside the repo.
OXE_CACHE=${OXE_CACHE:-/var/cache/oxe}
KVER_MAJOR=7.2
BINDGEN_VERSION=0.73.2
export LIBCLANG_PATH=${LIBCLANG_PATH:-/usr/lib/llvm-19/lib}
export PATH="$HOME/.cargo/bin:$PATH"

log() { printf '[oxe %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }
die() { log "error: $*"; exit 1; }

kernel_src() {
	local d="$OXE_CACHE/src/linux-source-$KVER_MAJOR"
	[[ -f $d/Makefile ]] || die "kernel source missing: run scripts/setup.sh"
	echo "$d"
}

# bench_boots OUT ROUNDS GUEST-PROGRAM...: for ROUNDS rounds, boot the plain
# kernel once with oxe and once with rdma_rxe (alternating, never together),
# run the program under scripts/guest-bench.sh, and keep OUT/<flavour>-<round>.txt.
bench_boots() {
	local out=$1 rounds=$2 kdir r flavour flag
	shift 2
	"$OXE_ROOT/scripts/setup.sh"
	kdir=$("$OXE_ROOT/scripts/build-kernel.sh")
	KDIR=$kdir "$OXE_ROOT/scripts/build-module.sh" >/dev/null
	make -s -C "$OXE_ROOT" KDIR="$kdir" tests
	for r in $(seq 1 "$rounds"); do
		for flavour in oxe rxe; do
			log "round $r: $flavour"
			flag=()
			[[ $flavour == rxe ]] && flag=(-r)
			"$OXE_ROOT/qemu/run-vm.sh" "${flag[@]}" -k "$kdir" -o "$out/$flavour-$r" -- \
				scripts/guest-bench.sh "$@" >/dev/null
			cp "$out/$flavour-$r/bench.txt" "$out/$flavour-$r.txt"
		done
	done
}

# pair_boots OUT ROUNDS PREFIX: ROUNDS rounds of two guests on a private link
# (two-guests.sh's benchmark list), oxe<->oxe then rxe<->rxe; keeps guest B's
# figures as OUT/PREFIX<driver>-<round>.txt (empty if the run gave none).
pair_boots() {
	local out=$1 rounds=$2 pre=$3 r drv
	for r in $(seq 1 "$rounds"); do
		for drv in oxe rxe; do
			log "round $r: $drv<->$drv, two guests"
			OXE_PAIR_BENCH=1 OXE_PAIR_OUT=$out/$pre$drv-$r "$OXE_ROOT/scripts/two-guests.sh" $drv $drv \
				>"$out/$pre$drv-$r.log" 2>&1 || log "round $r: $drv<->$drv: a case failed ($out/$pre$drv-$r.log)"
			cp "$out/$pre$drv-$r/b/bench.txt" "$out/$pre$drv-$r.txt" 2>/dev/null || : >"$out/$pre$drv-$r.txt"
		done
	done
}
