#!/usr/bin/env bash
# Side-by-side throughput of two gatehouse binaries, behind a proxy (plain
# HTTP, so TLS does not hide the difference), in alternating rounds on
# loopback: this VM's speed drifts between minutes, so only rounds taken in
# the same minutes compare.
#
#   scripts/ab.sh OLD_BINARY NEW_BINARY
#
# Each round starts each binary on a fresh SQLite data directory and measures
# an authenticated GET /v1/users/{id} and POST /oauth/token
# (client_credentials) with wrk. Prints every round, the medians and
# new/old. Settings: ROUNDS (default 5), DURATION (seconds per run, default
# 5), CONNECTIONS (64), THREADS (1: wrk shares the two cores with the server).
set -euo pipefail
OLD=${1:?usage: scripts/ab.sh OLD_BINARY NEW_BINARY}
NEW=${2:?usage: scripts/ab.sh OLD_BINARY NEW_BINARY}
ROUNDS=${ROUNDS:-5}
DURATION=${DURATION:-5}
CONNECTIONS=${CONNECTIONS:-64}
THREADS=${THREADS:-1}
PORT=${PORT:-28181}
if ! command -v wrk >/dev/null; then
  apt-get install -y -qq wrk >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq wrk; }
fi
WORK=$(mktemp -d)
# `measure` runs in a subshell ($(…)): the server's pid goes to a file, so
# cleanup finds it even when a round fails half-way.
cleanup() { [ -s "$WORK/pid" ] && kill "$(cat "$WORK/pid")" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$WORK"; }
trap cleanup EXIT
cat > "$WORK/token.lua" <<'LUA'
wrk.method = "POST"
wrk.path = "/oauth/token"
wrk.body = "grant_type=client_credentials&scope=users%3Aread"
wrk.headers["Content-Type"] = "application/x-www-form-urlencoded"
wrk.headers["Authorization"] = os.getenv("BASIC")
LUA
json() { python3 -c "import json,sys;print(json.load(sys.stdin)$1)"; }
rps() { wrk -t"$THREADS" -c"$CONNECTIONS" -d"${DURATION}s" "$@" | awk '/Requests\/sec/ {r=$2} /Non-2xx/ {e=$5} END {if (e) {print "ERR"} else {print r}}'; }

measure() { # binary -> "read token"
  local bin=$1 dir="$WORK/d$RANDOM"
  GATEHOUSE_LOG=warn "$bin" --data-dir "$dir" serve --behind-proxy --http-addr 127.0.0.1:$PORT \
    --admin-addr 127.0.0.1:0 --public-url https://localhost >"$dir.out" 2>"$dir.err" &
  local pid=$!
  echo "$pid" >"$WORK/pid"
  for _ in $(seq 1 100); do curl -s -o /dev/null "http://127.0.0.1:$PORT/healthz" && break; sleep 0.1; done
  # An enterprise organization whose plan does not limit the load (D28).
  local org client cid cs token user
  org=$("$bin" --data-dir "$dir" org create --name Load --plan enterprise --per-minute 1000000000 --per-second 100000000 --json | json "['id']")
  client=$("$bin" --data-dir "$dir" client create --org "$org" --name load --scopes "users:read users:write" --json)
  cid=$(echo "$client" | json "['client_id']")
  cs=$(echo "$client" | json "['client_secret']")
  token=$(curl -s -u "$cid:$cs" -d grant_type=client_credentials "http://127.0.0.1:$PORT/oauth/token" | json "['access_token']")
  user=$(curl -s -H "Authorization: Bearer $token" -H 'Content-Type: application/json' \
    -d '{"email":"load@example.com","name":"Load Test","role":"viewer"}' "http://127.0.0.1:$PORT/v1/users" | json "['data']['id']")
  local read tok
  read=$(rps -H "Authorization: Bearer $token" "http://127.0.0.1:$PORT/v1/users/$user")
  tok=$(BASIC="Basic $(printf '%s:%s' "$cid" "$cs" | base64 -w0)" rps -s "$WORK/token.lua" "http://127.0.0.1:$PORT")
  kill "$pid"; wait "$pid" 2>/dev/null || true; : >"$WORK/pid"
  echo "$read $tok"
}

echo "old: $OLD"
echo "new: $NEW"
echo "behind a proxy (plain HTTP), ${DURATION}s per run, $CONNECTIONS connections, $THREADS wrk thread(s), loopback"
printf '%-6s %14s %14s %14s %14s\n' round "old read/s" "new read/s" "old token/s" "new token/s"
: >"$WORK/rows"
for r in $(seq 1 "$ROUNDS"); do
  o=$(measure "$OLD"); n=$(measure "$NEW")
  set -- $o $n
  printf '%-6s %14s %14s %14s %14s\n' "$r" "$1" "$3" "$2" "$4"
  echo "$1 $3 $2 $4" >>"$WORK/rows"
done
python3 - "$WORK/rows" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
if any("ERR" in r for r in rows):
    print("some runs had non-2xx answers: not comparable"); sys.exit(1)
cols = list(zip(*[[float(x) for x in r] for r in rows]))
m = [statistics.median(c) for c in cols]
print(f"median  read: old {m[0]:.0f}, new {m[1]:.0f} ({m[1]/m[0]:.1%}); token: old {m[2]:.0f}, new {m[3]:.0f} ({m[3]/m[2]:.1%})")
ratios_read = [n / o for o, n in zip(cols[0], cols[1])]
ratios_tok = [n / o for o, n in zip(cols[2], cols[3])]
print(f"per-round new/old  read: {', '.join(f'{x:.2f}' for x in ratios_read)}; token: {', '.join(f'{x:.2f}' for x in ratios_tok)}")
PY
