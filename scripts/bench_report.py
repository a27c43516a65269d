#!/usr/bin/env python3
"""make bench's report: medians over the rounds of scripts/bench.sh's raw
results (RAW/oxe-N.txt, RAW/rxe-N.txt, and the two-guest link's
RAW/pair-oxe-N.txt, RAW/pair-rxe-N.txt), oxe/rxe, the floors, the spread
between rounds and the goals of issues 14 and 11. Writes OUT/bench.csv, OUT/bench.json,
OUT/table.md and, with gnuplot, OUT/bw.png, OUT/reg.png, OUT/ratio.png.

Usage: bench_report.py RAW OUT [--update REPO]
       bench_report.py --self-test
"""
import csv
import glob
import json
import os
import re
import shutil
import statistics
import subprocess
import sys

COLS = ("oxe", "wire", "rxe", "floor")
SIZES = (4096, 65536, 1048576)


def size_str(n):
    if n >= 1 << 30:
        return f"{n >> 30} GiB"
    if n >= 1 << 20:
        return f"{n >> 20} MiB"
    if n >= 1 << 10:
        return f"{n >> 10} KiB"
    return f"{n} B"


def load(raw):
    vals, unit, rounds = {}, {}, set()

    def add(fig, col, v, u):
        if v > 0:
            vals.setdefault(fig, {}).setdefault(col, []).append(v)
            unit[fig] = u

    for path in sorted(glob.glob(os.path.join(raw, "pair-*-*.txt"))):
        # The two-guest link (two-guests.sh's benchmark list): oxe<->oxe or
        # rxe<->rxe; the link's own ceilings are the floors.
        m = re.match(r"pair-(oxe|rxe)-(\d+)\.txt$", os.path.basename(path))
        if not m:
            continue
        for line in open(path):
            f = line.split()
            try:
                if len(f) >= 4 and f[0] == "pt":
                    add(f"pair/{f[1]}", "floor" if f[1].startswith("link_") else m.group(1), float(f[2]), f[3])
            except ValueError:
                continue
    for path in sorted(glob.glob(os.path.join(raw, "*-*.txt"))):
        m = re.match(r"(oxe|rxe)-(\d+)\.txt$", os.path.basename(path))
        if not m:
            continue
        drv = m.group(1)
        rounds.add(int(m.group(2)))
        for line in open(path):
            f = line.split()
            try:
                if len(f) >= 4 and f[0] == "floor" and f[1] == "memcpy":
                    add(f"memcpy/{f[2]}", "floor", float(f[3]), "MB/s")
                elif len(f) >= 6 and f[0] == "pd":
                    add("alloc_pd+dealloc_pd", drv, float(f[4]), "us")
                elif len(f) >= 6 and f[0] == "share":
                    # The driver's share, from alternating blocks (mr_bench).
                    add("share/4096", drv, float(f[5]), "us")
                elif len(f) >= 6 and f[0] == "mr":
                    fig = f"reg/{f[1]}/{f[2]}"
                    add(fig, drv, float(f[4]), "us")
                    add(fig, "floor", float(f[5]), "us")
                elif len(f) >= 4 and f[0] in ("pt", "pw"):
                    add(f[1], "wire" if f[0] == "pw" else drv, float(f[2]), f[3])
            except ValueError:
                continue
    return vals, unit, len(rounds)


def med(vals, fig, col):
    v = vals.get(fig, {}).get(col)
    return statistics.median(v) if v else None


def spread(vals, fig):
    """Largest (max - min) / median over the figure's columns, in percent."""
    worst = None
    for v in vals.get(fig, {}).values():
        if len(v) > 1:
            s = (max(v) - min(v)) / statistics.median(v) * 100
            worst = s if worst is None else max(worst, s)
    return worst


def ratio(a, b):
    return a / b if a and b else None


def fmt(v, digits=1):
    if v is None:
        return "-"
    if v >= 1000:
        return f"{v:.0f}"
    return f"{v:.{digits}f}" if v >= 1 else f"{v:.3f}"


