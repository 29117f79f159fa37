//! `POST /oauth/token` with `client_credentials` and bearer-token verification:
//! interface.md §2.4, §4.5, §5; D6, D9, D20–D24.

use std::collections::BTreeSet;
use std::time::{SystemTime, UNIX_EPOCH};

use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{ECDSA_P256_SHA256_FIXED, UnparsedPublicKey};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use gatehouse_auth::Issuer;
use gatehouse_auth::jwt::AccessClaims;
use gatehouse_domain::{ClientId, ScopeSet};
use reqwest::header::{CACHE_CONTROL, CONTENT_TYPE, WWW_AUTHENTICATE};
use reqwest::{Method, Response, StatusCode};
use serde_json::{Value, json};

use crate::common::{FormPairs, PUBLIC_URL, TestServer, expect_error};

/// Every scope but `admin`: what an omitted `scope` yields for the bootstrap client (D22).
const ALL_BUT_ADMIN: &str = "users:read users:write profile:read profile:write products:read products:write applications:read applications:write events:read webhooks:read webhooks:write audit:read";

fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

fn scope_set(s: &str) -> BTreeSet<String> {
    s.split(' ')
        .filter(|w| !w.is_empty())
        .map(str::to_owned)
        .collect()
}

/// `POST /oauth/token` with an optional HTTP Basic pair and a form.
async fn post_token(
    s: &TestServer,
    basic: Option<(&str, &str)>,
    form: &[(&str, &str)],
) -> Response {
    let mut rb = s.request(Method::POST, "/oauth/token").form(form);
    if let Some((id, secret)) = basic {
        rb = rb.basic_auth(id, Some(secret));
    }
    rb.send().await.unwrap()
}

fn assert_no_store(res: &Response) {
    let cc = res
        .headers()
        .get(CACHE_CONTROL)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    assert!(
        cc.split(',')
            .any(|d| d.trim().eq_ignore_ascii_case("no-store")),
        "D21: every token response carries Cache-Control: no-store (got {cc:?}, status {})",
        res.status()
    );
}

