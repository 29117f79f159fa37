//! D58's audit-log benchmarks (not timed tests), on SQLite:
//!
//! * **export**: `GET /v1/audit-logs/export` of a chain of `ENTRIES`
//!   (default 1,000,000) sealed entries: time to the last byte, entries a
//!   second, and the process's resident memory before and at its peak
//!   while streaming (D58: constant memory, under a minute).
//! * **purge**: sign-ins (`App::login`, the sign-in use case: password
//!   check, throttle, session-less) by `CONCURRENCY` (default 4) tasks for
//!   `SECONDS` (default 10) without a purge, then while the purge removes
//!   `ENTRIES` expired entries of the security chain: each phase's p50 and
//!   p99 (D58: the purge raises sign-in p99 by at most 10 %).
//!
//! Run:
//!
//!     cargo bench -p gatehouse --bench audit                 # both
//!     PART=export cargo bench -p gatehouse --bench audit
//!     PART=purge ENTRIES=200000 cargo bench -p gatehouse --bench audit
//!
//! The server runs in this process on loopback (behind-proxy plain HTTP);
//! the entries are written straight into the database file, sealed, as the
//! sealer leaves them (the chain's hashes are not recomputed here: neither
//! the export nor the purge reads them), with a checkpoint at the purge's
//! cut as a real chain would have one.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use gatehouse::config::Settings;
use gatehouse::run;
use gatehouse_auth::password;
use gatehouse_domain::{Email, Name, NewUser, OrgId, Role, Timestamp, UserId, UserStatus};

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The process's resident memory (`VmRSS`), in MiB.
fn rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

/// Writes `n` sealed entries of `org`'s `category` chain (sequences 1..=n)
/// created `age_secs` ago, in one transaction; and, when `anchor`, a
/// checkpoint at sequence n - 1 (the purge cuts at a checkpoint).
fn seed(db: &std::path::Path, org: &OrgId, category: &str, n: u64, age_secs: i64, anchor: bool) {
    let mut c = rusqlite::Connection::open(db).unwrap();
    c.busy_timeout(Duration::from_secs(30)).unwrap();
    let tx = c.transaction().unwrap();
    let created = Timestamp::now().plus_seconds(-age_secs);
    {
        let mut stmt = tx
            .prepare(
                "INSERT INTO audit_entries (id, org_id, category, created_at, action, outcome,
                     actor_type, actor_id, target_type, target_id, source_ip, body, sequence, hash)
                 VALUES (?1, ?2, ?3, ?4, 'product.updated', 'success', 'client', ?5,
                         'product', ?6, '127.0.0.1', ?7, ?8, ?9)",
            )
            .unwrap();
        let at = created.to_rfc3339();
        for i in 1..=n {
            let id = format!("adt_bench{i:020}");
            let target = format!("prod_bench{i:012}");
            let body = format!(
                r#"{{"action":"product.updated","actor":{{"client_id":"app_benchclient000000000000","id":"app_benchclient000000000000","type":"client"}},"category":"{category}","changes":{{"price":{{"from":1999,"to":2099}},"stock":{{"from":7,"to":6}}}},"created_at":"{at}","details":null,"id":"{id}","outcome":"success","reason":null,"request":{{"id":"req_0123456789abcdef0123456789abcdef","idempotency_key":null}},"source":{{"ip":"127.0.0.1","user_agent":"bench/1.0"}},"target":{{"id":"{target}","type":"product"}}}}"#
            );
            stmt.execute(rusqlite::params![
                id,
                org.as_str(),
                category,
                created.millis(),
                "app_benchclient000000000000",
                target,
                body,
                i as i64,
                format!("{i:064x}"),
            ])
            .unwrap();
        }
    }
    if anchor {
        tx.execute(
            "INSERT INTO audit_checkpoints (org_id, category, sequence, hash, kid, jws, signed_at)
             VALUES (?1, ?2, ?3, ?4, 'bench', 'bench.bench.bench', ?5)",
            rusqlite::params![
                org.as_str(),
                category,
                (n - 1) as i64,
                format!("{:064x}", n - 1),
                created.millis()
            ],
        )
        .unwrap();
    }
    tx.commit().unwrap();
    // The seed's write-ahead log folded into the database now, not during
    // the first measured phase.
    c.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)").unwrap();
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    let part = std::env::var("PART").unwrap_or_default();
    let entries = env_or("ENTRIES", 1_000_000);
    let dir = tempfile::tempdir().unwrap();
    let mut settings = Settings::with_data_dir(dir.path().to_owned());
    settings.public_url = "https://localhost:8443".into();
    settings.http_addr = "127.0.0.1:0".parse().unwrap();
    settings.admin_addr = "127.0.0.1:0".parse().unwrap();
    settings.behind_proxy = true;
    let running = run::start(&settings).await.unwrap();
    let creds = running.bootstrap.clone().unwrap();
    let org = OrgId::parse(&creds.org).unwrap();
    let db = dir.path().join("gatehouse.db");
    let base = format!("http://{}", running.http_addr);
    let client = reqwest::Client::new();
    if part.is_empty() || part == "export" {
        export(&client, &base, &creds, &db, &org, entries).await;
    }
    if part.is_empty() || part == "purge" {
        purge(&running, &db, &org, entries).await;
    }
    running.shutdown().await;
}

