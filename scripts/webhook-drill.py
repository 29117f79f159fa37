#!/usr/bin/env python3
"""The webhooks drill (issue 27, D55 with D43 and D44 continued): writes from
16 clients, `kill -9` of a server at random moments, restart; then every
event must have reached the receiver at least once.

    scripts/webhook-drill.py BINARY                        # SQLite, one node
    GATEHOUSE_DATABASE_URL=postgres://… scripts/webhook-drill.py BINARY
    NODES=2 GATEHOUSE_DATABASE_URL=postgres://… scripts/webhook-drill.py BINARY

Settings (environment): CLIENTS (16), RATE (200 writes/s in all, paced per
client, so the receiver keeps up), ROUNDS (6 kills), MIN_RUN / MAX_RUN
(seconds of writing before each kill: 1.5 / 4), NODES (1; 2 needs
PostgreSQL), MAX_IN_FLIGHT (4, GATEHOUSE_WEBHOOK_MAX_IN_FLIGHT of every
node), PORT (28491; node n listens on PORT + n), SEED.

Only the standard library. The receiver (loopback, answering 204 after 0 to
20 ms) records each request by its `webhook-id` and checks, as it goes:

- at most MAX_IN_FLIGHT requests of the endpoint at once, across all nodes
  (the limit is the whole service's, D44 continued);
- never two requests of one `webhook-id` at once (no attempt made twice at
  once).

At the end every event of the organization from `/v1/events` (its types
`product.*`, after the endpoint was made) must have arrived, and every
acknowledged write must have been told (a `product.created` per creation,
a `product.updated` per PATCH: an event never sequenced is neither listed
nor delivered, so only this check finds one); a duplicate is
allowed only as an attempt a kill cut short (at most MAX_IN_FLIGHT per kill)
and is counted. With NODES=2 each round kills one node while the other goes
on serving writers and delivering: deliveries must arrive while a node is
down.
"""

import collections
import json
import os
import random
import secrets
import shutil
import signal
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import gatehouse_proc
from gatehouse_proc import Gatehouse

BIN = sys.argv[1] if len(sys.argv) > 1 else sys.exit(__doc__)
CLIENTS = int(os.environ.get("CLIENTS", 16))
ROUNDS = int(os.environ.get("ROUNDS", 6))
MIN_RUN = float(os.environ.get("MIN_RUN", 1.5))
MAX_RUN = float(os.environ.get("MAX_RUN", 4))
RATE = float(os.environ.get("RATE", 200))
NODES = int(os.environ.get("NODES", 1))
MAX_IN_FLIGHT = int(os.environ.get("MAX_IN_FLIGHT", 4))
PORT = int(os.environ.get("PORT", 28491))
SEED = int(os.environ.get("SEED", time.time()))
if NODES > 1 and not os.environ.get("GATEHOUSE_DATABASE_URL"):
    sys.exit("NODES=2 needs GATEHOUSE_DATABASE_URL (PostgreSQL)")
random.seed(SEED)
work = tempfile.mkdtemp(prefix="gatehouse-hookdrill-")
env = dict(os.environ, GATEHOUSE_LOG="warn",
           GATEHOUSE_MASTER_KEY=secrets.token_hex(32),
           GATEHOUSE_WEBHOOK_MAX_IN_FLIGHT=str(MAX_IN_FLIGHT),
           # A kill leaves its leases behind until they run out; a short
           # attempt timeout keeps them short.
           GATEHOUSE_WEBHOOK_TIMEOUT="5s")

lock = threading.Lock()
received = {}  # webhook-id -> requests
told = {}  # webhook-id -> (type, object id) of the event delivered
arrivals = []  # arrival times
busy = {}  # webhook-id -> requests of it in progress now
in_flight = [0, 0]  # now, most at once
violations = []


