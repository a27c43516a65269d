#!/bin/sh
# The whole data-path suite (tests/dp_test.c) with every packet through the
# RoCEv2 path: encoded, routed, ICRC'd and checked on receive
# (wire_loopback=1). On the plain kernel; 45-wire runs a part of it on kasan.
. "$(dirname "$0")/../lib.sh"

before=$(pins)
OXE_MODPARAMS=wire_loopback=1 oxe_load || { ktap_print_header; ktap_exit_fail_msg "rdma_oxe does not load"; }
rdma link add oxe0 type oxe netdev eth0 || { ktap_print_header; ktap_exit_fail_msg "rdma link add failed"; }

OXE_DEV=oxe0 OXE_WIRE_LOOPBACK=1 tests/bin/dp_test
rc=$?

icrc=$(rdma statistic show link oxe0/1 | tr ' ' '\n' | awk 'f{print; exit} $0=="icrc_err"{f=1}')
left=$(rdma res show qp 2>/dev/null | grep "oxe0" | grep -vc "type GSI")
rdma link delete oxe0
oxe_unload
echo "# icrc_err $icrc; QPs left: $left"
if pins_back $before && [ "$left" = 0 ] && [ "$icrc" = 0 ]; then
	echo "ok 900 wire dp: no ICRC error, no pins and no QPs left, module unloaded"
else
	echo "not ok 900 wire dp: no ICRC error, no pins and no QPs left, module unloaded"
fi
exit $rc
