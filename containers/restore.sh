#!/usr/bin/env bash
# Restores a backup made by containers/backup.sh into a new, empty database of the compose
# deployment's PostgreSQL (compose.yaml); the database the service uses is left alone:
#
#   containers/restore.sh <file> [database]      default database: content_restored
#
# It refuses a database that exists. pg_restore runs in the postgres container with
# --exit-on-error: a restore that fails drops the database it made, leaving nothing half restored.
# Then the service moves onto the restored database, replica by replica, with no failed request:
#
#   CS_DATABASE=<database> containers/upgrade.sh        (and CS_DATABASE=<database> in .env, to keep it)
#
# It runs compose with COMPOSE_FILE and COMPOSE_PROJECT_NAME when set, else on containers/compose.yaml;
# CONTAINER_COMPOSE: the compose command (default `docker-compose`).
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
export COMPOSE_FILE="${COMPOSE_FILE:-$here/compose.yaml}"
read -r -a compose <<<"${CONTAINER_COMPOSE:-docker-compose}"
file="${1:?usage: containers/restore.sh <file> [database]}"
database="${2:-content_restored}"

if [[ ! "$database" =~ ^[a-z_][a-z0-9_]{0,62}$ ]]; then
  echo "restore: a database name is lower-case letters, digits and _ (at most 63), not '$database'" >&2
  exit 2
fi
if [[ ! -f "$file" ]]; then
  echo "restore: no file $file" >&2
  exit 2
fi
psql() { "${compose[@]}" exec -T postgres psql -U postgres -d postgres -v ON_ERROR_STOP=1 -qtA "$@"; }
if [[ -n "$(psql -c "select 1 from pg_database where datname = '$database'")" ]]; then
  echo "restore: database $database exists; name a new one" >&2
  exit 1
fi
psql -c "create database $database" >/dev/null
if ! "${compose[@]}" exec -T postgres pg_restore -U postgres --no-owner --exit-on-error -d "$database" <"$file"; then
  echo "restore: pg_restore failed; dropping $database" >&2
  psql -c "drop database $database" >/dev/null || true
  exit 1
fi
echo "restore: $file restored into database $database"
echo "restore: to serve it: CS_DATABASE=$database containers/upgrade.sh"
