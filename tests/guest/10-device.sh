#!/bin/sh
# The oxe ib_device: module load/unload, rdma link add/delete, what stock
# rdma-core sees, netdev removal, rmmod with devices, rdma_rxe exclusion.
. "$(dirname "$0")/../lib.sh"

ktap_print_header
ktap_set_plan 36

# --- module
check "module loads" oxe_load
check "module unloads" oxe_unload
ok=true
for i in 1 2 3 4 5; do oxe_load && oxe_unload || ok=false; done
check "module load/unload 5 times" $ok
# debugfs oxe/help (the helper's counts) lives as long as the module: a file
# left behind would call into freed module text when read.
check "debugfs oxe/help comes with the module and goes with it" sh -c \
	'modprobe rdma_oxe && grep -q "^offered [0-9]" /sys/kernel/debug/oxe/help &&
	 modprobe -r rdma_oxe && ! [ -e /sys/kernel/debug/oxe ]'
# A parameter out of its range is refused, not taken for another value.
check "icrc=3 is refused (EINVAL, a message), then a plain load works" sh -c \
	'! modprobe rdma_oxe icrc=3 2>/dev/null && ! [ -d /sys/module/rdma_oxe ] &&
	 dmesg | grep -q "icrc=3: 0" && modprobe rdma_oxe && modprobe -r rdma_oxe'

# --- the rdma-link-oxe alias: rdma link add loads the module itself
check "rdma link add autoloads rdma_oxe" sh -c 'rdma link add oxe0 type oxe netdev eth0 && [ -d /sys/module/rdma_oxe ]'
check "rdma link show lists oxe0 on eth0" sh -c 'rdma link show oxe0/1 | grep -q "state ACTIVE.*netdev eth0"'
check "ibv_devices lists oxe0" sh -c 'ibv_devices | grep -q "oxe0"'

info=$(ibv_devinfo -d oxe0 2>&1)
echo "$info" | sed 's/^/# /'
check "ibv_devinfo: PORT_ACTIVE" sh -c "echo '$info' | grep -q 'state:.*PORT_ACTIVE (4)'"
check "ibv_devinfo: link_layer Ethernet" sh -c "echo '$info' | grep -q 'link_layer:.*Ethernet'"
check "ibv_devinfo: active_mtu 1024 for a 1500-byte netdev (as rxe)" \
	sh -c "echo '$info' | grep -q 'active_mtu:.*1024 (3)'"
check "ibv_devinfo: node_guid is the EUI-64 of the MAC" \
	sh -c "echo '$info' | grep -q 'node_guid:.*5054:00ff:fe12:3456'"
check "ibv_devinfo: vendor_id 0xffffff (rxe's, so perftest treats it alike)" \
	sh -c "echo '$info' | grep -q 'vendor_id:.*0xffffff'"

# The node and system image GUIDs: one value, from the MAC.
guids() {
	ibv_devinfo -d "$1" 2>/dev/null |
		awk '$1 == "node_guid:" || $1 == "sys_image_guid:" { print $2 }'
}
mac_guids() { [ "$(guids oxe0 | sort -u)" = 5054:00ff:fe12:3456 ]; }
check "ibv_devinfo: sys_image_guid is the node_guid" mac_guids

# rxe's limits for MW, AH, SRQ and multicast.
vinfo=$(ibv_devinfo -v -d oxe0 2>&1)
echo "$vinfo" | grep -E 'max_(srq|mw|ah|mcast|total_mcast)' | sed 's/^/# /'
# is FIELD VALUE: ibv_devinfo -v shows FIELD with VALUE.
is() { echo "$vinfo" | grep -Eq "^[[:space:]]*$1:[[:space:]]+$2\$"; }
rxe_srq() { is max_srq 917503 && is max_srq_wr 1048576 && is max_srq_sge 27; }
check "ibv_devinfo -v: max_srq, max_srq_wr, max_srq_sge as rxe's" rxe_srq
check "ibv_devinfo -v: max_mw 524287 (rxe's)" is max_mw 524287
check "ibv_devinfo -v: max_ah 32767 (rxe's)" is max_ah 32767
rxe_mcast() { is max_mcast_grp 8192 && is max_mcast_qp_attach 56 && is max_total_mcast_qp_attach 458752; }
check "ibv_devinfo -v: max_mcast_grp, max_mcast_qp_attach, max_total_mcast_qp_attach as rxe's" rxe_mcast

gids=$(ibv_devinfo -v -d oxe0 2>&1 | grep GID)
echo "$gids" | sed 's/^/# /'
check "a RoCE v2 GID for the guest's IPv4 address" \
	sh -c "echo '$gids' | grep -q '::ffff:10.77.0.1, RoCE v2'"
check "sysfs pkey 0 is 0xffff" sh -c '[ "$(cat /sys/class/infiniband/oxe0/ports/1/pkeys/0)" = 0xffff ]'
check "sysfs parent is the netdev (eth0), as rxe's" sh -c '[ "$(cat /sys/class/infiniband/oxe0/parent)" = eth0 ]'

