"""What the benchmark and drill scripts share (standard library only): a
gatehouse binary's operator commands, a server started behind a proxy on
loopback and waited for, calls to its API, and client-credentials tokens.
Imported by scripts/events-drill.py, webhook-drill.py and
webhook-latency.py (the scripts' directory is on `sys.path` when they run).
"""

import base64
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request


class Gatehouse:
    """One data directory (and `GATEHOUSE_DATABASE_URL`, when the
    environment sets it) that BIN serves and administers."""

    def __init__(self, binary, work, env):
        self.binary, self.work, self.env = binary, work, env
        self.data = os.path.join(work, "data")

    def cli(self, *args):
        """An operator command with `--json`: its answer."""
        out = subprocess.run([self.binary, "--data-dir", self.data, *args, "--json"],
                             env=self.env, check=True, capture_output=True, text=True).stdout
        return json.loads(out)

    def serve(self, port, *extra, log="server.log"):
        """`serve` behind a proxy on 127.0.0.1:port, once `/healthz` answers."""
        out = open(os.path.join(self.work, log), "a")
        p = subprocess.Popen([self.binary, "--data-dir", self.data, "serve", "--behind-proxy",
                              "--http-addr", f"127.0.0.1:{port}", "--admin-addr", "127.0.0.1:0",
                              "--public-url", "https://localhost", *extra],
                             env=self.env, stdout=out, stderr=out)
        for _ in range(2000):
            try:
                if urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1).status == 200:
                    return p
            except OSError:
                time.sleep(0.01)
        sys.exit(f"the server did not become ready; see {os.path.join(self.work, log)}")


def call(base, method, path, token, body=None):
    """(status, json or None, headers) — status 0 (and no headers) when the
    connection failed."""
    req = urllib.request.Request(base + path, method=method,
                                 data=None if body is None else json.dumps(body).encode())
    req.add_header("Authorization", f"Bearer {token}")
    if body is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            raw, status, headers = r.read(), r.status, r.headers
    except urllib.error.HTTPError as e:
        raw, status, headers = e.read(), e.code, e.headers
    except OSError:
        return 0, None, None
    return status, json.loads(raw) if raw else None, headers


def token(base, cid, secret):
    """A client-credentials access token."""
    req = urllib.request.Request(f"{base}/oauth/token", method="POST",
                                 data=b"grant_type=client_credentials")
    req.add_header("Authorization", "Basic " + base64.b64encode(f"{cid}:{secret}".encode()).decode())
    req.add_header("Content-Type", "application/x-www-form-urlencoded")
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.loads(r.read())["access_token"]
