#!/bin/sh
# Runs in the guest: every tests/guest/*.sh (or those named), each with a
# timeout, its KTAP output kept in $OXE_OUT/ktap/NAME.ktap for the host to count.
cd "$(dirname "$0")/.." || exit 1
mkdir -p "$OXE_OUT/ktap"
rc=0
tests=${*:-$(ls tests/guest/*.sh)}
for t in $tests; do
	name=$(basename "$t" .sh)
	t=tests/guest/$name.sh
	echo "# ---- $name"
	timeout -k 5 "${OXE_TEST_TIMEOUT:-600}" sh "$t" 2>&1 | tee "$OXE_OUT/ktap/$name.ktap"
	# Every case leaves the kernel as it found it: no device, no module.
	if [ -n "$(ls /sys/class/infiniband 2>/dev/null)" ] || [ -d /sys/module/rdma_oxe ] ||
	   [ -d /sys/module/rdma_rxe ]; then
		echo "not ok 999 $name left devices or modules behind" | tee -a "$OXE_OUT/ktap/$name.ktap"
		for d in /sys/class/infiniband/*; do [ -e "$d" ] && rdma link delete "$(basename "$d")"; done
		modprobe -r rdma_oxe rdma_rxe 2>/dev/null
	fi
done
dmesg >"$OXE_OUT/dmesg.txt"
exit $rc
