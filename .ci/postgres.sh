#!/usr/bin/env bash
# Start a throwaway PostgreSQL server for the tests and print `export SOCIETAS_TEST_PG=...`.
# Idempotent: installs the Debian package `postgresql` only when it is missing, reuses a server
# already running from the same data folder. Usage: eval "$(.ci/postgres.sh)"
# Env: PG_DATA (default /tmp/societas-pg), PG_PORT (default: a free port), PG_DB (default societas_test).
set -euo pipefail
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }
if ! ls /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1; then
    as_root apt-get update -qq >&2
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >&2
fi
BIN=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
DATA=${PG_DATA:-/tmp/societas-pg}
DB=${PG_DB:-societas_test}
# initdb refuses to run as root: the server runs as the `postgres` user then
if [ "$(id -u)" = 0 ]; then RUN=(runuser -u postgres --); USER_NAME=postgres; else RUN=(); USER_NAME=$(id -un); fi
if [ -f "$DATA/port" ] && "${RUN[@]}" "$BIN/pg_ctl" -D "$DATA/db" status >/dev/null 2>&1; then
    PORT=$(cat "$DATA/port")
else
    PORT=${PG_PORT:-$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')}
    mkdir -p "$DATA"
    [ "$(id -u)" = 0 ] && chown postgres "$DATA"
    if [ ! -f "$DATA/db/PG_VERSION" ]; then
        "${RUN[@]}" "$BIN/initdb" -D "$DATA/db" -U "$USER_NAME" --auth=trust -E UTF8 >&2
    fi
    "${RUN[@]}" "$BIN/pg_ctl" -D "$DATA/db" -l "$DATA/log" -w \
        -o "-p $PORT -k $DATA -c listen_addresses=127.0.0.1 -c max_connections=200" start >&2
    echo "$PORT" > "$DATA/port.tmp" && mv "$DATA/port.tmp" "$DATA/port"
fi
"${RUN[@]}" "$BIN/psql" -h 127.0.0.1 -p "$PORT" -U "$USER_NAME" -d postgres -tAc "SELECT 1 FROM pg_database WHERE datname='$DB'" | grep -q 1 \
    || "${RUN[@]}" "$BIN/createdb" -h 127.0.0.1 -p "$PORT" -U "$USER_NAME" "$DB" >&2
echo "export SOCIETAS_TEST_PG=postgresql+psycopg://$USER_NAME@127.0.0.1:$PORT/$DB"
