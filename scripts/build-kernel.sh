#!/usr/bin/env bash
# Builds the guest kernel into $OXE_CACHE, keyed by kernel version, flavour and
# the hash of the config fragment(s) and toolchain. Prints the build directory.
# Usage: build-kernel.sh [plain|debug|kasan]
set -euo pipefail
. "$(dirname "$0")/lib.sh"

flavour=${1:-plain}
frags=("$OXE_ROOT/qemu/oxe.config")
case $flavour in
plain) ;;
debug) frags+=("$OXE_ROOT/qemu/oxe-debug.config") ;;
kasan) frags+=("$OXE_ROOT/qemu/oxe-debug.config" "$OXE_ROOT/qemu/oxe-kasan.config") ;;
*) die "unknown flavour $flavour (plain, debug, kasan)" ;;
esac
for f in "${frags[@]}"; do [[ -f $f ]] || die "no config fragment $f"; done

src=$(kernel_src)
# Rust with KASAN needs clang: the kasan flavour is an LLVM build.
make_flags=()
[[ $flavour != kasan ]] || make_flags=(LLVM=-19)
key=$( { cat "${frags[@]}"; cat "$src/.oxe-deb"; gcc --version | head -1; rustc --version;
	 bindgen --version; ((${#make_flags[@]} == 0)) || echo "${make_flags[*]}"; } | sha256sum | cut -c1-12)
out="$OXE_CACHE/build/$KVER_MAJOR-$flavour-$key"

if [[ -f $out/.oxe-built ]]; then
	echo "$out"
	exit 0
fi

# One build at a time: a second caller waits, then finds the kernel built.
mkdir -p "$OXE_CACHE/build"
exec 9>"$OXE_CACHE/build/.lock"
if ! flock -n 9; then
	log "another kernel build is running; waiting for it"
	flock 9
fi
if [[ -f $out/.oxe-built ]]; then
	echo "$out"
	exit 0
fi
# A build that was interrupted starts again from a clean tree.
rm -rf "$out"
mkdir -p "$out"
log "configuring $flavour kernel in $out"
cat "${frags[@]}" >"$out/fragment.config"
make -s -C "$src" O="$out" "${make_flags[@]}" KCONFIG_ALLCONFIG="$out/fragment.config" allnoconfig >&2
# Every symbol the fragment asks for must have survived Kconfig's dependencies.
bad=0
while IFS= read -r line; do
	case $line in
	CONFIG_*=*) grep -qxF "$line" "$out/.config" || { log "config: $line did not stick"; bad=1; } ;;
	"# CONFIG_"*" is not set") sym=${line#\# }; sym=${sym%% *}
		! grep -q "^$sym=" "$out/.config" || { log "config: $sym should be unset"; bad=1; } ;;
	esac
done <"$out/fragment.config"
((bad == 0)) || die "config fragment does not apply cleanly"

log "building (takes ~10-15 min cold on 2 cores; log: $out/build.log)"
start=$SECONDS
make -C "$src" O="$out" "${make_flags[@]}" -j"$(nproc)" bzImage modules >"$out/build.log" 2>&1 &
pid=$!
while kill -0 "$pid" 2>/dev/null; do
	sleep 30
	log "  ... $((SECONDS - start)) s, $(grep -c '^  [A-Z]' "$out/build.log" || true) steps"
done
if ! wait "$pid"; then
	tail -40 "$out/build.log" >&2
	die "kernel build failed"
fi
# The reference drivers, where the guest can insmod them by path.
make -s -C "$src" O="$out" "${make_flags[@]}" INSTALL_MOD_PATH="$out/modroot" modules_install >&2
# External modules must be built with the same toolchain flags.
echo "${make_flags[*]}" >"$out/.oxe-make-flags"
log "kernel built in $((SECONDS - start)) s"
touch "$out/.oxe-built"
# Older builds of this flavour are stale now.
for old in "$OXE_CACHE/build/$KVER_MAJOR-$flavour-"*; do
	[[ $old == "$out" ]] || rm -rf "$old"
done
echo "$out"
