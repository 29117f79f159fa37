#!/usr/bin/env bash
# Load test against loopback only, bounded in time.
#
#   scripts/loadtest.sh            # HTTPS: /healthz, authenticated GET /v1/users/{id}, POST /oauth/token;
#                                  # then --behind-proxy plain HTTP: POST /oauth/token
#   PEER=1 scripts/loadtest.sh     # also node-oidc-provider (../shared/peers/oidc-provider): alternating
#                                  # rounds against a --behind-proxy server, each ratio and their median (ROUNDS, default 3)
#   GRANTS=0 scripts/loadtest.sh   # skip the authorization_code / refresh_token runs
#   DB=postgres scripts/loadtest.sh # the same runs on PostgreSQL: a throwaway cluster on loopback
#                                  # (initdb/pg_ctl from Debian's postgresql package), a fresh database per server
#
# Settings: DURATION (seconds per run, default 10), CONNECTIONS (default 64), THREADS (default 2).
# Needs wrk (Debian package `wrk`; installed automatically when apt-get is available).
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${DURATION:-10}
CONNECTIONS=${CONNECTIONS:-64}
THREADS=${THREADS:-2}
HTTPS_PORT=${HTTPS_PORT:-28443}
HTTP_PORT=${HTTP_PORT:-28080}

if ! command -v wrk >/dev/null; then
  apt-get install -y -qq wrk >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq wrk; }
fi

