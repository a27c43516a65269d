#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Compares rdma-core's pyverbs suite on rdma_rxe and on oxe (their verbose
unittest logs, scripts/pyverbs-compare.sh): one TAP line per test either
driver ran. A test rxe passes must pass on oxe; one oxe runs must pass, or
fail on rxe as well (a SKIP); KNOWN lists PATTERN=REASON for features oxe
does not have yet. Exits 1 on any "not ok".
    pyverbs_compare.py RXE_LOG OXE_LOG [KNOWN]
    pyverbs_compare.py --self-test
"""
import re
import sys


def outcomes(path):
    """unittest -v: 'test_x (tests.test_y.Class.test_x) ... ok', the verdict
    on the same line or, after a docstring line, on the next."""
    res, pending = {}, None
    try:
        lines = open(path, errors="replace").readlines()
    except OSError:
        return res
    for line in lines:
        m = re.match(r"^(test\w*) \(tests\.([\w.]+)\)", line)
        if m:
            pending = m.group(2)
        v = re.search(r"\.\.\. (ok|FAIL|ERROR|skipped|expected failure|unexpected success)", line)
        if v and pending:
            w = v.group(1)
            res[pending] = {"ok": "pass", "skipped": "skip"}.get(w, w.lower())
            pending = None
    return res


def compare(rxe, oxe, known):
    """The TAP lines and whether any is "not ok"."""
    lines, fail = [], False
    # One line for every test either driver ran (a skip is capability-based
    # and repeats run to run, a pass or failure on rxe need not: its
    # test_resize_cq races its own completions), so the count does not move.
    for t in sorted(t for t in set(rxe) | set(oxe) if {rxe.get(t), oxe.get(t)} - {"skip", None}):
        r, o = rxe.get(t, "absent"), oxe.get(t, "absent")
        if o == "pass":
            lines.append(f"ok - pyverbs: {t}" + ("" if r == "pass" else f" (rxe: {r})"))
            continue
        why = next((w for p, w in known if re.search(p, t)), None)
        if r == "pass" and why:
            lines.append(f"ok - pyverbs: {t} # SKIP not in oxe yet: {why} (oxe: {o})")
        elif r in ("fail", "error") and o in ("fail", "error", "skip"):
            lines.append(f"ok - pyverbs: {t} # SKIP rdma_rxe does not pass it either "
                         f"(rxe: {r}, oxe: {o})")
        else:
            lines.append(f"not ok - pyverbs: {t} (rxe: {r}, oxe: {o})")
            fail = True
    return lines, fail


def log(verdicts):
    """A unittest -v log of {name: verdict}, a docstring line before every
    other verdict as unittest writes them."""
    out = []
    for i, (name, v) in enumerate(verdicts.items()):
        head = f"{name.rsplit('.', 1)[1]} (tests.{name})"
        out += [f"{head} ... {v}"] if i % 2 else [head, f"A docstring ... {v}"]
    return "\n".join(out) + "\n"


def self_test():
    """rxe's racy test_resize_cq passing or failing gives the same lines;
    oxe failing what rxe passes, or what only oxe runs, is "not ok"."""
    import os
    import tempfile
    base = {"test_cq.CQTest.test_resize_cq": "ok", "test_mr.MRTest.test_reg": "ok",
            "test_mlx5.X.test_y": "skipped", "test_odp.O.test_implicit": "skipped"}
    oxe = dict(base, **{"test_odp.O.test_implicit": "ok"})
    cases = [  # rxe, oxe, lines, fail
        (base, oxe, 3, False),
        (dict(base, **{"test_cq.CQTest.test_resize_cq": "FAIL"}), oxe, 3, False),
        (base, dict(oxe, **{"test_mr.MRTest.test_reg": "FAIL"}), 3, True),
        (base, dict(oxe, **{"test_odp.O.test_implicit": "ERROR"}), 3, True),
        (base, dict(oxe, **{"test_cq.CQTest.test_resize_cq": "skipped"}), 3, True),
    ]
    with tempfile.TemporaryDirectory() as d:
        for n, (r, o, want_lines, want_fail) in enumerate(cases):
            paths = []
            for name, v in (("rxe", r), ("oxe", o)):
                paths.append(os.path.join(d, f"{name}-{n}.txt"))
                with open(paths[-1], "w") as f:
                    f.write(log(v))
            lines, fail = compare(outcomes(paths[0]), outcomes(paths[1]), [])
            ok = len(lines) == want_lines and fail == want_fail
            print(f"{'ok' if ok else 'not ok'} - pyverbs_compare: case {n}: "
                  f"{len(lines)} lines, {'a' if fail else 'no'} failure")
            if not ok:
                return 1
    return 0


def main(argv):
    if argv[1:] == ["--self-test"]:
        return self_test()
    rxe, oxe = outcomes(argv[1]), outcomes(argv[2])
    known = [l.split("=", 1) for l in (argv[3] if len(argv) > 3 else "").splitlines() if "=" in l]
    lines, fail = compare(rxe, oxe, known)
    print("\n".join(lines))
    for name, r in (("rxe", rxe), ("oxe", oxe)):
        c = {k: sum(1 for v in r.values() if v == k) for k in ("pass", "skip", "fail", "error")}
        print(f"# pyverbs on {name}: {len(r)} tests, {c['pass']} passed, {c['skip']} skipped, "
              f"{c['fail']} failed, {c['error']} errors")
    return 1 if fail or not rxe else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
