#!/bin/sh
# The verbs fuzzer (tests/fuzz_verbs.c) with fixed seeds, so that the suite
# gives the same verdict every run; OXE_FUZZ_SEEDS="..." (`make fuzz`) tries
# others. Each seed is printed so a failure can be replayed with
# `fuzz_verbs SEED ITERATIONS`.
. "$(dirname "$0")/../lib.sh"

ITER=${OXE_FUZZ_ITERATIONS:-3000}
before=$(pins)
oxe_load && rdma link add oxe0 type oxe netdev eth0 || { ktap_print_header; ktap_exit_fail_msg "no oxe0"; }
rc=0
n=0
for seed in ${OXE_FUZZ_SEEDS:-1 20261130 3141592653}; do
	n=$((n + 1))
	out=$(OXE_DEV=oxe0 timeout 600 tests/bin/fuzz_verbs "$seed" "$ITER")
	r=$?
	echo "$out" | grep '^#'
	if [ $r = 0 ]; then
		echo "ok $n fuzz seed $seed, $ITER calls"
	else
		echo "not ok $n fuzz seed $seed, $ITER calls (exit $r; replay: fuzz_verbs $seed $ITER)"
		rc=1
	fi
done
rdma link delete oxe0
oxe_unload
after=$(pins)
if pins_back $before; then
	echo "ok $((n + 1)) fuzz: system-wide pins back to baseline"
else
	echo "not ok $((n + 1)) fuzz: system-wide pins back to baseline ($before -> $after)"
	rc=1
fi
exit $rc
