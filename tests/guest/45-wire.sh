#!/bin/sh
# The RoCEv2 wire (UDP 4791), on the KASAN kernel: data-path cases with every
# packet through the wire's encoding and ICRC (wire_loopback=1); two oxe devices in two
# network namespaces joined by a veth pair, driven by the stock tools;
# hand-made bad packets dropped and counted; sockets per namespace; nothing
# left behind.
. "$(dirname "$0")/../lib.sh"

ktap_print_header
ktap_set_plan 42
before=$(pins)

# 1. One device, every packet through the wire path: the data-path cases
# that move data and fail accesses (the whole suite runs so on the plain
# kernel, in 46-wire-dp). The ICRC by the kernel's crc32_le() (icrc=1):
# elsewhere QEMU's emulated PCLMULQDQ makes oxe take its own tables.
OXE_MODPARAMS="wire_loopback=1 icrc=1" oxe_load || ktap_exit_fail_msg "rdma_oxe does not load"
rdma link add oxe0 type oxe netdev eth0 || ktap_exit_fail_msg "rdma link add failed"
echo "# dp_test cases with wire_loopback=1"
OXE_DEV=oxe0 tests/bin/dp_test -t send_recv_with_immediate -t multi_sge_inline_and_zero_length \
	-t write_multi_packet_and_read_back -t write_with_immediate -t atomics \
	-t remote_write_without_remote_write_right -t read_past_the_end_of_an_mr \
	-t stale_rkey_after_dereg -t rnr_waits_for_a_receive -t rnr_naks_answer_the_retransmit_timer \
	-t retransmits_until_the_peer_is_ready \
	> /tmp/wire.dp 2>&1
rc=$?
grep -E "^# (PASSED|FAILED|Totals)|^not ok" /tmp/wire.dp
check "data-path cases pass with every packet through the RoCEv2 path" [ $rc = 0 ]
sent=$(rdma_stat oxe0 sent_pkts); icrc=$(rdma_stat oxe0 icrc_err); drops=$(rdma_stat oxe0 rcv_drops)
echo "# oxe0: sent_pkts $sent, icrc_err $icrc, rcv_drops $drops"
check "counters: packets sent, no ICRC error" sh -c "[ ${sent:-0} -gt 100 ] && [ '$icrc' = 0 ]"
rdma link delete oxe0
oxe_unload

# 2. Two devices, two namespaces, a veth pair.
ns_pair_up
check "RoCEv2 GIDs from each veth's IPv4 address (oxeA $ga, oxeB $gb)" sh -c "[ -n '$ga' ] && [ -n '$gb' ]"
check "a UDP 4791 socket in each namespace with a device, none elsewhere" sh -c \
	'ip netns exec A ss -Huln | grep -q ":4791 " && ip netns exec B ss -Huln | grep -q ":4791 " && ! ss -Huln | grep -q ":4791 "'

for t in "ib_write_bw -n 100" "ib_read_bw -n 100" "ib_send_bw -n 100" "ib_atomic_bw -n 200" \
	"ib_write_lat -n 200" "ib_read_lat -n 200" "ib_send_lat -n 200" "ib_write_bw -q 4 -n 20" \
	"ib_write_bw -c UC -n 40"; do
	check "between namespaces: $t" pair $t -F
