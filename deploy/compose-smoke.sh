#!/usr/bin/env bash
# Checks the running compose stack end to end through its gateway, then SIGKILLs every domain's
# Redis, starts them again on their AOF, and checks that what was acknowledged is still there.
#   deploy/compose-up.sh && deploy/compose-smoke.sh
#
# On the highly available stack (VIGIL_HA=1 compose-up.sh: it finds the sentinels) it SIGKILLs
# each domain's current primary instead, one domain at a time, leaves it down until the
# sentinels have promoted a replica and starts it again; then it checks what was acknowledged
# through the new primaries and waits until every killed node has come back as a replica.
#
# It finds out how the stack runs: the secure stack (the default of compose-up.sh) is reached
# over HTTPS with deploy/secrets/ca.pem and the admin key in deploy/secrets/admin-api-key (or
# VIGIL_API_KEY); the open one (VIGIL_INSECURE=1) over plain HTTP.
#
# After the SIGKILLs it tells two failures apart:
#   unavailable  a domain still answers 503 (its service not ready again) when the deadline
#                (VIGIL_SMOKE_DEADLINE seconds, default 90) passes: slow, not a loss;
#   lost         a domain answers, and what was acknowledged is not there.
set -euo pipefail
cd "$(dirname "$0")"
port=${VIGIL_HTTP_PORT:-8080}
project=${VIGIL_COMPOSE_PROJECT:-vigil}
deadline_s=${VIGIL_SMOKE_DEADLINE:-90}
if docker compose version >/dev/null 2>&1; then compose=(docker compose); else compose=(docker-compose); fi
dc() { "${compose[@]}" -f docker-compose.yml -p "$project" "$@"; }

gateway=$(dc ps -q gateway)
if [ -z "$gateway" ]; then echo "no gateway container in compose project $project: run make compose-up first" >&2; exit 1; fi
curl_opts=(-sS --max-time 10)
if docker inspect -f '{{range .Config.Env}}{{println .}}{{end}}' "$gateway" | grep -q '^VIGIL_GATEWAY_TLS_CERT='; then
  base=https://127.0.0.1:$port
  key=${VIGIL_API_KEY:-$(cat secrets/admin-api-key 2>/dev/null || true)}
  if [ -z "$key" ]; then echo "the stack runs with API keys: set VIGIL_API_KEY or keep deploy/secrets/admin-api-key" >&2; exit 1; fi
  # Closed by default: a request without a key is refused before it reaches a service.
  anon=$(curl -sS --max-time 10 --cacert secrets/ca.pem -o /dev/null -w '%{http_code}' "$base/reservations/smoke-anonymous" 2>/dev/null) || anon=${anon:-000}
  if [ "$anon" != 401 ]; then echo "GET without an API key: HTTP $anon, want 401" >&2; exit 1; fi
  curl_opts+=(--cacert secrets/ca.pem -H "Authorization: Bearer $key")
  echo "secure stack: $base, CA deploy/secrets/ca.pem, admin key (without a key: 401)"
else
  base=http://127.0.0.1:$port
  echo "open stack: $base"
fi

# req METHOD PATH [BODY]: sets code (000 when no answer) and body.
body_file=$(mktemp)
trap 'rm -f "$body_file"' EXIT
req() {
  code=$(curl "${curl_opts[@]}" -o "$body_file" -w '%{http_code}' -X "$1" "$base$2" ${3:+-H 'Content-Type: application/json' -d "$3"} 2>/dev/null) || code=${code:-000}
  body=$(cat "$body_file")
}
# unavailable CODE: the answer of a stack that is not (yet) ready, worth retrying.
unavailable() { case $1 in 000 | 502 | 503 | 504) return 0 ;; *) return 1 ;; esac; }
field() { grep -o "\"$1\":\"\{0,1\}[^,\"}]*" | head -1 | sed 's/.*:"\{0,1\}//'; }

# write METHOD PATH BODY WANT: retries while the stack is unavailable, fails on another status;
# prints the body. Every write here is safe to repeat (same owner, same message id).
write() {
  local until=$((SECONDS + deadline_s))
  while :; do
    req "$1" "$2" "$3"
    [ "$code" = "$4" ] && { printf '%s' "$body"; return 0; }
    if ! unavailable "$code" || [ $SECONDS -ge $until ]; then
      echo "$1 $2: HTTP $code, want $4: $body" >&2
      exit 1
    fi
    sleep 0.5
  done
}

suffix=$(date +%s%N | tail -c 9)
res=smoke-$suffix
write POST "/reservations/$res" '{"ttlSeconds": 3600}' 201 >/dev/null
token=$(write POST "/locks/smoke-$suffix/acquire" '{"owner": "smoke", "ttlMs": 3600000}' 200 | field fencingToken)
msg=$(write POST "/chat/rooms/smoke-$suffix/messages" "{\"userId\": \"u1\", \"username\": \"smoke\", \"body\": \"survives\", \"postId\": \"smoke-$suffix\"}" 201 | field id)
room=$(write POST /lobby/rooms '{"name": "smoke", "video": {"title": "t", "durationMs": 60000}}' 201 | field code)
echo "acknowledged: reservation $res, lock token $token, chat message $msg, lobby room $room"

