#!/bin/sh
# On-demand paging through the stock libibverbs and librxe:
# tests/odp_test.c (kselftest harness). Afterwards no MR is left on oxe0,
# the pins are back and the module unloads.
. "$(dirname "$0")/../lib.sh"

before=$(pins)
oxe_load || { ktap_print_header; ktap_exit_fail_msg "rdma_oxe does not load"; }
rdma link add oxe0 type oxe netdev eth0 || { ktap_print_header; ktap_exit_fail_msg "rdma link add failed"; }
mrs0=$(rdma res show mr 2>/dev/null | grep -c "dev oxe0")

OXE_DEV=oxe0 tests/bin/odp_test
rc=$?

# The plain TAP lines below extend the harness's plan; the host counts them.
mrs=$(rdma res show mr 2>/dev/null | grep -c "dev oxe0")
if [ "$mrs" -eq "$mrs0" ]; then
	echo "ok 900 odp: no MR left on oxe0"
else
	rdma res show mr | sed 's/^/# /'
	echo "not ok 900 odp: no MR left on oxe0 ($mrs0 -> $mrs)"
	rc=1
fi
rdma link delete oxe0
oxe_unload
if ! oxe_loaded && pins_back $before; then
	echo "ok 901 odp: the module unloads and the pins are back ($before -> $(pins))"
else
	echo "not ok 901 odp: the module unloads and the pins are back ($before -> $(pins))"
	rc=1
fi
exit $rc
