//! Rate limits by plan (D28) against the real server: per-second and
//! per-minute windows per credential lineage, the headers, 429 with
//! `Retry-After`, suspension, and the guard on failed client authentication.
//!
//! The end of a 15-minute suspension is checked with a synthetic clock in
//! the limiter's unit tests (`gatehouse_auth::ratelimit`); waiting 15 minutes
//! here would say nothing more.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use gatehouse_auth::secrets;
use gatehouse_domain::{ApiKey, ApiKeyId, Plan, ScopeSet, Timestamp};
use reqwest::header::HeaderMap;
use reqwest::{Method, Response, StatusCode};
use serde_json::{Value, json};

use crate::common::{TestServer, expect_error};

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

fn header_u64(h: &HeaderMap, name: &str) -> u64 {
    h.get(name)
        .unwrap_or_else(|| panic!("{name} present"))
        .to_str()
        .unwrap()
        .parse()
        .unwrap_or_else(|_| panic!("{name} is a number"))
}

/// A free-plan organization and a client-credentials token in it.
async fn free_client(s: &TestServer) -> (String, String, String) {
    let org = s.new_org(Plan::Free).await;
    let (id, secret) = s.new_client(&org, "users:read users:write").await;
    let token = s.token_for(&id, &secret, "users:read users:write").await;
    (id, secret, token)
}

async fn get_users(s: &TestServer, token: &str) -> Response {
    s.call(Method::GET, "/v1/users", token, None).await
}

/// Asserts the D28 headers of an authenticated response.
fn assert_rate_headers(h: &HeaderMap, limit: u64, remaining: u64) {
    assert_eq!(header_u64(h, "x-ratelimit-limit"), limit);
    assert_eq!(header_u64(h, "x-ratelimit-remaining"), remaining);
    let reset = header_u64(h, "x-ratelimit-reset");
    let now = now_secs();
    assert!(
        reset >= now.saturating_sub(1) && reset <= now + 61,
        "reset {reset}, now {now}"
    );
}

#[tokio::test]
async fn d28_eleventh_request_in_one_second_is_429_with_retry_after() {
    let s = TestServer::start().await;
    let (_, _, token) = free_client(&s).await;
    let started = Instant::now();
    for i in 0..10u64 {
        let res = get_users(&s, &token).await;
        assert_eq!(res.status(), StatusCode::OK, "request {}", i + 1);
        assert_rate_headers(res.headers(), 60, 59 - i);
    }
    let res = get_users(&s, &token).await;
    assert!(
        started.elapsed() < Duration::from_millis(900),
        "the eleven requests fit in one second ({:?})",
        started.elapsed()
    );
    let h = res.headers().clone();
    expect_error(res, StatusCode::TOO_MANY_REQUESTS, "RATE_LIMIT_EXCEEDED").await;
    // Whole seconds until a request would be admitted: the first admission
    // leaves the one-second window within a second.
    assert_eq!(header_u64(&h, "retry-after"), 1);
    // Refused requests do not count: still 50 left in the minute.
    assert_rate_headers(&h, 60, 50);
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let res = get_users(&s, &token).await;
    assert_eq!(res.status(), StatusCode::OK, "admitted after Retry-After");
    assert_rate_headers(res.headers(), 60, 49);
}

/// 60 requests spread over about seven seconds (10 per second), then a new token
/// for the same client: the 61st is refused — the count belongs to the
/// client, not to the token — with `Retry-After` until the oldest leaves the
/// minute.
#[tokio::test]
async fn d28_sixty_first_within_a_minute_is_429_even_with_a_new_token() {
    let s = TestServer::start().await;
    let (id, secret, token) = free_client(&s).await;
    let first = Instant::now();
    for batch in 0..6u64 {
        let t0 = Instant::now();
        for i in 0..10u64 {
            let res = get_users(&s, &token).await;
            assert_eq!(res.status(), StatusCode::OK, "batch {batch} request {i}");
            assert_rate_headers(res.headers(), 60, 59 - (batch * 10 + i));
        }
        assert!(t0.elapsed() < Duration::from_secs(5), "a batch is quick");
        if batch < 5 {
            // The whole batch leaves the one-second window before the next.
            tokio::time::sleep(Duration::from_millis(1050)).await;
        }
    }
    let fresh = s.token_for(&id, &secret, "users:read").await;
    assert_ne!(fresh, token);
    let res = get_users(&s, &fresh).await;
    let h = res.headers().clone();
    expect_error(res, StatusCode::TOO_MANY_REQUESTS, "RATE_LIMIT_EXCEEDED").await;
    assert_rate_headers(&h, 60, 0);
    let retry = header_u64(&h, "retry-after");
    let waited = first.elapsed().as_secs();
    assert!(
        retry >= 60 - waited - 2 && retry <= 60 - waited + 1,
        "Retry-After {retry} after {waited} s"
    );
}