def rows(vals, unit):
    """(section, figure, label, unit, oxe, wire, rxe, floor) in report order."""
    out = []
    for backing in ("4k", "thp", "odp"):
        for fig in sorted((k for k in vals if k.startswith(f"reg/{backing}/")),
                          key=lambda k: int(k.split("/")[2])):
            n = int(fig.split("/")[2])
            out.append(("reg+dereg", fig, f"{backing} {size_str(n)}", "us",
                        med(vals, fig, "oxe"), None, med(vals, fig, "rxe"),
                        med(vals, fig, "floor") if backing != "odp" else None))
    pd = "alloc_pd+dealloc_pd"
    if pd in vals:
        out.append(("reg+dereg", pd, pd, "us", med(vals, pd, "oxe"), None, med(vals, pd, "rxe"), None))
    fig = "share/4096"
    if fig in vals:
        out.append(("reg+dereg", fig, "4k 4 KiB minus alloc_pd+dealloc_pd, alternating blocks", "us",
                    med(vals, fig, "oxe"), None, med(vals, fig, "rxe"), None))
    for op in ("write", "read", "send"):
        for q in (1, 4):
            for s in SIZES:
                fig = f"ib_{op}_bw/{s}/q{q}"
                out.append(("bandwidth", fig, f"ib_{op}_bw {size_str(s)} {q} QP{'s' if q > 1 else ''}",
                            unit.get(fig, "MB/s"), med(vals, fig, "oxe"), med(vals, fig, "wire"),
                            med(vals, fig, "rxe"), med(vals, f"memcpy/{s}", "floor")))
    for fig, label in (("odp/first-touch", "first touch of a page (fault's share of a 4 KiB WRITE)"),
                       ("odp/write-4k", "4 KiB WRITE into an ODP MR, pages present"),
                       ("pinned/write-4k", "4 KiB WRITE into a pinned MR"),
                       ("ib_write_bw/65536/q1/odp", "ib_write_bw 64 KiB --odp"),
                       ("ib_read_bw/65536/q1/odp", "ib_read_bw 64 KiB --odp")):
        out.append(("on-demand paging", fig, label, unit.get(fig, "us"), med(vals, fig, "oxe"), None,
                    med(vals, fig, "rxe"), None))
    fig = "ib_atomic_bw"
    out.append(("atomics", fig, fig, unit.get(fig, "Mpps"), med(vals, fig, "oxe"),
                med(vals, fig, "wire"), med(vals, fig, "rxe"), None))
    for op in ("write", "read", "send"):
        fig = f"ib_{op}_lat/2"
        out.append(("latency", fig, f"ib_{op}_lat 2 B", unit.get(fig, "us"), med(vals, fig, "oxe"),
                    med(vals, fig, "wire"), med(vals, fig, "rxe"), None))
    sec = PAIR_SECTION
    for t in ("ib_write_bw", "ib_read_bw", "ib_send_bw", "ib_atomic_bw", "ib_write_lat", "ib_read_lat",
              "ib_send_lat"):
        fig = f"pair/{t}"
        if fig not in vals:
            continue
        floor = {"ib_atomic_bw": "pair/link_rr"}.get(t, "pair/link_udp") if t.endswith("_bw") else None
        out.append((sec, fig, t + ("" if t.endswith("_bw") else " 2 B"),
                    unit.get(fig, "us"), med(vals, fig, "oxe"), None, med(vals, fig, "rxe"),
                    floor and med(vals, floor, "floor")))
    return out


PAIR_SECTION = ("two guests, oxe<->oxe against rxe<->rxe: perftest's defaults (64 KiB), one vCPU each, a private QEMU link; "
                "floor: the link's ceiling, 1056-byte UDP datagrams one way or 128 atomic-sized "
                "requests in flight")


