//! Tokens that stop working: a deleted (D13), deactivated (D11) or demoted
//! (D29) user's tokens; signing-key rotation (D23); client-secret rotation
//! (D20); and CORS for browser clients (D36).

use std::time::{Duration, Instant};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use gatehouse_auth::{AccessClaims, jwt};
use gatehouse_domain::{ClientId, Role, ScopeSet, UserId};
use reqwest::{Method, StatusCode, header};
use serde_json::{Value, json};

use crate::common::{TestServer, expect_error};

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

/// A token for `user`, signed by the server's own key (as the authorization
/// code flow would issue it to the bootstrap client).
fn user_token(s: &TestServer, user: &UserId, scopes: &str) -> String {
    let auth = &s.running.as_ref().unwrap().state.app.auth().unwrap();
    let claims = AccessClaims::issue(
        s.org(),
        ClientId::parse(&s.creds.client_id).unwrap(),
        Some(user.clone()),
        ScopeSet::parse(scopes).unwrap(),
    );
    jwt::sign(
        &auth.keys().current(),
        auth.issuer(),
        &aws_lc_rs::rand::SystemRandom::new(),
        &claims,
    )
}

async fn admin(s: &TestServer) -> String {
    s.token("users:read users:write").await
}

/// The token is refused as D6 says a revoked one is: 401 `INVALID_TOKEN`
/// with `WWW-Authenticate: Bearer error="invalid_token"`.
async fn assert_revoked(s: &TestServer, t: &str, why: &str) {
    let res = s.call(Method::GET, "/v1/users?limit=1", t, None).await;
    assert_eq!(
        res.status(),
        StatusCode::UNAUTHORIZED,
        "{why}: the token is refused"
    );
    let www = res
        .headers()
        .get(header::WWW_AUTHENTICATE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    assert!(
        www.starts_with("Bearer") && www.contains("error=\"invalid_token\""),
        "{why}: WWW-Authenticate: {www}"
    );
    expect_error(res, StatusCode::UNAUTHORIZED, "INVALID_TOKEN").await;
}

async fn assert_works(s: &TestServer, t: &str, why: &str) {
    let res = s.call(Method::GET, "/v1/users?limit=1", t, None).await;
    let status = res.status();
    let body = res.text().await.unwrap();
    assert_eq!(status, StatusCode::OK, "{why}: {body}");
}

async fn patch_user(s: &TestServer, t: &str, id: &UserId, body: Value) -> Value {
    let res = s
        .call(Method::PATCH, &format!("/v1/users/{id}"), t, Some(body))
        .await;
    let status = res.status();
    let body: Value = res.json().await.unwrap();
    assert_eq!(status, StatusCode::OK, "{body}");
    body["data"].clone()
}

/// Waits until the wall clock is in a later Unix second than now, so a token
/// minted afterwards is unambiguously newer than a revocation made before
/// (JWT `iat` has one-second resolution).
async fn next_second() {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    let rest = 1000 - (now.as_millis() % 1000) as u64;
    tokio::time::sleep(Duration::from_millis(rest + 50)).await;
}

/// Runs the real `gatehouse` binary against the test server's data directory.
async fn gatehouse(s: &TestServer, args: &[&str]) -> (bool, String, String) {
    let fut = tokio::process::Command::new(env!("CARGO_BIN_EXE_gatehouse"))
        .arg("--data-dir")
        .arg(s.data_dir())
        .args(crate::common::db_args(&s.data_dir()))
        .args(args)
        .env_remove("GATEHOUSE_MASTER_KEY")
        .env_remove("GATEHOUSE_DATABASE_URL")
        .env_remove("GATEHOUSE_CONFIG")
        .env_remove("GATEHOUSE_DATA_DIR")
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(60), fut)
        .await
        .expect("the command finishes within a minute")
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `gatehouse --json …`: its one JSON object.
async fn gatehouse_json(s: &TestServer, args: &[&str]) -> Value {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    let (ok, out, err) = gatehouse(s, &all).await;
    assert!(
        ok,
        "gatehouse {args:?} succeeds\nstdout: {out}\nstderr: {err}"
    );
    serde_json::from_str(out.trim())
        .unwrap_or_else(|e| panic!("D40: one JSON object on stdout ({e}): {out}"))
}

/// The `kid` of a JWT's header.
fn kid(token: &str) -> String {
    let head = token.split('.').next().unwrap();
    let header: Value = serde_json::from_slice(&B64.decode(head).unwrap()).unwrap();
    header["kid"].as_str().expect("D23: a kid").to_owned()
}

async fn jwks_kids(s: &TestServer) -> Vec<String> {
    let res = s
        .request(Method::GET, "/.well-known/jwks.json")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let body: Value = res.json().await.unwrap();
    body["keys"]
        .as_array()
        .expect("a JWK set")
        .iter()
        .map(|k| k["kid"].as_str().unwrap().to_owned())
        .collect()
}

/// D23 + D40: a key added by `gatehouse keys rotate` (another process) is in
/// the very next JWKS response — no stale cache.
async fn new_jwk_published_at_once(s: &TestServer, before: &[String]) -> Vec<String> {
    let kids = jwks_kids(s).await;
    assert!(
        kids.iter().any(|k| !before.contains(k)),
        "D23: the rotated key is published at once; JWKS still {kids:?}"
    );
    kids
}

/// A client-credentials request with HTTP Basic: the status and body.
async fn token_request(s: &TestServer, id: &str, secret: &str) -> (StatusCode, Value, String) {
    let res = s
        .request(Method::POST, "/oauth/token")
        .basic_auth(id, Some(secret))
        .form(&[("grant_type", "client_credentials")])
        .send()
        .await
        .unwrap();
    let status = res.status();
    let www = res
        .headers()
        .get(header::WWW_AUTHENTICATE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    let body: Value = res.json().await.unwrap_or(Value::Null);
    (status, body, www)
}

/// The same with `client_secret_post`.
async fn token_request_post(s: &TestServer, id: &str, secret: &str) -> StatusCode {
    s.request(Method::POST, "/oauth/token")
        .form(&[
            ("grant_type", "client_credentials"),
            ("client_id", id),
            ("client_secret", secret),
        ])
        .send()
        .await
        .unwrap()
        .status()
}

async fn assert_secret_works(s: &TestServer, id: &str, secret: &str, why: &str) {
    let (status, body, _) = token_request(s, id, secret).await;
    assert_eq!(status, StatusCode::OK, "{why}: {body}");
    let t = body["access_token"].as_str().unwrap();
    assert_works(s, t, why).await;
    assert_eq!(
        token_request_post(s, id, secret).await,
        StatusCode::OK,
        "{why} (client_secret_post)"
    );
}

async fn assert_secret_refused(s: &TestServer, id: &str, secret: &str, why: &str) {
    let (status, body, www) = token_request(s, id, secret).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{why}: {body}");
    assert_eq!(body["error"], "invalid_client", "{why}: {body}");
    assert!(
        www.starts_with("Basic"),
        "D21: WWW-Authenticate: Basic, not {www:?}"
    );
    assert_eq!(
        token_request_post(s, id, secret).await,
        StatusCode::UNAUTHORIZED,
        "{why} (client_secret_post)"
    );
}

// ---------------------------------------------------------------------------
// D13: deleting a user
// ---------------------------------------------------------------------------

#[tokio::test]
async fn d13_deleting_a_user_revokes_their_tokens_at_once() {
    let s = TestServer::start().await;
    let t = admin(&s).await;
    let gone = s.new_user(&s.org(), "gone@example.com", Role::Viewer).await;
    let stays = s
        .new_user(&s.org(), "stays@example.com", Role::Viewer)
        .await;
    let gone_t = user_token(&s, &gone.id, "users:read profile:read");
    let stays_t = user_token(&s, &stays.id, "users:read profile:read");
    assert_works(&s, &gone_t, "before the deletion").await;
    assert_works(&s, &stays_t, "before the deletion").await;

    let res = s
        .call(Method::DELETE, &format!("/v1/users/{}", gone.id), &t, None)
        .await;
    assert_eq!(res.status(), StatusCode::NO_CONTENT);

    // The very next request is refused (not after a sync interval).
    assert_revoked(&s, &gone_t, "D13: a deleted user's token").await;
    let res = s.call(Method::GET, "/v1/me", &gone_t, None).await;
    expect_error(res, StatusCode::UNAUTHORIZED, "INVALID_TOKEN").await;
    // Other users and the client's own token are unaffected.
    assert_works(&s, &stays_t, "another user's token").await;
    assert_works(&s, &t, "the client's token").await;

    // The revocation is durable.
    let s = s.restart().await;
    assert_revoked(&s, &gone_t, "D13: after a restart").await;
    assert_works(&s, &stays_t, "another user's token after a restart").await;
}

#[tokio::test]
async fn d13_a_refused_deletion_revokes_nothing() {
    let s = TestServer::start().await;
    let t = admin(&s).await;
    // The last active admin cannot be deleted (D13: LAST_ADMIN).
    let only = s.new_user(&s.org(), "only@example.com", Role::Admin).await;
    let only_t = user_token(&s, &only.id, "users:read users:write");
    let res = s
        .call(Method::DELETE, &format!("/v1/users/{}", only.id), &t, None)
        .await;
    expect_error(res, StatusCode::UNPROCESSABLE_ENTITY, "LAST_ADMIN").await;
    assert_works(&s, &only_t, "a refused deletion").await;
    // Nor can a users:read token delete anyone.
    let v = s.new_user(&s.org(), "v@example.com", Role::Viewer).await;
    let v_t = user_token(&s, &v.id, "users:read");
    let res = s
        .call(Method::DELETE, &format!("/v1/users/{}", v.id), &v_t, None)
        .await;
    expect_error(res, StatusCode::FORBIDDEN, "INSUFFICIENT_SCOPE").await;
    assert_works(&s, &v_t, "a forbidden deletion").await;
}

// ---------------------------------------------------------------------------
// D11: deactivation
// ---------------------------------------------------------------------------

#[tokio::test]
async fn d11_deactivation_revokes_tokens_and_reactivation_does_not_revive_them() {
    let s = TestServer::start().await;
    let t = admin(&s).await;
    let u = s
        .new_user(&s.org(), "pause@example.com", Role::Editor)
        .await;
    let other = s
        .new_user(&s.org(), "other@example.com", Role::Editor)
        .await;
    let ut = user_token(&s, &u.id, "users:read products:read");
    let ot = user_token(&s, &other.id, "users:read products:read");
    assert_works(&s, &ut, "before").await;

    let data = patch_user(&s, &t, &u.id, json!({"status": "inactive"})).await;
    assert_eq!(data["status"], "inactive");
    assert_revoked(&s, &ut, "D11: a deactivated user's token").await;
    let res = s.call(Method::GET, "/v1/products", &ut, None).await;
    expect_error(res, StatusCode::UNAUTHORIZED, "INVALID_TOKEN").await;
    assert_works(&s, &ot, "another user's token").await;

    let data = patch_user(&s, &t, &u.id, json!({"status": "active"})).await;
    assert_eq!(data["status"], "active");
    assert_revoked(&s, &ut, "D11: reactivating does not revive old tokens").await;

    // Tokens issued after the reactivation work.
    next_second().await;
    let fresh = user_token(&s, &u.id, "users:read");
    assert_works(&s, &fresh, "a token issued after reactivation").await;
    assert_revoked(&s, &ut, "the old token, still").await;

    // Durable across a restart.
    let s = s.restart().await;
    assert_revoked(&s, &ut, "D11: after a restart").await;
    assert_works(&s, &fresh, "the new token after a restart").await;
}

#[tokio::test]
async fn d11_patching_status_to_its_current_value_revokes_nothing() {
    let s = TestServer::start().await;
    let t = admin(&s).await;
    let u = s.new_user(&s.org(), "same@example.com", Role::Viewer).await;
    let ut = user_token(&s, &u.id, "users:read");
    let data = patch_user(&s, &t, &u.id, json!({"status": "active"})).await;
    assert_eq!(data["status"], "active");
    assert_works(
        &s,
        &ut,
        "D11: setting a field to its current value changes nothing",
    )
    .await;
    // A refused PATCH (one invalid field, D9 all-or-nothing) revokes nothing either.
    let res = s
        .call(
            Method::PATCH,
            &format!("/v1/users/{}", u.id),
            &t,
            Some(json!({"status": "inactive", "role": "owner"})),
        )
        .await;
    expect_error(res, StatusCode::BAD_REQUEST, "VALIDATION_ERROR").await;
    assert_works(&s, &ut, "an invalid PATCH changes nothing").await;
}

// ---------------------------------------------------------------------------
// D29: demotion
// ---------------------------------------------------------------------------

#[tokio::test]
async fn d29_demotion_revokes_tokens_but_a_rename_does_not() {
    let s = TestServer::start().await;
    let t = admin(&s).await;
    // Two admins, so that demoting one is not LAST_ADMIN.
    let a1 = s.new_user(&s.org(), "a1@example.com", Role::Admin).await;
    let a2 = s.new_user(&s.org(), "a2@example.com", Role::Admin).await;
    let ed = s.new_user(&s.org(), "ed@example.com", Role::Editor).await;
    let vi = s.new_user(&s.org(), "vi@example.com", Role::Viewer).await;
    let a1_t = user_token(&s, &a1.id, "users:read users:write");
    let a2_t = user_token(&s, &a2.id, "users:read users:write");
    let ed_t = user_token(&s, &ed.id, "users:read products:write");
    let vi_t = user_token(&s, &vi.id, "users:read");

    // Renames (and a role set to its current value) keep every token.
    let d = patch_user(&s, &t, &vi.id, json!({"name": "Vi Renamed"})).await;
    assert_eq!(d["name"], "Vi Renamed");
    patch_user(
        &s,
        &t,
        &ed.id,
        json!({"name": "Ed Renamed", "role": "editor"}),
    )
    .await;
    patch_user(&s, &t, &a2.id, json!({"role": "admin"})).await;
    assert_works(&s, &vi_t, "D29: a rename does not revoke").await;
    assert_works(&s, &ed_t, "D29: the same role does not revoke").await;
    assert_works(&s, &a2_t, "D29: the same role does not revoke").await;

    // admin → viewer.
    let d = patch_user(&s, &t, &a2.id, json!({"role": "viewer"})).await;
    assert_eq!(d["role"], "viewer");
    assert_revoked(&s, &a2_t, "D29: demoted admin → viewer").await;
    // editor → viewer.
    let d = patch_user(&s, &t, &ed.id, json!({"role": "viewer"})).await;
    assert_eq!(d["role"], "viewer");
    assert_revoked(&s, &ed_t, "D29: demoted editor → viewer").await;
    // Nobody else is affected.
    assert_works(&s, &a1_t, "another admin").await;
    assert_works(&s, &vi_t, "a viewer").await;
    assert_works(&s, &t, "the client's token").await;

    // The demoted user's next token works (within the new role).
    next_second().await;
    let again = user_token(&s, &ed.id, "users:read");
    assert_works(&s, &again, "a token issued after the demotion").await;
    assert_revoked(&s, &ed_t, "the old token, still").await;
}

#[tokio::test]
async fn d29_admin_to_editor_is_a_demotion_too() {
    let s = TestServer::start().await;
    let t = admin(&s).await;
    s.new_user(&s.org(), "keeper@example.com", Role::Admin)
        .await;
    let a = s
        .new_user(&s.org(), "demote@example.com", Role::Admin)
        .await;
    let at = user_token(&s, &a.id, "users:read users:write");
    patch_user(&s, &t, &a.id, json!({"role": "editor"})).await;
    assert_revoked(&s, &at, "D29: admin → editor loses users:write").await;
}

#[tokio::test]
async fn d29_a_refused_demotion_revokes_nothing() {
    let s = TestServer::start().await;
    let t = admin(&s).await;
    let only = s.new_user(&s.org(), "sole@example.com", Role::Admin).await;
    let ot = user_token(&s, &only.id, "users:read users:write");
    let res = s
        .call(
            Method::PATCH,
            &format!("/v1/users/{}", only.id),
            &t,
            Some(json!({"role": "viewer"})),
        )
        .await;
    expect_error(res, StatusCode::UNPROCESSABLE_ENTITY, "LAST_ADMIN").await;
    assert_works(&s, &ot, "a refused demotion").await;
    let res = s
        .call(
            Method::PATCH,
            &format!("/v1/users/{}", only.id),
            &t,
            Some(json!({"status": "inactive"})),
        )
        .await;
    expect_error(res, StatusCode::UNPROCESSABLE_ENTITY, "LAST_ADMIN").await;
    assert_works(&s, &ot, "a refused deactivation").await;
}

// ---------------------------------------------------------------------------
// D23: signing-key rotation
// ---------------------------------------------------------------------------

#[tokio::test]
async fn d23_keys_rotate_without_delay_signs_with_the_new_key_and_old_tokens_keep_working() {
    let s = TestServer::start().await;
    let old_token = s.token("users:read").await;
    let old_kid = kid(&old_token);
    let before = jwks_kids(&s).await;
    assert_eq!(before, vec![old_kid.clone()], "one key to start with");

    let out = gatehouse_json(&s, &["keys", "rotate", "--publish-delay", "0"]).await;
    assert!(out.is_object(), "{out}");

    let kids = new_jwk_published_at_once(&s, &before).await;
    assert_eq!(kids.len(), 2, "old and new keys published: {kids:?}");
    assert!(kids.contains(&old_kid), "the old key stays published");
    let new_kid = kids.iter().find(|k| **k != old_kid).unwrap().clone();
    if let Some(k) = out["kid"].as_str() {
        assert_eq!(k, new_kid, "the printed kid is the published one");
    }

    // New tokens are signed with the new key (bounded wait: the server
    // re-reads keys in the background).
    let deadline = Instant::now() + Duration::from_secs(40);
    let fresh = loop {
        let t = s.token("users:read").await;
        if kid(&t) == new_kid {
            break t;
        }
        assert!(
            Instant::now() < deadline,
            "D23: with --publish-delay 0 new tokens carry the new kid; still {}",
            kid(&t)
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    assert_works(&s, &fresh, "a token signed with the new key").await;
    assert_works(&s, &old_token, "D23: a token signed before the rotation").await;
    // Both keys survive a restart; both tokens still verify.
    let s = s.restart().await;
    let kids = jwks_kids(&s).await;
    assert!(
        kids.contains(&old_kid) && kids.contains(&new_kid),
        "{kids:?}"
    );
    assert_works(&s, &old_token, "the old token after a restart").await;
    assert_works(&s, &fresh, "the new token after a restart").await;
    assert_eq!(kid(&s.token("users:read").await), new_kid);
}

#[tokio::test]
async fn d23_keys_rotate_publishes_first_and_signs_after_the_publish_delay() {
    let s = TestServer::start().await;
    let old_token = s.token("users:read").await;
    let old_kid = kid(&old_token);
    let before = jwks_kids(&s).await;

    // Default publish delay: one hour.
    gatehouse_json(&s, &["keys", "rotate"]).await;
    let kids = new_jwk_published_at_once(&s, &before).await;
    assert_eq!(kids.len(), 2, "{kids:?}");
    assert!(kids.contains(&old_kid));
    // Still signed with the old key.
    let t = s.token("users:read").await;
    assert_eq!(
        kid(&t),
        old_kid,
        "D23: the new key signs only after the publish delay"
    );
    assert_works(&s, &t, "a token after the rotation").await;
    assert_works(&s, &old_token, "a token before the rotation").await;
}

// ---------------------------------------------------------------------------
// D20: client-secret rotation
// ---------------------------------------------------------------------------

#[tokio::test]
async fn d20_rotate_secret_without_grace_replaces_the_secret_at_once() {
    let s = TestServer::start().await;
    let (id, old) = s.new_client(&s.org(), "users:read").await;
    assert_secret_works(&s, &id, &old, "before the rotation").await;

    let out = gatehouse_json(&s, &["client", "rotate-secret", &id, "--grace", "0"]).await;
    assert_eq!(out["client_id"], id.as_str(), "{out}");
    assert_eq!(out["org"], s.creds.org.as_str(), "{out}");
    assert_eq!(out["scopes"], json!(["users:read"]), "{out}");
    let new = out["client_secret"]
        .as_str()
        .expect("D40: client_secret")
        .to_owned();
    assert_ne!(new, old);
    assert!(new.len() >= 43, "D20: ≥ 256 random bits: {new}");

    assert_secret_works(&s, &id, &new, "D20: the new secret works at once").await;
    assert_secret_refused(&s, &id, &old, "D20: --grace 0: the old secret is dead").await;

    // Rotating again: the second secret is dead, the third works.
    let out = gatehouse_json(&s, &["client", "rotate-secret", &id]).await;
    let third = out["client_secret"].as_str().unwrap().to_owned();
    assert_secret_works(&s, &id, &third, "the newest secret").await;
    assert_secret_refused(&s, &id, &new, "D20: default grace is 0").await;
    assert_secret_refused(&s, &id, &old, "the first secret").await;
}

#[tokio::test]
async fn d20_rotate_secret_with_grace_keeps_the_old_secret_working() {
    let s = TestServer::start().await;
    let (id, old) = s.new_client(&s.org(), "users:read").await;
    let out = gatehouse_json(&s, &["client", "rotate-secret", &id, "--grace", "60"]).await;
    let new = out["client_secret"].as_str().unwrap().to_owned();
    assert_ne!(new, old);
    assert_secret_works(&s, &id, &new, "D20: the new secret works at once").await;
    assert_secret_works(&s, &id, &old, "D20: --grace 60: the old secret still works").await;
    // A wrong secret is still wrong.
    assert_secret_refused(&s, &id, "not-the-secret", "a wrong secret").await;
    // Other clients are untouched.
    assert_secret_works(
        &s,
        &s.creds.client_id,
        &s.creds.client_secret,
        "the bootstrap client",
    )
    .await;
}

#[tokio::test]
async fn d20_rotate_secret_refuses_unknown_clients() {
    let s = TestServer::start().await;
    let (ok, out, err) = gatehouse(
        &s,
        &[
            "--json",
            "client",
            "rotate-secret",
            &ClientId::generate().to_string(),
        ],
    )
    .await;
    assert!(!ok, "an unknown client: {out}");
    assert!(!err.trim().is_empty(), "says why on stderr");
    assert_secret_works(
        &s,
        &s.creds.client_id,
        &s.creds.client_secret,
        "nothing changed",
    )
    .await;
}

// ---------------------------------------------------------------------------
// D36: CORS
// ---------------------------------------------------------------------------

const SPA: &str = "https://spa.example";

fn header_str(res: &reqwest::Response, name: &str) -> Option<String> {
    res.headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

/// A comma-separated header as lower-case items.
fn header_list(res: &reqwest::Response, name: &str) -> Vec<String> {
    res.headers()
        .get_all(name)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|x| x.trim().to_ascii_lowercase())
        .filter(|x| !x.is_empty())
        .collect()
}

async fn preflight(s: &TestServer, path: &str, origin: &str) -> reqwest::Response {
    s.request(Method::OPTIONS, path)
        .header(header::ORIGIN, origin)
        .header(header::ACCESS_CONTROL_REQUEST_METHOD, "POST")
        .header(
            header::ACCESS_CONTROL_REQUEST_HEADERS,
            "authorization, content-type",
        )
        .send()
        .await
        .unwrap()
}

async fn cors_server() -> TestServer {
    TestServer::start_with(|st| st.cors_origins = vec![SPA.into()]).await
}

#[tokio::test]
async fn d36_preflight_allows_the_configured_origin() {
    let s = cors_server().await;
    // D49: CORS also covers /.well-known/* and /oauth/userinfo.
    for path in [
        "/oauth/token",
        "/oauth/revoke",
        "/v1/users",
        "/v1/products",
        "/oauth/userinfo",
        "/.well-known/openid-configuration",
        "/.well-known/jwks.json",
    ] {
        let res = preflight(&s, path, SPA).await;
        assert!(
            res.status().is_success(),
            "{path}: preflight answered {}",
            res.status()
        );
        assert_eq!(
            header_str(&res, "access-control-allow-origin").as_deref(),
            Some(SPA),
            "{path}"
        );
        let allowed = header_list(&res, "access-control-allow-headers");
        for h in ["authorization", "content-type", "idempotency-key"] {
            assert!(
                allowed.iter().any(|a| a == h || a == "*"),
                "{path}: D36 allows {h}: {allowed:?}"
            );
        }
        let methods = header_list(&res, "access-control-allow-methods");
        assert!(
            methods.iter().any(|m| m == "post" || m == "*"),
            "{path}: POST allowed: {methods:?}"
        );
    }
    // PATCH and DELETE on /v1 (the user endpoints use them).
    let res = s
        .request(Method::OPTIONS, "/v1/users/usr_x")
        .header(header::ORIGIN, SPA)
        .header(header::ACCESS_CONTROL_REQUEST_METHOD, "PATCH")
        .header(
            header::ACCESS_CONTROL_REQUEST_HEADERS,
            "authorization, content-type",
        )
        .send()
        .await
        .unwrap();
    assert!(res.status().is_success());
    assert_eq!(
        header_str(&res, "access-control-allow-origin").as_deref(),
        Some(SPA)
    );
    let methods = header_list(&res, "access-control-allow-methods");
    for m in ["patch", "delete", "get"] {
        assert!(methods.iter().any(|x| x == m), "{m}: {methods:?}");
    }
}

#[tokio::test]
async fn d36_actual_requests_expose_the_documented_headers() {
    let s = cors_server().await;
    let t = s.token("users:read users:write").await;
    let res = s
        .request(Method::GET, "/v1/users")
        .bearer_auth(&t)
        .header(header::ORIGIN, SPA)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(
        header_str(&res, "access-control-allow-origin").as_deref(),
        Some(SPA)
    );
    let exposed = header_list(&res, "access-control-expose-headers");
    for h in [
        "x-request-id",
        "x-ratelimit-limit",
        "x-ratelimit-remaining",
        "x-ratelimit-reset",
        "retry-after",
        "location",
        "idempotent-replayed",
    ] {
        assert!(
            exposed.iter().any(|e| e == h),
            "D36 exposes {h}: {exposed:?}"
        );
    }
    // A created resource: Location readable by the SPA.
    let res = s
        .request(Method::POST, "/v1/users")
        .bearer_auth(&t)
        .header(header::ORIGIN, SPA)
        .json(&json!({"email": "spa@example.com", "name": "Spa", "role": "viewer"}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::CREATED);
    assert_eq!(
        header_str(&res, "access-control-allow-origin").as_deref(),
        Some(SPA)
    );
    assert!(header_list(&res, "access-control-expose-headers").contains(&"location".to_owned()));
    // An error is readable too (the SPA needs the error code).
    let res = s
        .request(Method::GET, "/v1/users")
        .header(header::ORIGIN, SPA)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(
        header_str(&res, "access-control-allow-origin").as_deref(),
        Some(SPA)
    );
    // The token endpoint.
    let res = s
        .request(Method::POST, "/oauth/token")
        .header(header::ORIGIN, SPA)
        .basic_auth(&s.creds.client_id, Some(&s.creds.client_secret))
        .form(&[("grant_type", "client_credentials")])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(
        header_str(&res, "access-control-allow-origin").as_deref(),
        Some(SPA)
    );
}

#[tokio::test]
async fn d36_other_origins_are_not_allowed() {
    let s = cors_server().await;
    let t = s.token("users:read").await;
    for origin in [
        "https://evil.example",
        "http://spa.example",
        "https://spa.example.evil.example",
        "null",
    ] {
        for path in ["/oauth/token", "/v1/users"] {
            let res = preflight(&s, path, origin).await;
            assert_eq!(
                header_str(&res, "access-control-allow-origin"),
                None,
                "{origin} on {path}"
            );
        }
        let res = s
            .request(Method::GET, "/v1/users")
            .bearer_auth(&t)
            .header(header::ORIGIN, origin)
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), StatusCode::OK);
        assert_eq!(
            header_str(&res, "access-control-allow-origin"),
            None,
            "{origin}"
        );
        assert_eq!(header_str(&res, "access-control-allow-credentials"), None);
    }
}

#[tokio::test]
async fn d36_no_cors_by_default() {
    let s = TestServer::start().await;
    let t = s.token("users:read").await;
    for path in ["/oauth/token", "/oauth/revoke", "/v1/users"] {
        let res = preflight(&s, path, SPA).await;
        assert_eq!(
            header_str(&res, "access-control-allow-origin"),
            None,
            "D36: no origins by default ({path})"
        );
        assert_eq!(header_str(&res, "access-control-allow-credentials"), None);
    }
    let res = s
        .request(Method::GET, "/v1/users")
        .bearer_auth(&t)
        .header(header::ORIGIN, SPA)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(header_str(&res, "access-control-allow-origin"), None);
    // A request without Origin (not a browser's cross-origin call) is plain.
    let res = s.call(Method::GET, "/v1/users", &t, None).await;
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(header_str(&res, "access-control-allow-origin"), None);
}

/// With no origins configured CORS is off: not even the non-origin CORS
/// headers (allowed methods, exposed headers) are sent.
#[tokio::test]
async fn d36_default_config_sends_no_cors_headers_at_all() {
    let s = TestServer::start().await;
    let t = s.token("users:read").await;
    let cors_headers = |res: &reqwest::Response| -> Vec<String> {
        res.headers()
            .keys()
            .map(|k| k.as_str().to_owned())
            .filter(|k| k.starts_with("access-control-"))
            .collect()
    };
    for path in ["/oauth/token", "/v1/users"] {
        let res = preflight(&s, path, SPA).await;
        assert_eq!(
            cors_headers(&res),
            Vec::<String>::new(),
            "D36: no CORS by default: preflight {path} answered {} {:?}",
            res.status(),
            res.headers()
        );
    }
    let res = s
        .request(Method::GET, "/v1/users")
        .bearer_auth(&t)
        .header(header::ORIGIN, SPA)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(
        cors_headers(&res),
        Vec::<String>::new(),
        "D36: no CORS by default: GET /v1/users answered {:?}",
        res.headers()
    );
}
