//! Several nodes on one PostgreSQL database behave as one service (D44,
//! issue 5): two servers in this process, each with its own listeners and
//! memory (verifier cache, revocation set), sharing only the database and
//! the master key.

use std::time::{Duration, Instant};

use gatehouse::config::Settings;
use gatehouse::run::{self, Running};
use gatehouse_auth::flows::AuthorizeParams;
use gatehouse_auth::pkce;
use gatehouse_domain::{Email, Name, NewUser, OrgId, Role, Timestamp, UserId, UserStatus};
use reqwest::StatusCode;
use serde_json::Value;

use crate::common::https_client;

struct Node {
    running: Running,
    base: String,
    client: reqwest::Client,
    _dir: tempfile::TempDir,
}

async fn node(database_url: &str, master_key: &str) -> Node {
    let dir = tempfile::tempdir().unwrap();
    let mut settings = Settings::with_data_dir(dir.path().to_owned());
    settings.database_url = database_url.to_owned();
    settings.master_key = Some(master_key.to_owned());
    settings.public_url = crate::common::PUBLIC_URL.into();
    settings.https_addr = "127.0.0.1:0".parse().unwrap();
    settings.http_addr = "127.0.0.1:0".parse().unwrap();
    settings.admin_addr = "127.0.0.1:0".parse().unwrap();
    let running = run::start(&settings).await.expect("node starts");
    let base = format!("https://{}", running.https_addr.unwrap());
    let client = https_client(running.cert_path.as_ref().unwrap());
    Node {
        running,
        base,
        client,
        _dir: dir,
    }
}

/// Two nodes on one fresh database; the first bootstraps it.
async fn two_nodes() -> (Node, Node, run::BootstrapCredentials) {
    let url = crate::common::postgres_url().await;
    let key = gatehouse_auth::MasterKey::generate().to_text();
    let a = node(&url, &key).await;
    let creds = a.running.bootstrap.clone().expect("node A bootstraps");
    let b = node(&url, &key).await;
    assert!(b.running.bootstrap.is_none(), "D41: bootstrap runs once");
    (a, b, creds)
}

