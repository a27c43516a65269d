#!/bin/sh
# Guest side of scripts/run.sh: create oxe0 with the stock rdma tool, show
# what stock rdma-core sees, and run ib_write_bw on it (client and server in
# this guest).
exec >"$OXE_OUT/main.txt" 2>&1
set -x
modprobe rdma_oxe || exit 1
rdma link add oxe0 type oxe netdev eth0 || exit 1
rdma link show
ibv_devices
ibv_devinfo -v -d oxe0
set +x
echo "=== ib_write_bw on oxe0 (server and client in this guest)"
ib_write_bw -d oxe0 -p 18515 >/tmp/srv.txt 2>&1 &
srv=$!
i=0
while ! ss -ltn | grep -q ':18515 ' && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
ib_write_bw -d oxe0 -p 18515 10.77.0.1
rc=$?
wait $srv || rc=1
rdma link delete oxe0
modprobe -r rdma_oxe
exit $rc
