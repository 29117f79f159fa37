#!/usr/bin/env bash
# Issue 16's mixed load test: a release build on loopback, one organization
# seeded with USERS users and products (crates/gatehouse/examples/seed.rs),
# then 64 keep-alive HTTPS clients in closed loops for SECONDS, each request
# drawn from a realistic mix (crates/gatehouse/examples/mixed.rs: reads,
# list pages, searches, user and product writes, client-credentials
# tokens); prints per operation the rate, p50/p99 and the errors.
#
#   scripts/mixed-load.sh                  # SQLite, 100,000 users and products, 60 s
#   DB=postgres scripts/mixed-load.sh      # on a throwaway PostgreSQL cluster
#   USERS=1000000 SECONDS_=30 scripts/mixed-load.sh
set -euo pipefail
cd "$(dirname "$0")/.."

DB=${DB:-sqlite}
USERS=${USERS:-100000}
RUN_SECONDS=${SECONDS_:-60}
CONNS=${CONNS:-64}
HTTPS_PORT=${HTTPS_PORT:-28643}
HTTP_PORT=${HTTP_PORT:-28280}
ADMIN_PORT=${ADMIN_PORT:-29290}

CARGO_INCREMENTAL=0 cargo build --release -q -p gatehouse --example seed --example mixed
CARGO_INCREMENTAL=0 cargo build --release -q -p gatehouse --bin gatehouse
BIN=target/release/gatehouse
WORK=$(mktemp -d)
SERVER_PID=
PG_DATA=
RUNAS=
cleanup() {
  [ -n "$SERVER_PID" ] && kill "$SERVER_PID" 2>/dev/null || true
  [ -n "$PG_DATA" ] && $RUNAS "$PGBIN/pg_ctl" -D "$PG_DATA" -m immediate stop >/dev/null 2>&1 || true
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

DATA=$WORK/data
DBARGS=
if [ "$DB" = postgres ]; then
  PGBIN=$(dirname "$(readlink -f "$(command -v initdb || ls /usr/lib/postgresql/*/bin/initdb | tail -1)")")
  PG_PORT=${PG_PORT:-25534}
  PG_DATA="$WORK/pg"
  chmod 755 "$WORK"
  if [ "$(id -u)" = 0 ]; then RUNAS="runuser -u postgres --"; mkdir -p "$PG_DATA" && chown postgres "$PG_DATA"; fi
  $RUNAS "$PGBIN/initdb" -D "$PG_DATA" -A trust -U postgres >/dev/null
  $RUNAS "$PGBIN/pg_ctl" -D "$PG_DATA" -w -l "$PG_DATA/server.log" \
    -o "-p $PG_PORT -k $PG_DATA -c listen_addresses=127.0.0.1 -c max_connections=200 -c shared_buffers=512MB" start >/dev/null
  psql -q -h 127.0.0.1 -p "$PG_PORT" -U postgres -d postgres -c "CREATE DATABASE mixed" >/dev/null
  URL="postgres://postgres@127.0.0.1:$PG_PORT/mixed"
  DBARGS="--database-url $URL"
else
  URL="sqlite://$DATA/gatehouse.db"
fi
mkdir -p "$DATA"
"$BIN" --data-dir "$DATA" $DBARGS migrate >/dev/null 2>&1
ORG=$("$BIN" --data-dir "$DATA" $DBARGS org create --name Mixed --plan enterprise \
  --per-minute 1000000000 --per-second 100000000 --json | python3 -c "import json,sys;print(json.load(sys.stdin)['id'])")
target/release/examples/seed --database-url "$URL" --org "$ORG" --users "$USERS" --products "$USERS" 2>&1 | tail -1
CLIENT=$("$BIN" --data-dir "$DATA" $DBARGS client create --org "$ORG" --name mixed \
  --scopes "users:read users:write products:read products:write" --json)
CID=$(echo "$CLIENT" | python3 -c "import json,sys;print(json.load(sys.stdin)['client_id'])")
CS=$(echo "$CLIENT" | python3 -c "import json,sys;print(json.load(sys.stdin)['client_secret'])")

GATEHOUSE_LOG=warn "$BIN" --data-dir "$DATA" $DBARGS serve --https-addr 127.0.0.1:$HTTPS_PORT \
  --http-addr 127.0.0.1:$HTTP_PORT --admin-addr 127.0.0.1:$ADMIN_PORT \
  --public-url "https://localhost:$HTTPS_PORT" >"$WORK/server.out" 2>"$WORK/server.err" &
SERVER_PID=$!
for _ in $(seq 1 600); do
  curl -sk -o /dev/null "https://127.0.0.1:$HTTPS_PORT/healthz" && break
  sleep 0.1
done
# The search indexes are built by the first searches, not in the measured minute.
TOKEN=$(curl -sk -u "$CID:$CS" -d grant_type=client_credentials -d scope=users:read\ products:read "https://127.0.0.1:$HTTPS_PORT/oauth/token" |
  python3 -c "import json,sys;print(json.load(sys.stdin)['access_token'])")
curl -sk -o /dev/null -H "Authorization: Bearer $TOKEN" "https://127.0.0.1:$HTTPS_PORT/v1/users?q=warm"
curl -sk -o /dev/null -H "Authorization: Bearer $TOKEN" "https://127.0.0.1:$HTTPS_PORT/v1/products?q=warm"

echo "Gatehouse mixed load ($DB, $(git rev-parse --short HEAD), $(date -u '+%Y-%m-%d %H:%M') UTC): $USERS users and $USERS products, $CONNS keep-alive HTTPS clients in closed loops, ${RUN_SECONDS}s"
target/release/examples/mixed --base "https://localhost:$HTTPS_PORT" --ca "$DATA/tls/cert.pem" \
  --client-id "$CID" --client-secret "$CS" --conns "$CONNS" --seconds "$RUN_SECONDS"
