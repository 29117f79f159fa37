//! Staging (D33) and the mock (D34): fixture data, the atomic reset that
//! keeps credentials, `gk_test_` keys, and `Prefer: code=NNN`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use gatehouse::config::Env;
use gatehouse_auth::secrets;
use gatehouse_domain::{ApiKey, ApiKeyId, Fixture, ScopeSet, Timestamp};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::cli::gatehouse;
use crate::common::{TestServer, expect_error, expect_error_at};

async fn start_staging() -> TestServer {
    TestServer::start_with(|s| s.env = Env::Staging).await
}

fn fixture_emails() -> Vec<String> {
    Fixture::standard()
        .users
        .iter()
        .map(|u| u.email.as_str().to_owned())
        .collect()
}

fn fixture_skus() -> Vec<String> {
    Fixture::standard()
        .products
        .iter()
        .map(|p| p.sku.as_str().to_owned())
        .collect()
}

async fn list(s: &TestServer, token: &str, path: &str) -> Value {
    let res = s.call(Method::GET, path, token, None).await;
    assert_eq!(res.status(), StatusCode::OK);
    res.json().await.unwrap()
}

fn field(items: &Value, name: &str) -> Vec<String> {
    items["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i[name].as_str().unwrap().to_owned())
        .collect()
}

/// The parent of the staging data directory, for `--data-dir … --env staging`.
fn cli_dir(s: &TestServer) -> std::path::PathBuf {
    s.dir.path().to_owned()
}

async fn staging_server_in_cli_layout() -> TestServer {
    // The CLI puts staging in `<data_dir>/staging` (D33); the test server
    // uses that very directory so both work on one database.
    TestServer::start_with(|s| {
        s.env = Env::Staging;
        s.data_dir = s.data_dir.join("staging");
        if s.database_url.starts_with("sqlite") {
            s.database_url = format!("sqlite://{}", s.data_dir.join("gatehouse.db").display());
        }
    })
    .await
}

#[tokio::test]
async fn d33_staging_starts_with_the_fixture_set() {
    let s = start_staging().await;
    let t = s.token("users:read products:read").await;
    let users = list(&s, &t, "/v1/users?limit=100").await;
    assert_eq!(field(&users, "email"), fixture_emails());
    assert_eq!(
        users["meta"]["total"],
        json!(Fixture::standard().users.len())
    );
    let products = list(&s, &t, "/v1/products?limit=100").await;
    assert_eq!(field(&products, "sku"), fixture_skus());
    // The fixture covers the filters.
    let inactive = list(&s, &t, "/v1/users?status=inactive").await;
    assert_eq!(inactive["meta"]["total"], json!(1));
    let disc = list(&s, &t, "/v1/products?status=discontinued").await;
    assert_eq!(disc["meta"]["total"], json!(2));
}

#[tokio::test]
async fn d33_production_has_no_fixture_data() {
    let s = TestServer::start().await;
    let t = s.token("users:read products:read").await;
    assert_eq!(list(&s, &t, "/v1/users").await["meta"]["total"], json!(0));
    assert_eq!(
        list(&s, &t, "/v1/products").await["meta"]["total"],
        json!(0)
    );
}

#[tokio::test]
async fn d33_staging_reset_restores_the_fixture_and_keeps_credentials() {
    let s = staging_server_in_cli_layout().await;
    let dir = cli_dir(&s);
    let t = s
        .token("users:read users:write products:read products:write")
        .await;
    // A developer's own data.
    let res = s
        .call(
            Method::POST,
            "/v1/users",
            &t,
            Some(json!({"email": "dev@example.org", "name": "Dev", "role": "admin"})),
        )
        .await;
    assert_eq!(res.status(), StatusCode::CREATED);
    let dev: Value = res.json().await.unwrap();
    let dev_id = dev["data"]["id"].as_str().unwrap().to_owned();
    let res = s
        .call(
            Method::POST,
            "/v1/products",
            &t,
            Some(json!({"name": "Dev thing", "sku": "DEV-1", "price": 100, "stock": 1})),
        )
        .await;
    assert_eq!(res.status(), StatusCode::CREATED);
    // Credentials made with the CLI against the staging database.
    let org = s.creds.org.clone();
    let client = gatehouse(
        &dir,
        &[
            "--env",
            "staging",
            "client",
            "create",
            "--org",
            &org,
            "--name",
            "Dev app",
            "--scopes",
            "users:read",
            "--owner",
            &dev_id,
            "--json",
        ],
        None,
    )
    .await
    .json();
    let key = gatehouse(
        &dir,
        &[
            "--env",
            "staging",
            "apikey",
            "create",
            "--org",
            &org,
            "--name",
            "ci",
            "--scopes",
            "users:read",
            "--json",
        ],
        None,
    )
    .await
    .json();
    let key = key["key"].as_str().unwrap().to_owned();
    assert!(
        key.starts_with("gk_test_"),
        "D33: staging keys are gk_test_: {key}"
    );
    let by_key = list(&s, &key, "/v1/users?limit=100").await;
    assert_eq!(by_key["meta"]["total"], json!(fixture_emails().len() + 1));

    let out = gatehouse(&dir, &["staging", "reset", "--json"], None)
        .await
        .json();
    assert_eq!(out["ok"], json!(true));
    assert_eq!(out["organizations"], json!(1));
    // D33 continued, D54: one `staging.reset` for the organization, by the
    // operator who ran the command, and no per-record events.
    // (D58's `audit.checkpoint` may come after it, whenever the sealer
    // first reaches a chain: not counted.)
    let reset: Vec<Value> = crate::events::told(&s, "?limit=6")
        .await
        .into_iter()
        .filter(|e| e["type"] != "audit.checkpoint")
        .collect();
    assert_eq!(reset[0]["type"], "staging.reset", "{reset:?}");
    assert_eq!(reset[0]["actor"]["type"], "operator");
    assert_eq!(reset[0]["request"], Value::Null);
    assert_eq!(reset[0]["data"]["object"]["id"], s.org().as_str());
    assert_ne!(reset[1]["type"], "user.deleted", "no per-record events");
    // D33 continued, D58: one audit entry records it (admin, the operator),
    // and the audit log is kept across the reset: the CLI's creations
    // before it are still there, as the operator's.
    let t_audit = s.token("audit:read").await;
    let entries = crate::audit::audit_once(&s, &t_audit, "?action=staging.reset", 1).await;
    assert_eq!(entries["meta"]["total"], 1, "{entries}");
    let e = &entries["data"][0];
    assert_eq!(e["category"], "admin");
    assert_eq!(e["actor"]["type"], "operator");
    assert_eq!(
        e["target"],
        json!({"type": "organization", "id": s.org().as_str()})
    );
    let created = crate::audit::audit_once(&s, &t_audit, "?action=application.created", 1).await;
    assert!(
        created["data"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["actor"]["type"] == "operator"),
        "{created}"
    );

    // Users and products are the fixture again, on the running server at once.
    let users = list(&s, &t, "/v1/users?limit=100").await;
    assert_eq!(field(&users, "email"), fixture_emails());
    let products = list(&s, &t, "/v1/products?limit=100").await;
    assert_eq!(field(&products, "sku"), fixture_skus());
    let gone = s
        .call(Method::GET, &format!("/v1/users/{dev_id}"), &t, None)
        .await;
    expect_error(gone, StatusCode::NOT_FOUND, "RESOURCE_NOT_FOUND").await;
    // Organizations, clients (even one whose owner disappeared) and keys stay.
    let _ = s
        .token_for(
            client["client_id"].as_str().unwrap(),
            client["client_secret"].as_str().unwrap(),
            "users:read",
        )
        .await;
    let _ = s.token("users:read").await;
    let by_key = list(&s, &key, "/v1/users?limit=100").await;
    assert_eq!(field(&by_key, "email"), fixture_emails());
}

#[tokio::test]
async fn d33_api_keys_of_the_other_environment_are_refused() {
    // A production server never accepts a gk_test_ key, even one whose
    // digest it holds, and staging never accepts gk_live_.
    for (env, foreign) in [(Env::Production, "gk_test_"), (Env::Staging, "gk_live_")] {
        let s = TestServer::start_with(|st| st.env = env).await;
        let key = format!("{foreign}{}", "a".repeat(43));
        let record = ApiKey {
            id: ApiKeyId::generate(),
            org: s.org(),
            name: "foreign".into(),
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
        let res = s.call(Method::GET, "/v1/users", &key, None).await;
        expect_error(res, StatusCode::UNAUTHORIZED, "INVALID_TOKEN").await;
    }
}

/// D33: no request sees half a dataset. Readers list users and products
/// while the reset runs in another process; every answer is wholly the old
/// dataset or wholly the fixture, and both are seen.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn d33_staging_reset_is_atomic_under_concurrent_reads() {
    let s = Arc::new(staging_server_in_cli_layout().await);
    let t = s.token("users:read users:write products:read").await;
    let extra = 30;
    for i in 0..extra {
        let res = s
            .call(
                Method::POST,
                "/v1/users",
                &t,
                Some(json!({"email": format!("extra{i}@example.org"), "name": "Extra", "role": "viewer"})),
            )
            .await;
        assert_eq!(res.status(), StatusCode::CREATED);
    }
    let fixture = fixture_emails();
    let before_total = fixture.len() + extra;
    let done = Arc::new(AtomicBool::new(false));
    let (saw_old, saw_new) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let mut readers = Vec::new();
    for r in 0..3 {
        // One credential each, so no reader meets the rate limit (D28).
        let org = s.org();
        let (id, secret) = s.new_client(&org, "users:read").await;
        let tok = s.token_for(&id, &secret, "users:read").await;
        let (s, done, fixture) = (s.clone(), done.clone(), fixture.clone());
        let (saw_old, saw_new) = (saw_old.clone(), saw_new.clone());
        readers.push(tokio::spawn(async move {
            let mut after_done = 0;
            while after_done < 5 {
                if done.load(Ordering::SeqCst) {
                    after_done += 1;
                }
                let page = list(&s, &tok, "/v1/users?limit=100").await;
                let total = page["meta"]["total"].as_u64().unwrap() as usize;
                let emails = field(&page, "email");
                assert_eq!(
                    emails.len(),
                    total,
                    "reader {r}: the page matches its total"
                );
                if total == fixture.len() {
                    assert_eq!(emails, fixture, "reader {r}: wholly the fixture");
                    saw_new.fetch_add(1, Ordering::SeqCst);
                } else {
                    assert_eq!(total, before_total, "reader {r}: wholly the old dataset");
                    assert_eq!(
                        emails.iter().filter(|e| e.starts_with("extra")).count(),
                        extra
                    );
                    saw_old.fetch_add(1, Ordering::SeqCst);
                }
                tokio::time::sleep(Duration::from_millis(30)).await;
            }
        }));
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let out = gatehouse(&cli_dir(&s), &["staging", "reset", "--json"], None)
        .await
        .json();
    assert_eq!(out["ok"], json!(true));
    done.store(true, Ordering::SeqCst);
    for r in readers {
        r.await.unwrap();
    }
    assert!(
        saw_old.load(Ordering::SeqCst) > 0,
        "readers ran before the reset"
    );
    assert!(
        saw_new.load(Ordering::SeqCst) > 0,
        "readers ran after the reset"
    );
}

#[tokio::test]
async fn d34_mock_serves_the_fixture_with_the_fixed_client() {
    let s = TestServer::start_mock().await;
    assert!(s.base.starts_with("http://127.0.0.1:"), "{}", s.base);
    // mock_client / mock_secret has every scope, admin included.
    let res = s
        .request(Method::POST, "/oauth/token")
        .basic_auth("mock_client", Some("mock_secret"))
        .form(&[
            ("grant_type", "client_credentials"),
            ("scope", "admin users:read"),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let body: Value = res.json().await.unwrap();
    let mut granted: Vec<&str> = body["scope"].as_str().unwrap().split(' ').collect();
    granted.sort();
    assert_eq!(granted, ["admin", "users:read"]);
    let t = s.token("").await;
    let users = list(&s, &t, "/v1/users?limit=100").await;
    assert_eq!(field(&users, "email"), fixture_emails());
    let products = list(&s, &t, "/v1/products?limit=100").await;
    assert_eq!(field(&products, "sku"), fixture_skus());
    // A wrong secret is refused as in production.
    let res = s
        .request(Method::POST, "/oauth/token")
        .basic_auth("mock_client", Some("wrong"))
        .form(&[("grant_type", "client_credentials")])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn d34_prefer_429_answers_like_the_rate_limiter() {
    let s = TestServer::start_mock().await;
    let t = s.token("users:read").await;
    let res = s
        .request(Method::GET, "/v1/users")
        .bearer_auth(&t)
        .header("Prefer", "code=429")
        .send()
        .await
        .unwrap();
    let h = res.headers().clone();
    let body = expect_error_at(
        res,
        StatusCode::TOO_MANY_REQUESTS,
        "RATE_LIMIT_EXCEEDED",
        &s.base,
    )
    .await;
    let retry: u64 = h["retry-after"].to_str().unwrap().parse().unwrap();
    assert!((1..=60).contains(&retry), "Retry-After {retry}");
    // The mock organization is on pro (D28: 600 per minute).
    assert_eq!(h["x-ratelimit-limit"], "600");
    assert_eq!(h["x-ratelimit-remaining"], "0");
    let reset: u64 = h["x-ratelimit-reset"].to_str().unwrap().parse().unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    assert!(reset >= now && reset <= now + 61, "reset {reset} now {now}");
    assert!(h.contains_key("x-request-id"));
    assert!(
        body["error"]["docs"]
            .as_str()
            .unwrap()
            .ends_with("/docs/errors#RATE_LIMIT_EXCEEDED")
    );
}

#[tokio::test]
async fn d34_prefer_500_and_503() {
    let s = TestServer::start_mock().await;
    let t = s.token("products:read").await;
    let res = s
        .request(Method::GET, "/v1/products")
        .bearer_auth(&t)
        .header("Prefer", "code=500")
        .send()
        .await
        .unwrap();
    assert!(res.headers().contains_key("x-ratelimit-limit"));
    expect_error_at(
        res,
        StatusCode::INTERNAL_SERVER_ERROR,
        "INTERNAL_ERROR",
        &s.base,
    )
    .await;
    let res = s
        .request(Method::GET, "/v1/products")
        .bearer_auth(&t)
        .header("Prefer", "respond-async, code=503")
        .send()
        .await
        .unwrap();
    assert_eq!(res.headers()["retry-after"], "5");
    expect_error_at(
        res,
        StatusCode::SERVICE_UNAVAILABLE,
        "SERVICE_UNAVAILABLE",
        &s.base,
    )
    .await;
    // 403 names the route's scope, as production does.
    let res = s
        .request(Method::POST, "/v1/products")
        .bearer_auth(&t)
        .header("Prefer", "code=403")
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(
        res.headers()["www-authenticate"],
        "Bearer error=\"insufficient_scope\", scope=\"products:write\""
    );
    expect_error_at(res, StatusCode::FORBIDDEN, "INSUFFICIENT_SCOPE", &s.base).await;
}

#[tokio::test]
async fn d34_prefer_needs_a_token_and_a_known_code() {
    let s = TestServer::start_mock().await;
    // Authentication comes first, as in production.
    let res = s
        .request(Method::GET, "/v1/users")
        .header("Prefer", "code=500")
        .send()
        .await
        .unwrap();
    expect_error_at(res, StatusCode::UNAUTHORIZED, "INVALID_TOKEN", &s.base).await;
    let t = s.token("users:read").await;
    let res = s
        .request(Method::GET, "/v1/users")
        .bearer_auth(&t)
        .header("Prefer", "code=418")
        .send()
        .await
        .unwrap();
    let body = expect_error_at(res, StatusCode::BAD_REQUEST, "VALIDATION_ERROR", &s.base).await;
    assert_eq!(body["error"]["details"][0]["field"], json!("Prefer"));
    // Other preferences are ignored.
    let res = s
        .request(Method::GET, "/v1/users")
        .bearer_auth(&t)
        .header("Prefer", "return=minimal")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
}

#[tokio::test]
async fn d34_production_ignores_prefer() {
    let s = TestServer::start().await;
    let t = s.token("users:read").await;
    let res = s
        .request(Method::GET, "/v1/users")
        .bearer_auth(&t)
        .header("Prefer", "code=500")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
}

/// `gatehouse mock` as a process: prints where it listens and the client,
/// serves, and leaves nothing behind on SIGTERM.
#[tokio::test]
async fn d34_gatehouse_mock_command() {
    use tokio::io::AsyncBufReadExt;
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_gatehouse"))
        .args(["mock", "--addr", "127.0.0.1:0", "--json"])
        .env("GATEHOUSE_LOG", "warn")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let line = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
        .await
        .expect("the mock starts within 30 s")
        .unwrap()
        .expect("a line on stdout");
    let info: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(info["client_id"], json!("mock_client"));
    assert_eq!(info["client_secret"], json!("mock_secret"));
    let url = info["url"].as_str().unwrap().to_owned();
    let http = reqwest::Client::new();
    let res = http
        .post(format!("{url}/oauth/token"))
        .basic_auth("mock_client", Some("mock_secret"))
        .form(&[
            ("grant_type", "client_credentials"),
            ("scope", "users:read"),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let tok: Value = res.json().await.unwrap();
    let res = http
        .get(format!("{url}/v1/users"))
        .bearer_auth(tok["access_token"].as_str().unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["meta"]["total"], json!(fixture_emails().len()));
    let pid = child.id().unwrap();
    std::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .unwrap();
    let status = tokio::time::timeout(Duration::from_secs(30), child.wait())
        .await
        .expect("the mock stops on SIGTERM")
        .unwrap();
    assert!(status.success(), "{status}");
}

/// D33 (continued): the reset keeps webhook endpoints; one whose owner
/// disappears keeps working, without owner, and nothing is told of it.
#[tokio::test]
async fn d33_staging_reset_keeps_webhook_endpoints_without_a_vanished_owner() {
    use gatehouse_domain::event::TypePattern;
    use gatehouse_domain::webhook::{AllowList, Endpoint, EndpointUrl, Ordering};
    let s = staging_server_in_cli_layout().await;
    let t = s.token("users:read webhooks:read").await;
    let users = list(&s, &t, "/v1/users?role=admin").await;
    let owner = gatehouse_domain::UserId::parse(users["data"][0]["id"].as_str().unwrap()).unwrap();
    let url = EndpointUrl::parse("https://hooks.example.com/in", &AllowList::default()).unwrap();
    let e = Endpoint::new(
        &url,
        "staging mirror".into(),
        vec![TypePattern::parse("*").unwrap()],
        Ordering::None,
        Some(owner.clone()),
        gatehouse_domain::Timestamp::now(),
    );
    s.store()
        .insert_endpoint(&s.org(), &e, b"sealed", crate::common::operator())
        .await
        .unwrap();
    gatehouse(
        &cli_dir(&s),
        &["--env", "staging", "staging", "reset", "--json"],
        None,
    )
    .await
    .json();
    let shown = list(&s, &t, &format!("/v1/webhook-endpoints/{}", e.id)).await;
    assert_eq!(shown["data"]["status"], "enabled", "{shown}");
    assert_eq!(shown["data"]["owner_id"], Value::Null);
    assert_eq!(shown["data"]["description"], "staging mirror");
}
