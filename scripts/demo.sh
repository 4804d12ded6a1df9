#!/usr/bin/env bash
# Runs the demo: three built-in backends and Helios in front of them.
# Ctrl-C stops everything.
set -euo pipefail
bin=${1:-bin/helios}
cfg=${2:-configs/helios.yaml}
pids=()
cleanup() {
	trap - INT TERM EXIT
	kill -TERM "${pids[@]}" 2>/dev/null || true
	wait 2>/dev/null || true
}
trap cleanup INT TERM EXIT
# A self-signed certificate for the TLS listener on :8443, made once and
# renewed when it is more than 60 days old (it is valid for 90).
export HELIOS_DEMO_TLS_DIR="${HELIOS_DEMO_TLS_DIR:-$PWD/.cache/demo-tls}"
if [ -z "$(find "$HELIOS_DEMO_TLS_DIR/helios.pem" -mtime -60 2>/dev/null)" ]; then
	"$bin" cert selfsigned --out "$HELIOS_DEMO_TLS_DIR" --host localhost,127.0.0.1 --days 90 >/dev/null
fi
for i in 1 2 3; do
	"$bin" backend --listen "127.0.0.1:900$i" --name "backend-$i" >/dev/null &
	pids+=($!)
done
"$bin" serve --config "$cfg" &
pids+=($!)
sleep 0.5
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
Ctrl-C stops everything.

TXT
wait -n "${pids[@]}"
