#!/bin/sh
# Makes a private CA and certificates for a Vigil deployment into deploy/secrets/ (or $1):
# ca.pem/ca-key.pem, service.pem/service-key.pem (server+client auth, for every service and the
# gateway's backend links), gateway.pem/gateway-key.pem (the public HTTPS certificate; replace it
# with one from a public CA for real traffic), redis.pem/redis-key.pem, a Redis password and a
# socket-token secret. Needs openssl. Re-running replaces everything.
set -eu
out=${1:-$(dirname "$0")}
cd "$out"
days=${VIGIL_CERT_DAYS:-365}
# The highly available store (docker-compose.ha.yml): each domain's replicas and the sentinels.
ha=""
for d in reservations locks chat lobby room; do ha="${ha}DNS:redis-$d-2,DNS:redis-$d-3,"; done
ha="${ha}DNS:sentinel-1,DNS:sentinel-2,DNS:sentinel-3"
names=${VIGIL_CERT_NAMES:-"DNS:localhost,IP:127.0.0.1,DNS:gateway,DNS:reservations,DNS:locks,DNS:chat,DNS:lobby,DNS:room,DNS:redis-reservations,DNS:redis-locks,DNS:redis-chat,DNS:redis-lobby,DNS:redis-room,$ha"}

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days "$days" \
  -subj "/CN=vigil deployment CA" -keyout ca-key.pem -out ca.pem 2>/dev/null

leaf() { # name usage
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=vigil $1" \
    -keyout "$1-key.pem" -out "$1.csr" 2>/dev/null
  printf 'subjectAltName=%s\nextendedKeyUsage=%s\nkeyUsage=digitalSignature\n' "$names" "$2" > "$1.ext"
  openssl x509 -req -in "$1.csr" -CA ca.pem -CAkey ca-key.pem -CAcreateserial -days "$days" \
    -extfile "$1.ext" -out "$1.pem" 2>/dev/null
  rm -f "$1.csr" "$1.ext"
}
leaf service serverAuth,clientAuth
leaf gateway serverAuth
leaf redis serverAuth,clientAuth
rm -f ca.srl
openssl rand -hex 24 > redis-password
printf "requirepass %s\n" "$(cat redis-password)" > redis.conf
chmod 644 redis.conf
openssl rand -out socket-token-secret 48
touch api-keys
# The containers run as their own users and mount this directory read-only: everything but
# the CA's key must be readable there: restrict who can read the directory on the host.
chmod 644 ./*.pem redis-password redis.conf socket-token-secret api-keys
chmod 600 ca-key.pem
echo "made a CA and certificates in $out; add keys with: go run ./gateway/cmd/apikey <name> <scopes> >> $out/api-keys"
