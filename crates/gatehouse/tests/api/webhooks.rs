//! `/v1/webhook-endpoints` (D55): endpoints, their input and address rules,
//! the limit of 16, secrets shown once and rotated, ownership; on both
//! backends. Every event seen is checked against its webhook schema.

use base64::Engine;
use gatehouse_domain::event::TypePattern;
use gatehouse_domain::webhook::{AllowList, Endpoint, EndpointUrl, Ordering};
use gatehouse_domain::{Role, Timestamp};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::common::{PUBLIC_URL, TestServer, details, expect_error};
use crate::events::told;
use crate::users::body_of;

const WRITE: &str = "webhooks:read webhooks:write";

async fn create(s: &TestServer, t: &str, body: Value) -> reqwest::Response {
    s.call(Method::POST, "/v1/webhook-endpoints", t, Some(body))
        .await
}

/// A 201 with the endpoint and its secret, never stored by a cache.
async fn created(s: &TestServer, t: &str, body: Value) -> Value {
    let res = create(s, t, body).await;
    assert_eq!(
        res.headers()
            .get("cache-control")
            .and_then(|v| v.to_str().ok()),
        Some("no-store"),
        "D55: the answer with the secret is never cached"
    );
    let location = res
        .headers()
        .get("location")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let v = body_of(res, StatusCode::CREATED).await;
    let id = v["data"]["id"].as_str().unwrap();
    assert_eq!(
        location.as_deref(),
        Some(format!("{PUBLIC_URL}/v1/webhook-endpoints/{id}").as_str())
    );
    v["data"].clone()
}

fn secret_bytes(secret: &str) -> Vec<u8> {
    let b64 = secret.strip_prefix("whsec_").expect("whsec_ prefix");
    base64::engine::general_purpose::STANDARD
        .decode(b64)
        .expect("standard base64 with padding")
}

