#!/bin/sh
# Runs in the guest: every tests/guest/*.sh (or those named), each with a
# timeout, its KTAP output kept in $OXE_OUT/ktap/NAME.ktap for the host to count.
cd "$(dirname "$0")/.." || exit 1
mkdir -p "$OXE_OUT/ktap" "$OXE_OUT/case-times"
rc=0
KML=/sys/kernel/debug/kmemleak
# Seconds since boot, for the host's table of times (boot, then each suite).
now() { cut -d. -f1 /proc/uptime; }
nowf() { cut -d' ' -f1 /proc/uptime; }
echo "boot $(now)" >"$OXE_OUT/times"
# Only what the suite allocates counts: forget what boot left behind.
[ -w $KML ] && echo clear >$KML
tests=${*:-$(ls tests/guest/*.sh)}
for t in $tests; do
	name=$(basename "$t" .sh)
	t=tests/guest/$name.sh
	echo "# ---- $name"
	t0=$(now) t0f=$(nowf)
	# case-times/NAME: seconds each case took (from the previous result
	# line), to see where a slow suite spends its time; stdbuf, so that
	# the test programs' results come out as each case ends.
	timeout -k 5 "${OXE_TEST_TIMEOUT:-1200}" stdbuf -oL sh "$t" 2>&1 | tee "$OXE_OUT/ktap/$name.ktap" |
		while IFS= read -r line; do
			printf '%s\n' "$line"
			case $line in
			"ok "[0-9]* | "not ok "[0-9]*)
				t1=$(nowf)
				awk -v a="$t1" -v b="$t0f" -v l="$line" 'BEGIN { printf "%7.2f %s\n", a - b, l }' >>"$OXE_OUT/case-times/$name"
				t0f=$t1 ;;
			esac
		done
	# Every case leaves the kernel as it found it: no device, no module.
	if [ -n "$(ls /sys/class/infiniband 2>/dev/null)" ] || [ -d /sys/module/rdma_oxe ] ||
	   [ -d /sys/module/rdma_rxe ]; then
		echo "not ok 999 $name left devices or modules behind" | tee -a "$OXE_OUT/ktap/$name.ktap"
		for d in /sys/class/infiniband/*; do [ -e "$d" ] && rdma link delete "$(basename "$d")"; done
		modprobe -r rdma_oxe rdma_rxe 2>/dev/null
	fi
	echo "$name $(($(now) - t0))" >>"$OXE_OUT/times"
done
# The debug flavour: a kmemleak scan after the whole suite. Two scans, as
# kmemleak reports an object only once it looked unreferenced twice.
if [ -w $KML ]; then
	t0=$(now) t0f=$(nowf)
	echo scan >$KML; sleep 6; echo scan >$KML
	cat $KML >"$OXE_OUT/kmemleak.txt"
	n=$(grep -c '^unreferenced object' "$OXE_OUT/kmemleak.txt")
	{
		echo "TAP version 13"; echo "1..1"
		head -40 "$OXE_OUT/kmemleak.txt" | sed 's/^/# /'
		if [ "$n" = 0 ]; then echo "ok 1 kmemleak: nothing leaked"; else echo "not ok 1 kmemleak: $n unreferenced objects"; fi
	} | tee "$OXE_OUT/ktap/99-kmemleak.ktap"
	echo "kmemleak-scan $(($(now) - t0))" >>"$OXE_OUT/times"
fi
dmesg >"$OXE_OUT/dmesg.txt"
exit $rc
