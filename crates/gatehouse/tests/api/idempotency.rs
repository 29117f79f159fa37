//! D50: `Idempotency-Key` on POSTs under `/v1` — replays byte for byte,
//! one record for two identical POSTs, 422 for a reused key, 409 while the
//! first runs, malformed keys, what is not kept, scoping per organization
//! and credential lineage, and the retention purged.

use std::time::{Duration, Instant};

use gatehouse_domain::Plan;
use reqwest::{Method, Response, StatusCode};
use serde_json::{Value, json};

use crate::common::{TestServer, details, expect_error};

const KEY: &str = "idempotency-key";

async fn post(s: &TestServer, path: &str, token: &str, key: &str, body: &Value) -> Response {
    s.request(Method::POST, path)
        .bearer_auth(token)
        .header(KEY, key)
        .json(body)
        .send()
        .await
        .unwrap()
}

struct Answer {
    status: StatusCode,
    location: Option<String>,
    replayed: Option<String>,
    request_id: String,
    retry_after: Option<String>,
    body: Vec<u8>,
}

async fn answer(res: Response) -> Answer {
    let h = |n: &str| res.headers().get(n).map(|v| v.to_str().unwrap().to_owned());
    let (location, replayed, request_id, retry_after) = (
        h("location"),
        h("idempotent-replayed"),
        h("x-request-id").expect("every answer has an X-Request-ID"),
        h("retry-after"),
    );
    Answer {
        status: res.status(),
        location,
        replayed,
        request_id,
        retry_after,
        body: res.bytes().await.unwrap().to_vec(),
    }
}

/// Users in the organization whose e-mail contains `q`.
async fn count_users(s: &TestServer, token: &str, q: &str) -> u64 {
    let res = s
        .call(Method::GET, &format!("/v1/users?q={q}"), token, None)
        .await;
    assert_eq!(res.status(), StatusCode::OK);
    res.json::<Value>().await.unwrap()["meta"]["total"]
        .as_u64()
        .unwrap()
}

async fn count_products(s: &TestServer, token: &str, q: &str) -> u64 {
    let res = s
        .call(Method::GET, &format!("/v1/products?q={q}"), token, None)
        .await;
    assert_eq!(res.status(), StatusCode::OK);
    res.json::<Value>().await.unwrap()["meta"]["total"]
        .as_u64()
        .unwrap()
}

#[tokio::test]
async fn d50_replay_is_byte_for_byte_and_creates_once() {
    let s = TestServer::start().await;
    let t = s.token("users:read users:write").await;
    let body = json!({"email": "idem@example.com", "name": "Idem", "role": "viewer"});
    let first = answer(post(&s, "/v1/users", &t, "k-users-1", &body).await).await;
    assert_eq!(first.status, StatusCode::CREATED);
    assert!(first.location.is_some());
    assert_eq!(first.replayed, None);
    let again = answer(post(&s, "/v1/users", &t, "k-users-1", &body).await).await;
    assert_eq!(again.status, StatusCode::CREATED);
    assert_eq!(again.location, first.location);
    assert_eq!(
        again.body, first.body,
        "the body is the original's, byte for byte"
    );
    assert_eq!(again.replayed.as_deref(), Some("true"));
    assert_ne!(
        again.request_id, first.request_id,
        "a replay has its own id"
    );
    assert_eq!(count_users(&s, &t, "idem@example.com").await, 1);

    // Products too; and a kept 409 is replayed as a 409.
    let t = s.token("products:read products:write").await;
    let p = json!({"name": "Idem box", "sku": "IDEM-1", "price": 100, "stock": 1});
    let first = answer(post(&s, "/v1/products", &t, "k-prod-1", &p).await).await;
    assert_eq!(first.status, StatusCode::CREATED);
    let again = answer(post(&s, "/v1/products", &t, "k-prod-1", &p).await).await;
    assert_eq!(
        (again.status, &again.location, &again.body),
        (first.status, &first.location, &first.body)
    );
    assert_eq!(again.replayed.as_deref(), Some("true"));
    assert_eq!(count_products(&s, &t, "IDEM").await, 1);
    let dup = answer(post(&s, "/v1/products", &t, "k-prod-2", &p).await).await;
    assert_eq!(dup.status, StatusCode::CONFLICT);
    let dup_again = answer(post(&s, "/v1/products", &t, "k-prod-2", &p).await).await;
    assert_eq!(dup_again.status, StatusCode::CONFLICT);
    assert_eq!(dup_again.body, dup.body);
    assert_eq!(dup_again.replayed.as_deref(), Some("true"));
    // Without a key nothing is kept: the same POST is a conflict.
    let res = s.call(Method::POST, "/v1/products", &t, Some(p)).await;
    expect_error(res, StatusCode::CONFLICT, "DUPLICATE_RESOURCE").await;
}