#[tokio::test]
async fn d55_endpoints_are_created_with_their_secret_once_listed_changed_and_deleted() {
    let s = TestServer::start().await;
    let t = s.token(WRITE).await;
    let e = created(
        &s,
        &t,
        json!({"url": "https://hooks.example.com/in", "description": "mirror",
               "enabled_events": ["user.*", "product.created"], "ordering": "per_object"}),
    )
    .await;
    let id = e["id"].as_str().unwrap().to_owned();
    assert!(id.starts_with("we_"), "{e}");
    assert_eq!(secret_bytes(e["secret"].as_str().unwrap()).len(), 32);
    assert_eq!(e["status"], "enabled");
    assert_eq!(e["disabled_reason"], Value::Null);
    assert_eq!(e["enabled_events"], json!(["user.*", "product.created"]));
    assert_eq!(e["ordering"], "per_object");
    // The defaults: every event, no ordering, no description.
    let plain = created(&s, &t, json!({"url": "https://hooks.example.com/other"})).await;
    assert_eq!(plain["enabled_events"], json!(["*"]));
    assert_eq!(plain["ordering"], "none");
    assert_eq!(plain["description"], "");
    assert_ne!(plain["secret"], e["secret"]);

    // Shown again, never with the secret.
    let shown = body_of(
        s.call(
            Method::GET,
            &format!("/v1/webhook-endpoints/{id}"),
            &t,
            None,
        )
        .await,
        StatusCode::OK,
    )
    .await;
    let mut without = e.clone();
    without.as_object_mut().unwrap().remove("secret");
    assert_eq!(shown["data"], without);
    // Newest first (D14 continued).
    let list = body_of(
        s.call(Method::GET, "/v1/webhook-endpoints", &t, None).await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(list["meta"]["total"], 2);
    let ids: Vec<&str> = list["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [plain["id"].as_str().unwrap(), id.as_str()]);
    assert!(list["data"][0].get("secret").is_none());

    // Disabled by hand is `manual`; enabled again.
    let path = format!("/v1/webhook-endpoints/{id}");
    let off = body_of(
        s.call(
            Method::PATCH,
            &path,
            &t,
            Some(json!({"status": "disabled", "description": "paused"})),
        )
        .await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(off["data"]["status"], "disabled");
    assert_eq!(off["data"]["disabled_reason"], "manual");
    assert_eq!(off["data"]["description"], "paused");
    let on = body_of(
        s.call(Method::PATCH, &path, &t, Some(json!({"status": "enabled"})))
            .await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(on["data"]["disabled_reason"], Value::Null);
    // Deleted: 204, then 404.
    let res = s.call(Method::DELETE, &path, &t, None).await;
    assert_eq!(res.status(), StatusCode::NO_CONTENT);
    let res = s.call(Method::GET, &path, &t, None).await;
    expect_error(res, StatusCode::NOT_FOUND, "RESOURCE_NOT_FOUND").await;
    let res = s.call(Method::DELETE, &path, &t, None).await;
    expect_error(res, StatusCode::NOT_FOUND, "RESOURCE_NOT_FOUND").await;

    // D54: what each change told, the secret never in it.
    let events = told(&s, &format!("?object_id={id}")).await;
    let kinds: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        [
            "webhook_endpoint.deleted",
            "webhook_endpoint.updated",
            "webhook_endpoint.updated",
            "webhook_endpoint.created",
        ]
    );
    assert_eq!(
        events[2]["data"]["previous_attributes"]["disabled_reason"],
        Value::Null
    );
    for e in &events {
        assert!(!e.to_string().contains("whsec_"), "never the secret: {e}");
    }
}

#[tokio::test]
async fn d55_input_rules_are_400_and_address_rules_are_url_not_allowed() {
    let s = TestServer::start().await;
    let t = s.token(WRITE).await;
    for (url, issue) in [
        ("http://hooks.example.com/in", "https"),
        ("https://user:pw@hooks.example.com/in", "user information"),
        ("hooks.example.com/in", "absolute URL"),
        ("ftp://hooks.example.com/in", "https"),
    ] {
        let res = create(&s, &t, json!({ "url": url })).await;
        let v = expect_error(res, StatusCode::BAD_REQUEST, "VALIDATION_ERROR").await;
        let d = details(&v);
        assert_eq!(d.len(), 1, "{url}: {v}");
        assert_eq!(d[0].0, "url");
        assert!(d[0].1.contains(issue), "{url}: {v}");
    }
    let long = format!("https://hooks.example.com/{}", "a".repeat(2_030));
    let res = create(&s, &t, json!({ "url": long })).await;
    expect_error(res, StatusCode::BAD_REQUEST, "VALIDATION_ERROR").await;
    // Every problem at once (D6).
    let patterns: Vec<String> = (0..51).map(|_| "user.*".to_owned()).collect();
    let res = create(
        &s,
        &t,
        json!({"url": "nope", "description": "d".repeat(501),
               "enabled_events": patterns, "ordering": "sometimes"}),
    )
    .await;
    let v = expect_error(res, StatusCode::BAD_REQUEST, "VALIDATION_ERROR").await;
    let fields: Vec<String> = details(&v).into_iter().map(|(f, _)| f).collect();
    assert_eq!(
        fields,
        ["url", "description", "enabled_events", "ordering"],
        "{v}"
    );
    for bad in [
        json!(["nothing.*"]),
        json!([]),
        json!("user.*"),
        json!(["user.created", 5]),
    ] {
        let res = create(
            &s,
            &t,
            json!({"url": "https://hooks.example.com/in", "enabled_events": bad}),
        )
        .await;
        let v = expect_error(res, StatusCode::BAD_REQUEST, "VALIDATION_ERROR").await;
        assert_eq!(details(&v)[0].0, "enabled_events", "{bad}: {v}");
    }
    let res = create(&s, &t, json!({"description": "no url"})).await;
    let v = expect_error(res, StatusCode::BAD_REQUEST, "VALIDATION_ERROR").await;
    assert_eq!(details(&v), [("url".to_owned(), "is required".to_owned())]);

    // The address rules: written in the URL or resolved from its host.
    for url in [
        "https://127.0.0.1/in",
        "https://10.1.2.3/in",
        "https://169.254.169.254/latest/meta-data",
        "https://100.64.0.1/in",
        "https://[::1]/in",
        "https://[::ffff:192.168.0.1]/in",
        "https://[fd00::1]/in",
        "https://0.0.0.0/in",
        "https://localhost/in",
    ] {
        let res = create(&s, &t, json!({ "url": url })).await;
        let v = expect_error(res, StatusCode::UNPROCESSABLE_ENTITY, "URL_NOT_ALLOWED").await;
        assert!(!v.to_string().contains(url), "the URL is not echoed: {v}");
    }
    // A host that does not resolve is accepted (its attempts fail with `dns`).
    created(&s, &t, json!({"url": "https://no-such-host.invalid/in"})).await;
    // A PATCH is held to the same rules, and 404 comes first.
    let e = created(&s, &t, json!({"url": "https://hooks.example.com/in"})).await;
    let path = format!("/v1/webhook-endpoints/{}", e["id"].as_str().unwrap());
    let res = s
        .call(
            Method::PATCH,
            &path,
            &t,
            Some(json!({"url": "https://127.0.0.1/"})),
        )
        .await;
    expect_error(res, StatusCode::UNPROCESSABLE_ENTITY, "URL_NOT_ALLOWED").await;
    let res = s
        .call(
            Method::PATCH,
            &path,
            &t,
            Some(json!({"status": "paused", "url": "http://x.example/"})),
        )
        .await;
    let v = expect_error(res, StatusCode::BAD_REQUEST, "VALIDATION_ERROR").await;
    assert_eq!(
        details(&v).len(),
        1,
        "{v}: a syntactically valid URL, a bad status"
    );
    let res = s
        .call(
            Method::PATCH,
            "/v1/webhook-endpoints/we_0000000000000000000000",
            &t,
            Some(json!({"url": "https://127.0.0.1/"})),
        )
        .await;
    expect_error(res, StatusCode::NOT_FOUND, "RESOURCE_NOT_FOUND").await;
}

#[tokio::test]
async fn d55_allowed_ranges_take_plain_http_and_skip_the_address_rules() {
    let s = TestServer::start_with(|c| {
        c.webhook_allow = AllowList::parse("127.0.0.0/8").unwrap();
    })
    .await;
    let t = s.token(WRITE).await;
    let e = created(&s, &t, json!({"url": "http://127.0.0.1:9/in"})).await;
    assert_eq!(e["url"], "http://127.0.0.1:9/in");
    created(&s, &t, json!({"url": "https://localhost:9/in"})).await;
    // Other special ranges stay closed, and plain http stays for the allowed.
    let res = create(&s, &t, json!({"url": "http://10.0.0.1/in"})).await;
    expect_error(res, StatusCode::UNPROCESSABLE_ENTITY, "URL_NOT_ALLOWED").await;
    let res = create(&s, &t, json!({"url": "http://hooks.example.com/in"})).await;
    expect_error(res, StatusCode::BAD_REQUEST, "VALIDATION_ERROR").await;
}

#[tokio::test]
async fn d55_an_organization_has_at_most_16_endpoints() {
    let s = TestServer::start().await;
    let t = s.token(WRITE).await;
    let mut first = None;
    for i in 0..16 {
        let e = created(
            &s,
            &t,
            json!({ "url": format!("https://hooks.example.com/{i}") }),
        )
        .await;
        first.get_or_insert(e["id"].as_str().unwrap().to_owned());
        if i == 3 {
            // Disabled ones count too.
            let path = format!("/v1/webhook-endpoints/{}", e["id"].as_str().unwrap());
            s.call(
                Method::PATCH,
                &path,
                &t,
                Some(json!({"status": "disabled"})),
            )
            .await;
        }
    }
    let res = create(&s, &t, json!({"url": "https://hooks.example.com/17"})).await;
    expect_error(res, StatusCode::UNPROCESSABLE_ENTITY, "LIMIT_REACHED").await;
    let path = format!("/v1/webhook-endpoints/{}", first.unwrap());
    let res = s.call(Method::DELETE, &path, &t, None).await;
    assert_eq!(res.status(), StatusCode::NO_CONTENT);
    created(&s, &t, json!({"url": "https://hooks.example.com/17"})).await;
}

#[tokio::test]
async fn d55_rotation_issues_a_new_secret_once_with_a_bounded_grace() {
    let s = TestServer::start().await;
    let t = s.token(WRITE).await;
    let e = created(&s, &t, json!({"url": "https://hooks.example.com/in"})).await;
    let path = format!("/v1/webhook-endpoints/{}/secret", e["id"].as_str().unwrap());
    // No body: the default grace.
    let res = s
        .request(Method::POST, &path)
        .bearer_auth(&t)
        .send()
        .await
        .unwrap();
    assert_eq!(
        res.headers()
            .get("cache-control")
            .and_then(|v| v.to_str().ok()),
        Some("no-store")
    );
    let r = body_of(res, StatusCode::CREATED).await;
    let second = r["data"]["secret"].as_str().unwrap().to_owned();
    assert_eq!(secret_bytes(&second).len(), 32);
    assert_ne!(second, e["secret"].as_str().unwrap());
    assert_eq!(r["data"]["id"], e["id"]);
    let r = body_of(
        s.call(Method::POST, &path, &t, Some(json!({"grace_seconds": 0})))
            .await,
        StatusCode::CREATED,
    )
    .await;
    assert_ne!(r["data"]["secret"].as_str().unwrap(), second);
    for bad in [json!(604_801), json!(-1), json!("1h")] {
        let res = s
            .call(
                Method::POST,
                &path,
                &t,
                Some(json!({ "grace_seconds": bad })),
            )
            .await;
        let v = expect_error(res, StatusCode::BAD_REQUEST, "VALIDATION_ERROR").await;
        assert_eq!(details(&v)[0].0, "grace_seconds", "{v}");
    }
    let res = s
        .call(
            Method::POST,
            "/v1/webhook-endpoints/we_0000000000000000000000/secret",
            &t,
            None,
        )
        .await;
    expect_error(res, StatusCode::NOT_FOUND, "RESOURCE_NOT_FOUND").await;
}

#[tokio::test]
async fn d55_d50_a_retried_creation_replays_the_same_secret_and_creates_one_endpoint() {
    let s = TestServer::start().await;
    let t = s.token(WRITE).await;
    let send = || {
        s.request(Method::POST, "/v1/webhook-endpoints")
            .bearer_auth(&t)
            .header("Idempotency-Key", "create-hook-1")
            .json(&json!({"url": "https://hooks.example.com/in"}))
            .send()
    };
    let first = body_of(send().await.unwrap(), StatusCode::CREATED).await;
    let again = send().await.unwrap();
    assert_eq!(
        again
            .headers()
            .get("cache-control")
            .and_then(|v| v.to_str().ok()),
        Some("no-store")
    );
    assert_eq!(body_of(again, StatusCode::CREATED).await, first);
    let list = body_of(
        s.call(Method::GET, "/v1/webhook-endpoints", &t, None).await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(list["meta"]["total"], 1);
}

#[tokio::test]
async fn d29_webhook_scopes_are_needed_and_admins_only() {
    let s = TestServer::start().await;
    let read = s.token("webhooks:read").await;
    let none = s.token("events:read").await;
    let res = s
        .call(Method::GET, "/v1/webhook-endpoints", &none, None)
        .await;
    expect_error(res, StatusCode::FORBIDDEN, "INSUFFICIENT_SCOPE").await;
    let res = create(&s, &read, json!({"url": "https://hooks.example.com/in"})).await;
    expect_error(res, StatusCode::FORBIDDEN, "INSUFFICIENT_SCOPE").await;
    let res = s
        .call(Method::GET, "/v1/webhook-endpoints", &read, None)
        .await;
    assert_eq!(res.status(), StatusCode::OK);
    // D29 (continued): an editor's API key cannot carry them.
    let editor = s.new_user(&s.org(), "ed@example.com", Role::Editor).await;
    let key = s
        .store()
        .list_api_keys(&s.org())
        .await
        .unwrap()
        .into_iter()
        .find(|k| k.owner.as_ref() == Some(&editor.id));
    assert!(key.is_none());
    assert!(
        !gatehouse_domain::ScopeSet::for_role(Role::Editor)
            .contains(gatehouse_domain::Scope::WebhooksWrite)
    );
}

#[tokio::test]
async fn d55_an_owner_removed_disables_their_endpoints_until_someone_enables_them() {
    let s = TestServer::start().await;
    let t = s.token(WRITE).await;
    let org = s.org();
    let owner = s.new_user(&org, "owner@example.com", Role::Admin).await;
    // Another admin stays, so the owner may be deactivated (D10).
    s.new_user(&org, "keeper@example.com", Role::Admin).await;
    let url = EndpointUrl::parse("https://hooks.example.com/in", &AllowList::default()).unwrap();
    let e = Endpoint::new(
        &url,
        String::new(),
        vec![TypePattern::parse("*").unwrap()],
        Ordering::None,
        Some(owner.id.clone()),
        Timestamp::now(),
    );
    s.store()
        .insert_endpoint(&org, &e, b"sealed", crate::common::operator())
        .await
        .unwrap();
    let path = format!("/v1/webhook-endpoints/{}", e.id);
    let admin = s.token("users:write").await;
    let res = s
        .call(
            Method::PATCH,
            &format!("/v1/users/{}", owner.id),
            &admin,
            Some(json!({"status": "inactive"})),
        )
        .await;
    body_of(res, StatusCode::OK).await;
    let shown = body_of(s.call(Method::GET, &path, &t, None).await, StatusCode::OK).await;
    assert_eq!(shown["data"]["status"], "disabled");
    assert_eq!(shown["data"]["disabled_reason"], "owner_removed");
    assert_eq!(shown["data"]["owner_id"], owner.id.as_str());
    // D54: the endpoint's event before the user's.
    let events = told(&s, "?type=webhook_endpoint.*&type=user.updated").await;
    let kinds: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(kinds[..2], ["user.updated", "webhook_endpoint.disabled"]);
    assert_eq!(
        events[1]["data"]["object"]["disabled_reason"],
        "owner_removed"
    );
    // Enabled again by an organization-wide credential: it becomes the
    // credential's owner's (the bootstrap client has none).
    let on = body_of(
        s.call(Method::PATCH, &path, &t, Some(json!({"status": "enabled"})))
            .await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(on["data"]["status"], "enabled");
    assert_eq!(on["data"]["owner_id"], Value::Null);
}
