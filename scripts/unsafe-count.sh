#!/usr/bin/env bash
# Counts `unsafe` (blocks, fns, impls) per Rust file of the kernel crate, for
# the README's layout table: where the unsafe code lives, and how much.
#   scripts/unsafe-count.sh     a Markdown table, most first
set -euo pipefail
cd "$(dirname "$0")/.."
total_u=0 total_l=0
rows=$(for f in $(git ls-files 'rust/*.rs' 'rust/**/*.rs' | grep -v '^rust/common/'); do
	u=$(grep -v '^\s*//' "$f" | grep -ow unsafe | wc -l)
	l=$(wc -l <"$f")
	echo "$u $l $f"
done | sort -k1,1nr -k3)
echo "| file | unsafe | lines | per 100 lines |"
echo "|---|---|---|---|"
while read -r u l f; do
	total_u=$((total_u + u)) total_l=$((total_l + l))
	printf '| `%s` | %d | %d | %d.%d |\n' "$f" "$u" "$l" $((u * 100 / l)) $((u * 1000 / l % 10))
done <<<"$rows"
printf '| all | %d | %d | %d.%d |\n' "$total_u" "$total_l" $((total_u * 100 / total_l)) $((total_u * 1000 / total_l % 10))
