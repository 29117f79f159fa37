//! D49 with the Rust `openidconnect` crate (4.x, unmodified) as the relying
//! party: discovery from `/.well-known/openid-configuration`, the
//! authorization-code flow with PKCE and a nonce, the id_token checked by the
//! crate (ES256 signature against the JWKS, `iss`, `aud`, `exp`, nonce) and
//! its `at_hash` with `AccessTokenHash`, userinfo, and a refresh whose new
//! id_token names the same subject. The other ecosystems' libraries run in
//! `interop/` (openid-client, authlib) against the binary.
//!
//! The server's `public_url` is left to D1's default, `https://localhost:<the
//! port it bound>`, so the issuer the crate discovers is the address it
//! connects to (the self-signed certificate names `localhost`).
//!
//! A person at a browser is played by a cookie jar over the harness's reqwest
//! client: it reads each page's form generically (its `action` and every
//! hidden input), types the e-mail and password, presses `decision=allow`,
//! and follows the server's redirects until the one to the client.

use std::collections::BTreeMap;

use gatehouse_domain::{ClientId, Email, Name, NewUser, Role, ScopeSet, Timestamp, UserId};
use gatehouse_domain::{User, UserStatus};
use openidconnect::core::{
    CoreAuthenticationFlow, CoreClient, CoreIdTokenClaims, CoreProviderMetadata, CoreUserInfoClaims,
};
use openidconnect::{
    AccessTokenHash, AuthorizationCode, ClientSecret, CsrfToken, IssuerUrl, Nonce,
    OAuth2TokenResponse, PkceCodeChallenge, RedirectUrl, Scope, SubjectIdentifier, TokenResponse,
};
use reqwest::header::{COOKIE, LOCATION, SET_COOKIE};
use reqwest::{StatusCode, Url};

use crate::common::TestServer;

const PASSWORD: &str = "a passphrase for the openidconnect crate";
const EMAIL: &str = "rp@interop.example";
const NAME: &str = "Rust Interop";
/// A loopback redirect URI (D20): the flow stops at the redirect to it.
const REDIRECT: &str = "http://127.0.0.1/callback";

/// openidconnect's `AsyncHttpClient` over the harness's reqwest 0.13 client
/// (the crate is built without an HTTP client of its own).
async fn send(
    client: reqwest::Client,
    req: openidconnect::HttpRequest,
) -> Result<openidconnect::HttpResponse, reqwest::Error> {
    let res = client.execute(reqwest::Request::try_from(req)?).await?;
    let mut builder = openidconnect::http::Response::builder().status(res.status());
    for (name, value) in res.headers() {
        builder = builder.header(name, value);
    }
    let body = res.bytes().await?.to_vec();
    Ok(builder.body(body).expect("a valid response"))
}

/// A server whose issuer is the address the test connects to.
async fn server() -> TestServer {
    TestServer::start_with(|s| {
        s.public_url = gatehouse::config::default_public_url(s.https_addr);
    })
    .await
}

fn issuer(s: &TestServer) -> String {
    let port = s.running.as_ref().unwrap().https_addr.unwrap().port();
    format!("https://localhost:{port}")
}

async fn user(s: &TestServer) -> User {
    let u = NewUser {
        id: UserId::generate(),
        email: Email::parse(EMAIL).unwrap(),
        name: Name::parse(NAME).unwrap(),
        role: Role::Editor,
        status: UserStatus::Active,
        password_hash: Some(gatehouse_auth::password::hash_blocking(PASSWORD)),
        created_at: Timestamp::now(),
    };
    s.store()
        .insert_user(&s.org(), &u, crate::common::operator())
        .await
        .unwrap()
}

/// A confidential client registered for the OIDC scopes (D49) and one API scope.
async fn relying_party(s: &TestServer) -> (String, String) {
    let secret = gatehouse_auth::secrets::new_client_secret();
    let c = gatehouse_store::NewClient {
        id: ClientId::generate(),
        name: "openidconnect-rs".into(),
        secret_hash: Some(gatehouse_auth::secrets::hash_secret(&secret)),
        scopes: ScopeSet::parse("openid profile email users:read")
            .expect("D49: openid, profile and email are scopes"),
        redirect_uris: vec![REDIRECT.into()],
        post_logout_redirect_uris: vec![],
        admin_approved: false,
        owner: None,
        created_at: Timestamp::now(),
    };
    s.store()
        .insert_client(&s.org(), &c, crate::common::operator())
        .await
        .unwrap();
    (c.id.to_string(), secret)
}

// ---------------------------------------------------------------------------
// The person at the browser
// ---------------------------------------------------------------------------

