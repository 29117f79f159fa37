//! `/v1/users`: interface.md §4.3, D2, D5–D14.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use gatehouse_auth::secrets;
use gatehouse_domain::{
    ClientId, Email, Name, NewUser, OrgId, Organization, Plan, Role, ScopeSet, Timestamp, User,
    UserId, UserStatus,
};
use gatehouse_store::NewClient;
use reqwest::{Method, Response, StatusCode};
use serde_json::{Value, json};

use crate::common::{PUBLIC_URL, TestServer, details, expect_error};

// ---------------------------------------------------------------------------
// Helpers (also used by products.rs)
// ---------------------------------------------------------------------------

/// The JSON body of a response, after checking its status.
pub(crate) async fn body_of(res: Response, status: StatusCode) -> Value {
    let got = res.status();
    let text = res.text().await.unwrap();
    assert_eq!(got, status, "unexpected status; body: {text}");
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146097 + doe - 719468
}

/// D4: `2026-11-22T02:31:42.123Z` — RFC 3339, UTC, `Z`, milliseconds.
/// Returns the instant in Unix milliseconds.
pub(crate) fn assert_timestamp(v: &Value) -> i64 {
    let s = v
        .as_str()
        .unwrap_or_else(|| panic!("timestamp must be a string: {v}"));
    let b = s.as_bytes();
    assert_eq!(b.len(), 24, "D4 timestamp shape: {s}");
    for (i, c) in b.iter().enumerate() {
        let want = match i {
            4 | 7 => Some(b'-'),
            10 => Some(b'T'),
            13 | 16 => Some(b':'),
            19 => Some(b'.'),
            23 => Some(b'Z'),
            _ => None,
        };
        match want {
            Some(w) => assert_eq!(*c, w, "D4 timestamp shape: {s}"),
            None => assert!(c.is_ascii_digit(), "D4 timestamp shape: {s}"),
        }
    }
    let n = |a: usize, z: usize| s[a..z].parse::<i64>().unwrap();
    let (mo, d, h, mi, se) = (n(5, 7), n(8, 10), n(11, 13), n(14, 16), n(17, 19));
    assert!((1..=12).contains(&mo) && (1..=31).contains(&d), "{s}");
    assert!(h < 24 && mi < 60 && se < 60, "{s}");
    let days = days_from_civil(n(0, 4), mo, d);
    ((days * 86400 + h * 3600 + mi * 60 + se) * 1000) + n(20, 23)
}

pub(crate) fn now_millis() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// D4: a timestamp of something made just now, in UTC (not local time).
pub(crate) fn assert_recent(v: &Value) {
    let t = assert_timestamp(v);
    let now = now_millis();
    assert!(
        (t - now).abs() < 120_000,
        "timestamp {v} is not close to now ({now} ms): not UTC?"
    );
}

/// D5/D7: `req_` + 32 lower-case hex digits.
pub(crate) fn assert_request_id(v: &Value) {
    let s = v
        .as_str()
        .unwrap_or_else(|| panic!("meta.request_id must be a string: {v}"));
    let hex = s
        .strip_prefix("req_")
        .unwrap_or_else(|| panic!("request id without req_: {s}"));
    assert_eq!(hex.len(), 32, "request id: {s}");
    assert!(
        hex.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)),
        "request id: {s}"
    );
}

/// D5 single envelope: exactly `data` and `meta {request_id, version}`.
pub(crate) fn assert_single_envelope(body: &Value) {
    let obj = body.as_object().expect("object body");
    let mut keys: Vec<&str> = obj.keys().map(String::as_str).collect();
    keys.sort();
    assert_eq!(keys, ["data", "meta"], "{body}");
    assert!(body["data"].is_object(), "{body}");
    assert_request_id(&body["meta"]["request_id"]);
    assert_eq!(body["meta"]["version"], "1.2.0", "{body}");
}

/// D5 list envelope: `data` array and `meta {total, limit, offset, request_id, version}`.
pub(crate) fn assert_list_envelope(body: &Value, total: u64, limit: u64, offset: u64) {
    let obj = body.as_object().expect("object body");
    let mut keys: Vec<&str> = obj.keys().map(String::as_str).collect();
    keys.sort();
    assert_eq!(keys, ["data", "meta"], "{body}");
    assert!(body["data"].is_array(), "{body}");
    let meta = &body["meta"];
    assert_eq!(meta["total"], total, "meta.total: {meta}");
    assert_eq!(meta["limit"], limit, "meta.limit: {meta}");
    assert_eq!(meta["offset"], offset, "meta.offset: {meta}");
    assert_request_id(&meta["request_id"]);
    assert_eq!(meta["version"], "1.2.0", "{meta}");
}

/// interface.md §2.1: every user endpoint returns exactly the User schema.
fn assert_user_schema(u: &Value) {
    let mut keys: Vec<&str> = u
        .as_object()
        .expect("a user object")
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort();
    assert_eq!(
        keys,
        [
            "created_at",
            "email",
            "id",
            "name",
            "role",
            "status",
            "updated_at"
        ],
        "the User schema, nothing more: {u}"
    );
    assert!(u["id"].as_str().unwrap().starts_with("usr_"), "{u}");
    assert_timestamp(&u["created_at"]);
    assert_timestamp(&u["updated_at"]);
}

