#!/bin/sh
# make bench, in the guest (under scripts/guest-bench.sh --wire, on $OXE_DEV):
# the floors (memcpy at each transfer size, and in mr_bench the bare
# pin_user_pages + unpin), reg+dereg (mr_bench), then perftest: WRITE, READ
# and SEND bandwidth at 4 KiB, 64 KiB and 1 MiB with one QP and with four,
# the atomic rate, the three 2-byte latencies, and on-demand paging (the
# first-touch cost per page, tests/odp_bench.c; ib_write_bw and ib_read_bw
# at 64 KiB with --odp against the pinned figures). In the wire pass
# (OXE_WIRE=1: oxe with every packet through the RoCEv2 path) only perftest.
# Prints "floor ...", "mr ...", "pd ..." and "pt <figure> <value> <unit>".
# A run that fails prints its figure as 0 and the harness reports it missing.
. "$(dirname "$0")/lib.sh"
BIN=$(dirname "$0")/bin
dev=${OXE_DEV:-oxe0}
dur=${OXE_BENCH_SECS:-2}
port=19100

if [ -z "$OXE_WIRE" ]; then
	# glibc copies mid-sized buffers with `rep movsb`, which TCG runs a byte
	# at a time (oxe's kernel copy avoids it: README, "The data path"): the
	# floor is the machine's fastest copy, glibc's vector loop.
	GLIBC_TUNABLES=glibc.cpu.x86_rep_movsb_threshold=2147483647 "$BIN/memcpy_bench" ||
		echo "# memcpy_bench failed" >&2
	OXE_DEV=$dev "$BIN/mr_bench" || echo "# mr_bench failed" >&2
fi

# pt FIGURE TOOL ARGS...: server and client of TOOL on $dev, one line.
# A run perftest could not time (perftest_untimed) is run again, up to twice.
pt() {
	fig=$1 t=$2
	shift 2
	for try in 1 2 3; do
		port=$((port + 1))
		timeout 120 $t -d "$dev" -F -p $port "$@" >/tmp/bench-srv 2>&1 &
		srv=$!
		i=0
		while ! ss -ltn | grep -q ":$port " && kill -0 $srv 2>/dev/null && [ $i -lt 300 ]; do
			sleep 0.1
			i=$((i + 1))
		done
		line=$(timeout 120 $t -d "$dev" -F -p $port "$@" 10.77.0.1 2>/tmp/bench-cli |
			grep -E '^ +[0-9]+ +[0-9]+ ' | tail -1)
		wait $srv
		perftest_untimed /tmp/bench-cli || break
		echo "# $fig: perftest could not time run $try (its clock rate sample failed)" >&2
		line=
	done
	# A run that failed: why, on the console (the figure is reported missing).
	[ -n "$line" ] || { echo "# $fig failed:"; tail -3 /tmp/bench-cli /tmp/bench-srv; } >&2
	# shellcheck disable=SC2086
	pt_line $t $line | sed "s|^pt $t |pt $fig |"
}

for op in write read send; do
	for q in 1 4; do
		for s in 4096 65536 1048576; do
			pt "ib_${op}_bw/$s/q$q" "ib_${op}_bw" -s $s -q $q -D "$dur"
		done
	done
done
pt ib_atomic_bw ib_atomic_bw -D "$dur"
for op in write read send; do
	pt "ib_${op}_lat/2" "ib_${op}_lat" -s 2 -n 2000
done
if [ -z "$OXE_WIRE" ]; then
	OXE_DEV=$dev "$BIN/odp_bench" || echo "# odp_bench failed" >&2
	for op in write read; do
		pt "ib_${op}_bw/65536/q1/odp" "ib_${op}_bw" -s 65536 -D "$dur" --odp
	done
fi
