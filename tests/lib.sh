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
# A case that took 5 s or more since the previous one (its setup included)
# says how long: KASAN under TCG is slow, and the suite's time budget is spent
# where these show.
_oxe_t=$(date +%s)
check() {
	d=$1; shift
	if "$@"; then ktap_test_pass "$d"; else ktap_test_fail "$d"; fi
	_now=$(date +%s)
	[ $((_now - _oxe_t)) -lt 5 ] || echo "# ($((_now - _oxe_t)) s)"
	_oxe_t=$_now
}

# Pages pinned system-wide right now. The 9p root pins and unpins a few
# while it reads files, so comparisons allow PIN_NOISE pages.
PIN_NOISE=64
pins() { awk '/^nr_foll_pin_acquired/{a=$2} /^nr_foll_pin_released/{r=$2} END{print a-r}' /proc/vmstat; }
# pins_back BEFORE: the system-wide pin count is back to BEFORE, within the noise.
pins_back() { [ $(($(pins) - $1)) -lt $PIN_NOISE ]; }

# pt_line TOOL RESULT...: a perftest result line as the benchmarks' "pt TOOL
# VALUE UNIT" (bandwidth tests: average MB/s, atomics: Mpps, latency tests:
# typical µs).
pt_line() {
	_t=$1
	shift
	# shellcheck disable=SC2048,SC2086
	set -- $*
	case $_t in
	ib_atomic_bw) echo "pt $_t ${5:-0} Mpps" ;;
	*_bw) echo "pt $_t ${4:-0} MB/s" ;;
	*_lat) echo "pt $_t ${5:-0} us" ;;
	esac
}

# perftest_untimed LOG: perftest moved the data but could not time it. It
# counts TSC cycles and converts them at a rate it samples after the run
# (get_cpu_mhz()). A preempted sample (most likely by the workers still
# executing the WQEs the run left queued) fails perftest's own check
# ("Correlation coefficient r^2: ... < 0.9"); with -F it then reports 0 MB/s,
# without it no report at all. Seen in 3 of 100 runs of 1 MiB ib_send_bw -D 2.
perftest_untimed() { grep -qs "Correlation coefficient" "$1"; }

# rdma_stat DEV NAME: a counter of `rdma statistic show link DEV/1`.
rdma_stat() { rdma statistic show link "$1/1" | tr ' ' '\n' | awk -v n="$2" 'f{print; exit} $0==n{f=1}'; }