domains="reservations locks chat lobby room"
# cid SERVICE: the container of a service of the project, whichever compose files defined it.
cid() { docker ps -aq --filter "label=com.docker.compose.project=$project" --filter "label=com.docker.compose.service=$1"; }
sentinel=$(cid sentinel-1)
if [ -n "$sentinel" ]; then
  # scli ARGS: redis-cli against the sentinel, over TLS when the stack is secure.
  tls=()
  if docker inspect -f '{{range .Config.Cmd}}{{println .}}{{end}}' "$sentinel" | grep -q '^tls-port'; then
    tls=(--tls --cacert /secrets/ca.pem)
  fi
  scli() { docker exec "$sentinel" redis-cli "${tls[@]}" -p 26379 "$@"; }
  primary() { scli sentinel get-master-addr-by-name "vigil-$1" | head -1; }
  # One domain at a time, each killed primary started again once its domain has failed over
  # (it comes back as a replica): a sentinel resolves every node's name, and the lookups of
  # several dead names at once can stall it into TILT mode, where it fails nothing over.
  killed=()
  start=$SECONDS
  until_s=$((SECONDS + deadline_s))
  for d in $domains; do
    node=$(primary "$d")
    killed+=("$node")
    docker kill -s KILL "$(cid "$node")" >/dev/null
    t0=$SECONDS
    while [ "$(primary "$d")" = "$node" ]; do
      if [ $SECONDS -ge $until_s ]; then echo "unavailable: vigil-$d not failed over ${deadline_s}s after its primary's SIGKILL" >&2; exit 1; fi
      sleep 0.5
    done
    echo "HA stack: vigil-$d's primary $node SIGKILLed; $(primary "$d") promoted $((SECONDS - t0))s later"
    docker start "$(cid "$node")" >/dev/null
    until_s=$((SECONDS + deadline_s))
  done
else
  dc kill -s SIGKILL redis-reservations redis-locks redis-chat redis-lobby redis-room >/dev/null 2>&1
  dc start redis-reservations redis-locks redis-chat redis-lobby redis-room >/dev/null 2>&1
  start=$SECONDS
  until_s=$((SECONDS + deadline_s))
fi

# Every domain's readiness: /healthz is 200 once every service answers SERVING, which it does
# only while its Redis answers PING (pkg/server).
until req GET /healthz && [ "$code" = 200 ]; do
  if [ $SECONDS -ge $until_s ]; then
    echo "unavailable: /healthz still $code ${deadline_s}s after the Redis restart: $body" >&2
    exit 1
  fi
  sleep 0.5
done
echo "/healthz 200 (every domain SERVING) $((SECONDS - start))s after the Redis SIGKILLs"

# check NAME PATH TEST: reads PATH until it answers; TEST (a shell function of $body) says
# whether the acknowledged object is there. A 503 is retried until the deadline (the service
# may still be reconnecting even after /healthz said ready); a 404 or a wrong answer is a loss.
lost=0
slow=0
retried=0
check() {
  while :; do
    req GET "$2"
    if [ "$code" = 200 ] && "$3"; then return 0; fi
    if unavailable "$code"; then
      if [ $SECONDS -ge $until_s ]; then
        echo "unavailable: GET $2 still HTTP $code ${deadline_s}s after the Redis restart: $body" >&2
        slow=$((slow + 1))
        return 0
      fi
      retried=$((retried + 1))
      sleep 0.5
      continue
    fi
    echo "lost: $1: GET $2 = HTTP $code $body" >&2
    lost=$((lost + 1))
    return 0
  done
}
held() { [ "$(field status <<<"$body")" = held ]; }
locked() { [ "$(field fencingToken <<<"$body")" = "$token" ] && [ "$(field owner <<<"$body")" = smoke ]; }
kept() { grep -q '"survives"' <<<"$body"; }
listed() { [ -n "$body" ]; }
check "reservation $res" "/reservations/$res" held
check "lock smoke-$suffix (token $token)" "/locks/smoke-$suffix" locked
check "chat message $msg" "/chat/rooms/smoke-$suffix/messages" kept
check "lobby room $room" "/lobby/rooms/$room" listed

if [ -n "$sentinel" ]; then
  # The killed primaries come back as replicas of the new ones (the sentinels reconfigure them).
  # flags NODE: the sentinels' flags of NODE among its domain's replicas ("slave" once it is one).
  flags() {
    local d=${1#redis-}
    d=${d%-[23]}
    scli sentinel replicas "vigil-$d" 2>/dev/null | awk -v n="$1:6379" '$0 == n {found = 1; next} found && $0 == "flags" {getline; print; exit}'
  }
  for node in "${killed[@]}"; do
    until [ "$(flags "$node")" = slave ]; do
      if [ $SECONDS -ge $((until_s + deadline_s)) ]; then echo "$node did not come back as a replica: $(flags "$node")" >&2; exit 1; fi
      sleep 1
    done
  done
  echo "the killed primaries are replicas again: ${killed[*]}"
  echo "compose smoke (HA): at stake 4 acknowledged objects; every domain's primary SIGKILLed and failed over; lost $lost; unavailable at the deadline $slow (reads retried on 503: $retried)"
else
  echo "compose smoke: at stake 4 acknowledged objects; every Redis SIGKILLed and restarted; lost $lost; unavailable at the deadline $slow (reads retried on 503: $retried)"
fi
[ "$lost" = 0 ] && [ "$slow" = 0 ]
