//! `/v1/me` (D15) and API keys as bearer credentials (D27).

use gatehouse_auth::{AccessClaims, jwt};
use gatehouse_domain::{ClientId, Role, ScopeSet};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::common::{TestServer, expect_error};

/// A token for `user`, signed by the server's own key (the authorization-code
/// flow that issues these to clients is exercised elsewhere).
fn user_token(s: &TestServer, user: &gatehouse_domain::UserId, scopes: &str) -> String {
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

#[tokio::test]
async fn me_returns_and_renames_the_tokens_user() {
    let s = TestServer::start().await;
    let u = s.new_user(&s.org(), "me@example.com", Role::Viewer).await;
    let t = user_token(&s, &u.id, "profile:read profile:write");
    let res = s.call(Method::GET, "/v1/me", &t, None).await;
    assert_eq!(res.status(), StatusCode::OK);
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["data"]["id"], u.id.as_str());
    assert_eq!(body["data"]["email"], "me@example.com");
    let res = s
        .call(
            Method::PATCH,
            "/v1/me",
            &t,
            Some(json!({"name": "  New Name "})),
        )
        .await;
    assert_eq!(res.status(), StatusCode::OK);
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["data"]["name"], "New Name");
    // Only `name` may change (D15).
    let res = s
        .call(Method::PATCH, "/v1/me", &t, Some(json!({"role": "admin"})))
        .await;
    expect_error(res, StatusCode::BAD_REQUEST, "VALIDATION_ERROR").await;
    assert_eq!(
        s.store()
            .get_user(&s.org(), &u.id)
            .await
            .unwrap()
            .unwrap()
            .role,
        Role::Viewer
    );
}

#[tokio::test]
async fn me_needs_profile_scopes() {
    let s = TestServer::start().await;
    let u = s.new_user(&s.org(), "me@example.com", Role::Viewer).await;
    let read_only = user_token(&s, &u.id, "profile:read");
    let res = s
        .call(
            Method::PATCH,
            "/v1/me",
            &read_only,
            Some(json!({"name": "x"})),
        )
        .await;
    expect_error(res, StatusCode::FORBIDDEN, "INSUFFICIENT_SCOPE").await;
    let none = user_token(&s, &u.id, "users:read");
    let res = s.call(Method::GET, "/v1/me", &none, None).await;
    expect_error(res, StatusCode::FORBIDDEN, "INSUFFICIENT_SCOPE").await;
}

#[tokio::test]
async fn me_without_a_user_is_404_saying_so() {
    let s = TestServer::start().await;
    let t = s.token("profile:read").await;
    let res = s.call(Method::GET, "/v1/me", &t, None).await;
    let body = expect_error(res, StatusCode::NOT_FOUND, "RESOURCE_NOT_FOUND").await;
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("no user")
    );
}

async fn cli(s: &TestServer, args: &[&str]) -> Value {
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_gatehouse"))
        .arg("--data-dir")
        .arg(s.data_dir())
        .args(crate::common::db_args(&s.data_dir()))
        .arg("--json")
        .args(args)
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[tokio::test]
async fn api_keys_authenticate_with_their_scopes_until_revoked() {
    let s = TestServer::start().await;
    let created = cli(
        &s,
        &[
            "apikey",
            "create",
            "--org",
            &s.creds.org,
            "--name",
            "ci",
            "--scopes",
            "products:read",
        ],
    )
    .await;
    let key = created["key"].as_str().unwrap().to_owned();
    assert!(key.starts_with("gk_live_"), "{created}");
    assert!(created["id"].as_str().unwrap().starts_with("key_"));
    assert_eq!(created["org"], s.creds.org.as_str());
    assert_eq!(created["scopes"], json!(["products:read"]));
    assert_eq!(
        created.as_object().unwrap().len(),
        4,
        "exactly id, key, org, scopes: {created}"
    );

    let res = s.call(Method::GET, "/v1/products", &key, None).await;
    assert_eq!(res.status(), StatusCode::OK);
    let res = s.call(Method::GET, "/v1/users", &key, None).await;
    expect_error(res, StatusCode::FORBIDDEN, "INSUFFICIENT_SCOPE").await;
    let res = s.call(Method::GET, "/v1/me", &key, None).await;
    expect_error(res, StatusCode::FORBIDDEN, "INSUFFICIENT_SCOPE").await;
    // A key that was never issued, and a mangled one.
    let res = s
        .call(Method::GET, "/v1/products", "gk_live_nope", None)
        .await;
    expect_error(res, StatusCode::UNAUTHORIZED, "INVALID_TOKEN").await;

    // Revoked with the CLI while the server runs: refused on the next request.
    let revoked = cli(&s, &["apikey", "revoke", created["id"].as_str().unwrap()]).await;
    assert!(revoked["revoked_at"].is_string());
    let res = s.call(Method::GET, "/v1/products", &key, None).await;
    expect_error(res, StatusCode::UNAUTHORIZED, "INVALID_TOKEN").await;
}

#[tokio::test]
async fn api_keys_act_inside_their_own_organization() {
    let s = TestServer::start().await;
    let other = s.new_org(gatehouse_domain::Plan::Free).await;
    let created = cli(
        &s,
        &[
            "apikey",
            "create",
            "--org",
            other.as_str(),
            "--name",
            "k",
            "--scopes",
            "users:read users:write",
        ],
    )
    .await;
    let key = created["key"].as_str().unwrap();
    let t = s.token("users:write").await;
    let res = s
        .call(
            Method::POST,
            "/v1/users",
            &t,
            Some(json!({"email": "x@example.com", "name": "X", "role": "viewer"})),
        )
        .await;
    let id = res.json::<Value>().await.unwrap()["data"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let res = s
        .call(Method::GET, &format!("/v1/users/{id}"), key, None)
        .await;
    expect_error(res, StatusCode::NOT_FOUND, "RESOURCE_NOT_FOUND").await;
    let res = s.call(Method::GET, "/v1/users", key, None).await;
    assert_eq!(res.json::<Value>().await.unwrap()["meta"]["total"], 0);
}
