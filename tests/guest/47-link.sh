#!/bin/sh
# The link under the wire, on the plain kernel. MTU changes followed by the
# port's active MTU and used by new QPs; a tun netdev (no MAC). Faults on the link: two oxe devices in two namespaces joined by a veth
# pair, netem on both ends losing, reordering or duplicating the RoCE packets
# (UDP port 4791 only: the tools' TCP handshake goes untouched). Every byte
# must arrive right, the counters must show the recovery, and with every
# packet lost the QP must fail with RETRY_EXC_ERR once its retries are spent.
. "$(dirname "$0")/../lib.sh"

# netem ARGS...: these faults on every packet leaving both ends (the tools'
# TCP handshakes recover by themselves).
netem() {
	tc -n A qdisc replace dev va root netem "$@" && tc -n B qdisc replace dev vb root netem "$@"
}
# sum NAME: a counter summed over both devices.
sum() { echo $(($(rdma_stat oxeA "$1") + $(rdma_stat oxeB "$1"))); }

ktap_print_header
ktap_set_plan 52
before=$(pins)
ns_pair_up

# active_mtu DEV: the port's active MTU in bytes.
active_mtu() { ibv_devinfo -d "$1" | awk '/active_mtu:/{print $2}'; }
# The path MTU is the netdev's MTU less rxe's 80 bytes of headers, rounded
# down to an IB MTU.
ip -n A link set va mtu 9000 && ip -n B link set vb mtu 9000
check "netdev MTU 9000: active_mtu 4096" wait_for 5 sh -c "[ \"\$(ibv_devinfo -d oxeA | awk '/active_mtu:/{print \$2}')\" = 4096 ]"
gid_opt() { echo "-g $1"; }
check "netdev MTU 9000: ibv_rc_pingpong --chk with 4 KiB packets" pair ibv_rc_pingpong -m 4096 -s 65536 -n 100 -c
ip -n A link set va mtu 1100 && ip -n B link set vb mtu 1100
check "netdev MTU 1100: active_mtu 512 ($(active_mtu oxeA))" [ "$(active_mtu oxeA)" = 512 ]
check "netdev MTU 1100: ibv_rc_pingpong --chk with 512-byte packets" pair ibv_rc_pingpong -m 512 -s 65536 -n 100 -c
ip -n A link set va mtu 1500 && ip -n B link set vb mtu 1500
check "netdev MTU 1500 again: active_mtu 1024 ($(active_mtu oxeA))" [ "$(active_mtu oxeA)" = 1024 ]

