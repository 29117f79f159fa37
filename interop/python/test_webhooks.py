"""D55 from outside: webhook deliveries verified by the unmodified
`standardwebhooks` and `svix` packages of PyPI, with one secret and, during
a rotation's grace, with either.

interop/run.sh starts the server with `--webhook-allow-cidrs 127.0.0.1/32`
and passes GH_*; this test registers its own client (products:write and
webhooks:*) with the `gatehouse` CLI and receives on a loopback port.
"""

import json
import os
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

import gatehouse_session
from standardwebhooks.webhooks import Webhook as StandardWebhook
from svix.webhooks import Webhook as SvixWebhook

if not os.environ.get("GH_ISSUER"):
    pytest.skip("needs the server interop/run.sh starts (GH_* unset)", allow_module_level=True)

ISSUER = os.environ["GH_ISSUER"].rstrip("/")
SCOPES = "products:write webhooks:read webhooks:write"



def session():
    return gatehouse_session.session("Webhooks", SCOPES)


class Receiver:
    """A plain HTTP receiver on loopback that keeps what it is sent."""

    def __init__(self):
        self.got = []
        got = self.got

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                got.append(({k.lower(): v for k, v in self.headers.items()}, body))
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def wait_for(self, n):
        for _ in range(300):
            if len(self.got) >= n:
                return self.got
            time.sleep(0.05)
        raise AssertionError(f"received {len(self.got)} deliveries, not {n}")


def product(s, sku):
    r = s.post(f"{ISSUER}/v1/products", json={"name": sku, "sku": sku, "price": 1, "stock": 1})
    assert r.status_code == 201, r.text
    return r.json()["data"]


def test_standardwebhooks_and_svix_verify_deliveries_and_both_secrets_in_a_grace():
    s = session()
    receiver = Receiver()
    r = s.post(
        f"{ISSUER}/v1/webhook-endpoints",
        json={"url": receiver.url, "enabled_events": ["product.*"]},
    )
    assert r.status_code == 201, r.text
    endpoint = r.json()["data"]
    old = endpoint["secret"]

    p = product(s, "PY-HOOK-1")
    headers, body = receiver.wait_for(1)[0]
    for lib in (StandardWebhook, SvixWebhook):
        lib(old).verify(body, headers)
    event = json.loads(body)
    assert event["type"] == "product.created"
    assert event["data"]["object"]["id"] == p["id"]
    assert headers["webhook-id"] == event["id"]
    # Tampered: refused by both.
    for lib in (StandardWebhook, SvixWebhook):
        with pytest.raises(Exception):
            lib(old).verify(body.replace(b"PY-HOOK-1", b"PY-HOOK-2"), headers)

    r = s.post(f"{ISSUER}/v1/webhook-endpoints/{endpoint['id']}/secret", json={"grace_seconds": 600})
    assert r.status_code == 201, r.text
    new = r.json()["data"]["secret"]
    product(s, "PY-HOOK-2")
    headers, body = receiver.wait_for(2)[1]
    assert len(headers["webhook-signature"].split(" ")) == 2
    for secret in (new, old):
        for lib in (StandardWebhook, SvixWebhook):
            lib(secret).verify(body, headers)
