#!/bin/sh
# Makes the cluster on the first start (see postgres.Containerfile), then runs PostgreSQL in the
# foreground, listening on every interface of the container. Arguments go to `postgres` (as with the
# public image: `-c fsync=off`).
#
# The password is POSTGRES_PASSWORD, or the content of the file POSTGRES_PASSWORD_FILE names (a
# secret). Clients over the network sign in with it (scram-sha-256); inside the container, the
# `postgres` user signs in over the socket without one (peer), so that `pg_dump -U postgres` run in
# the container (containers/backup.sh) needs no password.
set -eu
if [ -n "${POSTGRES_PASSWORD_FILE:-}" ]; then
  if [ -n "${POSTGRES_PASSWORD:-}" ]; then
    echo "postgres-start: set POSTGRES_PASSWORD or POSTGRES_PASSWORD_FILE, not both" >&2
    exit 1
  fi
  POSTGRES_PASSWORD="$(cat "$POSTGRES_PASSWORD_FILE")"
fi
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  if [ -n "${POSTGRES_PASSWORD:-}" ]; then
    pwfile="$(mktemp)"
    printf '%s\n' "$POSTGRES_PASSWORD" >"$pwfile"
    initdb -D "$PGDATA" -U postgres --auth-local=peer --auth-host=scram-sha-256 --pwfile="$pwfile" >/dev/null
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
# A cluster made before the socket was peer for `postgres`: the line goes first, once.
if ! grep -q '^local all postgres peer$' "$PGDATA/pg_hba.conf"; then
  { echo 'local all postgres peer'; cat "$PGDATA/pg_hba.conf"; } >"$PGDATA/pg_hba.conf.new"
  mv "$PGDATA/pg_hba.conf.new" "$PGDATA/pg_hba.conf"
fi
exec postgres -D "$PGDATA" "$@"