#[tokio::test]
async fn d50_the_same_key_with_another_request_is_422() {
    let s = TestServer::start().await;
    let t = s.token("users:read users:write").await;
    let a = json!({"email": "a1@example.com", "name": "A", "role": "viewer"});
    let b = json!({"email": "b1@example.com", "name": "B", "role": "viewer"});
    assert_eq!(
        post(&s, "/v1/users", &t, "k", &a).await.status(),
        StatusCode::CREATED
    );
    let res = post(&s, "/v1/users", &t, "k", &b).await;
    expect_error(
        res,
        StatusCode::UNPROCESSABLE_ENTITY,
        "IDEMPOTENCY_KEY_REUSED",
    )
    .await;
    // Another path with the same body is another request as well.
    let res = s
        .request(Method::POST, "/v1/users?x=1")
        .bearer_auth(&t)
        .header(KEY, "k")
        .json(&a)
        .send()
        .await
        .unwrap();
    expect_error(
        res,
        StatusCode::UNPROCESSABLE_ENTITY,
        "IDEMPOTENCY_KEY_REUSED",
    )
    .await;
    assert_eq!(count_users(&s, &t, "b1@example.com").await, 0);
}

#[tokio::test]
async fn d50_concurrent_requests_with_one_key_run_once() {
    let s = TestServer::start().await;
    let t = s.token("users:read users:write").await;
    let body = json!({"email": "race@example.com", "name": "Race", "role": "viewer"});
    let sends = (0..6).map(|_| post(&s, "/v1/users", &t, "race-key", &body));
    let answers = futures_util::future::join_all(sends).await;
    let mut created = 0;
    for res in answers {
        let a = answer(res).await;
        match a.status {
            StatusCode::CREATED if a.replayed.is_none() => created += 1,
            StatusCode::CREATED => assert_eq!(a.replayed.as_deref(), Some("true")),
            StatusCode::CONFLICT => {
                assert_eq!(a.retry_after.as_deref(), Some("1"));
                let v: Value = serde_json::from_slice(&a.body).unwrap();
                assert_eq!(v["error"]["code"], "IDEMPOTENCY_KEY_IN_USE");
            }
            other => panic!("unexpected {other}"),
        }
    }
    assert_eq!(created, 1, "exactly one ran");
    assert_eq!(count_users(&s, &t, "race@example.com").await, 1);
}

#[tokio::test]
async fn d50_malformed_keys_are_400_after_authentication() {
    let s = TestServer::start().await;
    let t = s.token("users:read users:write").await;
    let body = json!({"email": "m@example.com", "name": "M", "role": "viewer"});
    let long = "k".repeat(256);
    let bad: [&[u8]; 4] = [b"", long.as_bytes(), b"a\tb", "caf\u{e9}".as_bytes()];
    for key in bad {
        let res = s
            .request(Method::POST, "/v1/users")
            .bearer_auth(&t)
            .header(KEY, reqwest::header::HeaderValue::from_bytes(key).unwrap())
            .json(&body)
            .send()
            .await
            .unwrap();
        let v = expect_error(res, StatusCode::BAD_REQUEST, "VALIDATION_ERROR").await;
        assert_eq!(details(&v)[0].0, "Idempotency-Key", "{v}");
    }
    // 255 characters are fine; authentication comes first (D9).
    let ok = "k".repeat(255);
    assert_eq!(
        post(&s, "/v1/users", &t, &ok, &body).await.status(),
        StatusCode::CREATED
    );
    let res = s
        .request(Method::POST, "/v1/users")
        .header(KEY, "")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::UNAUTHORIZED);
}

