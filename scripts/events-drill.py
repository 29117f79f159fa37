#!/usr/bin/env python3
"""The events drill (issue 26, D54): writes from 16 clients, `kill -9` of the
server at random moments, restart; then every acknowledged change must have
exactly the events D54 prescribes for it, nothing half-told for a change
cut short, and the organization's sequence no gap.

    scripts/events-drill.py BINARY            # SQLite in a fresh data dir
    GATEHOUSE_DATABASE_URL=postgres://… scripts/events-drill.py BINARY

Settings (environment): CLIENTS (16), ROUNDS (6 kills), MIN_RUN / MAX_RUN
(seconds of writing before each kill: 1.5 / 4), PORT (28291), SEED.

Only the standard library: the server runs behind a proxy (plain HTTP) on
loopback. What each write must tell (D54), matched by the request id every
answer carries (`meta.request_id`, or X-Request-ID on a 204), which each
event repeats in `request.id`:

    POST /v1/products          product.created
    PATCH /v1/products/{id}    product.updated (each PATCH sets a new stock)
    DELETE /v1/products/{id}   product.deleted
    POST /v1/users             user.created, then user.invited

A write whose answer never came (the server died under it) may have
committed or not: its events are then all there or none (a change and its
events commit together), checked by request id as well.
"""

import os
import random
import shutil
import signal
import sys
import tempfile
import threading
import time

import gatehouse_proc
from gatehouse_proc import Gatehouse

BIN = sys.argv[1] if len(sys.argv) > 1 else sys.exit(__doc__)
CLIENTS = int(os.environ.get("CLIENTS", 16))
ROUNDS = int(os.environ.get("ROUNDS", 6))
MIN_RUN = float(os.environ.get("MIN_RUN", 1.5))
MAX_RUN = float(os.environ.get("MAX_RUN", 4))
PORT = int(os.environ.get("PORT", 28291))
SEED = int(os.environ.get("SEED", time.time()))
BASE = f"http://127.0.0.1:{PORT}"
PRESCRIBED = {
    "create_product": ["product.created"],
    "update_product": ["product.updated"],
    "delete_product": ["product.deleted"],
    "create_user": ["user.created", "user.invited"],
}
random.seed(SEED)
work = tempfile.mkdtemp(prefix="gatehouse-drill-")
env = dict(os.environ, GATEHOUSE_LOG="warn")


gh = Gatehouse(BIN, work, env)
cli = gh.cli


def start():
    return gh.serve(PORT)


def call(method, path, token, body=None):
    """(status, json or None, request id) — status 0 when the connection failed."""
    status, doc, headers = gatehouse_proc.call(BASE, method, path, token, body)
    rid = headers.get("x-request-id") if headers else None
    if doc and "meta" in doc:
        rid = doc["meta"]["request_id"]
    elif rid:
        rid = "req_" + rid.replace("-", "")
    return status, doc, rid


def token(cid, secret):
    return gatehouse_proc.token(BASE, cid, secret)


server = start()
org = cli("org", "create", "--name", "Drill", "--plan", "enterprise",
          "--per-minute", "1000000000", "--per-second", "100000000")["id"]
client = cli("client", "create", "--org", org, "--name", "drill", "--scopes",
             "products:read products:write users:read users:write events:read")
creds = (client["client_id"], client["client_secret"])
acked = []  # (kind, object id, request id) of every answered write
lock = threading.Lock()
stop = threading.Event()
counter = iter(range(10**9))


