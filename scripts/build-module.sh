#!/usr/bin/env bash
# Builds rdma_oxe.ko against the cached kernel. With --clippy, the Rust crate
# goes through clippy too, and any warning fails the build.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
kdir=${KDIR:-$("$OXE_ROOT/scripts/build-kernel.sh")}
extra=()
[[ ${1:-} == --clippy ]] && extra=(CLIPPY=1)
log=$(mktemp)
# The crate is rebuilt as a whole; a stale object would skip clippy.
rm -f "$OXE_ROOT/rust/oxe.o"
if ! make -C "$kdir" M="$OXE_ROOT" "${extra[@]}" modules >"$log" 2>&1; then
	cat "$log" >&2
	rm -f "$log"
	die "module build failed"
fi
if grep -q 'warning' "$log"; then
	cat "$log" >&2
	rm -f "$log"
	die "module build has warnings"
fi
rm -f "$log"
ls "$OXE_ROOT/rdma_oxe.ko"
