#!/bin/sh
# Kernel verbs, which only kernel clients reach: the DMA MR of ib_alloc_pd,
# fast registration (alloc_mr, map_mr_sg, REG_MR) and invalidation
# (LOCAL_INV, SEND_WITH_INV). The cases are KUnit tests in
# tests/kverbs/oxe_kverbs_test.c; loading the module runs them (the guest boots
# with kunit.enable=1 kunit.autorun=1) and their KTAP lands in the kernel log,
# whence it is copied here. Afterwards no MR is left and everything unloads.
. "$(dirname "$0")/../lib.sh"

ko=tests/kverbs/oxe_kverbs_test.ko
ktap_print_header
[ -f $ko ] || ktap_exit_fail_msg "$ko not built"
oxe_load || ktap_exit_fail_msg "rdma_oxe does not load"
rdma link add oxe0 type oxe netdev eth0 || ktap_exit_fail_msg "rdma link add failed"

mark="oxe-kverbs-$$"
echo "$mark" >/dev/kmsg
insmod $ko dev=oxe0
ins=$?
# The suite's lines, after our mark, without the printk prefix; case lines
# are indented one level under the suite.
dmesg | sed -n "/$mark/,\$p" | sed -E 's/^\[[^]]*\] ?//' >/tmp/kverbs.log
cases=$(grep -cE '^    (not )?ok [0-9]+ ' /tmp/kverbs.log)
ktap_set_plan $((cases + 2))
grep -E '^    # ' /tmp/kverbs.log | sed 's/^    //'
grep -E '^    (not )?ok [0-9]+ ' /tmp/kverbs.log | sed -E 's/^    //; s/^((not )?ok) [0-9]+ /\1 /' >/tmp/kverbs.cases
while read -r line; do
	case $line in
	"not ok "*) ktap_test_fail "kunit ${line#not ok }" ;;
	*"# SKIP"*) d=${line#ok }; ktap_test_skip "kunit ${d%% # SKIP*}" ;;
	*) ktap_test_pass "kunit ${line#ok }" ;;
	esac
done </tmp/kverbs.cases
check "the KUnit suite ran ($cases cases, insmod status $ins)" [ "$cases" -ge 13 ]
rmmod oxe_kverbs_test 2>/dev/null
left=$(rdma res show mr 2>/dev/null | grep -c "oxe0")
rdma link delete oxe0
oxe_unload
clean() { [ "$left" = 0 ] && ! oxe_loaded; }
check "no MR left behind ($left), module unloaded" clean
ktap_finished