/// An RFC 6749 §5.2 error of the token endpoint (D21).
async fn expect_oauth_error(res: Response, status: StatusCode, error: &str) -> Value {
    let got = res.status();
    assert_no_store(&res);
    let ct = res
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    let www = res
        .headers()
        .get(WWW_AUTHENTICATE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let text = res.text().await.unwrap();
    assert_eq!(got, status, "expected {status} {error}, body: {text}");
    assert!(
        ct.starts_with("application/json"),
        "token errors are JSON (got {ct:?})"
    );
    let body: Value =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"));
    assert_eq!(body["error"], error, "{body}");
    assert!(
        body["error_description"].is_string(),
        "D21: error_description (got {body})"
    );
    assert!(
        body.get("code").is_none() && !body["error"].is_object(),
        "D21: not the API envelope: {body}"
    );
    if status == StatusCode::UNAUTHORIZED {
        let www = www.expect("D21: a failed client authentication carries WWW-Authenticate: Basic");
        assert!(
            www.to_ascii_lowercase().starts_with("basic"),
            "WWW-Authenticate: {www}"
        );
    }
    body
}

/// A successful token response: checks the fields of interface.md §2.4 and
/// D21/D24, returns the body.
async fn expect_token(res: Response) -> Value {
    let status = res.status();
    assert_no_store(&res);
    let ct = res
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    let text = res.text().await.unwrap();
    assert_eq!(status, StatusCode::OK, "token request failed: {text}");
    assert!(ct.starts_with("application/json"), "{ct}");
    let body: Value = serde_json::from_str(&text).unwrap();
    assert!(
        body["access_token"].as_str().is_some_and(|t| !t.is_empty()),
        "{body}"
    );
    assert_eq!(body["token_type"], "Bearer", "{body}");
    assert_eq!(
        body["expires_in"],
        json!(3600),
        "expires_in is the integer 3600: {body}"
    );
    assert!(body["scope"].is_string(), "{body}");
    // D24: client credentials issue no refresh token.
    assert!(
        body.get("refresh_token").is_none(),
        "D24: no refresh token for client credentials: {body}"
    );
    body
}

fn b64_json(part: &str) -> Value {
    let bytes = B64
        .decode(part)
        .unwrap_or_else(|e| panic!("base64url ({e}): {part}"));
    serde_json::from_slice(&bytes).unwrap()
}

/// (header, claims) of a JWT, signature not checked.
fn decode_jwt(token: &str) -> (Value, Value) {
    let parts: Vec<&str> = token.split('.').collect();
    assert_eq!(parts.len(), 3, "a JWS compact serialization: {token}");
    (b64_json(parts[0]), b64_json(parts[1]))
}

fn encode_json(v: &Value) -> String {
    B64.encode(serde_json::to_vec(v).unwrap())
}

/// Expects a 401 from a bearer-protected endpoint (D6, D23).
async fn expect_bearer_401(res: Response, code: &str) {
    let www: Vec<String> = res
        .headers()
        .get_all(WWW_AUTHENTICATE)
        .iter()
        .map(|v| v.to_str().unwrap().to_owned())
        .collect();
    expect_error(res, StatusCode::UNAUTHORIZED, code).await;
    assert_eq!(www.len(), 1, "one WWW-Authenticate challenge: {www:?}");
    assert!(
        www[0].starts_with("Bearer ") && www[0].contains("error=\"invalid_token\""),
        "D6: a 401 with credentials carries Bearer error=\"invalid_token\" (got {})",
        www[0]
    );
}

async fn get_users_with(s: &TestServer, token: &str) -> Response {
    s.call(Method::GET, "/v1/users", token, None).await
}

/// Signs claims for the bootstrap client with the server's real signing key.
fn mint(s: &TestServer, issuer: &Issuer, scope: &str, iat: i64, exp: i64) -> String {
    let st = &s.running.as_ref().unwrap().state;
    let claims = AccessClaims {
        auth_time: None,
        authn: None,
        org: s.org(),
        client_id: ClientId::parse(&s.creds.client_id).unwrap(),
        user: None,
        scopes: ScopeSet::parse(scope).unwrap(),
        jti: gatehouse_domain::Jti::parse(&format!("test{}", now())).unwrap(),
        iat,
        exp,
        chain: None,
    };
    gatehouse_auth::jwt::sign(
        &st.app.auth().unwrap().keys().current(),
        issuer,
        &SystemRandom::new(),
        &claims,
    )
}

fn real_issuer(s: &TestServer) -> Issuer {
    s.running
        .as_ref()
        .unwrap()
        .state
        .app
        .auth()
        .unwrap()
        .issuer()
        .clone()
}

// ---------------------------------------------------------------------------
// Client authentication (D20, D21)
// ---------------------------------------------------------------------------

#[tokio::test]
async fn client_credentials_with_http_basic() {
    let s = TestServer::start().await;
    let res = post_token(
        &s,
        Some((&s.creds.client_id, &s.creds.client_secret)),
        &[
            ("grant_type", "client_credentials"),
            ("scope", "users:read"),
        ],
    )
    .await;
    let body = expect_token(res).await;
    assert_eq!(body["scope"], "users:read");
    let res = get_users_with(&s, body["access_token"].as_str().unwrap()).await;
    assert_eq!(res.status(), StatusCode::OK);
}

#[tokio::test]
async fn client_credentials_with_form_fields() {
    // D20: client_secret_post.
    let s = TestServer::start().await;
    let res = post_token(
        &s,
        None,
        &[
            ("grant_type", "client_credentials"),
            ("client_id", &s.creds.client_id),
            ("client_secret", &s.creds.client_secret),
            ("scope", "users:read products:read"),
        ],
    )
    .await;
    let body = expect_token(res).await;
    assert_eq!(
        scope_set(body["scope"].as_str().unwrap()),
        scope_set("users:read products:read")
    );
    let t = body["access_token"].as_str().unwrap();
    assert_eq!(get_users_with(&s, t).await.status(), StatusCode::OK);
    assert_eq!(
        s.call(Method::GET, "/v1/products", t, None).await.status(),
        StatusCode::OK
    );
}

#[tokio::test]
async fn basic_with_matching_client_id_in_form_is_accepted() {
    // RFC 6749 §2.3.1 / D20: client_id may accompany Basic when it names the same client.
    let s = TestServer::start().await;
    let res = post_token(
        &s,
        Some((&s.creds.client_id, &s.creds.client_secret)),
        &[
            ("grant_type", "client_credentials"),
            ("client_id", &s.creds.client_id),
            ("scope", "users:read"),
        ],
    )
    .await;
    expect_token(res).await;
}

#[tokio::test]
async fn every_token_call_issues_a_new_token() {
    // interface.md §5.4: a new access token on every token call.
    let s = TestServer::start().await;
    let a = s.token("users:read").await;
    let b = s.token("users:read").await;
    assert_ne!(a, b);
    assert_ne!(
        decode_jwt(&a).1["jti"],
        decode_jwt(&b).1["jti"],
        "D23: jti is unique"
    );
    for t in [&a, &b] {
        assert_eq!(get_users_with(&s, t).await.status(), StatusCode::OK);
    }
}

#[tokio::test]
async fn wrong_secret_is_invalid_client() {
    // D20, D21
    let s = TestServer::start().await;
    let res = post_token(
        &s,
        Some((&s.creds.client_id, "gcs_not-the-secret")),
        &[
            ("grant_type", "client_credentials"),
            ("scope", "users:read"),
        ],
    )
    .await;
    expect_oauth_error(res, StatusCode::UNAUTHORIZED, "invalid_client").await;
    // Same through client_secret_post.
    let res = post_token(
        &s,
        None,
        &[
            ("grant_type", "client_credentials"),
            ("client_id", &s.creds.client_id),
            ("client_secret", "gcs_not-the-secret"),
        ],
    )
    .await;
    expect_oauth_error(res, StatusCode::UNAUTHORIZED, "invalid_client").await;
    // A secret that is the right one with a character more or less.
    let longer = format!("{}x", s.creds.client_secret);
    let shorter = &s.creds.client_secret[..s.creds.client_secret.len() - 1];
    for secret in [longer.as_str(), shorter, ""] {
        let res = post_token(
            &s,
            Some((&s.creds.client_id, secret)),
            &[("grant_type", "client_credentials")],
        )
        .await;
        expect_oauth_error(res, StatusCode::UNAUTHORIZED, "invalid_client").await;
    }
}

#[tokio::test]
async fn unknown_client_is_invalid_client() {
    // D20, D21: an unknown id answers exactly like a wrong secret.
    let s = TestServer::start().await;
    let unknown = ClientId::generate().to_string();
    for id in [unknown.as_str(), "app_", "nobody", "usr_abc"] {
        let res = post_token(
            &s,
            Some((id, &s.creds.client_secret)),
            &[("grant_type", "client_credentials")],
        )
        .await;
        expect_oauth_error(res, StatusCode::UNAUTHORIZED, "invalid_client").await;
        let res = post_token(
            &s,
            None,
            &[
                ("grant_type", "client_credentials"),
                ("client_id", id),
                ("client_secret", &s.creds.client_secret),
            ],
        )
        .await;
        expect_oauth_error(res, StatusCode::UNAUTHORIZED, "invalid_client").await;
    }
}

#[tokio::test]
async fn missing_credentials_are_invalid_client() {
    // D20, D21
    let s = TestServer::start().await;
    // Nothing at all.
    let res = post_token(
        &s,
        None,
        &[
            ("grant_type", "client_credentials"),
            ("scope", "users:read"),
        ],
    )
    .await;
    expect_oauth_error(res, StatusCode::UNAUTHORIZED, "invalid_client").await;
    // A confidential client's id without its secret.
    let res = post_token(
        &s,
        None,
        &[
            ("grant_type", "client_credentials"),
            ("client_id", &s.creds.client_id),
        ],
    )
    .await;
    expect_oauth_error(res, StatusCode::UNAUTHORIZED, "invalid_client").await;
    // A secret without an id.
    let res = post_token(
        &s,
        None,
        &[
            ("grant_type", "client_credentials"),
            ("client_secret", &s.creds.client_secret),
        ],
    )
    .await;
    let status = res.status();
    assert!(
        status == StatusCode::UNAUTHORIZED || status == StatusCode::BAD_REQUEST,
        "{status}"
    );
    let err = if status == StatusCode::UNAUTHORIZED {
        "invalid_client"
    } else {
        "invalid_request"
    };
    expect_oauth_error(res, status, err).await;
}

#[tokio::test]
async fn malformed_basic_header_is_invalid_client() {
    // D20, D21
    let s = TestServer::start().await;
    for value in ["Basic !!!notbase64", "Basic ", "Basic bm9jb2xvbg=="] {
        let res = s
            .request(Method::POST, "/oauth/token")
            .header("authorization", value)
            .form(&[("grant_type", "client_credentials")])
            .send()
            .await
            .unwrap();
        expect_oauth_error(res, StatusCode::UNAUTHORIZED, "invalid_client").await;
    }
}

#[tokio::test]
async fn two_authentication_methods_are_invalid_request() {
    // D20, RFC 6749 §2.3: one method per request.
    let s = TestServer::start().await;
    let res = post_token(
        &s,
        Some((&s.creds.client_id, &s.creds.client_secret)),
        &[
            ("grant_type", "client_credentials"),
            ("client_secret", &s.creds.client_secret),
        ],
    )
    .await;
    expect_oauth_error(res, StatusCode::BAD_REQUEST, "invalid_request").await;
}

// ---------------------------------------------------------------------------
// The request itself (D21)
// ---------------------------------------------------------------------------

#[tokio::test]
async fn missing_grant_type_is_invalid_request() {
    let s = TestServer::start().await;
    let res = post_token(
        &s,
        Some((&s.creds.client_id, &s.creds.client_secret)),
        &[("scope", "users:read")],
    )
    .await;
    expect_oauth_error(res, StatusCode::BAD_REQUEST, "invalid_request").await;
    let res = post_token(
        &s,
        Some((&s.creds.client_id, &s.creds.client_secret)),
        &[("grant_type", "")],
    )
    .await;
    expect_oauth_error(res, StatusCode::BAD_REQUEST, "invalid_request").await;
}

#[tokio::test]
async fn unknown_grant_type_is_unsupported_grant_type() {
    let s = TestServer::start().await;
    for grant in [
        "password",
        "urn:ietf:params:oauth:grant-type:jwt-bearer",
        "magic",
        "CLIENT_CREDENTIALS",
    ] {
        let res = post_token(
            &s,
            Some((&s.creds.client_id, &s.creds.client_secret)),
            &[("grant_type", grant)],
        )
        .await;
        expect_oauth_error(res, StatusCode::BAD_REQUEST, "unsupported_grant_type").await;
    }
}

#[tokio::test]
async fn non_form_bodies_are_invalid_request() {
    // interface.md §1: the token endpoints take application/x-www-form-urlencoded.
    let s = TestServer::start().await;
    let res = s
        .request(Method::POST, "/oauth/token")
        .basic_auth(&s.creds.client_id, Some(&s.creds.client_secret))
        .json(&json!({"grant_type": "client_credentials", "scope": "users:read"}))
        .send()
        .await
        .unwrap();
    expect_oauth_error(res, StatusCode::BAD_REQUEST, "invalid_request").await;
    // No Content-Type at all.
    let res = s
        .request(Method::POST, "/oauth/token")
        .basic_auth(&s.creds.client_id, Some(&s.creds.client_secret))
        .body("grant_type=client_credentials")
        .send()
        .await
        .unwrap();
    expect_oauth_error(res, StatusCode::BAD_REQUEST, "invalid_request").await;
    // text/plain carrying a form.
    let res = s
        .request(Method::POST, "/oauth/token")
        .basic_auth(&s.creds.client_id, Some(&s.creds.client_secret))
        .header("content-type", "text/plain")
        .body("grant_type=client_credentials")
        .send()
        .await
        .unwrap();
    expect_oauth_error(res, StatusCode::BAD_REQUEST, "invalid_request").await;
    // The form content type with a charset parameter is still a form.
    let res = s
        .request(Method::POST, "/oauth/token")
        .basic_auth(&s.creds.client_id, Some(&s.creds.client_secret))
        .header(
            "content-type",
            "application/x-www-form-urlencoded; charset=UTF-8",
        )
        .body("grant_type=client_credentials&scope=users%3Aread")
        .send()
        .await
        .unwrap();
    let body = expect_token(res).await;
    assert_eq!(body["scope"], "users:read");
}

#[tokio::test]
async fn duplicate_parameters_are_invalid_request() {
    // RFC 6749 §3.2: parameters must not be included more than once.
    let s = TestServer::start().await;
    for form in [
        "grant_type=client_credentials&scope=users%3Aread&scope=products%3Aread",
        "grant_type=client_credentials&grant_type=client_credentials",
    ] {
        let res = s
            .request(Method::POST, "/oauth/token")
            .basic_auth(&s.creds.client_id, Some(&s.creds.client_secret))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(form)
            .send()
            .await
            .unwrap();
        expect_oauth_error(res, StatusCode::BAD_REQUEST, "invalid_request").await;
    }
}

// ---------------------------------------------------------------------------
// Scopes (D22)
// ---------------------------------------------------------------------------

#[tokio::test]
async fn omitted_scope_grants_everything_registered_except_admin() {
    // D22
    let s = TestServer::start().await;
    let res = post_token(
        &s,
        Some((&s.creds.client_id, &s.creds.client_secret)),
        &[("grant_type", "client_credentials")],
    )
    .await;
    let body = expect_token(res).await;
    assert_eq!(
        scope_set(body["scope"].as_str().unwrap()),
        scope_set(ALL_BUT_ADMIN)
    );
    let (_, claims) = decode_jwt(body["access_token"].as_str().unwrap());
    assert_eq!(
        scope_set(claims["scope"].as_str().unwrap()),
        scope_set(ALL_BUT_ADMIN)
    );

    // A client registered for a few scopes, `admin` among them but not approved.
    let (id, secret) = s
        .new_client(&s.org(), "users:read products:read admin")
        .await;
    let res = post_token(
        &s,
        Some((&id, &secret)),
        &[("grant_type", "client_credentials")],
    )
    .await;
    let body = expect_token(res).await;
    assert_eq!(
        scope_set(body["scope"].as_str().unwrap()),
        scope_set("users:read products:read")
    );
}

#[tokio::test]
async fn scope_not_registered_is_invalid_scope() {
    // D22
    let s = TestServer::start().await;
    let (id, secret) = s.new_client(&s.org(), "users:read").await;
    for scope in ["users:write", "users:read users:write", "products:read"] {
        let res = post_token(
            &s,
            Some((&id, &secret)),
            &[("grant_type", "client_credentials"), ("scope", scope)],
        )
        .await;
        expect_oauth_error(res, StatusCode::BAD_REQUEST, "invalid_scope").await;
    }
    // The registered scope itself works.
    let res = post_token(
        &s,
        Some((&id, &secret)),
        &[
            ("grant_type", "client_credentials"),
            ("scope", "users:read"),
        ],
    )
    .await;
    assert_eq!(expect_token(res).await["scope"], "users:read");
}

#[tokio::test]
async fn unknown_scope_is_invalid_scope() {
    // D22
    let s = TestServer::start().await;
    for scope in ["bogus", "users:read bogus", "USERS:READ", "users", "member"] {
        let res = post_token(
            &s,
            Some((&s.creds.client_id, &s.creds.client_secret)),
            &[("grant_type", "client_credentials"), ("scope", scope)],
        )
        .await;
        expect_oauth_error(res, StatusCode::BAD_REQUEST, "invalid_scope").await;
    }
}

#[tokio::test]
async fn admin_scope_only_for_an_approved_client() {
    // D22: `admin` must be asked for by name, and only an approved client gets it.
    let s = TestServer::start().await;
    // The bootstrap client is approved (D41).
    let res = post_token(
        &s,
        Some((&s.creds.client_id, &s.creds.client_secret)),
        &[("grant_type", "client_credentials"), ("scope", "admin")],
    )
    .await;
    let body = expect_token(res).await;
    assert_eq!(body["scope"], "admin");
    assert_eq!(
        decode_jwt(body["access_token"].as_str().unwrap()).1["scope"],
        "admin"
    );

    // Registered for admin but not approved.
    let (id, secret) = s.new_client(&s.org(), "users:read admin").await;
    for scope in ["admin", "users:read admin"] {
        let res = post_token(
            &s,
            Some((&id, &secret)),
            &[("grant_type", "client_credentials"), ("scope", scope)],
        )
        .await;
        expect_oauth_error(res, StatusCode::BAD_REQUEST, "invalid_scope").await;
    }
    // Approval (what `gatehouse client approve-admin` does) takes effect on the next request (D40).
    let cid = ClientId::parse(&id).unwrap();
    s.store()
        .approve_admin(&s.org(), &cid, crate::common::operator())
        .await
        .unwrap();
    let res = post_token(
        &s,
        Some((&id, &secret)),
        &[("grant_type", "client_credentials"), ("scope", "admin")],
    )
    .await;
    assert_eq!(expect_token(res).await["scope"], "admin");
}

#[tokio::test]
async fn admin_satisfies_every_scope_check() {
    // D22
    let s = TestServer::start().await;
    let t = s.token("admin").await;
    let res = s.call(Method::GET, "/v1/users", &t, None).await;
    assert_eq!(res.status(), StatusCode::OK);
    let res = s
        .call(
            Method::POST,
            "/v1/users",
            &t,
            Some(json!({"email": "root@example.com", "name": "Root", "role": "viewer"})),
        )
        .await;
    assert_eq!(res.status(), StatusCode::CREATED);
    let user: Value = res.json().await.unwrap();
    let uid = user["data"]["id"].as_str().unwrap();
    let res = s
        .call(Method::GET, &format!("/v1/users/{uid}"), &t, None)
        .await;
    assert_eq!(res.status(), StatusCode::OK);
    let res = s
        .call(
            Method::PATCH,
            &format!("/v1/users/{uid}"),
            &t,
            Some(json!({"name": "Root Two"})),
        )
        .await;
    assert_eq!(res.status(), StatusCode::OK);
    let res = s.call(Method::GET, "/v1/products", &t, None).await;
    assert_eq!(res.status(), StatusCode::OK);
    let res = s
        .call(
            Method::POST,
            "/v1/products",
            &t,
            Some(json!({"name": "Widget", "sku": "W-1", "price": 100, "stock": 5})),
        )
        .await;
    assert_eq!(res.status(), StatusCode::CREATED);
    let product: Value = res.json().await.unwrap();
    let pid = product["data"]["id"].as_str().unwrap();
    let res = s
        .call(Method::GET, &format!("/v1/products/{pid}"), &t, None)
        .await;
    assert_eq!(res.status(), StatusCode::OK);
    let res = s
        .call(Method::DELETE, &format!("/v1/products/{pid}"), &t, None)
        .await;
    assert_eq!(res.status(), StatusCode::NO_CONTENT);
    let res = s
        .call(Method::DELETE, &format!("/v1/users/{uid}"), &t, None)
        .await;
    assert_eq!(res.status(), StatusCode::NO_CONTENT);
}

async fn expect_insufficient_scope(res: Response, needed: &str) {
    let www: Vec<String> = res
        .headers()
        .get_all(WWW_AUTHENTICATE)
        .iter()
        .map(|v| v.to_str().unwrap().to_owned())
        .collect();
    expect_error(res, StatusCode::FORBIDDEN, "INSUFFICIENT_SCOPE").await;
    assert_eq!(www.len(), 1, "{www:?}");
    assert!(www[0].starts_with("Bearer "), "{}", www[0]);
    assert!(
        www[0].contains("error=\"insufficient_scope\""),
        "D6: {}",
        www[0]
    );
    assert!(
        www[0].contains(&format!("scope=\"{needed}\"")),
        "D6: names the needed scope {needed}: {}",
        www[0]
    );
}

#[tokio::test]
async fn a_tokens_scope_is_enforced() {
    // interface.md §5.6, D6, D9
    let s = TestServer::start().await;
    let products_only = s.token("products:read").await;
    expect_insufficient_scope(
        s.call(Method::GET, "/v1/users", &products_only, None).await,
        "users:read",
    )
    .await;
    expect_insufficient_scope(
        s.call(Method::GET, "/v1/users/usr_abc", &products_only, None)
            .await,
        "users:read",
    )
    .await;
    assert_eq!(
        s.call(Method::GET, "/v1/products", &products_only, None)
            .await
            .status(),
        StatusCode::OK
    );

    let read_only = s.token("users:read").await;
    assert_eq!(
        s.call(Method::GET, "/v1/users", &read_only, None)
            .await
            .status(),
        StatusCode::OK
    );
    let res = s
        .call(
            Method::POST,
            "/v1/users",
            &read_only,
            Some(json!({"email": "a@example.com", "name": "A", "role": "viewer"})),
        )
        .await;
    expect_insufficient_scope(res, "users:write").await;
    // D9: 403 comes before the request's own problems (400).
    let res = s
        .call(
            Method::POST,
            "/v1/users",
            &read_only,
            Some(json!({"bogus": true})),
        )
        .await;
    expect_insufficient_scope(res, "users:write").await;
    expect_insufficient_scope(
        s.call(Method::GET, "/v1/products", &read_only, None).await,
        "products:read",
    )
    .await;
    // Nothing was created by the refused request.
    let list: Value = s
        .call(Method::GET, "/v1/users", &read_only, None)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(list["meta"]["total"], 0, "{list}");
}

// ---------------------------------------------------------------------------
// The access token (D23)
// ---------------------------------------------------------------------------

#[tokio::test]
async fn access_token_is_an_es256_jwt_with_the_d23_claims() {
    let s = TestServer::start().await;
    let before = now();
    let res = post_token(
        &s,
        Some((&s.creds.client_id, &s.creds.client_secret)),
        &[
            ("grant_type", "client_credentials"),
            ("scope", "users:read products:read"),
        ],
    )
    .await;
    let body = expect_token(res).await;
    let after = now();
    let token = body["access_token"].as_str().unwrap();
    let (header, claims) = decode_jwt(token);
    assert_eq!(header["alg"], "ES256", "{header}");
    let kid = header["kid"].as_str().expect("kid in the header");
    assert!(!kid.is_empty());

    assert_eq!(claims["iss"], PUBLIC_URL, "{claims}");
    let aud_ok = claims["aud"] == format!("{PUBLIC_URL}/v1")
        || claims["aud"]
            .as_array()
            .is_some_and(|a| a.iter().any(|v| v == &json!(format!("{PUBLIC_URL}/v1"))));
    assert!(aud_ok, "aud is {{public_url}}/v1: {claims}");
    assert_eq!(
        claims["sub"],
        s.creds.client_id.as_str(),
        "no user: sub is the client id"
    );
    assert_eq!(claims["client_id"], s.creds.client_id.as_str());
    assert_eq!(claims["org"], s.creds.org.as_str());
    assert_eq!(
        scope_set(claims["scope"].as_str().unwrap()),
        scope_set("users:read products:read")
    );
    assert_eq!(
        claims["scope"], body["scope"],
        "the response's scope is the token's"
    );
    assert!(
        claims["jti"].as_str().is_some_and(|j| !j.is_empty()),
        "{claims}"
    );
    let iat = claims["iat"].as_i64().expect("iat is a number");
    let exp = claims["exp"].as_i64().expect("exp is a number");
    assert!(
        iat >= before - 1 && iat <= after + 1,
        "iat is now: {iat} not in [{before}, {after}]"
    );
    assert_eq!(exp, iat + 3600);

    // The signature checks out against the published JWKS.
    let jwks: Value = s
        .request(Method::GET, "/.well-known/jwks.json")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let jwk = jwks["keys"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["kid"] == kid)
        .unwrap_or_else(|| panic!("kid {kid} published: {jwks}"));
    assert_eq!(jwk["kty"], "EC");
    assert_eq!(jwk["crv"], "P-256");
    assert!(
        jwk.get("d").is_none(),
        "no private key material in the JWKS"
    );
    let x = B64.decode(jwk["x"].as_str().unwrap()).unwrap();
    let y = B64.decode(jwk["y"].as_str().unwrap()).unwrap();
    assert_eq!((x.len(), y.len()), (32, 32));
    let mut point = vec![0x04];
    point.extend_from_slice(&x);
    point.extend_from_slice(&y);
    let key = UnparsedPublicKey::new(&ECDSA_P256_SHA256_FIXED, point);
    let (signed, sig) = token.rsplit_once('.').unwrap();
    let sig = B64.decode(sig).unwrap();
    assert_eq!(
        sig.len(),
        64,
        "ES256 signatures are r||s, 64 bytes (RFC 7518 §3.4)"
    );
    key.verify(signed.as_bytes(), &sig)
        .expect("the token's signature verifies against the JWKS key");
    // And not over anything else.
    let tampered = format!("{signed}x");
    assert!(key.verify(tampered.as_bytes(), &sig).is_err());
}

#[tokio::test]
async fn lowercase_bearer_scheme_is_accepted() {
    // RFC 7235 §2.1: the auth scheme is case-insensitive.
    let s = TestServer::start().await;
    let t = s.token("users:read").await;
    let res = s
        .request(Method::GET, "/v1/users")
        .header("authorization", format!("bearer {t}"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
}

#[tokio::test]
async fn no_authorization_header_is_invalid_token_with_realm() {
    // D6, RFC 6750 §3.1
    let s = TestServer::start().await;
    for (method, path) in [
        (Method::GET, "/v1/users"),
        (Method::GET, "/v1/products"),
        (Method::POST, "/v1/users"),
    ] {
        let res = s.request(method, path).send().await.unwrap();
        let www: Vec<String> = res
            .headers()
            .get_all(WWW_AUTHENTICATE)
            .iter()
            .map(|v| v.to_str().unwrap().to_owned())
            .collect();
        expect_error(res, StatusCode::UNAUTHORIZED, "INVALID_TOKEN").await;
        assert_eq!(
            www,
            vec!["Bearer realm=\"gatehouse\"".to_owned()],
            "D6: no error code without credentials"
        );
    }
}

#[tokio::test]
async fn garbage_tokens_are_invalid_token() {
    // D6, D23
    let s = TestServer::start().await;
    let long = "a".repeat(5000);
    let real = s.token("users:read").await;
    let two_parts = real.rsplit_once('.').unwrap().0.to_owned();
    let four_parts = format!("{real}.x");
    for t in [
        "garbage",
        "a.b.c",
        "..",
        "eyJhbGciOiJFUzI1NiJ9.e30.",
        long.as_str(),
        two_parts.as_str(),
        four_parts.as_str(),
        "gk_live_notakey",
        "rt_notanaccesstoken",
    ] {
        expect_bearer_401(get_users_with(&s, t).await, "INVALID_TOKEN").await;
    }
    // A token in the wrong scheme.
    let res = s
        .request(Method::GET, "/v1/users")
        .header("authorization", format!("Token {real}"))
        .send()
        .await
        .unwrap();
    expect_error(res, StatusCode::UNAUTHORIZED, "INVALID_TOKEN").await;
}

#[tokio::test]
async fn alg_none_is_refused() {
    // D23: `alg: none` is always refused.
    let s = TestServer::start().await;
    let real = s.token("users:read").await;
    let (header, claims) = decode_jwt(&real);
    let payload = encode_json(&claims);
    let sig = real.rsplit_once('.').unwrap().1;
    for h in [
        json!({"alg": "none", "typ": "JWT"}),
        json!({"alg": "none", "kid": header["kid"]}),
        json!({"alg": "None", "kid": header["kid"]}),
        json!({"alg": "NONE"}),
    ] {
        let h = encode_json(&h);
        expect_bearer_401(
            get_users_with(&s, &format!("{h}.{payload}.")).await,
            "INVALID_TOKEN",
        )
        .await;
        // With the real signature left on.
        expect_bearer_401(
            get_users_with(&s, &format!("{h}.{payload}.{sig}")).await,
            "INVALID_TOKEN",
        )
        .await;
    }
    // The genuine token still works (the forgeries were refused for their header).
    assert_eq!(get_users_with(&s, &real).await.status(), StatusCode::OK);
}

#[tokio::test]
async fn hmac_signed_tokens_are_refused() {
    // D23: HMAC algorithms are always refused, whatever key signed them
    // (including the public key, the classic key-confusion attack).
    use aws_lc_rs::hmac;
    let s = TestServer::start().await;
    let real = s.token("users:read").await;
    let (header, claims) = decode_jwt(&real);
    let jwks: Value = s
        .request(Method::GET, "/.well-known/jwks.json")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let jwk = jwks["keys"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["kid"] == header["kid"])
        .unwrap()
        .clone();
    let mut point = vec![0x04];
    point.extend(B64.decode(jwk["x"].as_str().unwrap()).unwrap());
    point.extend(B64.decode(jwk["y"].as_str().unwrap()).unwrap());
    let payload = encode_json(&claims);
    for (alg, algo) in [
        ("HS256", hmac::HMAC_SHA256),
        ("HS384", hmac::HMAC_SHA384),
        ("HS512", hmac::HMAC_SHA512),
    ] {
        for secret in [point.as_slice(), jwk.to_string().as_bytes(), b"secret"] {
            let h = encode_json(&json!({"alg": alg, "typ": "JWT", "kid": header["kid"]}));
            let signing_input = format!("{h}.{payload}");
            let tag = hmac::sign(&hmac::Key::new(algo, secret), signing_input.as_bytes());
            let forged = format!("{signing_input}.{}", B64.encode(tag.as_ref()));
            expect_bearer_401(get_users_with(&s, &forged).await, "INVALID_TOKEN").await;
        }
    }
}

#[tokio::test]
async fn other_algorithms_are_refused() {
    // D23: tokens are ES256; a header naming any other algorithm is refused,
    // even with the genuine payload and signature.
    let s = TestServer::start().await;
    let real = s.token("users:read").await;
    let (header, _) = decode_jwt(&real);
    let mut parts = real.split('.');
    let (_, payload, sig) = (
        parts.next().unwrap(),
        parts.next().unwrap(),
        parts.next().unwrap(),
    );
    for alg in ["ES384", "ES512", "RS256", "PS256", "EdDSA", "es256", ""] {
        let h = encode_json(&json!({"alg": alg, "kid": header["kid"]}));
        expect_bearer_401(
            get_users_with(&s, &format!("{h}.{payload}.{sig}")).await,
            "INVALID_TOKEN",
        )
        .await;
    }
    // No alg at all.
    let h = encode_json(&json!({"kid": header["kid"]}));
    expect_bearer_401(
        get_users_with(&s, &format!("{h}.{payload}.{sig}")).await,
        "INVALID_TOKEN",
    )
    .await;
    // A JWE-looking five-part token.
    let jwe = format!(
        "{}.a.b.c.d",
        encode_json(&json!({"alg": "dir", "enc": "A256GCM"}))
    );
    expect_bearer_401(get_users_with(&s, &jwe).await, "INVALID_TOKEN").await;
}

#[tokio::test]
async fn a_flipped_signature_byte_is_refused() {
    // D23
    let s = TestServer::start().await;
    let real = s.token("users:read").await;
    let (signed, sig) = real.rsplit_once('.').unwrap();
    let sig = B64.decode(sig).unwrap();
    for i in [0, 31, 32, 63] {
        let mut bad = sig.clone();
        bad[i] ^= 0x01;
        let forged = format!("{signed}.{}", B64.encode(&bad));
        expect_bearer_401(get_users_with(&s, &forged).await, "INVALID_TOKEN").await;
    }
    // Truncated and empty signatures.
    let short = format!("{signed}.{}", B64.encode(&sig[..63]));
    expect_bearer_401(get_users_with(&s, &short).await, "INVALID_TOKEN").await;
    expect_bearer_401(
        get_users_with(&s, &format!("{signed}.")).await,
        "INVALID_TOKEN",
    )
    .await;
    assert_eq!(get_users_with(&s, &real).await.status(), StatusCode::OK);
}

#[tokio::test]
async fn a_modified_payload_is_refused() {
    // D23: the signature covers the claims.
    let s = TestServer::start().await;
    let real = s.token("users:read").await;
    let mut parts = real.split('.');
    let (h, _, sig) = (
        parts.next().unwrap(),
        parts.next().unwrap(),
        parts.next().unwrap(),
    );
    let (_, claims) = decode_jwt(&real);
    let mut escalated = claims.clone();
    escalated["scope"] = json!("admin");
    let mut later = claims.clone();
    later["exp"] = json!(claims["exp"].as_i64().unwrap() + 86_400);
    let other_org = s.new_org(gatehouse_domain::Plan::Free).await;
    let mut moved = claims.clone();
    moved["org"] = json!(other_org.to_string());
    for c in [escalated, later, moved] {
        let forged = format!("{h}.{}.{sig}", encode_json(&c));
        expect_bearer_401(get_users_with(&s, &forged).await, "INVALID_TOKEN").await;
    }
    // Even re-encoding the identical claims differently changes the signed bytes.
    let reencoded = format!(
        "{h}.{}.{sig}",
        B64.encode(serde_json::to_vec_pretty(&claims).unwrap())
    );
    expect_bearer_401(get_users_with(&s, &reencoded).await, "INVALID_TOKEN").await;
}

#[tokio::test]
async fn minted_token_with_the_right_issuer_works() {
    // The control for the tests below: a token minted in the test with the
    // server's key and issuer is accepted, so their failures are meaningful.
    let s = TestServer::start().await;
    let t = mint(&s, &real_issuer(&s), "users:read", now(), now() + 3600);
    assert_eq!(get_users_with(&s, &t).await.status(), StatusCode::OK);
    let (_, claims) = decode_jwt(&t);
    assert_eq!(claims["iss"], PUBLIC_URL);
}

#[tokio::test]
async fn wrong_issuer_or_audience_is_invalid_token() {
    // D23: `iss` = public_url, `aud` = {public_url}/v1.
    let s = TestServer::start().await;
    let iat = now();
    let aud = format!("{PUBLIC_URL}/v1");
    for issuer in [
        Issuer {
            iss: "https://evil.example".into(),
            aud: aud.clone(),
        },
        Issuer {
            iss: format!("{PUBLIC_URL}/"),
            aud: aud.clone(),
        },
        Issuer {
            iss: "https://localhost:8443".into(),
            aud: aud.clone(),
        },
        Issuer {
            iss: PUBLIC_URL.into(),
            aud: PUBLIC_URL.into(),
        },
        Issuer {
            iss: PUBLIC_URL.into(),
            aud: format!("{PUBLIC_URL}/v2"),
        },
        Issuer {
            iss: PUBLIC_URL.into(),
            aud: "https://evil.example/v1".into(),
        },
    ] {
        let t = mint(&s, &issuer, "users:read", iat, iat + 3600);
        let res = get_users_with(&s, &t).await;
        assert_eq!(
            res.status(),
            StatusCode::UNAUTHORIZED,
            "iss {} aud {} must be refused",
            issuer.iss,
            issuer.aud
        );
        expect_bearer_401(res, "INVALID_TOKEN").await;
    }
}

#[tokio::test]
async fn expired_token_is_token_expired() {
    // interface.md §3.3, D6, D23: only an expired token is TOKEN_EXPIRED.
    let s = TestServer::start().await;
    let iss = real_issuer(&s);
    let t = now();
    for (iat, exp) in [(t - 7200, t - 3600), (t - 3601, t - 1), (t - 4000, t - 400)] {
        let token = mint(&s, &iss, "users:read", iat, exp);
        expect_bearer_401(get_users_with(&s, &token).await, "TOKEN_EXPIRED").await;
    }
    // An expired token whose signature is broken is not "expired": it is invalid.
    let token = mint(&s, &iss, "users:read", t - 7200, t - 3600);
    let (signed, sig) = token.rsplit_once('.').unwrap();
    let mut sig = B64.decode(sig).unwrap();
    sig[5] ^= 0x80;
    let forged = format!("{signed}.{}", B64.encode(&sig));
    expect_bearer_401(get_users_with(&s, &forged).await, "INVALID_TOKEN").await;
    // An expired token with the wrong issuer is invalid too.
    let token = mint(
        &s,
        &Issuer::new("https://evil.example"),
        "users:read",
        t - 7200,
        t - 3600,
    );
    expect_bearer_401(get_users_with(&s, &token).await, "INVALID_TOKEN").await;
}

#[tokio::test]
async fn a_token_that_expires_while_cached_becomes_token_expired() {
    // D23: expiry is checked on every request, also for a token seen before.
    let s = TestServer::start().await;
    let t = now();
    let token = mint(&s, &real_issuer(&s), "users:read", t - 3598, t + 2);
    assert_eq!(get_users_with(&s, &token).await.status(), StatusCode::OK);
    tokio::time::sleep(std::time::Duration::from_millis(3100)).await;
    expect_bearer_401(get_users_with(&s, &token).await, "TOKEN_EXPIRED").await;
}

#[tokio::test]
async fn a_token_from_another_server_is_invalid_token() {
    // D23: only the server's own keys verify.
    let s = TestServer::start().await;
    let other = TestServer::start().await;
    let foreign = other.token("users:read").await;
    assert_eq!(
        get_users_with(&other, &foreign).await.status(),
        StatusCode::OK
    );
    expect_bearer_401(get_users_with(&s, &foreign).await, "INVALID_TOKEN").await;
    // Relabelled with this server's kid, it still fails.
    let own = s.token("users:read").await;
    let (own_header, _) = decode_jwt(&own);
    let (mut header, _) = decode_jwt(&foreign);
    header["kid"] = own_header["kid"].clone();
    let mut parts = foreign.split('.');
    parts.next();
    let relabelled = format!(
        "{}.{}.{}",
        encode_json(&header),
        parts.next().unwrap(),
        parts.next().unwrap()
    );
    expect_bearer_401(get_users_with(&s, &relabelled).await, "INVALID_TOKEN").await;
    // A token whose kid is unknown.
    let (_, claims) = decode_jwt(&own);
    let sig = own.rsplit_once('.').unwrap().1;
    let unknown_kid = format!(
        "{}.{}.{sig}",
        encode_json(&json!({"alg": "ES256", "kid": "nope"})),
        encode_json(&claims)
    );
    expect_bearer_401(get_users_with(&s, &unknown_kid).await, "INVALID_TOKEN").await;
}

#[tokio::test]
async fn token_endpoint_errors_and_successes_are_never_cached() {
    // D21: Cache-Control: no-store on every token response.
    let s = TestServer::start().await;
    let cases: Vec<(Option<(&str, &str)>, FormPairs<'_>)> = vec![
        (
            Some((&s.creds.client_id, &s.creds.client_secret)),
            vec![("grant_type", "client_credentials")],
        ),
        (
            Some((&s.creds.client_id, "wrong")),
            vec![("grant_type", "client_credentials")],
        ),
        (
            Some((&s.creds.client_id, &s.creds.client_secret)),
            vec![("grant_type", "nope")],
        ),
        (
            Some((&s.creds.client_id, &s.creds.client_secret)),
            vec![("scope", "users:read")],
        ),
        (
            Some((&s.creds.client_id, &s.creds.client_secret)),
            vec![("grant_type", "client_credentials"), ("scope", "bogus")],
        ),
    ];
    for (basic, form) in cases {
        let res = post_token(&s, basic, &form).await;
        assert_no_store(&res);
    }
}

#[tokio::test]
async fn repeated_failed_client_authentication_is_throttled() {
    // D28 (revised): failed client authentications at /oauth/token are
    // limited to 10 per (client_id, source address) in 5 minutes; past that,
    // 429 with Retry-After.
    let s = TestServer::start().await;
    let (id, _secret) = s.new_client(&s.org(), "users:read").await;
    for _ in 0..10 {
        let res = post_token(
            &s,
            Some((&id, "gcs_wrong")),
            &[("grant_type", "client_credentials")],
        )
        .await;
        expect_oauth_error(res, StatusCode::UNAUTHORIZED, "invalid_client").await;
    }
    let res = post_token(
        &s,
        Some((&id, "gcs_wrong")),
        &[("grant_type", "client_credentials")],
    )
    .await;
    assert_eq!(
        res.status(),
        StatusCode::TOO_MANY_REQUESTS,
        "D28: the 11th failure within 5 minutes is 429"
    );
    assert_no_store(&res);
    let retry: u64 = res
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok())
        .expect("D28: Retry-After in whole seconds");
    assert!((1..=300).contains(&retry), "Retry-After {retry}");
    // Another client_id is not affected.
    let t = s.token("users:read").await;
    assert_eq!(get_users_with(&s, &t).await.status(), StatusCode::OK);
}

// ---------------------------------------------------------------------------
// A standard OAuth 2.0 client library (the `oauth2` crate) against the server
// ---------------------------------------------------------------------------

/// oauth2's `AsyncHttpClient` over the harness's reqwest 0.13 client.
async fn oauth2_send(
    client: reqwest::Client,
    req: oauth2::HttpRequest,
) -> Result<oauth2::HttpResponse, reqwest::Error> {
    let req = reqwest::Request::try_from(req)?;
    let res = client.execute(req).await?;
    let mut builder = oauth2::http::Response::builder().status(res.status());
    for (name, value) in res.headers() {
        builder = builder.header(name, value);
    }
    let body = res.bytes().await?.to_vec();
    Ok(builder.body(body).expect("a valid response"))
}

#[tokio::test]
async fn oauth2_crate_client_credentials() {
    use oauth2::basic::{BasicClient, BasicTokenType};
    use oauth2::{AuthType, ClientSecret, Scope, TokenResponse, TokenUrl};

    let s = TestServer::start().await;
    let http = |req: oauth2::HttpRequest| oauth2_send(s.client.clone(), req);
    let token_url = TokenUrl::new(s.url("/oauth/token")).unwrap();

    // client_secret_basic (the crate's default).
    let client = BasicClient::new(oauth2::ClientId::new(s.creds.client_id.clone()))
        .set_client_secret(ClientSecret::new(s.creds.client_secret.clone()))
        .set_token_uri(token_url.clone());
    let tok = client
        .exchange_client_credentials()
        .add_scope(Scope::new("users:read".into()))
        .request_async(&http)
        .await
        .expect("the oauth2 crate gets a token");
    assert_eq!(*tok.token_type(), BasicTokenType::Bearer);
    assert_eq!(tok.expires_in(), Some(std::time::Duration::from_secs(3600)));
    assert!(tok.refresh_token().is_none(), "D24");
    let scopes: Vec<String> = tok
        .scopes()
        .map(|v| v.iter().map(|s| s.to_string()).collect())
        .unwrap_or_default();
    assert_eq!(scopes, vec!["users:read".to_owned()]);
    let res = get_users_with(&s, tok.access_token().secret()).await;
    assert_eq!(res.status(), StatusCode::OK);

    // client_secret_post, two scopes.
    let post_client = BasicClient::new(oauth2::ClientId::new(s.creds.client_id.clone()))
        .set_client_secret(ClientSecret::new(s.creds.client_secret.clone()))
        .set_auth_type(AuthType::RequestBody)
        .set_token_uri(token_url.clone());
    let tok = post_client
        .exchange_client_credentials()
        .add_scope(Scope::new("users:read".into()))
        .add_scope(Scope::new("products:read".into()))
        .request_async(&http)
        .await
        .expect("client_secret_post works too");
    assert_eq!(
        s.call(
            Method::GET,
            "/v1/products",
            tok.access_token().secret(),
            None
        )
        .await
        .status(),
        StatusCode::OK
    );
}

#[tokio::test]
async fn oauth2_crate_sees_rfc_6749_errors() {
    use oauth2::basic::{BasicClient, BasicErrorResponseType};
    use oauth2::{ClientSecret, RequestTokenError, Scope, TokenUrl};

    let s = TestServer::start().await;
    let http = |req: oauth2::HttpRequest| oauth2_send(s.client.clone(), req);
    let token_url = TokenUrl::new(s.url("/oauth/token")).unwrap();

    let wrong = BasicClient::new(oauth2::ClientId::new(s.creds.client_id.clone()))
        .set_client_secret(ClientSecret::new("gcs_wrong".into()))
        .set_token_uri(token_url.clone());
    match wrong
        .exchange_client_credentials()
        .add_scope(Scope::new("users:read".into()))
        .request_async(&http)
        .await
    {
        Err(RequestTokenError::ServerResponse(e)) => {
            assert_eq!(*e.error(), BasicErrorResponseType::InvalidClient)
        }
        other => panic!("expected invalid_client, got {other:?}"),
    }

    let right = BasicClient::new(oauth2::ClientId::new(s.creds.client_id.clone()))
        .set_client_secret(ClientSecret::new(s.creds.client_secret.clone()))
        .set_token_uri(token_url);
    match right
        .exchange_client_credentials()
        .add_scope(Scope::new("bogus".into()))
        .request_async(&http)
        .await
    {
        Err(RequestTokenError::ServerResponse(e)) => {
            assert_eq!(*e.error(), BasicErrorResponseType::InvalidScope)
        }
        other => panic!("expected invalid_scope, got {other:?}"),
    }
}
