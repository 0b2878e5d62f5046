#!/usr/bin/env bash
# Rolling upgrade of the compose deployment (compose.yaml) with no failed request: after a new image
# (containers/build.sh, or CS_IMAGE naming another) or changed settings.
#
#   containers/upgrade.sh
#
# 1. The new release migrates the database first, in a one-off container (`cli migrate`); the old
#    replicas keep serving on the new schema, since a release's migrations only add (docs/operations.md
#    "Upgrades"). A failed migration stops here, having changed nothing.
# 2. As many new replicas as run now start beside the old ones; the script waits until HAProxy has
#    every one of them up (its readiness check passed). If they do not come up within
#    UPGRADE_READY_SECONDS (180), they are removed and the old ones serve on: exit 1.
# 3. The old replicas are stopped, all at once: each fails its readiness check, keeps serving through
#    its drain (SHUTDOWN_DRAIN_SECONDS) while HAProxy takes it out, finishes what it holds and exits;
#    then they are removed.
# 4. The workers are replaced (the projectors resume from their checkpoints; a job held by a stopped
#    worker is run by another).
#
# It runs compose with COMPOSE_FILE and COMPOSE_PROJECT_NAME when set (as compose itself does), else
# on containers/compose.yaml. CONTAINER_COMPOSE: the compose command (default `docker-compose`;
# `docker compose` works too); CONTAINER_ENGINE: docker (default) or podman.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
export COMPOSE_FILE="${COMPOSE_FILE:-$here/compose.yaml}"
read -r -a compose <<<"${CONTAINER_COMPOSE:-docker-compose}"
engine="${CONTAINER_ENGINE:-docker}"
ready_seconds="${UPGRADE_READY_SECONDS:-180}"

say() { printf '%s upgrade: %s\n' "$(date -u +%H:%M:%S)" "$*"; }

mapfile -t old < <("${compose[@]}" ps -q app)
if [[ ${#old[@]} -eq 0 ]]; then
  echo "upgrade: no replica of app runs; start the deployment with 'up -d' instead" >&2
  exit 1
fi
lb="$("${compose[@]}" ps -q lb)"
if [[ -z "$lb" ]]; then
  echo "upgrade: the load balancer (lb) does not run" >&2
  exit 1
fi
count=${#old[@]}

say "migrating with the new release"
"${compose[@]}" run --rm --no-deps -T -e LOG_LEVEL=warn app node apps/cli/main.js migrate

say "starting $count new replica(s) beside the $count running"
"${compose[@]}" up -d --no-deps --no-recreate --scale "app=$((count * 2))" app >/dev/null
mapfile -t all < <("${compose[@]}" ps -q app)
new=()
for id in "${all[@]}"; do
  [[ " ${old[*]} " == *" $id "* ]] || new+=("$id")
done

# The addresses HAProxy has up (operational state 2) in backend `app`, from its runtime API.
up_addresses() {
  "$engine" exec -i "$lb" socat stdio /var/run/haproxy/admin.sock <<<'show servers state app' |
    awk 'NR > 2 && $6 == 2 { print $5 }'
}
address_of() {
  "$engine" inspect --format '{{range .NetworkSettings.Networks}}{{.IPAddress}} {{end}}' "$1"
}

say "waiting for HAProxy to have the new replica(s) up"
deadline=$((SECONDS + ready_seconds))
while :; do
  up="$(up_addresses || true)"
  waiting=0
  for id in "${new[@]}"; do
    running="$("$engine" inspect --format '{{.State.Running}}' "$id" 2>/dev/null || echo false)"
    found=false
    for address in $(address_of "$id"); do
      grep -qx "$address" <<<"$up" && found=true
    done
    [[ "$running" == true && "$found" == true ]] || waiting=$((waiting + 1))
  done
  [[ $waiting -eq 0 ]] && break
  if ((SECONDS > deadline)); then
    say "the new replica(s) did not come up within ${ready_seconds} s; removing them, the old ones serve on" >&2
    for id in "${new[@]}"; do "$engine" logs --tail 20 "$id" >&2 || true; done
    "$engine" rm -f -v "${new[@]}" >/dev/null
    exit 1
  fi
  sleep 1
done

say "stopping the $count old replica(s): drained, then stopped"
pids=()
for id in "${old[@]}"; do
  "$engine" stop --time 40 "$id" >/dev/null &
  pids+=($!)
done
for pid in "${pids[@]}"; do wait "$pid"; done
# -v: their anonymous volumes (the image's /data, unused beside PostgreSQL) go with them.
"$engine" rm -v "${old[@]}" >/dev/null

say "replacing the worker(s)"
workers="$("${compose[@]}" ps -q worker | wc -l)"
"${compose[@]}" up -d --no-deps --scale "worker=$((workers > 0 ? workers : 1))" worker >/dev/null

say "done: $count replica(s) on the new release"
