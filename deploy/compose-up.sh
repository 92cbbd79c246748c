#!/usr/bin/env bash
# Starts the compose stack from local images and waits until every container is healthy.
# Uses `docker compose` when the Docker CLI has it, else `docker-compose`. The Redis image is
# vigil/redis:local when that image exists (built by deploy/redis/build-image.sh), else
# VIGIL_REDIS_IMAGE, else the official image.
#   deploy/compose-up.sh            # project "vigil", gateway on 127.0.0.1:${VIGIL_HTTP_PORT:-8080}
set -euo pipefail
cd "$(dirname "$0")"
if [ -z "${VIGIL_REDIS_IMAGE:-}" ] && docker image inspect vigil/redis:local >/dev/null 2>&1; then
  export VIGIL_REDIS_IMAGE=vigil/redis:local
fi
project=${VIGIL_COMPOSE_PROJECT:-vigil}
if docker compose version >/dev/null 2>&1; then compose=(docker compose); else compose=(docker-compose); fi
"${compose[@]}" -f docker-compose.yml -p "$project" up -d

# docker-compose v1 has no --wait: poll every container's health, for up to 120 seconds.
deadline=$((SECONDS + 120))
while :; do
  ids=$("${compose[@]}" -f docker-compose.yml -p "$project" ps -q)
  states=$(docker inspect -f '{{.Name}} {{if .State.Health}}{{.State.Health.Status}}{{else}}{{.State.Status}}{{end}}' $ids)
  if ! grep -qv ' healthy$' <<<"$states"; then
    echo "$states" | sed 's|^/||'
    echo "vigil is up: http://127.0.0.1:${VIGIL_HTTP_PORT:-8080}/healthz"
    exit 0
  fi
  if [ $SECONDS -ge $deadline ]; then
    echo "not healthy after 120s:" >&2
    echo "$states" >&2
    "${compose[@]}" -f docker-compose.yml -p "$project" logs --tail 30 >&2
    exit 1
  fi
  sleep 1
done