# gid_index DEV PREFIX: the index of the GID of DEV with that IPv4-mapped
# prefix. The first 16 entries first, in order (see low_gid): the glob's
# order reads a few hundred files before entry 2 (5 s on KASAN under TCG).
gid_index() {
	for i in 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15; do
		case $(cat "$IBDIR/$1/ports/1/gids/$i" 2>/dev/null) in *"$2"*) echo "$i"; return ;; esac
	done
	for g in "$IBDIR/$1"/ports/1/gids/*; do
		case $(cat "$g" 2>/dev/null) in *"$2"*) basename "$g"; return ;; esac
	done
}

# low_gid DEV GID: DEV has GID among its first 16 entries, where a netdev
# with a few addresses has them all. Reading the whole table, 1024 sysfs
# files, takes 5 s on KASAN under TCG: a wait that did so cost that per try.
low_gid() {
	cat "$IBDIR/$1"/ports/1/gids/[0-9] "$IBDIR/$1"/ports/1/gids/1[0-5] 2>/dev/null | grep -q "$2"
}

# ns_pair_up: namespaces A and B joined by a veth pair (va 10.9.0.1, vb
# 10.9.0.2), rdma_oxe loaded, devices oxeA on va and oxeB on vb; sets ga and
# gb to their IPv4 GIDs' indices.
ns_pair_up() {
	ip netns add A && ip netns add B || ktap_exit_fail_msg "no network namespaces"
	ip link add va type veth peer name vb
	ip link set va netns A && ip link set vb netns B
	ip -n A addr add 10.9.0.1/24 dev va && ip -n A link set va up && ip -n A link set lo up
	ip -n B addr add 10.9.0.2/24 dev vb && ip -n B link set vb up && ip -n B link set lo up
	oxe_load || ktap_exit_fail_msg "rdma_oxe does not load"
	ip netns exec A rdma link add oxeA type oxe netdev va &&
		ip netns exec B rdma link add oxeB type oxe netdev vb ||
		ktap_exit_fail_msg "rdma link add in a namespace failed"
	wait_for 10 low_gid oxeA ffff:0a09:0001
	wait_for 10 low_gid oxeB ffff:0a09:0002
	ga=$(gid_index oxeA ffff:0a09:0001); gb=$(gid_index oxeB ffff:0a09:0002)
}

# The GID option of the tools `pair` runs: perftest's -x; ibv_*_pingpong's is
# -g (scripts redefine gid_opt before those).
gid_opt() { echo "-x $1"; }

# pair CMD...: the server in namespace B, the client in A (towards B); both
# must succeed (within PAIR_TIMEOUT seconds, 120 by default). On failure
# their output and both devices' counters go to the log.
pair() {
	ip netns exec B timeout "${PAIR_TIMEOUT:-120}" "$@" -d oxeB $(gid_opt "$gb") > /tmp/pair.srv 2>&1 &
	srv=$!
	# The server may take longer than that to listen (its libraries come
	# over 9p): the client tries again while it finds nobody there.
	for _i in $(seq 30); do
		sleep 1
		ip netns exec A timeout "${PAIR_TIMEOUT:-120}" "$@" -d oxeA $(gid_opt "$ga") 10.9.0.2 > /tmp/pair.cli 2>&1
		c=$?
		grep -q "Couldn't connect" /tmp/pair.cli || break
	done
	wait $srv
	s=$?
	# ibv_rc_pingpong --chk only prints what it finds wrong.
	if grep -q "invalid data" /tmp/pair.cli /tmp/pair.srv; then
		echo "# ibv_rc_pingpong --chk found wrong data"
		[ $c = 0 ] && c=1
	fi
	[ $c = 0 ] && [ $s = 0 ] && return 0
	echo "# client exit $c, server exit $s"
	sed 's/^/# /' /tmp/pair.cli /tmp/pair.srv
	echo "# oxeA: $(ip netns exec A rdma statistic show link oxeA/1 2>&1)"
	echo "# oxeB: $(ip netns exec B rdma statistic show link oxeB/1 2>&1)"
	return 1
}

# harness_suite TAG PROG: a kselftest-harness program on oxe0 (made here);
# afterwards no MR may be left on oxe0, the module must unload and the pins
# be back. The plain TAP lines 900 and 901 extend the harness's plan (the
# host counts them). Returns non-zero if anything failed.
harness_suite() {
	_tag=$1 _prog=$2
	_before=$(pins)
	oxe_load || { ktap_print_header; ktap_exit_fail_msg "rdma_oxe does not load"; }
	rdma link add oxe0 type oxe netdev eth0 || { ktap_print_header; ktap_exit_fail_msg "rdma link add failed"; }
	_mrs0=$(rdma res show mr 2>/dev/null | grep -c "dev oxe0")
	OXE_DEV=oxe0 "$_prog"
	_rc=$?
	_mrs=$(rdma res show mr 2>/dev/null | grep -c "dev oxe0")
	if [ "$_mrs" -eq "$_mrs0" ]; then
		echo "ok 900 $_tag: no MR left on oxe0"
	else
		rdma res show mr | sed 's/^/# /'
		echo "not ok 900 $_tag: no MR left on oxe0 ($_mrs0 -> $_mrs)"
		_rc=1
	fi
	rdma link delete oxe0
	oxe_unload
	if ! oxe_loaded && pins_back "$_before"; then
		echo "ok 901 $_tag: the module unloads and the pins are back ($_before -> $(pins))"
	else
		echo "not ok 901 $_tag: the module unloads and the pins are back ($_before -> $(pins))"
		_rc=1
	fi
	return $_rc
}