cargo build --release -q -p gatehouse
BIN=target/release/gatehouse
WORK=$(mktemp -d)
SERVER_PID=
PEER_PID=
PG_DATA=
cleanup() {
  [ -n "$SERVER_PID" ] && kill "$SERVER_PID" 2>/dev/null || true
  [ -n "$PG_DATA" ] && $RUNAS "$PGBIN/pg_ctl" -D "$PG_DATA" -m immediate stop >/dev/null 2>&1 || true
  [ -n "$PEER_PID" ] && { pkill -P "$PEER_PID" 2>/dev/null; kill "$PEER_PID" 2>/dev/null; } || true
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

LUA="$WORK/token.lua"
cat > "$LUA" <<'LUA'
local cid = os.getenv("CLIENT_ID")
local secret = os.getenv("CLIENT_SECRET")
local path = os.getenv("TOKEN_PATH") or "/oauth/token"
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
wrk.path = path
wrk.body = "grant_type=client_credentials&scope=users%3Aread"
wrk.headers["Content-Type"] = "application/x-www-form-urlencoded"
wrk.headers["Authorization"] = "Basic " .. b64(cid .. ":" .. secret)
LUA

# --- PostgreSQL (DB=postgres) ------------------------------------------------
DB=${DB:-sqlite}
RUNAS=
if [ "$DB" = postgres ]; then
  PGBIN=$(dirname "$(readlink -f "$(command -v initdb || ls /usr/lib/postgresql/*/bin/initdb | tail -1)")")
  PG_PORT=${PG_PORT:-25432}
  PG_DATA="$WORK/pg"
  chmod 755 "$WORK"
  if [ "$(id -u)" = 0 ]; then RUNAS="runuser -u postgres --"; mkdir -p "$PG_DATA" && chown postgres "$PG_DATA"; fi
  $RUNAS "$PGBIN/initdb" -D "$PG_DATA" -A trust -U postgres >/dev/null
  $RUNAS "$PGBIN/pg_ctl" -D "$PG_DATA" -w -l "$PG_DATA/server.log" \
    -o "-p $PG_PORT -k $PG_DATA -c listen_addresses=127.0.0.1 -c max_connections=200 -c shared_buffers=256MB" start >/dev/null
fi
db_args() { # $1: database name -> --database-url for PostgreSQL, nothing for SQLite
  if [ "$DB" = postgres ]; then
    psql -q -h 127.0.0.1 -p "$PG_PORT" -U postgres -d postgres -c "CREATE DATABASE $1" >/dev/null
    echo "--database-url postgres://postgres@127.0.0.1:$PG_PORT/$1"
  fi
}

start_server() { # $1: data dir, rest: extra serve flags
  local dir=$1; shift
  GATEHOUSE_LOG=warn "$BIN" --data-dir "$dir" $DBARGS serve --https-addr 127.0.0.1:$HTTPS_PORT --http-addr 127.0.0.1:$HTTP_PORT --admin-addr 127.0.0.1:${ADMIN_PORT:-29090} \
    --public-url "https://localhost:$HTTPS_PORT" "$@" >"$dir.out" 2>"$dir.err" &
  SERVER_PID=$!
  for _ in $(seq 1 100); do
    if curl -sk -o /dev/null "https://127.0.0.1:$HTTPS_PORT/healthz" || curl -s -o /dev/null "http://127.0.0.1:$HTTP_PORT/healthz"; then return; fi
    sleep 0.1
  done
  echo "server did not start" >&2; cat "$dir.err" >&2; exit 1
}
stop_server() { kill "$SERVER_PID"; wait "$SERVER_PID" 2>/dev/null || true; SERVER_PID=; }

rps() { # wrk output on stdin -> requests/sec and non-2xx count
  awk '/Requests\/sec/ {r=$2} /Non-2xx/ {e=$5} END {printf "%s req/s%s", r, (e ? " (" e " non-2xx!)" : "")}'
}
run() { # label, wrk args…
  local label=$1; shift
  local out
  out=$(wrk -t"$THREADS" -c"$CONNECTIONS" -d"${DURATION}s" "$@")
  printf '%-52s %s\n' "$label" "$(echo "$out" | rps)"
}

# --- HTTPS (the default deployment) ---------------------------------------
D1="$WORK/https"
DBARGS=$(db_args load_https)
start_server "$D1"
CID=$(python3 -c "import json,sys;print(json.load(open(sys.argv[1]))['client_id'])" "$D1/bootstrap-credentials.json")
CS=$(python3 -c "import json,sys;print(json.load(open(sys.argv[1]))['client_secret'])" "$D1/bootstrap-credentials.json")
# The read is measured for a credential whose plan does not limit it (D28:
# an enterprise organization with very high numbers); the bootstrap
# organization is on pro (600 per minute) and would answer 429.
LOAD_ORG=$("$BIN" --data-dir "$D1" $DBARGS org create --name Load --plan enterprise --per-minute 1000000000 --per-second 100000000 --json |
  python3 -c "import json,sys;print(json.load(sys.stdin)['id'])")
LOAD_CLIENT=$("$BIN" --data-dir "$D1" $DBARGS client create --org "$LOAD_ORG" --name load --scopes "users:read users:write" --json)
LCID=$(echo "$LOAD_CLIENT" | python3 -c "import json,sys;print(json.load(sys.stdin)['client_id'])")
LCS=$(echo "$LOAD_CLIENT" | python3 -c "import json,sys;print(json.load(sys.stdin)['client_secret'])")
TOKEN=$(curl -sk -u "$LCID:$LCS" -d grant_type=client_credentials "https://127.0.0.1:$HTTPS_PORT/oauth/token" | python3 -c "import json,sys;print(json.load(sys.stdin)['access_token'])")
USER_ID=$(curl -sk -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' \
  -d '{"email":"load@example.com","name":"Load Test","role":"viewer"}' "https://127.0.0.1:$HTTPS_PORT/v1/users" |
  python3 -c "import json,sys;print(json.load(sys.stdin)['data']['id'])")

echo "Gatehouse load test ($DB): ${DURATION}s per run, $CONNECTIONS connections, $THREADS wrk threads, keep-alive, loopback"
run "HTTPS GET /healthz (no token, no storage)" "https://127.0.0.1:$HTTPS_PORT/healthz"
run "HTTPS GET /v1/users/{id} (bearer token)" -H "Authorization: Bearer $TOKEN" "https://127.0.0.1:$HTTPS_PORT/v1/users/$USER_ID"
CLIENT_ID=$CID CLIENT_SECRET=$CS run "HTTPS POST /oauth/token (client_credentials)" -s "$LUA" "https://127.0.0.1:$HTTPS_PORT"
stop_server

# --- behind a TLS-terminating proxy: plain HTTP ----------------------------
D2="$WORK/proxy"
DBARGS=$(db_args load_proxy)
start_server "$D2" --behind-proxy
CID=$(python3 -c "import json,sys;print(json.load(open(sys.argv[1]))['client_id'])" "$D2/bootstrap-credentials.json")
CS=$(python3 -c "import json,sys;print(json.load(open(sys.argv[1]))['client_secret'])" "$D2/bootstrap-credentials.json")
run "HTTP  GET /healthz (--behind-proxy)" "http://127.0.0.1:$HTTP_PORT/healthz"
CLIENT_ID=$CID CLIENT_SECRET=$CS run "HTTP  POST /oauth/token (--behind-proxy)" -s "$LUA" "http://127.0.0.1:$HTTP_PORT"
stop_server

# --- grants with per-request state: authorization_code and refresh_token ----
# Each code and each refresh token is single-use, so wrk cannot replay one
# request; the in-process generator (crates/gatehouse/benches/grants.rs)
# issues fresh ones and drives the real server over loopback.
if [ "${GRANTS:-1}" = 1 ] && [ "$DB" = sqlite ]; then
  echo "Token grants (in-process generator, ${DURATION}s each, $CONNECTIONS concurrent):"
  SECONDS=$DURATION CONCURRENCY=$CONNECTIONS cargo bench -q -p gatehouse --bench grants 2>&1 | grep -v '^Gatehouse' | sed 's/^/  HTTPS /'
  PROXY=1 SECONDS=$DURATION CONCURRENCY=$CONNECTIONS cargo bench -q -p gatehouse --bench grants 2>&1 | grep -v '^Gatehouse' | sed 's/^/  HTTP (--behind-proxy) /'
fi

# --- the peer: node-oidc-provider, a cluster of 2 processes -----------------
# This VM's speed drifts by up to 2x from one minute to the next, so the peer
# and Gatehouse (--behind-proxy, a fresh server) are measured in alternating
# rounds with the peer README's own command (wrk -t1 -c64, its token.lua),
# and the ratio of each round is reported with their median.
if [ "${PEER:-0}" = 1 ]; then
  ROUNDS=${ROUNDS:-3}
  PEER_DIR="$WORK/peer"
  cp -r ../shared/peers/oidc-provider/. "$PEER_DIR"
  (cd "$PEER_DIR" && npm install --silent --no-audit --no-fund >/dev/null)
  (cd "$PEER_DIR" && PORT=3000 WORKERS=2 exec node provider.mjs >/dev/null 2>&1) &
  PEER_PID=$!
  for _ in $(seq 1 100); do curl -s -o /dev/null http://127.0.0.1:3000/ && break; sleep 0.1; done
  D3="$WORK/side-by-side"
  DBARGS=$(db_args load_side)
  start_server "$D3" --behind-proxy
  CID=$(python3 -c "import json,sys;print(json.load(open(sys.argv[1]))['client_id'])" "$D3/bootstrap-credentials.json")
  CS=$(python3 -c "import json,sys;print(json.load(open(sys.argv[1]))['client_secret'])" "$D3/bootstrap-credentials.json")
  PEER_LUA=../shared/peers/oidc-provider/token.lua
  peer_run() { TOKEN_PATH=/token wrk -t1 -c64 -d"$1s" -s "$PEER_LUA" http://127.0.0.1:3000; }
  ours_run() { CLIENT_ID=$CID CLIENT_SECRET=$CS TOKEN_PATH=/oauth/token wrk -t1 -c64 -d"$1s" -s "$PEER_LUA" "http://127.0.0.1:$HTTP_PORT"; }
  # Node's JIT needs a few seconds of load before it reaches its pace: a
  # warm-up run for each first, not counted.
  peer_run 5 >/dev/null
  ours_run 5 >/dev/null
  echo "Side by side, wrk -t1 -c64, ${DURATION}s per run, alternating (POST token, client_credentials, plain HTTP):"
  RATIOS=
  for i in $(seq 1 "$ROUNDS"); do
    p=$(peer_run "$DURATION")
    o=$(ours_run "$DURATION")
    PR=$(echo "$p" | awk '/Requests\/sec/ {print $2}')
    OR=$(echo "$o" | awk '/Requests\/sec/ {print $2}')
    R=$(awk -v a="$OR" -v b="$PR" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }')
    RATIOS="$RATIOS $R"
    printf '  round %d: node-oidc-provider (2 processes) %s, Gatehouse --behind-proxy %s: %sx\n' \
      "$i" "$(echo "$p" | rps)" "$(echo "$o" | rps)" "$R"
  done
  echo "$RATIOS" | tr ' ' '\n' | grep . | sort -g |
    awk '{r[NR]=$1} END {m = (NR % 2 ? r[(NR+1)/2] : (r[NR/2] + r[NR/2+1]) / 2); printf "%-52s %.2fx (rounds: %s to %s)\n", "Gatehouse / peer, median of the rounds", m, r[1], r[NR]}'
  stop_server
fi