# GIDs follow the netdev's addresses (the core's GID table, from the
# addresses oxe's port reports).
has_gid() { cat "$IBDIR/$1"/ports/1/gids/* 2>/dev/null | grep -q "$2"; }
ip -n A addr add 10.9.1.1/24 dev va
check "an address added to the netdev: its GID appears" wait_for 10 has_gid oxeA ffff:0a09:0101
ip -n A addr del 10.9.1.1/24 dev va
check "the address removed: its GID goes" wait_for 10 sh -c "! cat $IBDIR/oxeA/ports/1/gids/* 2>/dev/null | grep -q ffff:0a09:0101"

PAIR_TIMEOUT=300
for spec in "loss 2%" "delay 1ms reorder 25% 50%" "duplicate 5%"; do
	# shellcheck disable=SC2086
	netem $spec || ktap_exit_fail_msg "tc qdisc ... netem $spec failed"
	r0=$(($(sum completer_retry_err) + $(sum rcvd_seq_err)))
	o0=$(sum out_of_seq_request); d0=$(sum duplicate_request)
	gid_opt() { echo "-g $1"; }
	case $spec in
	loss*)
		# Not ibv_rc_pingpong: its client exits once the server's last SEND
		# arrived, and if that SEND's ACK is lost the server's retransmits
		# find no QP: RETRY_EXC_ERR at the server (right for RC; seen once in
		# a run). xfer_check waits for both ends before it tears down.
		check "netem $spec: xfer_check, 1 B x 500" pair tests/bin/xfer_check -s 1 -n 500 ;;
	*)
		check "netem $spec: ibv_rc_pingpong --chk, 64 KiB x 300" pair ibv_rc_pingpong -s 65536 -n 300 -c
		check "netem $spec: ibv_rc_pingpong --chk, 1 B x 1000" pair ibv_rc_pingpong -s 1 -n 1000 -c ;;
	esac
	check "netem $spec: xfer_check, every byte of WRITE, SEND and READ, 64 KiB x 200" pair tests/bin/xfer_check -s 65536 -n 200
	# An ATOMIC_WRITE and a FLUSH in every iteration: one gone back over
	# is sent again at its own address (rdma_rxe sends it to va 0; README,
	# Chance), and a repeated one is answered, not placed twice.
	check "netem $spec: xfer_check -f, an ATOMIC_WRITE and a FLUSH in each of 200 iterations of 64 KiB" pair tests/bin/xfer_check -f -s 65536 -n 200
	# UC has no recovery: a message with a packet lost, late or repeated
	# may be dropped, but what arrives must be whole, right and in order.
	# A late or repeated packet is never taken: an older message after a
	# newer one (seen under reordering), or a one-packet message twice.
	for size in 4096 1000; do
		check "netem $spec: UC, xfer_check -u, $size B x 1000: every message that arrives is whole, right and new" \
			pair tests/bin/xfer_check -u -s $size -n 1000
		grep "^UC:" /tmp/pair.srv | sed 's/^/# /'
	done
	gid_opt() { echo "-x $1"; }
	# Many atomics and READs outstanding at once: a lost answer is asked
	# for again, and the responder replays an atomic, never runs it twice.
	for t in "ib_atomic_bw -n 2000" "ib_read_bw -n 300" "ib_write_bw -n 300" "ib_send_bw -n 300"; do
		# shellcheck disable=SC2086
		check "netem $spec: $t" pair $t -F
	done
	r1=$(($(sum completer_retry_err) + $(sum rcvd_seq_err)))
	o1=$(sum out_of_seq_request); d1=$(sum duplicate_request)
	echo "# netem $spec: retransmit rounds +$((r1 - r0)), out_of_seq_request +$((o1 - o0)), duplicate_request +$((d1 - d0))"
	case $spec in
	loss*) check "netem $spec: retransmissions counted (completer_retry_err, rcvd_seq_err)" [ "$r1" -gt "$r0" ] ;;
	delay*) check "netem $spec: out-of-sequence requests counted" [ "$o1" -gt "$o0" ] ;;
	dup*) check "netem $spec: duplicate requests counted" [ "$d1" -gt "$d0" ] ;;
	esac
done

# The port's performance agent counts the wire's traffic.
pa=$IBDIR/oxeA/ports/1/counters
check "port counters (PMA): oxeA's port_xmit_data and port_xmit_packets count the wire" sh -c \
	"[ \$(cat $pa/port_xmit_data) -gt 0 ] && [ \$(cat $pa/port_xmit_packets) = \$(rdma statistic show link oxeA/1 | tr ' ' '\n' | awk 'f{print; exit} \$0==\"sent_pkts\"{f=1}') ]"

# Every packet lost once ibv_rc_pingpong's QPs are talking: the client's QP
# (timeout 14, 67 ms; retry_cnt 7) fails with RETRY_EXC_ERR after its 8 tries.
netem delay 0 || ktap_exit_fail_msg "tc qdisc ... netem delay 0 failed"
x0=$(sum retry_exceeded_err); s0=$(rdma_stat oxeA sent_pkts)
ip netns exec B ibv_rc_pingpong -d oxeB -g "$gb" -n 1000000 > /tmp/pair.srv 2>&1 &
srv=$!
going() { [ "$(rdma_stat oxeA sent_pkts)" -gt $((s0 + 200)) ]; }
settled() { grep -q "Couldn't connect" /tmp/pair.cli || going; }
# Again while the server is not listening yet (see `pair`).
for _i in $(seq 30); do
	sleep 1
	ip netns exec A timeout 120 ibv_rc_pingpong -d oxeA -g "$ga" -n 1000000 10.9.0.2 > /tmp/pair.cli 2>&1 &
	cli=$!
	wait_for 60 settled
	going && break
	wait $cli
done
going || echo "# the client never got going"
# The QPs made progress until the first packet was lost, after t0.
t0=$(date +%s%N)
netem loss 100% || ktap_exit_fail_msg "tc qdisc ... netem loss 100% failed"
wait $cli
c=$?
ms=$((($(date +%s%N) - t0) / 1000000))
kill $srv 2>/dev/null; wait $srv 2>/dev/null
sed 's/^/# /' /tmp/pair.cli
echo "# client exit $c, $ms ms after the link went dead"
check "netem loss 100%: the QP fails with RETRY_EXC_ERR (status 12)" \
	sh -c "[ $c != 0 ] && [ $c != 124 ] && grep -q 'retry counter exceeded (12)' /tmp/pair.cli"
check "netem loss 100%: not before its 8 tries of 67 ms ($ms ms)" [ "$ms" -ge 537 ]
check "netem loss 100%: counted (retry_exceeded_err)" [ "$(sum retry_exceeded_err)" -gt "$x0" ]

# The link changing under traffic: the netdev's MTU dropping below the QPs'
# path MTU for a moment, then the link going down for 2 s. xfer_check's QPs
# either recover (every byte right) or fail with an error completion; the
# first of the two programs to end must have ended one of those ways, not by
# a timeout or with wrong data. A new connection works afterwards.
netem delay 0 || ktap_exit_fail_msg "tc qdisc ... netem delay 0 failed"
gid_opt() { echo "-g $1"; }
mtu_dip() {
	ip -n A link set va mtu 1000 && ip -n B link set vb mtu 1000
	sleep 0.3
	ip -n A link set va mtu 1500 && ip -n B link set vb mtu 1500
}
link_bounce() { ip -n A link set va down; sleep 2; ip -n A link set va up; }
started() { [ "$(rdma_stat oxeA sent_pkts)" -gt $((s0 + 300)) ]; }
disturb() {
	s0=$(rdma_stat oxeA sent_pkts)
	ip netns exec B timeout 150 tests/bin/xfer_check -d oxeB -g "$gb" -s 65536 -n 2000 >/tmp/dist.srv 2>&1 &
	dsrv=$!
	ip netns exec A timeout 150 tests/bin/xfer_check -d oxeA -g "$ga" -s 65536 -n 2000 10.9.0.2 >/tmp/dist.cli 2>&1 &
	dcli=$!
	wait_for 60 started || echo "# traffic never started"
	"$@"
	# The first to end decides; the other may wait on a peer that is gone.
	while kill -0 $dcli 2>/dev/null && kill -0 $dsrv 2>/dev/null; do sleep 0.2; done
	first=cli; kill -0 $dcli 2>/dev/null && first=srv
	sleep 2
	kill $dcli $dsrv 2>/dev/null
	wait $dcli; dc=$?
	wait $dsrv; ds=$?
	sed 's/^/# client: /' /tmp/dist.cli; sed 's/^/# server: /' /tmp/dist.srv
	echo "# client exit $dc, server exit $ds, $first ended first"
	[ $first = cli ] && fc=$dc || fc=$ds
	! grep -q "wrong" /tmp/dist.cli /tmp/dist.srv &&
		{ [ $fc = 0 ] || { [ $fc = 1 ] && grep -q "Failed status" /tmp/dist.$first; }; }
}
check "MTU 1500 -> 1000 -> 1500 under xfer_check: recovered with every byte right, or an error completion" disturb mtu_dip
check "after the MTU change: xfer_check, every byte, 64 KiB x 50" pair tests/bin/xfer_check -s 65536 -n 50
check "link down for 2 s under xfer_check: recovered with every byte right, or an error completion" disturb link_bounce
wait_for 20 sh -c "cat $IBDIR/oxeA/ports/1/gids/* 2>/dev/null | grep -q ffff:0a09:0001"
ga=$(gid_index oxeA ffff:0a09:0001)
check "after the link came back: xfer_check, every byte, 64 KiB x 50" pair tests/bin/xfer_check -s 65536 -n 50
check "no QP of the namespace pair is left" wait_for 10 sh -c "[ -z \"\$(rdma res show qp 2>/dev/null | grep -E 'oxe[AB]' | grep -v 'type GSI')\" ]"

ip netns del A
ip netns del B
wait_for 20 sh -c "! [ -e $IBDIR/oxeA ] && ! [ -e $IBDIR/oxeB ]"
gone=$?
# A tun netdev has no MAC: the device gets a GID from its address and one
# node GUID for its lifetime (not a fresh one per query).
ip tuntap add mode tun dev toxe && ip addr add 10.7.0.1/24 dev toxe && ip link set toxe up
rdma link add oxet type oxe netdev toxe
check "a device on a tun netdev, with a RoCE v2 GID from its IPv4 address" \
	wait_for 10 sh -c "cat $IBDIR/oxet/ports/1/gids/* 2>/dev/null | grep -q ffff:0a07:0001"
g1=$(cat $IBDIR/oxet/node_guid 2>/dev/null); g2=$(cat $IBDIR/oxet/node_guid 2>/dev/null)
check "tun: one node GUID, not zero ($g1)" sh -c "[ -n '$g1' ] && [ '$g1' = '$g2' ] && [ '$g1' != 0000:0000:0000:0000 ]"
ip link del toxe
check "tun: deleting the netdev removes the device" wait_for 20 sh -c "! [ -e $IBDIR/oxet ]"

oxe_unload
all_gone() { [ $gone = 0 ] && ! oxe_loaded && pins_back "$before"; }
check "devices gone with their namespaces, module unloads, nothing pinned" all_gone
ktap_finished
