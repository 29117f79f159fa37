//! The management API (D46): applications, API keys, usage and the
//! organization, with every kind of caller — client credentials, API keys,
//! and people (admin, editor, viewer) through the authorization-code flow.
//! A child of `oauth_flow`, whose sign-in helpers it drives.

use std::time::{Duration, Instant};

use serde_json::json;

use super::*;

const MANAGE: &str = "applications:read applications:write";

/// A confidential "console" application registered for everything a person
/// may use here, so a person's token carries their role's caps (D29, D46).
pub(super) async fn console(s: &TestServer) -> App {
    register(
        s,
        &s.org(),
        "users:read users:write products:read products:write applications:read applications:write",
        &[REDIRECT],
        false,
        false,
    )
    .await
}

/// A person's access token through the console, asking for `scope`.
pub(super) async fn person_token(
    s: &TestServer,
    console: &App,
    email: &str,
    scope: &str,
) -> String {
    let pair = pair_for(s, console, email, Some(scope)).await;
    pair["access_token"].as_str().unwrap().to_owned()
}

pub(super) async fn json_of(res: Response, status: StatusCode) -> Value {
    let got = res.status();
    let body = res.text().await.unwrap();
    assert_eq!(got, status, "{body}");
    serde_json::from_str(&body).unwrap_or(Value::Null)
}

pub(super) async fn create_app(s: &TestServer, token: &str, body: Value) -> Response {
    s.call(Method::POST, "/v1/applications", token, Some(body))
        .await
}

/// client_credentials with `id`/`secret`: the status.
pub(super) async fn cc_status(s: &TestServer, id: &str, secret: &str) -> StatusCode {
    s.request(Method::POST, "/oauth/token")
        .basic_auth(id, Some(secret))
        .form(&[("grant_type", "client_credentials")])
        .send()
        .await
        .unwrap()
        .status()
}