def writer(n, tok):
    mine = []  # products of this writer that exist, as far as it knows
    stock = {}  # their stock as last acknowledged (only this writer changes them)
    while not stop.is_set():
        op = random.random()
        if op < 0.45 or not mine:
            k = next(counter)
            st, doc, rid = call("POST", "/v1/products", tok,
                                {"name": f"P{k}", "sku": f"D-{SEED}-{k}", "price": 100, "stock": 1})
            if st == 201:
                mine.append(doc["data"]["id"])
                stock[doc["data"]["id"]] = 1
                with lock:
                    acked.append(("create_product", doc["data"]["id"], rid))
        elif op < 0.75:
            pid = random.choice(mine)
            # A new value, so the PATCH changes something (one that changes
            # nothing tells nothing, D54). Unacknowledged, the old one is
            # unknown: skip that product's updates from then on.
            if stock.get(pid) is None:
                continue
            new = stock[pid] % 1000 + 2
            st, doc, rid = call("PATCH", f"/v1/products/{pid}", tok, {"stock": new})
            stock[pid] = new if st == 200 else None
            if st == 200:
                with lock:
                    acked.append(("update_product", pid, rid))
        elif op < 0.9:
            pid = mine.pop(random.randrange(len(mine)))
            st, _, rid = call("DELETE", f"/v1/products/{pid}", tok)
            if st == 204:
                with lock:
                    acked.append(("delete_product", pid, rid))
            elif st != 404:
                mine.append(pid)  # unknown: it may still exist
        else:
            k = next(counter)
            st, doc, rid = call("POST", "/v1/users", tok,
                                {"email": f"d{SEED}-{k}@example.com", "name": f"U{k}", "role": "viewer"})
            if st == 201:
                with lock:
                    acked.append(("create_user", doc["data"]["id"], rid))
        if st == 0:
            time.sleep(0.05)  # the server is down: wait for the restart
        elif st == 401:
            return  # the token outlived nothing here; the round starts anew


kills = 0
for round_ in range(ROUNDS + 1):
    tok = token(*creds)
    stop.clear()
    threads = [threading.Thread(target=writer, args=(i, tok)) for i in range(CLIENTS)]
    for t in threads:
        t.start()
    time.sleep(random.uniform(MIN_RUN, MAX_RUN))
    if round_ < ROUNDS:
        server.send_signal(signal.SIGKILL)  # kill -9, mid-write
        server.wait()
        kills += 1
        time.sleep(0.3)
    stop.set()
    for t in threads:
        t.join()
    if round_ < ROUNDS:
        server = start()

# Every event of the organization, by the catch-up cursor.
tok = token(*creds)
events, after = [], 0
deadline = time.time() + 10
while True:
    st, doc, _ = call("GET", f"/v1/events?after_sequence={after}&limit=100", tok)
    assert st == 200, (st, doc)
    events += doc["data"]
    if not doc["data"]:
        break
    after = doc["data"][-1]["sequence"]
server.terminate()
server.wait()

failures = []
seqs = [e["sequence"] for e in events]
if seqs != list(range(1, len(seqs) + 1)):
    gaps = [(a, b) for a, b in zip(seqs, seqs[1:]) if b != a + 1]
    failures.append(f"the sequence has gaps or starts late: first {seqs[:1]}, gaps {gaps[:5]}")
by_request = {}
for e in events:
    if e["request"]:
        by_request.setdefault(e["request"]["id"], []).append(e)
acked_ids = set()
for kind, oid, rid in acked:
    acked_ids.add(rid)
    got = [(e["type"], e["data"]["object"]["id"]) for e in by_request.get(rid, [])]
    want = [(t, oid) for t in PRESCRIBED[kind]]
    if got != want:
        failures.append(f"{kind} {oid} ({rid}): told {got}, D54 prescribes {want}")
unacked = {rid: es for rid, es in by_request.items() if rid not in acked_ids}
for rid, es in unacked.items():
    types = [e["type"] for e in es]
    if types not in PRESCRIBED.values():
        failures.append(f"a write cut short ({rid}) is half-told: {types}")

print(f"seed {SEED}: {CLIENTS} clients, {kills} kill -9, {len(acked)} acknowledged writes "
      f"({', '.join(f'{k} {sum(1 for a in acked if a[0] == k)}' for k in PRESCRIBED)}), "
      f"{len(unacked)} committed but unanswered, {len(events)} events, sequence 1..{seqs[-1] if seqs else 0}")
if failures:
    print(f"FAILED ({len(failures)}):")
    for f in failures[:20]:
        print("  " + f)
    print("data kept in " + work)
    sys.exit(1)
shutil.rmtree(work)
print("ok: every acknowledged change has exactly its events, nothing half-told, no gap")
