#!/usr/bin/env bash
# Makes the demo's self-signed certificate for localhost and 127.0.0.1,
# which configs/helios.yaml's TLS listener serves: DIR/helios.pem and
# DIR/helios.key, made when missing and again when more than 60 days old
# (it is valid for 90). make build and scripts/demo.sh run it.
#
#   scripts/demo-tls.sh [BIN [DIR]]     (defaults: bin/helios, .cache/demo-tls)
set -euo pipefail
bin=${1:-bin/helios}
dir=${2:-.cache/demo-tls}
if [ -z "$(find "$dir/helios.pem" -mtime -60 2>/dev/null)" ]; then
	"$bin" cert selfsigned --out "$dir" --host localhost,127.0.0.1 --days 90 >/dev/null
fi
