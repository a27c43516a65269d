#!/usr/bin/env bash
# Two guests on a private link, one with oxe and one with rdma_rxe (or both
# with the same driver): QEMU dgram netdevs between two UDP ports of
# 127.0.0.1, nothing else on the link. Each runs tests/guest-pair.sh; prints
# both guests' KTAP results and exits non-zero if a case failed or a guest's
# console shows a kernel report.
# Usage: two-guests.sh [DRIVER_A DRIVER_B]   (default: oxe rxe)
# OXE_PAIR_ONLY=REGEX runs a part of the list, OXE_PAIR_BENCH=1 the
# benchmark's list instead (scripts/bench-perftest.sh pair), OXE_PAIR_PERF=1
# profiles each case (perf-N.txt in each guest's directory), OXE_PAIR_ARGS
# adds arguments to each case, OXE_PAIR_REPEAT=N runs each N times,
# OXE_PAIR_OUT names the output directory, OXE_PAIR_RCVBUF sizes the link's
# sockets (below).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
da=${1:-oxe} db=${2:-rxe}
kdir=${KDIR:-$("$OXE_ROOT/scripts/build-kernel.sh" plain)}
KDIR=$kdir "$OXE_ROOT/scripts/build-module.sh" >/dev/null
make -s -C "$OXE_ROOT" KDIR="$kdir" tests
out=${OXE_PAIR_OUT:-$(mktemp -d /tmp/oxe-pair.XXXXXX)}
mkdir -p "$out"
pa=$((20000 + RANDOM % 20000)) pb=$((pa + 1))
link() { echo "dgram,local.type=inet,local.host=127.0.0.1,local.port=$1,remote.type=inet,remote.host=127.0.0.1,remote.port=$2"; }
# OXE_PAIR_RCVBUF=BYTES: each QEMU gets its link's socket from
# scripts/udpfd.py, with that receive buffer (the host's default, ~90 of
# these datagrams, drops what a burst brings while the receiving QEMU waits
# for a core).
wrap=()
if [[ -n ${OXE_PAIR_RCVBUF:-} ]]; then
	fd=77
	link() { echo "dgram,local.type=fd,local.str=$fd"; }
	wrap=(python3 "$OXE_ROOT/scripts/udpfd.py" "$OXE_PAIR_RCVBUF" $fd)
fi
flag() { [[ $1 == rxe ]] && echo -r || true; }
# A guest whose link stops (the kernel's "NETDEV WATCHDOG") gets both QEMUs'
# view of their virtio-net queues and the host's sockets recorded, twice 10 s
# apart, in $out/stall.txt: which side holds the packets.
nic=/machine/peripheral/nic0/virtio-backend
snapshot() {
	date
	ss -uamn "( sport = :$pa or sport = :$pb )"
	for g in a b; do
		echo "== guest $g"
		python3 "$OXE_ROOT/scripts/qmon.py" "$out/$g.mon" "info virtio-status $nic" \
			"vring $nic 0" "vring $nic 1" || true
	done
}
watch_stall() {
	while kill -0 "$@" 2>/dev/null; do
		if grep -qs 'NETDEV WATCHDOG' "$out"/[ab]/console.log; then
			{ snapshot; sleep 10; snapshot; } >"$out/stall.txt" 2>&1
			return
		fi
		sleep 2
	done
}
# One vCPU each: two guests share the host's two cores. maxcpus=2: QEMU 7.2's
# TCG translates a guest that can only ever have one CPU serially, and then
# a locked instruction (Linux's smp_mb) is a plain load and store with no
# host barrier. virtio's notification handshake needs one: the guest's store
# of the avail index passed its load of QEMU's avail_event while QEMU's I/O
# thread re-armed notifications, neither saw the other, no kick came and the
# TX queue stopped for good (the ring showed avail.idx 238 ahead of
# avail_event = last_avail_idx). With a second possible CPU the translation
# is parallel (host atomics) and costs no vCPU thread. Case 1 of
# guest-pair.sh (udp_flood) stalled within 13-64 s without it.
smp=${OXE_PAIR_SMP:-1,maxcpus=2}
OXE_MONITOR=$out/a.mon OXE_SMP=$smp OXE_NETDEV=$(link $pa $pb) OXE_MAC=52:54:00:12:34:01 OXE_IP=10.77.0.1 \
	${wrap[@]+"${wrap[@]}" $pa $pb --} "$OXE_ROOT/qemu/run-vm.sh" $(flag "$da") -k "$kdir" -o "$out/a" -t 1500 -- env OXE_PAIR_ONLY="${OXE_PAIR_ONLY:-}" OXE_PAIR_BENCH="${OXE_PAIR_BENCH:-}" OXE_PAIR_PERF="${OXE_PAIR_PERF:-}" OXE_PAIR_ARGS="${OXE_PAIR_ARGS:-}" OXE_PAIR_REPEAT="${OXE_PAIR_REPEAT:-}" OXE_PAIR_TRACE="${OXE_PAIR_TRACE:-}" OXE_MODPARAMS="${OXE_MODPARAMS:-}" OXE_PAIR_PEER="$db" tests/guest-pair.sh "$da" 10.77.0.2 &
a=$!
OXE_MONITOR=$out/b.mon OXE_SMP=$smp OXE_NETDEV=$(link $pb $pa) OXE_MAC=52:54:00:12:34:02 OXE_IP=10.77.0.2 \
	${wrap[@]+"${wrap[@]}" $pb $pa --} "$OXE_ROOT/qemu/run-vm.sh" $(flag "$db") -k "$kdir" -o "$out/b" -t 1500 -- env OXE_PAIR_ONLY="${OXE_PAIR_ONLY:-}" OXE_PAIR_BENCH="${OXE_PAIR_BENCH:-}" OXE_PAIR_PERF="${OXE_PAIR_PERF:-}" OXE_PAIR_ARGS="${OXE_PAIR_ARGS:-}" OXE_PAIR_REPEAT="${OXE_PAIR_REPEAT:-}" OXE_PAIR_TRACE="${OXE_PAIR_TRACE:-}" OXE_MODPARAMS="${OXE_MODPARAMS:-}" OXE_PAIR_PEER="$da" tests/guest-pair.sh "$db" 10.77.0.1 &
b=$!
watch_stall $a $b &
w=$!
rc=0
wait $a || rc=1
wait $b || rc=1
wait $w || true
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
if [[ -s $out/stall.txt ]]; then
	echo "# a guest's link stalled; QEMU's queues and the host's sockets:"
	sed 's/^/# /' "$out/stall.txt"
fi
echo "# guests' output in $out"
exit $rc
