#!/usr/bin/env bash
# Builds a local Redis image from Debian's redis-server package, for machines that cannot pull
# images. The image is FROM scratch: the redis-server binary, the shared libraries it links, and
# a non-root user; redis-cli too when it is installed (redis-tools), for health checks and for
# creating clusters. Usage: deploy/redis/build-image.sh [tag]   (default vigil/redis:local)
#
# The entrypoint is redis-server, so the image takes redis-server's flags as the official one
# does (compose, testcontainers). It also runs Sentinel, which rewrites its config file with
# what it learns (the current primary, the other sentinels, the epoch) and so needs one it can
# write:
#   - /data/sentinel.conf is in the image, empty and owned by the redis user:
#       redis-server /data/sentinel.conf --sentinel --port 26379 --sentinel monitor m host 6379 2
#     works in a fresh container (a restarted one would find its monitor lines twice);
#   - /usr/bin/vigil-sentinel LINE... writes each argument as a line of /data/sentinel.conf on a
#     container's first start only, then runs Sentinel on it: a restarted sentinel keeps what it
#     learned. As the entrypoint:
#       entrypoint: [vigil-sentinel]
#       command: ["port 26379", "sentinel monitor m host 6379 2", ...]
#   - /usr/bin/vigil-redis LINE... does the same for a replicated node's /data/redis.conf and runs
#     redis-server on it: Sentinel persists the role it gives a node there (REPLICAOF, then
#     CONFIG REWRITE), so a restarted node keeps it. A --replicaof flag would win over the file
#     at every start, and a promoted replica that restarts would follow its old primary again.
#   The scripts run on Debian's dash, copied in as /bin/sh with the libraries it links.
set -euo pipefail
tag=${1:-vigil/redis:local}
bin=$(command -v redis-server || true)
if [ -z "$bin" ]; then
  echo "redis-server is not installed: apt-get install -y redis-server" >&2
  exit 1
fi
ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT
mkdir -p "$ctx/root/usr/bin" "$ctx/root/etc" "$ctx/root/data" "$ctx/root/tmp"
cp "$(readlink -f "$bin")" "$ctx/root/usr/bin/redis-server"
mkdir -p "$ctx/root/bin"
cp "$(readlink -f /bin/sh)" "$ctx/root/bin/sh"
bins=("$bin" /bin/sh)
if cli=$(command -v redis-cli); then
  cp "$(readlink -f "$cli")" "$ctx/root/usr/bin/redis-cli"
  bins+=("$cli")
fi
# Copy every shared library the binaries need, keeping the paths the dynamic loader expects.
for b in "${bins[@]}"; do ldd "$b"; done | sort -u | awk '/=>/ {print $3} !/=>/ && /^\t\// {print $1}' | while read -r lib; do
  [ -n "$lib" ] || continue
  mkdir -p "$ctx/root$(dirname "$lib")"
  cp -L "$lib" "$ctx/root$lib"
done
# Shell builtins only (printf, test, exec): the image has no coreutils.
cat > "$ctx/root/usr/bin/vigil-sentinel" <<'SENTINEL'
#!/bin/sh
# vigil-sentinel LINE...: on a container's first start, writes each argument as one line of
# /data/sentinel.conf (VIGIL_SENTINEL_CONF); then runs Sentinel on that file, which it rewrites
# with what it learns, so a restart keeps the current primary and the epoch.
set -e
conf=${VIGIL_SENTINEL_CONF:-/data/sentinel.conf}
if [ ! -s "$conf" ]; then
  : >"$conf"
  for line in "$@"; do printf '%s\n' "$line" >>"$conf"; done
fi
exec /usr/bin/redis-server "$conf" --sentinel
SENTINEL
cat > "$ctx/root/usr/bin/vigil-redis" <<'NODE'
#!/bin/sh
# vigil-redis LINE...: on a node's first start, writes each argument as one line of
# /data/redis.conf (VIGIL_REDIS_CONF); then runs redis-server on that file, where Sentinel
# persists the role it gives the node, so a restart keeps it.
set -e
conf=${VIGIL_REDIS_CONF:-/data/redis.conf}
if [ ! -s "$conf" ]; then
  : >"$conf"
  for line in "$@"; do printf '%s\n' "$line" >>"$conf"; done
fi
exec /usr/bin/redis-server "$conf"
NODE
chmod 755 "$ctx/root/usr/bin/vigil-sentinel" "$ctx/root/usr/bin/vigil-redis"
: > "$ctx/root/data/sentinel.conf"
echo 'redis:x:999:999:redis:/data:/sbin/nologin' > "$ctx/root/etc/passwd"
echo 'redis:x:999:' > "$ctx/root/etc/group"
cat > "$ctx/Dockerfile" <<'DOCKER'
FROM scratch
COPY --chown=999:999 root/ /
ENV PATH=/usr/bin
USER 999:999
WORKDIR /data
EXPOSE 6379 26379
ENTRYPOINT ["/usr/bin/redis-server"]
CMD ["--bind", "0.0.0.0", "--protected-mode", "no", "--appendonly", "yes", "--dir", "/data"]
DOCKER
# The legacy builder prints a deprecation notice on stderr: show stderr only on failure.
docker build -q -t "$tag" "$ctx" >/dev/null 2>"$ctx/err" || { cat "$ctx/err" >&2; exit 1; }
echo "built $tag"
