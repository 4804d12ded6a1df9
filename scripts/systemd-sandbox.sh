#!/usr/bin/env bash
# Runs the README's systemd recipe in a throwaway systemd container and
# checks the unit there: start (READY=1), ports 80 and 443 (TLS) as the
# dynamic user, the admin token, reload with a renewed certificate,
# a broken config refused by systemctl reload (its first problem in
# systemctl status), watchdog pings, a SIGUSR2 upgrade under requests,
# socket activation. Needs root, debootstrap and Docker; the Debian root file
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
		debootstrap --variant=minbase --include=systemd,systemd-sysv,dbus,curl,ca-certificates,openssl,procps,iproute2,logrotate \
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
install -d /etc/helios && install -m 0644 deploy/systemd/helios.yaml /etc/helios/
install -m 0600 deploy/systemd/helios.env /etc/helios/helios.env
sed -i "s/^HELIOS_ADMIN_TOKEN=.*/HELIOS_ADMIN_TOKEN=$(openssl rand -hex 32)/" /etc/helios/helios.env   # the admin token
groupadd --system helios-tls && install -d -m 0750 -g helios-tls /etc/helios/tls
helios cert selfsigned --out /etc/helios/tls --host "$(hostname)"   # or copy your own pair
chgrp helios-tls /etc/helios/tls/* && chmod 0640 /etc/helios/tls/helios.key
install -m 0644 deploy/systemd/helios.service /etc/systemd/system/
systemctl daemon-reload && systemctl enable --now helios
systemctl reload helios       # re-read the config and the certificates
check() { echo "$1: $2"; [ "$2" = "$3" ] || { echo "  want $3"; journalctl -u helios --no-pager | tail -20; exit 1; }; }
check "started" "$(systemctl show helios -p ActiveState --value)" active
# Ports 80 and 443, as the dynamic user with only CAP_NET_BIND_SERVICE.
check "on 80" "$(curl -s localhost:80/ping)" "{\"ok\":true}"
check "on 443" "$(curl -s --cacert /etc/helios/tls/helios.pem --resolve "$(hostname):443:127.0.0.1" https://$(hostname)/ping)" "{\"ok\":true}"
check "security" "$(systemd-analyze security helios | tail -1 | grep -o "[0-9.]* OK")" "1.7 OK"
check "capabilities" "$(grep CapEff /proc/$(systemctl show helios -p MainPID --value)/status | cut -f2)" 0000000000000400
token=$(sed -n "s/^HELIOS_ADMIN_TOKEN=//p" /etc/helios/helios.env)
check "admin with the token" "$(curl -s -o /dev/null -w "%{http_code}" -H "Authorization: Bearer $token" localhost:9901/api/v1/upstreams)" 200
check "admin without it" "$(curl -s -o /dev/null -w "%{http_code}" localhost:9901/api/v1/upstreams)" 401
sleep 1.5   # lines wait up to a second in the log writer
check "access log" "$(grep -c "\"/ping\"" /var/log/helios/access.log)" 2

# A renewed certificate on reload, no restart.
# (curl trusts only the new self-signed certificate: the old one fails.)
helios cert selfsigned --out /etc/helios/tls --host "$(hostname)" >/dev/null
chgrp helios-tls /etc/helios/tls/* && chmod 0640 /etc/helios/tls/helios.key
systemctl reload helios
check "renewed certificate served" "$(curl -s --cacert /etc/helios/tls/helios.pem --resolve "$(hostname):443:127.0.0.1" https://$(hostname)/ping)" "{\"ok\":true}"
sleep 16
wd=$(systemctl show helios -p WatchdogTimestampMonotonic --value)
st=$(systemctl show helios -p ExecMainStartTimestampMonotonic --value)
check "watchdog pinged 15s after start" "$([ $((wd - st)) -gt 10000000 ] && echo yes)" yes

# A binary upgrade under 300 requests.
old=$(systemctl show helios -p MainPID --value)
(for i in $(seq 300); do curl -s -o /dev/null -w "%{http_code}\n" localhost:80/ping; done | sort | uniq -c > /tmp/codes) &
sleep 0.3
systemctl kill --kill-whom=main --signal=SIGUSR2 helios
wait
check "requests during the upgrade" "$(cat /tmp/codes | tr -s " ")" " 300 200"
new=$(systemctl show helios -p MainPID --value)
check "main pid moved" "$([ "$new" != "$old" ] && echo yes)" yes
check "still active" "$(systemctl show helios -p ActiveState --value)" active
systemctl reload helios
check "new process reloads" "$(systemctl show helios -p StatusText --value | cut -d" " -f1-2)" "serving on"

# A broken config: the validate in ExecReload= refuses it, systemctl status
# shows its first problem, and the running configuration keeps serving.
cp /etc/helios/helios.yaml /tmp/good.yaml
sed -i "s/interval: 2s/interval: 2x/" /etc/helios/helios.yaml
check "broken config reload" "$(systemctl reload helios 2>/dev/null && echo reloaded || echo refused)" refused
check "status names the problem" "$(systemctl show helios -p StatusText --value | grep -c "/etc/helios/helios.yaml:[0-9]*: upstreams\[0\].health_check.interval")" 1
check "still serving" "$(curl -s localhost:80/ping)" "{\"ok\":true}"
cp /tmp/good.yaml /etc/helios/helios.yaml
systemctl reload helios
check "fixed config reloads" "$(systemctl show helios -p StatusText --value | cut -d" " -f1-2)" "serving on"
# The start line says what is served where; the access log is the
# service user alone (UMask=0077), as the README says.
check "start line" "$(journalctl -u helios --no-pager | grep -c "Helios serving http://\[::\]:80, https://\[::\]:443")" 2
check "access log mode" "$(stat -c %a /var/log/helios/access.log)" 600

# Socket activation.
systemctl stop helios || true
install -m 0644 deploy/systemd/helios.socket /etc/systemd/system/
systemctl daemon-reload && systemctl enable --now helios.socket
check "activated" "$(curl -s localhost:80/ping)" "{\"ok\":true}"
echo "all checks passed"
'
