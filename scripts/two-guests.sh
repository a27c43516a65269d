#!/usr/bin/env bash
# Two guests on a private link, one with oxe and one with rdma_rxe (or both
# with the same driver): QEMU dgram netdevs between two UDP ports of
# 127.0.0.1, nothing else on the link. Each runs tests/guest-pair.sh; prints
# both guests' KTAP results and exits non-zero if a case failed or a guest's
# console shows a kernel report.
# Usage: two-guests.sh [DRIVER_A DRIVER_B]   (default: oxe rxe)
set -euo pipefail
. "$(dirname "$0")/lib.sh"
da=${1:-oxe} db=${2:-rxe}
kdir=${KDIR:-$("$OXE_ROOT/scripts/build-kernel.sh" plain)}
KDIR=$kdir "$OXE_ROOT/scripts/build-module.sh" >/dev/null
out=$(mktemp -d /tmp/oxe-pair.XXXXXX)
pa=$((20000 + RANDOM % 20000)) pb=$((pa + 1))
link() { echo "dgram,local.type=inet,local.host=127.0.0.1,local.port=$1,remote.type=inet,remote.host=127.0.0.1,remote.port=$2"; }
flag() { [[ $1 == rxe ]] && echo -r || true; }
# One vCPU each: two guests share the host's two cores.
OXE_SMP=1 OXE_NETDEV=$(link $pa $pb) OXE_MAC=52:54:00:12:34:01 OXE_IP=10.77.0.1 \
	"$OXE_ROOT/qemu/run-vm.sh" $(flag "$da") -k "$kdir" -o "$out/a" -t 1500 -- env OXE_PAIR_ONLY="${OXE_PAIR_ONLY:-}" tests/guest-pair.sh "$da" 10.77.0.2 &
a=$!
OXE_SMP=1 OXE_NETDEV=$(link $pb $pa) OXE_MAC=52:54:00:12:34:02 OXE_IP=10.77.0.2 \
	"$OXE_ROOT/qemu/run-vm.sh" $(flag "$db") -k "$kdir" -o "$out/b" -t 1500 -- env OXE_PAIR_ONLY="${OXE_PAIR_ONLY:-}" tests/guest-pair.sh "$db" 10.77.0.1 &
b=$!
rc=0
wait $a || rc=1
wait $b || rc=1
for g in a b; do
	c=$out/$g/console.log
	grep -E '^(ok|not ok) [0-9]+ ' "$c" | sed "s/^/$g: /" || true
	grep -q '^not ok' "$c" && rc=1
	# A guest that died half way ran fewer cases than it planned.
	plan=$(sed -nE 's/^1\.\.([0-9]+).*/\1/p' "$c" | head -1)
	seen=$(grep -cE '^(ok|not ok) [0-9]+ ' "$c" || true)
	if [[ -z $plan ]] || ((seen < plan)); then
		echo "$g: not ok 999 planned ${plan:-?} cases, ran $seen"
		rc=1
	fi
done
echo "# guests' output in $out"
exit $rc
