//! Sign-in, code exchange and refresh of two gatehouse binaries side by
//! side, in alternating rounds on loopback (issue 31: "code exchange,
//! refresh and sign-in at ≥ 90 % of the build before, side by side,
//! alternating, in one run"; `scripts/ab.sh` does the read and the
//! client-credentials token the same way). This VM's speed drifts between
//! minutes, so only figures taken in the same minutes compare.
//!
//!     scripts/grants-ab.sh OLD_BINARY NEW_BINARY
//!     OLD=… NEW=… cargo bench -p gatehouse --bench grants_ab
//!
//! Each round starts each binary (old then new, the next round new then
//! old) on a fresh SQLite data directory, behind a proxy (plain HTTP, so TLS
//! does not hide the difference), as `scripts/five.sh` does:
//! `GATEHOUSE_LOG=warn BIN --data-dir DIR serve --behind-proxy --http-addr
//! 127.0.0.1:PORT --admin-addr 127.0.0.1:0 --public-url https://localhost`,
//! and sets it up with the binary's own CLI: an enterprise organization
//! whose plan does not limit the load (D28), a confidential client with the
//! scopes `openid profile users:read` and the redirect URI
//! `http://127.0.0.1:9/cb`, and four users with passwords. Every user signs
//! in and allows the client once during the set-up, so consent is
//! remembered (D49) for what is measured. No flag lifts a throttle: D26's
//! sign-in throttles and D28's guard count failures only, and the plan does
//! not limit the client, so both binaries get exactly the flags above.
//! Then, for SECONDS each, it counts per second:
//!
//! - sign-in (SIGNIN_CONCURRENCY workers): a password sign-in through the
//!   real pages with a fresh cookie jar each time: `GET /oauth/authorize`
//!   (PKCE S256) → the login page → its form posted with the CSRF token
//!   and the hidden fields the page gives → the consent page, allowed, if
//!   it is shown → the 303 to the redirect URI with `code` (not exchanged);
//! - code exchange (CONCURRENCY workers, each with its own signed-in
//!   browser session): `GET /oauth/authorize` answered at once with a 303
//!   and a code, then `POST /oauth/token` `authorization_code` (client
//!   secret basic, `code_verifier`); the authorize is part of each exchange;
//! - refresh (CONCURRENCY workers, each with its own chain from one
//!   exchange): `POST /oauth/token` `refresh_token`, the rotated refresh
//!   token kept for the next.
//!
//! The driver is this one process on one thread (it shares the two cores
//! with the server, as wrk does with one thread), HTTP/1.1 keep-alive. Any
//! other answer than the flow expects is an error: the worker stops, the
//! errors are listed and the run exits non-zero. Prints every round, the
//! medians per binary, new/old and the threshold.
//!
//! Settings: OLD and NEW (the binaries, required), ROUNDS (default 3),
//! SECONDS (per measure, default 5), CONCURRENCY (exchange and refresh
//! workers, default 8), SIGNIN_CONCURRENCY (default 4). The default run
//! takes about a minute and a half.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use reqwest::header::{COOKIE, LOCATION, SET_COOKIE};
use reqwest::{StatusCode, Url};
use serde_json::Value;

const REDIRECT: &str = "http://127.0.0.1:9/cb";
const SCOPE: &str = "openid profile users:read";
const PASSWORD: &str = "a long bench passphrase";
const USERS: usize = 4;

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn binary(name: &str) -> PathBuf {
    let Ok(path) = std::env::var(name) else {
        eprintln!("usage: OLD=BINARY NEW=BINARY cargo bench -p gatehouse --bench grants_ab");
        std::process::exit(2);
    };
    std::fs::canonicalize(&path).unwrap_or_else(|e| {
        eprintln!("{name}={path}: {e}");
        std::process::exit(2);
    })
}

// ---------------------------------------------------------------------------
// The server under test
// ---------------------------------------------------------------------------

