#!/usr/bin/env bash
# Checks the running compose stack end to end through its gateway, then SIGKILLs every domain's
# Redis, starts them again on their AOF, and checks that what was acknowledged is still there.
#   deploy/compose-up.sh && deploy/compose-smoke.sh
set -euo pipefail
cd "$(dirname "$0")"
base=http://127.0.0.1:${VIGIL_HTTP_PORT:-8080}
project=${VIGIL_COMPOSE_PROJECT:-vigil}
if docker compose version >/dev/null 2>&1; then compose=(docker compose); else compose=(docker-compose); fi
dc() { "${compose[@]}" -f docker-compose.yml -p "$project" "$@"; }

# call METHOD PATH BODY WANT_STATUS: prints the response body, fails on another status.
call() {
  local out code
  out=$(curl -sS -o /dev/stdout -w '\n%{http_code}' -X "$1" "$base$2" ${3:+-d "$3"})
  code=${out##*$'\n'}
  out=${out%$'\n'*}
  if [ "$code" != "$4" ]; then
    echo "$1 $2: HTTP $code, want $4: $out" >&2
    exit 1
  fi
  printf '%s' "$out"
}
field() { grep -o "\"$1\":\"\{0,1\}[^,\"}]*" | head -1 | sed 's/.*:"\{0,1\}//'; }

suffix=$(date +%s%N | tail -c 9)
res=smoke-$suffix
call POST "/reservations/$res" '{"ttlSeconds": 3600}' 201 >/dev/null
token=$(call POST "/locks/smoke-$suffix/acquire" '{"owner": "smoke", "ttlMs": 3600000}' 200 | field fencingToken)
msg=$(call POST "/chat/rooms/smoke-$suffix/messages" '{"userId": "u1", "username": "smoke", "body": "survives"}' 201 | field id)
code=$(call POST /lobby/rooms '{"name": "smoke", "video": {"title": "t", "durationMs": 60000}}' 201 | field code)
echo "acknowledged: reservation $res, lock token $token, chat message $msg, lobby room $code"

dc kill -s SIGKILL redis-reservations redis-locks redis-chat redis-lobby redis-room >/dev/null 2>&1
dc start redis-reservations redis-locks redis-chat redis-lobby redis-room >/dev/null 2>&1
deadline=$((SECONDS + 60))
until curl -fsS "$base/healthz" >/dev/null 2>&1 && curl -fsS "$base/reservations/$res" >/dev/null 2>&1; do
  if [ $SECONDS -ge $deadline ]; then echo "stack not healthy 60s after the Redis restart" >&2; exit 1; fi
  sleep 0.2
done

lost=0
[ "$(call GET "/reservations/$res" '' 200 | field status)" = held ] || { echo "reservation lost" >&2; lost=$((lost + 1)); }
[ "$(call GET "/locks/smoke-$suffix" '' 200 | field fencingToken)" = "$token" ] || { echo "lock lost" >&2; lost=$((lost + 1)); }
call GET "/chat/rooms/smoke-$suffix/messages" '' 200 | grep -q '"survives"' || { echo "message lost" >&2; lost=$((lost + 1)); }
call GET "/lobby/rooms/$code" '' 200 >/dev/null || lost=$((lost + 1))
echo "compose smoke: at stake 4 acknowledged objects; every Redis SIGKILLed and restarted; lost $lost"
[ "$lost" = 0 ]
