#!/usr/bin/env bash
# Issue 16's PostgreSQL target, measured: the authenticated read and the
# client-credentials token on PostgreSQL against SQLite, behind a proxy
# (plain HTTP, so TLS does not hide the difference), in alternating rounds
# of two servers of the same release binary in the same run, PostgreSQL on
# this machine (a throwaway cluster on loopback with pg_stat_statements).
# For each PostgreSQL round it also counts the statements PostgreSQL ran per
# request (pg_stat_statements' calls over wrk's requests): the database
# round trips of the request path.
#
#   scripts/pg-ratio.sh                 # 3 rounds of 10 s per measurement
#   ROUNDS=5 DURATION=5 scripts/pg-ratio.sh
#   BIN=/tmp/gatehouse-before scripts/pg-ratio.sh   # a binary built earlier
#
# Needs wrk, initdb/pg_ctl/psql (Debian's postgresql); loopback only.
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${DURATION:-10}
ROUNDS=${ROUNDS:-3}
SQ_PORT=${SQ_PORT:-28081}
PG_HTTP_PORT=${PG_HTTP_PORT:-28082}
PG_PORT=${PG_PORT:-25433}

# BIN=path measures an already built binary (e.g. an earlier commit's).
if [ -z "${BIN:-}" ]; then
  CARGO_INCREMENTAL=0 cargo build --release -q -p gatehouse
  BIN=target/release/gatehouse
fi
WORK=$(mktemp -d)
PIDS=()
PG_DATA=
RUNAS=
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  [ -n "$PG_DATA" ] && $RUNAS "$PGBIN/pg_ctl" -D "$PG_DATA" -m immediate stop >/dev/null 2>&1 || true
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

