#!/bin/sh
# Guest side of scripts/run.sh.
set -e
exec >"$OXE_OUT/main.txt" 2>&1
set -x
modprobe rdma_oxe
rdma link add oxe0 type oxe netdev eth0
rdma link show
ibv_devices
ibv_devinfo -v -d oxe0
rdma link delete oxe0
modprobe -r rdma_oxe
