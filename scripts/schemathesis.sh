#!/usr/bin/env bash
# Property-based API conformance run (issue 4, D35): starts a real server on
# loopback, points schemathesis (PyPI) at its /v1/openapi.json and fails on
# any server error or any response that violates the document.
#
#   scripts/schemathesis.sh            # bounded: MAX_EXAMPLES per operation (default 25)
#   MAX_EXAMPLES=200 scripts/schemathesis.sh
#
# Needs `st` (pip install schemathesis) and a built binary (BIN, default
# target/debug/gatehouse).
set -euo pipefail
cd "$(dirname "$0")/.."

BIN=${BIN:-target/debug/gatehouse}
MAX_EXAMPLES=${MAX_EXAMPLES:-25}
MAX_TIME=${MAX_TIME:-240}
LOG=${LOG:-target/schemathesis-server.log}
command -v st >/dev/null || { echo "schemathesis (st) is not installed: pip install schemathesis" >&2; exit 1; }
[ -x "$BIN" ] || cargo build -q -p gatehouse

DATA=$(mktemp -d)
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
URL="http://127.0.0.1:$PORT"
export GATEHOUSE_DATA_DIR="$DATA" GATEHOUSE_LOG=${GATEHOUSE_LOG:-warn}
cleanup() {
  status=$?
  if [ -n "${PID:-}" ]; then kill "$PID" 2>/dev/null; wait "$PID" 2>/dev/null || true; fi
  rm -rf "$DATA"
  if [ "$status" -ne 0 ] && [ -s "$LOG" ]; then
    echo "--- server errors ($LOG) ---" >&2
    grep -E "ERROR|panicked" "$LOG" | tail -20 >&2 || true
  fi
  exit "$status"
}
trap cleanup EXIT

# An enterprise organization with generous limits, so the run measures the
# API and not the rate limiter (D28 is covered by the integration tests).
"$BIN" migrate --json >/dev/null
ORG=$("$BIN" org create --name "Schemathesis" --plan enterprise --per-minute 10000000 --per-second 1000000 --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
CLIENT=$("$BIN" client create --org "$ORG" --name fuzz --scopes "admin users:read users:write products:read products:write profile:read profile:write" --json)
ID=$(echo "$CLIENT" | python3 -c 'import json,sys; print(json.load(sys.stdin)["client_id"])')
SECRET=$(echo "$CLIENT" | python3 -c 'import json,sys; print(json.load(sys.stdin)["client_secret"])')
"$BIN" client approve-admin "$ID" --json >/dev/null
# The management API's run (below) has a client of its own.
MANAGER=$("$BIN" client create --org "$ORG" --name fuzz-manager --scopes "admin applications:read applications:write" --json)
MID=$(echo "$MANAGER" | python3 -c 'import json,sys; print(json.load(sys.stdin)["client_id"])')
MSECRET=$(echo "$MANAGER" | python3 -c 'import json,sys; print(json.load(sys.stdin)["client_secret"])')
"$BIN" client approve-admin "$MID" --json >/dev/null

"$BIN" serve --behind-proxy --http-addr "127.0.0.1:$PORT" --admin-addr 127.0.0.1:0 --public-url "$URL" >/dev/null 2>"$LOG" &
PID=$!
for _ in $(seq 1 100); do curl -sf "$URL/readyz" >/dev/null && break; sleep 0.1; done

TOKEN=$(curl -sf -u "$ID:$SECRET" -d grant_type=client_credentials \
  -d "scope=admin users:read users:write products:read products:write" "$URL/oauth/token" |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["access_token"])')

# Fetched now: the first run tries wrong client secrets, after which D28's
# failure guard rightly refuses token requests from this address a while.
MTOKEN=$(curl -sf -u "$MID:$MSECRET" -d grant_type=client_credentials \
  -d "scope=admin applications:read applications:write" "$URL/oauth/token" |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["access_token"])')
CHECKS=not_a_server_error,status_code_conformance,content_type_conformance,response_headers_conformance,response_schema_conformance

# /v0 is gone by design (410 for every method) and /oauth/authorize answers
# with HTML pages and redirects; both have their own integration tests. The
# management API (D46) runs second, with a credential of its own: an
# organization-wide token lists every application, its own among them, and
# schemathesis's stateful links then delete or narrow that application,
# which rightly kills the token.
st run "$URL/v1/openapi.json" "$@" \
  --url "$URL" \
  --header "Authorization: Bearer $TOKEN" \
  --checks "$CHECKS" \
  --exclude-path-regex '^/v0/|^/v1/(applications|api-keys)' \
  --max-examples "$MAX_EXAMPLES" \
  --max-time "$MAX_TIME" \
  --workers 1 \
  --seed 1 \
  --no-color

st run "$URL/v1/openapi.json" "$@" \
  --url "$URL" \
  --header "Authorization: Bearer $MTOKEN" \
  --checks "$CHECKS" \
  --include-path-regex '^/v1/(applications|api-keys)' \
  --max-examples "$MAX_EXAMPLES" \
  --max-time "$MAX_TIME" \
  --workers 1 \
  --seed 1 \
  --no-color