/// A gatehouse binary serving a fresh data directory; stopped when dropped.
struct Server {
    bin: PathBuf,
    dir: tempfile::TempDir,
    child: Child,
    base: String,
}

impl Server {
    async fn start(bin: &Path, http: &reqwest::Client) -> Result<Self, String> {
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        // A free port: taken from the system, then given up to the server.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| e.to_string())?
            .port();
        let data = dir.path().join("data");
        let log = |name: &str| std::fs::File::create(dir.path().join(name));
        let child = Command::new(bin)
            .env("GATEHOUSE_LOG", "warn")
            .arg("--data-dir")
            .arg(&data)
            .args(["serve", "--behind-proxy", "--http-addr"])
            .arg(format!("127.0.0.1:{port}"))
            .args(["--admin-addr", "127.0.0.1:0"])
            .args(["--public-url", "https://localhost"])
            .stdin(Stdio::null())
            .stdout(log("out").map_err(|e| e.to_string())?)
            .stderr(log("err").map_err(|e| e.to_string())?)
            .spawn()
            .map_err(|e| format!("{}: {e}", bin.display()))?;
        let mut server = Self {
            bin: bin.to_owned(),
            dir,
            child,
            base: format!("http://127.0.0.1:{port}"),
        };
        let until = Instant::now() + Duration::from_secs(30);
        loop {
            let res = http.get(format!("{}/healthz", server.base)).send().await;
            if res.is_ok_and(|r| r.status() == StatusCode::OK) {
                return Ok(server);
            }
            if let Ok(Some(status)) = server.child.try_wait() {
                return Err(format!("the server ended ({status}): {}", server.stderr()));
            }
            if Instant::now() > until {
                return Err(format!("no 200 from /healthz in 30 s: {}", server.stderr()));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    fn stderr(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("err")).unwrap_or_default()
    }

    /// Runs `BIN --data-dir DIR ARGS… --json` (with `stdin` on its standard
    /// input) and returns its JSON answer.
    fn cli(&self, args: &[&str], stdin: Option<&str>) -> Result<Value, String> {
        use std::io::Write as _;
        let mut child = Command::new(&self.bin)
            .env("GATEHOUSE_LOG", "warn")
            .arg("--data-dir")
            .arg(self.dir.path().join("data"))
            .args(args)
            .arg("--json")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| e.to_string())?;
        if let Some(mut input) = child.stdin.take() {
            let _ = writeln!(input, "{}", stdin.unwrap_or(""));
        }
        let out = child.wait_with_output().map_err(|e| e.to_string())?;
        let text = String::from_utf8_lossy(&out.stdout);
        if !out.status.success() {
            return Err(format!(
                "{args:?}: {} {text} {}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        serde_json::from_str(&text).map_err(|e| format!("{args:?}: {e}: {text}"))
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Ok(Some(_)) = self.child.try_wait() {
            return;
        }
        // SIGTERM first, as the scripts stop it; SIGKILL if it lingers.
        let _ = Command::new("kill")
            .arg(self.child.id().to_string())
            .stderr(Stdio::null())
            .status();
        let until = Instant::now() + Duration::from_secs(10);
        while Instant::now() < until {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What a set-up server is measured with.
struct Target {
    http: reqwest::Client,
    base: String,
    client_id: String,
    secret: String,
    emails: Vec<String>,
}

fn str_of(v: &Value, key: &str) -> Result<String, String> {
    v[key]
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| format!("no {key} in {v}"))
}

/// The organization, the client and the users, through the binary's CLI.
fn set_up(server: &Server, http: &reqwest::Client) -> Result<Target, String> {
    let org = server.cli(
        &[
            "org",
            "create",
            "--name",
            "Load",
            "--plan",
            "enterprise",
            "--per-minute",
            "1000000000",
            "--per-second",
            "100000000",
        ],
        None,
    )?;
    let org = str_of(&org, "id")?;
    let client = server.cli(
        &[
            "client",
            "create",
            "--org",
            &org,
            "--name",
            "load",
            "--scopes",
            SCOPE,
            "--redirect-uri",
            REDIRECT,
        ],
        None,
    )?;
    let mut emails = Vec::new();
    for i in 0..USERS {
        let email = format!("load{i}@example.com");
        let name = format!("Load {i}");
        server.cli(
            &[
                "user",
                "create",
                "--org",
                &org,
                "--email",
                &email,
                "--name",
                &name,
                "--role",
                "editor",
                "--password-stdin",
            ],
            Some(PASSWORD),
        )?;
        emails.push(email);
    }
    Ok(Target {
        http: http.clone(),
        base: server.base.clone(),
        client_id: str_of(&client, "client_id")?,
        secret: str_of(&client, "client_secret")?,
        emails,
    })
}

// ---------------------------------------------------------------------------
// A browser: a cookie jar and the pages' POST forms
// ---------------------------------------------------------------------------

/// A response with its body read.
struct Page {
    status: StatusCode,
    location: Option<String>,
    body: String,
}

impl Page {
    fn describe(&self) -> String {
        let body: String = self.body.chars().take(300).collect();
        format!("{} {:?} {body}", self.status, self.location)
    }
}

/// A POST form of a page: its action and hidden fields, and the names of
/// all its fields.
struct Form {
    action: String,
    hidden: Vec<(String, String)>,
    names: Vec<String>,
}

/// What the pages' HTML escaping (minijinja's) writes.
fn unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find('&') {
        out.push_str(&rest[..i]);
        rest = &rest[i..];
        let decoded = rest.find(';').filter(|e| *e <= 10).and_then(|e| {
            let ent = &rest[1..e];
            let c = match ent {
                "amp" => Some('&'),
                "lt" => Some('<'),
                "gt" => Some('>'),
                "quot" => Some('"'),
                "apos" => Some('\''),
                _ => ent
                    .strip_prefix("#x")
                    .or_else(|| ent.strip_prefix("#X"))
                    .and_then(|h| u32::from_str_radix(h, 16).ok())
                    .or_else(|| ent.strip_prefix('#').and_then(|d| d.parse().ok()))
                    .and_then(char::from_u32),
            };
            c.map(|c| (c, e))
        });
        match decoded {
            Some((c, e)) => {
                out.push(c);
                rest = &rest[e + 1..];
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

fn attr(tag: &str, name: &str) -> Option<String> {
    for quote in ['"', '\''] {
        let needle = format!(" {name}={quote}");
        if let Some(i) = tag.find(&needle) {
            let start = i + needle.len();
            let end = tag[start..].find(quote)? + start;
            return Some(unescape(&tag[start..end]));
        }
    }
    None
}

/// The first POST form of `html` with a field (input or button) `field`.
fn form_with(html: &str, field: &str) -> Option<Form> {
    let mut search = 0;
    while let Some(i) = html[search..].find("<form") {
        let start = search + i;
        let tag_end = html[start..].find('>')? + start;
        let tag = &html[start..=tag_end];
        let end = html[tag_end..]
            .find("</form>")
            .map_or(html.len(), |e| e + tag_end);
        search = end;
        if !attr(tag, "method").is_some_and(|m| m.eq_ignore_ascii_case("post")) {
            continue;
        }
        let body = &html[tag_end..end];
        let mut form = Form {
            action: attr(tag, "action").unwrap_or_default(),
            hidden: vec![],
            names: vec![],
        };
        for open in ["<input", "<button"] {
            let mut from = 0;
            while let Some(j) = body[from..].find(open) {
                let t0 = from + j;
                let t1 = body[t0..].find('>').map_or(body.len() - 1, |e| e + t0);
                let t = &body[t0..=t1];
                from = t1;
                let Some(name) = attr(t, "name") else {
                    continue;
                };
                if attr(t, "type").is_some_and(|ty| ty.eq_ignore_ascii_case("hidden")) {
                    form.hidden
                        .push((name.clone(), attr(t, "value").unwrap_or_default()));
                }
                form.names.push(name);
            }
        }
        if form.names.iter().any(|n| n == field) {
            return Some(form);
        }
    }
    None
}

/// A browser: a cookie jar over the shared client (which follows no
/// redirects).
#[derive(Default)]
struct Browser {
    jar: BTreeMap<String, String>,
}

impl Browser {
    async fn send(&mut self, mut rb: reqwest::RequestBuilder) -> Result<Page, String> {
        if !self.jar.is_empty() {
            let c = self
                .jar
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join("; ");
            rb = rb.header(COOKIE, c);
        }
        let res = rb.send().await.map_err(|e| e.to_string())?;
        let status = res.status();
        let headers = res.headers().clone();
        let body = res.text().await.map_err(|e| e.to_string())?;
        for c in headers.get_all(SET_COOKIE) {
            let c = c.to_str().map_err(|e| e.to_string())?;
            let Some((k, v)) = c.split(';').next().and_then(|f| f.trim().split_once('=')) else {
                continue;
            };
            let expired = c
                .split(';')
                .any(|a| a.trim().eq_ignore_ascii_case("max-age=0"));
            if v.is_empty() || expired {
                self.jar.remove(k);
            } else {
                self.jar.insert(k.to_owned(), v.to_owned());
            }
        }
        let location = headers
            .get(LOCATION)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        Ok(Page {
            status,
            location,
            body,
        })
    }

    async fn get(&mut self, t: &Target, url: Url) -> Result<Page, String> {
        self.send(t.http.get(url)).await
    }

    /// Submits `form` with its hidden fields and `extra`.
    async fn submit(
        &mut self,
        t: &Target,
        form: &Form,
        extra: &[(&str, &str)],
    ) -> Result<Page, String> {
        let mut fields = form.hidden.clone();
        fields.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        let url = if form.action.starts_with('/') {
            format!("{}{}", t.base, form.action)
        } else {
            form.action.clone()
        };
        self.send(t.http.post(url).form(&fields)).await
    }
}

/// An authorization request with a fresh state and PKCE pair.
struct AuthRequest {
    url: Url,
    state: String,
    verifier: String,
}

impl AuthRequest {
    fn new(t: &Target) -> Self {
        let verifier = format!(
            "{}-{}",
            gatehouse_domain::random::base62(256),
            gatehouse_domain::random::base62(64)
        );
        let state = gatehouse_domain::random::base62(64);
        let mut url = Url::parse(&format!("{}/oauth/authorize", t.base)).expect("a URL");
        url.query_pairs_mut()
            .append_pair("response_type", "code")
            .append_pair("client_id", &t.client_id)
            .append_pair("redirect_uri", REDIRECT)
            .append_pair("scope", SCOPE)
            .append_pair("state", &state)
            .append_pair(
                "code_challenge",
                &gatehouse_auth::pkce::challenge_for(&verifier),
            )
            .append_pair("code_challenge_method", "S256");
        Self {
            url,
            state,
            verifier,
        }
    }

    /// The code of the redirect to the client that `page` must be.
    fn code_of(&self, page: &Page) -> Result<String, String> {
        let location = page
            .location
            .as_deref()
            .filter(|_| page.status.is_redirection())
            .ok_or_else(|| format!("expected a redirect to the client: {}", page.describe()))?;
        let url = Url::parse(location).map_err(|e| format!("{location}: {e}"))?;
        let query: BTreeMap<_, _> = url.query_pairs().collect();
        if !location.starts_with(&format!("{REDIRECT}?"))
            || query.get("state").map(|s| s.as_ref()) != Some(self.state.as_str())
        {
            return Err(format!("not back to the client with the state: {location}"));
        }
        query
            .get("code")
            .map(|c| c.to_string())
            .ok_or_else(|| format!("no code: {location}"))
    }
}

/// A password sign-in through the pages with a fresh cookie jar: returns
/// the browser (signed in), the code, its request, and whether the consent
/// page was shown.
async fn sign_in(t: &Target, email: &str) -> Result<(Browser, String, AuthRequest, bool), String> {
    let mut b = Browser::default();
    let req = AuthRequest::new(t);
    let login = b.get(t, req.url.clone()).await?;
    let form = form_with(&login.body, "password")
        .filter(|_| login.status == StatusCode::OK)
        .ok_or_else(|| format!("expected the login page: {}", login.describe()))?;
    let mut page = b
        .submit(t, &form, &[("email", email), ("password", PASSWORD)])
        .await?;
    let mut consent = false;
    if page.status == StatusCode::OK
        && let Some(form) = form_with(&page.body, "decision")
    {
        consent = true;
        page = b.submit(t, &form, &[("decision", "allow")]).await?;
    }
    let code = req.code_of(&page)?;
    Ok((b, code, req, consent))
}

/// A token answer that is 200 with the fields of the code and refresh
/// grants; returns its refresh token.
async fn token(t: &Target, form: &[(&str, &str)]) -> Result<String, String> {
    let res = t
        .http
        .post(format!("{}/oauth/token", t.base))
        .basic_auth(&t.client_id, Some(&t.secret))
        .form(form)
        .send()
        .await
        .map_err(|e| e.to_string())?;
    let status = res.status();
    let body = res.text().await.map_err(|e| e.to_string())?;
    if status != StatusCode::OK {
        return Err(format!("token endpoint: {status} {body}"));
    }
    let v: Value = serde_json::from_str(&body).map_err(|e| format!("{e}: {body}"))?;
    if v["access_token"].as_str().is_none_or(str::is_empty) {
        return Err(format!("no access_token: {body}"));
    }
    str_of(&v, "refresh_token")
}

async fn exchange(t: &Target, code: &str, verifier: &str) -> Result<String, String> {
    token(
        t,
        &[
            ("grant_type", "authorization_code"),
            ("code", code),
            ("redirect_uri", REDIRECT),
            ("code_verifier", verifier),
        ],
    )
    .await
}

// ---------------------------------------------------------------------------
// Workers
// ---------------------------------------------------------------------------

/// What one worker did before the deadline (or its first error).
#[derive(Default)]
struct Tally {
    done: u64,
    consents: u64,
    error: Option<String>,
}

async fn sign_in_worker(t: &Target, email: &str, deadline: Instant) -> Tally {
    let mut tally = Tally::default();
    while Instant::now() < deadline {
        match sign_in(t, email).await {
            Ok((_, _, _, consent)) => {
                tally.done += 1;
                tally.consents += u64::from(consent);
            }
            Err(e) => {
                tally.error = Some(format!("sign-in: {e}"));
                break;
            }
        }
    }
    tally
}

/// Authorize in the signed-in browser `b` (a 303 with a code at once, the
/// consent being remembered), then exchange the code.
async fn authorize_and_exchange(t: &Target, b: &mut Browser) -> Result<String, String> {
    let req = AuthRequest::new(t);
    let page = b.get(t, req.url.clone()).await?;
    let code = req.code_of(&page)?;
    exchange(t, &code, &req.verifier).await
}

async fn exchange_worker(t: &Target, b: &mut Browser, deadline: Instant) -> Tally {
    let mut tally = Tally::default();
    while Instant::now() < deadline {
        match authorize_and_exchange(t, b).await {
            Ok(_) => tally.done += 1,
            Err(e) => {
                tally.error = Some(format!("code exchange: {e}"));
                break;
            }
        }
    }
    tally
}

async fn refresh_worker(t: &Target, refresh_token: &mut String, deadline: Instant) -> Tally {
    let mut tally = Tally::default();
    while Instant::now() < deadline {
        let form = [
            ("grant_type", "refresh_token"),
            ("refresh_token", refresh_token.as_str()),
        ];
        match token(t, &form).await {
            Ok(next) => {
                *refresh_token = next;
                tally.done += 1;
            }
            Err(e) => {
                tally.error = Some(format!("refresh: {e}"));
                break;
            }
        }
    }
    tally
}

/// Sums the workers' tallies into a rate over `elapsed`.
fn rate(tallies: Vec<Tally>, elapsed: Duration, errors: &mut Vec<String>) -> (f64, u64) {
    let done: u64 = tallies.iter().map(|t| t.done).sum();
    let consents = tallies.iter().map(|t| t.consents).sum();
    errors.extend(tallies.into_iter().filter_map(|t| t.error));
    (done as f64 / elapsed.as_secs_f64(), consents)
}

// ---------------------------------------------------------------------------
// A round of one binary
// ---------------------------------------------------------------------------

struct Settings {
    seconds: u64,
    concurrency: usize,
    signin_concurrency: usize,
}

struct Row {
    signin: f64,
    exchange: f64,
    refresh: f64,
    /// Consent pages shown during the timed sign-ins (expected none).
    consents: u64,
    errors: Vec<String>,
}

async fn measure(bin: &Path, http: &reqwest::Client, s: &Settings) -> Result<Row, String> {
    let server = Server::start(bin, http).await?;
    let t = set_up(&server, http)?;
    let secs = Duration::from_secs(s.seconds);
    // Every user signs in once and allows the client (remembered, D49);
    // the first `concurrency` browsers are the exchange workers' sessions.
    let mut browsers = Vec::new();
    for i in 0..s.concurrency.max(USERS) {
        let (b, _, _, _) = sign_in(&t, &t.emails[i % USERS]).await?;
        browsers.push(b);
    }
    browsers.truncate(s.concurrency);
    let mut errors = Vec::new();

    let start = Instant::now();
    let workers =
        (0..s.signin_concurrency).map(|w| sign_in_worker(&t, &t.emails[w % USERS], start + secs));
    let tallies = futures_util::future::join_all(workers).await;
    let (signin, consents) = rate(tallies, start.elapsed(), &mut errors);

    let start = Instant::now();
    let workers = browsers
        .iter_mut()
        .map(|b| exchange_worker(&t, b, start + secs));
    let tallies = futures_util::future::join_all(workers).await;
    let (exchange, _) = rate(tallies, start.elapsed(), &mut errors);

    // Each refresh worker's chain: one more exchange in its session.
    let mut chains = Vec::new();
    for b in &mut browsers {
        chains.push(authorize_and_exchange(&t, b).await?);
    }
    let start = Instant::now();
    let workers = chains
        .iter_mut()
        .map(|rt| refresh_worker(&t, rt, start + secs));
    let tallies = futures_util::future::join_all(workers).await;
    let (refresh, _) = rate(tallies, start.elapsed(), &mut errors);

    if !errors.is_empty() {
        let log = server.stderr();
        if !log.trim().is_empty() {
            errors.push(format!("server's log: {}", log.trim()));
        }
    }
    drop(server);
    Ok(Row {
        signin,
        exchange,
        refresh,
        consents,
        errors,
    })
}

/// One figure of a row.
type Figure = fn(&Row) -> f64;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        f64::NAN
    } else if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    let old = binary("OLD");
    let new = binary("NEW");
    let rounds = env_or("ROUNDS", 3);
    let s = Settings {
        seconds: env_or("SECONDS", 5),
        concurrency: env_or("CONCURRENCY", 8).max(1) as usize,
        signin_concurrency: env_or("SIGNIN_CONCURRENCY", 4).max(1) as usize,
    };
    let http = reqwest::Client::builder()
        .http1_only()
        .redirect(reqwest::redirect::Policy::none())
        .pool_max_idle_per_host(s.concurrency.max(s.signin_concurrency))
        .timeout(Duration::from_secs(30))
        .build()
        .expect("an HTTP client");

    println!("old: {}", old.display());
    println!("new: {}", new.display());
    println!(
        "behind a proxy (plain HTTP), loopback, {rounds} alternating rounds, {} s per measure, \
         {} sign-in workers, {} exchange and refresh workers, one driver thread, scope \"{SCOPE}\"",
        s.seconds, s.signin_concurrency, s.concurrency
    );
    println!(
        "{:<7} {:>5} {:>10} {:>11} {:>10}",
        "binary", "round", "sign-in/s", "exchange/s", "refresh/s"
    );
    let mut rows: Vec<(&str, u64, Row)> = Vec::new();
    let mut failed = false;
    for round in 1..=rounds {
        let order = if round % 2 == 1 {
            [("old", &old), ("new", &new)]
        } else {
            [("new", &new), ("old", &old)]
        };
        for (which, bin) in order {
            match measure(bin, &http, &s).await {
                Ok(row) => {
                    println!(
                        "{which:<7} {round:>5} {:>10.1} {:>11.0} {:>10.0}{}",
                        row.signin,
                        row.exchange,
                        row.refresh,
                        if row.errors.is_empty() {
                            String::new()
                        } else {
                            format!("  ({} errors)", row.errors.len())
                        }
                    );
                    for e in &row.errors {
                        eprintln!("{which} round {round}: {e}");
                    }
                    failed |= !row.errors.is_empty();
                    rows.push((which, round, row));
                }
                Err(e) => {
                    println!("{which:<7} {round:>5} failed: {e}");
                    failed = true;
                }
            }
        }
    }
    if failed {
        println!("some runs had errors: not comparable");
        std::process::exit(1);
    }

    let col = |which: &str, f: Figure| -> Vec<f64> {
        rows.iter()
            .filter(|(w, _, _)| *w == which)
            .map(|(_, _, r)| f(r))
            .collect()
    };
    let figures: [(&str, Figure); 3] = [
        ("sign-in", |r| r.signin),
        ("exchange", |r| r.exchange),
        ("refresh", |r| r.refresh),
    ];
    let mut ratios = Vec::new();
    for which in ["old", "new"] {
        let m: Vec<String> = figures
            .iter()
            .map(|(name, f)| format!("{name} {:.1}/s", median(col(which, *f))))
            .collect();
        println!("median {which}: {}", m.join(", "));
    }
    let mut per_round = Vec::new();
    for (name, f) in figures {
        let ratio = median(col("new", f)) / median(col("old", f));
        ratios.push((name, ratio));
        let by_round: Vec<String> = (1..=rounds)
            .filter_map(|round| {
                let of = |which: &str| {
                    rows.iter()
                        .find(|(w, r, _)| *w == which && *r == round)
                        .map(|(_, _, row)| f(row))
                };
                Some(format!("{:.2}", of("new")? / of("old")?))
            })
            .collect();
        per_round.push(format!("{name} {}", by_round.join(", ")));
    }
    let shown: Vec<String> = ratios
        .iter()
        .map(|(name, r)| format!("{name} {:.1} %", r * 100.0))
        .collect();
    println!("new/old (medians): {}", shown.join(", "));
    println!("per-round new/old: {}", per_round.join("; "));
    let consents: Vec<String> = rows
        .iter()
        .filter(|(_, _, r)| r.consents > 0)
        .map(|(w, round, r)| format!("{w} round {round}: {}", r.consents))
        .collect();
    if !consents.is_empty() {
        println!(
            "consent pages shown during the timed sign-ins (remembered consent expected): {}",
            consents.join(", ")
        );
    }
    let verdict: Vec<String> = ratios
        .iter()
        .map(|(name, r)| {
            let ok = if *r >= 0.90 { "met" } else { "NOT met" };
            format!("{name} {ok}")
        })
        .collect();
    println!(
        "issue 31: code exchange, refresh and sign-in at ≥ 90 % of the build before: {}",
        verdict.join(", ")
    );
}
