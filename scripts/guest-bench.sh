#!/bin/sh
# Guest side of the benchmarks: one device of this boot's flavour (oxe0, or
# rxe0 in the reference boot), then the named benchmark program. With
# --wire, the oxe boot runs it a second time with wire_loopback=1 (every
# packet through the RoCEv2 path, as rxe's loopback), its "pt" lines
# printed as "pw" (OXE_WIRE=1 tells the program which pass it is in).
set -e
wire=0
[ "$1" = --wire ] && { wire=1; shift; }
if [ "$OXE_FLAVOUR" = rxe ]; then
	modprobe rdma_rxe
	rdma link add rxe0 type rxe netdev eth0
	dev=rxe0
else
	modprobe rdma_oxe
	rdma link add oxe0 type oxe netdev eth0
	dev=oxe0
fi
echo madvise >/sys/kernel/mm/transparent_hugepage/enabled
OXE_DEV=$dev "$@" >"$OXE_OUT/bench.txt"
rdma link delete $dev
if [ "$OXE_FLAVOUR" != rxe ] && [ $wire = 1 ]; then
	modprobe -r rdma_oxe
	modprobe rdma_oxe wire_loopback=1
	rdma link add oxe0 type oxe netdev eth0
	OXE_WIRE=1 OXE_DEV=oxe0 "$@" | sed 's/^pt /pw /' >>"$OXE_OUT/bench.txt"
	rdma link delete oxe0
fi