def goals(vals):
    """Issue 14's goals: (goal, measured, target, met)."""
    g = []

    def add(name, v, target, higher):
        met = None if v is None else (v >= target if higher else v <= target)
        g.append((name, v, target, higher, met))

    for op in ("write", "read"):
        for s in (65536, 1048576):
            add(f"ib_{op}_bw {size_str(s)} / memcpy", ratio(med(vals, f"ib_{op}_bw/{s}/q1", "oxe"),
                                                          med(vals, f"memcpy/{s}", "floor")), 0.8, True)
    for op in ("write", "read", "send"):
        for s in (65536, 1048576):
            add(f"ib_{op}_bw {size_str(s)} 4 QPs / 1 QP",
                ratio(med(vals, f"ib_{op}_bw/{s}/q4", "oxe"), med(vals, f"ib_{op}_bw/{s}/q1", "oxe")),
                1.7, True)
    add("ib_atomic_bw oxe/rxe", ratio(med(vals, "ib_atomic_bw", "oxe"), med(vals, "ib_atomic_bw", "rxe")),
        3.0, True)
    for op in ("write", "read", "send"):
        fig = f"ib_{op}_lat/2"
        add(f"ib_{op}_lat oxe/rxe", ratio(med(vals, fig, "oxe"), med(vals, fig, "rxe")), 0.3, False)
    for op in ("write", "read"):
        add(f"ib_{op}_bw 64 KiB: ODP / pinned (issue 13)",
            ratio(med(vals, f"ib_{op}_bw/65536/q1/odp", "oxe"), med(vals, f"ib_{op}_bw/65536/q1", "oxe")),
            0.9, True)
    fig = f"reg/odp/{1 << 30}"
    pinned = med(vals, f"reg/4k/{1 << 30}", "oxe")
    add("reg+dereg 1 GiB: ODP / pinned (issue 13)", ratio(med(vals, fig, "oxe"), pinned), 0.01, False)
    fig = f"reg/thp/{1 << 30}"
    add("reg+dereg 1 GiB THP oxe/rxe", ratio(med(vals, fig, "oxe"), med(vals, fig, "rxe")), 0.25, False)
    # Measured in alternating blocks where mr_bench does (since stop 33):
    # two figures taken seconds apart drift more than their difference.
    # Earlier raw results (BENCH_RAW) have only the two figures.
    share = ratio(med(vals, "share/4096", "oxe"), med(vals, "share/4096", "rxe"))
    if share is None:
        fig, pd = "reg/4k/4096", "alloc_pd+dealloc_pd"
        o, x = med(vals, fig, "oxe"), med(vals, fig, "rxe")
        po, px = med(vals, pd, "oxe"), med(vals, pd, "rxe")
        share = ratio(o - po, x - px) if None not in (o, x, po, px) and x > px and o > po else None
    add("reg+dereg 4 KiB, driver's share (minus alloc_pd+dealloc_pd) oxe/rxe", share, 0.25, False)
    if any(k.startswith("pair/ib_") for k in vals):
        for target, who in ((1.5, "issue 11"), (2.0, "issue 14")):
            for op in ("write", "read", "send"):
                fig = f"pair/ib_{op}_bw"
                add(f"two guests: ib_{op}_bw oxe/rxe ({who})", ratio(med(vals, fig, "oxe"), med(vals, fig, "rxe")),
                    target, True)
        for op in ("write", "read", "send"):
            fig = f"pair/ib_{op}_lat"
            add(f"two guests: ib_{op}_lat oxe/rxe", ratio(med(vals, fig, "oxe"), med(vals, fig, "rxe")), 1.0, False)
    return g


def table(rs, g, vals, nrounds):
    lines = [f"Medians of {nrounds} alternating round{'s' if nrounds != 1 else ''} "
             "(TCG guest, 2 vCPUs); 'oxe wire' is oxe with every packet through the RoCEv2 path; "
             "'floor' is memcpy (bandwidth) or bare pin_user_pages + unpin (registration); "
             "'spread' is the largest (max - min) / median between rounds.", ""]
    section = None
    for sec, fig, label, u, o, w, x, fl in rs:
        if sec != section:
            section = sec
            lines += ["", f"**{sec}**", "",
                      "| figure | unit | oxe | oxe wire | rxe | oxe/rxe | wire/rxe | floor | oxe/floor | spread |",
                      "|---|---|---|---|---|---|---|---|---|---|"]
        sp = spread(vals, fig)
        lines.append(f"| {label} | {u} | {fmt(o)} | {fmt(w)} | {fmt(x)} | {fmt(ratio(o, x), 2)} | "
                     f"{fmt(ratio(w, x), 2)} | {fmt(fl)} | {fmt(ratio(o, fl), 2)} | "
                     f"{'-' if sp is None else f'{sp:.0f}%'} |")
    lines += ["", "**goals (issue 14; two guests also issue 11)**", "", "| goal | measured | target | met |", "|---|---|---|---|"]
    for name, v, target, higher, met in g:
        lines.append(f"| {name} | {fmt(v, 2)} | {'>=' if higher else '<='} {target} | "
                     f"{'-' if met is None else 'yes' if met else 'no'} |")
    return "\n".join(lines) + "\n"