/// 400, 401, 403, 415 and 429 are not kept: the retry with the same key
/// after fixing the request runs.
#[tokio::test]
async fn d50_refusals_before_or_in_validation_are_not_kept() {
    let s = TestServer::start().await;
    let t = s.token("users:read users:write").await;
    let good = json!({"email": "fix@example.com", "name": "Fix", "role": "viewer"});
    // 400: an invalid body; then a valid (different) one with the same key.
    let res = post(&s, "/v1/users", &t, "k400", &json!({"email": "nope"})).await;
    expect_error(res, StatusCode::BAD_REQUEST, "VALIDATION_ERROR").await;
    assert_eq!(
        post(&s, "/v1/users", &t, "k400", &good).await.status(),
        StatusCode::CREATED
    );
    // 401 and 403, then the right credential.
    let g2 = json!({"email": "fix2@example.com", "name": "Fix", "role": "viewer"});
    let res = post(&s, "/v1/users", "not-a-token", "k401", &g2).await;
    assert_eq!(res.status(), StatusCode::UNAUTHORIZED);
    let read_only = s.token("users:read").await;
    let res = post(&s, "/v1/users", &read_only, "k401", &g2).await;
    assert_eq!(res.status(), StatusCode::FORBIDDEN);
    let res = post(&s, "/v1/users", &t, "k401", &g2).await;
    assert_eq!(res.status(), StatusCode::CREATED);
    // 415: the wrong media type, then JSON.
    let g3 = json!({"email": "fix3@example.com", "name": "Fix", "role": "viewer"});
    let res = s
        .request(Method::POST, "/v1/users")
        .bearer_auth(&t)
        .header(KEY, "k415")
        .header("content-type", "text/plain")
        .body(g3.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::UNSUPPORTED_MEDIA_TYPE);
    assert_eq!(
        post(&s, "/v1/users", &t, "k415", &g3).await.status(),
        StatusCode::CREATED
    );

    // 429: a free plan's 10 per second, then the same key once admitted.
    let org = s.new_org(Plan::Free).await;
    let (id, secret) = s.new_client(&org, "users:read users:write").await;
    let ft = s.token_for(&id, &secret, "users:read users:write").await;
    let g4 = json!({"email": "fix4@example.com", "name": "Fix", "role": "viewer"});
    let mut limited = false;
    for _ in 0..30 {
        let res = post(&s, "/v1/users", &ft, "k429", &g4).await;
        match res.status() {
            StatusCode::TOO_MANY_REQUESTS => {
                limited = true;
                break;
            }
            // Admitted before the limit: the first ran, the rest replay it.
            StatusCode::CREATED => {}
            other => panic!("unexpected {other}"),
        }
    }
    assert!(limited, "the plan's per-second limit was reached");
    let g5 = json!({"email": "fix5@example.com", "name": "Fix", "role": "viewer"});
    let mut limited = false;
    for _ in 0..30 {
        let res = post(&s, "/v1/users", &ft, "k429b", &g5).await;
        if res.status() == StatusCode::TOO_MANY_REQUESTS {
            limited = true;
            break;
        }
    }
    assert!(limited);
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let a = answer(post(&s, "/v1/users", &ft, "k429b", &g5).await).await;
    assert_eq!(a.status, StatusCode::CREATED);
}

