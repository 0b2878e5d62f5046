#!/bin/sh
# Makes the cluster on the first start (see postgres.Containerfile), then runs PostgreSQL in the
# foreground, listening on every interface of the container. Arguments go to `postgres` (as with the
# public image: `-c fsync=off`).
set -eu
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  if [ -n "${POSTGRES_PASSWORD:-}" ]; then
    pwfile="$(mktemp)"
    printf '%s\n' "$POSTGRES_PASSWORD" >"$pwfile"
    initdb -D "$PGDATA" -U postgres --auth=scram-sha-256 --pwfile="$pwfile" >/dev/null
    rm -f "$pwfile"
    method=scram-sha-256
  else
    initdb -D "$PGDATA" -U postgres --auth=trust >/dev/null
    method=trust
  fi
  printf "listen_addresses = '*'\n" >>"$PGDATA/postgresql.conf"
  printf 'host all all 0.0.0.0/0 %s\nhost all all ::/0 %s\n' "$method" "$method" >>"$PGDATA/pg_hba.conf"
  if [ -n "${POSTGRES_DB:-}" ] && [ "$POSTGRES_DB" != postgres ]; then
    postgres --single -D "$PGDATA" postgres <<SQL >/dev/null
CREATE DATABASE "$POSTGRES_DB";
SQL
  fi
fi
exec postgres -D "$PGDATA" "$@"
