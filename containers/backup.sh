#!/usr/bin/env bash
# A logical backup of the compose deployment's database (compose.yaml), taken while it serves:
#
#   containers/backup.sh [file]            default: content-<UTC date and time>.dump
#
# pg_dump runs in the postgres container (its own version, its own socket: no password needed) and
# writes one consistent snapshot in PostgreSQL's custom format to a temporary file beside `file`;
# the file is checked to be a whole archive (pg_restore --list) and only then renamed to `file`, so a
# failed backup never replaces the last good one and leaves nothing behind. CS_DATABASE names the
# database (default `content`). Restore with containers/restore.sh. The media volume is backed up
# apart (docs/operations.md "Deploying with containers").
#
# It runs compose with COMPOSE_FILE and COMPOSE_PROJECT_NAME when set, else on containers/compose.yaml;
# CONTAINER_COMPOSE: the compose command (default `docker-compose`).
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
export COMPOSE_FILE="${COMPOSE_FILE:-$here/compose.yaml}"
read -r -a compose <<<"${CONTAINER_COMPOSE:-docker-compose}"
database="${CS_DATABASE:-content}"
file="${1:-content-$(date -u +%Y%m%d-%H%M%S).dump}"

tmp="$(dirname "$file")/.$(basename "$file").partial.$$"
trap 'rm -f "$tmp"' EXIT
"${compose[@]}" exec -T postgres pg_dump -U postgres -Fc -d "$database" >"$tmp"
"${compose[@]}" exec -T postgres pg_restore --list <"$tmp" >/dev/null
mv -f "$tmp" "$file"
trap - EXIT
echo "backup: $file ($(wc -c <"$file") bytes) of database $database"
