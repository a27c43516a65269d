#!/usr/bin/env bash
# Boots a guest kernel N times in a row with nothing to run and counts the
# boots whose console has a kernel report (WARN, BUG, KASAN, lockdep...).
# Boot-time reports come from the guest kernel and QEMU, not from oxe, and
# would fail any test run by chance: this is how they are found and how a fix
# is shown to hold.
#   scripts/boot-check.sh [FLAVOUR] [N]     default: kasan 30
set -euo pipefail
. "$(dirname "$0")/lib.sh"

flavour=${1:-kasan} n=${2:-30}
kdir=$("$OXE_ROOT/scripts/build-kernel.sh" "$flavour")
out=$(mktemp -d /tmp/oxe-boot.XXXXXX)
bad=0
for i in $(seq 1 "$n"); do
	t=$SECONDS
	rc=0
	"$OXE_ROOT/qemu/run-vm.sh" -k "$kdir" -o "$out/$i" -t 600 -- true 2>/dev/null || rc=$?
	if ((rc != 0)); then
		bad=$((bad + 1))
		log "boot $i: FAILED (rc $rc, $((SECONDS - t)) s): $(head -3 "$out/$i/kernel-reports.txt" 2>/dev/null | tr '\n' ' ')"
	else
		log "boot $i: clean ($((SECONDS - t)) s)"
		# Keep only the consoles of bad boots.
		rm -rf "${out:?}/$i"
	fi
done
log "$flavour: $bad of $n boots had a kernel report (kept in $out)"
((bad == 0))
