"""D58 from outside: the audit log's chains recomputed from an export by an
independent implementation of RFC 8785 (PyPI's `rfc8785`) and Python's
own SHA-256, byte for byte: each entry's `hash` is SHA-256 over the
previous entry's `hash` (64 ASCII hex characters; 64 zeros first) followed
by the canonical JSON of the entry without `hash`.

interop/run.sh starts the server and passes GH_*; this test registers its
own client (products:write and audit:read) with the `gatehouse` CLI and
writes a few changes whose text needs RFC 8785's escaping rules.
"""

import hashlib
import json
import os

import pytest

import gatehouse_session
import rfc8785

if not os.environ.get("GH_ISSUER"):
    pytest.skip("needs the server interop/run.sh starts (GH_* unset)", allow_module_level=True)

ISSUER = os.environ["GH_ISSUER"].rstrip("/")
SCOPES = "products:read products:write audit:read"
GENESIS = "0" * 64



def session():
    return gatehouse_session.session("Audit check", SCOPES)


def export(s, **params):
    r = s.get(f"{ISSUER}/v1/audit-logs/export", params=params)
    r.raise_for_status()
    return r


def test_the_chains_recompute_from_an_export_with_an_independent_rfc8785():
    s = session()
    # Names that need escaping or are outside ASCII (RFC 8785 §3.2.2.2).
    for i, name in enumerate(["Lämpchen ✓", 'Quote " and \\ backslash', "Solidus / and <tag> &", "𝄞 clef"]):
        r = s.post(
            f"{ISSUER}/v1/products",
            json={"name": name, "sku": f"AUDIT-{os.getpid()}-{i}", "price": 100 + i, "stock": i},
        )
        assert r.status_code == 201, r.text
    r = export(s, format="jsonl")
    assert r.headers["content-type"].startswith("application/jsonl")
    lines = [json.loads(l) for l in r.text.splitlines()]
    ends = {l["end"]["category"]: l["end"] for l in lines if "end" in l}
    assert set(ends) == {"admin", "security"}, "each chain ends with its end line"
    assert "end" in lines[-1]

    prev = {"admin": GENESIS, "security": GENESIS}
    last = {"admin": 0, "security": 0}
    counts = {"admin": 0, "security": 0}
    for e in lines:
        if "end" in e:
            continue
        c = e["category"]
        assert e["sequence"] == last[c] + 1, f"{c}: a gap before {e['sequence']}"
        body = {k: v for k, v in e.items() if k != "hash"}
        digest = hashlib.sha256(prev[c].encode("ascii") + rfc8785.dumps(body)).hexdigest()
        assert digest == e["hash"], f"{c} {e['sequence']}: {digest} != {e['hash']}"
        prev[c], last[c] = e["hash"], e["sequence"]
        counts[c] += 1
    for c, end in ends.items():
        assert end["count"] == counts[c]
        if counts[c]:
            assert end["last_sequence"] == last[c]
            assert end["last_hash"] == prev[c]
    names = [e["changes"]["name"]["to"] for e in lines
             if e.get("action") == "product.created" and e["changes"] and "name" in e["changes"]]
    assert "𝄞 clef" in names and 'Quote " and \\ backslash' in names

    # CSV: D58's columns, the same entries.
    r = export(s, format="csv")
    assert r.headers["content-type"].startswith("text/csv")
    head = r.text.split("\r\n", 1)[0]
    assert head == ("id,category,sequence,created_at,action,outcome,reason,actor_type,actor_id,"
                    "actor_client_id,source_ip,source_user_agent,target_type,target_id,request_id,"
                    "request_idempotency_key,changes,details,hash")
