#!/usr/bin/env bash
# Runs the README's systemd recipe in a throwaway systemd container and
# checks the unit there: start (READY=1), port 443 as the dynamic user,
# reload, watchdog pings, a SIGUSR2 upgrade under requests, socket
# activation. Needs root, debootstrap and Docker; the Debian root file
# system (about 270 MB, from deb.debian.org) is kept in $ROOTFS between runs.
#
#   make build && sudo scripts/systemd-sandbox.sh
set -euo pipefail
cd "$(dirname "$0")/.."
ROOTFS=${ROOTFS:-/var/tmp/helios-systemd-rootfs}
IMAGE=helios-systemd-test:bookworm
NAME=helios-systemd-$$

[ -x bin/helios ] || { echo "bin/helios missing: run make build first" >&2; exit 1; }
if ! docker image inspect "$IMAGE" >/dev/null 2>&1; then
	if [ ! -x "$ROOTFS/lib/systemd/systemd" ]; then
		debootstrap --variant=minbase --include=systemd,systemd-sysv,dbus,curl,ca-certificates,procps,iproute2,logrotate \
			bookworm "$ROOTFS" http://deb.debian.org/debian
	fi
	tar -C "$ROOTFS" -c . | docker import -c 'CMD ["/lib/systemd/systemd"]' - "$IMAGE" >/dev/null
fi
# --privileged needs every capability, which a nested Docker may not
# grant; these are what systemd itself needs.
docker run -d --name "$NAME" --cgroupns=host -v /sys/fs/cgroup:/sys/fs/cgroup:rw --tmpfs /run --tmpfs /run/lock \
	--cap-add SYS_ADMIN --cap-add NET_ADMIN --cap-add SYS_PTRACE --cap-add DAC_READ_SEARCH --cap-add SYS_NICE \
	--cap-add MKNOD --cap-add AUDIT_CONTROL --cap-add SYS_TIME --cap-add LINUX_IMMUTABLE --cap-add IPC_LOCK \
	--security-opt seccomp=unconfined --security-opt apparmor=unconfined -e container=docker "$IMAGE" >/dev/null
trap 'docker rm -f "$NAME" >/dev/null' EXIT
sleep 3
docker exec "$NAME" mkdir -p /src
tar -c bin/helios configs deploy | docker exec -i "$NAME" tar -C /src -x
docker exec -w /src "$NAME" bash -euo pipefail -c '
# The README recipe (after make build on the host).
install -m 0755 bin/helios /usr/local/bin/helios
install -d /etc/helios && cp -r configs/helios.yaml configs/public /etc/helios/
install -m 0600 deploy/systemd/helios.env /etc/helios/helios.env
install -m 0644 deploy/systemd/helios.service /etc/systemd/system/
systemctl daemon-reload && systemctl enable --now helios
systemctl reload helios
check() { echo "$1: $2"; [ "$2" = "$3" ] || { echo "  want $3"; journalctl -u helios --no-pager | tail -20; exit 1; }; }
check "started" "$(systemctl show helios -p ActiveState --value)" active
check "ping" "$(curl -s localhost:8080/ping)" "{\"ok\":true}"
check "security" "$(systemd-analyze security helios | tail -1 | grep -o "[0-9.]* OK")" "1.7 OK"

# Port 443, as the service user with only CAP_NET_BIND_SERVICE.
sed -i "s/address: \"127.0.0.1:8080\"/address: \":443\"/" /etc/helios/helios.yaml
systemctl restart helios
check "on 443" "$(curl -s localhost:443/ping)" "{\"ok\":true}"
check "capabilities" "$(grep CapEff /proc/$(systemctl show helios -p MainPID --value)/status | cut -f2)" 0000000000000400
sleep 16
wd=$(systemctl show helios -p WatchdogTimestampMonotonic --value)
st=$(systemctl show helios -p ExecMainStartTimestampMonotonic --value)
check "watchdog pinged 15s after start" "$([ $((wd - st)) -gt 10000000 ] && echo yes)" yes

# A binary upgrade under 300 requests.
old=$(systemctl show helios -p MainPID --value)
(for i in $(seq 300); do curl -s -o /dev/null -w "%{http_code}\n" localhost:443/ping; done | sort | uniq -c > /tmp/codes) &
sleep 0.3
systemctl kill --kill-whom=main --signal=SIGUSR2 helios
wait
check "requests during the upgrade" "$(cat /tmp/codes | tr -s " ")" " 300 200"
new=$(systemctl show helios -p MainPID --value)
check "main pid moved" "$([ "$new" != "$old" ] && echo yes)" yes
check "still active" "$(systemctl show helios -p ActiveState --value)" active
systemctl reload helios
check "new process reloads" "$(systemctl show helios -p StatusText --value)" "serving on [::]:443"

# Socket activation.
systemctl stop helios || true
install -m 0644 deploy/systemd/helios.socket /etc/systemd/system/
systemctl daemon-reload && systemctl enable --now helios.socket
check "activated" "$(curl -s localhost:443/ping)" "{\"ok\":true}"
echo "all checks passed"
'
