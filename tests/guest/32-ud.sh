#!/bin/sh
# UD QPs, address handles and the GSI QP: tests/ud_test.c (kselftest
# harness) through the stock libibverbs, the kernel's MAD layer on QP1, and
# rdma_cm's tools over it. Afterwards no QP is left but QP1 and the module
# unloads.
. "$(dirname "$0")/../lib.sh"

oxe_load || { ktap_print_header; ktap_exit_fail_msg "rdma_oxe does not load"; }
mark="oxe-ud-$$"
echo "$mark" >/dev/kmsg
rdma link add oxe0 type oxe netdev eth0 || { ktap_print_header; ktap_exit_fail_msg "rdma link add failed"; }

OXE_DEV=oxe0 tests/bin/ud_test
rc=$?

# The MAD layer made QP1 on the new device (before, it logged "Couldn't
# create ib_mad QP1").
if ! dmesg | sed -n "/$mark/,\$p" | grep -qi "ib_mad\|QP1" && rdma res show qp 2>/dev/null | grep "oxe0" | grep -q "lqpn 1 .*type GSI"; then
	echo "ok 901 ud: the MAD layer has its GSI QP (QP1) on oxe0, no error logged"
else
	dmesg | sed -n "/$mark/,\$p" | grep -i "mad\|qp1" | sed 's/^/# /'
	rdma res show qp 2>/dev/null | sed 's/^/# /'
	echo "not ok 901 ud: the MAD layer has its GSI QP (QP1) on oxe0, no error logged"
	rc=1
fi

# rdma_cm over oxe0: address and route resolution, then ib_cm's MADs on
# QP1 (REQ, REP, RTU, DREQ; SIDR for UD). cm_pair N NAME SERVER CLIENT: the
# client is retried while the server is not listening yet (rdma_cm
# listeners have no socket to wait for); both must exit 0.
cm_pair() {
	n=$1 name=$2 srv_cmd=$3 cli_cmd=$4
	timeout 120 $srv_cmd >/tmp/cm.srv 2>&1 &
	srv=$!
	ok=0
	for _i in $(seq 30); do
		sleep 1
		if timeout 120 $cli_cmd >/tmp/cm.cli 2>&1; then ok=1; break; fi
		kill -0 $srv 2>/dev/null || break
	done
	wait $srv || ok=0
	if [ $ok = 1 ]; then
		echo "ok $n ud: $name"
	else
		sed 's/^/# srv: /' /tmp/cm.srv | tail -5; sed 's/^/# cli: /' /tmp/cm.cli | tail -5
		echo "not ok $n ud: $name"
		rc=1
	fi
}
ip=10.77.0.1
cm_pair 902 "rping -V, 200 pings with data verification (RC over rdma_cm)" \
	"rping -s -a $ip -V -C 200" "rping -c -a $ip -V -C 200"
cm_pair 903 "ucmatose: connections, sends, disconnect" "ucmatose" "ucmatose -s $ip"
cm_pair 904 "udaddy: UD through rdma_cm (SIDR), sends both ways" "udaddy" "udaddy -s $ip"
cm_pair 905 "rdma_server / rdma_client (librdmacm's example)" "rdma_server" "rdma_client -s $ip"
# mckey: the receiver joins the group through rdma_cm (which joins it on
# the netdev too) and attaches its UD QP; the sender's datagrams come back
# to it through the IP stack's multicast loop. Datagrams sent before the
# receiver attached are lost, as UD's are: the sender sends its 10 again,
# once a second, until the receiver has had 10.
mckey_pair() {
	timeout 120 mckey -m 239.1.2.4 -b $ip -C 10 >/tmp/mc.srv 2>&1 &
	srv=$!
	for _i in $(seq 60); do
		sleep 1
		kill -0 $srv 2>/dev/null || break
		timeout 60 mckey -m 239.1.2.4 -b $ip -C 10 -s >/tmp/mc.cli 2>&1
	done
	if wait $srv; then
		echo "ok 906 ud: mckey: multicast through rdma_cm, 10 datagrams to the group"
	else
		sed 's/^/# srv: /' /tmp/mc.srv | tail -5; sed 's/^/# cli: /' /tmp/mc.cli | tail -5
		echo "not ok 906 ud: mckey: multicast through rdma_cm, 10 datagrams to the group"
		rc=1
	fi
}
mckey_pair

left=$(rdma res show qp 2>/dev/null | grep "oxe0" | grep -vc "type GSI")
rdma link delete oxe0
oxe_unload
if [ "$left" = 0 ] && ! [ -d /sys/module/rdma_oxe ]; then
	echo "ok 900 ud: no QPs left but QP1, module unloaded"
else
	echo "not ok 900 ud: no QPs left but QP1, module unloaded ($left left)"
	rc=1
fi
exit $rc
