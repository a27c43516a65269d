#!/bin/sh
# In the guest: rdma-core's pyverbs test suite (python3-pyverbs, whose
# tests Debian ships gzipped under /usr/share/doc/rdma-core/tests) on a
# device of DRIVER (oxe or rxe) on eth0; unittest's verbose log goes to
# $OXE_OUT/pyverbs-DRIVER.txt. scripts/pyverbs-compare.sh runs it in one
# boot per driver and compares the two.
# Usage: tests/pyverbs.sh DRIVER
cd "$(dirname "$0")/.." || exit 1
. tests/lib.sh
drv=$1
src=/usr/share/doc/rdma-core/tests
[ -f $src/run_tests.py ] || { echo "no pyverbs tests: install python3-pyverbs"; exit 1; }
rm -rf /tmp/pyverbs && mkdir -p /tmp/pyverbs && cp -r $src /tmp/pyverbs/tests
find /tmp/pyverbs/tests -name '*.gz' -exec gunzip -f {} +
case $drv in
oxe) oxe_load && rdma link add oxe0 type oxe netdev eth0 ;;
rxe) modprobe rdma_rxe && rdma link add rxe0 type rxe netdev eth0 ;;
esac || { echo "no $drv device"; exit 1; }
wait_for 10 sh -c "grep -qs ffff: $IBDIR/${drv}0/ports/1/gids/*"
ulimit -l unlimited
cd /tmp/pyverbs && timeout 1500 python3 tests/run_tests.py --dev "${drv}0" -v \
	>"$OXE_OUT/pyverbs-$drv.txt" 2>&1
echo "pyverbs on $drv exit $?" >>"$OXE_OUT/pyverbs-$drv.txt"
rdma link delete "${drv}0"
modprobe -r rdma_oxe rdma_rxe 2>/dev/null
exit 0