/// Decodes the character references of an attribute value.
fn decode_entities(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find('&') {
        out.push_str(&rest[..i]);
        rest = &rest[i..];
        let Some(end) = rest.find(';').filter(|&e| e <= 10) else {
            out.push('&');
            rest = &rest[1..];
            continue;
        };
        let name = &rest[1..end];
        let ch = match name {
            "amp" => Some('&'),
            "lt" => Some('<'),
            "gt" => Some('>'),
            "quot" => Some('"'),
            "apos" => Some('\''),
            _ => {
                let n = if let Some(h) = name.strip_prefix("#x").or(name.strip_prefix("#X")) {
                    u32::from_str_radix(h, 16).ok()
                } else {
                    name.strip_prefix('#').and_then(|d| d.parse().ok())
                };
                n.and_then(char::from_u32)
            }
        };
        match ch {
            Some(c) => {
                out.push(c);
                rest = &rest[end + 1..];
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// The attributes of a start tag (`<input …>`), names lowercased.
fn attributes(tag: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let inner = tag.trim_start_matches('<').trim_end_matches('>');
    let inner = inner.trim_end_matches('/');
    let mut chars = inner
        .find(char::is_whitespace)
        .map(|i| &inner[i..])
        .unwrap_or("");
    loop {
        chars = chars.trim_start();
        if chars.is_empty() {
            break;
        }
        let name_end = chars
            .find(|c: char| c == '=' || c.is_whitespace())
            .unwrap_or(chars.len());
        let name = chars[..name_end].to_ascii_lowercase();
        chars = chars[name_end..].trim_start();
        let value = if let Some(after) = chars.strip_prefix('=') {
            let after = after.trim_start();
            let (v, rest) = match after.chars().next() {
                Some(q @ ('"' | '\'')) => {
                    let close = after[1..].find(q).map(|i| i + 1).unwrap_or(after.len());
                    (&after[1..close], after.get(close + 1..).unwrap_or(""))
                }
                _ => {
                    let e = after.find(char::is_whitespace).unwrap_or(after.len());
                    (&after[..e], &after[e..])
                }
            };
            chars = rest;
            decode_entities(v)
        } else {
            String::new()
        };
        out.insert(name, value);
    }
    out
}

#[derive(Debug, Default)]
struct Form {
    action: String,
    method: String,
    /// (name, type, value, checked)
    inputs: Vec<(String, String, String, bool)>,
    /// (name, value) of submit buttons
    buttons: Vec<(String, String)>,
}

fn start_tags<'h>(html: &'h str, name: &str) -> Vec<&'h str> {
    let lower = html.to_ascii_lowercase();
    let open = format!("<{name}");
    let mut out = vec![];
    let mut from = 0;
    while let Some(i) = lower[from..].find(&open) {
        let start = from + i;
        let after = lower.as_bytes().get(start + open.len()).copied();
        let end = lower[start..]
            .find('>')
            .map(|e| start + e)
            .unwrap_or(html.len() - 1);
        if matches!(after, Some(b' ' | b'>' | b'\n' | b'\t' | b'/')) {
            out.push(&html[start..=end]);
        }
        from = end;
    }
    out
}

fn forms(html: &str) -> Vec<Form> {
    let lower = html.to_ascii_lowercase();
    let mut out = vec![];
    let mut from = 0;
    while let Some(i) = lower[from..].find("<form") {
        let start = from + i;
        let end = lower[start..]
            .find("</form>")
            .map(|e| start + e)
            .unwrap_or(html.len());
        let body = &html[start..end];
        let Some(open) = start_tags(body, "form").into_iter().next() else {
            from = start + 5;
            continue;
        };
        let a = attributes(open);
        let mut form = Form {
            action: a.get("action").cloned().unwrap_or_default(),
            method: a.get("method").cloned().unwrap_or_default().to_lowercase(),
            ..Form::default()
        };
        for t in start_tags(body, "input") {
            let a = attributes(t);
            let kind = a
                .get("type")
                .cloned()
                .unwrap_or("text".into())
                .to_lowercase();
            let name = a.get("name").cloned().unwrap_or_default();
            let value = a.get("value").cloned().unwrap_or_default();
            if kind == "submit" {
                form.buttons.push((name, value));
            } else {
                form.inputs
                    .push((name, kind, value, a.contains_key("checked")));
            }
        }
        for t in start_tags(body, "button") {
            let a = attributes(t);
            if a.get("type")
                .is_none_or(|t| t.eq_ignore_ascii_case("submit"))
            {
                form.buttons.push((
                    a.get("name").cloned().unwrap_or_default(),
                    a.get("value").cloned().unwrap_or_default(),
                ));
            }
        }
        out.push(form);
        from = end.max(start + 5);
    }
    out
}

/// Signs in and consents at `url` like a person; returns the URL the server
/// finally redirects to on the client (`REDIRECT?code=…`).
async fn authorize_in_browser(client: &reqwest::Client, url: &str) -> Url {
    let mut jar: BTreeMap<String, String> = BTreeMap::new();
    let mut trail = vec![];
    let mut next: (reqwest::Method, Url, Vec<(String, String)>) =
        (reqwest::Method::GET, Url::parse(url).unwrap(), vec![]);
    for _ in 0..12 {
        let (method, at, fields) = next;
        let mut rb = client.request(method.clone(), at.clone());
        if !fields.is_empty() {
            rb = rb.form(&fields);
        }
        if !jar.is_empty() {
            let c: Vec<String> = jar.iter().map(|(k, v)| format!("{k}={v}")).collect();
            rb = rb.header(COOKIE, c.join("; "));
        }
        let res = rb.send().await.unwrap();
        let status = res.status();
        trail.push(format!("{method} {at} -> {status}"));
        for c in res.headers().get_all(SET_COOKIE) {
            let line = c.to_str().unwrap();
            let first = line.split(';').next().unwrap().trim();
            let (k, v) = first.split_once('=').unwrap();
            let expired = line
                .split(';')
                .any(|a| a.trim().eq_ignore_ascii_case("max-age=0"));
            if v.is_empty() || expired {
                jar.remove(k);
            } else {
                jar.insert(k.to_owned(), v.to_owned());
            }
        }
        if status.is_redirection() {
            let loc = res.headers()[LOCATION].to_str().unwrap();
            let loc = at.join(loc).unwrap();
            if loc.as_str().starts_with(REDIRECT) {
                return loc;
            }
            next = (reqwest::Method::GET, loc, vec![]);
            continue;
        }
        let body = res.text().await.unwrap();
        assert_eq!(status, StatusCode::OK, "{trail:#?}\n{body}");
        let posts: Vec<Form> = forms(&body)
            .into_iter()
            .filter(|f| f.method == "post")
            .collect();
        let form = posts
            .iter()
            .find(|f| f.inputs.iter().any(|i| i.1 == "password"))
            .or_else(|| {
                posts.iter().find(|f| {
                    f.buttons.iter().any(|b| b.0 == "decision")
                        || f.inputs.iter().any(|i| i.0 == "decision")
                })
            })
            .unwrap_or_else(|| panic!("no login or consent form: {trail:#?}\n{body}"));
        let mut fields = vec![];
        for (name, kind, value, checked) in &form.inputs {
            let v = match (name.as_str(), kind.as_str()) {
                ("", _) => continue,
                (_, "hidden") => value.clone(),
                (_, "password") => PASSWORD.into(),
                ("email", _) | (_, "email") => EMAIL.into(),
                ("decision", _) => "allow".into(),
                (_, "checkbox" | "radio") if !checked => continue,
                _ => value.clone(),
            };
            fields.push((name.clone(), v));
        }
        if form.buttons.iter().any(|b| b.0 == "decision") {
            assert!(
                form.buttons
                    .iter()
                    .any(|b| b.0 == "decision" && b.1 == "allow"),
                "a consent button decision=allow: {form:?}"
            );
            fields.push(("decision".into(), "allow".into()));
        }
        let action = if form.action.is_empty() {
            at.clone()
        } else {
            at.join(&form.action).unwrap()
        };
        next = (reqwest::Method::POST, action, fields);
    }
    panic!("no redirect to the client: {trail:#?}");
}

// ---------------------------------------------------------------------------
// The test
// ---------------------------------------------------------------------------

/// D49 end to end with `openidconnect`: discovery, code flow with PKCE and a
/// nonce, id_token (ES256, nonce, at_hash), userinfo, refresh.
#[tokio::test]
async fn d49_openidconnect_crate_discovery_code_flow_id_token_userinfo_refresh() {
    let s = server().await;
    let person = user(&s).await;
    let (client_id, secret) = relying_party(&s).await;
    let http = |req: openidconnect::HttpRequest| send(s.client.clone(), req);
    let issuer = issuer(&s);

    // Discovery: the crate fetches the document and the JWKS and checks that
    // the document names the issuer it was asked for.
    let metadata =
        CoreProviderMetadata::discover_async(IssuerUrl::new(issuer.clone()).unwrap(), &http)
            .await
            .expect("D49: /.well-known/openid-configuration that openidconnect accepts");
    assert_eq!(metadata.issuer().as_str(), issuer);
    assert!(
        metadata.userinfo_endpoint().is_some(),
        "D49: userinfo_endpoint"
    );
    assert!(
        metadata
            .id_token_signing_alg_values_supported()
            .iter()
            .any(|a| serde_json::to_value(a).unwrap() == "ES256"),
        "D49: ES256"
    );
    let client = CoreClient::from_provider_metadata(
        metadata,
        openidconnect::ClientId::new(client_id.clone()),
        Some(ClientSecret::new(secret)),
    )
    .set_redirect_uri(RedirectUrl::new(REDIRECT.into()).unwrap());

    // The authorization request: PKCE (S256), state and nonce.
    let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
    let (url, state, nonce) = client
        .authorize_url(
            CoreAuthenticationFlow::AuthorizationCode,
            CsrfToken::new_random,
            Nonce::new_random,
        )
        .add_scope(Scope::new("profile".into()))
        .add_scope(Scope::new("email".into()))
        .add_scope(Scope::new("users:read".into()))
        .set_pkce_challenge(challenge)
        .url();
    let callback = authorize_in_browser(&s.client, url.as_str()).await;
    let q: BTreeMap<String, String> = callback.query_pairs().into_owned().collect();
    assert_eq!(q.get("state"), Some(state.secret()), "{callback}");
    assert_eq!(q.get("iss"), Some(&issuer), "D49: RFC 9207 iss: {callback}");
    let code = q.get("code").expect("a code").clone();

    // The code for tokens.
    let tokens = client
        .exchange_code(AuthorizationCode::new(code))
        .unwrap()
        .set_pkce_verifier(verifier)
        .request_async(&http)
        .await
        .expect("the code exchange succeeds");
    let id_token = tokens.id_token().expect("D49: an id_token with openid");
    let id_verifier = client.id_token_verifier();
    let claims: &CoreIdTokenClaims = id_token
        .claims(&id_verifier, &nonce)
        .expect("the id_token verifies: ES256 signature, iss, aud, exp, nonce");
    assert_eq!(
        serde_json::to_value(id_token.signing_alg().unwrap()).unwrap(),
        "ES256"
    );
    assert_eq!(claims.subject().as_str(), person.id.as_str());
    assert_eq!(
        claims.nonce().map(|n| n.secret()),
        Some(nonce.secret()),
        "the nonce of the request"
    );
    assert_eq!(
        (claims.expiration() - claims.issue_time()).num_seconds(),
        3600,
        "D49: exp = iat + 3600"
    );
    let at_hash = claims.access_token_hash().expect("D49: at_hash");
    let expected = AccessTokenHash::from_token(
        tokens.access_token(),
        id_token.signing_alg().unwrap(),
        id_token.signing_key(&id_verifier).unwrap(),
    )
    .unwrap();
    assert_eq!(*at_hash, expected, "at_hash matches the access token");
    assert_eq!(claims.email().map(|e| e.as_str()), Some(EMAIL));
    assert_eq!(claims.email_verified(), Some(false), "D49: user create");
    assert_eq!(
        claims.name().and_then(|n| n.get(None)).map(|n| n.as_str()),
        Some(NAME)
    );
    assert!(claims.updated_at().is_some(), "D49: updated_at");
    let auth_time = claims.auth_time().expect("D49: auth_time");

    // Userinfo, checked against the id_token's subject by the crate.
    let info: CoreUserInfoClaims = client
        .user_info(
            tokens.access_token().clone(),
            Some(SubjectIdentifier::new(person.id.to_string())),
        )
        .unwrap()
        .request_async(&http)
        .await
        .expect("D49: userinfo");
    assert_eq!(info.email().map(|e| e.as_str()), Some(EMAIL));

    // Refresh: a new id_token for the same subject, same auth_time, no nonce.
    let refreshed = client
        .exchange_refresh_token(tokens.refresh_token().expect("a refresh token"))
        .unwrap()
        .request_async(&http)
        .await
        .expect("the refresh succeeds");
    assert_ne!(
        refreshed.access_token().secret(),
        tokens.access_token().secret()
    );
    let id2 = refreshed
        .id_token()
        .expect("D49: a refresh of an openid chain returns an id_token");
    let claims2 = id2
        .claims(&id_verifier, |n: Option<&Nonce>| match n {
            None => Ok(()),
            Some(_) => Err("D49: no nonce on refresh".to_owned()),
        })
        .expect("the refreshed id_token verifies");
    assert_eq!(claims2.subject(), claims.subject());
    assert_eq!(claims2.auth_time(), Some(auth_time));
    let at_hash2 = claims2.access_token_hash().expect("at_hash on refresh");
    let expected2 = AccessTokenHash::from_token(
        refreshed.access_token(),
        id2.signing_alg().unwrap(),
        id2.signing_key(&id_verifier).unwrap(),
    )
    .unwrap();
    assert_eq!(*at_hash2, expected2);
    let info2: CoreUserInfoClaims = client
        .user_info(
            refreshed.access_token().clone(),
            Some(claims.subject().clone()),
        )
        .unwrap()
        .request_async(&http)
        .await
        .expect("userinfo with the refreshed token");
    assert_eq!(info2.subject(), claims.subject());
}
