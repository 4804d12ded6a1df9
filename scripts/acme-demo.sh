#!/usr/bin/env bash
# Automatic HTTPS against a local Pebble (the ACME test server Let's Encrypt
# publishes, a Go tool of this module): Helios gets a certificate for
# "localhost" (through HTTP-01 or TLS-ALPN-01: both are offered), serves it, redirects http to https, and
# lists it with `helios cert list`. Everything listens on 127.0.0.1 and
# stops at the end (KEEP=1: keep running until Ctrl-C).
set -euo pipefail
bin=${1:-bin/helios}
work=$(mktemp -d)
pids=()
cleanup() {
	trap - INT TERM EXIT
	kill -TERM "${pids[@]}" 2>/dev/null || true
	wait 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup INT TERM EXIT

# Pebble's own HTTPS certificate (its directory is https only): a
# self-signed one, which is also the root Helios trusts for it (ca_root).
"$bin" cert selfsigned --out "$work" --name pebble --host localhost,127.0.0.1 >/dev/null
cat >"$work/pebble.json" <<JSON
{"pebble": {
  "listenAddress": "127.0.0.1:14000", "managementListenAddress": "127.0.0.1:15000",
  "certificate": "$work/pebble.pem", "privateKey": "$work/pebble.key",
  "httpPort": 5002, "tlsPort": 5001, "ocspResponderURL": "",
  "externalAccountBindingRequired": false, "keyAlgorithm": "ecdsa"
}}
JSON
pebble=$(go tool -n pebble)
PEBBLE_VA_NOSLEEP=1 PEBBLE_WFE_NONCEREJECT=0 "$pebble" -config "$work/pebble.json" >"$work/pebble.log" 2>&1 &
pids+=($!)

# Pebble validates HTTP-01 on port 5002 and TLS-ALPN-01 on 5001 (a real
# CA: 80 and 443), so Helios listens there.
cat >"$work/helios.yaml" <<YAML
listeners:
  - {name: http, address: "127.0.0.1:5002"}
  - name: https
    address: "127.0.0.1:5001"
    tls:
      acme:
        ca: https://127.0.0.1:14000/dir
        ca_root: pebble.pem
        email: demo@localhost
        storage: acme
        http_listener: http
routes:
  - {name: hello, match: {host: localhost}, respond: {body: "hello over HTTPS, with a certificate from Pebble\n"}}
admin: {address: "off"}
YAML
for _ in $(seq 50); do curl -sf --cacert "$work/pebble.pem" https://127.0.0.1:14000/dir >/dev/null && break; sleep 0.1; done
"$bin" serve --config "$work/helios.yaml" >"$work/helios.log" 2>&1 &
pids+=($!)

curl -sf --cacert "$work/pebble.pem" https://127.0.0.1:15000/roots/0 >"$work/root.pem"
for _ in $(seq 100); do
	curl -sf --cacert "$work/root.pem" https://localhost:5001/ >/dev/null 2>&1 && break
	sleep 0.1
done
echo "== https://localhost:5001/ with Pebble's root:"
curl -sS --cacert "$work/root.pem" https://localhost:5001/
echo "== http://localhost:5002/ (redirected):"
curl -sS -o /dev/null -w '%{http_code} -> %{redirect_url}\n' http://localhost:5002/
echo "== helios cert list:"
"$bin" cert list --config "$work/helios.yaml"
echo "== the ACME log lines:"
grep '"logger":"acme' "$work/helios.log" | grep -E 'certificate issued|served key authentication' || true
if [ "${KEEP:-}" = 1 ]; then
	echo "Running; Ctrl-C stops Pebble and Helios."
	wait
fi
