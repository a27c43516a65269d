#!/usr/bin/env bash
# Boots a kernel under QEMU (TCG) with the host's root filesystem shared
# read-only over 9p, runs one command in the guest and returns its exit status.
# KUnit runs the suites of test modules when they load (tests/kverbs).
# The machine is q35 (OXE_MACHINE overrides): its ACPI tables route PCI
# interrupts with a plain table, where the pc machine's _PRT is an AML loop
# that ran past ACPICA's 30 s loop limit on the KASAN kernel under TCG (the
# virtio devices then got no IRQ); the KASAN guest had to boot with
# acpi=noirq on the BIOS's legacy MP-table path, where a CI run met an
# early-boot KASAN report. Every flavour now boots with ACPI.
# tsc=reliable: under TCG the guest's TSC follows the host's clock, but the
# clocksource watchdog, comparing it with an emulated HPET whose reads stall
# on QEMU's big lock, sometimes saw a skew under load and switched the guest
# to the HPET in the middle of a run; gettimeofday then became a trapping
# MMIO read, and perftest's clock calibration (a regression of TSC against
# gettimeofday) failed with "r^2 < 0.9" at random.
# The console log is kept; a WARN, BUG, Oops, KASAN or lockdep report in it
# fails the run even when the command passed.
#
# Usage: run-vm.sh [-k KDIR] [-o OUTDIR] [-m MEM] [-t TIMEOUT_S] [-r] -- CMD [ARGS...]
#   -r  the reference flavour of the guest: rdma_rxe instead of oxe (see guest-init.sh)
set -euo pipefail
. "$(dirname "$0")/../scripts/lib.sh"

kdir="" out="" mem=4G timeout_s=1800 flavour=oxe extra_append=${OXE_APPEND:-}
while getopts "k:o:m:t:r" opt; do
	case $opt in
	k) kdir=$OPTARG ;; o) out=$OPTARG ;; m) mem=$OPTARG ;; t) timeout_s=$OPTARG ;;
	r) flavour=rxe ;; *) die "usage: run-vm.sh [-k KDIR] [-o OUTDIR] [-m MEM] [-t S] [-r] -- CMD" ;;
	esac
done
shift $((OPTIND - 1))
[[ ${1:-} == -- ]] && shift
(($#)) || die "no guest command"
[[ -n $kdir ]] || kdir=$("$OXE_ROOT/scripts/build-kernel.sh")
[[ -n $out ]] || out=$(mktemp -d /tmp/oxe-vm.XXXXXX)
mkdir -p "$out"
log "guest output in $out"
rm -f "$out/status" "$out/console.log"

# The guest command travels in a file; kernel command lines are short and
# mangle quoting.
printf '%q ' "$@" >"$out/cmd"
echo >>"$out/cmd"

machine=${OXE_MACHINE:-q35}

bzimage="$kdir/arch/x86/boot/bzImage"
[[ -f $bzimage ]] || die "no kernel image in $kdir"

# hubport: the NIC has carrier but nothing at all on the other side. Two
# guests share a private link instead (scripts/two-guests.sh): OXE_NETDEV is
# then a dgram netdev between two UDP ports of 127.0.0.1, with OXE_MAC and
# OXE_IP the guest's own addresses. OXE_NIC_OPTS adds virtio-net-pci
# properties (e.g. event_idx=off, to study the two-guest TX stall).
qemu_args=(
	-machine "$machine" -accel tcg,thread=multi -cpu "${OXE_CPU:-max}" -smp "${OXE_SMP:-2}" -m "$mem"
	-display none -no-reboot
	-serial "file:$out/console.log"
	-kernel "$bzimage"
	-fsdev "local,id=root,path=/,security_model=none,readonly=on,multidevs=remap"
	-device virtio-9p-pci,fsdev=root,mount_tag=/dev/root
	-fsdev "local,id=out,path=$out,security_model=none"
	-device virtio-9p-pci,fsdev=out,mount_tag=oxeout
	-netdev "${OXE_NETDEV:-hubport,hubid=0},id=n0"
	-device "virtio-net-pci,id=nic0,netdev=n0,mac=${OXE_MAC:-52:54:00:12:34:56}${OXE_NIC_OPTS:+,$OXE_NIC_OPTS}"
	-append "console=ttyS0 root=/dev/root rootfstype=9p rootflags=trans=virtio,version=9p2000.L,msize=${OXE_MSIZE:-512000},cache=loose ro panic=-1 tsc=reliable kunit.enable=1 kunit.autorun=1 init=$OXE_ROOT/qemu/guest-init.sh OXE_ROOT=$OXE_ROOT OXE_KDIR=$kdir OXE_FLAVOUR=$flavour OXE_IP=${OXE_IP:-10.77.0.1} $extra_append"
)

if [[ -n ${OXE_MONITOR:-} ]]; then
	qemu_args+=(-monitor "unix:$OXE_MONITOR,server,nowait")
else
	qemu_args+=(-monitor none)
fi
set +e
timeout --foreground -k 10 "$timeout_s" qemu-system-x86_64 "${qemu_args[@]}" </dev/null
qrc=$?
set -e

rc=1
if [[ -f $out/status ]]; then
	rc=$(cat "$out/status")
elif ((qrc == 124)); then
	log "guest timed out after ${timeout_s}s"
else
	log "guest ended without a status (qemu exit $qrc)"
fi

# Kernel reports that fail any run.
if grep -nE '(WARNING:|BUG:|Oops|KASAN:|UBSAN:|blocked for more than|soft lockup|possible circular locking|possible recursive locking|inconsistent lock state|suspicious RCU usage|Kernel panic|unreferenced object|rust_panic|panicked at)' \
	"$out/console.log" >"$out/kernel-reports.txt"; then
	log "kernel reported problems (console: $out/console.log):"
	head -20 "$out/kernel-reports.txt" >&2
	((rc != 0)) || rc=90
fi
exit "$rc"
