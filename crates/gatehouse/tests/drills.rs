//! Failure drills against the real binary: `gatehouse serve` processes on
//! loopback ports, load through them, and the storage taken away under it.
//!
//! * PostgreSQL outage: two nodes on one database (D44) under a mixed load;
//!   the server is stopped (`pg_ctl stop -m fast`) for 10 s and started
//!   again on the same port and data directory. While it is gone every `/v1`
//!   request is 503 `SERVICE_UNAVAILABLE` with `Retry-After` (D6) and the
//!   OAuth endpoints 503 `temporarily_unavailable` with `Retry-After` (D21
//!   revised); nothing is a 500 and nothing takes longer than 5 s; the nodes
//!   serve again within 5 s of the database's return, without a restart;
//!   every write acknowledged with a 2xx is there afterwards (D43).
//! * SQLite full disk: the data directory on a small tmpfs. Writes are 503
//!   with `Retry-After`, reads still 200; once space is freed writes work
//!   again, and after a clean stop the database passes `PRAGMA
//!   integrity_check` with every acknowledged write present.
//!
//! The drills run from `scripts/drills.sh` (`cargo test -p gatehouse --test
//! drills -- --ignored`), outside `.ci/run`, like the benchmarks: the issues
//! keep CI under 30 minutes and place drills in `scripts/`. The measured
//! figures are written to stderr directly (not captured by the test
//! harness) so the script shows them.
//!
//! Without PostgreSQL binaries the outage drill is skipped loudly unless
//! `GATEHOUSE_REQUIRE_POSTGRES=1`; where tmpfs cannot be mounted (not root,
//! a container without the capability) the disk drill is skipped loudly
//! unless `GATEHOUSE_REQUIRE_MOUNT=1`. Either variable makes the skip a
//! failure.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use gatehouse_store_postgres::testing::StoppableCluster;
use reqwest::StatusCode;
use serde_json::{Value, json};

const PUBLIC_URL: &str = "https://gatehouse.example";
const SCOPES: &str = "users:read users:write products:read products:write";
/// No request may take longer than this, whatever the database does.
const MAX_LATENCY: Duration = Duration::from_secs(5);
/// How long the database stays away in the outage drill.
const OUTAGE: Duration = Duration::from_secs(10);
/// The nodes must serve again this soon after the database returns.
const RECOVERY_LIMIT: Duration = Duration::from_secs(5);