# Port state follows the netdev; the core raises the port events.
downed0=$(rdma_stat oxe0 link_downed); pma0=$(cat $IBDIR/oxe0/ports/1/counters/link_downed)
ip link set eth0 down
state_down=$(cat $IBDIR/oxe0/ports/1/state)
phys_down=$(cat $IBDIR/oxe0/ports/1/phys_state)
ip link set eth0 up
echo "# netdev down: state '$state_down', phys_state '$phys_down'"
check "port DOWN and phys Disabled while the netdev is down" \
	sh -c "echo '$state_down' | grep -q DOWN && echo '$phys_down' | grep -q Disabled"
up_ok() { grep -q ACTIVE $IBDIR/oxe0/ports/1/state; }
check "port ACTIVE again when the netdev is up" wait_for 60 up_ok
downed=$(rdma_stat oxe0 link_downed); pma=$(cat $IBDIR/oxe0/ports/1/counters/link_downed)
echo "# link_downed: $downed0 -> $downed, the PMA's $pma0 -> $pma"
check "link_downed counts the netdev going down once (rdma statistic, the PMA's sysfs), as rxe's" \
	sh -c "[ '$downed0' = 0 ] && [ '$downed' = 1 ] && [ '$pma0' = 0 ] && [ '$pma' = 1 ]"

add2=$(stderr_of rdma link add oxe1 type oxe netdev eth0)
check "a second device on the same netdev is refused (EEXIST)" \
	sh -c "echo '$add2' | grep -qi 'exists' && ! [ -e $IBDIR/oxe1 ]"
check "rdma link add on a missing netdev fails" sh -c '! rdma link add oxe1 type oxe netdev nosuchdev 2>/dev/null'

check "rdma link delete removes oxe0" sh -c 'rdma link delete oxe0 && ! [ -e /sys/class/infiniband/oxe0 ]'

ok=true
# 5 rounds: each costs 2-3 s on KASAN under TCG.
for i in $(seq 1 5); do
	rdma link add oxe0 type oxe netdev eth0 || { ok=false; break; }
	rdma link delete oxe0 || { ok=false; break; }
done
check "rdma link add/delete 5 times" sh -c "$ok && ! [ -e $IBDIR/oxe0 ]"

# MTU on a veth, whose MTU can be anything: active_mtu is rxe's mapping.
ip link add vth0 type veth peer name vth1
ip link set vth0 up; ip link set vth1 up
ip link set vth0 mtu 9000
rdma link add oxe1 type oxe netdev vth0
mtu9000=$(ibv_devinfo -d oxe1 | grep active_mtu)
ip link set vth0 mtu 1100
mtu1100=$(ibv_devinfo -d oxe1 | grep active_mtu)
# 1100 - 80 bytes of headers < 1024: rxe's mapping gives 512.
check "active_mtu follows the netdev MTU as rxe computes it (9000 -> 4096, 1100 -> 512)" \
	sh -c "echo '$mtu9000' | grep -q '4096 (5)' && echo '$mtu1100' | grep -q '512 (2)'"

ip link del vth0
check "deleting the netdev removes its device" wait_for 60 sh -c '! [ -e /sys/class/infiniband/oxe1 ]'

# A netdev without a MAC (lo: its MAC
# is all zeros, which oxe takes as none): the GUID is chosen once, when the
# device is created, and both GUIDs keep it.
rdma link add oxe2 type oxe netdev lo
lo1=$(guids oxe2)
lo2=$(guids oxe2)
echo "# oxe2 on lo: node_guid, sys_image_guid: $(echo $lo1), then $(echo $lo2)"
one_guid() { [ -n "$1" ] && [ "$1" = "$2" ] && [ "$(echo "$1" | sort -u | wc -l)" = 1 ]; }
check "no MAC (lo): node_guid and sys_image_guid are one value, the same in two queries" \
	one_guid "$lo1" "$lo2"
not_zero_mac() { [ -n "$1" ] && ! echo "$1" | grep -q 0200:00ff:fe00:0000; }
check "no MAC (lo): the GUID is not the EUI-64 of the all-zero MAC" not_zero_mac "$lo1"
rdma link delete oxe2

# rmmod with devices present tears them down.
ip link add vth0 type veth peer name vth1
rdma link add oxe0 type oxe netdev eth0
rdma link add oxe1 type oxe netdev vth0
check "rmmod with two devices present" sh -c 'modprobe -r rdma_oxe && ! [ -d /sys/module/rdma_oxe ] && [ -z "$(ls /sys/class/infiniband)" ]'
ip link del vth0

# rdma_rxe claims every RDMA_DRIVER_RXE device: the two never share a kernel.
modprobe rdma_rxe
check "oxe refuses to load while rdma_rxe is loaded" sh -c '! modprobe rdma_oxe 2>/dev/null && dmesg | grep -q "rdma_rxe is loaded"'
modprobe -r rdma_rxe
oxe_load
check "rdma_rxe is refused while oxe is loaded" sh -c '! modprobe rdma_rxe 2>/dev/null && ! [ -d /sys/module/rdma_rxe ]'
oxe_unload

check "nothing left: no devices, module unloaded" sh -c 'no_ib_devices() { [ -z "$(ls /sys/class/infiniband)" ]; }; no_ib_devices && ! [ -d /sys/module/rdma_oxe ]'

ktap_finished
