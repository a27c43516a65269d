#!/usr/bin/env bash
# Prints the kernel crate's module dependencies (`crate::` paths each file
# names) and fails if they form a cycle: the layers must point one way,
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
    edges[m] = sorted(deps)
for m in sorted(edges):
    print(f"{m}: {' '.join(edges[m])}")
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
