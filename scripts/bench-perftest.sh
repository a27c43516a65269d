#!/usr/bin/env bash
# make bench-perftest: the seven perftests (defaults, loopback on one device)
# on oxe, then on rdma_rxe in a separate boot of the same kernel, alternating
# for ROUNDS rounds (best of rounds). Prints each result and oxe/rxe.
#
# bench-perftest.sh pair (make bench-perftest MODE=pair): the seven perftests
# with their defaults (ib_atomic_bw with -n 20000) between two guests on the
# private link of scripts/two-guests.sh, oxe<->oxe against rxe<->rxe, alternating for ROUNDS
# rounds; guest A serves, guest B measures. Its first row is the link's
# ceiling: UDP datagrams of a RoCE packet's size, A to B, no RDMA; the row
# above ib_atomic_bw is its transaction ceiling (udp_rr), the floor under
# atomics.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
rounds=${ROUNDS:-2}
mode=${1:-loopback}
out=$(mktemp -d /tmp/oxe-bench.XXXXXX)
if [[ $mode == pair ]]; then
	"$OXE_ROOT/scripts/setup.sh"
	pair_boots "$out" "$rounds" ""
else
	bench_boots "$out" "$rounds" --wire tests/perftest_bench.sh
fi
python3 - "$out" "$rounds" "$mode" <<'PY'
import sys
out, rounds, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
best, unit = {}, {}
for flavour in ("oxe", "rxe"):
    for r in range(1, rounds + 1):
        for line in open(f"{out}/{flavour}-{r}.txt"):
            f = line.split()
            if len(f) < 4 or f[0] not in ("pt", "pw") or float(f[2]) <= 0:
                continue
            v, lower_is_better = float(f[2]), f[3] == "us"
            unit[f[1]] = f[3]
            k = (f[1], "wire" if f[0] == "pw" else flavour)
            cur = best.get(k)
            best[k] = v if cur is None else (min(cur, v) if lower_is_better else max(cur, v))
cols = ["oxe", "rxe"]
if mode == "pair":
    print("perftest defaults between two guests (TCG, one vCPU each, QEMU dgram link on 127.0.0.1),")
    print(f"best of {rounds} alternating runs: oxe<->oxe against rxe<->rxe")
else:
    cols = ["oxe", "wire", "rxe"]
    print(f"perftest defaults, loopback on one device, best of {rounds} alternating boots (TCG guest)")
    print("oxe: packets handed over between QPs; oxe wire: wire_loopback=1, every packet")
    print("through the RoCEv2 path (headers, ICRC, skb), like-for-like with rxe's loopback")
names = {"oxe": "oxe", "wire": "oxe wire", "rxe": "rxe"}
ratios = [c for c in cols if c != "rxe"]
print(f"{'test':14} " + " ".join(f"{names[c]:>10}" for c in cols) + f" {'unit':>5} "
      + " ".join(f"{c + '/rxe':>8}" for c in ratios))
tests = ["ib_write_bw", "ib_read_bw", "ib_send_bw", "ib_atomic_bw", "ib_write_lat", "ib_read_lat", "ib_send_lat"]
if mode == "pair":
    # The link itself: 1056-byte UDP datagrams (a 1024-byte RoCE payload's
    # packet size), one way, no RDMA; the same in both columns but for noise.
    tests.insert(0, "link_udp")
    # Its transaction ceiling, the floor under ib_atomic_bw: 128 requests
    # of an atomic's size in flight, each answered from user space.
    tests.insert(4, "link_rr")
for t in tests:
    v = {c: best.get((t, c)) for c in cols}
    x = v["rxe"]
    print(f"{t:14} " + " ".join(f"{v[c] or 0:10.3f}" for c in cols) + f" {unit.get(t, ''):>5} "
          + " ".join(f"{v[c] / x:8.2f}" if v[c] and x else f"{'-':>8}" for c in ratios))
PY
echo "raw results in $out"
