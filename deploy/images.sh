#!/usr/bin/env bash
# Builds Vigil's images from local sources only: static binaries compiled here, then one
# FROM scratch image per binary (deploy/docker/Dockerfile). Works with the legacy builder.
#
#   deploy/images.sh            # vigil/gateway:local, vigil/reservations:local, ...
#   VIGIL_IMAGE_TAG=v1 deploy/images.sh
#
# Every service with a services/<name>/cmd/<name>/main.go gets an image, and so does the gateway.
set -euo pipefail
cd "$(dirname "$0")/.."
tag=${VIGIL_IMAGE_TAG:-local}
repo=${VIGIL_IMAGE_REPO:-vigil}

ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT
cp deploy/docker/Dockerfile "$ctx/Dockerfile"

names=(gateway)
pkgs=(./gateway/cmd/gateway)
for main in services/*/cmd/*/main.go; do
  name=$(basename "$(dirname "$main")")
  [ "$name" = "$(basename "$(dirname "$(dirname "$(dirname "$main")")")")" ] || continue # cmd/<service> only
  names+=("$name")
  pkgs+=("./$(dirname "$main")")
done

echo "compiling ${names[*]} and healthcheck (static, CGO_ENABLED=0)"
export CGO_ENABLED=0 GOOS=linux
go build -trimpath -ldflags='-s -w' -o "$ctx/" "${pkgs[@]}" ./deploy/healthcheck

for name in "${names[@]}"; do
  # The legacy builder prints a deprecation notice on stderr: show stderr only on failure.
  if ! docker build -q -t "$repo/$name:$tag" --build-arg BINARY="$name" "$ctx" >/dev/null 2>"$ctx/err"; then
    cat "$ctx/err" >&2
    exit 1
  fi
  echo "built $repo/$name:$tag"
done