async fn token(client: &reqwest::Client, base: &str, creds: &run::BootstrapCredentials) -> String {
    let res: serde_json::Value = client
        .post(format!("{base}/oauth/token"))
        .basic_auth(&creds.client_id, Some(&creds.client_secret))
        .form(&[
            ("grant_type", "client_credentials"),
            ("scope", "audit:read"),
        ])
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    res["access_token"].as_str().unwrap().to_owned()
}

async fn export(
    client: &reqwest::Client,
    base: &str,
    creds: &run::BootstrapCredentials,
    db: &std::path::Path,
    org: &OrgId,
    n: u64,
) {
    let seeding = Instant::now();
    let (db2, org2) = (db.to_owned(), org.clone());
    tokio::task::spawn_blocking(move || seed(&db2, &org2, "admin", n, 86_400, false))
        .await
        .unwrap();
    println!(
        "export: {n} sealed entries written in {:.1} s",
        seeding.elapsed().as_secs_f64()
    );
    let t = token(client, base, creds).await;
    let before = rss_mib();
    let peak = Arc::new(AtomicU64::new(before.to_bits()));
    let done = Arc::new(AtomicBool::new(false));
    let sampler = {
        let (peak, done) = (peak.clone(), done.clone());
        tokio::spawn(async move {
            while !done.load(Ordering::Relaxed) {
                let now = rss_mib();
                if now > f64::from_bits(peak.load(Ordering::Relaxed)) {
                    peak.store(now.to_bits(), Ordering::Relaxed);
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
    };
    let started = Instant::now();
    let mut res = client
        .get(format!("{base}/v1/audit-logs/export?format=jsonl"))
        .bearer_auth(&t)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let (mut bytes, mut lines) = (0u64, 0u64);
    while let Some(chunk) = res.chunk().await.unwrap() {
        bytes += chunk.len() as u64;
        lines += chunk.iter().filter(|b| **b == b'\n').count() as u64;
    }
    let secs = started.elapsed().as_secs_f64();
    done.store(true, Ordering::Relaxed);
    sampler.await.unwrap();
    let peak = f64::from_bits(peak.load(Ordering::Relaxed));
    // Every entry, the two end lines, and the security chain's entries
    // (this client's first token of the period).
    assert!(lines > n, "{lines} lines for {n} entries");
    println!(
        "export: {lines} lines, {:.0} MiB in {secs:.1} s ({:.0} entries/s); resident memory {before:.1} MiB before, {peak:.1} MiB at the peak ({:+.1} MiB)",
        bytes as f64 / 1_048_576.0,
        n as f64 / secs,
        peak - before
    );
}

/// Latencies of sign-ins by `concurrency` tasks until `stop`.
async fn sign_ins(
    app: &gatehouse_app::App,
    org: &OrgId,
    concurrency: usize,
    stop: Arc<AtomicBool>,
) -> Vec<Duration> {
    let mut tasks = Vec::new();
    for i in 0..concurrency {
        let (app, org, stop) = (app.clone(), org.clone(), stop.clone());
        tasks.push(tokio::spawn(async move {
            let mut took = Vec::new();
            let email = format!("signer{i}@example.com");
            while !stop.load(Ordering::Relaxed) {
                let t = Instant::now();
                app.login(
                    &org,
                    &email,
                    "a long bench passphrase",
                    "127.0.0.1",
                    None,
                    None,
                )
                .await
                .expect("the right password signs in");
                took.push(t.elapsed());
            }
            took
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    all.sort();
    all
}

/// How many audit entries `org` has.
fn entries_of(db: &std::path::Path, org: &OrgId) -> i64 {
    let c = rusqlite::Connection::open(db).unwrap();
    c.busy_timeout(Duration::from_secs(30)).unwrap();
    c.query_row(
        "SELECT count(*) FROM audit_entries WHERE org_id = ?1",
        [org.as_str()],
        |r| r.get(0),
    )
    .unwrap()
}

fn pct(sorted: &[Duration], p: f64) -> f64 {
    let i = ((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[i].as_secs_f64() * 1000.0
}

async fn purge(running: &run::Running, db: &std::path::Path, org: &OrgId, n: u64) {
    let concurrency = env_or("CONCURRENCY", 4) as usize;
    let seconds = env_or("SECONDS", 10);
    let app = running.state.app.clone();
    let hash = password::hash_blocking("a long bench passphrase");
    for i in 0..concurrency {
        running
            .store
            .insert_user(
                org,
                &NewUser {
                    id: UserId::generate(),
                    email: Email::parse(&format!("signer{i}@example.com")).unwrap(),
                    name: Name::parse("Signer").unwrap(),
                    role: Role::Viewer,
                    status: UserStatus::Active,
                    password_hash: Some(hash.clone()),
                    created_at: Timestamp::now(),
                },
                gatehouse_store::conformance::teller(),
            )
            .await
            .unwrap();
    }
    // Past the security chain's retention (90 days by default), in an
    // organization of its own (the sign-ins' organization has a security
    // chain of recent entries already).
    let old = gatehouse_domain::Organization {
        id: OrgId::generate(),
        name: "Old".into(),
        plan: gatehouse_domain::Plan::Pro,
        per_minute: None,
        per_second: None,
        created_at: Timestamp::now(),
    };
    running.store.create_org(&old).await.unwrap();
    let seeding = Instant::now();
    let (db2, org2) = (db.to_owned(), old.id.clone());
    tokio::task::spawn_blocking(move || seed(&db2, &org2, "security", n, 200 * 86_400, true))
        .await
        .unwrap();
    println!(
        "purge: {n} expired entries written in {:.1} s",
        seeding.elapsed().as_secs_f64()
    );
    // Without a purge. The server's own housekeeping purges a minute after
    // its start; should that round fall into this phase, the phase is not
    // quiet, and the run says so (the purge below waits for a running one:
    // one process purges once at a time).
    let before_quiet = entries_of(db, &old.id);
    let stop = Arc::new(AtomicBool::new(false));
    let load = {
        let (app, org, stop) = (app.clone(), org.clone(), stop.clone());
        tokio::spawn(async move { sign_ins(&app, &org, concurrency, stop).await })
    };
    tokio::time::sleep(Duration::from_secs(seconds)).await;
    stop.store(true, Ordering::Relaxed);
    let quiet = load.await.unwrap();
    let after_quiet = entries_of(db, &old.id);
    if after_quiet != before_quiet {
        println!(
            "purge: NOT COMPARABLE: the server's own purge ran during the quiet phase \
             ({before_quiet} entries, then {after_quiet}); run again"
        );
    }
    // During the purge (and at least as long as the quiet phase).
    let stop = Arc::new(AtomicBool::new(false));
    let load = {
        let (app, org, stop) = (app.clone(), org.clone(), stop.clone());
        tokio::spawn(async move { sign_ins(&app, &org, concurrency, stop).await })
    };
    let started = Instant::now();
    let purged = app.purge_audit_log(Timestamp::now()).await.unwrap();
    let purge_secs = started.elapsed().as_secs_f64();
    let rest = Duration::from_secs(seconds).saturating_sub(started.elapsed());
    tokio::time::sleep(rest).await;
    stop.store(true, Ordering::Relaxed);
    let busy = load.await.unwrap();
    println!(
        "purge: {} entries of {} chain(s) in {purge_secs:.1} s",
        purged.entries, purged.chains
    );
    println!(
        "sign-ins ({concurrency} tasks): without a purge {} in {seconds} s, p50 {:.1} ms, p99 {:.1} ms; during the purge {} , p50 {:.1} ms, p99 {:.1} ms ({:+.1} % at p99)",
        quiet.len(),
        pct(&quiet, 0.50),
        pct(&quiet, 0.99),
        busy.len(),
        pct(&busy, 0.50),
        pct(&busy, 0.99),
        (pct(&busy, 0.99) / pct(&quiet, 0.99) - 1.0) * 100.0
    );
}