done
# ibv_rc_pingpong --chk looks at the first byte of each page; xfer_check
# (tests/xfer_check.c) at every byte, through WRITE, SEND and READ. Their
# GID option is -g.
gid_opt() { echo "-g $1"; }
check "between namespaces: ibv_rc_pingpong --chk, 64 KiB x 40" pair ibv_rc_pingpong -s 65536 -n 40 -c
check "between namespaces: ibv_rc_pingpong --chk, 1 B x 500" pair ibv_rc_pingpong -s 1 -n 500 -c
check "between namespaces: xfer_check, every byte both ways, 64 KiB x 50" pair tests/bin/xfer_check -s 65536 -n 50
check "between namespaces: UC, ibv_uc_pingpong --chk, 4 KiB x 200" pair ibv_uc_pingpong -s 4096 -n 200 -c
check "between namespaces: UD, ibv_ud_pingpong --chk, 1000 B x 200" pair ibv_ud_pingpong -s 1000 -n 200 -c
# rdma_cm between the namespaces: its MADs on each device's QP1, over the
# wire. The client is retried while the server is not listening yet.
# rping_ns [ADDR [COUNT]]: B's ADDR (10.9.0.2), COUNT pings (50).
rping_ns() {
	ip netns exec B timeout 120 rping -s -a "${1:-10.9.0.2}" -V -C "${2:-50}" >/tmp/rping.srv 2>&1 &
	srv=$!
	for _i in $(seq 30); do
		sleep 1
		ip netns exec A timeout 120 rping -c -a "${1:-10.9.0.2}" -V -C "${2:-50}" >/tmp/rping.cli 2>&1 && break
		kill -0 $srv 2>/dev/null || break
	done
	wait $srv && return 0
	sed 's/^/# /' /tmp/rping.cli /tmp/rping.srv | tail -10
	return 1
}
check "between namespaces: rping -V through rdma_cm (50 pings)" rping_ns
# VLAN 100 on the veth pair: the core gives each device RoCE GIDs for the
# addresses of a VLAN on its netdev. A VLAN GID's packets go out tagged,
# through the VLAN device (rxe sends through the GID's device; they left
# untagged through va), and rdma_cm connects over it: B's CM answers a REQ
# from the GID of the VLAN it came in on, which QP1's completion names
# (IB_WC_WITH_VLAN; without it the core found no GID and dropped the REQ).
vlan_up() {
	ip -n A link add link va name va.100 type vlan id 100 &&
		ip -n B link add link vb name vb.100 type vlan id 100 &&
		ip -n A addr add 10.10.0.1/24 dev va.100 && ip -n B addr add 10.10.0.2/24 dev vb.100 &&
		ip -n A link set va.100 up && ip -n B link set vb.100 up &&
		wait_for 10 low_gid oxeA ffff:0a0a:0001 && wait_for 10 low_gid oxeB ffff:0a0a:0002
}
vlan_rx() { ip netns exec B cat /sys/class/net/vb.100/statistics/rx_packets; }
vlan_pingpong() {
	r0=$(vlan_rx)
	ga=$(gid_index oxeA ffff:0a0a:0001) gb=$(gid_index oxeB ffff:0a0a:0002) &&
		pair ibv_rc_pingpong -s 4096 -n 100 -c || return 1
	r1=$(vlan_rx)
	echo "# vb.100: $((r1 - r0)) packets received"
	# 100 pings, and their ACKs, came in tagged.
	[ $((r1 - r0)) -ge 100 ]
}
gid_opt() { echo "-g $1"; }
if vlan_up; then
	check "over VLAN 100: ibv_rc_pingpong --chk from the VLAN's GIDs, its packets tagged" vlan_pingpong
	check "over VLAN 100: rping -V through rdma_cm (20 pings)" rping_ns 10.10.0.2 20
else
	ktap_test_fail "over VLAN 100: no VLAN devices or no GIDs for them"
	ktap_test_fail "over VLAN 100: rping -V through rdma_cm (20 pings)"
fi
ip -n A link del va.100 2>/dev/null; ip -n B link del vb.100 2>/dev/null
# GID 0 is the veth's IPv6 link-local address: the same over IPv6.
ga=0 gb=0
check "between namespaces over IPv6 (link-local GIDs): ibv_rc_pingpong --chk" pair ibv_rc_pingpong -s 4096 -n 200 -c
check "between namespaces over IPv6: xfer_check, 5000 B x 100" pair tests/bin/xfer_check -s 5000 -n 100

# 3. Bad packets from A to B's device: dropped and counted, never taken.
i0=$(rdma_stat oxeB icrc_err); d0=$(rdma_stat oxeB rcv_drops)
ip netns exec A python3 tests/roce_inject.py 10.9.0.1 10.9.0.2 0x11 bad-icrc
ip netns exec A python3 tests/roce_inject.py 10.9.0.1 10.9.0.2 0xabcd good
ip netns exec A python3 tests/roce_inject.py 10.9.0.1 10.9.0.2 0x11 short
wait_for 5 sh -c "[ \$(rdma statistic show link oxeB/1 | tr ' ' '\n' | awk 'f{print; exit} \$0==\"rcv_drops\"{f=1}') -ge $((d0 + 2)) ]"
i1=$(rdma_stat oxeB icrc_err); d1=$(rdma_stat oxeB rcv_drops)
echo "# oxeB: icrc_err $i0 -> $i1, rcv_drops $d0 -> $d1"
check "a packet with a bad ICRC is dropped and counted (icrc_err)" [ "$i1" = $((i0 + 1)) ]
# The PMA's PortCounters, where the core's sysfs reads them (they were two
# bytes off: port_rcv_remote_physical_errors showed this).
pe=$(cat $IBDIR/oxeB/ports/1/counters/port_rcv_errors)
check "sysfs port_rcv_errors is icrc_err ($pe)" [ "$pe" = "$i1" ]
check "an unknown QPN and a truncated packet are dropped and counted (rcv_drops)" [ "$d1" = $((d0 + 2)) ]
check "no QP of the namespace pair is left" [ -z "$(rdma res show qp 2>/dev/null | grep -E 'oxe[AB]' | grep -v 'type GSI')" ]