/// Figures for the closing note: straight to the stderr handle, which the
/// harness does not capture.
macro_rules! report {
    ($($arg:tt)*) => {{
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn required(var: &str) -> bool {
    std::env::var(var).is_ok_and(|v| v.trim() == "1")
}

// ---------------------------------------------------------------------------
// A `gatehouse serve` process
// ---------------------------------------------------------------------------

/// `gatehouse serve --behind-proxy` (plain HTTP on loopback), killed when
/// dropped.
struct Serve {
    name: String,
    child: Child,
    port: u16,
    stdout: PathBuf,
    stderr: PathBuf,
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Serve {
    fn spawn(
        name: &str,
        data_dir: &Path,
        database_url: Option<&str>,
        master_key: Option<&str>,
        logs: &Path,
    ) -> Self {
        let port = free_port();
        let admin = free_port();
        let stdout = logs.join(format!("{name}.stdout"));
        let stderr = logs.join(format!("{name}.stderr"));
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_gatehouse"));
        for (k, _) in std::env::vars() {
            if k.starts_with("GATEHOUSE_") {
                cmd.env_remove(k);
            }
        }
        cmd.arg("--data-dir").arg(data_dir);
        if let Some(url) = database_url {
            cmd.arg("--database-url").arg(url);
        }
        if let Some(key) = master_key {
            // D44: the nodes of one database share the master key.
            cmd.env("GATEHOUSE_MASTER_KEY", key);
        }
        cmd.arg("serve")
            .arg("--behind-proxy")
            .arg("--public-url")
            .arg(PUBLIC_URL)
            .arg("--http-addr")
            .arg(format!("127.0.0.1:{port}"))
            .arg("--admin-addr")
            .arg(format!("127.0.0.1:{admin}"))
            .env("GATEHOUSE_LOG", "info")
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&stdout).unwrap())
            .stderr(std::fs::File::create(&stderr).unwrap());
        let child = cmd.spawn().expect("the gatehouse binary starts");
        Self {
            name: name.to_owned(),
            child,
            port,
            stdout,
            stderr,
        }
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    fn logs(&self) -> String {
        let tail = |p: &Path| {
            let text = std::fs::read_to_string(p).unwrap_or_default();
            let start = text.len().saturating_sub(6000);
            let start = (start..text.len())
                .find(|i| text.is_char_boundary(*i))
                .unwrap_or(0);
            text[start..].to_owned()
        };
        format!(
            "--- {} stdout:\n{}\n--- {} stderr (tail):\n{}",
            self.name,
            tail(&self.stdout),
            self.name,
            tail(&self.stderr)
        )
    }

    /// Waits (bounded) until `/healthz` answers 200.
    async fn ready(&mut self, client: &reqwest::Client) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                panic!("{} exited early with {status}\n{}", self.name, self.logs());
            }
            if let Ok(res) = client
                .get(self.url("/healthz"))
                .timeout(Duration::from_secs(2))
                .send()
                .await
                && res.status() == StatusCode::OK
            {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{} did not become healthy\n{}",
                self.name,
                self.logs()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// SIGTERM, then waits (bounded) for the exit status (D43).
    async fn terminate(&mut self) -> std::process::ExitStatus {
        let ok = Command::new("kill")
            .arg("-TERM")
            .arg(self.child.id().to_string())
            .status()
            .unwrap();
        assert!(ok.success());
        let deadline = Instant::now() + Duration::from_secs(40);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "{} did not exit after SIGTERM\n{}",
                self.name,
                self.logs()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// The WARN and ERROR lines of the servers' logs, grouped: the storage
/// errors met and what they were classified as (D6: `storage unavailable`
/// is a 503, `storage failure` a 500), and the background jobs' failures.
/// Ids and numbers are masked so that alike lines group.
fn log_summary(servers: &[&Serve]) -> String {
    let mut counts: Vec<(String, usize)> = Vec::new();
    for s in servers {
        let text = std::fs::read_to_string(&s.stderr).unwrap_or_default();
        for line in text.lines() {
            let line = strip_ansi(line);
            let line = line.as_str();
            let Some(level) = [" WARN ", " ERROR "].iter().find(|l| line.contains(*l)) else {
                continue;
            };
            let rest = &line[line.find(level).unwrap() + level.len()..];
            let rest = rest.split_once(": ").map_or(rest, |(_, r)| r);
            let mut masked = String::new();
            for c in rest.chars().take(140) {
                if c.is_ascii_digit() {
                    if !masked.ends_with('#') {
                        masked.push('#');
                    }
                } else {
                    masked.push(c);
                }
            }
            let key = format!("{} {masked}", level.trim());
            match counts.iter_mut().find(|(k, _)| *k == key) {
                Some((_, n)) => *n += 1,
                None => counts.push((key, 1)),
            }
        }
    }
    counts.sort_by_key(|c| std::cmp::Reverse(c.1));
    if counts.is_empty() {
        return "      (none)".into();
    }
    counts
        .iter()
        .map(|(k, n)| format!("      ×{n} {k}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// `line` without terminal colour sequences (`ESC [ … m`).
fn strip_ansi(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c == 'm' {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

fn http_client() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        // Far above MAX_LATENCY: a request that hangs is measured and
        // reported as such rather than cut short.
        .timeout(Duration::from_secs(15))
        .build()
        .unwrap()
}

/// D41: the bootstrap client, from the file the first start writes.
fn bootstrap_credentials(data_dir: &Path) -> (String, String) {
    let creds: Value = serde_json::from_slice(
        &std::fs::read(data_dir.join("bootstrap-credentials.json"))
            .expect("D41: bootstrap-credentials.json"),
    )
    .unwrap();
    (
        creds["client_id"].as_str().unwrap().to_owned(),
        creds["client_secret"].as_str().unwrap().to_owned(),
    )
}

/// `gatehouse --json ARGS` on the data directory (and `database_url`, if
/// given); its one JSON object.
fn cli(
    data_dir: &Path,
    database_url: Option<&str>,
    master_key: Option<&str>,
    args: &[&str],
) -> Value {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_gatehouse"));
    for (k, _) in std::env::vars() {
        if k.starts_with("GATEHOUSE_") {
            cmd.env_remove(k);
        }
    }
    cmd.arg("--data-dir").arg(data_dir);
    if let Some(url) = database_url {
        cmd.arg("--database-url").arg(url);
    }
    if let Some(key) = master_key {
        cmd.env("GATEHOUSE_MASTER_KEY", key);
    }
    let out = cmd
        .arg("--json")
        .args(args)
        .env("GATEHOUSE_LOG", "warn")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "gatehouse {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// A client of a new enterprise organization with limits far above the
/// drills' load, so D28's rate limits never answer in place of the storage.
fn drill_client(
    data_dir: &Path,
    database_url: Option<&str>,
    master_key: Option<&str>,
) -> (String, String) {
    let org = cli(
        data_dir,
        database_url,
        master_key,
        &[
            "org",
            "create",
            "--name",
            "Drill",
            "--plan",
            "enterprise",
            "--per-minute",
            "100000",
            "--per-second",
            "1000",
        ],
    );
    let app = cli(
        data_dir,
        database_url,
        master_key,
        &[
            "client",
            "create",
            "--org",
            org["id"].as_str().unwrap(),
            "--name",
            "drill",
            "--scopes",
            SCOPES,
        ],
    );
    (
        app["client_id"].as_str().unwrap().to_owned(),
        app["client_secret"].as_str().unwrap().to_owned(),
    )
}

/// Every `.eml` the nodes delivered to their outboxes (D30), concatenated.
fn outbox_text(data_dirs: &[&Path]) -> String {
    let mut text = String::new();
    for d in data_dirs {
        let Ok(entries) = std::fs::read_dir(d.join("outbox")) else {
            continue;
        };
        for e in entries.flatten() {
            if e.path().extension().is_some_and(|x| x == "eml") {
                text.push_str(&std::fs::read_to_string(e.path()).unwrap_or_default());
            }
        }
    }
    text
}

// ---------------------------------------------------------------------------
// Requests and what came back
// ---------------------------------------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    GetUser,
    ListUsers,
    CreateUser,
    CreateProduct,
    Token,
    /// POST /oauth/revoke of an unknown token (RFC 7009: 200).
    Revoke,
}

impl Op {
    const ALL: [Op; 6] = [
        Op::GetUser,
        Op::CreateUser,
        Op::ListUsers,
        Op::Token,
        Op::CreateProduct,
        Op::Revoke,
    ];

    fn is_oauth(self) -> bool {
        matches!(self, Op::Token | Op::Revoke)
    }
}

/// One request of the load.
#[derive(Clone, Debug)]
struct Outcome {
    node: usize,
    op: Op,
    /// Since the start of the drill.
    started: Duration,
    took: Duration,
    /// `None`: no HTTP response at all (connection error, client timeout).
    status: Option<StatusCode>,
    /// The D6 `error.code`, the OAuth `error`, or the transport error.
    code: String,
    retry_after: Option<String>,
    /// Whether an error response has the shape its endpoint owes (see
    /// [`error_shape`]); `Ok` for a 2xx.
    shape: Result<(), String>,
    /// The id of what a 201 created: ("users" | "products", id).
    created: Option<(&'static str, String)>,
    /// The e-mail local part or SKU the request used.
    unique: String,
}

impl Outcome {
    fn ended(&self) -> Duration {
        self.started + self.took
    }

    fn ok(&self) -> bool {
        self.status.is_some_and(|s| s.is_success())
    }

    /// 503 with `Retry-After` and the code the endpoint family owes: the D6
    /// envelope's `SERVICE_UNAVAILABLE` on `/v1`, `temporarily_unavailable`
    /// on `/oauth/*` (D21 revised).
    fn is_proper_503(&self) -> bool {
        let code = if self.op.is_oauth() {
            "temporarily_unavailable"
        } else {
            "SERVICE_UNAVAILABLE"
        };
        self.status == Some(StatusCode::SERVICE_UNAVAILABLE)
            && self.code == code
            && self
                .retry_after
                .as_deref()
                .is_some_and(|v| v.parse::<u64>().is_ok())
            && self.shape.is_ok()
    }

    fn label(&self) -> String {
        match self.status {
            Some(s) if s.is_success() => s.as_u16().to_string(),
            Some(s) => format!("{} {}", s.as_u16(), self.code),
            None => format!("no response ({})", self.code),
        }
    }
}

/// Sends `op` to `base` and records what came back.
async fn perform(
    client: &reqwest::Client,
    base: &str,
    token: &str,
    creds: &(String, String),
    op: Op,
    unique: &str,
    known_user: &str,
) -> (
    Option<StatusCode>,
    String,
    Option<String>,
    Result<(), String>,
    Option<(&'static str, String)>,
) {
    let req = match op {
        Op::GetUser => client
            .get(format!("{base}/v1/users/{known_user}"))
            .bearer_auth(token),
        Op::ListUsers => client
            .get(format!("{base}/v1/users?limit=5"))
            .bearer_auth(token),
        Op::CreateUser => client
            .post(format!("{base}/v1/users"))
            .bearer_auth(token)
            .json(&json!({
                "email": format!("{unique}@example.com"),
                "name": "Drill User",
                "role": "viewer",
            })),
        Op::CreateProduct => client
            .post(format!("{base}/v1/products"))
            .bearer_auth(token)
            .json(&json!({
                "name": "Drill Product",
                "sku": unique.to_uppercase(),
                "price": 100,
                "stock": 1,
            })),
        Op::Token => client
            .post(format!("{base}/oauth/token"))
            .basic_auth(&creds.0, Some(&creds.1))
            .form(&[("grant_type", "client_credentials"), ("scope", SCOPES)]),
        Op::Revoke => client
            .post(format!("{base}/oauth/revoke"))
            .basic_auth(&creds.0, Some(&creds.1))
            .form(&[("token", format!("unknown-{unique}"))]),
    };
    let res = match req.send().await {
        Ok(r) => r,
        Err(e) => return (None, format!("{e:?}"), None, Ok(()), None),
    };
    let status = res.status();
    let header = |name: &str| {
        res.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let retry_after = header("retry-after");
    let content_type = header("content-type");
    let cache_control = header("cache-control");
    let request_id = header("x-request-id");
    let body: Value = match res.bytes().await {
        Ok(b) => serde_json::from_slice(&b).unwrap_or(Value::Null),
        Err(e) => {
            return (None, format!("reading the body: {e:?}"), None, Ok(()), None);
        }
    };
    let code = match &body["error"] {
        Value::String(s) => s.clone(),
        e => e["code"].as_str().unwrap_or_default().to_owned(),
    };
    let created = (status == StatusCode::CREATED)
        .then(|| body["data"]["id"].as_str().map(str::to_owned))
        .flatten()
        .map(|id| {
            let kind = if op == Op::CreateUser {
                "users"
            } else {
                "products"
            };
            (kind, id)
        });
    let shape = if status.is_success() {
        Ok(())
    } else {
        error_shape(op, content_type, cache_control, request_id, &body)
    };
    (Some(status), code, retry_after, shape, created)
}

/// The error body owed: on `/v1` the D6 envelope (JSON, `code`, a message,
/// `docs` at `{public_url}/docs/errors#CODE`, `details`, an X-Request-ID);
/// on `/oauth/*` RFC 6749's `error` and `error_description` (D21, D21
/// revised), with `Cache-Control: no-store` on the token endpoint.
fn error_shape(
    op: Op,
    content_type: Option<String>,
    cache_control: Option<String>,
    request_id: Option<String>,
    body: &Value,
) -> Result<(), String> {
    if !content_type
        .as_deref()
        .is_some_and(|c| c.starts_with("application/json"))
    {
        return Err(format!("Content-Type {content_type:?}"));
    }
    if op.is_oauth() {
        if !body["error"].is_string() || !body["error_description"].is_string() {
            return Err(format!("not an RFC 6749 error: {body}"));
        }
        if op == Op::Token
            && !cache_control
                .as_deref()
                .is_some_and(|c| c.contains("no-store"))
        {
            return Err(format!("Cache-Control {cache_control:?} (D21)"));
        }
        return Ok(());
    }
    let e = &body["error"];
    let code = e["code"].as_str().unwrap_or_default();
    if code.is_empty()
        || e["message"].as_str().is_none_or(str::is_empty)
        || e["docs"] != format!("{PUBLIC_URL}/docs/errors#{code}").as_str()
        || !e["details"].is_array()
    {
        return Err(format!("not the D6 envelope: {body}"));
    }
    if request_id.is_none() {
        return Err("no X-Request-ID".into());
    }
    Ok(())
}

/// Statuses as "label ×count" lines, most frequent first.
fn tally<'a>(outcomes: impl Iterator<Item = &'a Outcome>) -> String {
    let mut counts: Vec<(String, usize)> = Vec::new();
    for o in outcomes {
        let label = format!("{:?} → {}", o.op, o.label());
        match counts.iter_mut().find(|(l, _)| *l == label) {
            Some((_, n)) => *n += 1,
            None => counts.push((label, 1)),
        }
    }
    counts.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    if counts.is_empty() {
        return "      (none)".into();
    }
    counts
        .iter()
        .map(|(l, n)| format!("      {l} ×{n}"))
        .collect::<Vec<_>>()
        .join("\n")
}

fn max_took<'a>(outcomes: impl Iterator<Item = &'a Outcome>) -> Duration {
    outcomes.map(|o| o.took).max().unwrap_or_default()
}

fn ms(d: Duration) -> String {
    format!("{} ms", d.as_millis())
}

/// A client-credentials token with every scope the load needs.
async fn token(client: &reqwest::Client, node: &Serve, creds: &(String, String)) -> String {
    let res = client
        .post(node.url("/oauth/token"))
        .basic_auth(&creds.0, Some(&creds.1))
        .form(&[("grant_type", "client_credentials"), ("scope", SCOPES)])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK, "{}", node.logs());
    res.json::<Value>().await.unwrap()["access_token"]
        .as_str()
        .unwrap()
        .to_owned()
}

async fn create_user(client: &reqwest::Client, node: &Serve, token: &str, email: &str) -> String {
    let res = client
        .post(node.url("/v1/users"))
        .bearer_auth(token)
        .json(&json!({"email": email, "name": "Seed User", "role": "viewer"}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::CREATED, "{}", node.logs());
    res.json::<Value>().await.unwrap()["data"]["id"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// GETs every acknowledged write, spread over `nodes`; returns the ones not
/// found (anything but 200).
async fn missing_writes(
    client: &reqwest::Client,
    nodes: &[(String, String)],
    written: &[(&'static str, String)],
) -> Vec<String> {
    let mut missing = Vec::new();
    for (i, (kind, id)) in written.iter().enumerate() {
        let (base, token) = &nodes[i % nodes.len()];
        let res = client
            .get(format!("{base}/v1/{kind}/{id}"))
            .bearer_auth(token)
            .send()
            .await
            .unwrap();
        if res.status() != StatusCode::OK {
            missing.push(format!("{kind}/{id}: {}", res.status()));
        }
    }
    missing
}

/// Runs `f` (a blocking stop or start) on the cluster off the runtime.
async fn on_cluster(cluster: &Arc<Mutex<StoppableCluster>>, f: fn(&mut StoppableCluster)) {
    let cluster = cluster.clone();
    tokio::task::spawn_blocking(move || f(&mut cluster.lock().unwrap_or_else(|e| e.into_inner())))
        .await
        .unwrap();
}

// ---------------------------------------------------------------------------
// Drill 1: PostgreSQL stopped for 10 s under load through two nodes
// ---------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "a failure drill (about a minute): scripts/drills.sh runs it"]
async fn postgres_outage_under_load_through_two_nodes() {
    let Some(cluster) = StoppableCluster::start() else {
        return;
    };
    let url = cluster.create_database("drill").await;
    let cluster = Arc::new(Mutex::new(cluster));
    let key = gatehouse_auth::MasterKey::generate().to_text();
    let logs = tempfile::tempdir().unwrap();
    let (dir_a, dir_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let client = http_client();

    // D44: the first node migrates and bootstraps; the second joins.
    let mut a = Serve::spawn("node-a", dir_a.path(), Some(&url), Some(&key), logs.path());
    a.ready(&client).await;
    let mut b = Serve::spawn("node-b", dir_b.path(), Some(&url), Some(&key), logs.path());
    b.ready(&client).await;
    let bootstrap = bootstrap_credentials(dir_a.path());
    assert!(
        !dir_b.path().join("bootstrap-credentials.json").exists(),
        "D41, D44: bootstrap runs once"
    );
    // The load runs as a client of its own organization (enterprise): D28's
    // limits count in the database too (D44), and must not be what answers.
    let creds = drill_client(dir_a.path(), Some(&url), Some(&key));
    assert_ne!(creds.0, bootstrap.0);
    let nodes = [a, b];
    let mut tokens = Vec::new();
    for n in &nodes {
        tokens.push(token(&client, n, &creds).await);
    }
    let mut seeded = Vec::new();
    for i in 0..3 {
        let n = i % 2;
        let id = create_user(
            &client,
            &nodes[n],
            &tokens[n],
            &format!("seed{i}@example.com"),
        )
        .await;
        seeded.push(id);
    }

    // The load: a few tasks cycling through the operations and the nodes,
    // each pausing between requests, so it stays modest (some 30 requests a
    // second) and what is measured is the database's absence, not overload.
    const TASKS: usize = 4;
    const PAUSE: Duration = Duration::from_millis(120);
    let t0 = Instant::now();
    let stop = Arc::new(AtomicBool::new(false));
    let outcomes = Arc::new(Mutex::new(Vec::<Outcome>::new()));
    let bases: Vec<String> = nodes.iter().map(|n| n.url("")).collect();
    let mut load = tokio::task::JoinSet::new();
    for task in 0..TASKS {
        let (client, stop, outcomes) = (client.clone(), stop.clone(), outcomes.clone());
        let (bases, tokens, creds, seeded) =
            (bases.clone(), tokens.clone(), creds.clone(), seeded.clone());
        load.spawn(async move {
            let mut k = 0usize;
            while !stop.load(Ordering::Relaxed) {
                let op = Op::ALL[(task + k) % Op::ALL.len()];
                let node = (task + k / Op::ALL.len()) % 2;
                let unique = format!("drill-{task}-{k}");
                let started = t0.elapsed();
                let (status, code, retry_after, shape, created) = perform(
                    &client,
                    &bases[node],
                    &tokens[node],
                    &creds,
                    op,
                    &unique,
                    &seeded[k % seeded.len()],
                )
                .await;
                let took = t0.elapsed() - started;
                outcomes.lock().unwrap().push(Outcome {
                    node,
                    op,
                    started,
                    took,
                    status,
                    code,
                    retry_after,
                    shape,
                    created,
                    unique,
                });
                k += 1;
                tokio::time::sleep(PAUSE).await;
            }
        });
    }

    // Healthy load, then the database goes away for OUTAGE, then returns.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let stop_begun = t0.elapsed();
    on_cluster(&cluster, StoppableCluster::stop_fast).await;
    let down = t0.elapsed();
    tokio::time::sleep(OUTAGE).await;
    let restart_begun = t0.elapsed();
    on_cluster(&cluster, StoppableCluster::start_again).await;
    let up = t0.elapsed();
    // Long enough after the return to see the recovery and then steady 2xx.
    tokio::time::sleep(RECOVERY_LIMIT + Duration::from_secs(3)).await;
    stop.store(true, Ordering::Relaxed);
    while let Some(r) = load.join_next().await {
        r.unwrap();
    }
    let ended = t0.elapsed();
    let outcomes = std::mem::take(&mut *outcomes.lock().unwrap());

    // The phases, by when each request started and ended.
    let before: Vec<&Outcome> = outcomes.iter().filter(|o| o.ended() < stop_begun).collect();
    let outage: Vec<&Outcome> = outcomes
        .iter()
        .filter(|o| o.started >= down && o.ended() <= restart_begun)
        .collect();
    let around: Vec<&Outcome> = outcomes
        .iter()
        .filter(|o| o.ended() >= stop_begun && o.started < up)
        .filter(|o| !(o.started >= down && o.ended() <= restart_begun))
        .collect();
    let after: Vec<&Outcome> = outcomes.iter().filter(|o| o.started >= up).collect();
    let mut recovered = Vec::new();
    for node in 0..2 {
        // The first 2xx answered to a request sent after the return, and
        // the last non-2xx answered after it.
        let first_ok = after
            .iter()
            .filter(|o| o.node == node && o.ok())
            .map(|o| o.ended() - up)
            .min();
        let last_fail = outcomes
            .iter()
            .filter(|o| o.node == node && !o.ok() && o.ended() > up)
            .map(|o| o.ended() - up)
            .max();
        recovered.push((first_ok, last_fail));
    }
    let written: Vec<(&'static str, String)> =
        outcomes.iter().filter_map(|o| o.created.clone()).collect();
    let node_urls: Vec<(String, String)> = bases.iter().cloned().zip(tokens.clone()).collect();
    let missing = missing_writes(&client, &node_urls, &written).await;

    // D30: the outbox workers of both nodes came through the outage; every
    // acknowledged invitation is delivered (each node writes `.eml` files to
    // its own data directory).
    let invited: Vec<String> = outcomes
        .iter()
        .filter(|o| o.op == Op::CreateUser && o.created.is_some())
        .map(|o| format!("{}@example.com", o.unique))
        .collect();
    let mail_wait = Instant::now();
    let undelivered = loop {
        let text = outbox_text(&[dir_a.path(), dir_b.path()]);
        let undelivered: Vec<&String> = invited.iter().filter(|e| !text.contains(*e)).collect();
        if undelivered.is_empty() || mail_wait.elapsed() > Duration::from_secs(15) {
            break undelivered.into_iter().cloned().collect::<Vec<_>>();
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let mail_took = mail_wait.elapsed();

    // D44: the revocation sync of node B reconnected by itself: a token
    // revoked through node A is refused by node B within a second.
    let fresh = token(&client, &nodes[0], &creds).await;
    let probe = |n: usize| {
        client
            .get(nodes[n].url("/v1/users?limit=1"))
            .bearer_auth(&fresh)
            .send()
    };
    assert_eq!(probe(1).await.unwrap().status(), StatusCode::OK);
    let res = client
        .post(nodes[0].url("/oauth/revoke"))
        .basic_auth(&creds.0, Some(&creds.1))
        .form(&[("token", fresh.as_str())])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let revoked_at = Instant::now();
    let revocation_seen = loop {
        if probe(1).await.unwrap().status() == StatusCode::UNAUTHORIZED {
            break Some(revoked_at.elapsed());
        }
        if revoked_at.elapsed() > Duration::from_secs(3) {
            break None;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };

    // A quiet outage: no request at all while the database is away. The
    // nodes' pooled connections all died with it; the first requests after
    // its return must not keep meeting them (the background jobs, D30 and
    // D44's revocation sync, use the pool all the time and flush them).
    on_cluster(&cluster, StoppableCluster::stop_fast).await;
    // D42: liveness stays up (an orchestrator must not restart the nodes),
    // readiness goes down (a load balancer stops sending them traffic).
    tokio::time::sleep(Duration::from_secs(1)).await;
    let mut probes_down = Vec::new();
    for (i, n) in nodes.iter().enumerate() {
        for path in ["/healthz", "/readyz"] {
            let started = Instant::now();
            let res = client.get(n.url(path)).send().await.unwrap();
            probes_down.push((
                ["A", "B"][i],
                path,
                res.status(),
                res.headers().contains_key("retry-after"),
                started.elapsed(),
            ));
        }
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    on_cluster(&cluster, StoppableCluster::start_again).await;
    let quiet_up = Instant::now();
    let mut quiet: Vec<(usize, Duration, Option<StatusCode>)> = Vec::new();
    let mut quiet_first_ok = [None, None];
    while quiet_first_ok.iter().any(Option::is_none)
        && quiet_up.elapsed() < RECOVERY_LIMIT + Duration::from_secs(2)
    {
        for n in 0..2 {
            let started = Instant::now();
            let status = client
                .get(nodes[n].url("/v1/users?limit=1"))
                .bearer_auth(&tokens[n])
                .send()
                .await
                .ok()
                .map(|r| r.status());
            quiet.push((n, started.elapsed(), status));
            if status.is_some_and(|s| s.is_success()) && quiet_first_ok[n].is_none() {
                quiet_first_ok[n] = Some(quiet_up.elapsed());
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let quiet_failed = quiet
        .iter()
        .filter(|(_, _, s)| !s.is_some_and(|s| s.is_success()))
        .count();
    let mut ready_again = Vec::new();
    for n in &nodes {
        ready_again.push(client.get(n.url("/readyz")).send().await.unwrap().status());
    }

    report!(
        "\n=== DRILL postgres outage (two nodes, {TASKS} load tasks, database stopped {} s) ===",
        OUTAGE.as_secs()
    );
    report!(
        "  timeline: stop requested at {}, postmaster gone at {} (stop took {}), restart at {}, \
         accepting again at {} (start took {}), load ended at {}",
        ms(stop_begun),
        ms(down),
        ms(down - stop_begun),
        ms(restart_begun),
        ms(up),
        ms(up - restart_begun),
        ms(ended)
    );
    report!(
        "  requests: {} in all, max latency {}",
        outcomes.len(),
        ms(max_took(outcomes.iter()))
    );
    report!(
        "  before the stop: {} requests, max latency {}\n{}",
        before.len(),
        ms(max_took(before.iter().copied())),
        tally(before.iter().copied())
    );
    report!(
        "  during the outage (sent after the postmaster exited, answered before the restart): \
         {} requests, max latency {}\n{}",
        outage.len(),
        ms(max_took(outage.iter().copied())),
        tally(outage.iter().copied())
    );
    report!(
        "  in flight at the stop or the restart: {} requests, max latency {}\n{}",
        around.len(),
        ms(max_took(around.iter().copied())),
        tally(around.iter().copied())
    );
    report!(
        "  after the return: {} requests, max latency {}\n{}",
        after.len(),
        ms(max_took(after.iter().copied())),
        tally(after.iter().copied())
    );
    for (node, (first_ok, last_fail)) in recovered.iter().enumerate() {
        report!(
            "  node {}: first 2xx {} after the database returned; last non-2xx {}",
            ["A", "B"][node],
            first_ok.map(ms).unwrap_or("never".into()),
            last_fail
                .map(|d| format!("{} after it", ms(d)))
                .unwrap_or("none after it".into())
        );
    }
    report!(
        "  acknowledged writes (201): {} checked, {} lost{}",
        written.len(),
        missing.len(),
        if missing.is_empty() {
            String::new()
        } else {
            format!(": {missing:?}")
        }
    );
    report!(
        "  D30 outbox: {} invitations acknowledged, {} undelivered after {}",
        invited.len(),
        undelivered.len(),
        ms(mail_took)
    );
    report!(
        "  D44 revocation after the outage: refused by the other node after {}",
        revocation_seen.map(ms).unwrap_or("more than 3 s".into())
    );
    report!(
        "  server log, WARN/ERROR lines of both nodes:\n{}",
        log_summary(&[&nodes[0], &nodes[1]])
    );
    report!(
        "  quiet outage (3 s, no load), probes 1 s in: {}; /readyz after the return: {:?}",
        probes_down
            .iter()
            .map(|(n, p, st, ra, took)| format!(
                "{n} {p} {}{} in {}",
                st.as_u16(),
                if *ra { " (Retry-After)" } else { "" },
                ms(*took)
            ))
            .collect::<Vec<_>>()
            .join(", "),
        ready_again.iter().map(|s| s.as_u16()).collect::<Vec<_>>()
    );
    report!(
        "  quiet outage (3 s, no load): first 2xx after the return: node A {}, node B {}; \
         {} probes, {} not 2xx, max latency {}",
        quiet_first_ok[0].map(ms).unwrap_or("never".into()),
        quiet_first_ok[1].map(ms).unwrap_or("never".into()),
        quiet.len(),
        quiet_failed,
        ms(quiet.iter().map(|q| q.1).max().unwrap_or_default())
    );

    let logs_of = || {
        format!(
            "{}\n{}\n--- postgres:\n{}",
            nodes[0].logs(),
            nodes[1].logs(),
            cluster.lock().unwrap_or_else(|e| e.into_inner()).log_tail()
        )
    };
    // Nothing hangs and nothing is a 500 (D6), in any phase.
    let bad: Vec<&Outcome> = outcomes
        .iter()
        .filter(|o| !o.ok() && o.status != Some(StatusCode::SERVICE_UNAVAILABLE))
        .collect();
    assert!(
        bad.is_empty(),
        "only 2xx and 503, never a 500 or no answer: {bad:#?}\n{}",
        logs_of()
    );
    let slow: Vec<&Outcome> = outcomes.iter().filter(|o| o.took > MAX_LATENCY).collect();
    assert!(
        slow.is_empty(),
        "no request may take longer than {MAX_LATENCY:?}: {slow:#?}"
    );
    // Every 503, in flight or not, is a proper one (D6, D21 revised).
    let improper: Vec<&Outcome> = outcomes
        .iter()
        .filter(|o| o.status == Some(StatusCode::SERVICE_UNAVAILABLE) && !o.is_proper_503())
        .collect();
    assert!(
        improper.is_empty(),
        "a 503 carries Retry-After and SERVICE_UNAVAILABLE (/v1) or temporarily_unavailable \
         (/oauth): {improper:#?}"
    );
    assert!(
        before.iter().all(|o| o.ok()),
        "the healthy load is all 2xx:\n{}\n{}",
        tally(before.iter().copied()),
        logs_of()
    );
    assert!(
        outage.len() >= 10,
        "the outage saw too few requests to judge: {}",
        outage.len()
    );
    assert!(
        outage.iter().all(|o| o.is_proper_503()),
        "every request during the outage is a 503:\n{}",
        tally(outage.iter().copied())
    );
    for (node, (first_ok, _)) in recovered.iter().enumerate() {
        assert!(
            first_ok.is_some_and(|d| d <= RECOVERY_LIMIT),
            "node {node} serves again within {RECOVERY_LIMIT:?} of the database's return"
        );
    }
    let late: Vec<&Outcome> = after
        .iter()
        .copied()
        .filter(|o| o.started >= up + RECOVERY_LIMIT && !o.ok())
        .collect();
    assert!(
        late.is_empty(),
        "everything sent {RECOVERY_LIMIT:?} after the return is 2xx: {late:#?}\n{}",
        logs_of()
    );
    assert!(
        missing.is_empty(),
        "D43: no acknowledged write is lost: {missing:?}"
    );
    assert!(!written.is_empty(), "the load acknowledged writes");
    assert!(
        undelivered.is_empty(),
        "D30: every acknowledged invitation is delivered: {undelivered:?}\n{}",
        logs_of()
    );
    assert!(
        quiet_first_ok
            .iter()
            .all(|d| d.is_some_and(|d| d <= RECOVERY_LIMIT)),
        "after a quiet outage both nodes serve within {RECOVERY_LIMIT:?}: {quiet:?}\n{}",
        logs_of()
    );
    assert!(
        quiet.iter().all(|(_, took, s)| *took <= MAX_LATENCY
            && s.is_some_and(|s| s.is_success() || s == StatusCode::SERVICE_UNAVAILABLE)),
        "after a quiet outage: 2xx or 503, in time: {quiet:?}"
    );
    for (node, path, status, retry_after, took) in &probes_down {
        let want = if *path == "/healthz" {
            StatusCode::OK
        } else {
            StatusCode::SERVICE_UNAVAILABLE
        };
        assert_eq!(
            *status, want,
            "D42: {path} of node {node} while the database is away"
        );
        assert!(
            *path == "/healthz" || *retry_after,
            "D6: /readyz's 503 carries Retry-After"
        );
        assert!(*took <= MAX_LATENCY, "{path} answered in {took:?}");
    }
    assert!(
        ready_again.iter().all(|s| *s == StatusCode::OK),
        "D42: /readyz is 200 again once the database is back: {ready_again:?}"
    );
    assert!(
        revocation_seen.is_some_and(|d| d <= Duration::from_secs(1)),
        "D44: the other node enforces a revocation within a second after the outage \
         ({revocation_seen:?})\n{}",
        logs_of()
    );
}

// ---------------------------------------------------------------------------
// Drill 2: SQLite on a full disk
// ---------------------------------------------------------------------------

/// A tmpfs mounted for the drill; unmounted when dropped.
struct Tmpfs {
    path: PathBuf,
}

impl Tmpfs {
    /// `None` when this machine cannot mount one (see the module docs).
    fn mount(path: &Path, size: &str) -> Option<Self> {
        std::fs::create_dir_all(path).unwrap();
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o"])
            .arg(format!("size={size},mode=0755"))
            .arg("gatehouse-drill")
            .arg(path)
            .output();
        let why = match out {
            Ok(o) if o.status.success() => {
                return Some(Self {
                    path: path.to_owned(),
                });
            }
            Ok(o) => String::from_utf8_lossy(&o.stderr).trim().to_owned(),
            Err(e) => e.to_string(),
        };
        assert!(
            !required("GATEHOUSE_REQUIRE_MOUNT"),
            "mount -t tmpfs failed ({why}) and GATEHOUSE_REQUIRE_MOUNT=1"
        );
        report!(
            "\n*** skipped: the disk-full drill needs `mount -t tmpfs` (root or CAP_SYS_ADMIN), \
             which failed here: {why}; set GATEHOUSE_REQUIRE_MOUNT=1 to fail instead ***\n"
        );
        None
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let ok = Command::new("umount")
            .arg(&self.path)
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            let _ = Command::new("umount").arg("-l").arg(&self.path).status();
        }
    }
}

/// Fills the file system of `path` with `filler`, then gives back `slack`
/// bytes, so the next writes of the server run out of space soon.
fn fill(filler: &Path, slack: u64) -> u64 {
    let mut f = std::fs::File::create(filler).unwrap();
    let chunk = vec![0x5a_u8; 64 * 1024];
    let mut written = 0u64;
    loop {
        match f.write(&chunk) {
            Ok(0) => break,
            Ok(n) => written += n as u64,
            Err(e) if e.raw_os_error() == Some(28) => break, // ENOSPC
            Err(e) => panic!("filling {}: {e}", filler.display()),
        }
    }
    let _ = f.flush();
    let keep = written.saturating_sub(slack);
    f.set_len(keep).unwrap();
    f.sync_all().unwrap();
    keep
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a failure drill (about a minute): scripts/drills.sh runs it"]
async fn sqlite_full_disk_refuses_writes_keeps_reads_and_loses_nothing() {
    let root = tempfile::tempdir().unwrap();
    let mnt = root.path().join("mnt");
    // Room for the database and its WAL at first; the filler takes the rest.
    let Some(tmpfs) = Tmpfs::mount(&mnt, "8m") else {
        return;
    };
    let data = tmpfs.path.join("data");
    let logs = tempfile::tempdir().unwrap();
    let client = http_client();

    let mut s = Serve::spawn("sqlite", &data, None, None, logs.path());
    s.ready(&client).await;
    let bootstrap = bootstrap_credentials(&data);
    let creds = drill_client(&data, None, None);
    assert_ne!(creds.0, bootstrap.0);
    let t = token(&client, &s, &creds).await;
    let mut acknowledged: Vec<(&'static str, String)> = Vec::new();
    for i in 0..5 {
        let id = create_user(&client, &s, &t, &format!("before{i}@example.com")).await;
        acknowledged.push(("users", id));
    }

    let filler = tmpfs.path.join("filler");
    let filler_bytes = fill(&filler, 1024 * 1024);

    // Write until the disk is full: users and products alternately.
    let started = Instant::now();
    let mut until_full: Vec<Outcome> = Vec::new();
    let mut k = 0usize;
    loop {
        let op = if k.is_multiple_of(2) {
            Op::CreateUser
        } else {
            Op::CreateProduct
        };
        let o = run_op(&client, &s, &t, &creds, op, &format!("fill-{k}"), "-").await;
        k += 1;
        let full = o.status == Some(StatusCode::SERVICE_UNAVAILABLE);
        if let Some(c) = o.created.clone() {
            acknowledged.push(c);
        }
        until_full.push(o);
        if full {
            break;
        }
        assert!(
            until_full.last().unwrap().ok(),
            "while the disk fills up a write is 201, or 503 once it is full, never a 500 \
             (D6): {:?}\n{}",
            until_full.last(),
            s.logs()
        );
        assert!(
            k < 5000 && started.elapsed() < Duration::from_secs(30),
            "the disk never filled ({k} writes)"
        );
    }
    let writes_to_fill = until_full.len();
    let mut files: Vec<String> = std::fs::read_dir(&data)
        .unwrap()
        .flatten()
        .map(|e| {
            let len = e.metadata().map(|m| m.len()).unwrap_or(0);
            format!("{} {len}", e.file_name().to_string_lossy())
        })
        .collect();
    files.sort();

    // While full: writes are refused with a 503, reads are served.
    let mut full_writes = Vec::new();
    let mut full_reads = Vec::new();
    let mut full_tokens = Vec::new();
    for i in 0..10 {
        let op = if i % 2 == 0 {
            Op::CreateUser
        } else {
            Op::CreateProduct
        };
        let o = run_op(&client, &s, &t, &creds, op, &format!("full-{i}"), "-").await;
        if let Some(c) = o.created.clone() {
            acknowledged.push(c);
        }
        full_writes.push(o);
        let known = &acknowledged[i % acknowledged.len()].1;
        let known = if known.starts_with("usr_") {
            known.clone()
        } else {
            acknowledged[0].1.clone()
        };
        full_reads.push(run_op(&client, &s, &t, &creds, Op::GetUser, "-", &known).await);
        full_reads.push(run_op(&client, &s, &t, &creds, Op::ListUsers, "-", "-").await);
        if i % 5 == 0 {
            full_tokens.push(run_op(&client, &s, &t, &creds, Op::Token, "-", "-").await);
        }
    }

    // Space back: writes work again.
    std::fs::remove_file(&filler).unwrap();
    let freed_at = Instant::now();
    let mut after_free = Vec::new();
    loop {
        let o = run_op(
            &client,
            &s,
            &t,
            &creds,
            Op::CreateUser,
            &format!("freed-{}", after_free.len()),
            "-",
        )
        .await;
        let ok = o.ok();
        if let Some(c) = o.created.clone() {
            acknowledged.push(c);
        }
        after_free.push(o);
        if ok {
            break;
        }
        assert!(
            freed_at.elapsed() < Duration::from_secs(5),
            "writes still fail 5 s after space was freed: {after_free:#?}\n{}",
            s.logs()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let write_back_after = freed_at.elapsed();
    for i in 0..6 {
        let op = if i % 2 == 0 {
            Op::CreateUser
        } else {
            Op::CreateProduct
        };
        let o = run_op(&client, &s, &t, &creds, op, &format!("again-{i}"), "-").await;
        if let Some(c) = o.created.clone() {
            acknowledged.push(c);
        }
        after_free.push(o);
    }
    let served = missing_writes(&client, &[(s.url(""), t.clone())], &acknowledged).await;

    // D43: a clean stop, then the database itself is checked.
    let exit = s.terminate().await;
    let db_path = data.join("gatehouse.db");
    let (integrity, missing_in_db) = {
        let c = rusqlite::Connection::open(&db_path).unwrap();
        let integrity: Vec<String> = c
            .prepare("PRAGMA integrity_check")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        let mut missing = Vec::new();
        for (kind, id) in &acknowledged {
            let n: i64 = c
                .query_row(
                    &format!("SELECT count(*) FROM {kind} WHERE id = ?1"),
                    [id],
                    |r| r.get(0),
                )
                .unwrap();
            if n != 1 {
                missing.push(format!("{kind}/{id}"));
            }
        }
        (integrity.join("; "), missing)
    };

    report!("\n=== DRILL sqlite full disk (tmpfs of 8 MiB, filler of {filler_bytes} bytes) ===");
    report!(
        "  writes until the first refusal: {writes_to_fill} (the last: {}); the data directory \
         then (bytes): {}",
        until_full.last().unwrap().label(),
        files.join(", ")
    );
    report!(
        "  while full: writes, max latency {}\n{}",
        ms(max_took(full_writes.iter())),
        tally(full_writes.iter())
    );
    report!(
        "  while full: reads, max latency {}\n{}",
        ms(max_took(full_reads.iter())),
        tally(full_reads.iter())
    );
    report!(
        "  while full: token requests\n{}",
        tally(full_tokens.iter())
    );
    report!(
        "  after the filler was removed: writes work again after {} ({} tries); then\n{}",
        ms(write_back_after),
        after_free.len() - 6,
        tally(after_free.iter())
    );
    report!("  server log, WARN/ERROR lines:\n{}", log_summary(&[&s]));
    report!(
        "  SIGTERM exit: {exit}; PRAGMA integrity_check: {integrity}; acknowledged writes: {} \
         checked, {} not served before the stop, {} missing from the database file",
        acknowledged.len(),
        served.len(),
        missing_in_db.len()
    );

    let refused = until_full.last().unwrap();
    assert!(
        refused.is_proper_503(),
        "a write on a full disk is 503 SERVICE_UNAVAILABLE with Retry-After: {refused:#?}\n{}",
        s.logs()
    );
    let bad_writes: Vec<&Outcome> = full_writes
        .iter()
        .filter(|o| !o.ok() && !o.is_proper_503())
        .collect();
    assert!(
        bad_writes.is_empty(),
        "writes on a full disk: 201 or a proper 503, never a 500: {bad_writes:#?}"
    );
    assert!(
        full_writes.iter().any(|o| o.is_proper_503()),
        "the disk stayed full"
    );
    assert!(
        full_reads.iter().all(|o| o.status == Some(StatusCode::OK)),
        "reads are served while the disk is full:\n{}",
        tally(full_reads.iter())
    );
    let bad_tokens: Vec<&Outcome> = full_tokens
        .iter()
        .filter(|o| !o.ok() && !o.is_proper_503())
        .collect();
    assert!(
        bad_tokens.is_empty(),
        "token requests: 200 or 503 temporarily_unavailable: {bad_tokens:#?}"
    );
    assert!(
        after_free.iter().rev().take(6).all(|o| o.ok()),
        "writes work once space is back:\n{}",
        tally(after_free.iter())
    );
    let slow: Vec<&Outcome> = until_full
        .iter()
        .chain(&full_writes)
        .chain(&full_reads)
        .chain(&after_free)
        .filter(|o| o.took > MAX_LATENCY)
        .collect();
    assert!(
        slow.is_empty(),
        "nothing takes over {MAX_LATENCY:?}: {slow:#?}"
    );
    assert!(served.is_empty(), "acknowledged writes served: {served:?}");
    assert_eq!(exit.code(), Some(0), "D43: SIGTERM exits 0");
    assert_eq!(integrity, "ok", "PRAGMA integrity_check");
    assert!(
        missing_in_db.is_empty(),
        "D43: acknowledged writes in the database: {missing_in_db:?}"
    );
    drop(tmpfs);
}

/// [`perform`] against one server, timed.
async fn run_op(
    client: &reqwest::Client,
    s: &Serve,
    token: &str,
    creds: &(String, String),
    op: Op,
    unique: &str,
    known_user: &str,
) -> Outcome {
    let t0 = Instant::now();
    let (status, code, retry_after, shape, created) =
        perform(client, &s.url(""), token, creds, op, unique, known_user).await;
    Outcome {
        node: 0,
        op,
        started: Duration::ZERO,
        took: t0.elapsed(),
        status,
        code,
        retry_after,
        shape,
        created,
        unique: unique.to_owned(),
    }
}
