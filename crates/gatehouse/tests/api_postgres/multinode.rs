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
    let state = &n.running.state;
    let user = state
        .store
        .insert_user(
            org,
            &NewUser {
                id: UserId::generate(),
                email: Email::parse("multi@example.com").unwrap(),
                name: Name::parse("Multi Node").unwrap(),
                role: Role::Editor,
                status: UserStatus::Active,
                password_hash: Some("$argon2id$placeholder".into()),
                created_at: Timestamp::now(),
            },
        )
        .await
        .unwrap();
    let verifier = "multi-node-verifier-0123456789-abcdefghijklmnopqrstuvwxyz";
    let params = AuthorizeParams {
        response_type: Some("code".into()),
        client_id: Some(app.into()),
        redirect_uri: Some("https://app.example/cb".into()),
        scope: Some("users:read".into()),
        state: None,
        code_challenge: Some(pkce::challenge_for(verifier)),
        code_challenge_method: Some("S256".into()),
    };
    let req = state.auth.check_authorize(&params).await.unwrap();
    let code = state
        .auth
        .issue_code(&req, &user, req.grantable(Role::Editor))
        .await
        .unwrap();
    let res = n
        .client
        .post(format!("{}/oauth/token", n.base))
        .basic_auth(app, Some(app_secret))
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

async fn app_client(n: &Node, org: &OrgId) -> (String, String) {
    let secret = gatehouse_auth::secrets::new_client_secret();
    let id = gatehouse_domain::ClientId::generate();
    n.running
        .state
        .store
        .insert_client(
            org,
            &gatehouse_store::NewClient {
                id: id.clone(),
                name: "multi".into(),
                secret_hash: Some(gatehouse_auth::secrets::hash_secret(&secret)),
                scopes: gatehouse_domain::ScopeSet::parse("users:read").unwrap(),
                redirect_uris: vec!["https://app.example/cb".into()],
                admin_approved: false,
                owner: None,
                created_at: Timestamp::now(),
            },
        )
        .await
        .unwrap();
    (id.to_string(), secret)
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
    let (a, b, creds) = two_nodes().await;
    let org = OrgId::generate();
    a.running
        .state
        .store
        .create_org(&gatehouse_domain::Organization {
            id: org.clone(),
            name: "Free".into(),
            plan: gatehouse_domain::Plan::Free,
            per_minute: None,
            per_second: None,
            created_at: Timestamp::now(),
        })
        .await
        .unwrap();
    let _ = creds;
    let (app, secret) = {
        let secret = gatehouse_auth::secrets::new_client_secret();
        let id = gatehouse_domain::ClientId::generate();
        a.running
            .state
            .store
            .insert_client(
                &org,
                &gatehouse_store::NewClient {
                    id: id.clone(),
                    name: "free".into(),
                    secret_hash: Some(gatehouse_auth::secrets::hash_secret(&secret)),
                    scopes: gatehouse_domain::ScopeSet::parse("users:read").unwrap(),
                    redirect_uris: vec![],
                    admin_approved: false,
                    owner: None,
                    created_at: Timestamp::now(),
                },
            )
            .await
            .unwrap();
        (id.to_string(), secret)
    };
    let token = {
        let res = a
            .client
            .post(format!("{}/oauth/token", a.base))
            .basic_auth(&app, Some(&secret))
            .form(&[("grant_type", "client_credentials")])
            .send()
            .await
            .unwrap();
        res.json::<Value>().await.unwrap()["access_token"]
            .as_str()
            .unwrap()
            .to_owned()
    };
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
