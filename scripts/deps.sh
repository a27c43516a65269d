#!/usr/bin/env bash
# Prints the kernel crate's module dependencies (`crate::` paths each file
# names, and a parent's use of its children) and fails if the folders and
# files they join form a cycle: the layers must point one way,
# ffi/ -> objects -> transport -> ib/ and shims -> common/.
#   scripts/deps.sh           the edges, then "no cycle" or the cycle
set -euo pipefail
cd "$(dirname "$0")/.."
python3 - <<'PY'
import os, re, sys
root = "rust"
mods = {}
for dirpath, _, files in os.walk(root):
    if "common" in dirpath.split(os.sep) or "target" in dirpath:
        continue
    for f in files:
        if not f.endswith(".rs") or f.startswith("bindings"):
            continue
        p = os.path.join(dirpath, f)
        rel = os.path.relpath(p, root)[:-3].replace(os.sep, "::")
        rel = re.sub(r"(::)?mod$", "", rel) or "oxe"
        if rel == "oxe":
            continue
        mods[rel] = open(p).read()
names = set(mods)
edges = {}
for m, src in mods.items():
    deps = set()
    for path in re.findall(r"crate::([a-z_]+(?:::[a-z_]+)?)", src):
        # The longest module name the path starts with.
        cand = path if path in names else path.split("::")[0]
        if cand in names and cand != m:
            deps.add(cand)
    # A parent's `mod child;` is no dependency; a child's use of its parent
    # is, and so is a `use super::...` of the parent.
    if "::" in m and re.search(r"^use super::", src, re.M):
        deps.add(m.rsplit("::", 1)[0])
    # A parent naming a child (`flight::Pending`) depends on it.
    for c in names:
        if c.startswith(m + "::") and "::" not in c[len(m) + 2:]:
            if re.search(r"\b" + c[len(m) + 2:] + r"::", src):
                deps.add(c)
    edges[m] = sorted(deps)
for m in sorted(edges):
    print(f"{m}: {' '.join(edges[m])}")
# A folder (`qp/`, `mr/`, `ffi/`, `ib/`) is one unit: its files may use
# each other; between units the edges must not form a cycle.
unit = lambda m: m.split("::")[0]
units = {}
for m, ds in edges.items():
    units.setdefault(unit(m), set()).update(unit(d) for d in ds if unit(d) != unit(m))
edges = {u: sorted(ds) for u, ds in units.items()}
state, stack = {}, []
def visit(m):
    state[m] = 1
    stack.append(m)
    for d in edges.get(m, []):
        if state.get(d) == 1:
            print("cycle: " + " -> ".join(stack[stack.index(d):] + [d]))
            sys.exit(1)
        if d not in state:
            visit(d)
    stack.pop()
    state[m] = 2
for m in sorted(edges):
    if m not in state:
        visit(m)
print("no cycle")
PY
