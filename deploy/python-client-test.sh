#!/usr/bin/env bash
# The Python client (pkg/api/python) against a running stack: builds `vigil dev`, starts it on
# free ports with its store in a temporary directory, installs the package into a temporary
# venv (nothing downloaded: Debian's grpcio, protobuf and setuptools), and runs its tests over
# gRPC: the generated stubs (create and read a reservation, acquire and release a lock, post and
# read chat messages) and the helpers (vigil.lockclient across threads, tasks and processes,
# renewal, a killed holder, every timeout; vigil.reservationclient, vigil.chatclient).
# Leaves the tree as it found it. VIGIL_PYTHON picks the interpreter (default Debian's, which has
# python3-grpcio; the python3 first on PATH may be another one).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
py=${VIGIL_PYTHON:-/usr/bin/python3}

step() { printf '==> %s\n' "$*"; }

# Debian packages: the interpreter's grpc and protobuf, venv and setuptools to install the
# package; installed when missing and possible (root with apt-get), else named.
if ! "$py" -c 'import grpc, google.protobuf, setuptools, venv, ensurepip' 2>/dev/null; then
  pkgs="python3 python3-grpcio python3-protobuf python3-setuptools python3-venv python3-pip"
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    step "installing $pkgs"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $pkgs >/dev/null
  else
    echo "the Python client test needs $py with these Debian packages: $pkgs" >&2
    exit 1
  fi
fi

tmp=$(mktemp -d)
dev_pid=
cleanup() {
  if [ -n "$dev_pid" ] && kill -0 "$dev_pid" 2>/dev/null; then
    kill -INT "$dev_pid" 2>/dev/null || true
    wait "$dev_pid" 2>/dev/null || true
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT

step "go build ./cmd/vigil"
go build -o "$tmp/vigil" ./cmd/vigil

step "pip install pkg/api/python into a venv (no index, no build isolation: nothing is downloaded)"
"$py" -m venv --system-site-packages "$tmp/venv"
# Built from a copy: pip writes build/ and *.egg-info next to the sources it builds.
cp -r pkg/api/python "$tmp/client"
"$tmp/venv/bin/python" -m pip install -q --no-index --no-build-isolation "$tmp/client"

step "vigil dev on free ports"
"$tmp/vigil" dev --addr 127.0.0.1:0 --grpc-port-base 0 --data "$tmp/data" >"$tmp/dev.log" 2>&1 &
dev_pid=$!
# Ready when it prints its banner: every service is serving and the gateway listens.
for _ in $(seq 600); do
  grep -q '^Press Ctrl-C to stop' "$tmp/dev.log" && break
  if ! kill -0 "$dev_pid" 2>/dev/null; then
    cat "$tmp/dev.log" >&2; echo "vigil dev exited before it was ready" >&2; exit 1
  fi
  sleep 0.1
done
if ! grep -q '^Press Ctrl-C to stop' "$tmp/dev.log"; then
  cat "$tmp/dev.log" >&2; echo "vigil dev printed no banner within 60s" >&2; exit 1
fi
cat "$tmp/dev.log"
grpc_addr() { sed -n "s/^  $1 *gRPC \(.*\)$/\1/p" "$tmp/dev.log"; }
export VIGIL_RESERVATIONS_ADDR=$(grpc_addr reservations) VIGIL_LOCKS_ADDR=$(grpc_addr locks) VIGIL_CHAT_ADDR=$(grpc_addr chat)
for a in "$VIGIL_RESERVATIONS_ADDR" "$VIGIL_LOCKS_ADDR" "$VIGIL_CHAT_ADDR"; do
  [ -n "$a" ] || { echo "no gRPC address in vigil dev's banner" >&2; exit 1; }
done

step "python tests (the installed package, not the sources)"
cd "$tmp"
"$tmp/venv/bin/python" -c 'import vigil, sys; p = list(vigil.__path__); print("vigil from", *p); sys.exit(any(s.startswith(sys.argv[1]) for s in p))' "$repo/"
# The closing line says PASS or FAIL with the count, after unittest's own summary.
rc=0
PYTHONDONTWRITEBYTECODE=1 "$tmp/venv/bin/python" -m unittest discover -v -s "$repo/pkg/api/python/tests" -t "$repo/pkg/api/python/tests" 2>&1 | tee "$tmp/unittest.log" || rc=$?
ran=$(sed -n 's/^Ran \([0-9]*\) tests\{0,1\} in .*/\1/p' "$tmp/unittest.log")
if [ "$rc" = 0 ]; then
  step "python client tests: PASS (${ran:-?} tests)"
else
  step "python client tests: FAIL, $(grep -E '^FAILED' "$tmp/unittest.log" | tail -1 | sed 's/^FAILED //' || true) of ${ran:-?} tests (details above)"
  exit "$rc"
fi
