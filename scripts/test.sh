#!/usr/bin/env bash
# The whole suite: host tests, module build (clippy-clean), then the in-guest
# KTAP tests under QEMU. Ends with one line `N passed, N failed, N skipped` and
# exits non-zero on any failure.
#   scripts/test.sh                 everything
#   scripts/test.sh 10-device       only tests/guest/10-device.sh in the guest
#   OXE_FLAVOUR=plain scripts/test.sh   the guest suites on the plain kernel (quicker)
#   OXE_FLAVOUR=debug scripts/test.sh   ... on the debug kernel without KASAN
set -uo pipefail
. "$(dirname "$0")/lib.sh"

pass=0 fail=0 skip=0
result() { # result ok|fail|skip DESCRIPTION
	case $1 in
	ok) pass=$((pass + 1)); echo "ok - $2" ;;
	skip) skip=$((skip + 1)); echo "ok - $2 # SKIP" ;;
	*) fail=$((fail + 1)); echo "not ok - $2" ;;
	esac
}
finish() {
	echo "$pass passed, $fail failed, $skip skipped"
	((fail == 0))
	exit
}

"$OXE_ROOT/scripts/setup.sh" || { result fail "setup"; finish; }

# Host: kernel-independent logic, formatting and lints.
out=$(cd "$OXE_ROOT/rust/common" && cargo test 2>&1)
echo "$out" | grep -E '^test |test result' | sed 's/^/# /'
while read -r p f; do
	pass=$((pass + p)); fail=$((fail + f))
done < <(echo "$out" | sed -nE 's/^test result: [a-zA-Z]+\. ([0-9]+) passed; ([0-9]+) failed.*/\1 \2/p')
echo "$out" | grep -q '^test result' || result fail "host cargo test did not run"
if (cd "$OXE_ROOT/rust/common" && cargo fmt --check >/dev/null 2>&1) &&
   rustfmt --check --edition 2021 --config-path "$OXE_ROOT/rust/common" "$OXE_ROOT/rust/oxe.rs" >/dev/null 2>&1; then
	result ok "rustfmt clean"
else
	result fail "rustfmt clean (run make fmt)"
fi
if (cd "$OXE_ROOT/rust/common" && cargo clippy --quiet --all-targets -- -D warnings 2>&1); then
	result ok "host crate clippy clean"
else
	result fail "host crate clippy clean"
fi

# The module must build against the plain kernel (`make run`, benchmarks)...
pkdir=$("$OXE_ROOT/scripts/build-kernel.sh" plain) || { result fail "plain kernel build"; finish; }
if KDIR=$pkdir "$OXE_ROOT/scripts/build-module.sh" --clippy >/dev/null; then
	result ok "rdma_oxe.ko builds against the plain kernel, clippy and warning clean"
else
	result fail "rdma_oxe.ko builds against the plain kernel, clippy and warning clean"
fi
# ...and the guest suites run on the kasan flavour: generic KASAN, lockdep,
# DEBUG_ATOMIC_SLEEP, kmemleak (scanned after the suite), debug objects, fault
# injection and the Rust debug and overflow assertions (an LLVM build: Rust
# with KASAN needs clang). OXE_FLAVOUR=debug runs them on the same without
# KASAN (gcc; about 2.5 times as fast), OXE_FLAVOUR=plain on the plain kernel.
flavour=${OXE_FLAVOUR:-kasan}
kdir=$("$OXE_ROOT/scripts/build-kernel.sh" "$flavour") || { result fail "$flavour kernel build"; finish; }
result ok "$flavour kernel build ($kdir)"
if KDIR=$kdir "$OXE_ROOT/scripts/build-module.sh" --clippy >/dev/null; then
	result ok "rdma_oxe.ko builds, clippy and warning clean"
else
	result fail "rdma_oxe.ko builds, clippy and warning clean"
	finish
fi
if make -s -C "$OXE_ROOT" KDIR="$kdir" tests >/dev/null; then
	result ok "test programs build"
else
	result fail "test programs build"
	finish
fi

out_dir=$(mktemp -d /tmp/oxe-test.XXXXXX)
"$OXE_ROOT/qemu/run-vm.sh" -k "$kdir" -o "$out_dir" -t 3600 -- tests/guest-run.sh "$@"
vm_rc=$?
cat "$out_dir/console.log" | grep -vE '^(ok|not ok) |^#|^TAP|^1\.\.' >"$out_dir/console-kernel.log" || true
for f in "$out_dir"/ktap/*.ktap; do
	[[ -f $f ]] || continue
	name=$(basename "$f" .ktap)
	while IFS= read -r line; do
		case $line in
		"not ok "*) result fail "$name: ${line#not ok }" ;;
		"ok "*"# SKIP"*) result skip "$name: ${line#ok }" ;;
		"ok "*) result ok "$name: ${line#ok }" ;;
		esac
	done <"$f"
	# A plan that was not met (a script died half way) is a failure too.
	plan=$(sed -nE 's/^1\.\.([0-9]+).*/\1/p' "$f" | head -1)
	seen=$(grep -cE '^(ok|not ok) [0-9]+ ' "$f")
	[[ -z $plan ]] || ((seen >= plan)) || result fail "$name: planned $plan cases, ran $seen"
done
[[ -n $(ls "$out_dir"/ktap 2>/dev/null) ]] || result fail "no guest test ran"
if ((vm_rc == 90)); then
	result fail "kernel console is clean (see $out_dir/kernel-reports.txt)"
elif [[ -f $out_dir/status ]]; then
	result ok "kernel console is clean: no WARN, BUG, Oops, KASAN or lockdep report"
else
	result fail "guest finished (see $out_dir/console.log)"
fi
echo "# guest output kept in $out_dir"
finish