def plots(out, vals, unit):
    if not shutil.which("gnuplot"):
        print("no gnuplot: no plots")
        return []
    with open(os.path.join(out, "bw.dat"), "w") as f:
        for op in ("write", "read", "send"):
            f.write(f"# {op}\n")
            for s in SIZES:
                v = [med(vals, f"ib_{op}_bw/{s}/q1", "oxe"), med(vals, f"ib_{op}_bw/{s}/q4", "oxe"),
                     med(vals, f"ib_{op}_bw/{s}/q1", "wire"), med(vals, f"ib_{op}_bw/{s}/q1", "rxe"),
                     med(vals, f"memcpy/{s}", "floor")]
                f.write(f"{s // 1024} " + " ".join("NaN" if x is None else f"{x}" for x in v) + "\n")
            f.write("\n\n")
    with open(os.path.join(out, "reg.dat"), "w") as f:
        for backing in ("4k", "thp", "odp"):
            f.write(f"# {backing}\n")
            for fig in sorted((k for k in vals if k.startswith(f"reg/{backing}/")),
                              key=lambda k: int(k.split("/")[2])):
                n = int(fig.split("/")[2])
                v = [med(vals, fig, "oxe"), med(vals, fig, "rxe"),
                     med(vals, fig if backing == "thp" else f"reg/4k/{n}", "floor")]
                f.write(f"{n // 1024} " + " ".join("NaN" if x is None else f"{x}" for x in v) + "\n")
            f.write("\n\n")
    with open(os.path.join(out, "ratio.dat"), "w") as f:
        for _, fig, label, u, o, w, x, _ in rows(vals, unit):
            if fig.startswith("reg/") or fig.startswith("alloc"):
                continue
            r = ratio(o, x)
            if r:
                lab = f"2 guests: {label}" if fig.startswith("pair/") else label
                f.write(f"\"{lab}\" {1 / r if u == 'us' else r}\n")
    gp = f"""
set terminal pngcairo size 1500,450 font ",10" noenhanced
set output "{out}/bw.png"
set multiplot layout 1,3 title "Loopback bandwidth on one guest (MB/s, log scale; medians)"
set logscale xy
set xrange [2:2048]
set yrange [1:*]
set xlabel "message size (KiB)"
set key bottom right
set grid
do for [i=0:2] {{
  set title word("ib_write_bw ib_read_bw ib_send_bw", i+1)
  plot "{out}/bw.dat" index i using 1:2 w lp lw 2 t "oxe", \\
       "" index i using 1:3 w lp t "oxe, 4 QPs", \\
       "" index i using 1:4 w lp t "oxe wire", \\
       "" index i using 1:5 w lp lw 2 t "rxe", \\
       "" index i using 1:6 w l dt 2 lc rgb "black" t "memcpy (floor)"
}}
unset multiplot
set output "{out}/reg.png"
set multiplot layout 1,3 title "reg+dereg (us per operation, log scale; medians)"
set ylabel "us"
set xlabel "registered size (KiB)"
set autoscale xy
do for [i=0:2] {{
  set title word("4-KiB-pages THP on-demand", i+1)
  plot "{out}/reg.dat" index i using 1:2 w lp lw 2 t "oxe", \\
       "" index i using 1:3 w lp lw 2 t "rxe", \\
       "" index i using 1:4 w l dt 2 lc rgb "black" t "pin+unpin (floor; 4 KiB pages for on-demand)"
}}
unset multiplot
set terminal pngcairo size 1000,500 font ",10" noenhanced
set output "{out}/ratio.png"
unset logscale x
unset xlabel
set ylabel "oxe better by (x, log)"
set title "oxe against rdma_rxe: rates oxe/rxe, times rxe/oxe (above 1: oxe better)"
set logscale y
set style fill solid 0.6
set boxwidth 0.7
set xtics rotate by -50 font ",8"
unset key
plot "{out}/ratio.dat" using 0:2:xtic(1) with boxes, 1 w l lc rgb "black" dt 2
"""
    r = subprocess.run(["gnuplot"], input=gp, text=True, capture_output=True)
    if r.returncode:
        print("gnuplot failed:", r.stderr.strip()[:500])
        return []
    return [os.path.join(out, p) for p in ("bw.png", "reg.png", "ratio.png")]