class Receiver(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        wid = self.headers["webhook-id"]
        event = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with lock:
            told[wid] = (event["type"], event["data"]["object"]["id"])
        with lock:
            in_flight[0] += 1
            in_flight[1] = max(in_flight[1], in_flight[0])
            if in_flight[0] > MAX_IN_FLIGHT:
                violations.append(f"{in_flight[0]} requests at once (limit {MAX_IN_FLIGHT})")
            if busy.get(wid):
                violations.append(f"{wid} attempted twice at once")
            busy[wid] = busy.get(wid, 0) + 1
        time.sleep(random.uniform(0, 0.02))
        with lock:
            in_flight[0] -= 1
            busy[wid] -= 1
            received[wid] = received.get(wid, 0) + 1
            arrivals.append(time.time())
        self.send_response(204)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


gh = Gatehouse(BIN, work, env)
cli = gh.cli


def base(n):
    return f"http://127.0.0.1:{PORT + n}"


def start(n):
    return gh.serve(PORT + n, "--webhook-allow-cidrs", "127.0.0.1/32", log=f"server{n}.log")


def call(n, method, path, token, body=None):
    """(status, json or None) — status 0 when the connection failed."""
    return gatehouse_proc.call(base(n), method, path, token, body)[:2]


def token(n, cid, secret):
    return gatehouse_proc.token(base(n), cid, secret)


cli("migrate")
org = cli("org", "create", "--name", "Hook drill", "--plan", "enterprise",
          "--per-minute", "1000000000", "--per-second", "100000000")["id"]
client = cli("client", "create", "--org", org, "--name", "drill", "--scopes",
             "products:write events:read webhooks:read webhooks:write")
creds = (client["client_id"], client["client_secret"])
servers = {n: start(n) for n in range(NODES)}
class Quiet(ThreadingHTTPServer):
    def handle_error(self, request, client_address):
        pass  # a connection a killed node dropped mid-request


rx = Quiet(("127.0.0.1", 0), Receiver)
rx.daemon_threads = True
threading.Thread(target=rx.serve_forever, daemon=True).start()
st, endpoint = call(0, "POST", "/v1/webhook-endpoints", token(0, *creds),
                    {"url": f"http://127.0.0.1:{rx.server_address[1]}/hook",
                     "enabled_events": ["product.*"]})
assert st == 201, endpoint
stop = threading.Event()
acked = [0]
created, patched = set(), {}  # acknowledged: product ids; product id -> PATCHes
counter = iter(range(10**9))


def writer(tokens):
    mine = []
    while not stop.is_set():
        alive = [n for n in tokens if servers[n].poll() is None]
        if not alive:
            time.sleep(0.05)
            continue
        n = random.choice(alive)
        if random.random() < 0.7 or not mine:
            k = next(counter)
            st, doc = call(n, "POST", "/v1/products", tokens[n],
                           {"name": f"P{k}", "sku": f"W-{SEED}-{k}", "price": 100, "stock": 1})
            if st == 201:
                mine.append(doc["data"]["id"])
                with lock:
                    created.add(doc["data"]["id"])
        else:
            pid = random.choice(mine)
            st, _ = call(n, "PATCH", f"/v1/products/{pid}", tokens[n],
                         {"stock": next(counter) + 2})  # new each time: it changes something
            if st == 200:
                with lock:
                    patched[pid] = patched.get(pid, 0) + 1
        time.sleep(random.expovariate(RATE / CLIENTS))
        if st in (200, 201):
            with lock:
                acked[0] += 1
        elif st == 0:
            time.sleep(0.05)
        elif st == 401:
            return


kills, during_downtime = 0, 0
for round_ in range(ROUNDS + 1):
    tokens = {n: token(n, *creds) for n in servers}
    stop.clear()
    threads = [threading.Thread(target=writer, args=(tokens,)) for _ in range(CLIENTS)]
    for t in threads:
        t.start()
    time.sleep(random.uniform(MIN_RUN, MAX_RUN))
    if round_ < ROUNDS:
        victim = random.randrange(NODES)
        servers[victim].send_signal(signal.SIGKILL)  # kill -9, mid-write, mid-attempt
        servers[victim].wait()
        kills += 1
        down_at = time.time()
        # With another node, it goes on alone for a while.
        time.sleep(1.5 if NODES > 1 else 0.3)
        with lock:
            during_downtime += sum(1 for a in arrivals if a > down_at + 0.5)
    stop.set()
    for t in threads:
        t.join()
    if round_ < ROUNDS:
        servers[victim] = start(victim)

# Every event the endpoint subscribes to, by the catch-up cursor.
tok = token(0, *creds)
events, after = [], 0
while True:
    st, doc = call(0, "GET", f"/v1/events?after_sequence={after}&limit=100", tok)
    assert st == 200, (st, doc)
    events += [e for e in doc["data"] if e["type"].startswith("product.")]
    if not doc["data"]:
        break
    after = doc["data"][-1]["sequence"]
wanted = {e["id"] for e in events}
# Leases of killed nodes run out (the attempt timeout and a margin), then
# their deliveries are made again: wait for them.
deadline = time.time() + 90
while time.time() < deadline:
    with lock:
        missing = wanted - received.keys()
    if not missing:
        break
    time.sleep(0.5)
for p in servers.values():
    p.terminate()
for p in servers.values():
    p.wait(timeout=40)

with lock:
    missing = sorted(wanted - received.keys())
    duplicates = sum(c - 1 for w, c in received.items() if w in wanted and c > 1)
    failures = list(violations)
if missing:
    failures.append(f"{len(missing)} of {len(wanted)} events never arrived: {missing[:5]}")
# Every acknowledged write told, as the receiver saw it: an event that was
# never sequenced is neither listed nor delivered, and only this finds it.
with lock:
    seen = collections.Counter(told.values())
untold = [p for p in created if seen[("product.created", p)] == 0]
untold += [p for p, n in patched.items() if seen[("product.updated", p)] < n]
if untold:
    failures.append(f"{len(untold)} acknowledged writes were never delivered: {untold[:5]}")
if duplicates > kills * MAX_IN_FLIGHT:
    failures.append(f"{duplicates} duplicates, more than {kills} kills × {MAX_IN_FLIGHT} in flight")
if NODES > 1 and during_downtime == 0:
    failures.append("no delivery arrived while a node was down")
print(f"seed {SEED}: {NODES} node(s), {CLIENTS} clients, {kills} kill -9, {acked[0]} acknowledged "
      f"writes, {len(wanted)} events, {len(wanted) - len(missing)} delivered, {duplicates} duplicates, "
      f"at most {in_flight[1]} in flight at once (limit {MAX_IN_FLIGHT})"
      + (f", {during_downtime} deliveries while a node was down" if NODES > 1 else ""))
if failures:
    print(f"FAILED ({len(failures)}):")
    for f in failures[:20]:
        print("  " + f)
    print("data kept in " + work)
    sys.exit(1)
shutil.rmtree(work)
print("ok: every event arrived at least once, never two attempts of one at once, "
      "the in-flight limit held")
