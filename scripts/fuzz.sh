#!/usr/bin/env bash
# Runs every native Go fuzz target (a func FuzzXxx in a _test.go file) in
# turn, for FUZZTIME each, on top of its seed corpus and its regression
# inputs in testdata/fuzz/. The targets are found, not listed, so a new one
# is never left out. A failing input is written to the package's
# testdata/fuzz/FuzzXxx/; the script stops there with go test's status.
#
#   scripts/fuzz.sh [packages]     (default ./...)
#   FUZZTIME=10s                   time per target (go test -fuzztime)
#   FUZZMINIMIZETIME=10s           time to shrink a failing input; go test
#                                  spends it on each new interesting input too
#   FUZZFLAGS=-parallel=1          more go test flags (one worker per CPU
#                                  by default)
set -euo pipefail
GO=${GO:-go}
FUZZTIME=${FUZZTIME:-10s}
FUZZMINIMIZETIME=${FUZZMINIMIZETIME:-10s}
read -r -a flags <<<"${FUZZFLAGS:-}"
[ $# -gt 0 ] || set -- ./...

# deadline_only says whether a failed run's log in $1 is Go 1.26's fuzz
# coordinator race and nothing else: when -fuzztime runs out while a worker is
# between inputs, go test can fail the target with "context deadline exceeded"
# and no input (fixed in Go 1.27). A real finding panics, or fails with lines
# of its own under "--- FAIL" (a check's message, "Failing input written to"),
# so the deadline must be the only such line.
deadline_only() {
	grep -qx '    context deadline exceeded' "$1" &&
		[ "$(grep -c '^    ' "$1")" -eq 1 ] &&
		! grep -q 'panic:' "$1"
}

out=$(mktemp)
trap 'rm -f "$out"' EXIT
summary=()
start=$SECONDS
while read -r pkg dir files; do
	[ -n "$files" ] || continue
	# shellcheck disable=SC2086 # files is a list of names
	(cd "$dir" && grep -q '^func Fuzz' $files) || continue
	for target in $("$GO" test -list '^Fuzz' "$pkg" | grep '^Fuzz'); do
		echo "--- $target ($pkg, $FUZZTIME)"
		t0=$SECONDS
		tries=0
		until "$GO" test -run='^$' -fuzz="^$target\$" -fuzztime="$FUZZTIME" \
			-fuzzminimizetime="$FUZZMINIMIZETIME" "${flags[@]}" "$pkg" >"$out" 2>&1; do
			cat "$out"
			tries=$((tries + 1))
			if [ "$tries" -eq 1 ] && deadline_only "$out"; then
				echo "--- $target: the fuzzer stopped on its own deadline with no failing input (a Go 1.26 coordinator race); once more"
				continue
			fi
			exit 1
		done
		# The last progress line says how far the fuzzer got.
		last=$(grep '^fuzz: elapsed' "$out" | tail -n 1 || true)
		summary+=("$(printf '%-20s %-45s %4ss  %s' "$target" "$pkg" $((SECONDS - t0)) "${last#fuzz: }")")
	done
done < <("$GO" list -f '{{.ImportPath}} {{.Dir}} {{join .TestGoFiles " "}} {{join .XTestGoFiles " "}}' "$@")

[ ${#summary[@]} -gt 0 ] || { echo "fuzz: no Fuzz targets in $*" >&2; exit 1; }
echo
echo "fuzz: ${#summary[@]} targets passed in $((SECONDS - start))s"
printf '%s\n' "${summary[@]}"
