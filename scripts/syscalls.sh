#!/usr/bin/env bash
# System calls per request, Helios beside nginx: each proxy serves the same
# requests (wrk, keep-alive, 100 connections) while strace counts the system
# calls of its processes; the table gives calls per request by name. Counts,
# not times: strace slows both proxies alike and the counts do not depend on
# how busy the machine is. Everything runs on loopback and stops by itself.
#
#   scripts/syscalls.sh [bin/helios] [requests-seconds]
#
# Needs strace, wrk and nginx (make bench-deps installs wrk and nginx;
# apt-get install strace). Prints a Markdown table.
set -euo pipefail

HELIOS=${1:-bin/helios}
SECONDS_RUN=${2:-3}
work=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT

for tool in strace wrk nginx; do
	command -v "$tool" >/dev/null || { echo "syscalls.sh: $tool is not installed" >&2; exit 2; }
done

port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }
B1=$(port); B2=$(port); B3=$(port); HP=$(port); NP=$(port)
for p in $B1 $B2 $B3; do
	"$HELIOS" backend --listen "127.0.0.1:$p" --name "b$p" >/dev/null 2>&1 &
	pids+=($!)
done

mkdir -p "$work/static" "$work/nginx"
head -c 10240 /dev/urandom >"$work/static/10k.bin"

cat >"$work/helios.yaml" <<EOF
listeners:
  - {name: web, address: "127.0.0.1:$HP", sockets: 1}
routes:
  - {name: respond, match: {path: /respond}, respond: {status: 200, body: '{"ok":true}', headers: {Content-Type: application/json}}}
  - {name: static, match: {path_prefix: /static/}, static: {root: "$work/static", strip_prefix: /static}}
  - {name: app, match: {path_prefix: /}, upstream: app, request_buffering: "off"}
upstreams:
  - name: app
    backends: [{address: "127.0.0.1:$B1"}, {address: "127.0.0.1:$B2"}, {address: "127.0.0.1:$B3"}]
    transport: {max_idle_per_backend: 1024}
admin: {address: "off"}
logging: {level: warn, access_log: "off"}
EOF
GOMAXPROCS=1 "$HELIOS" serve --config "$work/helios.yaml" >"$work/helios.log" 2>&1 &
hpid=$!
pids+=($hpid)

cat >"$work/nginx/nginx.conf" <<EOF
daemon off;
master_process on;
worker_processes 1;
pid $work/nginx/nginx.pid;
error_log $work/nginx/error.log warn;
events { worker_connections 4096; }
http {
    access_log off;
    client_body_temp_path $work/nginx/body; proxy_temp_path $work/nginx/proxy;
    fastcgi_temp_path $work/nginx/fcgi; uwsgi_temp_path $work/nginx/uwsgi; scgi_temp_path $work/nginx/scgi;
    sendfile on; tcp_nopush on; tcp_nodelay on;
    open_file_cache max=1000 inactive=60s;
    keepalive_requests 1000000;
    proxy_request_buffering off;
    upstream app {
        server 127.0.0.1:$B1; server 127.0.0.1:$B2; server 127.0.0.1:$B3;
        keepalive 1024;
        keepalive_requests 1000000;
    }
    server {
        listen 127.0.0.1:$NP reuseport backlog=4096;
        location = /respond { default_type application/json; return 200 '{"ok":true}'; }
        location /static/ { alias $work/static/; }
        location / { proxy_pass http://app; proxy_http_version 1.1; proxy_set_header Connection ""; }
    }
}
EOF
nginx -c "$work/nginx/nginx.conf" -p "$work/nginx" >/dev/null 2>&1 &
pids+=($!)

wait_port() {
	for _ in $(seq 100); do
		if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return 0; fi
		sleep 0.05
	done
	echo "syscalls.sh: nothing listens on $1" >&2
	exit 1
}
wait_port "$HP"
wait_port "$NP"
sleep 0.3
nginx_worker() { pgrep -f "nginx: worker process" | head -1; }

# count PROXY PORT PATH: strace the proxy's process(es) while wrk runs;
# prints "requests total-calls" then "name calls" lines.
count() {
	local pid=$1 port=$2 path=$3 out=$work/strace.$RANDOM
	# Warm the pools first.
	wrk -t1 -c100 -d1s "http://127.0.0.1:$port$path" >/dev/null 2>&1
	strace -c -f -o "$out" -p "$pid" 2>/dev/null &
	local spid=$!
	sleep 0.5
	local reqs
	reqs=$(wrk -t1 -c100 -d"${SECONDS_RUN}s" "http://127.0.0.1:$port$path" | awk '/requests in/ {print $1}')
	kill -INT "$spid"
	wait "$spid" 2>/dev/null || true
	echo "$reqs"
	awk 'NF>=5 && $1 ~ /^[0-9.]+$/ {print $NF, $4}' "$out"
}

report() {
	local name=$1 path=$2
	local h n
	h=$(count "$hpid" "$HP" "$path")
	n=$(count "$(nginx_worker)" "$NP" "$path")
	python3 - "$name" <<PY
import sys
def parse(s):
    lines = s.strip().splitlines()
    reqs = int(lines[0])
    calls = {}
    for l in lines[1:]:
        k, v = l.split()
        calls[k] = calls.get(k, 0) + int(v)
    return reqs, calls
h = parse("""$h""")
n = parse("""$n""")
name = sys.argv[1]
hr, hc = h; nr, nc = n
ht = sum(v for k, v in hc.items() if k != "total")
nt = sum(v for k, v in nc.items() if k != "total")
print(f"| {name} | {ht/hr:.2f} | {nt/nr:.2f} | {ht/hr/(nt/nr):.2f} |")
top = sorted(set(hc) | set(nc), key=lambda k: -(hc.get(k, 0)/hr + nc.get(k, 0)/nr))
for k in top[:8]:
    if k == "total":
        continue
    print(f"|   {k} | {hc.get(k, 0)/hr:.2f} | {nc.get(k, 0)/nr:.2f} | |")
PY
}

echo "| scenario / system call | Helios calls per request | nginx calls per request | ratio |"
echo "|---|---:|---:|---:|"
report "proxy keep-alive (GET /)" /
report "fixed answer (/respond)" /respond
report "static 10 KiB (/static/10k.bin)" /static/10k.bin