def self_test():
    """Loopback and two-guest raw files side by side: each kind is read by
    its own loader (a pair file is not a loopback round), the pair's rows
    take medians, oxe/rxe and the link's ceilings as floors, its goals
    appear, and a pair run that produced nothing (an empty file) is left
    out rather than fatal. Returns the failures."""
    import tempfile
    files = {
        "oxe-1.txt": "floor memcpy 65536 3000\npt ib_write_bw/65536/q1 1500 MB/s\npt ib_write_lat/2 20 us\n",
        "oxe-2.txt": "floor memcpy 65536 3400\npt ib_write_bw/65536/q1 1700 MB/s\npt ib_write_lat/2 22 us\n",
        "rxe-1.txt": "pt ib_write_bw/65536/q1 50 MB/s\npt ib_write_lat/2 30 us\n",
        "rxe-2.txt": "pt ib_write_bw/65536/q1 70 MB/s\npt ib_write_lat/2 34 us\n",
        "pair-oxe-1.txt": "pt link_udp 50 MB/s\npt link_rr 0.02 Mpps\npt ib_write_bw 30 MB/s\n"
                          "pt ib_atomic_bw 0.015 Mpps\npt ib_read_lat 400 us\n",
        "pair-oxe-2.txt": "",
        "pair-rxe-1.txt": "pt link_udp 54 MB/s\npt link_rr 0.018 Mpps\npt ib_write_bw 20 MB/s\n"
                          "pt ib_atomic_bw 0.016 Mpps\npt ib_read_lat 500 us\n",
        "pair-rxe-2.txt": "pt link_udp 52 MB/s\npt ib_write_bw 24 MB/s\npt ib_read_lat 420 us\n",
    }
    bad = []
    with tempfile.TemporaryDirectory() as d:
        for name, text in files.items():
            with open(os.path.join(d, name), "w") as f:
                f.write(text)
        vals, unit, nrounds = load(d)
        rs = {r[1]: r for r in rows(vals, unit)}
        g = {x[0]: x for x in goals(vals)}

    def want(what, got, exp):
        if got is None or abs(got - exp) > 1e-6 * max(1, abs(exp)):
            bad.append(f"{what}: {got}, want {exp}")

    if nrounds != 2:
        bad.append(f"loopback rounds: {nrounds}, want 2")
    if "ib_write_bw" in vals or "link_udp" in vals:
        bad.append("a pair figure read as a loopback one")
    want("loopback WRITE oxe", rs["ib_write_bw/65536/q1"][4], 1600)
    want("loopback WRITE floor", rs["ib_write_bw/65536/q1"][7], 3200)
    r = rs.get("pair/ib_write_bw")
    if not r or not r[0].startswith("two guests"):
        bad.append(f"pair WRITE row: {r}")
    else:
        want("pair WRITE oxe", r[4], 30)
        want("pair WRITE rxe", r[6], 22)
        want("pair WRITE floor (the link's ceiling)", r[7], 52)
        want("pair atomics floor (the transaction ceiling)", rs["pair/ib_atomic_bw"][7], 0.019)
        if rs["pair/ib_read_lat"][7] is not None:
            bad.append("a latency row with a floor")
    want("goal: pair WRITE (issue 11)", g.get("two guests: ib_write_bw oxe/rxe (issue 11)", (0, None))[1], 30 / 22)
    want("goal: pair read_lat", g.get("two guests: ib_read_lat oxe/rxe", (0, None))[1], 400 / 460)
    if g.get("two guests: ib_write_bw oxe/rxe (issue 14)", (0, 0, 0, 0, None))[4] is not False:
        bad.append("pair WRITE 1.36x should miss issue 14's 2x")
    return bad


def main():
    if sys.argv[1:] == ["--self-test"]:
        bad = self_test()
        for b in bad:
            print(b)
        sys.exit(1 if bad else 0)
    raw, out = sys.argv[1], sys.argv[2]
    update = sys.argv[4] if len(sys.argv) > 4 and sys.argv[3] == "--update" else None
    os.makedirs(out, exist_ok=True)
    vals, unit, nrounds = load(raw)
    if not vals:
        sys.exit(f"no results in {raw}")
    rs = rows(vals, unit)
    g = goals(vals)
    md = table(rs, g, vals, nrounds)
    print(md)
    with open(os.path.join(out, "table.md"), "w") as f:
        f.write(md)
    with open(os.path.join(out, "bench.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["section", "figure", "unit", "oxe", "oxe_wire", "rxe", "floor",
                    "oxe_rxe", "wire_rxe", "oxe_floor", "spread_pct", "rounds"])
        for sec, fig, _, u, o, wi, x, fl in rs:
            w.writerow([sec, fig, u] + ["" if v is None else f"{v:.4g}" for v in
                       (o, wi, x, fl, ratio(o, x), ratio(wi, x), ratio(o, fl), spread(vals, fig))]
                       + [nrounds])
    with open(os.path.join(out, "bench.json"), "w") as f:
        json.dump({"rounds": nrounds, "raw": vals, "unit": unit,
                   "rows": [dict(zip(("section", "figure", "label", "unit") + COLS, r)) for r in rs],
                   "goals": [dict(zip(("goal", "measured", "target", "higher_is_better", "met"), x))
                             for x in g]}, f, indent=1)
    pngs = plots(out, vals, unit)
    if update:
        docs = os.path.join(update, "docs", "bench")
        os.makedirs(docs, exist_ok=True)
        for p in pngs:
            shutil.copy(p, docs)
        path = os.path.join(update, "BENCHMARKS.md")
        text = open(path).read()
        begin, end = "<!-- bench:begin -->", "<!-- bench:end -->"
        i, j = text.index(begin) + len(begin), text.index(end)
        open(path, "w").write(text[:i] + "\n" + md + text[j:])
        print(f"updated {path} and {docs}")


if __name__ == "__main__":
    main()
