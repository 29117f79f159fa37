"""authlib 1.x (unmodified, from PyPI) against a real Gatehouse binary.

interop/run.sh starts the server over HTTPS, registers a confidential client
and a user, and passes them in GH_* variables; the server's self-signed
certificate is trusted with ``verify=<path>`` (GH_CA).

D49: OIDC metadata, the code flow with PKCE and nonce, the id_token checked
against the JWKS (authlib.jose + authlib.oidc.core.CodeIDToken: signature,
iss, aud, exp, nonce, at_hash), userinfo, refresh, introspection,
revocation. D20–D26: the OAuth 2.0 parts on the RFC 8414 document. D57: a
refresh chain outlives its session's browser sign-in (expired after
GH_SESSION_IDLE_SECS without browser use) but not an explicit end of the
session (revoke-others, DELETE /v1/me/sessions/{id}).
"""

import os
import time
from html.parser import HTMLParser
from urllib.parse import parse_qs, urljoin, urlsplit

import pytest
import requests
from authlib.common.security import generate_token
from authlib.integrations.requests_client import OAuth2Session, OAuthError
from authlib.jose import JsonWebKey, jwt
from authlib.oidc.core import CodeIDToken


if not os.environ.get("GH_ISSUER"):
    # Outside interop/run.sh (which always sets GH_*), e.g. `pytest
    # interop/python/test_mock.py`-style runs of the whole directory.
    pytest.skip("needs the server interop/run.sh starts (GH_* unset)", allow_module_level=True)


def env(name):
    value = os.environ.get(name)
    if not value:
        pytest.fail(f"{name} is not set (run interop/run.sh)")
    return value


ISSUER = env("GH_ISSUER").rstrip("/")
CA = env("GH_CA")
CLIENT_ID = env("GH_CLIENT_ID")
CLIENT_SECRET = env("GH_CLIENT_SECRET")
REDIRECT_URI = env("GH_REDIRECT_URI")
EMAIL = env("GH_EMAIL")
PASSWORD = env("GH_PASSWORD")
USER_ID = env("GH_USER_ID")
USER_NAME = env("GH_USER_NAME")


def trust_server_certificate(s):
    """Trusts the server's self-signed certificate (verify=<path>) on a
    requests session. trust_env is off because requests lets
    REQUESTS_CA_BUNDLE / CURL_CA_BUNDLE from the environment override a
    session's own `verify` (psf/requests#3829)."""
    s.verify = CA
    s.trust_env = False


# --- a person at a browser: generic forms, a cookie jar --------------------


class _Forms(HTMLParser):
    """Every form of a page: action, method, inputs and submit buttons."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.forms = []
        self._current = None

    def handle_starttag(self, tag, attrs):
        a = {k: (v if v is not None else "") for k, v in attrs}
        if tag == "form":
            self._current = {
                "action": a.get("action", ""),
                "method": a.get("method", "get").lower(),
                "inputs": [],
                "buttons": [],
            }
            self.forms.append(self._current)
        elif self._current is not None and tag == "input":
            kind = a.get("type", "text").lower()
            if kind == "submit":
                self._current["buttons"].append((a.get("name"), a.get("value", "")))
            else:
                self._current["inputs"].append(
                    (a.get("name"), kind, a.get("value", ""), "checked" in a)
                )
        elif self._current is not None and tag == "button":
            if a.get("type", "submit").lower() == "submit":
                self._current["buttons"].append((a.get("name"), a.get("value", "")))

    def handle_endtag(self, tag):
        if tag == "form":
            self._current = None


def forms(html):
    p = _Forms()
    p.feed(html)
    return p.forms


def new_browser():
    """A person's browser: a cookie jar that trusts the server."""
    browser = requests.Session()
    trust_server_certificate(browser)
    return browser


