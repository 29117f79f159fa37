#!/usr/bin/env bash
# Issue 16's list and search benchmark: one organization with USERS users and
# PRODUCTS products (crates/gatehouse/examples/seed.rs), every query of the
# issue's table through the HTTP API over one keep-alive HTTPS connection,
# one request at a time, against a release build of the real binary on
# loopback; prints p50/p99/max and the `total` of each query.
#
#   scripts/search-bench.sh                     # SQLite, 1,000,000 users and products, 200 samples
#   DB=postgres scripts/search-bench.sh         # the same on a throwaway PostgreSQL cluster
#   USERS=100000 PRODUCTS=100000 SAMPLES=50 scripts/search-bench.sh
#   KEEP=/tmp/gh-1m scripts/search-bench.sh     # keep the seeded data dir (SQLite) and reuse it next time
#   ONLY=users scripts/search-bench.sh          # only the user queries (or products, or dashboard)
#   NOISY=0 scripts/search-bench.sh             # skip the noisy-neighbour run
#
# After the table, the dashboard's Users page at this size (issue 32: a
# three-letter search and offset=10000, the whole HTML page; p99 < 100 ms),
# then the noisy-neighbour run (crates/gatehouse/examples/noisy.rs):
# NOISY (default 8) clients loop the slowest user search (NOISY_PATH, default
# /v1/users?q=ad) while point reads of one user are sent open loop at
# READ_RATE (default 2000) per second over 64 other connections for
# NOISY_SECONDS (default 20); prints the point reads' p50/p99.
#
# Settings: SAMPLES (per query, default 200; 5 warm-up requests each are not
# counted), MAX_SECONDS (per query: stop early after this long, default 300;
# the table says how many samples were taken), BIN (a binary to measure
# instead of this tree's release build), SEED (a built seed tool), HTTPS_PORT.
set -euo pipefail
cd "$(dirname "$0")/.."

DB=${DB:-sqlite}
USERS=${USERS:-1000000}
PRODUCTS=${PRODUCTS:-$USERS}
SAMPLES=${SAMPLES:-200}
MAX_SECONDS=${MAX_SECONDS:-300}
ONLY=${ONLY:-}
HTTPS_PORT=${HTTPS_PORT:-28543}
HTTP_PORT=${HTTP_PORT:-28180}
ADMIN_PORT=${ADMIN_PORT:-29190}

# BIN=path: measure that binary (e.g. a copy of an older build) instead of
# building this tree's. The binary is built on its own: built together with
# the example it would get the dev-dependencies' features.
if [ -z "${SEED:-}" ]; then
  CARGO_INCREMENTAL=0 cargo build --release -q -p gatehouse --example seed --example noisy
  SEED=target/release/examples/seed
fi
NOISY_BIN=${NOISY_BIN:-$(dirname "$SEED")/noisy}
if [ -z "${BIN:-}" ]; then
  CARGO_INCREMENTAL=0 cargo build --release -q -p gatehouse --bin gatehouse
  BIN=target/release/gatehouse
fi
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