#[tokio::test]
async fn d28_headers_on_every_authenticated_response() {
    let s = TestServer::start().await;
    // The bootstrap organization is on pro: 600 per minute (D41).
    let t = s.token("users:read users:write").await;
    let mut remaining = 600;
    let mut check = |res: &Response, status: StatusCode| {
        assert_eq!(res.status(), status);
        remaining -= 1;
        assert_rate_headers(res.headers(), 600, remaining);
    };
    let res = s
        .call(
            Method::POST,
            "/v1/users",
            &t,
            Some(json!({"email": "rl@example.com", "name": "R L", "role": "viewer"})),
        )
        .await;
    check(&res, StatusCode::CREATED);
    let id = res.json::<Value>().await.unwrap()["data"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    check(&get_users(&s, &t).await, StatusCode::OK);
    check(
        &s.call(Method::GET, &format!("/v1/users/{id}"), &t, None)
            .await,
        StatusCode::OK,
    );
    check(
        &s.call(
            Method::PATCH,
            &format!("/v1/users/{id}"),
            &t,
            Some(json!({"name": "R. L."})),
        )
        .await,
        StatusCode::OK,
    );
    check(
        &s.call(
            Method::PATCH,
            &format!("/v1/users/{id}"),
            &t,
            Some(json!({"role": "owner"})),
        )
        .await,
        StatusCode::BAD_REQUEST,
    );
    check(
        &s.call(Method::GET, "/v1/users/usr_doesnotexist", &t, None)
            .await,
        StatusCode::NOT_FOUND,
    );
    check(
        &s.call(Method::GET, "/v1/products", &t, None).await,
        StatusCode::FORBIDDEN,
    );
    check(
        &s.call(Method::DELETE, &format!("/v1/users/{id}"), &t, None)
            .await,
        StatusCode::NO_CONTENT,
    );
}

#[tokio::test]
async fn d28_api_keys_are_limited_like_tokens() {
    let s = TestServer::start().await;
    let org = s.new_org(Plan::Free).await;
    let key = secrets::new_api_key(false);
    let record = ApiKey {
        id: ApiKeyId::generate(),
        org,
        name: "ci".into(),
        scopes: ScopeSet::parse("users:read").unwrap(),
        created_at: Timestamp::now(),
        prefix: String::new(),
        owner: None,
        expires_at: None,
        last_used_at: None,
        revoked_at: None,
    };
    s.store()
        .insert_api_key(
            &record.org,
            &record,
            &secrets::hash_secret(&key),
            crate::common::operator(),
        )
        .await
        .unwrap();
    for i in 0..10u64 {
        let res = get_users(&s, &key).await;
        assert_eq!(res.status(), StatusCode::OK);
        assert_rate_headers(res.headers(), 60, 59 - i);
    }
    let res = get_users(&s, &key).await;
    expect_error(res, StatusCode::TOO_MANY_REQUESTS, "RATE_LIMIT_EXCEEDED").await;
}

#[tokio::test]
async fn d28_ignoring_retry_after_suspends_the_credential_for_15_minutes() {
    let s = TestServer::start().await;
    let (id, secret, token) = free_client(&s).await;
    for _ in 0..10 {
        assert_eq!(get_users(&s, &token).await.status(), StatusCode::OK);
    }
    // The 11th is refused; ten more inside its Retry-After are ignoring it.
    let mut last = None;
    for _ in 0..11 {
        let res = get_users(&s, &token).await;
        assert_eq!(res.status(), StatusCode::TOO_MANY_REQUESTS);
        last = Some(header_u64(res.headers(), "retry-after"));
    }
    let retry = last.unwrap();
    assert!(
        (890..=900).contains(&retry),
        "suspended for 15 minutes: Retry-After {retry}"
    );
    // Waiting out the per-second window does not help, nor does a new token.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let fresh = s.token_for(&id, &secret, "users:read").await;
    let res = get_users(&s, &fresh).await;
    let h = res.headers().clone();
    expect_error(res, StatusCode::TOO_MANY_REQUESTS, "RATE_LIMIT_EXCEEDED").await;
    let retry = header_u64(&h, "retry-after");
    assert!(
        (880..=900).contains(&retry),
        "the remaining suspension: {retry}"
    );
    // Another credential of the same organization is not affected.
    let org_client = s.new_org(Plan::Free).await;
    let (other, other_secret) = s.new_client(&org_client, "users:read").await;
    let other_token = s.token_for(&other, &other_secret, "users:read").await;
    assert_eq!(get_users(&s, &other_token).await.status(), StatusCode::OK);
}

async fn token_attempt(s: &TestServer, id: &str, secret: &str) -> Response {
    token_attempt_with(s, &s.client, id, secret).await
}

async fn token_attempt_with(
    s: &TestServer,
    client: &reqwest::Client,
    id: &str,
    secret: &str,
) -> Response {
    client
        .post(s.url("/oauth/token"))
        .basic_auth(id, Some(secret))
        .form(&[("grant_type", "client_credentials")])
        .send()
        .await
        .unwrap()
}

/// D28 (revised): the body of a guarded attempt.
async fn expect_temporarily_unavailable(res: Response) {
    assert_eq!(res.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(res.headers()["cache-control"], "no-store");
    let retry = header_u64(res.headers(), "retry-after");
    assert!((290..=300).contains(&retry), "Retry-After {retry}");
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["error"], "temporarily_unavailable", "{body}");
    assert!(body["error_description"].is_string(), "{body}");
}

const OTHER_SOURCE: std::net::IpAddr = std::net::IpAddr::V4(std::net::Ipv4Addr::new(127, 0, 0, 2));

#[tokio::test]
async fn d28_failed_client_authentication_blocks_the_client_from_that_address_only() {
    let s = TestServer::start().await;
    let org = s.new_org(Plan::Free).await;
    let (id, secret) = s.new_client(&org, "users:read").await;
    for i in 0..10 {
        let res = token_attempt(&s, &id, "wrong-secret").await;
        assert_eq!(res.status(), StatusCode::UNAUTHORIZED, "attempt {}", i + 1);
        let body: Value = res.json().await.unwrap();
        assert_eq!(body["error"], "invalid_client");
    }
    // The 11th attempt from that address waits five minutes, even with the
    // right secret.
    expect_temporarily_unavailable(token_attempt(&s, &id, &secret).await).await;
    // Revocation is guarded the same way (D28: /oauth/token and /oauth/revoke).
    let res = s
        .request(Method::POST, "/oauth/revoke")
        .basic_auth(&id, Some(&secret))
        .form(&[("token", "whatever")])
        .send()
        .await
        .unwrap();
    expect_temporarily_unavailable(res).await;
    // The client_id is public: the right secret from another address works.
    let elsewhere = crate::common::client_from(&s, OTHER_SOURCE);
    let res = token_attempt_with(&s, &elsewhere, &id, &secret).await;
    assert_eq!(
        res.status(),
        StatusCode::OK,
        "{}",
        res.text().await.unwrap()
    );
    // Other clients from the same address are not affected.
    let (other, other_secret) = s.new_client(&org, "users:read").await;
    let res = token_attempt(&s, &other, &other_secret).await;
    assert_eq!(res.status(), StatusCode::OK);
}

#[tokio::test]
async fn d28_a_hundred_failures_from_one_address_block_it_for_every_client() {
    let s = TestServer::start().await;
    let org = s.new_org(Plan::Free).await;
    let (id, secret) = s.new_client(&org, "users:read").await;
    // 100 failures from this address, spread over client ids (fewer than
    // ten each, so the per-client guard never triggers).
    let ids: Vec<(String, String)> = {
        let mut v = Vec::new();
        for _ in 0..12 {
            v.push(s.new_client(&org, "users:read").await);
        }
        v
    };
    for i in 0..100 {
        let (cid, _) = &ids[i % ids.len()];
        let res = token_attempt(&s, cid, "wrong-secret").await;
        assert_eq!(res.status(), StatusCode::UNAUTHORIZED, "attempt {}", i + 1);
    }
    expect_temporarily_unavailable(token_attempt(&s, &id, &secret).await).await;
    // Another address is not blocked.
    let elsewhere = crate::common::client_from(&s, OTHER_SOURCE);
    let res = token_attempt_with(&s, &elsewhere, &id, &secret).await;
    assert_eq!(res.status(), StatusCode::OK);
}
