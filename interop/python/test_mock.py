"""D53: `gatehouse mock` for client developers, driven by authlib (unmodified).

Starts the mock itself (GH_BIN, default target/debug/gatehouse) on a free
loopback port over plain HTTP and reads what it prints with --json: the
organization id, mock_client / mock_secret, the loopback redirect URI and
the fixture password. Then:

* the login flow end to end: authorization code with PKCE through the
  loopback redirect URI on another port, a fixture user signing in with the
  fixture password (form posts with a cookie jar, as a person would), the
  code exchanged by authlib's OAuth2Session, an ID token and userinfo;
* every `Prefer: code=` of D53 on /oauth/token, /oauth/revoke and
  /oauth/introspect, and `Prefer: error=` picking another D21 code, as
  authlib sees them (the RFC 6749 error body, Retry-After where D53 says).
"""

import json
import os
import subprocess
from html.parser import HTMLParser
from urllib.parse import parse_qs, urljoin, urlsplit

import pytest
import requests
from authlib.common.security import generate_token
from authlib.integrations.requests_client import OAuth2Session

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.environ.get("GH_BIN") or os.path.join(ROOT, "target", "debug", "gatehouse")
FIXTURE_EMAIL = "ada@example.com"


@pytest.fixture(scope="module")
def mock():
    """A running `gatehouse mock` and what it printed."""
    proc = subprocess.Popen(
        [BIN, "--json", "mock", "--addr", "127.0.0.1:0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        line = proc.stdout.readline()
        assert line, "gatehouse mock printed nothing"
        info = json.loads(line)
        yield info
    finally:
        proc.terminate()
        proc.wait(timeout=10)


class _Forms(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.forms = []

    def handle_starttag(self, tag, attrs):
        a = {k: (v or "") for k, v in attrs}
        if tag == "form":
            self.forms.append({"action": a.get("action", ""), "fields": {}})
        elif tag == "input" and self.forms and a.get("name"):
            self.forms[-1]["fields"][a["name"]] = a.get("value", "")


def forms(html):
    p = _Forms()
    p.feed(html)
    return p.forms


def test_d53_mock_prints_its_organization_and_loopback_redirect(mock):
    assert mock["org"].startswith("org_")
    assert mock["client_id"] == "mock_client"
    assert mock["redirect_uri"] == "http://127.0.0.1/callback"
    assert mock["password"] == "mock-password-1234"


def test_d53_login_flow_end_to_end_with_authlib(mock):
    base = mock["url"]
    # D20/D53: the loopback redirect URI on any port.
    redirect_uri = "http://127.0.0.1:53682/callback"
    client = OAuth2Session(
        mock["client_id"],
        mock["client_secret"],
        scope="openid email profile:read",
        redirect_uri=redirect_uri,
        code_challenge_method="S256",
    )
    verifier = generate_token(64)
    nonce = generate_token(20)
    url, state = client.create_authorization_url(
        f"{base}/oauth/authorize", code_verifier=verifier, nonce=nonce
    )

    browser = requests.Session()
    page = browser.get(url, allow_redirects=False)
    assert page.status_code == 200, page.text
    # The mock serves plain HTTP: its cookies carry neither Secure nor __Host-.
    for cookie in browser.cookies:
        assert not cookie.name.startswith("__Host-"), cookie.name
        assert not cookie.secure, cookie.name
    login = next(f for f in forms(page.text) if "password" in f["fields"])
    fields = dict(login["fields"], email=FIXTURE_EMAIL, password=mock["password"])
    page = browser.post(urljoin(base, login["action"]), data=fields, allow_redirects=False)
    if page.status_code == 200:  # the consent page
        decision = next(f for f in forms(page.text) if f["action"].endswith("/decision"))
        page = browser.post(
            urljoin(base, decision["action"]),
            data=dict(decision["fields"], decision="allow"),
            allow_redirects=False,
        )
    assert page.status_code == 303, page.text
    callback = page.headers["Location"]
    assert callback.startswith(redirect_uri), callback
    query = parse_qs(urlsplit(callback).query)
    assert query["state"] == [state]
    assert query["iss"] == [base]

    token = client.fetch_token(
        f"{base}/oauth/token", authorization_response=callback, code_verifier=verifier
    )
    assert token["token_type"] == "Bearer"
    assert "id_token" in token
    info = client.get(f"{base}/oauth/userinfo").json()
    assert info["email"] == FIXTURE_EMAIL
    me = client.get(f"{base}/v1/me").json()["data"]
    assert me["email"] == FIXTURE_EMAIL and me["id"] == info["sub"]


CASES = [
    # (Prefer, status, error, Retry-After expected)
    ("code=400", 400, "invalid_grant", False),
    ("code=401", 401, "invalid_client", False),
    ("code=429", 429, "temporarily_unavailable", True),
    ("code=503", 503, "temporarily_unavailable", True),
    ("code=500", 500, "server_error", False),
    ("error=invalid_scope", 400, "invalid_scope", False),
    ("code=400, error=unsupported_grant_type", 400, "unsupported_grant_type", False),
]


@pytest.mark.parametrize("path", ["/oauth/token", "/oauth/revoke", "/oauth/introspect"])
@pytest.mark.parametrize("prefer,status,error,retry_after", CASES)
def test_d53_prefer_on_the_oauth_endpoints(mock, path, prefer, status, error, retry_after):
    body = {"grant_type": "client_credentials"} if path == "/oauth/token" else {"token": "x"}
    res = requests.post(
        mock["url"] + path,
        data=body,
        auth=(mock["client_id"], mock["client_secret"]),
        headers={"Prefer": prefer},
    )
    assert res.status_code == status, res.text
    assert res.json()["error"] == error
    assert ("Retry-After" in res.headers) == retry_after, res.headers
    if status == 401:
        assert res.headers["WWW-Authenticate"].startswith("Basic")
    # authlib reads a 4xx as an OAuthError with that code and raises a 5xx
    # as the HTTP error it is.
    if path == "/oauth/token":
        client = OAuth2Session(mock["client_id"], mock["client_secret"])
        client.headers["Prefer"] = prefer
        with pytest.raises(Exception) as caught:
            client.fetch_token(mock["url"] + path, grant_type="client_credentials")
        if status < 500:
            assert getattr(caught.value, "error", None) == error, caught.value
        else:
            assert caught.value.response.status_code == status