def authorize_in_browser(url, decision="allow", browser=None):
    """Signs in and consents like a person; returns the callback URL. With
    `browser`, in that browser (its cookies, so its sign-in); otherwise in a
    new one."""
    if browser is None:
        browser = new_browser()
    trail = []
    res = browser.get(url, allow_redirects=False)
    for _ in range(12):
        trail.append(f"{res.request.method} {res.url} -> {res.status_code}")
        if 300 <= res.status_code < 400:
            location = urljoin(res.url, res.headers["Location"])
            if location.startswith(REDIRECT_URI):
                return location
            res = browser.get(location, allow_redirects=False)
            continue
        assert res.status_code == 200, "\n".join(trail) + "\n" + res.text[:2000]
        posts = [f for f in forms(res.text) if f["method"] == "post"]
        form = next(
            (f for f in posts if any(kind == "password" for _, kind, _, _ in f["inputs"])),
            None,
        ) or next(
            (
                f
                for f in posts
                if any(n == "decision" for n, _ in f["buttons"])
                or any(n == "decision" for n, _, _, _ in f["inputs"])
            ),
            None,
        )
        assert form, "no login or consent form\n" + "\n".join(trail) + "\n" + res.text[:2000]
        fields = []
        for name, kind, value, checked in form["inputs"]:
            if not name:
                continue
            if kind == "hidden":
                fields.append((name, value))
            elif kind == "password":
                fields.append((name, PASSWORD))
            elif kind == "email" or name == "email":
                fields.append((name, EMAIL))
            elif name == "decision":
                fields.append((name, decision))
            elif kind in ("checkbox", "radio") and not checked:
                continue
            else:
                fields.append((name, value))
        buttons = [b for b in form["buttons"] if b[0] == "decision"]
        if buttons:
            assert ("decision", decision) in buttons, buttons
            fields.append(("decision", decision))
        res = browser.post(
            urljoin(res.url, form["action"] or res.url), data=fields, allow_redirects=False
        )
    raise AssertionError("no redirect to the client\n" + "\n".join(trail))


# --- fixtures ----------------------------------------------------------------


def metadata(path):
    res = requests.get(ISSUER + path, verify=CA, timeout=10)
    assert res.status_code == 200, f"{path}: {res.status_code} {res.text[:300]}"
    doc = res.json()
    assert doc["issuer"] == ISSUER
    return doc


@pytest.fixture(scope="module")
def oauth_meta():
    return metadata("/.well-known/oauth-authorization-server")


@pytest.fixture(scope="module")
def oidc_meta():
    return metadata("/.well-known/openid-configuration")


def session(scope, **kw):
    s = OAuth2Session(
        CLIENT_ID,
        CLIENT_SECRET,
        scope=scope,
        redirect_uri=REDIRECT_URI,
        code_challenge_method="S256",
        **kw,
    )
    trust_server_certificate(s)
    return s


def code_flow(meta, scope, nonce=None, browser=None):
    s = session(scope)
    verifier = generate_token(64)
    extra = {"nonce": nonce} if nonce else {}
    url, state = s.create_authorization_url(
        meta["authorization_endpoint"], code_verifier=verifier, **extra
    )
    callback = authorize_in_browser(url, browser=browser)
    token = s.fetch_token(
        meta["token_endpoint"],
        authorization_response=callback,
        state=state,
        code_verifier=verifier,
    )
    return s, token, callback


def validate_id_token(meta, id_token, access_token, nonce=None):
    jwks = requests.get(meta["jwks_uri"], verify=CA, timeout=10).json()
    params = {"client_id": CLIENT_ID, "access_token": access_token}
    if nonce:
        params["nonce"] = nonce
    claims = jwt.decode(
        id_token,
        JsonWebKey.import_key_set(jwks),
        claims_cls=CodeIDToken,
        claims_options={
            "iss": {"essential": True, "value": ISSUER},
            "aud": {"essential": True, "value": CLIENT_ID},
            "sub": {"essential": True},
        },
        claims_params=params,
    )
    claims.validate(now=int(time.time()), leeway=5)
    assert claims.header["alg"] == "ES256"
    assert "at_hash" in claims, "D49: at_hash"
    return claims


# --- OAuth 2.0 (RFC 8414 document) ------------------------------------------


def test_oauth_code_flow_pkce_refresh_revoke(oauth_meta):
    s, token, _ = code_flow(oauth_meta, "users:read profile:read")
    assert token["token_type"].lower() == "bearer"
    assert token["expires_in"] == 3600
    assert set(token["scope"].split()) == {"users:read", "profile:read"}
    me = s.get(ISSUER + "/v1/me")
    assert me.status_code == 200 and me.json()["data"]["id"] == USER_ID

    first_refresh = token["refresh_token"]
    new = s.refresh_token(oauth_meta["token_endpoint"], refresh_token=first_refresh)
    assert new["refresh_token"] != first_refresh, "D24: rotated"
    assert s.get(ISSUER + "/v1/me").status_code == 200

    res = s.revoke_token(
        oauth_meta["revocation_endpoint"], new["refresh_token"], token_type_hint="refresh_token"
    )
    assert res.status_code == 200
    with pytest.raises(OAuthError) as e:
        s.refresh_token(oauth_meta["token_endpoint"], refresh_token=new["refresh_token"])
    assert e.value.error == "invalid_grant"


