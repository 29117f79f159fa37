//! D32: the `/v2/` preview with cursor pagination.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::common::{TestServer, expect_error};

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

async fn create_user(s: &TestServer, t: &str, i: usize) -> String {
    let res = s
        .call(Method::POST, "/v1/users", t, Some(json!({"email": format!("u{i}@example.com"), "name": format!("User {i}"), "role": "viewer"})))
        .await;
    assert_eq!(res.status(), StatusCode::CREATED);
    res.json::<Value>().await.unwrap()["data"]["id"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[tokio::test]
async fn v2_is_404_until_an_operator_enables_the_preview() {
    let s = TestServer::start().await;
    let t = s.token("users:read products:read").await;
    let res = s.call(Method::GET, "/v2/users", &t, None).await;
    expect_error(res, StatusCode::NOT_FOUND, "RESOURCE_NOT_FOUND").await;
    let out = cli(&s, &["org", "set", &s.creds.org, "--v2-preview", "on"]).await;
    assert_eq!(out["v2_preview"], true);
    let res = s.call(Method::GET, "/v2/users", &t, None).await;
    assert_eq!(res.status(), StatusCode::OK);
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["meta"]["next_cursor"], Value::Null);
    assert_eq!(body["meta"]["version"], "1.2.0");
    cli(&s, &["org", "set", &s.creds.org, "--v2-preview", "off"]).await;
    let res = s.call(Method::GET, "/v2/products", &t, None).await;
    expect_error(res, StatusCode::NOT_FOUND, "RESOURCE_NOT_FOUND").await;
    // Without a token: 401 first (D9).
    let res = s.request(Method::GET, "/v2/users").send().await.unwrap();
    expect_error(res, StatusCode::UNAUTHORIZED, "INVALID_TOKEN").await;
}

#[tokio::test]
async fn cursors_walk_a_growing_list_without_skipping_or_repeating() {
    let s = TestServer::start().await;
    s.store().set_v2_preview(&s.org(), true).await.unwrap();
    let t = s.token("users:read users:write").await;
    let mut originals = Vec::new();
    for i in 0..7 {
        originals.push(create_user(&s, &t, i).await);
    }
    // Newest first; two users made in the same millisecond are in `id`
    // order (D14), so the list itself says which comes first.
    let res = s.call(Method::GET, "/v1/users?limit=100", &t, None).await;
    let listed: Value = res.json().await.unwrap();
    let listed: Vec<String> = listed["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u["id"].as_str().unwrap().to_owned())
        .collect();
    originals.sort_by_key(|id| listed.iter().position(|l| l == id));
    assert_eq!(originals.len(), 7);
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    for round in 0..10 {
        let path = match &cursor {
            Some(c) => format!("/v2/users?limit=3&starting_after={c}"),
            None => "/v2/users?limit=3".to_owned(),
        };
        let res = s.call(Method::GET, &path, &t, None).await;
        assert_eq!(res.status(), StatusCode::OK);
        let body: Value = res.json().await.unwrap();
        let ids: Vec<String> = body["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|u| u["id"].as_str().unwrap().to_owned())
            .collect();
        assert!(ids.len() <= 3);
        assert_eq!(body["meta"]["limit"], 3);
        seen.extend(ids);
        // A user arrives between pages; it sorts first and is not part of this walk.
        create_user(&s, &t, 100 + round).await;
        match body["meta"]["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_owned()),
            None => break,
        }
    }
    assert_eq!(seen, originals, "every user once, in list order");
}

#[tokio::test]
async fn bad_cursors_and_limits() {
    let s = TestServer::start().await;
    s.store().set_v2_preview(&s.org(), true).await.unwrap();
    let t = s.token("users:read users:write products:read").await;
    let res = s
        .call(Method::GET, "/v2/users?starting_after=prod_abc", &t, None)
        .await;
    expect_error(res, StatusCode::BAD_REQUEST, "VALIDATION_ERROR").await;
    let res = s
        .call(
            Method::GET,
            "/v2/users?starting_after=usr_doesnotexist",
            &t,
            None,
        )
        .await;
    expect_error(res, StatusCode::BAD_REQUEST, "VALIDATION_ERROR").await;
    let res = s.call(Method::GET, "/v2/users?limit=0", &t, None).await;
    expect_error(res, StatusCode::BAD_REQUEST, "VALIDATION_ERROR").await;
    let res = s
        .call(Method::GET, "/v2/products?limit=1000", &t, None)
        .await;
    assert_eq!(res.json::<Value>().await.unwrap()["meta"]["limit"], 100);
    // Filters work as in v1.
    create_user(&s, &t, 1).await;
    let res = s.call(Method::GET, "/v2/users?role=admin", &t, None).await;
    assert_eq!(res.json::<Value>().await.unwrap()["data"], json!([]));
    let res = s.call(Method::GET, "/v2/users?role=owner", &t, None).await;
    expect_error(res, StatusCode::BAD_REQUEST, "VALIDATION_ERROR").await;
}

#[tokio::test]
async fn openapi_document_and_reference_pages_need_no_token() {
    // D35
    let s = TestServer::start().await;
    let res = s
        .request(Method::GET, "/v1/openapi.json")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let doc: Value = res.json().await.unwrap();
    assert_eq!(doc["openapi"], "3.1.0");
    assert_eq!(doc["servers"][0]["url"], crate::common::PUBLIC_URL);
    assert!(doc["paths"]["/v1/users"]["get"].is_object());
    let res = s.request(Method::GET, "/docs").send().await.unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let html = res.text().await.unwrap().replace("&#x2f;", "/");
    // D52: the overview links every operation to its section (docs.rs
    // checks the sections themselves).
    for op in gatehouse_server::api::openapi::operations() {
        assert!(
            html.contains(&format!("#{}\"", op.id)),
            "/docs links to {}",
            op.id
        );
    }
    for section in [
        "rate-limits",
        "oauth",
        "scopes",
        "authentication",
        "envelopes",
    ] {
        assert!(
            html.contains(&format!("id=\"{section}\"")),
            "/docs has {section}"
        );
    }
    // Nothing is fetched from elsewhere: the stylesheet and the script are
    // the binary's own, and there are no images.
    for asset in ["src=\"http", "href=\"http", "<img", "src=\"//", "href=\"//"] {
        assert!(!html.contains(asset), "/docs loads no {asset}");
    }
}
