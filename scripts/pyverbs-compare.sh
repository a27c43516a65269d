#!/usr/bin/env bash
# rdma-core's pyverbs suite (python3-pyverbs) on rdma_rxe and on oxe, each
# in its own boot of the plain kernel, compared: every test that passes on
# rxe must pass on oxe, and every test oxe runs must pass. One TAP line per
# test either driver ran ("ok - pyverbs: NAME"), a SKIP for those whose
# feature oxe does not have yet (KNOWN below, with the issue that brings
# it) or that fail on rxe as well, "not ok" for any other; then a line per
# guest for a clean kernel console, and comments with the counts. Exits
# non-zero on any "not ok".
#   scripts/pyverbs-compare.sh [OUTDIR]
set -euo pipefail
. "$(dirname "$0")/lib.sh"
out=${1:-$(mktemp -d /tmp/oxe-pyverbs.XXXXXX)}
mkdir -p "$out"
kdir=$("$OXE_ROOT/scripts/build-kernel.sh" plain)
KDIR=$kdir "$OXE_ROOT/scripts/build-module.sh" >/dev/null
declare -A vm_rc=()
for drv in rxe oxe; do
	flag=(); [[ $drv == rxe ]] && flag=(-r)
	rc=0
	"$OXE_ROOT/qemu/run-vm.sh" "${flag[@]}" -k "$kdir" -o "$out/$drv" -t 1800 -- \
		tests/pyverbs.sh "$drv" >"$out/$drv.log" 2>&1 || rc=$?
	vm_rc[$drv]=$rc
done
bad=0
for drv in rxe oxe; do
	if [[ ${vm_rc[$drv]} == 0 && -s $out/$drv/pyverbs-$drv.txt ]]; then
		echo "ok - pyverbs: the $drv guest ran the suite, kernel console clean"
	else
		echo "not ok - pyverbs: the $drv guest ran the suite, kernel console clean (exit ${vm_rc[$drv]}, $out/$drv)"
		bad=1
	fi
done
# Features oxe does not have yet: their tests are skipped, with the reason
# (none now; the form is PATTERN=REASON, a line each).
KNOWN=''
python3 "$OXE_ROOT/scripts/pyverbs_compare.py" "$out/rxe/pyverbs-rxe.txt" "$out/oxe/pyverbs-oxe.txt" "$KNOWN" || bad=1
exit $bad