async fn cc_token(n: &Node, creds: &run::BootstrapCredentials) -> String {
    let res = n
        .client
        .post(format!("{}/oauth/token", n.base))
        .basic_auth(&creds.client_id, Some(&creds.client_secret))
        .form(&[
            ("grant_type", "client_credentials"),
            ("scope", "users:read"),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    res.json::<Value>().await.unwrap()["access_token"]
        .as_str()
        .unwrap()
        .to_owned()
}

async fn status(n: &Node, token: &str) -> StatusCode {
    n.client
        .get(format!("{}/v1/users", n.base))
        .bearer_auth(token)
        .send()
        .await
        .unwrap()
        .status()
}

/// Polls `n` until `token` is refused; returns how long it took.
async fn refused_within(n: &Node, token: &str, limit: Duration) -> Duration {
    let started = Instant::now();
    loop {
        if status(n, token).await == StatusCode::UNAUTHORIZED {
            return started.elapsed();
        }
        assert!(
            started.elapsed() < limit,
            "still accepted after {limit:?} on the other node"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn d44_a_revocation_on_one_node_is_enforced_by_the_other_within_a_second() {
    let (a, b, creds) = two_nodes().await;
    let token = cc_token(&a, &creds).await;
    // Shared keys: B verifies what A signed (and caches it as verified).
    assert_eq!(status(&b, &token).await, StatusCode::OK);
    let res = a
        .client
        .post(format!("{}/oauth/revoke", a.base))
        .basic_auth(&creds.client_id, Some(&creds.client_secret))
        .form(&[("token", token.as_str())])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(status(&a, &token).await, StatusCode::UNAUTHORIZED);
    let took = refused_within(&b, &token, Duration::from_secs(1)).await;
    eprintln!("revocation reached node B after {took:?}");
}

/// A user's refresh chain, started through the auth layer of node `n`.
async fn user_refresh_token(n: &Node, org: &OrgId, app_secret: &str, app: &str) -> (UserId, Value) {
    person_pair(
        n,
        org,
        (app, app_secret),
        "multi@example.com",
        Role::Editor,
        "users:read",
    )
    .await
}

/// A confidential client of `org` with `scopes`: (client_id, secret).
async fn app_client_with(n: &Node, org: &OrgId, scopes: &str) -> (String, String) {
    let secret = gatehouse_auth::secrets::new_client_secret();
    let id = gatehouse_domain::ClientId::generate();
    n.running
        .store
        .insert_client(
            org,
            &gatehouse_store::NewClient {
                id: id.clone(),
                name: "multi".into(),
                secret_hash: Some(gatehouse_auth::secrets::hash_secret(&secret)),
                scopes: gatehouse_domain::ScopeSet::parse(scopes).unwrap(),
                redirect_uris: vec!["https://app.example/cb".into()],
                post_logout_redirect_uris: vec![],
                admin_approved: false,
                owner: None,
                created_at: Timestamp::now(),
            },
            crate::common::operator(),
        )
        .await
        .unwrap();
    (id.to_string(), secret)
}

async fn app_client(n: &Node, org: &OrgId) -> (String, String) {
    app_client_with(n, org, "users:read").await
}

/// A new organization on `plan` (enterprise numbers in `limits`).
async fn new_org(n: &Node, plan: gatehouse_domain::Plan, limits: Option<(u32, u32)>) -> OrgId {
    let org = OrgId::generate();
    n.running
        .store
        .create_org(&gatehouse_domain::Organization {
            id: org.clone(),
            name: "Other".into(),
            plan,
            per_minute: limits.map(|l| l.0),
            per_second: limits.map(|l| l.1),
            created_at: Timestamp::now(),
        })
        .await
        .unwrap();
    org
}

/// A client-credentials token for (`app`, `secret`) from node `n`.
async fn token_from(n: &Node, app: &str, secret: &str) -> String {
    let res = n
        .client
        .post(format!("{}/oauth/token", n.base))
        .basic_auth(app, Some(secret))
        .form(&[("grant_type", "client_credentials")])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    res.json::<Value>().await.unwrap()["access_token"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[tokio::test]
async fn d44_sixteen_concurrent_refreshes_across_nodes_get_one_successor() {
    let (a, b, creds) = two_nodes().await;
    let org = OrgId::parse(&creds.org).unwrap();
    let (app, secret) = app_client(&a, &org).await;
    let (_, pair) = user_refresh_token(&a, &org, &secret, &app).await;
    let refresh = pair["refresh_token"].as_str().unwrap().to_owned();
    let mut calls = Vec::new();
    for i in 0..16 {
        let n = if i % 2 == 0 { &a } else { &b };
        let (client, url) = (n.client.clone(), format!("{}/oauth/token", n.base));
        let (app, secret, refresh) = (app.clone(), secret.clone(), refresh.clone());
        calls.push(tokio::spawn(async move {
            let res = client
                .post(url)
                .basic_auth(app, Some(secret))
                .form(&[
                    ("grant_type", "refresh_token"),
                    ("refresh_token", refresh.as_str()),
                ])
                .send()
                .await
                .unwrap();
            let status = res.status();
            (status, res.json::<Value>().await.unwrap())
        }));
    }
    let mut successors = std::collections::BTreeSet::new();
    for c in calls {
        let (status, body) = c.await.unwrap();
        assert_eq!(
            status,
            StatusCode::OK,
            "D24: every replay in the window succeeds: {body}"
        );
        successors.insert((
            body["refresh_token"].as_str().unwrap().to_owned(),
            body["access_token"].as_str().unwrap().to_owned(),
        ));
    }
    assert_eq!(successors.len(), 1, "one successor pair across both nodes");
}

#[tokio::test]
async fn d44_a_user_deleted_through_one_node_cannot_use_a_token_on_the_other() {
    let (a, b, creds) = two_nodes().await;
    let org = OrgId::parse(&creds.org).unwrap();
    let (app, secret) = app_client(&a, &org).await;
    let (user, pair) = user_refresh_token(&a, &org, &secret, &app).await;
    let token = pair["access_token"].as_str().unwrap().to_owned();
    assert_eq!(status(&a, &token).await, StatusCode::OK);
    // Delete the user through node B's API.
    let admin = {
        let res = b
            .client
            .post(format!("{}/oauth/token", b.base))
            .basic_auth(&creds.client_id, Some(&creds.client_secret))
            .form(&[
                ("grant_type", "client_credentials"),
                ("scope", "users:write"),
            ])
            .send()
            .await
            .unwrap();
        res.json::<Value>().await.unwrap()["access_token"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let res = b
        .client
        .delete(format!("{}/v1/users/{user}", b.base))
        .bearer_auth(&admin)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::NO_CONTENT);
    let took = refused_within(&a, &token, Duration::from_secs(1)).await;
    eprintln!("deletion reached node A after {took:?}");
    // The chain is gone for both nodes.
    let res = a
        .client
        .post(format!("{}/oauth/token", a.base))
        .basic_auth(&app, Some(&secret))
        .form(&[
            ("grant_type", "refresh_token"),
            ("refresh_token", pair["refresh_token"].as_str().unwrap()),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::BAD_REQUEST);
}

/// D28 across nodes: a free-plan client sending through two nodes is limited
/// at the plan's numbers (10 in any second), not twice them.
#[tokio::test]
async fn d44_rate_limits_count_across_nodes() {
    let (a, b, _) = two_nodes().await;
    let org = new_org(&a, gatehouse_domain::Plan::Free, None).await;
    let (app, secret) = app_client(&a, &org).await;
    let token = token_from(&a, &app, &secret).await;
    // Start right after a second boundary so the burst fits in one second.
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_millis();
    tokio::time::sleep(Duration::from_millis(u64::from(1000 - ms) + 20)).await;
    // Twenty at once, ten through each node.
    let started = Instant::now();
    let mut calls = Vec::new();
    for i in 0..20 {
        let n = if i % 2 == 0 { &a } else { &b };
        let req = n
            .client
            .get(format!("{}/v1/users", n.base))
            .bearer_auth(&token);
        calls.push(tokio::spawn(async move { req.send().await.unwrap() }));
    }
    let mut remaining_seen = Vec::new();
    for c in calls {
        let res = c.await.unwrap();
        match res.status() {
            StatusCode::OK => remaining_seen.push(
                res.headers()["x-ratelimit-remaining"]
                    .to_str()
                    .unwrap()
                    .parse::<u32>()
                    .unwrap(),
            ),
            StatusCode::TOO_MANY_REQUESTS => {}
            other => panic!("unexpected {other}"),
        }
    }
    assert!(
        started.elapsed() < Duration::from_millis(900),
        "the burst fits in one second ({:?})",
        started.elapsed()
    );
    assert_eq!(remaining_seen.len(), 10, "the plan's 10 per second, not 20");
    // One count for both nodes: each admission saw its own Remaining.
    remaining_seen.sort_unstable();
    assert_eq!(remaining_seen, (50..60).collect::<Vec<u32>>());
}

/// A child process that is killed if the test ends early.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// D44: `kill -9` of one node mid-load loses no acknowledged write, and the
/// other node keeps serving throughout.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn d44_killing_a_node_mid_load_loses_no_acknowledged_write() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    let url = crate::common::postgres_url().await;
    let key = gatehouse_auth::MasterKey::generate().to_text();
    let b = Arc::new(node(&url, &key).await);
    // Node A: a real process, so it can be killed outright.
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_gatehouse"));
    for (k, _) in std::env::vars() {
        if k.starts_with("GATEHOUSE_") {
            cmd.env_remove(k);
        }
    }
    let mut child = KillOnDrop(
        cmd.arg("--data-dir")
            .arg(dir.path())
            .arg("--database-url")
            .arg(&url)
            .args(["serve", "--behind-proxy", "--admin-addr", "127.0.0.1:0"])
            .arg("--http-addr")
            .arg(format!("127.0.0.1:{port}"))
            .env("GATEHOUSE_MASTER_KEY", &key)
            .env("GATEHOUSE_PUBLIC_URL", crate::common::PUBLIC_URL)
            .env("GATEHOUSE_LOG", "warn")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    let a_base = format!("http://127.0.0.1:{port}");
    let plain = reqwest::Client::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Ok(r) = plain.get(format!("{a_base}/readyz")).send().await
            && r.status() == StatusCode::OK
        {
            break;
        }
        assert!(Instant::now() < deadline, "node A did not become ready");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // An enterprise organization, so the load meets no rate limit.
    let org = new_org(
        &b,
        gatehouse_domain::Plan::Enterprise,
        Some((10_000_000, 1_000_000)),
    )
    .await;
    let (app, secret) = app_client_with(&b, &org, "users:read users:write").await;
    let token = token_from(&b, &app, &secret).await;

    let stop = Arc::new(AtomicBool::new(false));
    let mut writers = Vec::new();
    for w in 0..4 {
        let to_a = w % 2 == 0;
        let (client, base) = if to_a {
            (plain.clone(), a_base.clone())
        } else {
            (b.client.clone(), b.base.clone())
        };
        let (token, stop) = (token.clone(), stop.clone());
        writers.push(tokio::spawn(async move {
            let mut acknowledged = Vec::new();
            let mut i = 0;
            while !stop.load(Ordering::SeqCst) {
                i += 1;
                let sent = client
                    .post(format!("{base}/v1/users"))
                    .bearer_auth(&token)
                    .json(&serde_json::json!({
                        "email": format!("w{w}-{i}@example.com"),
                        "name": "Load",
                        "role": "viewer",
                    }))
                    .timeout(Duration::from_secs(5))
                    .send()
                    .await;
                match sent {
                    Ok(res) if res.status() == StatusCode::CREATED => {
                        let body: Value = res.json().await.unwrap();
                        acknowledged.push(body["data"]["id"].as_str().unwrap().to_owned());
                    }
                    Ok(res) => assert!(to_a, "node B answered {}", res.status()),
                    // Node A is gone: its connections fail; not acknowledged.
                    Err(_) => assert!(to_a, "node B stopped answering"),
                }
            }
            (to_a, acknowledged)
        }));
    }
    tokio::time::sleep(Duration::from_millis(700)).await;
    child.0.kill().unwrap(); // SIGKILL
    child.0.wait().unwrap();
    tokio::time::sleep(Duration::from_millis(700)).await;
    stop.store(true, Ordering::SeqCst);
    let (mut on_a, mut on_b) = (Vec::new(), Vec::new());
    for w in writers {
        let (to_a, ids) = w.await.unwrap();
        if to_a {
            on_a.extend(ids);
        } else {
            on_b.extend(ids);
        }
    }
    assert!(
        !on_a.is_empty(),
        "node A acknowledged writes before it died"
    );
    assert!(!on_b.is_empty(), "node B kept serving");
    // Every acknowledged write, on either node, is there.
    for id in on_a.iter().chain(&on_b) {
        let res = b
            .client
            .get(format!("{}/v1/users/{id}", b.base))
            .bearer_auth(&token)
            .send()
            .await
            .unwrap();
        assert_eq!(
            res.status(),
            StatusCode::OK,
            "acknowledged user {id} is kept"
        );
    }
    eprintln!(
        "acknowledged: {} through A (killed), {} through B",
        on_a.len(),
        on_b.len()
    );
}

/// D50 across nodes: the same POST with one `Idempotency-Key`, sent to two
/// nodes at once (several rounds), runs once; the other answer is 409
/// `IDEMPOTENCY_KEY_IN_USE` with `Retry-After: 1`, or the replay.
#[tokio::test]
async fn d50_two_nodes_racing_one_idempotency_key_create_once() {
    let (a, b, _) = two_nodes().await;
    let org = new_org(
        &a,
        gatehouse_domain::Plan::Enterprise,
        Some((100_000, 10_000)),
    )
    .await;
    let (app, secret) = app_client_with(&a, &org, "users:read users:write").await;
    let ta = token_from(&a, &app, &secret).await;
    let tb = token_from(&b, &app, &secret).await;
    for round in 0..8 {
        let body = serde_json::json!({
            "email": format!("race{round}@example.com"), "name": "Race", "role": "viewer"
        });
        let key = format!("race-{round}");
        let send = |n: &Node, t: &str| {
            n.client
                .post(format!("{}/v1/users", n.base))
                .bearer_auth(t)
                .header("idempotency-key", &key)
                .json(&body)
                .send()
        };
        let (ra, rb) = tokio::join!(send(&a, &ta), send(&b, &tb));
        let mut ran = 0;
        for res in [ra.unwrap(), rb.unwrap()] {
            let replayed = res.headers().contains_key("idempotent-replayed");
            let retry = res
                .headers()
                .get("retry-after")
                .map(|v| v.to_str().unwrap().to_owned());
            match res.status() {
                StatusCode::CREATED if !replayed => ran += 1,
                StatusCode::CREATED => {}
                StatusCode::CONFLICT => {
                    assert_eq!(retry.as_deref(), Some("1"));
                    let v: Value = res.json().await.unwrap();
                    assert_eq!(v["error"]["code"], "IDEMPOTENCY_KEY_IN_USE");
                }
                other => panic!("round {round}: {other}"),
            }
        }
        assert_eq!(ran, 1, "round {round}: exactly one node ran the request");
        let listed: Value = a
            .client
            .get(format!("{}/v1/users?q=race{round}@example.com", a.base))
            .bearer_auth(&ta)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(listed["meta"]["total"], 1, "round {round}");
    }
}

/// D49 on several nodes: a consent remembered through node A skips the
/// page on node B; a code issued on A is exchanged on B for an ID token
/// with the nonce; B answers userinfo; logging out through A ends the
/// session's chain for B, whose refresh fails and whose access token is
/// refused within D44's second.
#[tokio::test]
async fn d49_consent_logout_and_userinfo_hold_across_nodes() {
    let (a, b, _) = two_nodes().await;
    let org = new_org(&a, gatehouse_domain::Plan::Pro, None).await;
    let (app, secret) = app_client_with(&a, &org, "openid email users:read").await;
    let user = a
        .running
        .store
        .insert_user(
            &org,
            &NewUser {
                id: UserId::generate(),
                email: Email::parse("oidc-multi@example.com").unwrap(),
                name: Name::parse("Multi Node").unwrap(),
                role: Role::Viewer,
                status: UserStatus::Active,
                password_hash: Some("$argon2id$placeholder".into()),
                created_at: Timestamp::now(),
            },
            crate::common::operator(),
        )
        .await
        .unwrap();
    let verifier = "multi-node-oidc-verifier-0123456789-abcdefghijklmnopqrstuvwxyz";
    let params = AuthorizeParams {
        response_type: Some("code".into()),
        client_id: Some(app.clone()),
        redirect_uri: Some("https://app.example/cb".into()),
        scope: Some("openid email".into()),
        code_challenge: Some(pkce::challenge_for(verifier)),
        code_challenge_method: Some("S256".into()),
        nonce: Some("multi-nonce".into()),
        ..AuthorizeParams::default()
    };
    let (sa, sb) = (&a.running.state, &b.running.state);
    let req_a = sa.app.check_authorize(&params).await.unwrap();
    let granted = req_a.grantable(Role::Viewer);
    let (cookie, session) = sa
        .app
        .create_session(
            &user,
            &org,
            &req_a.client.id,
            &gatehouse_domain::session::BrowserUse::new("127.0.0.1", Some("multinode")),
            None,
        )
        .await
        .unwrap();
    sa.app
        .remember_consent(
            &req_a,
            &user,
            granted,
            &gatehouse_domain::event::RequestRef {
                id: "req_multinode".into(),
                idempotency_key: None,
                source: None,
            },
        )
        .await
        .unwrap();
    let req_b = sb.app.check_authorize(&params).await.unwrap();
    assert!(
        sb.app
            .remembered_consent_covers(&req_b, &user, granted)
            .await
            .unwrap(),
        "a consent remembered through A is B's too"
    );
    let code = sa
        .app
        .issue_code(&req_a, &user, &session, granted)
        .await
        .unwrap();
    let res = b
        .client
        .post(format!("{}/oauth/token", b.base))
        .basic_auth(&app, Some(&secret))
        .form(&[
            ("grant_type", "authorization_code"),
            ("code", code.as_str()),
            ("redirect_uri", "https://app.example/cb"),
            ("code_verifier", verifier),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let pair: Value = res.json().await.unwrap();
    let id_token = pair["id_token"].as_str().expect("an ID token").to_owned();
    let access = pair["access_token"].as_str().unwrap().to_owned();
    let info: Value = b
        .client
        .get(format!("{}/oauth/userinfo", b.base))
        .bearer_auth(&access)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(info["sub"], user.id.as_str());
    assert_eq!(info["email"], "oidc-multi@example.com");

    // Logout through A with the hint.
    let res = a
        .client
        .get(format!("{}/oauth/logout?id_token_hint={id_token}", a.base))
        .header("cookie", format!("__Host-gh_session={cookie}"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK, "the signed-out page");
    let res = b
        .client
        .post(format!("{}/oauth/token", b.base))
        .basic_auth(&app, Some(&secret))
        .form(&[
            ("grant_type", "refresh_token"),
            ("refresh_token", pair["refresh_token"].as_str().unwrap()),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(
        res.status(),
        StatusCode::BAD_REQUEST,
        "the chain is revoked"
    );
    let deadline = Instant::now() + Duration::from_secs(1);
    loop {
        let res = b
            .client
            .get(format!("{}/oauth/userinfo", b.base))
            .bearer_auth(&access)
            .send()
            .await
            .unwrap();
        if res.status() == StatusCode::UNAUTHORIZED {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "D44: B refuses the logged-out session's token within a second"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A client-credentials token of the bootstrap client with `scope`.
async fn cc_token_with(n: &Node, creds: &run::BootstrapCredentials, scope: &str) -> String {
    let res = n
        .client
        .post(format!("{}/oauth/token", n.base))
        .basic_auth(&creds.client_id, Some(&creds.client_secret))
        .form(&[("grant_type", "client_credentials"), ("scope", scope)])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    res.json::<Value>().await.unwrap()["access_token"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// D46: an application deleted through node B's management API: a token
/// issued to it by node A is refused on node A within D44's second; and
/// usage counted on both nodes adds up in storage.
#[tokio::test]
async fn d46_a_deleted_application_stops_on_the_other_node_and_usage_adds_up() {
    let (a, b, creds) = two_nodes().await;
    let manager = cc_token_with(
        &b,
        &creds,
        "applications:read applications:write users:read products:read",
    )
    .await;
    let res = b
        .client
        .post(format!("{}/v1/applications", b.base))
        .bearer_auth(&manager)
        .json(&serde_json::json!({"name": "Doomed", "type": "confidential", "scopes": ["users:read"]}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::CREATED);
    let body: Value = res.json().await.unwrap();
    let app = body["data"]["id"].as_str().unwrap().to_owned();
    let secret = body["data"]["client_secret"].as_str().unwrap().to_owned();
    let doomed = run::BootstrapCredentials {
        org: creds.org.clone(),
        client_id: app.clone(),
        client_secret: secret,
    };
    let token = cc_token_with(&a, &doomed, "users:read").await;
    // Three requests on A and two on B with the application's token.
    for n in [&a, &a, &a, &b, &b] {
        assert_eq!(status(n, &token).await, StatusCode::OK);
    }
    let started = Instant::now();
    let counted = loop {
        let res = a
            .client
            .get(format!("{}/v1/applications/{app}/usage", a.base))
            .bearer_auth(&manager)
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), StatusCode::OK);
        let body: Value = res.json().await.unwrap();
        let total: u64 = body["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| b["requests"].as_u64().unwrap())
            .sum();
        if total >= 5 || started.elapsed() > Duration::from_secs(10) {
            break total;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    assert_eq!(counted, 5, "D46: the counts of both nodes add up, exactly");
    let res = b
        .client
        .delete(format!("{}/v1/applications/{app}", b.base))
        .bearer_auth(&manager)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::NO_CONTENT);
    let took = refused_within(&a, &token, Duration::from_secs(1)).await;
    eprintln!("the deletion reached node A after {took:?}");

    // Removing a scope through B: A refuses the application's earlier
    // tokens within the second too.
    let res = b
        .client
        .post(format!("{}/v1/applications", b.base))
        .bearer_auth(&manager)
        .json(&serde_json::json!({"name": "Narrowed", "type": "confidential", "scopes": ["users:read", "products:read"]}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::CREATED);
    let body: Value = res.json().await.unwrap();
    let narrowed = run::BootstrapCredentials {
        org: creds.org.clone(),
        client_id: body["data"]["id"].as_str().unwrap().to_owned(),
        client_secret: body["data"]["client_secret"].as_str().unwrap().to_owned(),
    };
    let token = cc_token_with(&a, &narrowed, "users:read products:read").await;
    assert_eq!(status(&a, &token).await, StatusCode::OK);
    let res = b
        .client
        .patch(format!("{}/v1/applications/{}", b.base, narrowed.client_id))
        .bearer_auth(&manager)
        .json(&serde_json::json!({"scopes": ["products:read"]}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let took = refused_within(&a, &token, Duration::from_secs(1)).await;
    eprintln!("the narrowing reached node A after {took:?}");
}

/// Issue 16: the search index of each node keeps up with the other node's
/// writes. Node A's index is built first; then users and products are
/// written, renamed and deleted through node B (eight of the users at once);
/// A's very next search sees every one of them, `total` exact (D14, D17).
#[tokio::test]
async fn search_on_one_node_sees_writes_made_through_the_other() {
    let (a, b, creds) = two_nodes().await;
    let token = cc_token_with(
        &a,
        &creds,
        "users:read users:write products:read products:write",
    )
    .await;
    let search = |n: &Node, path: String| {
        let (client, url, token) = (n.client.clone(), format!("{}{path}", n.base), token.clone());
        async move {
            let res = client.get(url).bearer_auth(&token).send().await.unwrap();
            assert_eq!(res.status(), StatusCode::OK);
            let body: Value = res.json().await.unwrap();
            let ids: Vec<String> = body["data"]
                .as_array()
                .unwrap()
                .iter()
                .map(|u| u["id"].as_str().unwrap().to_owned())
                .collect();
            (body["meta"]["total"].as_u64().unwrap(), ids)
        }
    };
    // A's indexes exist before the writes (a search builds them).
    assert_eq!(search(&a, "/v1/users?q=zephyrine".into()).await.0, 0);
    assert_eq!(search(&a, "/v1/products?q=zephyr".into()).await.0, 0);

    let creates = (0..8).map(|i| {
        let (client, base, token) = (b.client.clone(), b.base.clone(), token.clone());
        async move {
            let res = client
                .post(format!("{base}/v1/users"))
                .bearer_auth(&token)
                .json(&serde_json::json!({
                    "email": format!("zephyrine.{i}@example.com"),
                    "name": format!("Zephyrine {i}"),
                    "role": "viewer",
                }))
                .send()
                .await
                .unwrap();
            assert_eq!(res.status(), StatusCode::CREATED);
            res.json::<Value>().await.unwrap()["data"]["id"]
                .as_str()
                .unwrap()
                .to_owned()
        }
    });
    let ids = futures_util::future::join_all(creates).await;
    let started = Instant::now();
    let (total, found) = search(&a, "/v1/users?q=ZEPHYRINE&limit=100".into()).await;
    assert_eq!(total, 8);
    let mut want = ids.clone();
    want.sort();
    let mut found_sorted = found.clone();
    found_sorted.sort();
    assert_eq!(found_sorted, want);

    // A rename moves a user out of a search, a deletion removes one.
    assert_eq!(search(&a, "/v1/users?q=zephyrine%200".into()).await.0, 1);
    let res = b
        .client
        .patch(format!("{}/v1/users/{}", b.base, ids[0]))
        .bearer_auth(&token)
        .json(&serde_json::json!({"name": "Someone Else"}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let res = b
        .client
        .delete(format!("{}/v1/users/{}", b.base, ids[1]))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::NO_CONTENT);
    // The renamed user's e-mail still holds the word: only the deletion
    // changes this total.
    assert_eq!(search(&a, "/v1/users?q=zephyrine".into()).await.0, 7);
    assert_eq!(search(&a, "/v1/users?q=zephyrine%200".into()).await.0, 0);

    let res = b
        .client
        .post(format!("{}/v1/products", b.base))
        .bearer_auth(&token)
        .json(&serde_json::json!({"name": "Zephyr Kite", "sku": "ZK-1", "price": 100, "stock": 3}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::CREATED);
    assert_eq!(search(&a, "/v1/products?q=zeph%20kit".into()).await.0, 1);
    assert_eq!(
        search(&a, "/v1/products?q=zeph&status=out_of_stock".into())
            .await
            .0,
        0
    );
    eprintln!(
        "node A's searches saw node B's writes {:?} after they were acknowledged",
        started.elapsed()
    );
}

/// D14 (revised): a user created through node A is found by `q` on node B
/// within one second (B is polled for up to a second; the test fails
/// otherwise). B's index of the organization's users exists before the
/// write, so B must learn of it from storage's change feed.
#[tokio::test]
async fn d14_revised_a_user_created_on_one_node_is_found_by_q_on_the_other_within_a_second() {
    let (a, b, creds) = two_nodes().await;
    let token = cc_token_with(&a, &creds, "users:read users:write").await;
    let total = |n: &Node, q: &str| {
        let (client, url, token) = (
            n.client.clone(),
            format!("{}/v1/users?q={q}", n.base),
            token.clone(),
        );
        async move {
            let res = client.get(url).bearer_auth(&token).send().await.unwrap();
            assert_eq!(res.status(), StatusCode::OK);
            let body: Value = res.json().await.unwrap();
            (
                body["meta"]["total"].as_u64().unwrap(),
                body["data"][0]["id"].as_str().map(str::to_owned),
            )
        }
    };
    assert_eq!(total(&b, "quillon").await.0, 0, "B's index is built");

    let res = a
        .client
        .post(format!("{}/v1/users", a.base))
        .bearer_auth(&token)
        .json(&serde_json::json!({
            "email": "quillon.one@example.com",
            "name": "Quillon One",
            "role": "viewer",
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::CREATED);
    let id = res.json::<Value>().await.unwrap()["data"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let created = Instant::now();
    loop {
        let (n, first) = total(&b, "QUILLON%20o").await;
        if n == 1 {
            assert_eq!(first.as_deref(), Some(id.as_str()));
            break;
        }
        assert!(
            created.elapsed() < Duration::from_secs(1),
            "node B's `q` did not find the user created on node A within 1 s"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    eprintln!(
        "node B found node A's new user {:?} after it was acknowledged",
        created.elapsed()
    );
}

/// D28 (revised), issue 16: a plan above 50 per second is counted by
/// leases. Two nodes serve one credential of 150 per minute and 100 per
/// second as fast as it is admitted (waiting as `Retry-After` says) for
/// three seconds: together they admit no more than the plan (the leases are
/// counted in the shared windows when granted), and what the leases hold
/// back does not starve the credential (at least 90 % of the 150).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn d28_leased_windows_never_admit_more_than_the_plan_across_nodes() {
    let (a, b, _) = two_nodes().await;
    let org = new_org(&a, gatehouse_domain::Plan::Enterprise, Some((150, 100))).await;
    let (app, secret) = app_client(&a, &org).await;
    let token = token_from(&a, &app, &secret).await;
    let admitted = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let deadline = Instant::now() + Duration::from_secs(3);
    let mut workers = Vec::new();
    for w in 0..16 {
        let n = if w % 2 == 0 { &a } else { &b };
        let (client, url, token, admitted) = (
            n.client.clone(),
            format!("{}/v1/users", n.base),
            token.clone(),
            admitted.clone(),
        );
        workers.push(tokio::spawn(async move {
            while Instant::now() < deadline {
                let res = client.get(&url).bearer_auth(&token).send().await.unwrap();
                match res.status() {
                    StatusCode::OK => {
                        admitted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    }
                    StatusCode::TOO_MANY_REQUESTS => {
                        // Wait as told, so the credential is not suspended.
                        let wait: u64 = res.headers()["retry-after"]
                            .to_str()
                            .unwrap()
                            .parse()
                            .unwrap();
                        let until = (Instant::now() + Duration::from_secs(wait)).min(deadline);
                        tokio::time::sleep_until(until.into()).await;
                    }
                    other => panic!("unexpected {other}"),
                }
            }
        }));
    }
    for w in workers {
        w.await.unwrap();
    }
    let admitted = admitted.load(std::sync::atomic::Ordering::Relaxed);
    eprintln!("two nodes admitted {admitted} of a plan of 150 per minute");
    assert!(admitted <= 150, "{admitted} admitted: more than the plan");
    assert!(admitted >= 135, "only {admitted} of 150 admitted");
}

/// A new person of `role` in `org`, signed in through the auth layer of
/// node `n` to `app` (a confidential client with the redirect URI
/// `https://app.example/cb`), asking for `scope`: their id and token
/// response.
async fn person_pair(
    n: &Node,
    org: &OrgId,
    (console, secret): (&str, &str),
    email: &str,
    role: Role,
    scope: &str,
) -> (UserId, Value) {
    let state = &n.running.state;
    let user = n
        .running
        .store
        .insert_user(
            org,
            &NewUser {
                id: UserId::generate(),
                email: Email::parse(email).unwrap(),
                name: Name::parse("Multi Node").unwrap(),
                role,
                status: UserStatus::Active,
                password_hash: Some("$argon2id$placeholder".into()),
                created_at: Timestamp::now(),
            },
            crate::common::operator(),
        )
        .await
        .unwrap();
    let verifier = "multi-node-verifier-0123456789-abcdefghijklmnopqrstuvwxyz";
    let params = AuthorizeParams {
        response_type: Some("code".into()),
        client_id: Some(console.into()),
        redirect_uri: Some("https://app.example/cb".into()),
        scope: Some(scope.into()),
        code_challenge: Some(pkce::challenge_for(verifier)),
        code_challenge_method: Some("S256".into()),
        ..AuthorizeParams::default()
    };
    let req = state.app.check_authorize(&params).await.unwrap();
    let (_, session) = state
        .app
        .create_session(
            &user,
            &req.client.org,
            &req.client.id,
            &gatehouse_domain::session::BrowserUse::new("127.0.0.1", Some("multinode")),
            None,
        )
        .await
        .unwrap();
    let code = state
        .app
        .issue_code(&req, &user, &session, req.grantable(role))
        .await
        .unwrap();
    let res = n
        .client
        .post(format!("{}/oauth/token", n.base))
        .basic_auth(console, Some(secret))
        .form(&[
            ("grant_type", "authorization_code"),
            ("code", code.as_str()),
            ("redirect_uri", "https://app.example/cb"),
            ("code_verifier", verifier),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    (user.id, res.json().await.unwrap())
}

/// [`person_pair`]'s access token.
async fn person_token(
    n: &Node,
    org: &OrgId,
    console: (&str, &str),
    email: &str,
    role: Role,
    scope: &str,
) -> (UserId, String) {
    let (id, pair) = person_pair(n, org, console, email, role, scope).await;
    (id, pair["access_token"].as_str().unwrap().to_owned())
}

/// A JSON request to node `n`: (status, body).
async fn send_json(
    n: &Node,
    method: reqwest::Method,
    path: &str,
    token: &str,
    body: Option<Value>,
) -> (StatusCode, Value) {
    let mut req = n
        .client
        .request(method, format!("{}{path}", n.base))
        .bearer_auth(token);
    if let Some(b) = body {
        req = req.json(&b);
    }
    let res = req.send().await.unwrap();
    let status = res.status();
    (status, res.json().await.unwrap_or(Value::Null))
}

/// client_credentials at node `n`: (status, body).
async fn cc_answer(n: &Node, app: &str, secret: &str) -> (StatusCode, Value) {
    let res = n
        .client
        .post(format!("{}/oauth/token", n.base))
        .basic_auth(app, Some(secret))
        .form(&[("grant_type", "client_credentials")])
        .send()
        .await
        .unwrap();
    let status = res.status();
    (status, res.json().await.unwrap())
}

/// D46 (revised) across nodes: what an admin creates through node A is
/// theirs; their deactivation through A ends their key and suspends their
/// application on node B within a second; a move through B needs a new
/// secret on A.
#[tokio::test]
async fn d46_revised_an_admins_deactivation_on_one_node_ends_their_key_and_suspends_their_application_on_the_other()
 {
    use reqwest::Method;
    let (a, b, creds) = two_nodes().await;
    let org = OrgId::parse(&creds.org).unwrap();
    let console = app_client_with(
        &a,
        &org,
        "applications:read applications:write users:read users:write",
    )
    .await;
    let manage = "applications:read applications:write users:read users:write";
    let (boss, admin) = person_token(
        &a,
        &org,
        (&console.0, &console.1),
        "boss@example.com",
        Role::Admin,
        manage,
    )
    .await;
    let (heir, _) = person_token(
        &a,
        &org,
        (&console.0, &console.1),
        "heir@example.com",
        Role::Admin,
        manage,
    )
    .await;

    let (st, key) = send_json(
        &a,
        Method::POST,
        "/v1/api-keys",
        &admin,
        Some(serde_json::json!({"name": "k", "scopes": ["users:read", "users:write"]})),
    )
    .await;
    assert_eq!(st, StatusCode::CREATED, "{key}");
    assert_eq!(key["data"]["owner_id"], boss.to_string());
    let key = key["data"]["key"].as_str().unwrap().to_owned();
    let (st, app) = send_json(
        &a,
        Method::POST,
        "/v1/applications",
        &admin,
        Some(serde_json::json!({"name": "a", "type": "confidential", "scopes": ["users:read"]})),
    )
    .await;
    assert_eq!(st, StatusCode::CREATED, "{app}");
    assert_eq!(app["data"]["owner_id"], boss.to_string());
    let app_id = app["data"]["id"].as_str().unwrap().to_owned();
    let secret = app["data"]["client_secret"].as_str().unwrap().to_owned();
    let app_token = token_from(&b, &app_id, &secret).await;
    assert_eq!(status(&b, &key).await, StatusCode::OK);
    assert_eq!(status(&b, &app_token).await, StatusCode::OK);

    let ops = cc_token_with(
        &a,
        &creds,
        "users:write applications:read applications:write",
    )
    .await;
    let (st, _) = send_json(
        &a,
        Method::PATCH,
        &format!("/v1/users/{boss}"),
        &ops,
        Some(serde_json::json!({"status": "inactive"})),
    )
    .await;
    assert_eq!(st, StatusCode::OK);
    let took = refused_within(&b, &key, Duration::from_secs(1)).await;
    eprintln!("the deactivated admin's key was refused on node B after {took:?}");
    refused_within(&b, &app_token, Duration::from_secs(1)).await;
    let (st, body) = cc_answer(&b, &app_id, &secret).await;
    assert_eq!(
        (st, body["error_description"].as_str()),
        (StatusCode::UNAUTHORIZED, Some("application suspended"))
    );

    // Moved through node B: node A refuses the leaver's secret until a
    // rotation, and B takes the new one.
    let (st, moved) = send_json(
        &b,
        Method::PATCH,
        &format!("/v1/applications/{app_id}"),
        &ops,
        Some(serde_json::json!({"owner_id": heir.to_string()})),
    )
    .await;
    assert_eq!(st, StatusCode::OK, "{moved}");
    assert_eq!(
        moved["data"]["suspended_reason"],
        "secret_rotation_required"
    );
    let (st, body) = cc_answer(&a, &app_id, &secret).await;
    assert_eq!(
        (st, body["error_description"].as_str()),
        (StatusCode::UNAUTHORIZED, Some("application suspended"))
    );
    let rotator = cc_token_with(&a, &creds, "applications:write users:read").await;
    let (st, rotated) = send_json(
        &a,
        Method::POST,
        &format!("/v1/applications/{app_id}/secret"),
        &rotator,
        None,
    )
    .await;
    assert_eq!(st, StatusCode::CREATED, "{rotated}");
    let fresh = rotated["data"]["client_secret"].as_str().unwrap();
    assert_eq!(cc_answer(&b, &app_id, fresh).await.0, StatusCode::OK);
}
