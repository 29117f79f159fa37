#!/usr/bin/env python3
"""D55's delivery benchmark (not a timed test): events at RATE per second
into the whole service, and from each event's commit (its `created_at`) to
its first attempt's arrival at a receiver on loopback: p50 ≤ 250 ms and
p99 ≤ 2 s. Beside the healthy endpoint a second one never answers (its
requests hang until the attempt times out), and must not delay the first.

    scripts/webhook-latency.py BINARY                  # SQLite, fresh data dir
    GATEHOUSE_DATABASE_URL=postgres://… scripts/webhook-latency.py BINARY

Settings (environment): RATE (200 events/s), SECONDS (10), SENDERS (16
writer threads), PORT (28391). Only the standard library; the server runs
behind a proxy (plain HTTP) on loopback with `--webhook-allow-cidrs
127.0.0.1/32`. Each event is a `POST /v1/products`; the rate is paced per
writer. Prints the healthy endpoint's latencies (p50, p90, p99, max), how
many events were delivered to it, and how many requests the hanging
endpoint got (at most GATEHOUSE_WEBHOOK_MAX_IN_FLIGHT at a time).
"""

import json
import os
import sys
import tempfile
import threading
import time
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import gatehouse_proc
from gatehouse_proc import Gatehouse

BIN = sys.argv[1] if len(sys.argv) > 1 else sys.exit(__doc__)
RATE = float(os.environ.get("RATE", 200))
SECONDS = float(os.environ.get("SECONDS", 10))
SENDERS = int(os.environ.get("SENDERS", 16))
PORT = int(os.environ.get("PORT", 28391))
BASE = f"http://127.0.0.1:{PORT}"
work = tempfile.mkdtemp(prefix="gatehouse-hooks-")
env = dict(os.environ, GATEHOUSE_LOG="warn")

arrivals = {}  # event id -> (arrival time, created_at)
hung = [0]
lock = threading.Lock()
release = threading.Event()


class Healthy(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        now = time.time()
        body = self.rfile.read(int(self.headers["Content-Length"]))
        event = json.loads(body)
        created = datetime.fromisoformat(event["created_at"].replace("Z", "+00:00")).timestamp()
        with lock:
            arrivals.setdefault(event["id"], (now, created))
        self.send_response(204)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


class Hanging(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        with lock:
            hung[0] += 1
        release.wait(60)

    def log_message(self, *args):
        pass


def serve(handler):
    s = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    s.daemon_threads = True
    threading.Thread(target=s.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{s.server_address[1]}/hook"


gh = Gatehouse(BIN, work, env)


def call(method, path, token, body=None):
    return gatehouse_proc.call(BASE, method, path, token, body)[:2]


def main():
    gh.cli("migrate")
    org = gh.cli("org", "create", "--name", "Hooks", "--plan", "enterprise",
                 "--per-minute", "1000000000", "--per-second", "100000000")["id"]
    client = gh.cli("client", "create", "--org", org, "--name", "bench", "--scopes",
                    "products:write webhooks:read webhooks:write")
    server = gh.serve(PORT, "--webhook-allow-cidrs", "127.0.0.1/32")
    try:
        tok = gatehouse_proc.token(BASE, client["client_id"], client["client_secret"])
        for url in (serve(Healthy), serve(Hanging)):
            st, doc = call("POST", "/v1/webhook-endpoints", tok,
                           {"url": url, "enabled_events": ["product.*"]})
            assert st == 201, doc
        # The worker notices a first endpoint within a second.
        time.sleep(1.5)
        sent = [0]
        per_sender = RATE / SENDERS
        t0 = time.time()

        def writer(n):
            k = 0
            while True:
                due = t0 + k / per_sender
                if due - t0 >= SECONDS:
                    return
                pause = due - time.time()
                if pause > 0:
                    time.sleep(pause)
                st, doc = call("POST", "/v1/products", tok,
                               {"name": f"P{n}-{k}", "sku": f"H-{n}-{k}", "price": 1, "stock": 1})
                if st == 201:
                    with lock:
                        sent[0] += 1
                k += 1

        threads = [threading.Thread(target=writer, args=(n,)) for n in range(SENDERS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        took = time.time() - t0
        # Let the last deliveries arrive.
        deadline = time.time() + 10
        while time.time() < deadline:
            with lock:
                if len(arrivals) >= sent[0]:
                    break
            time.sleep(0.1)
        with lock:
            lat = sorted((a - c) * 1000 for a, c in arrivals.values())
            got, stuck = len(arrivals), hung[0]
        release.set()
        if not lat:
            sys.exit("no delivery arrived; see " + os.path.join(work, "server.log"))

        def pct(p):
            return lat[min(len(lat) - 1, int(p / 100 * len(lat)))]

        print(f"events written: {sent[0]} in {took:.1f} s ({sent[0] / took:.0f}/s)")
        print(f"delivered to the healthy endpoint: {got}")
        print(f"requests the hanging endpoint got: {stuck}")
        print(f"commit to first attempt (ms): p50 {pct(50):.0f}, p90 {pct(90):.0f}, "
              f"p99 {pct(99):.0f}, max {lat[-1]:.0f}")
    finally:
        release.set()
        server.terminate()
        server.wait(timeout=40)


main()
