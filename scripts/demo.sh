#!/usr/bin/env bash
# Runs the demo: three built-in backends and Helios in front of them.
#
# A backend may die, or be killed to see what Helios does (README, "When a
# backend dies"): the demo goes on. It stops on Ctrl-C, SIGINT or SIGTERM
# (Helios gets one SIGTERM and drains, then the backends stop, and the
# script exits 0; a second Ctrl-C cuts the drain short), or when Helios
# exits by itself, saying so.
set -euo pipefail
bin=${1:-bin/helios}
cfg=${2:-configs/helios.yaml}

# configs/helios.yaml reads the certificate from here, by default
# .cache/demo-tls at the top of the repository.
export HELIOS_DEMO_TLS_DIR="${HELIOS_DEMO_TLS_DIR:-$PWD/.cache/demo-tls}"
"$(dirname "$0")/demo-tls.sh" "$bin" "$HELIOS_DEMO_TLS_DIR"

backends=()
helios=
signals=0
stopped=
# stop drains Helios, then stops the backends; it runs once.
stop() {
	[ -z "$stopped" ] || return 0
	stopped=1
	if [ -n "$helios" ] && kill -0 "$helios" 2>/dev/null; then
		kill -TERM "$helios" 2>/dev/null || true
		while kill -0 "$helios" 2>/dev/null; do
			wait "$helios" 2>/dev/null || true
		done
	fi
	if [ "${#backends[@]}" -gt 0 ]; then
		kill -TERM "${backends[@]}" 2>/dev/null || true
		wait "${backends[@]}" 2>/dev/null || true
	fi
}
on_signal() {
	signals=$((signals + 1))
	if [ "$signals" -gt 1 ]; then
		# A second Ctrl-C: Helios exits at once (its second signal).
		[ -z "$helios" ] || kill -TERM "$helios" 2>/dev/null || true
		return
	fi
	stop
	exit 0
}
trap on_signal INT TERM
trap stop EXIT

# Each process in a process group of its own (job control), so that the
# terminal's Ctrl-C reaches this script alone: Helios then gets exactly one
# signal from it, and a backend that dies is not this script's business.
set -m
for i in 1 2 3; do
	"$bin" backend --listen "127.0.0.1:900$i" --name "backend-$i" >/dev/null &
	backends+=($!)
done
"$bin" serve --config "$cfg" &
helios=$!
set +m

# Ready: listening, and the first round of health checks done.
for _ in $(seq 100); do
	"$bin" healthcheck >/dev/null 2>&1 && break
	kill -0 "$helios" 2>/dev/null || break
	sleep 0.1
done
if kill -0 "$helios" 2>/dev/null; then
	cat <<TXT

Helios is running on http://127.0.0.1:8080, https://localhost:8443 (HTTP/2 and HTTP/1.1) and
http://127.0.0.1:8081 (h2c: HTTP/2 with prior knowledge, and HTTP/1.1) in front of backend-1..3 (127.0.0.1:9001-9003).
Try:
  curl -i http://127.0.0.1:8080/                # round-robin: watch X-Backend change
  curl -i http://127.0.0.1:8080/ping            # a fixed answer (respond route)
  curl -i http://127.0.0.1:8080/static/         # a file (static route)
  curl    http://127.0.0.1:8080/echo -d hello   # what the backend received
  curl    http://127.0.0.1:9901/metrics         # Prometheus metrics (admin listener)
  curl --cacert $HELIOS_DEMO_TLS_DIR/helios.pem https://localhost:8443/ping   # HTTPS (self-signed)
  curl --cacert $HELIOS_DEMO_TLS_DIR/helios.pem --http2 -i https://localhost:8443/   # HTTP/2 over TLS
  curl --http2-prior-knowledge -i http://127.0.0.1:8081/                     # h2c
Kill a backend (kill ${backends[1]} stops backend-2) and Helios routes around it.
Ctrl-C stops everything.

TXT
fi

status=0
wait "$helios" || status=$?
helios=
echo "demo: helios exited with status $status (its log above says why); stopping the backends" >&2
stop
exit "$status"
