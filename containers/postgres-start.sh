#!/bin/sh
# Makes the cluster on the first start (see postgres.Containerfile), then runs PostgreSQL in the
# foreground, listening on every interface of the container. Arguments go to `postgres` (as with the
# public image: `-c fsync=off`).
#
# The password is POSTGRES_PASSWORD, or the content of the file POSTGRES_PASSWORD_FILE names (a
# secret). Clients over the network sign in with it (scram-sha-256); inside the container, the
# `postgres` user signs in over the socket without one (peer), so that `pg_dump -U postgres` run in
# the container (containers/backup.sh) needs no password.
#
# With POSTGRES_PRIMARY_HOST set it is a streaming replica of that server instead (docs/operations.md
# "Read replicas"): the first start copies the primary with pg_basebackup (as `postgres`, with the
# same password; it waits for the primary to answer) and writes its primary_conninfo; every start runs
# it as a hot standby, which answers reads and replays the primary's WAL. Promote it with
# `pg_ctl promote` (or `select pg_promote()`).
set -eu
if [ -n "${POSTGRES_PASSWORD_FILE:-}" ]; then
  if [ -n "${POSTGRES_PASSWORD:-}" ]; then
    echo "postgres-start: set POSTGRES_PASSWORD or POSTGRES_PASSWORD_FILE, not both" >&2
    exit 1
  fi
  POSTGRES_PASSWORD="$(cat "$POSTGRES_PASSWORD_FILE")"
fi
if [ -n "${POSTGRES_PRIMARY_HOST:-}" ]; then
  if [ ! -s "$PGDATA/PG_VERSION" ]; then
    until PGPASSWORD="${POSTGRES_PASSWORD:-}" pg_basebackup -h "$POSTGRES_PRIMARY_HOST" -U postgres \
      -D "$PGDATA" -R -X stream -c fast; do
      echo "postgres-start: the primary $POSTGRES_PRIMARY_HOST does not answer yet; trying again" >&2
      find "$PGDATA" -mindepth 1 -delete
      sleep 2
    done
  fi
  # PostgreSQL wants its data folder private; a new volume's is not.
  chmod 0700 "$PGDATA"
  exec postgres -D "$PGDATA" -c hot_standby=on "$@"
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
# Streaming replicas (POSTGRES_PRIMARY_HOST above) connect over the network as `postgres`.
if ! grep -q '^host replication all 0.0.0.0/0 ' "$PGDATA/pg_hba.conf"; then
  method=trust
  [ -n "${POSTGRES_PASSWORD:-}" ] && method=scram-sha-256
  printf 'host replication all 0.0.0.0/0 %s\nhost replication all ::/0 %s\n' "$method" "$method" >>"$PGDATA/pg_hba.conf"
fi
exec postgres -D "$PGDATA" "$@"