ip netns exec A rdma link delete oxeA
check "the last device of a namespace closes its socket" sh -c '! ip netns exec A ss -Huln | grep -q ":4791 "'

# 4. A scripted responder in A (its port 4791 is free now) answers a QP of
# oxeB with hand-made packets; tests/stale_ack.py says what and why.
gb=$(gid_index oxeB ffff:0a09:0002)
# scripted NAME: tests/NAME.py, a scripted peer in A for a QP of oxeB (each
# script says what it checks, and why).
scripted() {
	ip netns exec B python3 "tests/$1.py" oxeB "$gb" 10.9.0.2 10.9.0.1 A
}
check "an ACK of packets sent before a go-back completes what it covers" \
	scripted stale_ack

# A scripted requester in A reads from a QP of oxeB and asks for the READ
# again as rdma_rxe's and oxe's requesters do after a loss; tests/read_pace.py
# says what and why. oxe_read_pace must show the pace starting.
tr=/sys/kernel/tracing
[ -d $tr/events ] || mount -t tracefs nodev $tr
echo >$tr/trace
echo 1 >$tr/events/oxe/oxe_read_pace/enable
echo 1 >$tr/tracing_on
ip netns exec B python3 tests/read_pace.py oxeB "$gb" 10.9.0.2 10.9.0.1 A >/tmp/read_pace.out 2>&1
rc=$?
echo 0 >$tr/events/oxe/oxe_read_pace/enable
cp $tr/trace /tmp/read_pace.trace
echo >$tr/trace
sed 's/^\([^#]\)/# \1/' /tmp/read_pace.out
grep oxe_read_pace /tmp/read_pace.trace | sed 's/^ */# /'
qpn=$(sed -n 's/^# qpn=//p' /tmp/read_pace.out)
check "a READ asked for again (late, at once, then paced with the QP destroyed): every byte right" [ $rc = 0 ]
check "oxe_read_pace: a READ asked for again from a gap of 590 packets, once answered, is paced" \
	grep -q "qpn=$qpn READ again from psn=10:" /tmp/read_pace.trace

# Packets for a connected QP of oxeB from an address of the link that is
# not its peer's, of another partition, or to another address of vb:
# dropped and counted on the QP; the peer's is taken.
check "a SEND from another address, P_Key or to another address is dropped and counted on its QP" \
	ip netns exec B python3 tests/wrong_source.py oxeB "$gb" 10.9.0.2 10.9.0.1 10.9.0.77 \
	10.9.0.3 vb A

# A datagram to an address of B's namespace that is not oxeB's GID (lo's):
# dropped and counted, as rxe's rxe_chk_dgid drops it; to the GID, taken.
check "a datagram to an address of another interface is dropped and counted on its QP" \
	ip netns exec B python3 tests/ud_dest.py oxeB 10.9.0.2 10.9.0.1 10.11.0.2 A

# Another address of vb: RC and UD between it and B's GID stay on oxeB;
# once it is deleted, what would go out from it fails (LOC_QP_OP_ERR).
check "between two addresses of one device, and from one deleted (LOC_QP_OP_ERR)" \
	ip netns exec B python3 tests/gid_change.py oxeB vb 10.9.0.2 10.9.0.12

# UC on an SRQ: a SEND cut short by a loss leaves its receive for the next.
check "UC on an SRQ: a SEND cut short by a loss leaves its receive for the next message" \
	scripted uc_srq_gap

# A NAK for a PSN not sent yet holds nothing back.
check "an RNR NAK for a PSN not sent yet holds nothing back" \
	scripted stale_nak

# Requests whose lengths do not add up: NAKed, nothing placed or completed.
check "requests whose lengths do not add up are NAKed (invalid request), nothing placed" \
	scripted bad_lengths

# A lost READ response, shown by the ACK of a later SEND: asked again at once.
check "a READ whose response was lost is asked again at the next ACK, not at the timer" \
	scripted lost_answer

# An atomic asked again behind a READ of 200 packets: replayed, not lost.
check "an atomic asked again after a 200-packet READ is answered from its saved result" \
	scripted atomic_replay

# SQD: a READ taken but never started waits for RTS.
check "SQD finishes the READ it started and starts no other until RTS" \
	scripted sqd_drain

# 5. A namespace deleted with its device still there: the device goes with
# its netdev, and the socket with it.
ip netns del B
check "a namespace deleted under a device: the device is removed" wait_for 20 sh -c "! [ -e $IBDIR/oxeB ]"
ip netns del A
oxe_unload
check "module unloads, nothing pinned" sh -c "! [ -d /sys/module/rdma_oxe ] && [ \$((\$(awk '/^nr_foll_pin_acquired/{a=\$2} /^nr_foll_pin_released/{r=\$2} END{print a-r}' /proc/vmstat) - $before)) -lt $PIN_NOISE ]"
ktap_finished