/// Keys are per organization and per credential lineage.
#[tokio::test]
async fn d50_keys_are_scoped_per_organization_and_lineage() {
    let s = TestServer::start().await;
    let t = s.token("users:read users:write").await;
    let body = json!({"email": "scope@example.com", "name": "S", "role": "viewer"});
    let first = answer(post(&s, "/v1/users", &t, "shared", &body).await).await;
    assert_eq!(first.status, StatusCode::CREATED);
    // Another client of the same organization: its own key, so the POST
    // runs (and meets the user: 409, not the replay).
    let (id, secret) = s.new_client(&s.org(), "users:read users:write").await;
    let t2 = s.token_for(&id, &secret, "users:read users:write").await;
    let other = answer(post(&s, "/v1/users", &t2, "shared", &body).await).await;
    assert_eq!(other.status, StatusCode::CONFLICT);
    assert_eq!(other.replayed, None);
    // A token of the first client fetched later shares its lineage.
    let t3 = s.token("users:read users:write").await;
    let again = answer(post(&s, "/v1/users", &t3, "shared", &body).await).await;
    assert_eq!(again.replayed.as_deref(), Some("true"));
    assert_eq!(again.body, first.body);
    // Another organization: runs there.
    let org = s.new_org(Plan::Pro).await;
    let (id, secret) = s.new_client(&org, "users:read users:write").await;
    let t4 = s.token_for(&id, &secret, "users:read users:write").await;
    let there = answer(post(&s, "/v1/users", &t4, "shared", &body).await).await;
    assert_eq!(there.status, StatusCode::CREATED);
    assert_eq!(there.replayed, None);
}

/// Rows of `idempotency_keys` as stored.
async fn stored_keys(s: &TestServer) -> i64 {
    let sql = "SELECT count(*) FROM idempotency_keys";
    if s.settings.database_url.starts_with("postgres") {
        gatehouse_store_postgres::testing::query_i64(&s.settings.database_url, sql).await
    } else {
        let path = s.data_dir().join("gatehouse.db");
        tokio::task::spawn_blocking(move || {
            let c = rusqlite::Connection::open(path).unwrap();
            c.query_row(sql, [], |r| r.get(0)).unwrap()
        })
        .await
        .unwrap()
    }
}

/// The retention is a setting: shortened, the kept response is purged in
/// the background and the key is usable anew.
#[tokio::test]
async fn d50_kept_responses_are_purged_after_the_retention() {
    let s = TestServer::start_with(|c| c.idempotency_retention_secs = 1).await;
    let t = s.token("users:read users:write").await;
    let a = json!({"email": "p1@example.com", "name": "P", "role": "viewer"});
    let b = json!({"email": "p2@example.com", "name": "P", "role": "viewer"});
    assert_eq!(
        post(&s, "/v1/users", &t, "short", &a).await.status(),
        StatusCode::CREATED
    );
    assert_eq!(stored_keys(&s).await, 1);
    let started = Instant::now();
    while stored_keys(&s).await > 0 {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the kept response is purged"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let res = post(&s, "/v1/users", &t, "short", &b).await;
    assert_eq!(res.status(), StatusCode::CREATED, "the key is usable anew");
}

/// The OpenAPI document names the header on every `/v1` POST, and the
/// error reference has an anchor for each new code (D6 continued).
#[tokio::test]
async fn d50_documented_in_openapi_and_the_error_reference() {
    let s = TestServer::start().await;
    let doc: Value = s
        .request(Method::GET, "/v1/openapi.json")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let mut posts = 0;
    for (path, item) in doc["paths"].as_object().unwrap() {
        let Some(op) = item.get("post") else { continue };
        let named = op["parameters"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|p| p["name"] == "Idempotency-Key" && p["in"] == "header");
        assert_eq!(named, path.starts_with("/v1/"), "{path}");
        posts += usize::from(named);
    }
    assert!(posts >= 3, "POST /v1/users, /v1/products, the invitation");
    let page = s
        .request(Method::GET, "/docs/errors")
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for code in ["IDEMPOTENCY_KEY_REUSED", "IDEMPOTENCY_KEY_IN_USE"] {
        assert!(page.contains(&format!("id=\"{code}\"")), "{code}");
    }
}
