#!/usr/bin/env bash
# Builds rdma_oxe.ko against the cached kernel. With --clippy, the Rust crate
# goes through clippy too, and any warning fails the build; the module is then
# built again without it, since clippy-driver compiles with MIR optimisations
# off (4 KB more text): the module tested is the one `make run` and the
# benchmarks load.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
kdir=${KDIR:-$("$OXE_ROOT/scripts/build-kernel.sh")}
clippy=false
[[ ${1:-} == --clippy ]] && clippy=true
extra=()
# The kernel's own toolchain flags (LLVM=-19 for the debug flavour).
if [[ -s $kdir/.oxe-make-flags ]]; then
	read -ra flags <"$kdir/.oxe-make-flags"
	extra+=("${flags[@]}")
fi
# Objects built for another kernel must not be reused.
stamp="$OXE_ROOT/.oxe-kdir"
if [[ $(cat "$stamp" 2>/dev/null) != "$kdir" ]]; then
	make -s -C "$kdir" M="$OXE_ROOT" "${extra[@]}" clean >/dev/null 2>&1 || true
	rm -f "$OXE_ROOT/rust/bindings_generated.rs"
	echo "$kdir" >"$stamp"
fi
log=$(mktemp)
trap 'rm -f "$log"' EXIT
# build [MAKE ARGS...]: the crate rebuilt as a whole (a stale object would
# skip clippy); a warning fails it.
build() {
	rm -f "$OXE_ROOT/rust/oxe.o"
	make -C "$kdir" M="$OXE_ROOT" "${extra[@]}" "$@" modules >"$log" 2>&1 ||
		{ cat "$log" >&2; die "module build failed"; }
	if grep -q 'warning' "$log"; then
		cat "$log" >&2
		die "module build has warnings"
	fi
}
if $clippy; then
	build CLIPPY=1
fi
build
ls "$OXE_ROOT/rdma_oxe.ko"
