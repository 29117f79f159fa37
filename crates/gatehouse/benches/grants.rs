//! Token-endpoint throughput for the grants that need per-request state:
//! `authorization_code` (each code is single-use) and `refresh_token` (each
//! refresh token is single-use and rotates), next to `client_credentials`;
//! then user and product creation through `/v1` (one durable write each).
//!
//!     cargo bench -p gatehouse --bench grants            # HTTPS
//!     PROXY=1 cargo bench -p gatehouse --bench grants    # --behind-proxy plain HTTP
//!     HTTP2=1 cargo bench -p gatehouse --bench grants    # one HTTP/2 connection for all workers
//!     DATABASE_URL=postgres://… cargo bench -p gatehouse --bench grants  # on PostgreSQL
//!
//! The server runs in this process on loopback (as the integration tests
//! start it); codes are issued through the auth layer directly, since the
//! login pages are not what is measured. Settings: SECONDS (default 5),
//! CONCURRENCY (default 64). Reports requests per second.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use gatehouse::config::Settings;
use gatehouse::run;
use gatehouse_auth::flows::AuthorizeParams;
use gatehouse_auth::{password, pkce, secrets};
use gatehouse_domain::{
    ClientId, Email, Name, NewUser, OrgId, Role, ScopeSet, Timestamp, UserId, UserStatus,
};
use gatehouse_store::NewClient;

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    let seconds = env_or("SECONDS", 5);
    let concurrency = env_or("CONCURRENCY", 64) as usize;
    let proxy = std::env::var("PROXY").is_ok_and(|v| v == "1");
    let dir = tempfile::tempdir().unwrap();
    let mut settings = Settings::with_data_dir(dir.path().to_owned());
    settings.public_url = "https://localhost:8443".into();
    settings.https_addr = "127.0.0.1:0".parse().unwrap();
    settings.http_addr = "127.0.0.1:0".parse().unwrap();
    settings.admin_addr = "127.0.0.1:0".parse().unwrap();
    settings.behind_proxy = proxy;
    // DATABASE_URL=postgres://… runs the same bench on PostgreSQL (D54's
    // writer benchmark is asked of both backends).
    if let Ok(url) = std::env::var("DATABASE_URL") {
        settings.database_url = url;
    }
    let running = run::start(&settings).await.unwrap();
    let creds = running.bootstrap.clone().unwrap();
    let state = running.state.clone();
    // HTTP/1.1 keep-alive, one connection per worker, as wrk and most
    // server-to-server clients do; HTTP2=1 multiplexes every worker on one
    // HTTP/2 connection instead (h2 over TLS, h2c in proxy mode).
    let mut builder = reqwest::Client::builder().pool_max_idle_per_host(concurrency);
    builder = if std::env::var("HTTP2").is_ok_and(|v| v == "1") {
        builder.http2_prior_knowledge()
    } else {
        builder.http1_only()
    };
    let base = match running.https_addr {
        Some(a) => {
            let pem = std::fs::read(running.cert_path.as_ref().unwrap()).unwrap();
            builder = builder.add_root_certificate(reqwest::Certificate::from_pem(&pem).unwrap());
            format!("https://{a}")
        }
        None => format!("http://{}", running.http_addr),
    };
    let client = builder.build().unwrap();
    let org = OrgId::parse(&creds.org).unwrap();
    let user = running
        .store
        .insert_user(
            &org,
            &NewUser {
                id: UserId::generate(),
                email: Email::parse("bench@example.com").unwrap(),
                name: Name::parse("Bench").unwrap(),
                role: Role::Editor,
                status: UserStatus::Active,
                password_hash: Some(password::hash_blocking("a long bench passphrase")),
                created_at: Timestamp::now(),
            },
            gatehouse_store::conformance::teller(),
        )
        .await
        .unwrap();
    let (app, secret) = bench_client(&running, &org, "users:read products:read").await;
    let verifier = "bench-verifier-0123456789-abcdefghijklmnopqrstuvwxyz";
    let params = AuthorizeParams {
        response_type: Some("code".into()),
        client_id: Some(app.to_string()),
        redirect_uri: Some("https://app.example/cb".into()),
        scope: Some("users:read".into()),
        state: None,
        code_challenge: Some(pkce::challenge_for(verifier)),
        code_challenge_method: Some("S256".into()),
        ..AuthorizeParams::default()
    };
    let req = state.app.check_authorize(&params).await.unwrap();
    let scopes = req.grantable(Role::Editor);
    let (_, session) = state
        .app
        .create_session(
            &user,
            &req.client.org,
            &req.client.id,
            &gatehouse_domain::session::BrowserUse::new("127.0.0.1", Some("bench")),
            None,
        )
        .await
        .unwrap();

    println!(
        "Gatehouse token endpoint, {} mode, {seconds} s per grant, {concurrency} concurrent keep-alive clients, in-process server on loopback",
        if proxy {
            "--behind-proxy plain HTTP"
        } else {
            "HTTPS"
        }
    );

    // client_credentials
    let rate = blast(seconds, concurrency, {
        let (client, base, id, secret) = (
            client.clone(),
            base.clone(),
            creds.client_id.clone(),
            creds.client_secret.clone(),
        );
        move |_| {
            let (client, base, id, secret) =
                (client.clone(), base.clone(), id.clone(), secret.clone());
            async move {
                let res = client
                    .post(format!("{base}/oauth/token"))
                    .basic_auth(id, Some(secret))
                    .form(&[
                        ("grant_type", "client_credentials"),
                        ("scope", "users:read"),
                    ])
                    .send()
                    .await;
                Some(match res {
                    Ok(r) => read_token(r).await,
                    Err(_) => false,
                })
            }
        }
    })
    .await;
    println!(
        "{:<44} {rate:>10.0} req/s",
        "POST /oauth/token client_credentials"
    );

    // authorization_code: codes issued in advance, each exchanged once.
    // Enough codes for 8,000 exchanges a second, issued 64 at a time.
    let budget = (seconds as usize) * 8000;
    let mut codes = Vec::with_capacity(budget);
    while codes.len() < budget {
        let batch = (0..64).map(|_| state.app.issue_code(&req, &user, &session, scopes));
        for code in futures_util::future::join_all(batch).await {
            codes.push(code.unwrap());
        }
    }
    let codes = Arc::new(codes);
    let next = Arc::new(AtomicUsize::new(0));
    let rate = blast(seconds, concurrency, {
        let (client, base, id, secret) = (
            client.clone(),
            base.clone(),
            app.to_string(),
            secret.clone(),
        );
        move |_| {
            let (client, base, id, secret, codes, next) = (
                client.clone(),
                base.clone(),
                id.clone(),
                secret.clone(),
                codes.clone(),
                next.clone(),
            );
            async move {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let code = codes.get(i)?;
                let res = client
                    .post(format!("{base}/oauth/token"))
                    .basic_auth(id, Some(secret))
                    .form(&[
                        ("grant_type", "authorization_code"),
                        ("code", code),
                        ("redirect_uri", "https://app.example/cb"),
                        ("code_verifier", verifier),
                    ])
                    .send()
                    .await;
                Some(match res {
                    Ok(r) => read_token(r).await,
                    Err(_) => false,
                })
            }
        }
    })
    .await;
    println!(
        "{:<44} {rate:>10.0} req/s",
        "POST /oauth/token authorization_code"
    );

    // refresh_token: every worker walks its own chain, each refresh using the last successor.
    let mut chains = Vec::new();
    for _ in 0..concurrency {
        let code = state
            .app
            .issue_code(&req, &user, &session, scopes)
            .await
            .unwrap();
        let r: serde_json::Value = client
            .post(format!("{base}/oauth/token"))
            .basic_auth(app.to_string(), Some(&secret))
            .form(&[
                ("grant_type", "authorization_code"),
                ("code", code.as_str()),
                ("redirect_uri", "https://app.example/cb"),
                ("code_verifier", verifier),
            ])
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        chains.push(Arc::new(tokio::sync::Mutex::new(
            r["refresh_token"].as_str().unwrap().to_owned(),
        )));
    }
    let chains = Arc::new(chains);
    let rate = blast(seconds, concurrency, {
        let (client, base, id, secret) = (
            client.clone(),
            base.clone(),
            app.to_string(),
            secret.clone(),
        );
        move |worker| {
            let (client, base, id, secret, chains) = (
                client.clone(),
                base.clone(),
                id.clone(),
                secret.clone(),
                chains.clone(),
            );
            async move {
                let mut current = chains[worker].lock().await;
                let Ok(r) = client
                    .post(format!("{base}/oauth/token"))
                    .basic_auth(id, Some(secret))
                    .form(&[
                        ("grant_type", "refresh_token"),
                        ("refresh_token", current.as_str()),
                    ])
                    .send()
                    .await
                else {
                    return Some(false);
                };
                if !r.status().is_success() {
                    return Some(false);
                }
                let body: serde_json::Value = r.json().await.unwrap_or_default();
                match body["refresh_token"].as_str() {
                    Some(next) => {
                        *current = next.to_owned();
                        Some(true)
                    }
                    None => Some(false),
                }
            }
        }
    })
    .await;
    println!(
        "{:<44} {rate:>10.0} req/s",
        "POST /oauth/token refresh_token (rotation)"
    );

    // Creation through the API: a user (with its invitation e-mail in the
    // outbox, D11/D30) and a product, each one durable write.
    // An organization whose rate limits (D28) stay out of the way.
    let writes_org = gatehouse_domain::Organization {
        id: OrgId::generate(),
        name: "bench writes".into(),
        plan: gatehouse_domain::Plan::Enterprise,
        per_minute: Some(1_000_000_000),
        per_second: Some(100_000_000),
        created_at: Timestamp::now(),
    };
    running.store.create_org(&writes_org).await.unwrap();
    let (writer, writer_secret) =
        bench_client(&running, &writes_org.id, "users:write products:write").await;
    let token: serde_json::Value = client
        .post(format!("{base}/oauth/token"))
        .basic_auth(writer.to_string(), Some(&writer_secret))
        .form(&[
            ("grant_type", "client_credentials"),
            ("scope", "users:write products:write"),
        ])
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let token = token["access_token"].as_str().unwrap().to_owned();
    let serial = Arc::new(AtomicUsize::new(0));
    for (label, path) in [
        ("POST /v1/users", "/v1/users"),
        ("POST /v1/products", "/v1/products"),
    ] {
        let rate = blast(seconds, concurrency, {
            let (client, base, token, serial) =
                (client.clone(), base.clone(), token.clone(), serial.clone());
            move |_| {
                let (client, base, token, serial) =
                    (client.clone(), base.clone(), token.clone(), serial.clone());
                async move {
                    let i = serial.fetch_add(1, Ordering::Relaxed);
                    let body = if path == "/v1/users" {
                        serde_json::json!({"email": format!("bench.{i}@example.com"), "name": format!("Bench {i}"), "role": "viewer"})
                    } else {
                        serde_json::json!({"name": format!("Bench {i}"), "sku": format!("B-{i}"), "price": 100, "stock": 1})
                    };
                    let res = client
                        .post(format!("{base}{path}"))
                        .bearer_auth(token)
                        .json(&body)
                        .send()
                        .await;
                    Some(match res {
                        Ok(r) => r.status() == reqwest::StatusCode::CREATED && r.bytes().await.is_ok(),
                        Err(_) => false,
                    })
                }
            }
        })
        .await;
        println!("{label:<44} {rate:>10.0} req/s");
    }
    running.shutdown().await;
}