def test_oauth_client_credentials(oauth_meta):
    s = session("users:read")
    token = s.fetch_token(oauth_meta["token_endpoint"], grant_type="client_credentials")
    assert token["scope"] == "users:read"
    assert "refresh_token" not in token
    assert s.get(ISSUER + "/v1/users").status_code == 200
    assert s.revoke_token(oauth_meta["revocation_endpoint"], token["access_token"]).status_code == 200
    assert s.get(ISSUER + "/v1/users").status_code == 401


# --- OpenID Connect ----------------------------------------------------------


def test_oidc_metadata(oidc_meta):
    for key in ("userinfo_endpoint", "introspection_endpoint", "end_session_endpoint", "jwks_uri"):
        assert oidc_meta.get(key), key
    assert oidc_meta["id_token_signing_alg_values_supported"] == ["ES256"]
    assert oidc_meta["subject_types_supported"] == ["public"]
    assert "openid" in oidc_meta["scopes_supported"]


def test_oidc_code_flow_id_token_userinfo_refresh_introspect_revoke(oidc_meta):
    nonce = generate_token(32)
    s, token, callback = code_flow(oidc_meta, "openid profile email users:read", nonce=nonce)
    assert parse_qs(urlsplit(callback).query).get("iss") == [ISSUER], "RFC 9207 iss"
    claims = validate_id_token(oidc_meta, token["id_token"], token["access_token"], nonce)
    assert claims["sub"] == USER_ID
    assert claims["nonce"] == nonce
    assert claims["exp"] - claims["iat"] == 3600
    assert claims["email"] == EMAIL
    assert claims["email_verified"] is False
    assert claims["name"] == USER_NAME
    assert isinstance(claims["updated_at"], int)
    assert claims.get("sid")

    info = s.get(oidc_meta["userinfo_endpoint"])
    assert info.status_code == 200, info.text
    assert info.json()["sub"] == USER_ID
    assert info.json()["email"] == EMAIL

    new = s.refresh_token(oidc_meta["token_endpoint"], refresh_token=token["refresh_token"])
    again = validate_id_token(oidc_meta, new["id_token"], new["access_token"])
    assert again["sub"] == claims["sub"]
    assert again["auth_time"] == claims["auth_time"]
    assert "nonce" not in again

    res = s.introspect_token(oidc_meta["introspection_endpoint"], token=new["access_token"])
    assert res.status_code == 200, res.text
    at = res.json()
    assert at["active"] is True
    assert at["sub"] == USER_ID and at["client_id"] == CLIENT_ID
    assert at["token_use"] == "access_token"
    rt = s.introspect_token(
        oidc_meta["introspection_endpoint"],
        token=new["refresh_token"],
        token_type_hint="refresh_token",
    ).json()
    assert rt["active"] is True and rt["token_use"] == "refresh_token"

    res = s.revoke_token(
        oidc_meta["revocation_endpoint"], new["refresh_token"], token_type_hint="refresh_token"
    )
    assert res.status_code == 200
    for t in (new["refresh_token"], new["access_token"]):
        res = s.introspect_token(oidc_meta["introspection_endpoint"], token=t)
        assert res.json() == {"active": False}
    assert s.get(oidc_meta["userinfo_endpoint"]).status_code == 401


# --- Sessions (D57) ----------------------------------------------------------
#
# run.sh starts the server with a browser sign-in that ends after
# GH_SESSION_IDLE_SECS without browser use (GATEHOUSE_SESSION_IDLE, allowed
# below its 5-minute minimum by GATEHOUSE_TEST_SETTINGS=1).

SESSION_COOKIE = "__Host-gh_session"
SESSION_IDLE_SECS = float(env("GH_SESSION_IDLE_SECS"))


def landing(browser, url):
    """Where an authorization request ends in `browser` when the person
    types and presses nothing: ("callback", url) when the server sends it
    straight back to the client, else ("login", response) or
    ("consent", response) for the page it stops at."""
    res = browser.get(url, allow_redirects=False)
    trail = []
    for _ in range(8):
        trail.append(f"{res.request.method} {res.url} -> {res.status_code}")
        if 300 <= res.status_code < 400:
            location = urljoin(res.url, res.headers["Location"])
            if location.startswith(REDIRECT_URI):
                return "callback", location
            res = browser.get(location, allow_redirects=False)
            continue
        assert res.status_code == 200, "\n".join(trail) + "\n" + res.text[:2000]
        posts = [f for f in forms(res.text) if f["method"] == "post"]
        if any(kind == "password" for f in posts for _, kind, _, _ in f["inputs"]):
            return "login", res
        if any(
            n == "decision"
            for f in posts
            for n in [b[0] for b in f["buttons"]] + [i[0] for i in f["inputs"]]
        ):
            return "consent", res
        raise AssertionError("neither login nor consent\n" + "\n".join(trail) + "\n" + res.text[:2000])
    raise AssertionError("redirected too often\n" + "\n".join(trail))


