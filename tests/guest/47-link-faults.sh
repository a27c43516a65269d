#!/bin/sh
# Faults on the link: two oxe devices in two namespaces joined by a veth
# pair, netem on both ends losing, reordering or duplicating the RoCE packets
# (UDP port 4791 only: the tools' TCP handshake goes untouched). Every byte
# must arrive right, the counters must show the recovery, and with every
# packet lost the QP must fail with RETRY_EXC_ERR once its retries are spent.
# On the plain kernel.
. "$(dirname "$0")/../lib.sh"

# netem ARGS...: these faults on every packet leaving both ends (the tools'
# TCP handshakes recover by themselves).
netem() {
	tc -n A qdisc replace dev va root netem "$@" && tc -n B qdisc replace dev vb root netem "$@"
}
# sum NAME: a counter summed over both devices.
sum() { echo $(($(rdma_stat oxeA "$1") + $(rdma_stat oxeB "$1"))); }

ktap_print_header
ktap_set_plan 27
before=$(pins)
ns_pair_up

PAIR_TIMEOUT=300
for spec in "loss 2%" "delay 1ms reorder 25% 50%" "duplicate 5%"; do
	# shellcheck disable=SC2086
	netem $spec || ktap_exit_fail_msg "tc qdisc ... netem $spec failed"
	r0=$(($(sum completer_retry_err) + $(sum rcvd_seq_err)))
	o0=$(sum out_of_seq_request); d0=$(sum duplicate_request)
	gid_opt() { echo "-g $1"; }
	check "netem $spec: ibv_rc_pingpong --chk, 64 KiB x 300" pair ibv_rc_pingpong -s 65536 -n 300 -c
	check "netem $spec: ibv_rc_pingpong --chk, 1 B x 1000" pair ibv_rc_pingpong -s 1 -n 1000 -c
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
sleep 1
ip netns exec A timeout 120 ibv_rc_pingpong -d oxeA -g "$ga" -n 1000000 10.9.0.2 > /tmp/pair.cli 2>&1 &
cli=$!
wait_for 60 sh -c "[ \$(rdma statistic show link oxeA/1 | tr ' ' '\n' | awk 'f{print; exit} \$0==\"sent_pkts\"{f=1}') -gt $((s0 + 200)) ]" ||
	echo "# the client never got going"
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
check "no QP of the namespace pair is left" wait_for 10 sh -c "[ -z \"\$(rdma res show qp 2>/dev/null | grep -E 'oxe[AB]')\" ]"

ip netns del A
ip netns del B
wait_for 20 sh -c "! [ -e $IBDIR/oxeA ] && ! [ -e $IBDIR/oxeB ]"
gone=$?
oxe_unload
all_gone() { [ $gone = 0 ] && ! oxe_loaded && pins_back "$before"; }
check "devices gone with their namespaces, module unloads, nothing pinned" all_gone
ktap_finished
