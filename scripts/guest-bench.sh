#!/bin/sh
# Guest side of the benchmarks: one device of this boot's flavour (oxe0, or
# rxe0 in the reference boot), then the named benchmark program.
set -e
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
