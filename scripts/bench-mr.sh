#!/usr/bin/env bash
# make bench-mr: reg+dereg of 4 KiB .. 1 GiB (4 KiB pages, THP, and on demand)
# on oxe, then
# on rdma_rxe in a separate boot of the same kernel, alternating for ROUNDS
# rounds (best of rounds). Prints µs per operation, the ratio oxe/rxe, and
# the floor: plain pin_user_pages(FOLL_LONGTERM) + unpin of the same buffer.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
rounds=${ROUNDS:-2}
out=$(mktemp -d /tmp/oxe-bench.XXXXXX)
bench_boots "$out" "$rounds" tests/bin/mr_bench
python3 - "$out" "$rounds" <<'PY'
import sys, collections
out, rounds = sys.argv[1], int(sys.argv[2])
best = collections.defaultdict(dict)
for flavour in ("oxe", "rxe"):
    for r in range(1, rounds + 1):
        for line in open(f"{out}/{flavour}-{r}.txt"):
            f = line.split()
            if f[0] == "pd":
                us = float(f[4])
                cur = best[("pd", 0)].get(flavour)
                best[("pd", 0)][flavour] = min(cur, us) if cur else us
                continue
            if f[0] != "mr":
                continue
            key = (f[1], int(f[2]))
            us, floor = float(f[4]), float(f[5])
            cur = best[key].get(flavour)
            best[key][flavour] = min(cur, us) if cur else us
            if floor > 0:
                best[key]["floor"] = min(best[key].get("floor", floor), floor)
def size(n):
    return f"{n >> 30} GiB" if n >= 1 << 30 else f"{n >> 20} MiB" if n >= 1 << 20 else f"{n >> 10} KiB"
print(f"reg+dereg, µs per operation, best of {rounds} alternating boots (TCG guest)")
print(f"{'pages':5} {'size':>8} {'oxe':>10} {'rxe':>10} {'oxe/rxe':>8} {'floor':>10} {'oxe/floor':>9}")
pd = best.pop(("pd", 0), {})
for (backing, n), v in sorted(best.items(), key=lambda kv: (kv[0][0], kv[0][1])):
    o, x, fl = v.get("oxe"), v.get("rxe"), v.get("floor")
    ratio = f"{o / x:.2f}" if o and x else "-"
    fr = f"{o / fl:.2f}" if o and fl else "-"
    print(f"{backing:5} {size(n):>8} {o or 0:10.1f} {x or 0:10.1f} {ratio:>8} {fl or 0:10.1f} {fr:>9}")
for drv in ("oxe", "rxe"):
    pinned, odp = best.get(("4k", 1 << 30), {}).get(drv), best.get(("odp", 1 << 30), {}).get(drv)
    if pinned and odp:
        print(f"1 GiB on demand against pinned ({drv}): {odp:.1f} against {pinned:.1f} µs, {pinned / odp:.0f}x cheaper")
if pd:
    print(f"alloc_pd+dealloc_pd (the core's share of a verb round trip): oxe {pd.get('oxe', 0):.1f} µs, rxe {pd.get('rxe', 0):.1f} µs")
PY
echo "raw results in $out"