PGBIN=$(dirname "$(readlink -f "$(command -v initdb || ls /usr/lib/postgresql/*/bin/initdb | tail -1)")")
PG_DATA="$WORK/pg"
chmod 755 "$WORK"
if [ "$(id -u)" = 0 ]; then RUNAS="runuser -u postgres --"; mkdir -p "$PG_DATA" && chown postgres "$PG_DATA"; fi
$RUNAS "$PGBIN/initdb" -D "$PG_DATA" -A trust -U postgres >/dev/null
$RUNAS "$PGBIN/pg_ctl" -D "$PG_DATA" -w -l "$PG_DATA/server.log" \
  -o "-p $PG_PORT -k $PG_DATA -c listen_addresses=127.0.0.1 -c max_connections=200 -c shared_buffers=256MB -c shared_preload_libraries=pg_stat_statements -c pg_stat_statements.track=all" start >/dev/null
PSQL=(psql -qtA -h 127.0.0.1 -p "$PG_PORT" -U postgres)
"${PSQL[@]}" -d postgres -c "CREATE DATABASE ratio" >/dev/null
"${PSQL[@]}" -d ratio -c "CREATE EXTENSION pg_stat_statements" >/dev/null
PG_URL="postgres://postgres@127.0.0.1:$PG_PORT/ratio"

serve() { # name, http port, db args…
  local name=$1 port=$2; shift 2
  mkdir -p "$WORK/$name"
  GATEHOUSE_LOG=warn "$BIN" --data-dir "$WORK/$name" "$@" serve --behind-proxy --http-addr "127.0.0.1:$port" \
    --https-addr "127.0.0.1:$((port + 1000))" --admin-addr "127.0.0.1:$((port + 2000))" \
    --public-url "https://localhost:$port" >"$WORK/$name.out" 2>"$WORK/$name.err" &
  PIDS+=($!)
  for _ in $(seq 1 200); do curl -s -o /dev/null "http://127.0.0.1:$port/healthz" && return; sleep 0.1; done
  echo "$name did not start" >&2; cat "$WORK/$name.err" >&2; exit 1
}
serve sqlite "$SQ_PORT"
serve postgres "$PG_HTTP_PORT" --database-url "$PG_URL"

# Per server: an enterprise organization (D28 does not limit the load), a
# client, a token and a user to read; the bootstrap client for the token runs.
setup() { # name, port, db args… -> sets TOKEN_x USER_x CID_x CS_x
  local name=$1 port=$2; shift 2
  local org client cid cs token user
  org=$("$BIN" --data-dir "$WORK/$name" "$@" org create --name Load --plan enterprise --per-minute 1000000000 --per-second 100000000 --json | python3 -c "import json,sys;print(json.load(sys.stdin)['id'])")
  client=$("$BIN" --data-dir "$WORK/$name" "$@" client create --org "$org" --name load --scopes "users:read users:write" --json)
  cid=$(echo "$client" | python3 -c "import json,sys;print(json.load(sys.stdin)['client_id'])")
  cs=$(echo "$client" | python3 -c "import json,sys;print(json.load(sys.stdin)['client_secret'])")
  token=$(curl -s -u "$cid:$cs" -d grant_type=client_credentials "http://127.0.0.1:$port/oauth/token" | python3 -c "import json,sys;print(json.load(sys.stdin)['access_token'])")
  user=$(curl -s -H "Authorization: Bearer $token" -H 'Content-Type: application/json' \
    -d '{"email":"load@example.com","name":"Load Test","role":"viewer"}' "http://127.0.0.1:$port/v1/users" |
    python3 -c "import json,sys;print(json.load(sys.stdin)['data']['id'])")
  printf -v "TOKEN_$name" %s "$token"
  printf -v "USER_$name" %s "$user"
  printf -v "CID_$name" %s "$cid"
  printf -v "CS_$name" %s "$cs"
}
setup sqlite "$SQ_PORT"
setup postgres "$PG_HTTP_PORT" --database-url "$PG_URL"

LUA="$WORK/token.lua"
cat > "$LUA" <<'LUA'
local cid, secret = os.getenv("CLIENT_ID"), os.getenv("CLIENT_SECRET")
local b = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/'
local function b64(data)
  return ((data:gsub('.', function(x)
    local r, byte = '', x:byte()
    for i = 8, 1, -1 do r = r .. (byte % 2 ^ i - byte % 2 ^ (i - 1) > 0 and '1' or '0') end
    return r
  end) .. '0000'):gsub('%d%d%d?%d?%d?%d?', function(x)
    if #x < 6 then return '' end
    local c = 0
    for i = 1, 6 do c = c + (x:sub(i, i) == '1' and 2 ^ (6 - i) or 0) end
    return b:sub(c + 1, c + 1)
  end) .. ({ '', '==', '=' })[#data % 3 + 1])
end
wrk.method = "POST"
wrk.path = "/oauth/token"
wrk.body = "grant_type=client_credentials&scope=users%3Aread"
wrk.headers["Content-Type"] = "application/x-www-form-urlencoded"
wrk.headers["Authorization"] = "Basic " .. b64(cid .. ":" .. secret)
LUA

# wrk output -> "requests/s requests non-2xx"
measure() { awk '/Requests\/sec/ {r=$2} /requests in/ {n=$1} /Non-2xx/ {e=$5} END {printf "%s %s %s", r, n, (e ? e : 0)}'; }
read_run() { # name port
  local t u; t=TOKEN_$1; u=USER_$1
  wrk -t1 -c64 -d"${DURATION}s" -H "Authorization: Bearer ${!t}" "http://127.0.0.1:$2/v1/users/${!u}" | measure
}
token_run() { # name port
  local c s; c=CID_$1; s=CS_$1
  CLIENT_ID=${!c} CLIENT_SECRET=${!s} wrk -t1 -c64 -d"${DURATION}s" -s "$LUA" "http://127.0.0.1:$2" | measure
}
statements() { # -> total calls since the last reset, and the top statements
  "${PSQL[@]}" -d ratio -c "SELECT coalesce(sum(calls), 0) FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = 'ratio')"
}
reset() { "${PSQL[@]}" -d ratio -c "SELECT pg_stat_statements_reset()" >/dev/null; }

# Warm-up, not counted.
DURATION=3 read_run sqlite "$SQ_PORT" >/dev/null
DURATION=3 read_run postgres "$PG_HTTP_PORT" >/dev/null
DURATION=3 token_run sqlite "$SQ_PORT" >/dev/null
DURATION=3 token_run postgres "$PG_HTTP_PORT" >/dev/null

echo "Gatehouse PostgreSQL / SQLite ($(git rev-parse --short HEAD), $(date -u '+%Y-%m-%d %H:%M') UTC): --behind-proxy plain HTTP, wrk -t1 -c64, ${DURATION}s per run, $ROUNDS alternating rounds"
for kind in read token; do
  ratios=
  for i in $(seq 1 "$ROUNDS"); do
    read -r sr sn se <<<"$(${kind}_run sqlite "$SQ_PORT")"
    reset
    read -r pr pn pe <<<"$(${kind}_run postgres "$PG_HTTP_PORT")"
    calls=$(statements)
    ratio=$(awk -v a="$pr" -v b="$sr" 'BEGIN { printf "%.1f", (b > 0 ? 100 * a / b : 0) }')
    per=$(awk -v c="$calls" -v n="$pn" 'BEGIN { printf "%.3f", (n > 0 ? c / n : 0) }')
    ratios="$ratios $ratio"
    printf '  %-5s round %d: SQLite %s req/s (%s non-2xx), PostgreSQL %s req/s (%s non-2xx): %s%%; PostgreSQL statements per request %s (%s in %s requests)\n' \
      "$kind" "$i" "$sr" "$se" "$pr" "$pe" "$ratio" "$per" "$calls" "$pn"
  done
  echo "$ratios" | tr ' ' '\n' | grep . | sort -g |
    awk -v k="$kind" '{r[NR]=$1} END {m = (NR % 2 ? r[(NR+1)/2] : (r[NR/2] + r[NR/2+1]) / 2); printf "  %-5s PostgreSQL / SQLite, median of the rounds: %.1f%% (rounds %s%% to %s%%)\n", k, m, r[1], r[NR]}'
done
echo "Statements PostgreSQL ran in the last token round, by calls:"
"${PSQL[@]}" -d ratio -F ' | ' -c "SELECT calls, left(regexp_replace(query, '\s+', ' ', 'g'), 110) FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = 'ratio') ORDER BY calls DESC LIMIT 8" | sed 's/^/    /'
