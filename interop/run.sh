#!/usr/bin/env bash
# Client libraries of other ecosystems, unmodified, against the real binary
# (see interop/README.md):
#
#   node     openid-client 6 (with otpauth for D56's codes) and standardwebhooks (node --test interop/node/*.test.mjs)
#   python   authlib 1.9, standardwebhooks and svix (python3 -m pytest interop/python -q)
#   browser  Chromium via puppeteer-core + axe-core (interop/node/browser.test.mjs)
#
#   interop/run.sh                 # all three
#   interop/run.sh node python     # some of them
#   SCREENSHOTS=1 interop/run.sh browser   # also writes docs/screenshots/*.png
#
# Starts BIN (default target/debug/gatehouse, built when missing) over HTTPS
# on a free loopback port with a temporary data directory, registers an
# organization, a user with a password and a confidential client through the
# CLI, and trusts the server's self-signed certificate the documented way
# (NODE_EXTRA_CA_CERTS for Node, verify=<path> for Python). Every suite runs
# even when an earlier one fails; the exit status is non-zero when any failed.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

BIN=${BIN:-target/debug/gatehouse}
CHROMIUM=${CHROMIUM:-/usr/bin/chromium}
SUITES=("$@")
[ ${#SUITES[@]} -gt 0 ] || SUITES=(node python browser)
want() { local s; for s in "${SUITES[@]}"; do [ "$s" = "$1" ] && return 0; done; return 1; }

[ -x "$BIN" ] || cargo build -q -p gatehouse --bin gatehouse
BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")

json() { python3 -c 'import json,sys; d=json.load(sys.stdin); print(d[sys.argv[1]])' "$1"; }

# --- tools: npm packages from the committed lock file, PyPI pins in a venv ---
if want node || want browser; then
  (cd interop/node && PUPPETEER_SKIP_DOWNLOAD=1 npm ci --no-audit --no-fund --loglevel=error)
fi
# A venv under target/; where python3 has no venv module (Debian without
# python3-venv), the pins go to the user site instead.
VENV=${INTEROP_VENV:-$ROOT/target/interop-venv}
PY=python3
if want python; then
  if [ -x "$VENV/bin/python" ] || python3 -m venv "$VENV" >/dev/null 2>&1; then
    PY="$VENV/bin/python"
    "$PY" -m pip install --quiet --disable-pip-version-check -r interop/python/requirements.txt
  else
    rm -rf "$VENV"
    echo "interop: python3 -m venv is unavailable; installing into the user site" >&2
    python3 -m pip install --quiet --disable-pip-version-check --user -r interop/python/requirements.txt
  fi
fi

# --- the server ---------------------------------------------------------------
WORK=$(mktemp -d)
LOG=${LOG:-$ROOT/target/interop-server.log}
mkdir -p "$(dirname "$LOG")"
export GATEHOUSE_DATA_DIR="$WORK/data" GATEHOUSE_LOG=${GATEHOUSE_LOG:-warn}
cleanup() {
  status=$?
  if [ -n "${PID:-}" ]; then kill "$PID" 2>/dev/null; wait "$PID" 2>/dev/null || true; fi
  rm -rf "$WORK"
  if [ "$status" -ne 0 ] && [ -s "$LOG" ]; then
    echo "--- server errors ($LOG) ---" >&2
    grep -E "ERROR|panicked" "$LOG" | tail -20 >&2 || true
  fi
  exit "$status"
}
trap cleanup EXIT

PASSWORD="interop passphrase $(date +%s%N)"
USER_NAME="Ada Interop"
EMAIL="ada@interop.example"
# Loopback redirect URI (D20): nothing needs to listen there, the flows stop
# at the redirect and hand its URL to the library.
REDIRECT_URI="http://127.0.0.1/callback"

"$BIN" migrate --json >/dev/null
# Generous limits: this measures interoperability, not the rate limiter.
ORG=$("$BIN" org create --name "Interop" --plan enterprise --per-minute 100000 --per-second 10000 --json | json id)
USER_ID=$(printf '%s\n' "$PASSWORD" | "$BIN" user create --org "$ORG" --email "$EMAIL" --name "$USER_NAME" --role editor --password-stdin --json | json id)
# D56: mfa.test.mjs adds an authenticator app to this one (the user above
# never gets a factor, so the other suites' sign-ins stay password-only).
MFA_EMAIL="grace@interop.example"
MFA_USER_ID=$(printf '%s\n' "$PASSWORD" | "$BIN" user create --org "$ORG" --email "$MFA_EMAIL" --name "Grace Interop" --role editor --password-stdin --json | json id)
# profile:write: test_authlib.py ends sessions (D57) with the client's tokens.
API_SCOPES="users:read profile:read profile:write products:read"
if CLIENT=$("$BIN" client create --org "$ORG" --name "Interop RP" --scopes "openid profile email $API_SCOPES" --redirect-uri "$REDIRECT_URI" --json 2>"$WORK/client.err"); then
  OIDC_SCOPES=1
else
  # A binary from before D49 knows no openid scope: register the OAuth 2.0
  # scopes only, so the OAuth parts still run (the OIDC parts then fail).
  echo "interop: this binary refused the OIDC scopes ($(head -c 200 "$WORK/client.err")); registering the OAuth 2.0 scopes only" >&2
  OIDC_SCOPES=0
  CLIENT=$("$BIN" client create --org "$ORG" --name "Interop RP" --scopes "$API_SCOPES" --redirect-uri "$REDIRECT_URI" --json)
fi
CLIENT_ID=$(echo "$CLIENT" | json client_id)
CLIENT_SECRET=$(echo "$CLIENT" | json client_secret)

PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
# D1 (revised): with no public_url the issuer is https://localhost:<port>,
# which is also a name the self-signed certificate carries.
ISSUER="https://localhost:$PORT"
# D57: a browser sign-in ends after SESSION_IDLE_SECS without browser use,
# so test_authlib.py can see one expire; below the 5-minute minimum only with
# GATEHOUSE_TEST_SETTINGS=1 (which logs a warning at start). The other
# suites sign in and consent in a new browser each time, within seconds;
# the longest, passkey.test.mjs's step-up, keeps a sign-in from its
# password through a passkey's registration to the step-up (about 4 s here,
# more on a loaded CI machine), hence 10 s. The maximum (1 h) stays out of
# the way.
SESSION_IDLE_SECS=10
# D55: webhooks to the suites' own loopback receivers.
GATEHOUSE_TEST_SETTINGS=1 GATEHOUSE_SESSION_IDLE="${SESSION_IDLE_SECS}s" GATEHOUSE_SESSION_MAX=1h \
  "$BIN" serve --https-addr "127.0.0.1:$PORT" --http-addr 127.0.0.1:0 --admin-addr 127.0.0.1:0 \
  --webhook-allow-cidrs 127.0.0.1/32 >/dev/null 2>"$LOG" &
PID=$!
CA="$GATEHOUSE_DATA_DIR/tls/cert.pem"
for _ in $(seq 1 150); do
  [ -s "$CA" ] && curl -sf --cacert "$CA" "$ISSUER/readyz" >/dev/null 2>&1 && break
  kill -0 "$PID" 2>/dev/null || { echo "interop: the server exited" >&2; cat "$LOG" >&2; exit 1; }
  sleep 0.1
done
curl -sf --cacert "$CA" "$ISSUER/readyz" >/dev/null
if curl -sf --cacert "$CA" -o /dev/null "$ISSUER/.well-known/openid-configuration"; then OIDC=1; else OIDC=0; fi
echo "interop: $("$BIN" --version) at $ISSUER (OpenID configuration published: $([ $OIDC = 1 ] && echo yes || echo no); OIDC scopes registered: $([ $OIDC_SCOPES = 1 ] && echo yes || echo no))"

export GH_ISSUER="$ISSUER" GH_CA="$CA" GH_CLIENT_ID="$CLIENT_ID" GH_CLIENT_SECRET="$CLIENT_SECRET" \
  GH_REDIRECT_URI="$REDIRECT_URI" GH_EMAIL="$EMAIL" GH_PASSWORD="$PASSWORD" GH_USER_ID="$USER_ID" \
  GH_USER_NAME="$USER_NAME" GH_ORG="$ORG" GH_BIN="$BIN" GH_SESSION_IDLE_SECS="$SESSION_IDLE_SECS" \
  GH_MFA_EMAIL="$MFA_EMAIL" GH_MFA_USER_ID="$MFA_USER_ID"

FAILED=()
run_suite() {
  local name=$1; shift
  echo "=== interop: $name ==="
  local rc=0
  "$@" || rc=$?
  if [ "$name" = python ] && [ "$rc" -eq 5 ]; then
    # pytest's 5 is "no tests were collected" (e.g. a -k filter in
    # PYTEST_ADDOPTS that selects nothing): not a failure of the run.
    echo "interop: pytest collected no tests (exit 5); not counted as a failure" >&2
    rc=0
  fi
  [ "$rc" -eq 0 ] || FAILED+=("$name (exit $rc)")
}

if want node; then
  run_suite node env NODE_EXTRA_CA_CERTS="$CA" node --test --test-reporter=spec interop/node/oidc.test.mjs interop/node/mfa.test.mjs interop/node/webhooks.test.mjs
fi
if want python; then
  run_suite python "$PY" -m pytest interop/python -q -p no:cacheprovider
fi
if want browser; then
  run_suite browser env NODE_EXTRA_CA_CERTS="$CA" CHROMIUM="$CHROMIUM" SCREENSHOTS="${SCREENSHOTS:-}" \
    SCREENSHOT_DIR="$ROOT/docs/screenshots" node --test --test-reporter=spec interop/node/browser.test.mjs interop/node/passkey.test.mjs
fi

if [ ${#FAILED[@]} -gt 0 ]; then
  echo "interop: FAILED: ${FAILED[*]}" >&2
  exit 1
fi
echo "interop: all passed (${SUITES[*]})"
