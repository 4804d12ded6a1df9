#!/usr/bin/env bash
# Checks what `helios bench --quick --out DIR` wrote: a report whose headline
# has Helios and nginx req/s for proxy-ka c100 and c1000, and results.json.
# A plumbing check for CI, not a speed threshold.
#   bench/check-quick.sh DIR
set -euo pipefail
dir=${1:?usage: bench/check-quick.sh DIR}
fail() { echo "check-quick: $*" >&2; exit 1; }

report=$dir/report.md
[ -s "$report" ] || fail "no report at $report"
[ -s "$dir/results.json" ] || fail "no results.json in $dir"
grep -q '"schema": "helios-bench/1"' "$dir/results.json" || fail "results.json has no helios-bench/1 schema"
for f in throughput.svg latency.svg; do
	head -c 5 "$dir/$f" | grep -q '<svg' || fail "$f is not an SVG"
done
grep -q '^| scenario | case | req/s Helios | req/s nginx |' "$report" ||
	fail "the headline table has no Helios and nginx req/s columns"
for c in c100 c1000; do
	row=$(grep "^| proxy-ka | $c |" "$report") || fail "no headline row for proxy-ka $c"
	# | proxy-ka | c100 | HELIOS | NGINX | ...: fields 4 and 5 once split on |.
	for i in 4 5; do
		v=$(awk -F'|' -v i=$i '{ gsub(/[ ,]/, "", $i); print $i }' <<<"$row")
		[[ $v =~ ^[0-9]+$ && $v -gt 0 ]] || fail "proxy-ka $c: no req/s in column $((i - 3)) of: $row"
	done
	echo "check-quick: proxy-ka $c: $row"
done
