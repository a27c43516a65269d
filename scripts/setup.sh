#!/usr/bin/env bash
# Installs everything oxe needs on a Debian 12 machine. Idempotent: a second
# run only checks.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

PKGS=(build-essential flex bison bc libelf-dev libssl-dev cpio kmod xz-utils
      python3 rsync qemu-system-x86 libclang-19-dev clang-19 lld-19 llvm-19
      rdma-core ibverbs-utils ibverbs-providers libibverbs-dev librdmacm-dev
      perftest rdmacm-utils python3-pyverbs iproute2 busybox-static nvme-cli)

missing=()
for p in "${PKGS[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing+=("$p")
done
if ((${#missing[@]})); then
	log "installing: ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

command -v rustup >/dev/null || die "rustup not found (oxe uses the machine's rustup toolchain)"
if ! rustup component list --installed 2>/dev/null | grep -q '^rust-src'; then
	log "adding the rust-src component"
	rustup component add rust-src
fi
for c in rustfmt clippy; do
	rustup component list --installed 2>/dev/null | grep -q "^$c" || rustup component add "$c" || true
done
if [[ "$(bindgen --version 2>/dev/null)" != "bindgen $BINDGEN_VERSION" ]]; then
	log "installing bindgen-cli $BINDGEN_VERSION"
	cargo install --locked --quiet bindgen-cli --version "$BINDGEN_VERSION"
fi

# Linux 7.2 source from trixie-backports, through a private apt configuration so
# nothing on the machine changes: only the .deb is downloaded and unpacked.
src_dir="$OXE_CACHE/src"
if ! compgen -G "$src_dir/linux-source-$KVER_MAJOR/Makefile" >/dev/null; then
	apt_dir="$OXE_CACHE/apt"
	mkdir -p "$apt_dir/lists/partial" "$apt_dir/archives/partial" "$src_dir"
	cat >"$apt_dir/sources.list" <<EOS
deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian trixie-backports main
EOS
	aptopts=(-o Dir::Etc::SourceList="$apt_dir/sources.list" -o Dir::Etc::SourceParts=/dev/null
		 -o Dir::State::Lists="$apt_dir/lists" -o Dir::Cache::Archives="$apt_dir/archives"
		 -o Dir::State::Status=/dev/null -o Dir::Etc::Preferences=/dev/null
		 -o Dir::Etc::PreferencesParts=/dev/null -o APT::Get::List-Cleanup=0 -qq)
	log "fetching linux-source-$KVER_MAJOR from trixie-backports"
	apt-get "${aptopts[@]}" update
	(cd "$apt_dir/archives" && apt-get "${aptopts[@]}" download "linux-source-$KVER_MAJOR")
	deb=$(ls -t "$apt_dir"/archives/linux-source-"$KVER_MAJOR"_*.deb | head -1)
	tmp=$(mktemp -d "$OXE_CACHE/unpack.XXXX")
	dpkg-deb -x "$deb" "$tmp"
	tarball=$(ls "$tmp"/usr/src/linux-source-"$KVER_MAJOR".tar.*)
	log "unpacking $(basename "$tarball")"
	rm -rf "$src_dir/linux-source-$KVER_MAJOR"
	tar -C "$src_dir" -xf "$tarball"
	rm -rf "$tmp"
	basename "$deb" >"$src_dir/linux-source-$KVER_MAJOR/.oxe-deb"
fi
log "setup done: $(cat "$src_dir/linux-source-$KVER_MAJOR/.oxe-deb")"