/// A confidential client of `org` with `scopes` and its redirect URI; its id and secret.
async fn bench_client(running: &run::Running, org: &OrgId, scopes: &str) -> (ClientId, String) {
    let secret = secrets::new_client_secret();
    let id = ClientId::generate();
    running
        .store
        .insert_client(
            org,
            &NewClient {
                id: id.clone(),
                name: "bench".into(),
                secret_hash: Some(secrets::hash_secret(&secret)),
                scopes: ScopeSet::parse(scopes).unwrap(),
                redirect_uris: vec!["https://app.example/cb".into()],
                post_logout_redirect_uris: vec![],
                admin_approved: false,
                owner: None,
                created_at: Timestamp::now(),
            },
            gatehouse_store::conformance::teller(),
        )
        .await
        .unwrap();
    (id, secret)
}

/// Reads the whole response, as a real client does: a response dropped
/// unread makes the client cancel its HTTP/2 stream (RST_STREAM CANCEL) and
/// then reset the DATA still on its way, and h2 closes a client connection
/// after 1,024 such resets (`too_many_internal_resets`).
async fn read_token(r: reqwest::Response) -> bool {
    let ok = r.status().is_success();
    r.bytes().await.is_ok_and(|b| ok && !b.is_empty())
}

/// Runs `op` from `concurrency` workers for `seconds`; returns successful requests per second.
async fn blast<F, Fut>(seconds: u64, concurrency: usize, op: F) -> f64
where
    F: Fn(usize) -> Fut + Send + Sync + Clone + 'static,
    Fut: std::future::Future<Output = Option<bool>> + Send,
{
    let ok = Arc::new(AtomicUsize::new(0));
    let failed = Arc::new(AtomicUsize::new(0));
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let started = Instant::now();
    let mut handles = Vec::new();
    for w in 0..concurrency {
        let (op, ok, failed) = (op.clone(), ok.clone(), failed.clone());
        handles.push(tokio::spawn(async move {
            while Instant::now() < deadline {
                match op(w).await {
                    Some(true) => ok.fetch_add(1, Ordering::Relaxed),
                    Some(false) => failed.fetch_add(1, Ordering::Relaxed),
                    None => break,
                };
            }
        }));
    }
    for h in handles {
        let _ = h.await;
    }
    let f = failed.load(Ordering::Relaxed);
    if f > 0 {
        eprintln!("  ({f} requests failed)");
    }
    ok.load(Ordering::Relaxed) as f64 / started.elapsed().as_secs_f64()
}
