#!/bin/sh
# build-image.sh TAG: builds the Redis image of deploy/redis/Dockerfile
# from the host's redis-server (Debian package redis-server; make
# redis-deps installs it) and the shared libraries ldd says it loads.
set -eu
tag=${1:?usage: build-image.sh TAG}
here=$(cd "$(dirname "$0")" && pwd)
bin=$(command -v redis-server || true)
if [ -z "$bin" ]; then
	echo "redis-server not found: run make redis-deps (Debian package redis-server)" >&2
	exit 1
fi
bin=$(readlink -f "$bin")
ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT
mkdir -p "$ctx/rootfs/usr/bin" "$ctx/rootfs/data"
chmod 1777 "$ctx/rootfs/data"
cp "$bin" "$ctx/rootfs/usr/bin/redis-server"
# Every library, and the dynamic loader, at the path the binary names.
for lib in $(ldd "$bin" | awk '/=> \//{print $3} /^\t\//{print $1}'); do
	mkdir -p "$ctx/rootfs$(dirname "$lib")"
	cp -L "$lib" "$ctx/rootfs$lib"
done
cp "$here/Dockerfile" "$ctx/Dockerfile"
docker build -q -t "$tag" "$ctx"
