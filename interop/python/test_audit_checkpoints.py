"""D58 from outside: the audit log's signed checkpoints verified by an
independent JOSE implementation, PyPI's `joserfc`. A checkpoint is a
compact JWS (ES256, header `kid` and `typ: gatehouse-audit-checkpoint+jws`)
over `{"org", "category", "sequence", "hash", "signed_at"}`;
`/.well-known/audit-keys.json` (no authentication) is a JWKS of every
public key that signed a kept checkpoint, so a checkpoint stays verifiable
after the D23 key that signed it has been rotated away.

interop/run.sh starts the server and passes GH_* (GATEHOUSE_DATA_DIR stays
exported, so `GH_BIN audit checkpoint` and `GH_BIN keys rotate` work on the
running server's data). This test registers its own client (products:write
and audit:read) with the `gatehouse` CLI, creates products so the admin
chain's head moves, and signs checkpoints with `gatehouse audit checkpoint`.

The last test rotates the signing key (`keys rotate --publish-delay 0`):
the server then signs tokens with the new key too. Both keys stay in
/.well-known/jwks.json and the suites that verify tokens fetch the JWKS
afresh, so the tests after it are unaffected; it is still kept last in this
file.
"""

import base64
import json
import os
import subprocess
import time
from datetime import datetime

import pytest
import requests

import gatehouse_session
from joserfc import jws
from joserfc.errors import BadSignatureError
from joserfc.jwk import KeySet

if not os.environ.get("GH_ISSUER"):
    pytest.skip("needs the server interop/run.sh starts (GH_* unset)", allow_module_level=True)

ISSUER = os.environ["GH_ISSUER"].rstrip("/")
CA = os.environ["GH_CA"]
ORG = os.environ["GH_ORG"]
BIN = os.environ["GH_BIN"]
SCOPES = "products:read products:write audit:read"
TYP = "gatehouse-audit-checkpoint+jws"
PAYLOAD_FIELDS = {"org", "category", "sequence", "hash", "signed_at"}
ROTATION_WAIT_SECS = 60


def cli(*args):
    return json.loads(subprocess.run([BIN, *args, "--json"], capture_output=True, check=True, text=True).stdout)


@pytest.fixture(scope="module")
def s():
    return gatehouse_session.session("Audit checkpoints", SCOPES)


_skus = iter(range(1_000_000))


def create_product(s):
    r = s.post(
        f"{ISSUER}/v1/products",
        json={"name": "Checkpointed", "sku": f"CKPT-{os.getpid()}-{next(_skus)}", "price": 250, "stock": 1},
    )
    assert r.status_code == 201, r.text
    return r.json()["data"]


def checkpoint():
    """`gatehouse audit checkpoint --category admin`: the admin chain's
    checkpoint at its head (the newest one when the head has one)."""
    made = cli("audit", "checkpoint", "--org", ORG, "--category", "admin")["data"]
    assert len(made) == 1, made
    assert made[0]["category"] == "admin"
    return made[0]


def audit_keys():
    # No Authorization header: the document is public.
    r = requests.get(f"{ISSUER}/.well-known/audit-keys.json", verify=CA, timeout=10)
    r.raise_for_status()
    doc = r.json()
    for k in doc["keys"]:
        assert k["kty"] == "EC" and k["crv"] == "P-256" and k["kid"], k
        assert "d" not in k, "a private key is published"
    return doc


def unverified_kid(token):
    return jws.extract_compact(token.encode()).headers()["kid"]


def verify(token, doc):
    """joserfc's own checks: the key the header's `kid` names in the
    audit-keys document, ES256 only. Returns (header, payload)."""
    keys = KeySet.import_key_set(doc)
    key = keys.get_by_kid(unverified_kid(token))
    obj = jws.deserialize_compact(token, key, algorithms=["ES256"])
    return obj.headers(), json.loads(obj.payload)


def listed(s, token):
    """The checkpoint `GET /v1/audit-logs/checkpoints` lists with this JWS."""
    r = s.get(f"{ISSUER}/v1/audit-logs/checkpoints", params={"category": "admin", "limit": 100})
    assert r.status_code == 200, r.text
    items = r.json()["data"]
    signed = [datetime.fromisoformat(c["signed_at"].replace("Z", "+00:00")) for c in items]
    assert signed == sorted(signed, reverse=True), "newest first"
    found = [c for c in items if c["jws"] == token]
    assert len(found) == 1, f"the checkpoint is listed once: {items}"
    return found[0]


