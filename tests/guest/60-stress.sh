#!/bin/sh
# Stress, bounded in time: QP/CQ churn, kill -9 in the middle of traffic,
# netdev down and up under traffic, `rdma link delete` under traffic, and
# rmmod while processes hold the device (they are disassociated: their
# objects are destroyed and their pins released). Each case ends with
# nothing pinned.
. "$(dirname "$0")/../lib.sh"

ktap_print_header
ktap_set_plan 6
vmpin() { awk '/^VmPin/{print $2}' /proc/$1/status 2>/dev/null; }
H=tests/bin/holder
base=$(pins)
settled() { pins_back $base; }

# start_holder MODE SECONDS: runs in the background, waits for "ready" (or
# for the holder to die). The bound only catches a hang: it is no deadline.
start_holder() {
	f=$(mktemp)
	OXE_DEV=oxe0 $H "$1" "$2" >"$f" 2>&1 &
	hpid=$!
	wait_for 300 sh -c "grep -q ready $f || ! kill -0 $hpid 2>/dev/null"
	grep -q ready "$f"
}

up() { oxe_load && rdma link add oxe0 type oxe netdev eth0; }
up || ktap_exit_fail_msg "no oxe0"

# QP/CQ churn by 4 processes.
for i in 1 2 3 4; do OXE_DEV=oxe0 $H churn 5 >/tmp/churn$i 2>&1 & done
wait
check "QP/CQ create/destroy churn, 4 processes" sh -c 'grep -h done /tmp/churn* | awk "{e+=\$3; o+=\$2} END{print \"# churn ops\", o, \"errors\", e; exit e != 0 || o == 0}"'

# kill -9 of processes in the middle of traffic.
ok=true
for i in 1 2 3; do
	start_holder traffic 60 || ok=false
	sleep 0.5
	kill -9 $hpid; wait $hpid 2>/dev/null
done
check "kill -9 in the middle of traffic releases every pin" sh -c "$ok && $(wait_for 120 settled && echo true || echo false)"

# netdev down and up under traffic: no crash; traffic goes on or ends cleanly.
# A port going down is an event (IB_EVENT_PORT_ERR), not a QP state change:
# connected QPs stay in RTS. The holder's RC QP loops back to itself, so on
# oxe's in-device loopback its traffic never sees the port and every WRITE
# succeeds. On a transport that does lose packets while the port is down (the
# RoCEv2 wire to come), the requester retries, and if the outage outlasts
# retry_cnt 7 x timeout 14 (~0.5 s, about the outage here) one WQE completes
# with IBV_WC_RETRY_EXC_ERR, the QP goes to ERR and every WQE after it
# completes with IBV_WC_WR_FLUSH_ERR (posting to a QP in ERR is accepted and
# flushed). So whether errors come at all depends on
# timing, but which ones may come does not: the rule is no refused post, and
# either no failed completion or a first one that is RETRY_EXC followed by
# flushes only. Anything else (an access or protection error, a flush with no
# cause before it, a success after the QP failed, a refused post) is a bug.
netdev_errors_ok() {
	done_line=$(grep '^done ' "$f") || return 1
	err_line=$(grep '^errors post ' "$f") || return 1
	echo "# holder: $done_line; $err_line"
	# errors post P first S then T
	set -- $err_line
	[ "$3" = 0 ] && [ "$7" = 0 ] && { [ "$5" = none ] || [ "$5" = retry_exc ]; }
}
start_holder traffic 4 && {
	ip link set eth0 down; sleep 0.5; ip link set eth0 up
	wait $hpid
}
check "netdev down and up under traffic: no errors but a retry-exceeded QP's" netdev_errors_ok

# rdma link delete under traffic: the holder is disassociated.
start_holder traffic 60
p=$(vmpin $hpid)
t0=$(date +%s)
# A hang is what this looks for; the bound is no deadline.
timeout 600 rdma link delete oxe0
rc=$?
t1=$(date +%s)
after=$(vmpin $hpid)
echo "# holder VmPin ${p} kB before link delete, ${after} kB after; delete rc $rc in $((t1 - t0)) s"
check "rdma link delete under traffic disassociates the holder" sh -c "[ $rc = 0 ] && [ '$after' = 0 ] && ! [ -e $IBDIR/oxe0 ]"
kill -9 $hpid 2>/dev/null; wait $hpid 2>/dev/null

# rmmod while two processes hold the device.
rdma link add oxe0 type oxe netdev eth0
start_holder traffic 60; h1=$hpid
start_holder churn 60; h2=$hpid
t0=$(date +%s)
timeout 600 modprobe -r rdma_oxe
rc=$?
t1=$(date +%s)
echo "# rmmod rc $rc in $((t1 - t0)) s; holder VmPin $(vmpin $h1) kB"
check "rmmod while processes hold the device" sh -c "[ $rc = 0 ] && ! [ -d /sys/module/rdma_oxe ] && [ '$(vmpin $h1)' = 0 ]"
kill -9 $h1 $h2 2>/dev/null; wait 2>/dev/null

check "system-wide pins back to baseline" wait_for 120 settled
oxe_unload
ktap_finished