def my_sessions(s):
    """GET /v1/me/sessions with the OAuth2Session's token: {id: session}
    and the one marked `current`."""
    res = s.get(ISSUER + "/v1/me/sessions", params={"limit": 100})
    assert res.status_code == 200, res.text
    mine = {x["id"]: x for x in res.json()["data"]}
    current = [x for x in mine.values() if x["current"]]
    assert len(current) == 1, mine
    return mine, current[0]


def me_status(access_token):
    res = requests.get(
        ISSUER + "/v1/me",
        headers={"Authorization": f"Bearer {access_token}"},
        verify=CA,
        timeout=10,
    )
    return res.status_code


def test_sessions_refresh_outlives_the_browser_sign_in_not_an_explicit_end(oauth_meta):
    scope = "profile:read profile:write"
    token_url = oauth_meta["token_endpoint"]
    browser = new_browser()

    def authorize_url(s):
        url, _ = s.create_authorization_url(
            oauth_meta["authorization_endpoint"], code_verifier=generate_token(64)
        )
        return url

    # Sign-in 1: the code flow with PKCE in `browser`.
    s1, token1, _ = code_flow(oauth_meta, scope, browser=browser)
    assert set(token1["scope"].split()) == {"profile:read", "profile:write"}
    assert SESSION_COOKIE in browser.cookies, browser.cookies.keys()
    _, first = my_sessions(s1)
    assert first["id"].startswith("ses_")
    assert CLIENT_ID in first["applications"]

    # While the browser sign-in lasts, the same cookies are single sign-on:
    # a new authorization request comes straight back with a code.
    where, _ = landing(browser, authorize_url(s1))
    assert where == "callback", "signed in and consented: no page expected"

    # No browser use for longer than GATEHOUSE_SESSION_IDLE (nothing may use
    # the cookies meanwhile: that would keep the sign-in alive).
    time.sleep(SESSION_IDLE_SECS + 1.5)
    assert SESSION_COOKIE in browser.cookies, "the browser still presents its cookie"
    where, _ = landing(browser, authorize_url(s1))
    assert where == "login", "the browser sign-in has ended: the login page"

    # ... which revoked nothing: authlib's refresh still works, the session
    # stays listed, and the new tokens still act in it.
    token1b = s1.refresh_token(token_url, refresh_token=token1["refresh_token"])
    assert token1b["refresh_token"] != token1["refresh_token"], "D24: rotated"
    assert me_status(token1b["access_token"]) == 200
    _, still = my_sessions(s1)
    assert still["id"] == first["id"]

    # Sign-in 2 in the same browser (from the login page it now shows): a
    # new session, which ends the others explicitly.
    s2, token2, _ = code_flow(oauth_meta, scope, browser=browser)
    mine, second = my_sessions(s2)
    assert second["id"] != first["id"]
    assert first["id"] in mine and mine[first["id"]]["current"] is False
    res = s2.post(ISSUER + "/v1/me/sessions/revoke-others")
    assert res.status_code == 200, res.text
    assert res.json()["data"]["revoked"] >= 1

    # An explicit end revokes the chains begun in the session.
    with pytest.raises(OAuthError) as e:
        s1.refresh_token(token_url, refresh_token=token1b["refresh_token"])
    assert e.value.error == "invalid_grant"
    assert me_status(token1b["access_token"]) == 401
    mine, current = my_sessions(s2)
    assert first["id"] not in mine, "an ended session is no longer listed"
    assert current["id"] == second["id"]

    # The current session was not touched; now end it too, with its own token.
    token2b = s2.refresh_token(token_url, refresh_token=token2["refresh_token"])
    res = s2.delete(ISSUER + f"/v1/me/sessions/{second['id']}")
    assert res.status_code == 204, res.text
    with pytest.raises(OAuthError) as e:
        s2.refresh_token(token_url, refresh_token=token2b["refresh_token"])
    assert e.value.error == "invalid_grant"
    assert me_status(token2b["access_token"]) == 401
    # Ending it also ended its browser sign-in.
    where, _ = landing(browser, authorize_url(s2))
    assert where == "login"
