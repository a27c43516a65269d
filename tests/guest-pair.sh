#!/bin/sh
# One end of the two-guest link (scripts/two-guests.sh): DRIVER (oxe or rxe)
# on eth0, this guest at $OXE_IP, the other at PEER. Both run the same list
# in the same order: the guest whose address a line names serves, the other
# is the client, retrying while the server is not listening yet. KTAP out.
# Usage: guest-pair.sh DRIVER PEER
cd "$(dirname "$0")/.." || exit 1
. tests/lib.sh
drv=$1 peer=$2 me=$OXE_IP
case $drv in
oxe) oxe_load && rdma link add oxe0 type oxe netdev eth0 ;;
rxe) modprobe rdma_rxe && rdma link add rxe0 type rxe netdev eth0 ;;
esac || { ktap_print_header; ktap_exit_fail_msg "no $drv device"; }
dev=${drv}0
if [ "$drv" = oxe ] && [ -n "${OXE_PAIR_TRACE:-}" ]; then
	[ -d /sys/kernel/tracing/events ] || mount -t tracefs nodev /sys/kernel/tracing
	echo 1 > /sys/kernel/tracing/events/oxe/enable
fi
wait_for 10 sh -c "grep -qs ffff:$(printf '%02x%02x:%02x%02x' $(echo "$me" | tr . ' ')) $IBDIR/$dev/ports/1/gids/*"
gid=
for g in "$IBDIR/$dev"/ports/1/gids/*; do
	case $(cat "$g") in *ffff:$(printf '%02x%02x:%02x%02x' $(echo "$me" | tr . ' '))) gid=$(basename "$g") ;; esac
done

# The list: SERVER TOOL ARGS (-x/-g and the device are added). SERVER "-":
# both guests run TOOL ARGS at once (the link itself, no RDMA).
A=10.77.0.1 B=10.77.0.2
# An address on the link that no NIC owns: the peer QEMU's MAC filter drops
# its frames, so each guest's flood loads only its own TX queue.
Z=10.77.0.9
ip neigh replace $Z lladdr 52:54:00:00:00:09 dev eth0
list="- tests/bin/udp_flood -t 40 $Z
$A ib_write_bw -n 500
$B ib_write_bw -n 500
$A ib_read_bw -n 500
$B ib_read_bw -n 500
$A ib_send_bw -n 500
$B ib_send_bw -n 500
$A ib_atomic_bw -n 500
$B ib_atomic_bw -n 500
$A ib_write_lat -n 500
$B ib_read_lat -n 500
$A ib_send_lat -n 500
$B ib_send_lat -n 500
$A ib_write_bw -q 4 -n 300
$A ibv_rc_pingpong -s 65536 -n 200 -c
$B ibv_rc_pingpong -s 65536 -n 200 -c
$A ibv_rc_pingpong -s 1 -n 500 -c
$A ibv_uc_pingpong -s 4096 -n 200 -c
$B ibv_uc_pingpong -s 4096 -n 200 -c
$A ib_write_bw -c UC -n 500
$B ib_write_bw -c UC -n 500
$A ibv_ud_pingpong -s 1000 -n 200 -c
$B ibv_ud_pingpong -s 1000 -n 200 -c
$A ib_send_lat -c UD -n 500
$B rping -C 100
$A ucmatose
$B udaddy
$B rdma_server
$A mckey
$B mckey
$A ib_send_bw -R -n 500
$B ibv_rc_pingpong -s 4096 -n 200 -c @ipv6
$A tests/bin/xfer_check -f -s 1048576 -n 100
$B tests/bin/xfer_check -a -s 1000000 -n 20 @ipv6
$A ib_write_bw -a -n 5
$B ib_write_bw -a -n 5
$B ib_read_bw -a -n 5
$A ib_read_bw -a -n 5
$A ib_send_bw -a -n 5
$B ib_send_bw -a -n 5
$B ib_write_lat -a -n 5
$A ib_write_lat -a -n 5
$A ib_read_lat -a -n 5
$B ib_read_lat -a -n 5
$B ib_send_lat -a -n 5
$A ib_send_lat -a -n 5"
# OXE_PAIR_BENCH=1 (make bench-perftest MODE=pair): the seven perftests with
# their defaults, A serving and B measuring; B writes "pt TEST VALUE UNIT"
# lines to $OXE_OUT/bench.txt. ib_atomic_bw runs 20000 atomics, about 2 s
# here: its default 1000 are a 60-100 ms run, which one hiccup of the shared
# host halves (stop 32: 0.0097 and 0.0178 Mpps for one driver in two boots).
# The first line is the link's own ceiling: A sends B 1056-byte UDP datagrams
# (a 1024-byte RoCE payload with its BTH, RETH and ICRC) as fast as it can,
# B counts what arrives. The second is its transaction ceiling, the floor
# under atomics: B keeps 128 requests of an atomic's size in flight to A,
# which answers each from user space (udp_rr).
[ -n "${OXE_PAIR_BENCH:-}" ] && list="- tests/bin/udp_flood -t 20 -w 0 -p 2 -s 1056 -f $A $B
- tests/bin/udp_rr -t 10 -f $B $A
$A ib_write_bw
$A ib_read_bw
$A ib_send_bw
$A ib_atomic_bw -n 20000
$A ib_write_lat
$A ib_read_lat
$A ib_send_lat"
# OXE_PAIR_ARGS: more arguments for every line (e.g. "-n 20000").
[ -n "${OXE_PAIR_ARGS:-}" ] && list=$(echo "$list" | sed "/^- /!s/\$/ $OXE_PAIR_ARGS/")
# OXE_PAIR_REPEAT=N: each line N times in a row.
[ -n "${OXE_PAIR_REPEAT:-}" ] && list=$(echo "$list" | awk -v n="$OXE_PAIR_REPEAT" '{for (i = 0; i < n; i++) print}')
# OXE_PAIR_ONLY=REGEX: only the lines that match (both guests must agree).
[ -n "${OXE_PAIR_ONLY:-}" ] && list=$(echo "$list" | grep -E "$OXE_PAIR_ONLY")
# OXE_PAIR_PERF=1: each RDMA case under a system-wide perf profile, written
# to $OXE_OUT/perf-N.txt (the symbols, then the same by command) and
# perf-children-N.txt (each symbol with its callees).
perf=
[ -n "${OXE_PAIR_PERF:-}" ] && perf="perf record -q -e cpu-clock -a -g -o /tmp/perf.data --"
ktap_print_header
# oxe also checks its ICRC counter at the end (one more line).
ktap_set_plan "$(($(echo "$list" | wc -l) + $([ "$drv" = oxe ] && echo 1 || echo 0)))"
# The mckey server's word to its client that it has its datagrams (UDP,
# outside RDMA): `send PEER` or `listen FILE` (FILE made when it comes).
MC_DONE='
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
if sys.argv[1] == "send":
    for _ in range(3):
        s.sendto(b"done", (sys.argv[2], 47999))
else:
    s.bind(("", 47999))
    s.recv(16)
    open(sys.argv[2], "w").close()
'
n=0
echo "$list" | while read -r srv tool args; do
	n=$((n + 1)) t0=$(date +%s)
	case $tool in ibv_* | */xfer_check) g="-g $gid" ;; *) g="-x $gid -F" ;; esac
	# rdma_rxe sends an ATOMIC_WRITE or FLUSH it goes back over with va 0
	# (README, Chance): its peer hands it an MR at iova 0. Between two oxe
	# guests each requester must go back at the right address.
	case $tool in */xfer_check) [ "${OXE_PAIR_PEER:-}" = rxe ] && args="-z $args" ;; esac
	# @ipv6: over GID 0, the link-local IPv6 address of each end's eth0.
	case $args in *@ipv6) args=${args%@ipv6}; g="-g 0"
		wait_for 10 sh -c "grep -qs '^fe80:' $IBDIR/$dev/ports/1/gids/0" ;; esac
	# The server's and the client's arguments: rdma_cm's tools find the
	# device by address and take no device or GID.
	sargs="$args -d $dev $g" cargs="$args -d $dev $g $srv" cm= mc= tool_c=$tool
	case $tool in
	rping) sargs="-s -a $me -V $args" cargs="-c -a $srv -V $args" cm=1 ;;
	ucmatose | udaddy) sargs=$args cargs="$args -s $srv" cm=1 ;;
	rdma_server) sargs=$args cargs="-s $srv" cm=1 tool_c=rdma_client ;;
	# The server joins the group and waits for 10 datagrams; the client
	# sends 10 to it, once a second for 20 s, since UD datagrams sent
	# before the server attached are lost.
	mckey) sargs="-m 239.1.2.6 -b $me -C 10" cargs="-m 239.1.2.6 -b $me -C 10 -s" mc=1 ;;
	esac
	case " $args " in *" -R "*) cm=1 ;; esac
	if [ "$srv" = - ]; then
		role="link"
		$tool $args >/tmp/pair.out 2>&1
		rc=$?
	elif [ "$srv" = "$me" ]; then
		role="serves"
		timeout 120 $perf $tool $sargs </dev/null >/tmp/pair.out 2>&1
		rc=$?
		# mckey: tell the client it may stop sending (three tries; if
		# all are lost it sends its 20 rounds).
		[ -n "$mc" ] && python3 -c "$MC_DONE" send "$peer"
	elif [ -n "$mc" ]; then
		role="client"
		rm -f /tmp/mc.done
		timeout 150 python3 -c "$MC_DONE" listen /tmp/mc.done &
		lpid=$!
		for i in $(seq 20); do
			timeout 30 $tool $cargs </dev/null >/tmp/pair.out 2>&1
			rc=$?
			[ $rc = 0 ] || break
			sleep 1
			[ -e /tmp/mc.done ] && break
		done
		kill $lpid 2>/dev/null
		wait $lpid 2>/dev/null
	else
		role="client"
		# Retried while the server is not listening yet: perftest and the
		# pingpongs say so; an rdma_cm tool is rejected and fails.
		for i in $(seq 120); do
			timeout 120 $perf $tool_c $cargs </dev/null >/tmp/pair.out 2>&1
			rc=$?
			if [ -n "$cm" ]; then
				[ $rc = 0 ] || [ $i -ge 30 ] && break
			else
				grep -q "Couldn't connect" /tmp/pair.out || break
			fi
			sleep 1
		done
	fi
	# ibv_rc_pingpong --chk only prints what it finds wrong.
	grep -q "invalid data" /tmp/pair.out && rc=1
	res=$(grep -A1 '#bytes' /tmp/pair.out | tail -1 | tr -s ' \t' ' ')
	case $tool in
	*/xfer_check) res=$(grep 'checked in' /tmp/pair.out) ;;
	*/udp_flood | */udp_rr) res=$(tail -1 /tmp/pair.out) ;;
	esac
	if [ $rc = 0 ] && [ -n "${OXE_PAIR_BENCH:-}" ]; then
		case $role in
		# Untimed (perftest_untimed): no figure, rather than 0.
		client) if perftest_untimed /tmp/pair.out; then
				echo "# $tool: perftest could not time the run (its clock rate sample failed)"
			else
				pt_line $tool $res >>"$OXE_OUT/bench.txt"
			fi ;;
		link) grep '^link:' /tmp/pair.out | awk '{print "pt link_udp", $2, "MB/s"}' >>"$OXE_OUT/bench.txt"
		      grep '^link_rr:' /tmp/pair.out | awk '{print "pt link_rr", $2 / 1e6, "Mpps"}' >>"$OXE_OUT/bench.txt" ;;
		esac
	fi
	# In the benchmark, each case's counters (they are cumulative) go
	# to stats-N.txt: retransmits, RNR NAKs, drops are where time goes too.
	[ -n "${OXE_PAIR_BENCH:-}" ] && [ "$role" != link ] &&
		{ rdma statistic show link $dev/1
		  # Packets per notification of the host (virtio's kicks).
		  python3 tests/ethstat.py eth0 | grep -E '^(tx|rx)0_(kicks|drops) '
		  for f in tx_packets rx_packets rx_dropped; do echo "$f $(cat /sys/class/net/eth0/statistics/$f)"; done
		} >"$OXE_OUT/stats-$n.txt" 2>&1
	[ -n "${OXE_PAIR_BENCH:-}" ] && [ -n "${OXE_PAIR_TRACE:-}" ] && [ "$drv" = oxe ] &&
		grep -v "oxe_mr_" /sys/kernel/tracing/trace >"$OXE_OUT/trace-$n.txt" 2>&1
	if [ -n "$perf" ] && [ -f /tmp/perf.data ]; then
		{ perf report -i /tmp/perf.data --stdio --no-children --sort sym -g none
		  perf report -i /tmp/perf.data --stdio --no-children --sort comm -g none
		} 2>/dev/null | grep -E '^ +[0-9]' >"$OXE_OUT/perf-$n.txt"
		# The same with each symbol's callees counted in (what a call
		# costs in all).
		perf report -i /tmp/perf.data --stdio --children --sort sym -g none 2>/dev/null |
			grep -E '^ +[0-9]' | head -150 >"$OXE_OUT/perf-children-$n.txt"
		rm -f /tmp/perf.data
	fi
	if [ $rc = 0 ]; then
		ktap_test_pass "$drv $role: $tool $args${res:+ ($res)}"
	else
		sed 's/^/# /' /tmp/pair.out | tail -40
		rdma statistic show link $dev/1 | sed 's/^/# /'
		# The link under the test: the NIC's counters and interrupts.
		for f in tx_packets tx_dropped tx_errors rx_packets rx_dropped; do
			echo "# eth0 $f $(cat /sys/class/net/eth0/statistics/$f)"
		done
		echo "# eth0 tx_timeout $(cat /sys/class/net/eth0/queues/tx-0/tx_timeout 2>/dev/null)"
		grep virtio /proc/interrupts | sed 's/^/# /'
		[ -n "${OXE_PAIR_TRACE:-}" ] && [ "$drv" = oxe ] && grep -v "oxe_mr_" /sys/kernel/tracing/trace | tail -60 | sed 's/^/# T /'
		ktap_test_fail "$drv $role: $tool $args (exit $rc)"
	fi
	# As check() in lib.sh: where the suite's time goes.
	t=$(($(date +%s) - t0))
	[ $t -lt 5 ] || echo "# ($t s)"
done
# Every packet that arrived had the ICRC its sender computed: oxe's trains
# (packets the IP stack splits from one skb, renumbering their IPv4 IDs,
# which the ICRC covers) and rxe's alike.
if [ "$drv" = oxe ]; then
	icrc=$(rdma statistic show link $dev/1 | grep -o 'icrc_err [0-9]*')
	if [ "$icrc" = "icrc_err 0" ]; then
		ktap_test_pass "oxe: no packet arrived with a bad ICRC"
	else
		ktap_test_fail "oxe: no packet arrived with a bad ICRC ($icrc)"
	fi
fi
rdma link delete $dev
[ "$drv" = oxe ] && oxe_unload || modprobe -r rdma_rxe
