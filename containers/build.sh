#!/usr/bin/env bash
# Builds the deployment's images: the service (content-service), PostgreSQL, Redis, HAProxy and
# Prometheus (content-service/postgres:15, content-service/redis:7, content-service/haproxy,
# content-service/prometheus: the compose file's `metrics` profile).
#
#   containers/build.sh                  on the public Debian image
#   LOCAL_BASE=1 containers/build.sh     on a base made here from Debian's packages (containers/base.sh),
#                                        where no container registry answers
#
# CONTAINER_ENGINE: docker (default) or podman. BASE: any Debian bookworm image, instead of either.
# The machine's CA bundle, where there is one, is handed to `npm ci` as a build secret (TLS to the
# npm registry through a proxy of the machine's own); it is never kept in an image.
set -euo pipefail
cd "$(dirname "$0")/.."

engine="${CONTAINER_ENGINE:-docker}"
base="${BASE:-}"
if [[ -z "$base" ]]; then
  if [[ "${LOCAL_BASE:-}" == 1 ]]; then
    base=content-service/debian:bookworm
    "$engine" image inspect "$base" >/dev/null 2>&1 || containers/base.sh "$base"
  else
    base=docker.io/library/debian:bookworm-slim
  fi
fi
secret=()
ca=/etc/ssl/certs/ca-certificates.crt
[[ -f "$ca" ]] && secret=(--secret "id=ca,src=$ca")
# podman writes OCI images by default, which have no HEALTHCHECK: the Docker format keeps it.
format=()
[[ "$(basename "$engine")" == podman ]] && format=(--format docker)

build() {
  local tag="$1" file="$2" context="$3"
  echo "== $tag"
  local started=$SECONDS
  DOCKER_BUILDKIT=1 "$engine" build -q "${format[@]}" -f "$file" --build-arg "BASE=$base" -t "$tag" "${@:4}" "$context" >/dev/null
  echo "   built in $((SECONDS - started)) s"
}
build content-service:latest containers/Containerfile . "${secret[@]}"
build content-service/postgres:15 containers/postgres.Containerfile containers
build content-service/redis:7 containers/redis.Containerfile containers
build content-service/haproxy:latest containers/haproxy.Containerfile containers
build content-service/prometheus:latest containers/prometheus.Containerfile containers
