#!/bin/sh
# Memory registration through the stock libibverbs: tests/mr_test.c, run
# with the kselftest harness (its KTAP is this file's output). Afterwards the
# system-wide pin counters are back where they were, within the 9p noise.
. "$(dirname "$0")/../lib.sh"


before=$(pins)
oxe_load || { ktap_print_header; ktap_exit_fail_msg "rdma_oxe does not load"; }
rdma link add oxe0 type oxe netdev eth0 || { ktap_print_header; ktap_exit_fail_msg "rdma link add failed"; }
echo 512 >/proc/sys/vm/nr_hugepages
echo madvise >/sys/kernel/mm/transparent_hugepage/enabled

# On KASAN under TCG 100k registrations take two minutes: 20k there, and
# 8k reg+dereg cycles where the plain kernel takes 128k
# (churn_leaves_no_key_behind: a slot kept per key would add 128 XArray
# nodes against a limit of 32; the node count moved by 1 in 22 runs of 32k).
many=100000 churn=131072
grep -q '^CONFIG_KASAN=y' "$OXE_KDIR/.config" 2>/dev/null && many=20000 churn=8192
echo "# many_small_mrs_100k registers $many MRs, churn_leaves_no_key_behind $churn"
# The cases of a key table going around or filling up run below, on a
# small one.
OXE_MANY_MRS=$many OXE_CHURN=$churn OXE_DEV=oxe0 tests/bin/mr_test \
	-T reused_index_gets_a_new_tag -T a_full_key_table_says_enospc
rc=$?

echo 0 >/proc/sys/vm/nr_hugepages
rdma link delete oxe0
oxe_unload

# A device with 100 MR key slots (mr_keys): a slot comes back, and the
# table fills, within a few hundred registrations instead of 2^23. Their
# results extend the plan as the lines below do.
OXE_MODPARAMS=mr_keys=100 oxe_load && rdma link add oxe0 type oxe netdev eth0 &&
	OXE_DEV=oxe0 tests/bin/mr_test -t reused_index_gets_a_new_tag -t a_full_key_table_says_enospc \
	>/tmp/mr-keys.ktap 2>&1
krc=$?
grep -v -E '^(TAP version|1\.\.|ok |not ok )' /tmp/mr-keys.ktap
n=910
grep -E '^(ok|not ok) [0-9]+ ' /tmp/mr-keys.ktap | while read -r res; do
	n=$((n + 1))
	echo "$res" | sed -E "s/^(not )?ok [0-9]+ /\1ok $n mr_keys=100: /"
done
[ "$(grep -E '^ok [0-9]+ ' /tmp/mr-keys.ktap | grep -vc '# SKIP')" = 2 ] || { echo "not ok 919 mr_keys=100: both cases ran and passed (exit $krc)"; rc=1; }
rdma link delete oxe0 2>/dev/null
oxe_unload
after=$(pins)
echo "# pinned pages system-wide: before $before, after $after"
# The plain TAP lines below extend the harness's plan; the host counts them.
if pins_back $before; then
	echo "ok 900 mr: system-wide pins back to baseline after rmmod"
else
	echo "not ok 900 mr: system-wide pins back to baseline after rmmod ($before -> $after)"
fi
exit $rc
