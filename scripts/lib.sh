# Shared settings for oxe's scripts. Sourced, not run.
# shellcheck shell=bash

OXE_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# Everything large (kernel source, builds, apt lists) lives outside the repo.
OXE_CACHE=${OXE_CACHE:-/var/cache/oxe}
KVER_MAJOR=7.2
BINDGEN_VERSION=0.73.2
export LIBCLANG_PATH=${LIBCLANG_PATH:-/usr/lib/llvm-19/lib}
export PATH="$HOME/.cargo/bin:$PATH"

log() { printf '[oxe %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }
die() { log "error: $*"; exit 1; }

kernel_src() {
	local d="$OXE_CACHE/src/linux-source-$KVER_MAJOR"
	[[ -f $d/Makefile ]] || die "kernel source missing: run scripts/setup.sh"
	echo "$d"
}
