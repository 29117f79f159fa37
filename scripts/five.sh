#!/usr/bin/env bash
# The five figures every change reports before and after (issue 25, and
# the performance issue's targets), for one or two gatehouse binaries, in
# alternating rounds on loopback: this VM's speed drifts between minutes,
# so only figures taken in the same minutes compare.
#
#   scripts/five.sh BINARY [OTHER_BINARY]
#
# Per binary and round, on a fresh SQLite data directory, behind a proxy
# (plain HTTP, so TLS does not hide the server's own work):
#   1. read/healthz  authenticated GET /v1/users/{id} ÷ GET /healthz (req/s)
#   2. token/base    POST /oauth/token (client_credentials) ÷ the baseline
#                    sign-only server built from ../shared/peers/minimal-token
#                    (measured in the same round)
#   3. idle MiB      resident memory once started and set up, before load
#   4. reads MiB     resident memory after the read run (64 connections)
#   5. cold ms       from exec to the first 200 from /healthz, fresh data
#                    directory (database, keys, certificate created)
# Prints every round, then the medians and, with two binaries, other/first.
# Settings: ROUNDS (3), DURATION (seconds per wrk run, 5), CONNECTIONS (64),
# THREADS (1: wrk shares the two cores with the server), PORT (28191).
set -euo pipefail
A=${1:?usage: scripts/five.sh BINARY [OTHER_BINARY]}
B=${2:-}
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-5}
CONNECTIONS=${CONNECTIONS:-64}
THREADS=${THREADS:-1}
PORT=${PORT:-28191}
BASE_PORT=$((PORT + 1))
HERE=$(cd "$(dirname "$0")/.." && pwd)
PEER="$HERE/../shared/peers/minimal-token"
for tool in wrk curl openssl python3; do
  command -v "$tool" >/dev/null || { apt-get update -qq && apt-get install -y -qq "$tool" >/dev/null; }