DATA=${KEEP:-$WORK/data}
DBARGS=
if [ "$DB" = postgres ]; then
  PGBIN=$(dirname "$(readlink -f "$(command -v initdb || ls /usr/lib/postgresql/*/bin/initdb | tail -1)")")
  PG_PORT=${PG_PORT:-25532}
  PG_DATA="$WORK/pg"
  chmod 755 "$WORK"
  if [ "$(id -u)" = 0 ]; then RUNAS="runuser -u postgres --"; mkdir -p "$PG_DATA" && chown postgres "$PG_DATA"; fi
  $RUNAS "$PGBIN/initdb" -D "$PG_DATA" -A trust -U postgres >/dev/null
  $RUNAS "$PGBIN/pg_ctl" -D "$PG_DATA" -w -l "$PG_DATA/server.log" \
    -o "-p $PG_PORT -k $PG_DATA -c listen_addresses=127.0.0.1 -c max_connections=200 -c shared_buffers=512MB -c maintenance_work_mem=512MB -c max_wal_size=4GB -c synchronous_commit=off" start >/dev/null
  psql -q -h 127.0.0.1 -p "$PG_PORT" -U postgres -d postgres -c "CREATE DATABASE search_bench" >/dev/null
  URL="postgres://postgres@127.0.0.1:$PG_PORT/search_bench"
  DBARGS="--database-url $URL"
  DATA=$WORK/data
else
  URL="sqlite://$DATA/gatehouse.db"
fi
mkdir -p "$DATA"

if [ -f "$DATA/bench-org" ] && [ "$DB" = sqlite ]; then
  ORG=$(cat "$DATA/bench-org")
  echo "reusing $DATA (organization $ORG)"
else
  "$BIN" --data-dir "$DATA" $DBARGS migrate >/dev/null
  ORG=$("$BIN" --data-dir "$DATA" $DBARGS org create --name Big --plan enterprise \
    --per-minute 1000000000 --per-second 100000000 --json |
    python3 -c "import json,sys;print(json.load(sys.stdin)['id'])")
  START=$(date +%s.%N)
  "$SEED" --database-url "$URL" --org "$ORG" --users "$USERS" --products "$PRODUCTS"
  echo "seed: $(python3 -c "import sys;print(f'{float(sys.argv[2])-float(sys.argv[1]):.1f}')" "$START" "$(date +%s.%N)") s (USERS=$USERS PRODUCTS=$PRODUCTS, $DB)"
  echo "$ORG" >"$DATA/bench-org"
fi

GATEHOUSE_LOG=warn "$BIN" --data-dir "$DATA" $DBARGS serve --https-addr 127.0.0.1:$HTTPS_PORT \
  --http-addr 127.0.0.1:$HTTP_PORT --admin-addr 127.0.0.1:$ADMIN_PORT \
  --public-url "https://localhost:$HTTPS_PORT" >"$WORK/server.out" 2>"$WORK/server.err" &
SERVER_PID=$!
for _ in $(seq 1 600); do
  curl -sk -o /dev/null "https://127.0.0.1:$HTTPS_PORT/healthz" && break
  sleep 0.1
done
curl -sk -o /dev/null "https://127.0.0.1:$HTTPS_PORT/healthz" || { echo "server did not start" >&2; cat "$WORK/server.err" >&2; exit 1; }

CLIENT=$("$BIN" --data-dir "$DATA" $DBARGS client create --org "$ORG" --name search-bench \
  --scopes "users:read products:read" --json)
CID=$(echo "$CLIENT" | python3 -c "import json,sys;print(json.load(sys.stdin)['client_id'])")
CS=$(echo "$CLIENT" | python3 -c "import json,sys;print(json.load(sys.stdin)['client_secret'])")
TOKEN=$(curl -sk -u "$CID:$CS" -d grant_type=client_credentials "https://127.0.0.1:$HTTPS_PORT/oauth/token" |
  python3 -c "import json,sys;print(json.load(sys.stdin)['access_token'])")

echo "Gatehouse search bench ($DB, $BIN of $(git rev-parse --short HEAD), $(date -u '+%Y-%m-%d %H:%M') UTC): one keep-alive HTTPS connection, one request at a time, $SAMPLES samples per query (MAX_SECONDS=$MAX_SECONDS)"
TOKEN=$TOKEN PORT=$HTTPS_PORT SAMPLES=$SAMPLES MAX_SECONDS=$MAX_SECONDS ONLY=$ONLY python3 - <<'PY'
import http.client, json, os, ssl, time

token, port = os.environ["TOKEN"], int(os.environ["PORT"])
samples, cap, only = int(os.environ["SAMPLES"]), float(os.environ["MAX_SECONDS"]), os.environ["ONLY"]
ctx = ssl._create_unverified_context()
conn = http.client.HTTPSConnection("127.0.0.1", port, context=ctx)
headers = {"Authorization": f"Bearer {token}"}

def get(path):
    conn.request("GET", path, headers=headers)
    r = conn.getresponse()
    body = r.read()
    if r.status != 200:
        raise SystemExit(f"{path}: HTTP {r.status} {body[:200]!r}")
    return body

# (label, path): the users rows are issue 16's table; the selectivities
# follow crates/gatehouse/examples/seed.rs (25 surnames of 4 % each, 9
# domains of 11 % each, e-mail first.last.I@domain).
queries = [
    ("users: first page", "/v1/users?limit=20"),
    ("users: offset 10,000", "/v1/users?limit=20&offset=10000"),
    ("users: offset 500,000", "/v1/users?limit=20&offset=500000"),
    ("users: role=admin", "/v1/users?role=admin"),
    ("users: role=editor&status=inactive", "/v1/users?role=editor&status=inactive"),
    ("users: q=.500000@ (one e-mail)", "/v1/users?q=.500000%40"),
    ("users: q=zzzzqqq (no match)", "/v1/users?q=zzzzqqq"),
    ("users: q=hopper (surname, ~4 %)", "/v1/users?q=hopper"),
    ("users: q=northwind (domain, ~11 %)", "/v1/users?q=northwind"),
    ("users: q=ad (two letters)", "/v1/users?q=ad"),
    ("users: q=knuth&role=admin", "/v1/users?q=knuth&role=admin"),
    ("products: first page", "/v1/products?limit=20"),
    ("products: offset 500,000", "/v1/products?limit=20&offset=500000"),
    ("products: status=discontinued (~5 %)", "/v1/products?status=discontinued"),
    ("products: status=out_of_stock", "/v1/products?status=out_of_stock"),
    ("products: q=cot (prefix, ~12 %)", "/v1/products?q=cot"),
    ("products: q=blue shirt (~0.8 %)", "/v1/products?q=blue%20shirt"),
    ("products: q=s (one letter)", "/v1/products?q=s"),
    ("products: q=0500000 (one SKU)", "/v1/products?q=0500000"),
    ("products: q=zzzzqqq (no match)", "/v1/products?q=zzzzqqq"),
    ("products: q=wool&status=out_of_stock", "/v1/products?q=wool&status=out_of_stock"),
]
if only:
    queries = [q for q in queries if q[0].startswith(only)]

def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]

print(f"| Query | n | p50 ms | p99 ms | max ms | total |")
print(f"|---|---|---|---|---|---|")
for label, path in queries:
    for _ in range(5):
        body = get(path)
    total = json.loads(body)["meta"]["total"]
    times = []
    began = time.monotonic()
    while len(times) < samples and time.monotonic() - began < cap:
        t = time.perf_counter()
        get(path)
        times.append((time.perf_counter() - t) * 1000)
    print(f"| {label} | {len(times)} | {pct(times, 50):.1f} | {pct(times, 99):.1f} | {max(times):.1f} | {total:,} |", flush=True)
PY

# Issue 32: the dashboard's Users page at this size, as a person sees it:
# server time to the last byte of the whole HTML page (its in-process `/v1`
# calls included) for a three-letter search and a deep page, over one
# keep-alive HTTPS connection with the session cookie of an admin who signed
# in through the real sign-in pages. Target: p99 < 100 ms.
if [ -z "$ONLY" ] || [ "$ONLY" = dashboard ]; then
  BENCH_PASSWORD=bench-dashboard-password-1234
  printf '%s\n' "$BENCH_PASSWORD" | "$BIN" --data-dir "$DATA" $DBARGS user create --org "$ORG" \
    --email bench-admin@example.com --name "Bench Admin" --role admin --password-stdin >/dev/null 2>&1 || true
  echo
  echo "Dashboard pages ($DB): server time to the last byte of the HTML page, $SAMPLES samples each"
  PORT=$HTTPS_PORT SAMPLES=$SAMPLES MAX_SECONDS=$MAX_SECONDS PASSWORD=$BENCH_PASSWORD python3 - <<'PY'
import http.client, http.cookiejar, os, ssl, time, urllib.parse, urllib.request
from html.parser import HTMLParser

port, samples, cap = int(os.environ["PORT"]), int(os.environ["SAMPLES"]), float(os.environ["MAX_SECONDS"])
base = f"https://localhost:{port}"
ctx = ssl._create_unverified_context()
jar = http.cookiejar.CookieJar()
opener = urllib.request.build_opener(urllib.request.HTTPSHandler(context=ctx), urllib.request.HTTPCookieProcessor(jar))

class Forms(HTMLParser):
    """The forms of a page: action and fields (hidden ones with values)."""
    def __init__(self):
        super().__init__(); self.forms = []
    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "form":
            self.forms.append({"action": a.get("action", ""), "fields": {}})
        elif tag == "input" and self.forms and a.get("name"):
            self.forms[-1]["fields"][a["name"]] = a.get("value") or ""

# The real sign-in: the dashboard sends the browser to the authorization
# server's page, whose form leads back through the callback.
page = opener.open(f"{base}/dashboard/signin")
forms = Forms(); forms.feed(page.read().decode())
login = next(f for f in forms.forms if "password" in f["fields"])
fields = dict(login["fields"], email="bench-admin@example.com", password=os.environ["PASSWORD"])
done = opener.open(urllib.parse.urljoin(page.geturl(), login["action"]), urllib.parse.urlencode(fields).encode())
if "/dashboard/" not in done.geturl():
    raise SystemExit(f"sign-in did not reach the dashboard: {done.geturl()}")
cookie = "; ".join(f"{c.name}={c.value}" for c in jar)

conn = http.client.HTTPSConnection("127.0.0.1", port, context=ctx)
def get(path):
    conn.request("GET", path, headers={"Cookie": cookie, "Host": f"localhost:{port}"})
    r = conn.getresponse(); body = r.read()
    if r.status != 200:
        raise SystemExit(f"{path}: HTTP {r.status} {body[:300]!r}")
    return body

def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]

print("| Page | n | p50 ms | p99 ms | max ms | bytes |")
print("|---|---|---|---|---|---|")
for label, path in [
    ("/dashboard/users (first page)", "/dashboard/users"),
    ("/dashboard/users?q=hop (3-letter prefix, ~4 %)", "/dashboard/users?q=hop"),
    ("/dashboard/users?q=ada (3-letter prefix)", "/dashboard/users?q=ada"),
    ("/dashboard/users?offset=10000", "/dashboard/users?offset=10000"),
    ("/dashboard/products?q=cot", "/dashboard/products?q=cot"),
]:
    for _ in range(5):
        body = get(path)
    times, began = [], time.monotonic()
    while len(times) < samples and time.monotonic() - began < cap:
        t = time.perf_counter(); get(path); times.append((time.perf_counter() - t) * 1000)
    print(f"| {label} | {len(times)} | {pct(times, 50):.1f} | {pct(times, 99):.1f} | {max(times):.1f} | {len(body):,} |", flush=True)
PY
fi

if [ "${NOISY:-8}" != 0 ]; then
  USER_ID=$(curl -sk -H "Authorization: Bearer $TOKEN" "https://127.0.0.1:$HTTPS_PORT/v1/users?limit=1" |
    python3 -c "import json,sys;print(json.load(sys.stdin)['data'][0]['id'])")
  "$NOISY_BIN" --base "https://localhost:$HTTPS_PORT" --ca "$DATA/tls/cert.pem" --token "$TOKEN" \
    --noisy "${NOISY:-8}" --noisy-path "${NOISY_PATH:-/v1/users?q=ad}" --read-path "/v1/users/$USER_ID" \
    --rate "${READ_RATE:-2000}" --conns 64 --seconds "${NOISY_SECONDS:-20}"
fi
