#!/usr/bin/env bash
# Starts the compose stack from local images and waits until every container is healthy.
#
# The stack is the secure one (docker-compose.yml + docker-compose.secure.yml: API keys, HTTPS,
# mutual TLS, Redis over TLS with a password). On first run it makes what that needs when it is
# missing: the development PKI (deploy/secrets/make-dev-pki.sh) and an admin API key, whose line
# goes to deploy/secrets/api-keys and the key itself to deploy/secrets/admin-api-key (mode 600).
# VIGIL_INSECURE=1 starts the open stack instead (docker-compose.yml alone; every service warns).
# VIGIL_HA=1 adds the highly available store (docker-compose.ha.yml, and docker-compose.ha.secure.yml
# unless open): a primary, two replicas per domain and three sentinels, `replica` durability.
# Stop it with the same files: docker-compose -f deploy/docker-compose.yml -f
# deploy/docker-compose.ha.yml -p vigil down -v (or add --remove-orphans to a down of the first file).
#
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
port=${VIGIL_HTTP_PORT:-8080}
if docker compose version >/dev/null 2>&1; then compose=(docker compose); else compose=(docker-compose); fi
files=(-f docker-compose.yml)

if [ "${VIGIL_INSECURE:-}" = 1 ]; then
  echo "VIGIL_INSECURE=1: starting the OPEN stack (no API keys, no TLS); every service warns in its log"
  url=http://127.0.0.1:$port
else
  for f in ca.pem service.pem service-key.pem gateway.pem gateway-key.pem redis.pem redis-key.pem \
           redis-password redis.conf socket-token-secret api-keys; do
    if [ ! -e "secrets/$f" ]; then
      echo "deploy/secrets/$f is missing: making the development PKI (deploy/secrets/make-dev-pki.sh)"
      secrets/make-dev-pki.sh
      break
    fi
  done
  if [ ! -s secrets/admin-api-key ]; then
    err=$(mktemp)
    line=$(cd .. && go run ./gateway/cmd/apikey admin admin 2>"$err") || { cat "$err" >&2; rm -f "$err"; exit 1; }
    key=$(sed -n 's/^key for admin[^:]*: //p' "$err")
    rm -f "$err"
    [ -n "$key" ] || { echo "apikey printed no key" >&2; exit 1; }
    printf '%s\n' "$line" >> secrets/api-keys
    (umask 077 && printf '%s\n' "$key" > secrets/admin-api-key)
    echo "made an admin API key: deploy/secrets/admin-api-key (its hash is in deploy/secrets/api-keys)"
  fi
  files+=(-f docker-compose.secure.yml)
  url=https://127.0.0.1:$port
fi

if [ "${VIGIL_HA:-}" = 1 ]; then
  files+=(-f docker-compose.ha.yml)
  if [ "${VIGIL_INSECURE:-}" != 1 ]; then
    # Certificates made before the HA store existed do not name its replicas and sentinels.
    if ! openssl x509 -in secrets/redis.pem -noout -ext subjectAltName 2>/dev/null | grep -q 'DNS:sentinel-3'; then
      echo "deploy/secrets/redis.pem does not name the HA nodes and sentinels: making the development PKI again"
      secrets/make-dev-pki.sh
    fi
    # Every node may become a replica (masterauth); the sentinels log in to every primary.
    pass=$(cat secrets/redis-password)
    printf 'requirepass %s\nmasterauth %s\n' "$pass" "$pass" > secrets/redis-ha.conf
    : > secrets/sentinel-auth.conf
    for d in reservations locks chat lobby room; do
      printf 'sentinel auth-pass vigil-%s %s\n' "$d" "$pass" >> secrets/sentinel-auth.conf
    done
    chmod 644 secrets/redis-ha.conf secrets/sentinel-auth.conf # read by the containers' own user
    files+=(-f docker-compose.ha.secure.yml)
  fi
  echo "VIGIL_HA=1: every domain's store is a primary, two replicas and three sentinels (durability ${VIGIL_REDIS_DURABILITY:-replica})"
fi
"${compose[@]}" "${files[@]}" -p "$project" up -d

# docker-compose v1 has no --wait: poll every container's health, for up to VIGIL_COMPOSE_WAIT
# seconds (default 120).
deadline=$((SECONDS + ${VIGIL_COMPOSE_WAIT:-120}))
while :; do
  ids=$("${compose[@]}" "${files[@]}" -p "$project" ps -q)
  states=$(docker inspect -f '{{.Name}} {{if .State.Health}}{{.State.Health.Status}}{{else}}{{.State.Status}}{{end}}' $ids)
  if ! grep -qv ' healthy$' <<<"$states"; then
    echo "$states" | sed 's|^/||'
    if [ "${VIGIL_INSECURE:-}" = 1 ]; then
      echo "vigil is up (OPEN): $url/healthz"
    else
      echo "vigil is up (API keys, HTTPS): $url/healthz"
      echo "  admin API key: deploy/secrets/admin-api-key    CA: deploy/secrets/ca.pem"
      echo "  curl --cacert deploy/secrets/ca.pem -H \"Authorization: Bearer \$(cat deploy/secrets/admin-api-key)\" $url/lobby/rooms"
    fi
    exit 0
  fi
  if [ $SECONDS -ge $deadline ]; then
    echo "not healthy after $((${VIGIL_COMPOSE_WAIT:-120}))s:" >&2
    echo "$states" >&2
    "${compose[@]}" "${files[@]}" -p "$project" logs --tail 30 >&2
    exit 1
  fi
  sleep 1
done
