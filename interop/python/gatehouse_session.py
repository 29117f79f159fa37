"""The interop tests' way in: a client of their own, registered with the
`gatehouse` CLI on the server interop/run.sh started (GH_* variables), and
a requests session holding its client-credentials token."""

import json
import os
import subprocess

import requests


def session(name, scopes):
    """A session for a new client `name` with `scopes` (space-separated)."""
    issuer = os.environ["GH_ISSUER"].rstrip("/")
    client = json.loads(
        subprocess.run(
            [os.environ["GH_BIN"], "client", "create", "--org", os.environ["GH_ORG"],
             "--name", name, "--scopes", scopes, "--json"],
            capture_output=True, check=True, text=True,
        ).stdout
    )
    s = requests.Session()
    s.verify = os.environ["GH_CA"]
    s.trust_env = False
    r = s.post(
        f"{issuer}/oauth/token",
        data={"grant_type": "client_credentials", "scope": scopes},
        auth=(client["client_id"], client["client_secret"]),
    )
    r.raise_for_status()
    s.headers["Authorization"] = f"Bearer {r.json()['access_token']}"
    return s