done
WORK=$(mktemp -d)
cleanup() {
  for f in "$WORK"/*.pid; do [ -s "$f" ] && kill "$(cat "$f")" 2>/dev/null; done
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

# Each binary runs from a fresh copy: resident memory counts the binary's
# code pages the kernel maps around each fault, and how many it maps
# depends on how the file sits in the page cache (a binary written an hour
# ago and a fresh build of the same bytes differ by 2 MiB). Copies made
# the same moment compare like with like.
A_NAME=$A B_NAME=$B
cp "$A" "$WORK/first" && A="$WORK/first"
if [ -n "$B" ]; then cp "$B" "$WORK/other" && B="$WORK/other"; fi
sync

# The baseline: built once per checkout of the peer (release), outside the
# repository, with its own keys and an empty users database.
BASE_DIR=${BASE_DIR:-/tmp/gatehouse-minimal-token}
if [ ! -x "$BASE_DIR/target/release/server" ]; then
  mkdir -p "$BASE_DIR" && cp -r "$PEER/." "$BASE_DIR"
  (cd "$BASE_DIR" && cargo build --release -q)
fi
if [ ! -f "$BASE_DIR/keys/ec-private.pem" ]; then
  mkdir -p "$BASE_DIR/keys"
  openssl ecparam -genkey -name prime256v1 2>/dev/null | openssl pkcs8 -topk8 -nocrypt -out "$BASE_DIR/keys/ec-private.pem"
  openssl ec -in "$BASE_DIR/keys/ec-private.pem" -pubout -out "$BASE_DIR/keys/ec-public.pem" 2>/dev/null
  python3 -c "import sqlite3; db=sqlite3.connect('$BASE_DIR/users.db'); db.execute('create table if not exists users(id integer primary key, username text, email text, display_name text, created_at text)'); db.commit()"
fi

cat > "$WORK/token.lua" <<'LUA'
wrk.method = "POST"
wrk.path = os.getenv("TOKEN_PATH")
wrk.body = "grant_type=client_credentials&scope=users%3Aread"
wrk.headers["Content-Type"] = "application/x-www-form-urlencoded"
wrk.headers["Authorization"] = os.getenv("BASIC")
LUA
json() { python3 -c "import json,sys;print(json.load(sys.stdin)$1)"; }
rps() { wrk -t"$THREADS" -c"$CONNECTIONS" -d"${DURATION}s" "$@" | awk '/Requests\/sec/ {r=$2} /Non-2xx/ {e=$5} END {if (e) {print "ERR"} else {print r}}'; }
rss_mib() { awk '/VmRSS/ {printf "%.1f", $2 / 1024}' "/proc/$1/status"; }
now_ms() { date +%s%3N; }
basic() { printf 'Basic %s' "$(printf '%s:%s' "$1" "$2" | base64 -w0)"; }

baseline() { # -> tokens/s of the sign-only server
  (cd "$BASE_DIR" && PORT=$BASE_PORT DB=users.db KEY_DIR=keys exec ./target/release/server >/dev/null 2>&1) &
  echo $! >"$WORK/base.pid"
  for _ in $(seq 1 100); do curl -s -o /dev/null "http://127.0.0.1:$BASE_PORT/hello" && break; sleep 0.05; done
  local r
  r=$(TOKEN_PATH=/token-fast BASIC="$(basic perf-client perf-secret-0123456789abcdef)" rps -s "$WORK/token.lua" "http://127.0.0.1:$BASE_PORT")
  kill "$(cat "$WORK/base.pid")" 2>/dev/null; wait "$(cat "$WORK/base.pid")" 2>/dev/null || true; : >"$WORK/base.pid"
  echo "$r"
}

measure() { # binary baseline -> "read/healthz token/base idle_mib reads_mib cold_ms"
  local bin=$1 base=$2 dir="$WORK/d$RANDOM"
  local t0 t1
  t0=$(now_ms)
  GATEHOUSE_LOG=warn "$bin" --data-dir "$dir" serve --behind-proxy --http-addr 127.0.0.1:$PORT \
    --admin-addr 127.0.0.1:0 --public-url https://localhost >"$dir.out" 2>"$dir.err" &
  local pid=$!
  echo "$pid" >"$WORK/gh.pid"
  for _ in $(seq 1 2000); do curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT/healthz" 2>/dev/null | grep -q 200 && break; sleep 0.005; done
  t1=$(now_ms)
  # An enterprise organization whose plan does not limit the load (D28).
  local org client cid cs token user
  org=$("$bin" --data-dir "$dir" org create --name Load --plan enterprise --per-minute 1000000000 --per-second 100000000 --json | json "['id']")
  client=$("$bin" --data-dir "$dir" client create --org "$org" --name load --scopes "users:read users:write" --json)
  cid=$(echo "$client" | json "['client_id']")
  cs=$(echo "$client" | json "['client_secret']")
  token=$(curl -s -u "$cid:$cs" -d grant_type=client_credentials "http://127.0.0.1:$PORT/oauth/token" | json "['access_token']")
  user=$(curl -s -H "Authorization: Bearer $token" -H 'Content-Type: application/json' \
    -d '{"email":"load@example.com","name":"Load Test","role":"viewer"}' "http://127.0.0.1:$PORT/v1/users" | json "['data']['id']")
  sleep 1
  local idle healthz read reads tok
  idle=$(rss_mib "$pid")
  healthz=$(rps "http://127.0.0.1:$PORT/healthz")
  read=$(rps -H "Authorization: Bearer $token" "http://127.0.0.1:$PORT/v1/users/$user")
  reads=$(rss_mib "$pid")
  tok=$(TOKEN_PATH=/oauth/token BASIC="$(basic "$cid" "$cs")" rps -s "$WORK/token.lua" "http://127.0.0.1:$PORT")
  kill "$pid"; wait "$pid" 2>/dev/null || true; : >"$WORK/gh.pid"
  python3 -c "
h, r, t, b = '$healthz', '$read', '$tok', '$base'
bad = 'ERR' in (h, r, t, b)
print('ERR' if bad else f'{float(r)/float(h):.3f}', 'ERR' if bad else f'{float(t)/float(b):.3f}', '$idle', '$reads', $t1 - $t0)"
}

echo "first: $A_NAME"
[ -n "$B" ] && echo "other: $B_NAME"
echo "behind a proxy (plain HTTP), ${DURATION}s per run, $CONNECTIONS connections, $THREADS wrk thread(s), loopback, $ROUNDS rounds"
printf '%-10s %-6s %13s %11s %9s %10s %8s\n' binary round read/healthz token/base "idle MiB" "reads MiB" "cold ms"
: >"$WORK/rows"
for r in $(seq 1 "$ROUNDS"); do
  base=$(baseline)
  for which in first other; do
    bin=$A; [ "$which" = other ] && bin=$B
    [ -z "$bin" ] && continue
    row=$(measure "$bin" "$base")
    printf '%-10s %-6s %13s %11s %9s %10s %8s\n' "$which" "$r" $row
    echo "$which $row" >>"$WORK/rows"
  done
done
python3 - "$WORK/rows" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
if any("ERR" in r for r in rows):
    print("some runs had non-2xx answers: not comparable"); sys.exit(1)
names = ["read/healthz", "token/base", "idle MiB", "reads MiB", "cold ms"]
med = {}
for which in ("first", "other"):
    got = [[float(x) for x in r[1:]] for r in rows if r[0] == which]
    if got:
        med[which] = [statistics.median(c) for c in zip(*got)]
        print(f"median {which:5}: " + ", ".join(f"{n} {v:.3f}" if v < 10 else f"{n} {v:.0f}" for n, v in zip(names, med[which])))
if "other" in med:
    print("other/first: " + ", ".join(f"{n} {o / f:.1%}" for n, f, o in zip(names, med["first"], med["other"])))
PY
