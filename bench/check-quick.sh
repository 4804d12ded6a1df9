#!/usr/bin/env bash
# Checks what `helios bench --quick --out DIR` wrote: a report whose headline
# has Helios and nginx req/s and probe p99 for proxy-ka c100 and c1000, says
# that one round names no winners, and results.json. A plumbing check for
# CI, not a speed threshold.
#   bench/check-quick.sh DIR
set -euo pipefail
dir=${1:?usage: bench/check-quick.sh DIR}
fail() { echo "check-quick: $*" >&2; exit 1; }

report=$dir/report.md
[ -s "$report" ] || fail "no report at $report"
[ -s "$dir/results.json" ] || fail "no results.json in $dir"
grep -q '"schema": "helios-bench/2"' "$dir/results.json" || fail "results.json has no helios-bench/2 schema"
for f in throughput.svg latency.svg latency-rate.svg; do
	head -c 5 "$dir/$f" | grep -q '<svg' || fail "$f is not an SVG"
done
headline=$(sed -n '/^## Headline/,/^## [^H]/p' "$report")
header=$(grep '^| scenario | case | req/s Helios | req/s nginx |' <<<"$headline") ||
	fail "the headline table has no Helios and nginx req/s columns"
grep -q '^\*\*One round, noise unknown:\*\*' "$report" || fail "a one-round report does not say the noise is unknown"
if grep -q '| [A-Za-z]* [+-][0-9.]*% |' "$report"; then
	fail "a one-round report names a winner"
fi
# column NAME: the field number of NAME in the headline, split on |.
column() { awk -F'|' -v name="$1" '{ for (i = 2; i < NF; i++) { f = $i; gsub(/^ +| +$/, "", f); if (f == name) { print i; exit } } }' <<<"$header"; }
for c in c100 c1000; do
	row=$(grep "^| proxy-ka | $c |" <<<"$headline") || fail "no headline row for proxy-ka $c"
	for name in "req/s Helios" "req/s nginx" "p99 ms Helios" "p99 ms nginx"; do
		i=$(column "$name")
		[ -n "$i" ] || fail "no column $name in: $header"
		v=$(awk -F'|' -v i="$i" '{ gsub(/[ ,]/, "", $i); print $i }' <<<"$row")
		[[ $v =~ ^[0-9]+(\.[0-9]+)?$ ]] && awk -v v="$v" 'BEGIN { exit !(v > 0) }' ||
			fail "proxy-ka $c: no $name (got '$v') in: $row"
	done
	echo "check-quick: proxy-ka $c: $row"
done
