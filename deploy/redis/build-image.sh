#!/usr/bin/env bash
# Builds a local Redis image from Debian's redis-server package, for machines that cannot pull
# images. The image is FROM scratch: the redis-server binary, the shared libraries it links, and
# a non-root user; redis-cli too when it is installed (redis-tools), for health checks and for
# creating clusters. Usage: deploy/redis/build-image.sh [tag]   (default vigil/redis:local)
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
bins=("$bin")
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
echo 'redis:x:999:999:redis:/data:/sbin/nologin' > "$ctx/root/etc/passwd"
echo 'redis:x:999:' > "$ctx/root/etc/group"
cat > "$ctx/Dockerfile" <<'DOCKER'
FROM scratch
COPY --chown=999:999 root/ /
ENV PATH=/usr/bin
USER 999:999
WORKDIR /data
EXPOSE 6379
ENTRYPOINT ["/usr/bin/redis-server"]
CMD ["--bind", "0.0.0.0", "--protected-mode", "no", "--appendonly", "yes", "--dir", "/data"]
DOCKER
# The legacy builder prints a deprecation notice on stderr: show stderr only on failure.
docker build -q -t "$tag" "$ctx" >/dev/null 2>"$ctx/err" || { cat "$ctx/err" >&2; exit 1; }
echo "built $tag"