def entry_at(s, sequence):
    r = s.get(
        f"{ISSUER}/v1/audit-logs",
        params={"category": "admin", "after_sequence": sequence - 1, "limit": 1},
    )
    assert r.status_code == 200, r.text
    (entry,) = r.json()["data"]
    assert entry["sequence"] == sequence and entry["category"] == "admin"
    return entry


def unix_seconds(rfc3339):
    return int(datetime.fromisoformat(rfc3339.replace("Z", "+00:00")).timestamp())


def check(s, made, doc, product=None):
    """Verifies the CLI's checkpoint `made` with joserfc against the
    audit-keys document `doc`: header, payload, the listed checkpoint and
    the chain's entry at its sequence. Returns the header's kid."""
    header, payload = verify(made["jws"], doc)
    assert header["alg"] == "ES256"
    assert header["typ"] == TYP
    kid = header["kid"]
    assert kid in {k["kid"] for k in doc["keys"]}
    assert set(payload) == PAYLOAD_FIELDS, payload  # no iss/aud/exp: no token check accepts it
    assert payload["org"] == ORG
    assert payload["category"] == "admin"

    c = listed(s, made["jws"])
    assert c["org"] == ORG and c["category"] == "admin"
    for field in ("sequence", "hash"):
        assert payload[field] == c[field] == made[field], field
    assert payload["signed_at"] == unix_seconds(c["signed_at"]) == unix_seconds(made["signed_at"])

    entry = entry_at(s, payload["sequence"])
    assert entry["hash"] == payload["hash"]
    if product is not None:
        # Nothing else writes to this organization's admin chain between the
        # product and the checkpoint: the head is the product's creation.
        assert entry["action"] == "product.created"
        assert entry["target"] == {"type": "product", "id": product["id"]}
    return kid


def b64(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def test_a_checkpoint_verifies_with_joserfc_and_a_tampered_one_does_not(s):
    product = create_product(s)
    made = checkpoint()
    doc = audit_keys()
    check(s, made, doc, product)

    # The same signature over another sequence or hash does not verify.
    h, p, sig = made["jws"].split(".")
    payload = json.loads(base64.urlsafe_b64decode(p + "=" * (-len(p) % 4)))
    for change in ({"sequence": payload["sequence"] - 1}, {"hash": "0" * 64}):
        forged = f"{h}.{b64(json.dumps({**payload, **change}, separators=(',', ':')).encode())}.{sig}"
        with pytest.raises(BadSignatureError):
            verify(forged, doc)
    # A flipped bit of the signature neither.
    raw = bytearray(base64.urlsafe_b64decode(sig + "=" * (-len(sig) % 4)))
    raw[-1] ^= 1
    with pytest.raises(BadSignatureError):
        verify(f"{h}.{p}.{b64(bytes(raw))}", doc)


# Rotates the D23 signing key: keep it the last test of this file.
def test_checkpoints_of_a_rotated_key_stay_verifiable(s):
    create_product(s)
    old = checkpoint()
    old_kid = check(s, old, audit_keys())

    rotated = cli("keys", "rotate", "--publish-delay", "0")
    new_kid = rotated["kid"]
    assert new_kid != old_kid

    # The head has to move for a new checkpoint (at an unchanged head the
    # CLI returns the newest one); the key in force is re-read from storage.
    deadline = time.monotonic() + ROTATION_WAIT_SECS
    while True:
        product = create_product(s)
        new = checkpoint()
        if unverified_kid(new["jws"]) != old_kid:
            break
        assert time.monotonic() < deadline, f"no checkpoint signed with a new key after {ROTATION_WAIT_SECS} s"
        time.sleep(1)
    assert new["sequence"] > old["sequence"]

    # D23: the old key stays published for the tokens it signed (what the
    # suites after this one rely on).
    r = requests.get(f"{ISSUER}/.well-known/jwks.json", verify=CA, timeout=10)
    r.raise_for_status()
    assert {old_kid, new_kid} <= {k["kid"] for k in r.json()["keys"]}

    doc = audit_keys()
    assert {old_kid, new_kid} <= {k["kid"] for k in doc["keys"]}, "both keys sign a kept checkpoint"
    assert check(s, new, doc, product) == new_kid
    assert check(s, old, doc) == old_kid

    # Each verifies with its own key only.
    keys = KeySet.import_key_set(doc)
    with pytest.raises(BadSignatureError):
        jws.deserialize_compact(old["jws"], keys.get_by_kid(new_kid), algorithms=["ES256"])
    with pytest.raises(BadSignatureError):
        jws.deserialize_compact(new["jws"], keys.get_by_kid(old_kid), algorithms=["ES256"])
