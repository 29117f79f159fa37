"""D54 from outside: a mirror written with plain `requests` (PyPI) catches
up from `after_sequence` after a pause and sees every change once, in
order, with no gap.

interop/run.sh starts the server and passes GH_*; this test registers its
own client (products:write and events:read) with the `gatehouse` CLI.
"""

import os
import time

import pytest

import gatehouse_session

if not os.environ.get("GH_ISSUER"):
    pytest.skip("needs the server interop/run.sh starts (GH_* unset)", allow_module_level=True)

ISSUER = os.environ["GH_ISSUER"].rstrip("/")
SCOPES = "products:read products:write events:read"



def session():
    return gatehouse_session.session("Events mirror", SCOPES)


def catch_up(s, after):
    """Every event after `after`, oldest first, small pages; asserts no gap."""
    seen = []
    while True:
        r = s.get(f"{ISSUER}/v1/events", params={"after_sequence": after, "limit": 7})
        r.raise_for_status()
        page = r.json()["data"]
        if not page:
            return seen
        for e in page:
            assert e["sequence"] == after + 1, f"a gap after {after}: {e['sequence']}"
            after = e["sequence"]
            seen.append(e)


def test_a_mirror_catches_up_after_a_pause_without_a_gap():
    s = session()
    r = s.get(f"{ISSUER}/v1/events", params={"limit": 1})
    r.raise_for_status()
    newest = r.json()["data"]
    start = newest[0]["sequence"] if newest else 0

    ids = []
    for i in range(10):
        r = s.post(f"{ISSUER}/v1/products", json={"name": f"Mirror {i}", "sku": f"MIRROR-{i}", "price": 100 + i, "stock": i})
        assert r.status_code == 201, r.text
        ids.append(r.json()["data"]["id"])
    first = catch_up(s, start)
    assert [e["type"] for e in first] == ["product.created"] * 10
    assert [e["data"]["object"]["id"] for e in first] == ids
    last = first[-1]["sequence"]

    # The mirror pauses; changes go on without it.
    time.sleep(1)
    r = s.patch(f"{ISSUER}/v1/products/{ids[0]}", json={"stock": 42})
    assert r.status_code == 200, r.text
    for pid in ids[1:3]:
        assert s.delete(f"{ISSUER}/v1/products/{pid}").status_code == 204
    second = catch_up(s, last)
    assert [(e["type"], e["data"]["object"]["id"]) for e in second] == [
        ("product.updated", ids[0]),
        ("product.deleted", ids[1]),
        ("product.deleted", ids[2]),
    ]
    assert second[0]["data"]["previous_attributes"] == {"stock": 0, "status": "out_of_stock"}
    # Nothing more, and nothing twice.
    assert catch_up(s, second[-1]["sequence"]) == []