#[tokio::test]
async fn d46_applications_register_show_change_rotate_and_delete() {
    let s = TestServer::start().await;
    let t = s.token(&format!("{MANAGE} users:read products:read")).await;

    // Register: 201, Location, the secret once, no-store.
    let res = create_app(
        &s,
        &t,
        json!({"name": "Billing", "type": "confidential", "redirect_uris": [REDIRECT],
               "post_logout_redirect_uris": ["https://app.example.com/bye"], "scopes": ["products:read"]}),
    )
    .await;
    assert_eq!(
        res.headers()[reqwest::header::CACHE_CONTROL],
        "no-store",
        "D46: an answer with a secret is not cached"
    );
    let location = res.headers()[reqwest::header::LOCATION]
        .to_str()
        .unwrap()
        .to_owned();
    let body = json_of(res, StatusCode::CREATED).await;
    let app = &body["data"];
    let id = app["id"].as_str().unwrap().to_owned();
    let secret = app["client_secret"].as_str().unwrap().to_owned();
    assert!(location.ends_with(&format!("/v1/applications/{id}")));
    assert_eq!(app["type"], "confidential");
    assert_eq!(app["scopes"], json!(["products:read"]));
    assert_eq!(app["redirect_uris"], json!([REDIRECT]));
    assert_eq!(app["admin_approved"], false);
    assert_eq!(
        app["owner_id"],
        Value::Null,
        "an organization-wide caller owns nothing"
    );
    assert_eq!(cc_status(&s, &id, &secret).await, StatusCode::OK);

    // Show: no secret, and not no-store-only; list with the type filter.
    let shown = json_of(
        s.call(Method::GET, &format!("/v1/applications/{id}"), &t, None)
            .await,
        StatusCode::OK,
    )
    .await;
    assert!(
        shown["data"].get("client_secret").is_none(),
        "shown once only"
    );
    let list = json_of(
        s.call(Method::GET, "/v1/applications?type=confidential", &t, None)
            .await,
        StatusCode::OK,
    )
    .await;
    assert!(
        list["data"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a["id"] == id)
    );
    let list = json_of(
        s.call(Method::GET, "/v1/applications?type=public", &t, None)
            .await,
        StatusCode::OK,
    )
    .await;
    assert!(
        !list["data"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a["id"] == id)
    );
    expect_error(
        s.call(Method::GET, "/v1/applications?type=secret", &t, None)
            .await,
        StatusCode::BAD_REQUEST,
        "VALIDATION_ERROR",
    )
    .await;

    // Change: the name, then the scopes (within what the caller holds).
    let changed = json_of(
        s.call(
            Method::PATCH,
            &format!("/v1/applications/{id}"),
            &t,
            Some(json!({"name": "Billing 2", "scopes": ["products:read", "users:read"]})),
        )
        .await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(changed["data"]["name"], "Billing 2");
    assert_eq!(
        changed["data"]["scopes"],
        json!(["users:read", "products:read"])
    );
    assert_ne!(changed["data"]["updated_at"], app["updated_at"]);

    // Rotate with a grace: both secrets work, then only the new one.
    let res = s
        .call(
            Method::POST,
            &format!("/v1/applications/{id}/secret"),
            &t,
            Some(json!({"grace_seconds": 2})),
        )
        .await;
    assert_eq!(res.headers()[reqwest::header::CACHE_CONTROL], "no-store");
    let rotated = json_of(res, StatusCode::CREATED).await;
    let new_secret = rotated["data"]["client_secret"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_ne!(new_secret, secret);
    assert!(rotated["data"]["previous_secret_expires_at"].is_string());
    assert_eq!(
        cc_status(&s, &id, &secret).await,
        StatusCode::OK,
        "D20: the grace"
    );
    assert_eq!(cc_status(&s, &id, &new_secret).await, StatusCode::OK);
    tokio::time::sleep(Duration::from_millis(2_300)).await;
    assert_eq!(
        cc_status(&s, &id, &secret).await,
        StatusCode::UNAUTHORIZED,
        "the old secret is refused after the grace"
    );
    // Without a body: no grace at all.
    let rotated = json_of(
        s.request(Method::POST, &format!("/v1/applications/{id}/secret"))
            .bearer_auth(&t)
            .send()
            .await
            .unwrap(),
        StatusCode::CREATED,
    )
    .await;
    assert_eq!(rotated["data"]["previous_secret_expires_at"], Value::Null);
    assert_eq!(
        cc_status(&s, &id, &new_secret).await,
        StatusCode::UNAUTHORIZED
    );
    let newest = rotated["data"]["client_secret"]
        .as_str()
        .unwrap()
        .to_owned();
    let app_token = s.token_for(&id, &newest, "products:read").await;
    expect_error(
        s.call(
            Method::POST,
            &format!("/v1/applications/{id}/secret"),
            &t,
            Some(json!({"grace_seconds": 604_801})),
        )
        .await,
        StatusCode::BAD_REQUEST,
        "VALIDATION_ERROR",
    )
    .await;

    // A public application: no secret; rotating is 422.
    let public = json_of(
        create_app(
            &s,
            &t,
            json!({"name": "SPA", "type": "public", "redirect_uris": ["http://127.0.0.1/cb"], "scopes": ["products:read"]}),
        )
        .await,
        StatusCode::CREATED,
    )
    .await;
    assert!(public["data"].get("client_secret").is_none());
    let pid = public["data"]["id"].as_str().unwrap();
    expect_error(
        s.call(
            Method::POST,
            &format!("/v1/applications/{pid}/secret"),
            &t,
            None,
        )
        .await,
        StatusCode::UNPROCESSABLE_ENTITY,
        "INVALID_STATE_TRANSITION",
    )
    .await;

    // Delete: 204; its tokens stop at once; then 404.
    assert_eq!(
        s.call(Method::GET, "/v1/products", &app_token, None)
            .await
            .status(),
        StatusCode::OK
    );
    let res = s
        .call(Method::DELETE, &format!("/v1/applications/{id}"), &t, None)
        .await;
    assert_eq!(res.status(), StatusCode::NO_CONTENT);
    expect_error(
        s.call(Method::GET, "/v1/products", &app_token, None).await,
        StatusCode::UNAUTHORIZED,
        "INVALID_TOKEN",
    )
    .await;
    expect_error(
        s.call(Method::GET, &format!("/v1/applications/{id}"), &t, None)
            .await,
        StatusCode::NOT_FOUND,
        "RESOURCE_NOT_FOUND",
    )
    .await;
    // D54: each change of the application told, the rotation without its
    // secret, the deletion with the last state; each valid against its
    // webhook schema.
    let told = crate::events::told(&s, &format!("?object_id={id}")).await;
    let types: Vec<&str> = told
        .iter()
        .rev()
        .map(|e| e["type"].as_str().unwrap())
        .collect();
    assert_eq!(types.first(), Some(&"application.created"), "{types:?}");
    assert!(types.contains(&"application.updated"), "{types:?}");
    assert!(types.contains(&"application.secret_rotated"), "{types:?}");
    assert_eq!(types.last(), Some(&"application.deleted"), "{types:?}");
    for e in &told {
        assert!(!e.to_string().contains("client_secret"), "no secret in {e}");
    }
}

#[tokio::test]
async fn d46_bad_registrations_name_every_problem() {
    let s = TestServer::start().await;
    let t = s.token(&format!("{MANAGE} users:read")).await;
    let body = expect_error(
        create_app(
            &s,
            &t,
            json!({"name": "", "type": "secret", "redirect_uris": ["http://example.com/cb", 4], "scopes": ["everything"]}),
        )
        .await,
        StatusCode::BAD_REQUEST,
        "VALIDATION_ERROR",
    )
    .await;
    let fields: Vec<String> = crate::common::details(&body)
        .into_iter()
        .map(|(f, _)| f)
        .collect();
    for f in ["name", "type", "redirect_uris", "scopes"] {
        assert!(fields.contains(&f.to_owned()), "{f} in {fields:?}");
    }
    // D20: a public application needs a redirect URI.
    expect_error(
        create_app(
            &s,
            &t,
            json!({"name": "SPA", "type": "public", "scopes": ["users:read"]}),
        )
        .await,
        StatusCode::BAD_REQUEST,
        "VALIDATION_ERROR",
    )
    .await;
    // The sign-in scopes are not for API keys.
    expect_error(
        s.call(
            Method::POST,
            "/v1/api-keys",
            &t,
            Some(json!({"name": "k", "scopes": ["openid"]})),
        )
        .await,
        StatusCode::BAD_REQUEST,
        "VALIDATION_ERROR",
    )
    .await;
    expect_error(
        s.call(
            Method::POST,
            "/v1/api-keys",
            &t,
            Some(json!({"name": "k", "scopes": ["users:read"], "expires_at": "2001-01-01T00:00:00Z"})),
        )
        .await,
        StatusCode::BAD_REQUEST,
        "VALIDATION_ERROR",
    )
    .await;
}

#[tokio::test]
async fn d46_scopes_are_needed_and_no_caller_escalates() {
    let s = TestServer::start().await;
    // Reading needs applications:read, changing applications:write.
    let reader = s.token("applications:read users:read").await;
    expect_error(
        create_app(
            &s,
            &reader,
            json!({"name": "x", "type": "confidential", "scopes": ["users:read"]}),
        )
        .await,
        StatusCode::FORBIDDEN,
        "INSUFFICIENT_SCOPE",
    )
    .await;
    let none = s.token("users:read").await;
    expect_error(
        s.call(Method::GET, "/v1/applications", &none, None).await,
        StatusCode::FORBIDDEN,
        "INSUFFICIENT_SCOPE",
    )
    .await;
    // GET /v1/organization: any valid token.
    let org = json_of(
        s.call(Method::GET, "/v1/organization", &none, None).await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(org["data"]["id"], s.org().as_str());
    assert!(org["data"]["limits"]["per_minute"].as_u64().unwrap() > 0);
    assert!(org["data"]["limits"]["per_second"].as_u64().unwrap() > 0);
    assert!(org["data"]["plan"].is_string());

    // No escalation: a scope the caller lacks, on an application or a key.
    let t = s.token(&format!("{MANAGE} products:read")).await;
    for body in [
        json!({"name": "x", "type": "confidential", "scopes": ["users:write"]}),
        json!({"name": "x", "type": "confidential", "scopes": ["admin"]}),
    ] {
        expect_error(
            create_app(&s, &t, body).await,
            StatusCode::FORBIDDEN,
            "INSUFFICIENT_SCOPE",
        )
        .await;
    }
    expect_error(
        s.call(
            Method::POST,
            "/v1/api-keys",
            &t,
            Some(json!({"name": "k", "scopes": ["users:read"]})),
        )
        .await,
        StatusCode::FORBIDDEN,
        "INSUFFICIENT_SCOPE",
    )
    .await;
    // The OpenID Connect scopes grant nothing but sign-in: allowed.
    json_of(
        create_app(
            &s,
            &t,
            json!({"name": "RP", "type": "confidential", "redirect_uris": [REDIRECT], "scopes": ["openid", "email", "products:read"]}),
        )
        .await,
        StatusCode::CREATED,
    )
    .await;

    // Reconfiguring needs every scope the application is registered for.
    let other = register(
        &s,
        &s.org(),
        "users:read products:read",
        &[REDIRECT],
        false,
        false,
    )
    .await;
    let path = format!("/v1/applications/{}", other.id);
    for body in [
        json!({"redirect_uris": ["https://app.example.com/new"]}),
        json!({"scopes": ["products:read"]}),
    ] {
        expect_error(
            s.call(Method::PATCH, &path, &t, Some(body)).await,
            StatusCode::FORBIDDEN,
            "INSUFFICIENT_SCOPE",
        )
        .await;
    }
    expect_error(
        s.call(Method::POST, &format!("{path}/secret"), &t, None)
            .await,
        StatusCode::FORBIDDEN,
        "INSUFFICIENT_SCOPE",
    )
    .await;
    // The name needs only applications:write.
    json_of(
        s.call(Method::PATCH, &path, &t, Some(json!({"name": "Renamed"})))
            .await,
        StatusCode::OK,
    )
    .await;
    // An admin-approved application needs admin too.
    let approved = register(
        &s,
        &s.org(),
        "products:read admin",
        &[REDIRECT],
        false,
        true,
    )
    .await;
    let wide = s.token(&format!("{MANAGE} products:read users:read")).await;
    expect_error(
        s.call(
            Method::POST,
            &format!("/v1/applications/{}/secret", approved.id),
            &wide,
            None,
        )
        .await,
        StatusCode::FORBIDDEN,
        "INSUFFICIENT_SCOPE",
    )
    .await;

    // Another organization's application and key are 404.
    let elsewhere = s.new_org(gatehouse_domain::Plan::Pro).await;
    let foreign = register(&s, &elsewhere, "users:read", &[REDIRECT], false, false).await;
    expect_error(
        s.call(
            Method::GET,
            &format!("/v1/applications/{}", foreign.id),
            &t,
            None,
        )
        .await,
        StatusCode::NOT_FOUND,
        "RESOURCE_NOT_FOUND",
    )
    .await;
    expect_error(
        s.call(
            Method::DELETE,
            &format!("/v1/applications/{}", foreign.id),
            &t,
            None,
        )
        .await,
        StatusCode::NOT_FOUND,
        "RESOURCE_NOT_FOUND",
    )
    .await;
}

#[tokio::test]
async fn d46_editors_act_on_what_they_own_and_keys_die_with_their_owner() {
    let s = TestServer::start().await;
    let c = console(&s).await;
    active_user(&s, "ed1@example.com", Role::Editor).await;
    active_user(&s, "ed2@example.com", Role::Editor).await;
    active_user(&s, "boss@example.com", Role::Admin).await;
    let viewer = active_user(&s, "view@example.com", Role::Viewer).await;
    let scope = "applications:read applications:write products:read products:write";
    let ed1 = person_token(&s, &c, "ed1@example.com", scope).await;
    let ed2 = person_token(&s, &c, "ed2@example.com", scope).await;
    let boss = person_token(&s, &c, "boss@example.com", scope).await;

    // D29 extended: a viewer's token never carries applications:*.
    let pair = pair_for(
        &s,
        &c,
        &viewer.email.to_string(),
        Some("applications:read products:read"),
    )
    .await;
    assert_eq!(pair["scope"], "products:read");

    // The editor owns what it registers.
    let mine = json_of(
        create_app(
            &s,
            &ed1,
            json!({"name": "Mine", "type": "confidential", "scopes": ["products:write"]}),
        )
        .await,
        StatusCode::CREATED,
    )
    .await;
    let mine_id = mine["data"]["id"].as_str().unwrap().to_owned();
    let ed1_id = mine["data"]["owner_id"].as_str().unwrap().to_owned();
    assert!(ed1_id.starts_with("usr_"));
    // An editor cannot give applications:* to anything, nor what it lacks.
    for scopes in [json!(["applications:read"]), json!(["users:write"])] {
        expect_error(
            create_app(
                &s,
                &ed1,
                json!({"name": "x", "type": "confidential", "scopes": scopes}),
            )
            .await,
            StatusCode::FORBIDDEN,
            "INSUFFICIENT_SCOPE",
        )
        .await;
    }
    // Another editor: 404 on every route, and absent from its list.
    let path = format!("/v1/applications/{mine_id}");
    for (m, p, b) in [
        (Method::GET, path.clone(), None),
        (Method::PATCH, path.clone(), Some(json!({"name": "Theirs"}))),
        (Method::POST, format!("{path}/secret"), None),
        (Method::GET, format!("{path}/usage"), None),
        (Method::DELETE, path.clone(), None),
    ] {
        expect_error(
            s.call(m, &p, &ed2, b).await,
            StatusCode::NOT_FOUND,
            "RESOURCE_NOT_FOUND",
        )
        .await;
    }
    let list = json_of(
        s.call(Method::GET, "/v1/applications", &ed2, None).await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(list["meta"]["total"], 0);
    // The admin reaches it.
    json_of(
        s.call(Method::GET, &path, &boss, None).await,
        StatusCode::OK,
    )
    .await;

    // Keys: the editor's own, invisible to the other editor.
    let key = json_of(
        s.call(
            Method::POST,
            "/v1/api-keys",
            &ed1,
            Some(json!({"name": "ci", "scopes": ["products:read"]})),
        )
        .await,
        StatusCode::CREATED,
    )
    .await;
    let key_id = key["data"]["id"].as_str().unwrap().to_owned();
    let secret = key["data"]["key"].as_str().unwrap().to_owned();
    assert_eq!(key["data"]["prefix"], secret[..12]);
    assert_eq!(key["data"]["owner_id"], ed1_id.as_str());
    expect_error(
        s.call(Method::GET, &format!("/v1/api-keys/{key_id}"), &ed2, None)
            .await,
        StatusCode::NOT_FOUND,
        "RESOURCE_NOT_FOUND",
    )
    .await;
    expect_error(
        s.call(
            Method::DELETE,
            &format!("/v1/api-keys/{key_id}"),
            &ed2,
            None,
        )
        .await,
        StatusCode::NOT_FOUND,
        "RESOURCE_NOT_FOUND",
    )
    .await;
    assert_eq!(
        s.call(Method::GET, "/v1/products", &secret, None)
            .await
            .status(),
        StatusCode::OK
    );

    // The key dies with its owner's deactivation.
    let admin = s.token("users:write").await;
    json_of(
        s.call(
            Method::PATCH,
            &format!("/v1/users/{ed1_id}"),
            &admin,
            Some(json!({"status": "inactive"})),
        )
        .await,
        StatusCode::OK,
    )
    .await;
    expect_error(
        s.call(Method::GET, "/v1/products", &secret, None).await,
        StatusCode::UNAUTHORIZED,
        "INVALID_TOKEN",
    )
    .await;
    let shown = json_of(
        s.call(Method::GET, &format!("/v1/api-keys/{key_id}"), &boss, None)
            .await,
        StatusCode::OK,
    )
    .await;
    assert!(shown["data"]["revoked_at"].is_string());

    // Revoking through the API: 204, then the key is refused.
    let k2 = json_of(
        s.call(
            Method::POST,
            "/v1/api-keys",
            &boss,
            Some(json!({"name": "ops", "scopes": ["products:read"]})),
        )
        .await,
        StatusCode::CREATED,
    )
    .await;
    let (k2_id, k2_key) = (
        k2["data"]["id"].as_str().unwrap().to_owned(),
        k2["data"]["key"].as_str().unwrap().to_owned(),
    );
    assert_eq!(
        s.call(
            Method::DELETE,
            &format!("/v1/api-keys/{k2_id}"),
            &boss,
            None
        )
        .await
        .status(),
        StatusCode::NO_CONTENT
    );
    expect_error(
        s.call(Method::GET, "/v1/products", &k2_key, None).await,
        StatusCode::UNAUTHORIZED,
        "INVALID_TOKEN",
    )
    .await;
}

#[tokio::test]
async fn d46_a_demotion_narrows_owned_applications_and_revokes_keys_beyond_the_role() {
    let s = TestServer::start().await;
    let c = console(&s).await;
    let ed = active_user(&s, "demoted@example.com", Role::Editor).await;
    let t = person_token(
        &s,
        &c,
        "demoted@example.com",
        "applications:read applications:write products:read products:write",
    )
    .await;
    let app = json_of(
        create_app(&s, &t, json!({"name": "Writer", "type": "confidential", "scopes": ["products:read", "products:write"]})).await,
        StatusCode::CREATED,
    )
    .await;
    let app_id = app["data"]["id"].as_str().unwrap().to_owned();
    let writer = json_of(
        s.call(
            Method::POST,
            "/v1/api-keys",
            &t,
            Some(json!({"name": "w", "scopes": ["products:write"]})),
        )
        .await,
        StatusCode::CREATED,
    )
    .await;
    let reader = json_of(
        s.call(
            Method::POST,
            "/v1/api-keys",
            &t,
            Some(json!({"name": "r", "scopes": ["products:read"]})),
        )
        .await,
        StatusCode::CREATED,
    )
    .await;
    let admin = s
        .token(&format!(
            "users:write {MANAGE} products:read products:write"
        ))
        .await;
    json_of(
        s.call(
            Method::PATCH,
            &format!("/v1/users/{}", ed.id),
            &admin,
            Some(json!({"role": "viewer"})),
        )
        .await,
        StatusCode::OK,
    )
    .await;
    let key = |v: &Value| v["data"]["key"].as_str().unwrap().to_owned();
    expect_error(
        s.call(Method::GET, "/v1/products", &key(&writer), None)
            .await,
        StatusCode::UNAUTHORIZED,
        "INVALID_TOKEN",
    )
    .await;
    assert_eq!(
        s.call(Method::GET, "/v1/products", &key(&reader), None)
            .await
            .status(),
        StatusCode::OK
    );
    let shown = json_of(
        s.call(
            Method::GET,
            &format!("/v1/applications/{app_id}"),
            &admin,
            None,
        )
        .await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(
        shown["data"]["scopes"],
        json!(["products:read"]),
        "D46: products:write removed"
    );
}

#[tokio::test]
async fn d46_usage_counts_every_request_and_429_exactly() {
    let s = TestServer::start().await;
    let org = s.new_org(gatehouse_domain::Plan::Free).await;
    let (id, secret) = s
        .new_client(&org, "applications:read applications:write products:read")
        .await;
    let t = s
        .token_for(
            &id,
            &secret,
            "applications:read applications:write products:read",
        )
        .await;
    let key = json_of(
        s.call(
            Method::POST,
            "/v1/api-keys",
            &t,
            Some(json!({"name": "burst", "scopes": ["products:read"]})),
        )
        .await,
        StatusCode::CREATED,
    )
    .await;
    let key_id = key["data"]["id"].as_str().unwrap().to_owned();
    let secret_key = key["data"]["key"].as_str().unwrap().to_owned();
    assert_eq!(key["data"]["last_used_at"], Value::Null);
    // D28 free plan: 10 a second; 14 at once gives some 429s.
    let sends = (0..14).map(|_| s.call(Method::GET, "/v1/products", &secret_key, None));
    let statuses: Vec<StatusCode> = futures_util::future::join_all(sends)
        .await
        .into_iter()
        .map(|r| r.status())
        .collect();
    let limited = statuses
        .iter()
        .filter(|s| **s == StatusCode::TOO_MANY_REQUESTS)
        .count() as u64;
    assert!(limited > 0, "some were limited: {statuses:?}");
    // The counts reach storage within a few seconds (flushed every 2 s).
    let started = Instant::now();
    let (requests, rejected, minutes) = loop {
        let body = json_of(
            s.call(
                Method::GET,
                &format!("/v1/api-keys/{key_id}/usage"),
                &t,
                None,
            )
            .await,
            StatusCode::OK,
        )
        .await;
        let buckets = body["data"].as_array().unwrap().clone();
        let sum = |f: &str| buckets.iter().map(|b| b[f].as_u64().unwrap()).sum::<u64>();
        if sum("requests") >= 14 || started.elapsed() > Duration::from_secs(10) {
            break (sum("requests"), sum("rejected"), buckets);
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    assert_eq!(
        (requests, rejected),
        (14, limited),
        "D46: exact, 429s included"
    );
    assert_eq!(minutes.len(), 60, "the last hour by default, zero-filled");
    assert!(
        minutes
            .iter()
            .all(|b| b["start"].as_str().unwrap().ends_with(":00.000Z"))
    );
    assert!(
        minutes
            .windows(2)
            .all(|w| w[0]["start"].as_str() < w[1]["start"].as_str()),
        "oldest first"
    );
    let shown = json_of(
        s.call(Method::GET, &format!("/v1/api-keys/{key_id}"), &t, None)
            .await,
        StatusCode::OK,
    )
    .await;
    assert!(
        shown["data"]["last_used_at"].is_string(),
        "D46: last use recorded"
    );
    // A range: at most 24 hours, from before to.
    for q in [
        "from=2026-01-01T00:00:00Z&to=2026-01-02T00:00:01Z",
        "from=2026-01-02T00:00:00Z&to=2026-01-01T00:00:00Z",
        "from=yesterday",
    ] {
        expect_error(
            s.call(
                Method::GET,
                &format!("/v1/api-keys/{key_id}/usage?{q}"),
                &t,
                None,
            )
            .await,
            StatusCode::BAD_REQUEST,
            "VALIDATION_ERROR",
        )
        .await;
    }
    let day = json_of(
        s.call(
            Method::GET,
            &format!(
                "/v1/api-keys/{key_id}/usage?from=2026-01-01T00:00:00Z&to=2026-01-02T00:00:00Z"
            ),
            &t,
            None,
        )
        .await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(day["data"].as_array().unwrap().len(), 1440);
    // The application's own usage counts its token's requests.
    let app_usage = json_of(
        s.call(
            Method::GET,
            &format!("/v1/applications/{id}/usage"),
            &t,
            None,
        )
        .await,
        StatusCode::OK,
    )
    .await;
    let app_requests: u64 = app_usage["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["requests"].as_u64().unwrap())
        .sum();
    assert!(
        app_requests >= 1,
        "the key creation was made with the application's token"
    );
}

/// D46: counts made just before a graceful restart are not lost.
#[tokio::test]
async fn d46_usage_survives_a_restart() {
    let s = TestServer::start().await;
    let t = s.token(&format!("{MANAGE} products:read")).await;
    let key = json_of(
        s.call(
            Method::POST,
            "/v1/api-keys",
            &t,
            Some(json!({"name": "restart", "scopes": ["products:read"]})),
        )
        .await,
        StatusCode::CREATED,
    )
    .await;
    let key_id = key["data"]["id"].as_str().unwrap().to_owned();
    let secret = key["data"]["key"].as_str().unwrap().to_owned();
    for _ in 0..3 {
        assert_eq!(
            s.call(Method::GET, "/v1/products", &secret, None)
                .await
                .status(),
            StatusCode::OK
        );
    }
    let s = s.restart().await;
    let t = s.token(&format!("{MANAGE} products:read")).await;
    let body = json_of(
        s.call(
            Method::GET,
            &format!("/v1/api-keys/{key_id}/usage"),
            &t,
            None,
        )
        .await,
        StatusCode::OK,
    )
    .await;
    let requests: u64 = body["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["requests"].as_u64().unwrap())
        .sum();
    assert_eq!(requests, 3, "read right after the restart, nothing lost");
}
