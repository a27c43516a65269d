#!/usr/bin/env bash
# The main job: set up the machine, build the kernel and rdma_oxe.ko, boot a
# guest, create oxe0 on eth0 with the stock `rdma` tool and show what stock
# rdma-core sees.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
"$OXE_ROOT/scripts/setup.sh"
kdir=$("$OXE_ROOT/scripts/build-kernel.sh")
KDIR=$kdir "$OXE_ROOT/scripts/build-module.sh" >/dev/null
out=$(mktemp -d /tmp/oxe-run.XXXXXX)
log "booting the guest (console: $out/console.log)"
rc=0
"$OXE_ROOT/qemu/run-vm.sh" -k "$kdir" -o "$out" -- scripts/guest-main.sh || rc=$?
cat "$out/main.txt" 2>/dev/null
exit "$rc"
