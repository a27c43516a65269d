# Helpers for oxe's in-guest tests: the kernel's kselftest KTAP helpers plus a
# few checks of oxe's own. Sourced by tests/guest/*.sh.
# shellcheck shell=sh

. "$OXE_KDIR/source/tools/testing/selftests/kselftest/ktap_helpers.sh"

IBDIR=/sys/class/infiniband

# modprobe with the module tree guest-init.sh built for this kernel.
oxe_load() { modprobe rdma_oxe ${OXE_MODPARAMS:-}; }
oxe_unload() { ! [ -d /sys/module/rdma_oxe ] || modprobe -r rdma_oxe; }
oxe_loaded() { [ -d /sys/module/rdma_oxe ]; }

dev_exists() { [ -e "$IBDIR/$1" ]; }

# wait_for SECONDS CMD...: poll until CMD succeeds (queued unregistration).
wait_for() {
	t=$(( $1 * 10 )); shift
	while [ "$t" -gt 0 ]; do
		"$@" && return 0
		sleep 0.1
		t=$((t - 1))
	done
	return 1
}

no_ib_devices() { [ -z "$(ls "$IBDIR" 2>/dev/null)" ]; }

# errno_of CMD...: run CMD, print the error text it reported on stderr.
stderr_of() { "$@" 2>&1 >/dev/null; }

# Cases call ok/fail with a description; check runs a command as the case.
check() { d=$1; shift; if "$@"; then ktap_test_pass "$d"; else ktap_test_fail "$d"; fi; }

# Pages pinned system-wide right now. The 9p root pins and unpins a few
# while it reads files, so comparisons allow PIN_NOISE pages.
PIN_NOISE=64
pins() { awk '/^nr_foll_pin_acquired/{a=$2} /^nr_foll_pin_released/{r=$2} END{print a-r}' /proc/vmstat; }
# pins_back BEFORE: the system-wide pin count is back to BEFORE, within the noise.
pins_back() { [ $(($(pins) - $1)) -lt $PIN_NOISE ]; }