/// The `id`s of a list body, in order.
pub(crate) fn ids(body: &Value) -> Vec<String> {
    body["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u["id"].as_str().unwrap().to_owned())
        .collect()
}

/// The single `details` item of a validation error, whose field must be `field`.
pub(crate) async fn expect_one_issue(res: Response, field: &str) -> String {
    let body = expect_error(res, StatusCode::BAD_REQUEST, "VALIDATION_ERROR").await;
    let d = details(&body);
    assert_eq!(d.len(), 1, "exactly one details item expected: {body}");
    assert_eq!(d[0].0, field, "{body}");
    assert!(!d[0].1.is_empty(), "issue text: {body}");
    d[0].1.clone()
}

/// A validation error whose `details` name exactly `fields` (in any order).
pub(crate) async fn expect_issues(res: Response, fields: &[&str]) -> Value {
    let body = expect_error(res, StatusCode::BAD_REQUEST, "VALIDATION_ERROR").await;
    let mut got: Vec<String> = details(&body).into_iter().map(|(f, _)| f).collect();
    got.sort();
    let mut want: Vec<String> = fields.iter().map(|f| f.to_string()).collect();
    want.sort();
    assert_eq!(got, want, "{body}");
    body
}

/// An organization whose rate limits never get in the way of a test that
/// sends many requests, with a client holding `scopes`; returns (org, token).
pub(crate) async fn roomy_org(s: &TestServer, scopes: &str) -> (OrgId, String) {
    let org = Organization {
        id: OrgId::generate(),
        name: "Roomy".into(),
        plan: Plan::Enterprise,
        per_minute: Some(1_000_000),
        per_second: Some(100_000),
        created_at: Timestamp::now(),
    };
    s.store().create_org(&org).await.unwrap();
    let (id, secret) = s.new_client(&org.id, scopes).await;
    let token = s.token_for(&id, &secret, scopes).await;
    (org.id, token)
}

/// Another organization with its own client and token (D2).
pub(crate) async fn other_org(s: &TestServer, scopes: &str) -> (OrgId, String) {
    let org = s.new_org(Plan::Pro).await;
    let (id, secret) = s.new_client(&org, scopes).await;
    let token = s.token_for(&id, &secret, scopes).await;
    (org, token)
}

/// A user stored directly, with the given status and creation time.
async fn store_user(
    s: &TestServer,
    org: &OrgId,
    email: &str,
    name: &str,
    role: Role,
    status: UserStatus,
    created_at: Timestamp,
) -> User {
    let u = NewUser {
        id: UserId::generate(),
        email: Email::parse(email).unwrap(),
        name: Name::parse(name).unwrap(),
        role,
        status,
        password_hash: Some("$argon2id$placeholder".into()),
        created_at,
    };
    s.store()
        .insert_user(org, &u, crate::common::operator())
        .await
        .unwrap()
}

/// POST /v1/users; returns the `data` of the 201.
async fn create(s: &TestServer, t: &str, email: &str, name: &str, role: &str) -> Value {
    let res = s
        .call(
            Method::POST,
            "/v1/users",
            t,
            Some(json!({"email": email, "name": name, "role": role})),
        )
        .await;
    body_of(res, StatusCode::CREATED).await["data"].clone()
}

async fn get_user(s: &TestServer, t: &str, id: &str) -> Value {
    let res = s
        .call(Method::GET, &format!("/v1/users/{id}"), t, None)
        .await;
    body_of(res, StatusCode::OK).await["data"].clone()
}

async fn patch(s: &TestServer, t: &str, id: &str, body: Value) -> Response {
    s.call(Method::PATCH, &format!("/v1/users/{id}"), t, Some(body))
        .await
}

async fn list(s: &TestServer, t: &str, query: &str) -> Value {
    let res = s
        .call(Method::GET, &format!("/v1/users{query}"), t, None)
        .await;
    body_of(res, StatusCode::OK).await
}

/// GET /v1/users?q=… (`q` already URL-encoded).
async fn search(s: &TestServer, t: &str, q: &str) -> Value {
    list(s, t, &format!("?q={q}")).await
}

/// A client application owned by `owner` (D13).
async fn owned_client(s: &TestServer, org: &OrgId, owner: &UserId) -> ClientId {
    let c = NewClient {
        id: ClientId::generate(),
        name: "owned app".into(),
        secret_hash: Some(secrets::hash_secret(&secrets::new_client_secret())),
        scopes: ScopeSet::parse("users:read").unwrap(),
        redirect_uris: vec![],
        admin_approved: false,
        owner: Some(owner.clone()),
        created_at: Timestamp::now(),
        post_logout_redirect_uris: vec![],
    };
    s.store()
        .insert_client(org, &c, crate::common::operator())
        .await
        .unwrap();
    c.id
}

const RW: &str = "users:read users:write";

// ---------------------------------------------------------------------------
// Create and read
// ---------------------------------------------------------------------------

#[tokio::test]
async fn create_then_get_user() {
    let s = TestServer::start().await;
    let t = s.token("users:read users:write").await;
    let res = s
        .call(
            Method::POST,
            "/v1/users",
            &t,
            Some(json!({"email": "ada@example.com", "name": "Ada", "role": "editor"})),
        )
        .await;
    assert_eq!(res.status(), StatusCode::CREATED);
    let location = res.headers()["location"].to_str().unwrap().to_owned();
    let body: Value = res.json().await.unwrap();
    let id = body["data"]["id"].as_str().unwrap();
    assert_eq!(
        location,
        format!("{}/v1/users/{id}", crate::common::PUBLIC_URL)
    );
    assert_eq!(body["data"]["status"], "pending_invite");
    let res = s
        .call(Method::GET, &format!("/v1/users/{id}"), &t, None)
        .await;
    assert_eq!(res.status(), StatusCode::OK);
    let got: Value = res.json().await.unwrap();
    assert_eq!(got["data"], body["data"]);
    let res = s.call(Method::GET, "/v1/users/usr_nope", &t, None).await;
    expect_error(res, StatusCode::NOT_FOUND, "RESOURCE_NOT_FOUND").await;
}

// D5, D12, interface.md §2.1: the 201 carries the single envelope of the user.
#[tokio::test]
async fn d5_d12_create_returns_single_envelope_with_user_schema() {
    let s = TestServer::start().await;
    let t = s.token(RW).await;
    let res = s
        .call(
            Method::POST,
            "/v1/users",
            &t,
            Some(json!({"email": "grace@example.com", "name": "Grace Hopper", "role": "admin"})),
        )
        .await;
    assert_eq!(res.status(), StatusCode::CREATED);
    let ct = res.headers()["content-type"].to_str().unwrap().to_owned();
    assert!(ct.starts_with("application/json"), "{ct}");
    let location = res.headers()["location"].to_str().unwrap().to_owned();
    let body: Value = res.json().await.unwrap();
    assert_single_envelope(&body);
    let u = &body["data"];
    assert_user_schema(u);
    let id = u["id"].as_str().unwrap();
    assert!(id.starts_with("usr_") && id.len() > 4 + 13, "D3 id: {id}");
    assert_eq!(location, format!("{PUBLIC_URL}/v1/users/{id}"));
    assert_eq!(u["email"], "grace@example.com");
    assert_eq!(u["name"], "Grace Hopper");
    assert_eq!(u["role"], "admin");
    // D11: a user created through the API waits for the invitation.
    assert_eq!(u["status"], "pending_invite");
    // D4
    assert_recent(&u["created_at"]);
    assert_recent(&u["updated_at"]);
}

// D5: GET of one user has the single envelope; D4 timestamps.
#[tokio::test]
async fn d5_d4_get_user_single_envelope_and_timestamps() {
    let s = TestServer::start().await;
    let t = s.token(RW).await;
    let created = create(&s, &t, "ada@example.com", "Ada", "viewer").await;
    let res = s
        .call(
            Method::GET,
            &format!("/v1/users/{}", created["id"].as_str().unwrap()),
            &t,
            None,
        )
        .await;
    let body = body_of(res, StatusCode::OK).await;
    assert_single_envelope(&body);
    assert_user_schema(&body["data"]);
    assert_eq!(body["data"], created);
    let c = assert_timestamp(&body["data"]["created_at"]);
    let u = assert_timestamp(&body["data"]["updated_at"]);
    assert!(u >= c, "updated_at before created_at: {body}");
}

// D5: the list envelope, with request_id and version added to the spec's meta.
#[tokio::test]
async fn d5_list_envelope() {
    let s = TestServer::start().await;
    let t = s.token(RW).await;
    let body = list(&s, &t, "").await;
    assert_list_envelope(&body, 0, 20, 0);
    assert_eq!(body["data"], json!([]));
    create(&s, &t, "a@example.com", "A", "viewer").await;
    create(&s, &t, "b@example.com", "B", "editor").await;
    let body = list(&s, &t, "?limit=1&offset=1").await;
    assert_list_envelope(&body, 2, 1, 1);
    assert_eq!(body["data"].as_array().unwrap().len(), 1);
    for u in body["data"].as_array().unwrap() {
        assert_user_schema(u);
    }
}

// D8: e-mail stored trimmed.
#[tokio::test]
async fn d8_email_is_stored_trimmed() {
    let s = TestServer::start().await;
    let t = s.token(RW).await;
    let u = create(&s, &t, "  lin@example.com  ", "Lin", "viewer").await;
    assert_eq!(u["email"], "lin@example.com");
}

// ---------------------------------------------------------------------------
// D7 request ids
// ---------------------------------------------------------------------------

#[tokio::test]
async fn d7_client_uuid_is_echoed_and_request_id_derived_from_it() {
    let s = TestServer::start().await;
    let t = s.token(RW).await;
    let uuid = "3f2b8c1e-9d4a-4b7e-8f21-0c5d6e7a8b9c";
    let want = "req_3f2b8c1e9d4a4b7e8f210c5d6e7a8b9c";

    // single
    let res = s
        .request(Method::POST, "/v1/users")
        .bearer_auth(&t)
        .header("x-request-id", uuid)
        .json(&json!({"email": "a@example.com", "name": "A", "role": "viewer"}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.headers()["x-request-id"], uuid);
    let body = body_of(res, StatusCode::CREATED).await;
    assert_eq!(body["meta"]["request_id"], want);

    // list
    let res = s
        .request(Method::GET, "/v1/users")
        .bearer_auth(&t)
        .header("x-request-id", uuid)
        .send()
        .await
        .unwrap();
    assert_eq!(res.headers()["x-request-id"], uuid);
    let body = body_of(res, StatusCode::OK).await;
    assert_eq!(body["meta"]["request_id"], want);

    // errors too
    let res = s
        .request(Method::GET, "/v1/users/usr_doesnotexist")
        .bearer_auth(&t)
        .header("x-request-id", uuid)
        .send()
        .await
        .unwrap();
    assert_eq!(res.headers()["x-request-id"], uuid);
    expect_error(res, StatusCode::NOT_FOUND, "RESOURCE_NOT_FOUND").await;
    let res = s
        .request(Method::GET, "/v1/users")
        .header("x-request-id", uuid)
        .send()
        .await
        .unwrap();
    assert_eq!(res.headers()["x-request-id"], uuid);
    expect_error(res, StatusCode::UNAUTHORIZED, "INVALID_TOKEN").await;
}

#[tokio::test]
async fn d7_request_id_generated_when_absent_or_not_a_uuid() {
    let s = TestServer::start().await;
    let t = s.token(RW).await;

    let res = s.call(Method::GET, "/v1/users", &t, None).await;
    let h1 = res
        .headers()
        .get("x-request-id")
        .expect("X-Request-ID without one sent")
        .to_str()
        .unwrap()
        .to_owned();
    assert!(!h1.is_empty());
    let b1 = body_of(res, StatusCode::OK).await;
    assert_request_id(&b1["meta"]["request_id"]);

    let res = s.call(Method::GET, "/v1/users", &t, None).await;
    let h2 = res.headers()["x-request-id"].to_str().unwrap().to_owned();
    let b2 = body_of(res, StatusCode::OK).await;
    assert_request_id(&b2["meta"]["request_id"]);
    assert_ne!(h1, h2, "each request gets its own id");
    assert_ne!(
        b1["meta"]["request_id"], b2["meta"]["request_id"],
        "each request gets its own id"
    );

    for bad in ["not-a-uuid", "3f2b8c1e-9d4a-4b7e-8f21", "<script>"] {
        let res = s
            .request(Method::GET, "/v1/users")
            .bearer_auth(&t)
            .header("x-request-id", bad)
            .send()
            .await
            .unwrap();
        let h = res
            .headers()
            .get("x-request-id")
            .expect("X-Request-ID")
            .to_str()
            .unwrap()
            .to_owned();
        assert_ne!(h, bad, "a value that is not a UUID is not echoed");
        let b = body_of(res, StatusCode::OK).await;
        assert_request_id(&b["meta"]["request_id"]);
    }
}

// ---------------------------------------------------------------------------
// D14 listing: order, paging, filters, q
// ---------------------------------------------------------------------------

#[tokio::test]
async fn d14_list_is_newest_first() {
    let s = TestServer::start().await;
    let t = s.token(RW).await;
    let mut made = Vec::new();
    for i in 0..4 {
        let u = create(
            &s,
            &t,
            &format!("u{i}@example.com"),
            &format!("User {i}"),
            "viewer",
        )
        .await;
        made.push(u["id"].as_str().unwrap().to_owned());
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    made.reverse();
    let body = list(&s, &t, "").await;
    assert_eq!(ids(&body), made);
    assert_eq!(body["meta"]["total"], 4);
}

// D14: ties of created_at are broken by id descending (byte order).
#[tokio::test]
async fn d14_ties_are_ordered_by_id_descending() {
    let s = TestServer::start().await;
    let t = s.token(RW).await;
    let org = s.org();
    let at = Timestamp::now();
    let mut made = Vec::new();
    for i in 0..8 {
        let u = store_user(
            &s,
            &org,
            &format!("tie{i}@example.com"),
            "Tie",
            Role::Viewer,
            UserStatus::Active,
            at,
        )
        .await;
        made.push(u.id.to_string());
    }
    let older = store_user(
        &s,
        &org,
        "old@example.com",
        "Old",
        Role::Viewer,
        UserStatus::Active,
        Timestamp::from_millis(at.millis() - 1000),
    )
    .await;
    made.sort_by(|a, b| b.as_bytes().cmp(a.as_bytes()));
    made.push(older.id.to_string());
    let body = list(&s, &t, "").await;
    assert_eq!(ids(&body), made);
}

// interface.md §4.2: default 20, clamp to 100 without an error; pages are consistent.
#[tokio::test]
async fn paging_default_20_and_limit_clamped_to_100() {
    let s = TestServer::start().await;
    let t = s.token(RW).await;
    let org = s.org();
    let base = Timestamp::now().millis() - 200_000;
    let mut made = Vec::new();
    for i in 0..105 {
        let u = store_user(
            &s,
            &org,
            &format!("p{i}@example.com"),
            &format!("P {i}"),
            Role::Viewer,
            UserStatus::Active,
            Timestamp::from_millis(base + i * 10),
        )
        .await;
        made.push(u.id.to_string());
    }
    made.reverse(); // newest first

    let body = list(&s, &t, "").await;
    assert_list_envelope(&body, 105, 20, 0);
    assert_eq!(ids(&body), made[..20]);

    let body = list(&s, &t, "?limit=500").await;
    assert_list_envelope(&body, 105, 100, 0);
    assert_eq!(ids(&body), made[..100]);

    let body = list(&s, &t, "?limit=101").await;
    assert_list_envelope(&body, 105, 100, 0);

    let body = list(&s, &t, "?limit=100&offset=100").await;
    assert_list_envelope(&body, 105, 100, 100);
    assert_eq!(ids(&body), made[100..]);

    let body = list(&s, &t, "?limit=10&offset=37").await;
    assert_list_envelope(&body, 105, 10, 37);
    assert_eq!(ids(&body), made[37..47]);

    let body = list(&s, &t, "?limit=1").await;
    assert_list_envelope(&body, 105, 1, 0);
    assert_eq!(ids(&body), made[..1]);
}

// D14: an offset beyond total gives an empty page with the true total.
#[tokio::test]
async fn d14_offset_beyond_total_is_an_empty_page_with_true_total() {
    let s = TestServer::start().await;
    let t = s.token(RW).await;
    for i in 0..3 {
        create(&s, &t, &format!("o{i}@example.com"), "O", "viewer").await;
    }
    let body = list(&s, &t, "?offset=10").await;
    assert_list_envelope(&body, 3, 20, 10);
    assert_eq!(body["data"], json!([]));
    let body = list(&s, &t, "?offset=3").await;
    assert_list_envelope(&body, 3, 20, 3);
    assert_eq!(body["data"], json!([]));
    let body = list(&s, &t, "?offset=2").await;
    assert_eq!(body["data"].as_array().unwrap().len(), 1);
    let body = list(&s, &t, "?offset=5&role=viewer").await;
    assert_list_envelope(&body, 3, 20, 5);
}

// D6: each bad query parameter is a 400 VALIDATION_ERROR with one details item.
#[tokio::test]
async fn d6_bad_list_parameters_are_400_with_one_detail_each() {
    let s = TestServer::start().await;
    let t = s.token(RW).await;
    for (query, field) in [
        ("limit=abc", "limit"),
        ("limit=0", "limit"),
        ("limit=-5", "limit"),
        ("limit=1.5", "limit"),
        ("offset=-1", "offset"),
        ("offset=abc", "offset"),
        ("role=owner", "role"),
        ("role=member", "role"),
        ("role=Admin", "role"),
        ("status=bogus", "status"),
        ("status=deleted", "status"),
    ] {
        let res = s
            .call(Method::GET, &format!("/v1/users?{query}"), &t, None)
            .await;
        let body = expect_error(res, StatusCode::BAD_REQUEST, "VALIDATION_ERROR").await;
        let d = details(&body);
        assert_eq!(d.len(), 1, "{query}: {body}");
        assert_eq!(d[0].0, field, "{query}: {body}");
    }
}

// D10: `member` is not a role; the details item lists the allowed values.
#[tokio::test]
async fn d10_role_member_rejected_listing_allowed_values() {
    let s = TestServer::start().await;
    let t = s.token(RW).await;
    let res = s.call(Method::GET, "/v1/users?role=member", &t, None).await;
    let issue = expect_one_issue(res, "role").await;
    for r in ["admin", "editor", "viewer"] {
        assert!(issue.contains(r), "issue should list {r}: {issue}");
    }
    let res = s
        .call(
            Method::POST,
            "/v1/users",
            &t,
            Some(json!({"email": "m@example.com", "name": "M", "role": "member"})),
        )
        .await;
    let issue = expect_one_issue(res, "role").await;
    for r in ["admin", "editor", "viewer"] {
        assert!(issue.contains(r), "issue should list {r}: {issue}");
    }
    assert_eq!(list(&s, &t, "").await["meta"]["total"], 0);
}

// D6: all problems of a request are reported at once.
#[tokio::test]
async fn d6_several_bad_parameters_reported_at_once() {
    let s = TestServer::start().await;
    let t = s.token(RW).await;
    let q = "x".repeat(201);
    let res = s
        .call(
            Method::GET,
            &format!("/v1/users?limit=abc&offset=-1&role=owner&status=bogus&q={q}"),
            &t,
            None,
        )
        .await;
    expect_issues(res, &["limit", "offset", "role", "status", "q"]).await;
    let res = s
        .call(Method::GET, "/v1/users?limit=0&role=member", &t, None)
        .await;
    expect_issues(res, &["limit", "role"]).await;
}

#[tokio::test]
async fn filters_role_and_status() {
    let s = TestServer::start().await;
    let t = s.token(RW).await;
    let org = s.org();
    let now = Timestamp::now();
    let admin = store_user(
        &s,
        &org,
        "admin@example.com",
        "Admin",
        Role::Admin,
        UserStatus::Active,
        now,
    )
    .await;
    let editor = store_user(
        &s,
        &org,
        "ed@example.com",
        "Ed",
        Role::Editor,
        UserStatus::Active,
        now,
    )
    .await;
    let viewer = store_user(
        &s,
        &org,
        "vi@example.com",
        "Vi",
        Role::Viewer,
        UserStatus::Inactive,
        now,
    )
    .await;
    let pending = create(&s, &t, "pe@example.com", "Pe", "editor").await;
    let pending = pending["id"].as_str().unwrap().to_owned();

    let sorted = |mut v: Vec<String>| {
        v.sort();
        v
    };
    let body = list(&s, &t, "?role=editor").await;
    assert_list_envelope(&body, 2, 20, 0);
    assert_eq!(
        sorted(ids(&body)),
        sorted(vec![editor.id.to_string(), pending.clone()])
    );
    let body = list(&s, &t, "?role=admin").await;
    assert_eq!(ids(&body), [admin.id.to_string()]);
    assert_eq!(body["meta"]["total"], 1);
    let body = list(&s, &t, "?role=viewer").await;
    assert_eq!(ids(&body), [viewer.id.to_string()]);
    let body = list(&s, &t, "?status=active").await;
    assert_eq!(
        sorted(ids(&body)),
        sorted(vec![admin.id.to_string(), editor.id.to_string()])
    );
    assert_eq!(body["meta"]["total"], 2);
    let body = list(&s, &t, "?status=inactive").await;
    assert_eq!(ids(&body), [viewer.id.to_string()]);
    let body = list(&s, &t, "?status=pending_invite").await;
    assert_eq!(ids(&body), std::slice::from_ref(&pending));
    let body = list(&s, &t, "?role=editor&status=pending_invite").await;
    assert_eq!(ids(&body), std::slice::from_ref(&pending));
    assert_eq!(body["meta"]["total"], 1);
    let body = list(&s, &t, "?role=admin&status=inactive").await;
    assert_list_envelope(&body, 0, 20, 0);
    for u in list(&s, &t, "?status=active").await["data"]
        .as_array()
        .unwrap()
    {
        assert_eq!(u["status"], "active");
    }
}

// D14: q is a case-insensitive substring match on name or email.
#[tokio::test]
async fn d14_q_is_case_insensitive_substring_of_name_or_email() {
    let s = TestServer::start().await;
    let t = s.token(RW).await;
    let ada = create(&s, &t, "ada@analytical.org", "Ada Lovelace", "admin").await["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let grace = create(&s, &t, "grace@navy.mil", "Grace Hopper", "editor").await["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let alan = create(&s, &t, "alan@bletchley.uk", "Alan Turing", "viewer").await["id"]
        .as_str()
        .unwrap()
        .to_owned();

    let body = search(&s, &t, "LOVE").await;
    assert_eq!(ids(&body), std::slice::from_ref(&ada));
    assert_eq!(body["meta"]["total"], 1);
    assert_eq!(
        ids(&search(&s, &t, "lovelace").await),
        std::slice::from_ref(&ada)
    );
    assert_eq!(
        ids(&search(&s, &t, "NAVY").await),
        std::slice::from_ref(&grace)
    ); // email only
    assert_eq!(
        ids(&search(&s, &t, "hopp").await),
        std::slice::from_ref(&grace)
    ); // name only
    assert_eq!(
        ids(&search(&s, &t, "uring").await),
        std::slice::from_ref(&alan)
    ); // middle of a word
    assert_eq!(
        ids(&search(&s, &t, "Gr").await),
        std::slice::from_ref(&grace)
    ); // short query
    assert_eq!(
        ids(&search(&s, &t, "ce%20Ho").await),
        std::slice::from_ref(&grace)
    ); // spans a space
    assert_eq!(
        ids(&search(&s, &t, "ada%40ANALYTICAL.org").await),
        std::slice::from_ref(&ada)
    );
    let body = search(&s, &t, "a").await; // all three contain an `a`
    assert_eq!(
        ids(&body),
        [alan.clone(), grace.clone(), ada.clone()],
        "newest first"
    );
    assert_eq!(body["meta"]["total"], 3);
    let body = search(&s, &t, "zzz").await;
    assert_list_envelope(&body, 0, 20, 0);
    // combined with a filter and paging
    let body = list(&s, &t, "?q=A&role=editor").await;
    assert_eq!(ids(&body), std::slice::from_ref(&grace));
    let body = list(&s, &t, "?q=a&limit=1&offset=1").await;
    assert_list_envelope(&body, 3, 1, 1);
    assert_eq!(ids(&body), [grace]);
}

// D14: case-insensitivity is not limited to ASCII.
#[tokio::test]
async fn d14_q_is_case_insensitive_beyond_ascii() {
    let s = TestServer::start().await;
    let t = s.token(RW).await;
    let emile = create(&s, &t, "emile@example.com", "Émile Zola", "viewer").await["id"]
        .as_str()
        .unwrap()
        .to_owned();
    create(&s, &t, "other@example.com", "Other", "viewer").await;
    for q in ["émile", "ÉMILE", "%C3%A9m", "%C3%89M", "%C3%A9"] {
        let body = list(&s, &t, &format!("?q={q}")).await;
        assert_eq!(ids(&body), std::slice::from_ref(&emile), "q={q}");
    }
}

// D9: in q, `%` and `_` match themselves.
#[tokio::test]
async fn d9_q_percent_and_underscore_are_literal() {
    let s = TestServer::start().await;
    let t = s.token(RW).await;
    let pct = create(&s, &t, "cotton@example.com", "100% Cotton", "viewer").await["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let thousand = create(&s, &t, "thousand@example.com", "1000 Things", "viewer").await["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let under = create(&s, &t, "under_score@example.com", "Under", "viewer").await["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let decoy = create(&s, &t, "underxscore@example.com", "Decoy", "viewer").await["id"]
        .as_str()
        .unwrap()
        .to_owned();

    assert_eq!(
        ids(&search(&s, &t, "%25").await),
        std::slice::from_ref(&pct),
        "q=%"
    );
    assert_eq!(
        ids(&search(&s, &t, "0%25").await),
        std::slice::from_ref(&pct),
        "q=0%"
    );
    assert_eq!(
        ids(&search(&s, &t, "00%25%20C").await),
        std::slice::from_ref(&pct),
        "q=00% C"
    );
    assert_eq!(
        ids(&search(&s, &t, "_").await),
        std::slice::from_ref(&under),
        "q=_"
    );
    assert_eq!(
        ids(&search(&s, &t, "r_s").await),
        std::slice::from_ref(&under),
        "q=r_s"
    );
    assert_eq!(
        ids(&search(&s, &t, "under_").await),
        std::slice::from_ref(&under),
        "q=under_"
    );
    let body = search(&s, &t, "1000").await;
    assert_eq!(ids(&body), std::slice::from_ref(&thousand));
    let body = search(&s, &t, "underxs").await;
    assert_eq!(ids(&body), [decoy]);
}

// Search text with quote marks or search-engine syntax is just text.
#[tokio::test]
async fn q_with_special_characters_is_plain_text() {
    let s = TestServer::start().await;
    let t = s.token(RW).await;
    let quoted = create(&s, &t, "q@example.com", "Bob \"The Builder\"", "viewer").await["id"]
        .as_str()
        .unwrap()
        .to_owned();
    for q in [
        "%22unbalanced",
        "a%20AND%20b",
        "NEAR(x%20y)",
        "foo*",
        "-bar",
        "%5E",
        "(",
        ")",
        "%3A",
    ] {
        let res = s
            .call(Method::GET, &format!("/v1/users?q={q}"), &t, None)
            .await;
        let body = body_of(res, StatusCode::OK).await;
        assert_eq!(body["meta"]["total"], 0, "q={q}: {body}");
    }
    assert_eq!(
        ids(&list(&s, &t, "?q=%22The%20Builder%22").await),
        std::slice::from_ref(&quoted)
    );
    assert_eq!(
        ids(&list(&s, &t, "?q=%22").await),
        std::slice::from_ref(&quoted)
    );
    assert_eq!(ids(&list(&s, &t, "?q=b%20%22t").await), [quoted]);
}

// D6 (continued): a `q` containing a control character matches nothing, an
// empty page with `total: 0`, on every backend (SearchText::matches_nothing).
#[tokio::test]
async fn d6_q_with_a_control_character_is_an_empty_page() {
    let s = TestServer::start().await;
    let t = s.token(RW).await;
    create(&s, &t, "ada@example.com", "Ada Lovelace", "viewer").await;
    // \u{1}, \t, \u{7f}, NUL, alone and inside text that would match.
    for q in [
        "%01",
        "%09",
        "%7F",
        "%00",
        "Ada%01",
        "Ada%09Lovelace",
        "ada%7F",
        "Ada%00",
        "Ada%C2%9F",
    ] {
        let body = list(&s, &t, &format!("?q={q}")).await;
        assert_list_envelope(&body, 0, 20, 0);
        assert_eq!(body["data"], json!([]), "q={q}: {body}");
    }
    assert_eq!(search(&s, &t, "Ada").await["meta"]["total"], 1);
}

// D8: q at most 200 characters.
#[tokio::test]
async fn d8_q_over_200_characters_is_400() {
    let s = TestServer::start().await;
    let t = s.token(RW).await;
    let res = s
        .call(
            Method::GET,
            &format!("/v1/users?q={}", "a".repeat(201)),
            &t,
            None,
        )
        .await;
    expect_one_issue(res, "q").await;
    // characters, not bytes: 200 two-byte characters are fine
    let body = list(&s, &t, &format!("?q={}", "%C3%A9".repeat(200))).await;
    assert_list_envelope(&body, 0, 20, 0);
    let body = list(&s, &t, &format!("?q={}", "a".repeat(200))).await;
    assert_list_envelope(&body, 0, 20, 0);
}

// ---------------------------------------------------------------------------
// POST validation (D6, D8, D12)
// ---------------------------------------------------------------------------

#[tokio::test]
async fn d6_post_missing_fields_all_reported() {
    let s = TestServer::start().await;
    let t = s.token(RW).await;
    let res = s.call(Method::POST, "/v1/users", &t, Some(json!({}))).await;
    expect_issues(res, &["email", "name", "role"]).await;
    let res = s
        .call(
            Method::POST,
            "/v1/users",
            &t,
            Some(json!({"email": "a@example.com"})),
        )
        .await;
    expect_issues(res, &["name", "role"]).await;
    let res = s
        .call(
            Method::POST,
            "/v1/users",
            &t,
            Some(json!({"name": "A", "role": "viewer"})),
        )
        .await;
    expect_issues(res, &["email"]).await;
    assert_eq!(list(&s, &t, "").await["meta"]["total"], 0);
}

#[tokio::test]
async fn d6_post_wrong_types() {
    let s = TestServer::start().await;
    let t = s.token(RW).await;
    let res = s
        .call(
            Method::POST,
            "/v1/users",
            &t,
            Some(json!({"email": 5, "name": true, "role": ["admin"]})),
        )
        .await;
    expect_issues(res, &["email", "name", "role"]).await;
    let res = s
        .call(
            Method::POST,
            "/v1/users",
            &t,
            Some(json!({"email": null, "name": {"first": "A"}, "role": "viewer"})),
        )
        .await;
    expect_issues(res, &["email", "name"]).await;
    assert_eq!(list(&s, &t, "").await["meta"]["total"], 0);
}

// D12: unknown body fields are rejected.
#[tokio::test]
async fn d12_post_unknown_field_rejected() {
    let s = TestServer::start().await;
    let t = s.token(RW).await;
    let res = s
        .call(
            Method::POST,
            "/v1/users",
            &t,
            Some(json!({"email": "a@example.com", "name": "A", "role": "viewer", "password": "hunter2hunter2"})),
        )
        .await;
    expect_one_issue(res, "password").await;
    let res = s
        .call(
            Method::POST,
            "/v1/users",
            &t,
            Some(json!({"email": "a@example.com", "name": "A", "role": "viewer", "status": "active", "id": "usr_mine"})),
        )
        .await;
    expect_issues(res, &["status", "id"]).await;
    assert_eq!(list(&s, &t, "").await["meta"]["total"], 0);
}

// D8: email format.
#[tokio::test]
async fn d8_post_bad_email() {
    let s = TestServer::start().await;
    let t = s.token(RW).await;
    let domain = format!("{}c", format!("{}.", "x".repeat(60)).repeat(4)); // 245 characters
    let long = format!("abcdefghi@{domain}"); // 255 characters
    assert_eq!(long.len(), 255);
    for bad in [
        "",
        "plain",
        "a@b",
        "a@@b.co",
        "@b.co",
        "a@",
        "a b@c.co",
        "a@b.c@d.co",
        "a@.co",
        "a@co.",
        &long,
    ] {
        let res = s
            .call(
                Method::POST,
                "/v1/users",
                &t,
                Some(json!({"email": bad, "name": "A", "role": "viewer"})),
            )
            .await;
        expect_one_issue(res, "email").await;
    }
    let ok = format!("abcdefgh@{domain}"); // 254 characters
    assert_eq!(ok.len(), 254);
    create(&s, &t, &ok, "A", "viewer").await;
    assert_eq!(list(&s, &t, "").await["meta"]["total"], 1);
}

// D8: name 1–200 characters after trimming, no control characters.
#[tokio::test]
async fn d8_post_name_length_blank_and_control_characters() {
    let s = TestServer::start().await;
    let t = s.token(RW).await;
    let long = "n".repeat(201);
    for bad in ["", "   ", "\t", long.as_str(), "a\u{7}b", "line\nbreak"] {
        let res = s
            .call(
                Method::POST,
                "/v1/users",
                &t,
                Some(json!({"email": "a@example.com", "name": bad, "role": "viewer"})),
            )
            .await;
        expect_one_issue(res, "name").await;
    }
    // 200 characters (multi-byte, to count characters and not bytes) is fine
    let u = create(&s, &t, "b@example.com", &"é".repeat(200), "viewer").await;
    assert_eq!(u["name"].as_str().unwrap().chars().count(), 200);
    // 200 characters once trimmed
    create(
        &s,
        &t,
        "c@example.com",
        &format!("  {}  ", "n".repeat(200)),
        "viewer",
    )
    .await;
}

// D6: all problems of a body at once.
#[tokio::test]
async fn d6_post_all_problems_reported_at_once() {
    let s = TestServer::start().await;
    let t = s.token(RW).await;
    let res = s
        .call(
            Method::POST,
            "/v1/users",
            &t,
            Some(json!({"email": "bad", "name": "", "role": "owner", "extra": 1})),
        )
        .await;
    let body = expect_issues(res, &["email", "name", "role", "extra"]).await;
    for (_, issue) in details(&body) {
        assert!(!issue.is_empty());
    }
}

// D6: malformed JSON is a 400 with field `body`.
#[tokio::test]
async fn d6_malformed_json_is_400_body() {
    let s = TestServer::start().await;
    let t = s.token(RW).await;
    for raw in [
        "{\"email\":",
        "not json",
        "{'email': 'a@example.com'}",
        "",
        "{\"a\":1,}",
    ] {
        let res = s
            .request(Method::POST, "/v1/users")
            .bearer_auth(&t)
            .header("content-type", "application/json")
            .body(raw)
            .send()
            .await
            .unwrap();
        expect_one_issue(res, "body").await;
    }
    // Bytes that are not UTF-8 are not JSON.
    let res = s
        .request(Method::POST, "/v1/users")
        .bearer_auth(&t)
        .header("content-type", "application/json")
        .body(
            b"{\"email\": \"a@example.com\", \"name\": \"\xff\xfe\", \"role\": \"viewer\"}"
                .to_vec(),
        )
        .send()
        .await
        .unwrap();
    expect_one_issue(res, "body").await;
    // Valid JSON that is not an object is a 400 too.
    for raw in ["[1,2]", "\"a@example.com\"", "null", "42"] {
        let res = s
            .request(Method::POST, "/v1/users")
            .bearer_auth(&t)
            .header("content-type", "application/json")
            .body(raw)
            .send()
            .await
            .unwrap();
        expect_error(res, StatusCode::BAD_REQUEST, "VALIDATION_ERROR").await;
    }
    // PATCH as well
    let u = create(&s, &t, "a@example.com", "A", "viewer").await;
    let res = s
        .request(
            Method::PATCH,
            &format!("/v1/users/{}", u["id"].as_str().unwrap()),
        )
        .bearer_auth(&t)
        .header("content-type", "application/json")
        .body("{\"name\": \"B\"")
        .send()
        .await
        .unwrap();
    expect_one_issue(res, "body").await;
    assert_eq!(
        get_user(&s, &t, u["id"].as_str().unwrap()).await["name"],
        "A"
    );
}

// D6, D9: POST/PATCH without Content-Type: application/json is 415.
#[tokio::test]
async fn d6_wrong_or_missing_content_type_is_415() {
    let s = TestServer::start().await;
    let t = s.token(RW).await;
    let body = r#"{"email": "a@example.com", "name": "A", "role": "viewer"}"#;
    for ct in [
        Some("text/plain"),
        Some("application/x-www-form-urlencoded"),
        Some("application/xml"),
        Some("text/json"),
        None,
    ] {
        let mut rb = s
            .request(Method::POST, "/v1/users")
            .bearer_auth(&t)
            .body(body);
        if let Some(ct) = ct {
            rb = rb.header("content-type", ct);
        }
        let res = rb.send().await.unwrap();
        expect_error(
            res,
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "UNSUPPORTED_MEDIA_TYPE",
        )
        .await;
    }
    assert_eq!(
        list(&s, &t, "").await["meta"]["total"],
        0,
        "nothing created"
    );

    let u = create(&s, &t, "a@example.com", "A", "viewer").await;
    let path = format!("/v1/users/{}", u["id"].as_str().unwrap());
    for ct in [Some("text/plain"), None] {
        let mut rb = s
            .request(Method::PATCH, &path)
            .bearer_auth(&t)
            .body(r#"{"name": "B"}"#);
        if let Some(ct) = ct {
            rb = rb.header("content-type", ct);
        }
        let res = rb.send().await.unwrap();
        expect_error(
            res,
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "UNSUPPORTED_MEDIA_TYPE",
        )
        .await;
    }
    assert_eq!(
        get_user(&s, &t, u["id"].as_str().unwrap()).await["name"],
        "A"
    );
}

// D9: `application/json; charset=utf-8` is JSON.
#[tokio::test]
async fn d9_json_with_charset_is_accepted() {
    let s = TestServer::start().await;
    let t = s.token(RW).await;
    let res = s
        .request(Method::POST, "/v1/users")
        .bearer_auth(&t)
        .header("content-type", "application/json; charset=utf-8")
        .body(r#"{"email": "a@example.com", "name": "Zoë", "role": "viewer"}"#)
        .send()
        .await
        .unwrap();
    let body = body_of(res, StatusCode::CREATED).await;
    assert_eq!(body["data"]["name"], "Zoë");
    let id = body["data"]["id"].as_str().unwrap();
    let res = s
        .request(Method::PATCH, &format!("/v1/users/{id}"))
        .bearer_auth(&t)
        .header("content-type", "application/json; charset=utf-8")
        .body(r#"{"name": "Zoé"}"#)
        .send()
        .await
        .unwrap();
    let body = body_of(res, StatusCode::OK).await;
    assert_eq!(body["data"]["name"], "Zoé");
}

// D6, D8: a body over 64 KiB is 413.
#[tokio::test]
async fn d8_body_over_64_kib_is_413() {
    let s = TestServer::start().await;
    let t = s.token(RW).await;
    let big = json!({"email": "a@example.com", "name": "x".repeat(70 * 1024), "role": "viewer"});
    let res = s
        .call(Method::POST, "/v1/users", &t, Some(big.clone()))
        .await;
    expect_error(res, StatusCode::PAYLOAD_TOO_LARGE, "PAYLOAD_TOO_LARGE").await;
    assert_eq!(list(&s, &t, "").await["meta"]["total"], 0);

    // Under the limit, the same mistake is only a validation error.
    let under = json!({"email": "a@example.com", "name": "x".repeat(60 * 1024), "role": "viewer"});
    let res = s.call(Method::POST, "/v1/users", &t, Some(under)).await;
    expect_one_issue(res, "name").await;

    let u = create(&s, &t, "a@example.com", "A", "viewer").await;
    let res = s
        .call(
            Method::PATCH,
            &format!("/v1/users/{}", u["id"].as_str().unwrap()),
            &t,
            Some(json!({"name": "y".repeat(70 * 1024)})),
        )
        .await;
    expect_error(res, StatusCode::PAYLOAD_TOO_LARGE, "PAYLOAD_TOO_LARGE").await;
}

// D8: the limit is 64 KiB exactly: 65536 bytes are accepted, 65537 are not.
#[tokio::test]
async fn d8_body_limit_is_exactly_64_kib() {
    let s = TestServer::start().await;
    let t = s.token(RW).await;
    let padded = |email: &str, len: usize| {
        let mut b = format!(r#"{{"email": "{email}", "name": "Edge", "role": "viewer"}}"#);
        b.push_str(&" ".repeat(len - b.len())); // trailing whitespace is valid JSON
        assert_eq!(b.len(), len);
        b
    };
    let send = |body: String| {
        s.request(Method::POST, "/v1/users")
            .bearer_auth(&t)
            .header("content-type", "application/json")
            .body(body)
            .send()
    };
    let res = send(padded("edge@example.com", 65536)).await.unwrap();
    let body = body_of(res, StatusCode::CREATED).await;
    assert_eq!(body["data"]["email"], "edge@example.com");
    let res = send(padded("over@example.com", 65537)).await.unwrap();
    expect_error(res, StatusCode::PAYLOAD_TOO_LARGE, "PAYLOAD_TOO_LARGE").await;
    assert_eq!(list(&s, &t, "").await["meta"]["total"], 1);
}

// D22: the `admin` scope satisfies every scope check.
#[tokio::test]
async fn d22_admin_scope_satisfies_user_scopes() {
    let s = TestServer::start().await;
    let admin = s.token("admin").await;
    let u = create(&s, &admin, "a@example.com", "A", "viewer").await;
    let id = u["id"].as_str().unwrap();
    assert_eq!(get_user(&s, &admin, id).await, u);
    assert_eq!(list(&s, &admin, "").await["meta"]["total"], 1);
    let res = patch(&s, &admin, id, json!({"name": "B"})).await;
    assert_eq!(body_of(res, StatusCode::OK).await["data"]["name"], "B");
    let res = s
        .call(Method::DELETE, &format!("/v1/users/{id}"), &admin, None)
        .await;
    assert_eq!(res.status(), StatusCode::NO_CONTENT);
}

// D2: e-mail unique per organization, compared case-insensitively.
#[tokio::test]
async fn d2_duplicate_email_is_409_case_insensitively() {
    let s = TestServer::start().await;
    let t = s.token(RW).await;
    create(&s, &t, "ada@example.com", "Ada", "viewer").await;
    for dup in ["ada@example.com", "ADA@Example.COM", "  Ada@example.com "] {
        let res = s
            .call(
                Method::POST,
                "/v1/users",
                &t,
                Some(json!({"email": dup, "name": "Other", "role": "editor"})),
            )
            .await;
        let body = expect_error(res, StatusCode::CONFLICT, "DUPLICATE_RESOURCE").await;
        assert_eq!(
            body["error"]["details"],
            json!([]),
            "only VALIDATION_ERROR has details"
        );
    }
    assert_eq!(list(&s, &t, "").await["meta"]["total"], 1);
    // A user stored with a password counts as well.
    s.new_user(&s.org(), "bob@example.com", Role::Viewer).await;
    let res = s
        .call(
            Method::POST,
            "/v1/users",
            &t,
            Some(json!({"email": "BOB@example.com", "name": "Bob", "role": "viewer"})),
        )
        .await;
    expect_error(res, StatusCode::CONFLICT, "DUPLICATE_RESOURCE").await;
}

// D2: the same e-mail in another organization is fine.
#[tokio::test]
async fn d2_same_email_allowed_in_another_org() {
    let s = TestServer::start().await;
    let t = s.token(RW).await;
    let (_, tb) = other_org(&s, RW).await;
    let a = create(&s, &t, "ada@example.com", "Ada", "viewer").await;
    let b = create(&s, &tb, "ADA@example.com", "Ada B", "admin").await;
    assert_ne!(a["id"], b["id"]);
    assert_eq!(list(&s, &t, "").await["meta"]["total"], 1);
    assert_eq!(list(&s, &tb, "").await["meta"]["total"], 1);
}

// D13: after a delete the e-mail can be used again (the user no longer exists).
#[tokio::test]
async fn email_reusable_after_delete() {
    let s = TestServer::start().await;
    let t = s.token(RW).await;
    let u = create(&s, &t, "ada@example.com", "Ada", "viewer").await;
    let res = s
        .call(
            Method::DELETE,
            &format!("/v1/users/{}", u["id"].as_str().unwrap()),
            &t,
            None,
        )
        .await;
    assert_eq!(res.status(), StatusCode::NO_CONTENT);
    let again = create(&s, &t, "ada@example.com", "Ada again", "viewer").await;
    assert_ne!(again["id"], u["id"], "D3: ids are never reused");
}

// ---------------------------------------------------------------------------
// D2 tenancy, D6 paths and methods
// ---------------------------------------------------------------------------

#[tokio::test]
async fn d2_user_of_another_org_is_404_for_get_patch_delete() {
    let s = TestServer::start().await;
    let ta = s.token(RW).await;
    let (_, tb) = other_org(&s, RW).await;
    let a = create(&s, &ta, "secret@example.com", "Secret Agent", "editor").await;
    let id = a["id"].as_str().unwrap();
    let path = format!("/v1/users/{id}");

    let res = s.call(Method::GET, &path, &tb, None).await;
    let body_get = expect_error(res, StatusCode::NOT_FOUND, "RESOURCE_NOT_FOUND").await;
    let res = s
        .call(Method::PATCH, &path, &tb, Some(json!({"name": "Hacked"})))
        .await;
    expect_error(res, StatusCode::NOT_FOUND, "RESOURCE_NOT_FOUND").await;
    let res = s
        .call(
            Method::PATCH,
            &path,
            &tb,
            Some(json!({"status": "inactive"})),
        )
        .await;
    expect_error(res, StatusCode::NOT_FOUND, "RESOURCE_NOT_FOUND").await;
    let res = s.call(Method::DELETE, &path, &tb, None).await;
    expect_error(res, StatusCode::NOT_FOUND, "RESOURCE_NOT_FOUND").await;

    // Exactly like an id that does not exist.
    let res = s
        .call(
            Method::GET,
            "/v1/users/usr_0000000000000000000000",
            &tb,
            None,
        )
        .await;
    let body_none = expect_error(res, StatusCode::NOT_FOUND, "RESOURCE_NOT_FOUND").await;
    assert_eq!(body_get["error"]["message"], body_none["error"]["message"]);

    // B's list does not show it, whatever the filter.
    let body = list(&s, &tb, "").await;
    assert_list_envelope(&body, 0, 20, 0);
    let body = list(&s, &tb, "?q=secret").await;
    assert_list_envelope(&body, 0, 20, 0);
    let body = list(&s, &tb, "?role=editor&status=pending_invite").await;
    assert_list_envelope(&body, 0, 20, 0);

    // Nothing happened to it.
    assert_eq!(get_user(&s, &ta, id).await, a);
    // And A does not see B's users.
    create(&s, &tb, "b@example.com", "B", "viewer").await;
    assert_eq!(list(&s, &ta, "").await["meta"]["total"], 1);
}

// D6: an id of the wrong shape or prefix is 404.
#[tokio::test]
async fn d6_wrong_shape_id_is_404() {
    let s = TestServer::start().await;
    let t = s.token(RW).await;
    for bad in [
        "prod_1",
        "usr_",
        "usr_a-b",
        "usr_%21%21",
        "1",
        "USR_abc",
        "app_abc",
    ] {
        let path = format!("/v1/users/{bad}");
        let res = s.call(Method::GET, &path, &t, None).await;
        expect_error(res, StatusCode::NOT_FOUND, "RESOURCE_NOT_FOUND").await;
        let res = s
            .call(Method::PATCH, &path, &t, Some(json!({"name": "X"})))
            .await;
        expect_error(res, StatusCode::NOT_FOUND, "RESOURCE_NOT_FOUND").await;
        let res = s.call(Method::DELETE, &path, &t, None).await;
        expect_error(res, StatusCode::NOT_FOUND, "RESOURCE_NOT_FOUND").await;
    }
    // A product id names no user, even an existing product's.
    let tp = s.token("products:write").await;
    let res = s
        .call(
            Method::POST,
            "/v1/products",
            &tp,
            Some(json!({"name": "P", "sku": "P-1", "price": 1, "stock": 1})),
        )
        .await;
    let pid = body_of(res, StatusCode::CREATED).await["data"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let res = s
        .call(Method::GET, &format!("/v1/users/{pid}"), &t, None)
        .await;
    expect_error(res, StatusCode::NOT_FOUND, "RESOURCE_NOT_FOUND").await;
}

// D6: an unknown path under /v1 is 404 RESOURCE_NOT_FOUND.
#[tokio::test]
async fn d6_unknown_path_under_v1_is_404() {
    let s = TestServer::start().await;
    let t = s.token(RW).await;
    let u = create(&s, &t, "a@example.com", "A", "viewer").await;
    for path in [
        "/v1/nothing".to_owned(),
        "/v1/user".to_owned(),
        "/v1/users/".to_owned() + u["id"].as_str().unwrap() + "/extra",
        "/v1/".to_owned(),
        "/v1/organizations".to_owned(),
    ] {
        let res = s.call(Method::GET, &path, &t, None).await;
        expect_error(res, StatusCode::NOT_FOUND, "RESOURCE_NOT_FOUND").await;
    }
    let res = s
        .call(Method::POST, "/v1/nothing", &t, Some(json!({})))
        .await;
    expect_error(res, StatusCode::NOT_FOUND, "RESOURCE_NOT_FOUND").await;
}

// D6: a known path with the wrong method is 405 with `Allow`.
#[tokio::test]
async fn d6_wrong_method_is_405_with_allow() {
    let s = TestServer::start().await;
    let t = s.token(RW).await;
    let allow = |res: &Response| -> Vec<String> {
        let v = res
            .headers()
            .get("allow")
            .expect("405 carries Allow")
            .to_str()
            .unwrap();
        v.split(',')
            .map(|m| m.trim().to_ascii_uppercase())
            .collect()
    };
    for m in [Method::PUT, Method::DELETE, Method::PATCH] {
        let res = s.call(m.clone(), "/v1/users", &t, Some(json!({}))).await;
        let a = allow(&res);
        assert!(
            a.contains(&"GET".into()) && a.contains(&"POST".into()),
            "{m}: {a:?}"
        );
        assert!(!a.contains(&m.to_string()), "{m}: {a:?}");
        expect_error(res, StatusCode::METHOD_NOT_ALLOWED, "METHOD_NOT_ALLOWED").await;
    }
    let u = create(&s, &t, "a@example.com", "A", "viewer").await;
    let path = format!("/v1/users/{}", u["id"].as_str().unwrap());
    for m in [Method::PUT, Method::POST] {
        let res = s
            .call(m.clone(), &path, &t, Some(json!({"name": "B"})))
            .await;
        let a = allow(&res);
        for want in ["GET", "PATCH", "DELETE"] {
            assert!(a.contains(&want.to_string()), "{m}: {a:?}");
        }
        expect_error(res, StatusCode::METHOD_NOT_ALLOWED, "METHOD_NOT_ALLOWED").await;
    }
    assert_eq!(
        get_user(&s, &t, u["id"].as_str().unwrap()).await["name"],
        "A"
    );
}

// ---------------------------------------------------------------------------
// D9 order of checks, D6 WWW-Authenticate
// ---------------------------------------------------------------------------

// D9: 401 before anything about the request.
#[tokio::test]
async fn d9_no_token_is_401_even_with_a_bad_body() {
    let s = TestServer::start().await;
    let res = s
        .request(Method::POST, "/v1/users")
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(
        res.headers()
            .get("www-authenticate")
            .and_then(|v| v.to_str().ok()),
        Some("Bearer realm=\"gatehouse\""),
        "D6: no credentials → realm, no error code"
    );
    expect_error(res, StatusCode::UNAUTHORIZED, "INVALID_TOKEN").await;

    let res = s
        .request(Method::POST, "/v1/users")
        .header("content-type", "text/plain")
        .body("x")
        .send()
        .await
        .unwrap();
    expect_error(res, StatusCode::UNAUTHORIZED, "INVALID_TOKEN").await;
    let big = json!({"name": "x".repeat(70 * 1024)});
    let res = s
        .request(Method::POST, "/v1/users")
        .json(&big)
        .send()
        .await
        .unwrap();
    expect_error(res, StatusCode::UNAUTHORIZED, "INVALID_TOKEN").await;
    let res = s
        .request(Method::PATCH, "/v1/users/prod_1")
        .json(&json!({"role": "owner"}))
        .send()
        .await
        .unwrap();
    expect_error(res, StatusCode::UNAUTHORIZED, "INVALID_TOKEN").await;
    let res = s
        .request(Method::DELETE, "/v1/users/usr_nope?transfer_to=bad")
        .send()
        .await
        .unwrap();
    expect_error(res, StatusCode::UNAUTHORIZED, "INVALID_TOKEN").await;
    let res = s
        .request(Method::GET, "/v1/users?limit=abc")
        .send()
        .await
        .unwrap();
    expect_error(res, StatusCode::UNAUTHORIZED, "INVALID_TOKEN").await;

    // A bad token: 401 with error="invalid_token".
    let res = s
        .request(Method::POST, "/v1/users")
        .bearer_auth("not.a.jwt")
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    let www = res
        .headers()
        .get("www-authenticate")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    assert!(
        www.starts_with("Bearer") && www.contains("error=\"invalid_token\""),
        "{www}"
    );
    expect_error(res, StatusCode::UNAUTHORIZED, "INVALID_TOKEN").await;
}

// D9: 403 before the request and the resource; D6 WWW-Authenticate names the scope.
#[tokio::test]
async fn d9_missing_scope_is_403_even_with_bad_body_or_unknown_id() {
    let s = TestServer::start().await;
    let read_only = s.token("users:read").await;
    let www_write = "Bearer error=\"insufficient_scope\", scope=\"users:write\"";
    let check = |res: &Response, want: &str| {
        assert_eq!(
            res.headers()
                .get("www-authenticate")
                .and_then(|v| v.to_str().ok()),
            Some(want)
        );
    };

    let res = s
        .call(
            Method::POST,
            "/v1/users",
            &read_only,
            Some(json!({"email": "bad", "role": "owner"})),
        )
        .await;
    check(&res, www_write);
    expect_error(res, StatusCode::FORBIDDEN, "INSUFFICIENT_SCOPE").await;
    let res = s
        .request(Method::POST, "/v1/users")
        .bearer_auth(&read_only)
        .header("content-type", "application/json")
        .body("{broken")
        .send()
        .await
        .unwrap();
    check(&res, www_write);
    expect_error(res, StatusCode::FORBIDDEN, "INSUFFICIENT_SCOPE").await;
    let res = s
        .request(Method::POST, "/v1/users")
        .bearer_auth(&read_only)
        .header("content-type", "text/plain")
        .body("x")
        .send()
        .await
        .unwrap();
    expect_error(res, StatusCode::FORBIDDEN, "INSUFFICIENT_SCOPE").await;
    let res = s
        .call(
            Method::POST,
            "/v1/users",
            &read_only,
            Some(json!({"name": "x".repeat(70 * 1024)})),
        )
        .await;
    expect_error(res, StatusCode::FORBIDDEN, "INSUFFICIENT_SCOPE").await;
    let res = s
        .call(
            Method::PATCH,
            "/v1/users/usr_unknownunknown",
            &read_only,
            Some(json!({"role": "owner"})),
        )
        .await;
    check(&res, www_write);
    expect_error(res, StatusCode::FORBIDDEN, "INSUFFICIENT_SCOPE").await;
    let res = s
        .call(
            Method::PATCH,
            "/v1/users/prod_1",
            &read_only,
            Some(json!({"name": "X"})),
        )
        .await;
    expect_error(res, StatusCode::FORBIDDEN, "INSUFFICIENT_SCOPE").await;
    let res = s
        .call(
            Method::DELETE,
            "/v1/users/usr_unknownunknown",
            &read_only,
            None,
        )
        .await;
    check(&res, www_write);
    expect_error(res, StatusCode::FORBIDDEN, "INSUFFICIENT_SCOPE").await;
    let res = s
        .call(
            Method::DELETE,
            "/v1/users/usr_unknownunknown?transfer_to=x",
            &read_only,
            None,
        )
        .await;
    expect_error(res, StatusCode::FORBIDDEN, "INSUFFICIENT_SCOPE").await;

    // Reading needs users:read.
    let write_only = s.token("users:write").await;
    let www_read = "Bearer error=\"insufficient_scope\", scope=\"users:read\"";
    let res = s
        .call(Method::GET, "/v1/users?limit=abc", &write_only, None)
        .await;
    check(&res, www_read);
    expect_error(res, StatusCode::FORBIDDEN, "INSUFFICIENT_SCOPE").await;
    let res = s
        .call(
            Method::GET,
            "/v1/users/usr_unknownunknown",
            &write_only,
            None,
        )
        .await;
    check(&res, www_read);
    expect_error(res, StatusCode::FORBIDDEN, "INSUFFICIENT_SCOPE").await;
    let products = s.token("products:read products:write profile:read").await;
    let res = s.call(Method::GET, "/v1/users", &products, None).await;
    check(&res, www_read);
    expect_error(res, StatusCode::FORBIDDEN, "INSUFFICIENT_SCOPE").await;
    let res = s
        .call(
            Method::POST,
            "/v1/users",
            &products,
            Some(json!({"email": "a@example.com", "name": "A", "role": "viewer"})),
        )
        .await;
    check(&res, www_write);
    expect_error(res, StatusCode::FORBIDDEN, "INSUFFICIENT_SCOPE").await;

    // Nothing was created by any of that.
    let rw = s.token(RW).await;
    assert_eq!(list(&s, &rw, "").await["meta"]["total"], 0);
}

// D9: 400 (the request) before 404 (the resource); 415 and 413 too.
#[tokio::test]
async fn d9_patch_bad_body_on_unknown_id_is_400_not_404() {
    let s = TestServer::start().await;
    let t = s.token(RW).await;
    for path in ["/v1/users/usr_unknownunknown", "/v1/users/prod_1"] {
        let res = s
            .call(Method::PATCH, path, &t, Some(json!({"role": "owner"})))
            .await;
        expect_one_issue(res, "role").await;
        let res = s
            .call(Method::PATCH, path, &t, Some(json!({"nickname": "x"})))
            .await;
        expect_one_issue(res, "nickname").await;
        let res = s
            .request(Method::PATCH, path)
            .bearer_auth(&t)
            .header("content-type", "application/json")
            .body("{")
            .send()
            .await
            .unwrap();
        expect_one_issue(res, "body").await;
        let res = s
            .request(Method::PATCH, path)
            .bearer_auth(&t)
            .header("content-type", "text/plain")
            .body("{}")
            .send()
            .await
            .unwrap();
        expect_error(
            res,
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "UNSUPPORTED_MEDIA_TYPE",
        )
        .await;
        let res = s
            .call(
                Method::PATCH,
                path,
                &t,
                Some(json!({"name": "x".repeat(70 * 1024)})),
            )
            .await;
        expect_error(res, StatusCode::PAYLOAD_TOO_LARGE, "PAYLOAD_TOO_LARGE").await;
        // A good body on that id: now it is the 404.
        let res = s
            .call(Method::PATCH, path, &t, Some(json!({"name": "Fine"})))
            .await;
        expect_error(res, StatusCode::NOT_FOUND, "RESOURCE_NOT_FOUND").await;
    }
    // DELETE: a bad query parameter comes before the unknown id.
    let res = s
        .call(
            Method::DELETE,
            "/v1/users/usr_unknownunknown?transfer_to=prod_1",
            &t,
            None,
        )
        .await;
    expect_one_issue(res, "transfer_to").await;
}

// ---------------------------------------------------------------------------
// PATCH (D9 all-or-nothing, D11 lifecycle)
// ---------------------------------------------------------------------------

#[tokio::test]
async fn patch_changes_only_supplied_fields() {
    let s = TestServer::start().await;
    let t = s.token(RW).await;
    let u = create(&s, &t, "a@example.com", "Ada", "viewer").await;
    let id = u["id"].as_str().unwrap();
    let res = patch(&s, &t, id, json!({"name": "Ada Lovelace"})).await;
    let body = body_of(res, StatusCode::OK).await;
    assert_single_envelope(&body);
    assert_user_schema(&body["data"]);
    assert_eq!(body["data"]["name"], "Ada Lovelace");
    assert_eq!(body["data"]["role"], "viewer");
    assert_eq!(body["data"]["email"], "a@example.com");
    assert_eq!(body["data"]["status"], "pending_invite");
    assert_eq!(body["data"]["created_at"], u["created_at"]);
    let res = patch(&s, &t, id, json!({"role": "editor"})).await;
    let body = body_of(res, StatusCode::OK).await;
    assert_eq!(body["data"]["name"], "Ada Lovelace");
    assert_eq!(body["data"]["role"], "editor");
    assert_eq!(get_user(&s, &t, id).await, body["data"]);
    // e-mail is not patchable
    let res = patch(&s, &t, id, json!({"email": "b@example.com"})).await;
    expect_one_issue(res, "email").await;
}

// D9: a PATCH is all-or-nothing.
#[tokio::test]
async fn d9_patch_is_all_or_nothing() {
    let s = TestServer::start().await;
    let t = s.token(RW).await;
    let u = create(&s, &t, "a@example.com", "Ada", "viewer").await;
    let id = u["id"].as_str().unwrap();

    let res = patch(&s, &t, id, json!({"name": "Changed", "role": "owner"})).await;
    expect_one_issue(res, "role").await;
    let res = patch(&s, &t, id, json!({"role": "editor", "name": ""})).await;
    expect_one_issue(res, "name").await;
    let res = patch(
        &s,
        &t,
        id,
        json!({"name": "Changed", "status": "pending_invite"}),
    )
    .await;
    expect_one_issue(res, "status").await;
    let res = patch(&s, &t, id, json!({"name": "Changed", "unknown": true})).await;
    expect_one_issue(res, "unknown").await;
    let res = patch(
        &s,
        &t,
        id,
        json!({"name": 7, "role": "admin", "status": "gone"}),
    )
    .await;
    expect_issues(res, &["name", "status"]).await;
    assert_eq!(get_user(&s, &t, id).await, u, "nothing changed");

    // A business-rule failure changes nothing either.
    let res = patch(
        &s,
        &t,
        id,
        json!({"name": "Changed", "role": "admin", "status": "active"}),
    )
    .await;
    expect_error(
        res,
        StatusCode::UNPROCESSABLE_ENTITY,
        "INVALID_STATE_TRANSITION",
    )
    .await;
    assert_eq!(get_user(&s, &t, id).await, u, "nothing changed");
}

// D11: a new user is pending_invite; pending → active by PATCH is 422.
#[tokio::test]
async fn d11_pending_to_active_is_422() {
    let s = TestServer::start().await;
    let t = s.token(RW).await;
    let u = create(&s, &t, "a@example.com", "A", "editor").await;
    assert_eq!(u["status"], "pending_invite");
    let id = u["id"].as_str().unwrap();
    let res = patch(&s, &t, id, json!({"status": "active"})).await;
    let body = expect_error(
        res,
        StatusCode::UNPROCESSABLE_ENTITY,
        "INVALID_STATE_TRANSITION",
    )
    .await;
    assert_eq!(body["error"]["details"], json!([]));
    assert_eq!(get_user(&s, &t, id).await, u);
}

// D11: pending → inactive is fine; then inactive → active for a user who never accepted is 422.
#[tokio::test]
async fn d11_pending_to_inactive_ok_then_reactivation_without_password_is_422() {
    let s = TestServer::start().await;
    let t = s.token(RW).await;
    let u = create(&s, &t, "a@example.com", "A", "viewer").await;
    let id = u["id"].as_str().unwrap();
    tokio::time::sleep(Duration::from_millis(5)).await;
    let res = patch(&s, &t, id, json!({"status": "inactive"})).await;
    let body = body_of(res, StatusCode::OK).await;
    assert_eq!(body["data"]["status"], "inactive");
    assert!(
        assert_timestamp(&body["data"]["updated_at"]) > assert_timestamp(&u["updated_at"]),
        "updated_at changes"
    );
    let inactive = body["data"].clone();
    let res = patch(&s, &t, id, json!({"status": "active"})).await;
    expect_error(
        res,
        StatusCode::UNPROCESSABLE_ENTITY,
        "INVALID_STATE_TRANSITION",
    )
    .await;
    assert_eq!(get_user(&s, &t, id).await, inactive);
    // Setting it to pending again is not possible either.
    let res = patch(&s, &t, id, json!({"status": "pending_invite"})).await;
    expect_one_issue(res, "status").await;
}

// D11: active → inactive → active for a user with a password.
#[tokio::test]
async fn d11_active_inactive_active_for_user_with_password() {
    let s = TestServer::start().await;
    let t = s.token(RW).await;
    let u = s.new_user(&s.org(), "pw@example.com", Role::Editor).await;
    let id = u.id.as_str();
    assert_eq!(get_user(&s, &t, id).await["status"], "active");
    let res = patch(&s, &t, id, json!({"status": "inactive"})).await;
    assert_eq!(
        body_of(res, StatusCode::OK).await["data"]["status"],
        "inactive"
    );
    assert_eq!(get_user(&s, &t, id).await["status"], "inactive");
    let res = patch(&s, &t, id, json!({"status": "active"})).await;
    assert_eq!(
        body_of(res, StatusCode::OK).await["data"]["status"],
        "active"
    );
    assert_eq!(get_user(&s, &t, id).await["status"], "active");
}

// interface.md §3.1: PATCH accepts only active or inactive.
#[tokio::test]
async fn patch_status_pending_invite_is_400() {
    let s = TestServer::start().await;
    let t = s.token(RW).await;
    let active = s.new_user(&s.org(), "pw@example.com", Role::Viewer).await;
    let pending = create(&s, &t, "pe@example.com", "Pe", "viewer").await;
    for id in [active.id.as_str(), pending["id"].as_str().unwrap()] {
        for bad in [
            json!("pending_invite"),
            json!("deleted"),
            json!("ACTIVE"),
            json!(true),
            json!(1),
        ] {
            let res = patch(&s, &t, id, json!({"status": bad})).await;
            expect_one_issue(res, "status").await;
        }
    }
    assert_eq!(
        get_user(&s, &t, active.id.as_str()).await["status"],
        "active"
    );
    assert_eq!(
        get_user(&s, &t, pending["id"].as_str().unwrap()).await,
        pending
    );
}

// D11: setting a field to its current value changes nothing; a real change moves updated_at.
#[tokio::test]
async fn d11_same_value_leaves_updated_at_and_real_change_moves_it() {
    let s = TestServer::start().await;
    let t = s.token(RW).await;
    let u = create(&s, &t, "a@example.com", "Ada", "viewer").await;
    let id = u["id"].as_str().unwrap();
    tokio::time::sleep(Duration::from_millis(20)).await;

    for same in [
        json!({"name": "Ada"}),
        json!({"role": "viewer"}),
        json!({"name": "Ada", "role": "viewer"}),
        json!({}),
    ] {
        let res = patch(&s, &t, id, same.clone()).await;
        let body = body_of(res, StatusCode::OK).await;
        assert_eq!(body["data"], u, "{same}");
    }
    assert_eq!(get_user(&s, &t, id).await["updated_at"], u["updated_at"]);

    // Same status on an active user.
    let a = s.new_user(&s.org(), "b@example.com", Role::Editor).await;
    let before = get_user(&s, &t, a.id.as_str()).await;
    tokio::time::sleep(Duration::from_millis(20)).await;
    let res = patch(
        &s,
        &t,
        a.id.as_str(),
        json!({"status": "active", "role": "editor"}),
    )
    .await;
    assert_eq!(body_of(res, StatusCode::OK).await["data"], before);

    // A real change.
    let res = patch(&s, &t, id, json!({"name": "Ada L."})).await;
    let body = body_of(res, StatusCode::OK).await;
    let after = &body["data"];
    assert_eq!(after["name"], "Ada L.");
    assert_eq!(
        after["created_at"], u["created_at"],
        "created_at never moves"
    );
    let (t0, t1) = (
        assert_timestamp(&u["updated_at"]),
        assert_timestamp(&after["updated_at"]),
    );
    assert!(t1 > t0, "updated_at moves on a change: {t0} → {t1}");
    assert_recent(&after["updated_at"]);
    assert_eq!(get_user(&s, &t, id).await, *after);
}

// ---------------------------------------------------------------------------
// D13: last admin, delete, owned resources
// ---------------------------------------------------------------------------

#[tokio::test]
async fn d13_last_active_admin_cannot_be_deactivated_demoted_or_deleted() {
    let s = TestServer::start().await;
    let t = s.token(RW).await;
    let org = s.org();
    let admin = s.new_user(&org, "root@example.com", Role::Admin).await;
    let id = admin.id.as_str();
    let before = get_user(&s, &t, id).await;

    let res = patch(&s, &t, id, json!({"status": "inactive"})).await;
    let body = expect_error(res, StatusCode::UNPROCESSABLE_ENTITY, "LAST_ADMIN").await;
    assert_eq!(body["error"]["details"], json!([]));
    for role in ["editor", "viewer"] {
        let res = patch(&s, &t, id, json!({"role": role})).await;
        expect_error(res, StatusCode::UNPROCESSABLE_ENTITY, "LAST_ADMIN").await;
    }
    let res = s
        .call(Method::DELETE, &format!("/v1/users/{id}"), &t, None)
        .await;
    expect_error(res, StatusCode::UNPROCESSABLE_ENTITY, "LAST_ADMIN").await;
    assert_eq!(get_user(&s, &t, id).await, before, "nothing changed");

    // Pending and inactive admins do not count as active admins.
    let pending = create(&s, &t, "pending-admin@example.com", "P", "admin").await;
    let inactive = s
        .new_user(&org, "sleepy-admin@example.com", Role::Admin)
        .await;
    let res = patch(&s, &t, inactive.id.as_str(), json!({"status": "inactive"})).await;
    assert_eq!(
        body_of(res, StatusCode::OK).await["data"]["status"],
        "inactive"
    );
    let res = patch(&s, &t, id, json!({"role": "editor"})).await;
    expect_error(res, StatusCode::UNPROCESSABLE_ENTITY, "LAST_ADMIN").await;
    let res = s
        .call(Method::DELETE, &format!("/v1/users/{id}"), &t, None)
        .await;
    expect_error(res, StatusCode::UNPROCESSABLE_ENTITY, "LAST_ADMIN").await;
    // Removing a pending admin is fine.
    let res = s
        .call(
            Method::DELETE,
            &format!("/v1/users/{}", pending["id"].as_str().unwrap()),
            &t,
            None,
        )
        .await;
    assert_eq!(res.status(), StatusCode::NO_CONTENT);

    // With a second active admin, the first may go; then the second is the last.
    let second = s.new_user(&org, "second@example.com", Role::Admin).await;
    let res = patch(&s, &t, id, json!({"role": "editor"})).await;
    assert_eq!(body_of(res, StatusCode::OK).await["data"]["role"], "editor");
    let res = patch(&s, &t, second.id.as_str(), json!({"status": "inactive"})).await;
    expect_error(res, StatusCode::UNPROCESSABLE_ENTITY, "LAST_ADMIN").await;
    let res = s
        .call(
            Method::DELETE,
            &format!("/v1/users/{}", second.id),
            &t,
            None,
        )
        .await;
    expect_error(res, StatusCode::UNPROCESSABLE_ENTITY, "LAST_ADMIN").await;
    // Reactivating the inactive admin makes room again.
    let res = patch(&s, &t, inactive.id.as_str(), json!({"status": "active"})).await;
    assert_eq!(
        body_of(res, StatusCode::OK).await["data"]["status"],
        "active"
    );
    let res = s
        .call(
            Method::DELETE,
            &format!("/v1/users/{}", second.id),
            &t,
            None,
        )
        .await;
    assert_eq!(res.status(), StatusCode::NO_CONTENT);
}

// D13: the last admin of one organization is not helped by admins of another.
#[tokio::test]
async fn d13_last_admin_counts_only_own_organization() {
    let s = TestServer::start().await;
    let t = s.token(RW).await;
    let admin = s.new_user(&s.org(), "root@example.com", Role::Admin).await;
    let other = s.new_org(Plan::Free).await;
    s.new_user(&other, "root@other.example.com", Role::Admin)
        .await;
    let res = patch(&s, &t, admin.id.as_str(), json!({"status": "inactive"})).await;
    expect_error(res, StatusCode::UNPROCESSABLE_ENTITY, "LAST_ADMIN").await;
}

// D13: DELETE → 204 with no body; then 404.
#[tokio::test]
async fn d13_delete_is_204_then_404() {
    let s = TestServer::start().await;
    let t = s.token(RW).await;
    let keep = create(&s, &t, "keep@example.com", "Keep", "viewer").await;
    let u = create(&s, &t, "gone@example.com", "Gone", "viewer").await;
    let path = format!("/v1/users/{}", u["id"].as_str().unwrap());
    let res = s.call(Method::DELETE, &path, &t, None).await;
    assert_eq!(res.status(), StatusCode::NO_CONTENT);
    assert!(res.headers().contains_key("x-request-id"));
    assert!(res.bytes().await.unwrap().is_empty(), "204 has no body");

    let res = s.call(Method::GET, &path, &t, None).await;
    expect_error(res, StatusCode::NOT_FOUND, "RESOURCE_NOT_FOUND").await;
    let res = s.call(Method::DELETE, &path, &t, None).await;
    expect_error(res, StatusCode::NOT_FOUND, "RESOURCE_NOT_FOUND").await;
    let res = s
        .call(Method::PATCH, &path, &t, Some(json!({"name": "Back"})))
        .await;
    expect_error(res, StatusCode::NOT_FOUND, "RESOURCE_NOT_FOUND").await;
    let body = list(&s, &t, "").await;
    assert_list_envelope(&body, 1, 20, 0);
    assert_eq!(ids(&body), [keep["id"].as_str().unwrap()]);
    let body = list(&s, &t, "?q=gone").await;
    assert_list_envelope(&body, 0, 20, 0);
}

// D13: a user who owns client applications needs ?transfer_to.
#[tokio::test]
async fn d13_owned_resources_block_delete_until_transferred() {
    let s = TestServer::start().await;
    let t = s.token(RW).await;
    let org = s.org();
    let owner = s.new_user(&org, "owner@example.com", Role::Editor).await;
    let heir = s.new_user(&org, "heir@example.com", Role::Viewer).await;
    let app1 = owned_client(&s, &org, &owner.id).await;
    let app2 = owned_client(&s, &org, &owner.id).await;
    let path = format!("/v1/users/{}", owner.id);

    let res = s.call(Method::DELETE, &path, &t, None).await;
    let body = expect_error(
        res,
        StatusCode::UNPROCESSABLE_ENTITY,
        "OWNED_RESOURCES_EXIST",
    )
    .await;
    assert_eq!(body["error"]["details"], json!([]));
    get_user(&s, &t, owner.id.as_str()).await;
    assert_eq!(
        s.store()
            .resolve_client(&app1)
            .await
            .unwrap()
            .unwrap()
            .owner,
        Some(owner.id.clone())
    );

    // transfer_to of the wrong shape
    for bad in ["bob", "prod_1", "usr_", "usr_a-b"] {
        let res = s
            .call(
                Method::DELETE,
                &format!("{path}?transfer_to={bad}"),
                &t,
                None,
            )
            .await;
        expect_one_issue(res, "transfer_to").await;
    }
    // transfer_to must be another active user of the same organization
    let pending = create(&s, &t, "pending@example.com", "P", "viewer").await;
    let other_org = s.new_org(Plan::Free).await;
    let stranger = s
        .new_user(&other_org, "stranger@example.com", Role::Admin)
        .await;
    for bad in [
        pending["id"].as_str().unwrap(),
        stranger.id.as_str(),
        owner.id.as_str(),
        "usr_0000000000000000000000",
    ] {
        let res = s
            .call(
                Method::DELETE,
                &format!("{path}?transfer_to={bad}"),
                &t,
                None,
            )
            .await;
        expect_one_issue(res, "transfer_to").await;
    }
    get_user(&s, &t, owner.id.as_str()).await;
    assert_eq!(
        s.store()
            .resolve_client(&app2)
            .await
            .unwrap()
            .unwrap()
            .owner,
        Some(owner.id.clone())
    );

    let res = s
        .call(
            Method::DELETE,
            &format!("{path}?transfer_to={}", heir.id),
            &t,
            None,
        )
        .await;
    assert_eq!(res.status(), StatusCode::NO_CONTENT);
    assert!(res.bytes().await.unwrap().is_empty());
    let res = s.call(Method::GET, &path, &t, None).await;
    expect_error(res, StatusCode::NOT_FOUND, "RESOURCE_NOT_FOUND").await;
    for app in [&app1, &app2] {
        assert_eq!(
            s.store().resolve_client(app).await.unwrap().unwrap().owner,
            Some(heir.id.clone()),
            "ownership moved"
        );
    }
    // The heir now owns them, and is blocked the same way.
    let res = s
        .call(Method::DELETE, &format!("/v1/users/{}", heir.id), &t, None)
        .await;
    expect_error(
        res,
        StatusCode::UNPROCESSABLE_ENTITY,
        "OWNED_RESOURCES_EXIST",
    )
    .await;
}

// D13: transfer_to on a user owning nothing is harmless.
#[tokio::test]
async fn d13_transfer_to_without_owned_resources() {
    let s = TestServer::start().await;
    let t = s.token(RW).await;
    let org = s.org();
    let u = s.new_user(&org, "u@example.com", Role::Viewer).await;
    let heir = s.new_user(&org, "heir@example.com", Role::Viewer).await;
    let res = s
        .call(
            Method::DELETE,
            &format!("/v1/users/{}?transfer_to={}", u.id, heir.id),
            &t,
            None,
        )
        .await;
    assert_eq!(res.status(), StatusCode::NO_CONTENT);
    let res = s
        .call(Method::GET, &format!("/v1/users/{}", u.id), &t, None)
        .await;
    expect_error(res, StatusCode::NOT_FOUND, "RESOURCE_NOT_FOUND").await;
    get_user(&s, &t, heir.id.as_str()).await;
}

// D2, D13: a user of another organization cannot be deleted with transfer_to either.
#[tokio::test]
async fn d2_cross_org_delete_with_transfer_is_404() {
    let s = TestServer::start().await;
    let t = s.token(RW).await;
    let org = s.org();
    let owner = s.new_user(&org, "owner@example.com", Role::Editor).await;
    let app = owned_client(&s, &org, &owner.id).await;
    let (org_b, tb) = other_org(&s, RW).await;
    let heir_b = s.new_user(&org_b, "heir@b.example.com", Role::Viewer).await;
    let res = s
        .call(
            Method::DELETE,
            &format!("/v1/users/{}?transfer_to={}", owner.id, heir_b.id),
            &tb,
            None,
        )
        .await;
    expect_error(res, StatusCode::NOT_FOUND, "RESOURCE_NOT_FOUND").await;
    get_user(&s, &t, owner.id.as_str()).await;
    assert_eq!(
        s.store().resolve_client(&app).await.unwrap().unwrap().owner,
        Some(owner.id.clone())
    );
}

// D14: with equal created_at, the id tie-break keeps pages stable: walking the
// pages neither repeats nor skips a user. (A roomy organization, so the many
// requests stay clear of rate limits; D2: it sees only its own users.)
#[tokio::test]
async fn d14_pages_with_equal_timestamps_neither_overlap_nor_skip() {
    let s = TestServer::start().await;
    let (org, t) = roomy_org(&s, RW).await;
    let bootstrap = s.token(RW).await;
    create(&s, &bootstrap, "a@example.com", "A", "viewer").await;
    let now = Timestamp::now();
    for i in 0..30 {
        store_user(
            &s,
            &org,
            &format!("r{i}@example.com"),
            "R",
            Role::Viewer,
            UserStatus::Active,
            now,
        )
        .await;
    }
    let mut seen = Vec::new();
    for offset in (0..30).step_by(7) {
        let body = list(&s, &t, &format!("?limit=7&offset={offset}")).await;
        assert_list_envelope(&body, 30, 7, offset);
        seen.extend(ids(&body));
    }
    assert_eq!(seen.len(), 30);
    let mut dedup = seen.clone();
    dedup.sort();
    dedup.dedup();
    assert_eq!(dedup.len(), 30, "pages neither overlap nor skip");
}

// D6, D9: a path id that cannot be decoded at all is a 404 before the body
// or the query is read; an id of the wrong shape comes after them.
#[tokio::test]
async fn d9_undecodable_id_is_404_before_body_and_query() {
    let s = TestServer::start().await;
    let t = s.token(RW).await;
    let res = s
        .call(
            Method::PATCH,
            "/v1/users/%FF",
            &t,
            Some(json!({"role": "owner"})),
        )
        .await;
    let body = expect_error(res, StatusCode::NOT_FOUND, "RESOURCE_NOT_FOUND").await;
    assert_eq!(body["error"]["message"], "resource not found", "{body}");
    let res = s
        .call(Method::DELETE, "/v1/users/%FF?transfer_to=bad", &t, None)
        .await;
    expect_error(res, StatusCode::NOT_FOUND, "RESOURCE_NOT_FOUND").await;
    let res = s
        .call(Method::DELETE, "/v1/users/prod_1?transfer_to=bad", &t, None)
        .await;
    expect_one_issue(res, "transfer_to").await;
    let res = s.call(Method::DELETE, "/v1/users/prod_1", &t, None).await;
    let body = expect_error(res, StatusCode::NOT_FOUND, "RESOURCE_NOT_FOUND").await;
    assert_eq!(body["error"]["message"], "user not found", "{body}");
}
