//! The `gatehouse` binary's operator commands (D40), run as real processes,
//! mostly against the data directory of a running test server so that their
//! effect is seen on the server's next request (D40: no stale cache).

use std::path::Path;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use gatehouse_domain::OrgId;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;

use crate::common::TestServer;

pub(crate) struct Out {
    pub(crate) status: ExitStatus,
    pub(crate) stdout: String,
    stderr: String,
}

impl Out {
    fn show(&self) -> String {
        format!(
            "status {}\nstdout: {}\nstderr: {}",
            self.status, self.stdout, self.stderr
        )
    }

    /// D40: with `--json`, exactly one JSON object on stdout.
    pub(crate) fn json(&self) -> Value {
        assert!(
            self.status.success(),
            "the command succeeds\n{}",
            self.show()
        );
        let values: Vec<Value> = serde_json::Deserializer::from_str(&self.stdout)
            .into_iter::<Value>()
            .collect::<Result<_, _>>()
            .unwrap_or_else(|e| panic!("stdout is JSON ({e})\n{}", self.show()));
        assert_eq!(
            values.len(),
            1,
            "exactly one JSON value on stdout\n{}",
            self.show()
        );
        assert!(values[0].is_object(), "a JSON object\n{}", self.show());
        values.into_iter().next().unwrap()
    }

    fn fails(&self) {
        assert!(
            !self.status.success(),
            "the command must fail\n{}",
            self.show()
        );
        assert!(
            !self.stderr.trim().is_empty(),
            "a failure says why on stderr\n{}",
            self.show()
        );
    }
}

/// Runs `gatehouse <args>` with no `GATEHOUSE_*` variables but `env`.
async fn run_with_env(args: &[&str], env: &[(&str, &Path)], stdin: Option<&str>) -> Out {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_gatehouse"));
    for (k, _) in std::env::vars() {
        if k.starts_with("GATEHOUSE_") {
            cmd.env_remove(k);
        }
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.args(args)
        .env("GATEHOUSE_LOG", "warn")
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let mut child = cmd.spawn().expect("the gatehouse binary runs");
    if let Some(input) = stdin {
        let mut pipe = child.stdin.take().unwrap();
        pipe.write_all(input.as_bytes()).await.unwrap();
        drop(pipe);
    }
    let out = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
        .await
        .unwrap_or_else(|_| panic!("gatehouse {args:?} did not finish within 60 s"))
        .unwrap();
    Out {
        status: out.status,
        stdout: String::from_utf8(out.stdout).unwrap(),
        stderr: String::from_utf8(out.stderr).unwrap(),
    }
}

/// `gatehouse --data-dir DIR <args>`.
pub(crate) async fn gatehouse(dir: &Path, args: &[&str], stdin: Option<&str>) -> Out {
    let db = crate::common::db_args(dir);
    let dir = dir.to_str().unwrap();
    let mut all = vec!["--data-dir", dir];
    all.extend(db.iter().map(String::as_str));
    all.extend_from_slice(args);
    run_with_env(&all, &[], stdin).await
}

async fn create_org(dir: &Path, name: &str) -> String {
    let v = gatehouse(dir, &["org", "create", "--name", name, "--json"], None)
        .await
        .json();
    v["id"].as_str().unwrap().to_owned()
}

async fn create_client(dir: &Path, org: &str, scopes: &str) -> (String, String) {
    let v = gatehouse(
        dir,
        &[
            "client", "create", "--org", org, "--name", "CLI app", "--scopes", scopes, "--json",
        ],
        None,
    )
    .await
    .json();
    (
        v["client_id"].as_str().unwrap().to_owned(),
        v["client_secret"].as_str().unwrap().to_owned(),
    )
}

async fn token_response(
    s: &TestServer,
    id: &str,
    secret: &str,
    scope: Option<&str>,
) -> (StatusCode, Value) {
    let mut form = vec![("grant_type", "client_credentials")];
    if let Some(sc) = scope {
        form.push(("scope", sc));
    }
    let res = s
        .request(Method::POST, "/oauth/token")
        .basic_auth(id, Some(secret))
        .form(&form)
        .send()
        .await
        .unwrap();
    let status = res.status();
    (status, res.json().await.unwrap())
}

fn claims(token: &str) -> Value {
    use base64::Engine;
    let p = token.split('.').nth(1).unwrap();
    serde_json::from_slice(
        &base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(p)
            .unwrap(),
    )
    .unwrap()
}

fn scopes_of(v: &Value) -> Vec<String> {
    let mut s: Vec<String> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_str().unwrap().to_owned())
        .collect();
    s.sort();
    s
}

/// D4: `2026-11-22T02:31:42.123Z`.
fn is_rfc3339_millis_utc(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 24
        && b.iter().enumerate().all(|(i, c)| match i {
            4 | 7 => *c == b'-',
            10 => *c == b'T',
            13 | 16 => *c == b':',
            19 => *c == b'.',
            23 => *c == b'Z',
            _ => c.is_ascii_digit(),
        })
}

// ---------------------------------------------------------------------------
// migrate, org create
// ---------------------------------------------------------------------------

#[tokio::test]
async fn migrate_prints_ok_and_is_idempotent() {
    let dir = tempfile::tempdir().unwrap();
    for _ in 0..2 {
        let v = gatehouse(dir.path(), &["migrate", "--json"], None)
            .await
            .json();
        assert_eq!(v, json!({"ok": true}));
    }
    // The global flag may also come first.
    let v = gatehouse(dir.path(), &["--json", "migrate"], None)
        .await
        .json();
    assert_eq!(v, json!({"ok": true}));
}

#[tokio::test]
async fn org_create_prints_the_organization() {
    let s = TestServer::start().await;
    let dir = s.data_dir();

    let v = gatehouse(&dir, &["org", "create", "--name", "Acme", "--json"], None)
        .await
        .json();
    let id = v["id"].as_str().expect("id");
    assert!(id.starts_with("org_"), "{v}");
    assert_eq!(v["name"], "Acme");
    assert_eq!(v["plan"], "free", "D28: free is the default plan");
    // The server sees it at once (D40).
    let org = s
        .store()
        .get_org(&OrgId::parse(id).unwrap())
        .await
        .unwrap()
        .expect("the organization exists");
    assert_eq!(org.name, "Acme");
    assert_eq!(org.plan, gatehouse_domain::Plan::Free);

    let v = gatehouse(
        &dir,
        &[
            "org", "create", "--name", "Pro Co", "--plan", "pro", "--json",
        ],
        None,
    )
    .await
    .json();
    assert_eq!(v["plan"], "pro");
    assert_eq!(v["name"], "Pro Co");
    let org = s
        .store()
        .get_org(&OrgId::parse(v["id"].as_str().unwrap()).unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(org.plan, gatehouse_domain::Plan::Pro);

    let v = gatehouse(
        &dir,
        &[
            "org",
            "create",
            "--name",
            "Big",
            "--plan",
            "enterprise",
            "--json",
        ],
        None,
    )
    .await
    .json();
    assert_eq!(v["plan"], "enterprise");

    // D40: the two numbers set an enterprise plan's limits.
    let v = gatehouse(
        &dir,
        &[
            "org",
            "create",
            "--name",
            "Custom",
            "--per-minute",
            "100",
            "--per-second",
            "5",
            "--json",
        ],
        None,
    )
    .await
    .json();
    assert_eq!(v["plan"], "enterprise", "{v}");
    let org = s
        .store()
        .get_org(&OrgId::parse(v["id"].as_str().unwrap()).unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(org.plan, gatehouse_domain::Plan::Enterprise);
    assert_eq!((org.per_minute, org.per_second), (Some(100), Some(5)));

    // Two organizations never share an id (D3).
    let a = create_org(&dir, "Same").await;
    let b = create_org(&dir, "Same").await;
    assert_ne!(a, b);
}

#[tokio::test]
async fn org_create_refuses_a_bad_plan() {
    let dir = tempfile::tempdir().unwrap();
    for plan in ["gold", "Free", ""] {
        gatehouse(
            dir.path(),
            &["org", "create", "--name", "X", "--plan", plan, "--json"],
            None,
        )
        .await
        .fails();
    }
    // --name is required.
    gatehouse(dir.path(), &["org", "create", "--json"], None)
        .await
        .fails();
}

#[tokio::test]
async fn data_dir_comes_from_the_environment_and_the_flag_wins() {
    // D40: flags override GATEHOUSE_* variables. The data directory names
    // the database only for SQLite, so this server is on SQLite on every
    // backend's run of the suite.
    let s = TestServer::start_with(|st| {
        st.database_url = format!("sqlite://{}", st.data_dir.join("gatehouse.db").display());
    })
    .await;
    let dir = s.data_dir();
    let v = run_with_env(
        &["org", "create", "--name", "FromEnv", "--json"],
        &[("GATEHOUSE_DATA_DIR", &dir)],
        None,
    )
    .await
    .json();
    let org = s
        .store()
        .get_org(&OrgId::parse(v["id"].as_str().unwrap()).unwrap())
        .await
        .unwrap();
    assert!(org.is_some(), "GATEHOUSE_DATA_DIR is honoured");

    let elsewhere = tempfile::tempdir().unwrap();
    let dir_s = dir.to_str().unwrap();
    let v = run_with_env(
        &[
            "--data-dir",
            dir_s,
            "org",
            "create",
            "--name",
            "FlagWins",
            "--json",
        ],
        &[("GATEHOUSE_DATA_DIR", elsewhere.path())],
        None,
    )
    .await
    .json();
    let org = s
        .store()
        .get_org(&OrgId::parse(v["id"].as_str().unwrap()).unwrap())
        .await
        .unwrap();
    assert!(org.is_some(), "--data-dir overrides GATEHOUSE_DATA_DIR");
}

// ---------------------------------------------------------------------------
// client create, approve-admin
// ---------------------------------------------------------------------------

#[tokio::test]
async fn client_create_prints_credentials_that_work_at_the_running_server() {
    let s = TestServer::start().await;
    let dir = s.data_dir();
    let org = create_org(&dir, "Tenant").await;

    let v = gatehouse(
        &dir,
        &[
            "client",
            "create",
            "--org",
            &org,
            "--name",
            "Reporting",
            "--scopes",
            "users:read",
            "--json",
        ],
        None,
    )
    .await
    .json();
    let id = v["client_id"].as_str().expect("client_id");
    assert!(id.starts_with("app_"), "D3: {v}");
    let secret = v["client_secret"]
        .as_str()
        .expect("client_secret, shown once");
    assert!(secret.len() >= 43, "D20: at least 256 random bits: {v}");
    assert_eq!(v["org"], org.as_str());
    assert_eq!(v["scopes"], json!(["users:read"]));

    // Someone in the bootstrap organization, who must stay invisible to the new tenant (D2).
    let t = s.token("users:write").await;
    let res = s
        .call(
            Method::POST,
            "/v1/users",
            &t,
            Some(json!({"email": "other@example.com", "name": "O", "role": "viewer"})),
        )
        .await;
    assert_eq!(res.status(), StatusCode::CREATED);

    // The printed secret works on the server's next request (D40).
    let (status, body) = token_response(&s, id, secret, None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["scope"], "users:read");
    let token = body["access_token"].as_str().unwrap();
    let c = claims(token);
    assert_eq!(c["org"], org.as_str());
    assert_eq!(c["client_id"], id);
    let res = s.call(Method::GET, "/v1/users", token, None).await;
    assert_eq!(res.status(), StatusCode::OK);
    let list: Value = res.json().await.unwrap();
    assert_eq!(
        list["meta"]["total"], 0,
        "a new organization sees none of another's users: {list}"
    );

    // Registered scopes bound what it can ask for (D22).
    let (status, body) = token_response(&s, id, secret, Some("users:write")).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (StatusCode::BAD_REQUEST, Some("invalid_scope"))
    );
    // A wrong secret is refused.
    let (status, body) = token_response(&s, id, "gcs_wrong", None).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (StatusCode::UNAUTHORIZED, Some("invalid_client"))
    );
}

#[tokio::test]
async fn client_create_with_several_scopes() {
    let s = TestServer::start().await;
    let dir = s.data_dir();
    let org = create_org(&dir, "Tenant").await;
    let v = gatehouse(
        &dir,
        &[
            "client",
            "create",
            "--org",
            &org,
            "--name",
            "Sync",
            "--scopes",
            "users:read users:write products:read",
            "--json",
        ],
        None,
    )
    .await
    .json();
    assert_eq!(
        scopes_of(&v["scopes"]),
        vec!["products:read", "users:read", "users:write"]
    );
    let (status, body) = token_response(
        &s,
        v["client_id"].as_str().unwrap(),
        v["client_secret"].as_str().unwrap(),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let mut granted: Vec<&str> = body["scope"].as_str().unwrap().split(' ').collect();
    granted.sort();
    assert_eq!(granted, vec!["products:read", "users:read", "users:write"]);
}

#[tokio::test]
async fn client_create_refuses_bad_input() {
    let s = TestServer::start().await;
    let dir = s.data_dir();
    let org = create_org(&dir, "Tenant").await;
    let unknown_org = OrgId::generate().to_string();
    let cases: Vec<Vec<&str>> = vec![
        // Unknown or malformed organization.
        vec![
            "client",
            "create",
            "--org",
            &unknown_org,
            "--name",
            "A",
            "--scopes",
            "users:read",
            "--json",
        ],
        vec![
            "client",
            "create",
            "--org",
            "acme",
            "--name",
            "A",
            "--scopes",
            "users:read",
            "--json",
        ],
        // Unknown scope.
        vec![
            "client",
            "create",
            "--org",
            &org,
            "--name",
            "A",
            "--scopes",
            "users:read bogus",
            "--json",
        ],
        // Missing required options.
        vec!["client", "create", "--org", &org, "--name", "A", "--json"],
        vec![
            "client",
            "create",
            "--name",
            "A",
            "--scopes",
            "users:read",
            "--json",
        ],
    ];
    for args in cases {
        gatehouse(&dir, &args, None).await.fails();
    }
}

#[tokio::test]
async fn public_clients_have_no_secret_and_cannot_use_client_credentials() {
    // D20: public clients may use only the authorization-code grant with PKCE.
    let s = TestServer::start().await;
    let dir = s.data_dir();
    let org = create_org(&dir, "Tenant").await;
    let v = gatehouse(
        &dir,
        &[
            "client",
            "create",
            "--org",
            &org,
            "--name",
            "SPA",
            "--scopes",
            "users:read",
            "--redirect-uri",
            "https://app.example.com/cb",
            "--public",
            "--json",
        ],
        None,
    )
    .await
    .json();
    assert!(
        v.get("client_secret").is_some_and(Value::is_null),
        "a public client has a null secret: {v}"
    );
    let id = v["client_id"].as_str().unwrap();
    assert!(id.starts_with("app_"));

    let res = s
        .request(Method::POST, "/oauth/token")
        .form(&[("grant_type", "client_credentials"), ("client_id", id)])
        .send()
        .await
        .unwrap();
    let status = res.status();
    let body: Value = res.json().await.unwrap();
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(body["error"], "unauthorized_client", "{body}");
}

#[tokio::test]
async fn redirect_uris_must_be_https_or_loopback_http() {
    // D20, RFC 8252 §7.3, RFC 6749 §3.1.2
    let s = TestServer::start().await;
    let dir = s.data_dir();
    let org = create_org(&dir, "Tenant").await;
    let create = |uri: &'static str| {
        let dir = dir.clone();
        let org = org.clone();
        async move {
            gatehouse(
                &dir,
                &[
                    "client",
                    "create",
                    "--org",
                    &org,
                    "--name",
                    "Web",
                    "--scopes",
                    "users:read",
                    "--redirect-uri",
                    uri,
                    "--json",
                ],
                None,
            )
            .await
        }
    };
    for ok in [
        "https://app.example.com/cb",
        "http://127.0.0.1:8123/cb",
        "http://127.0.0.1/cb",
        "http://[::1]:9000/callback",
    ] {
        let v = create(ok).await.json();
        if let Some(uris) = v.get("redirect_uris") {
            assert_eq!(uris, &json!([ok]), "registered exactly: {v}");
        }
    }
    for bad in [
        "http://app.example.com/cb",
        "http://localhost:8080/cb",
        "http://127.0.0.1.evil.example/cb",
        "https://app.example.com/cb#fragment",
        "ftp://app.example.com/cb",
        "not a uri",
        "/relative/cb",
    ] {
        create(bad).await.fails();
    }
    // Several at once.
    let v = gatehouse(
        &dir,
        &[
            "client",
            "create",
            "--org",
            &org,
            "--name",
            "Multi",
            "--scopes",
            "users:read",
            "--redirect-uri",
            "https://a.example.com/cb",
            "--redirect-uri",
            "http://127.0.0.1:7000/cb",
            "--json",
        ],
        None,
    )
    .await
    .json();
    if let Some(uris) = v.get("redirect_uris") {
        assert_eq!(
            uris,
            &json!(["https://a.example.com/cb", "http://127.0.0.1:7000/cb"])
        );
    }
    // One bad URI among good ones refuses the whole client.
    gatehouse(
        &dir,
        &[
            "client",
            "create",
            "--org",
            &org,
            "--name",
            "Mixed",
            "--scopes",
            "users:read",
            "--redirect-uri",
            "https://a.example.com/cb",
            "--redirect-uri",
            "http://evil.example/cb",
            "--json",
        ],
        None,
    )
    .await
    .fails();
}

#[tokio::test]
async fn approve_admin_makes_the_admin_scope_grantable() {
    // D22, D40
    let s = TestServer::start().await;
    let dir = s.data_dir();
    let org = create_org(&dir, "Tenant").await;
    let (id, secret) = create_client(&dir, &org, "users:read admin").await;

    // Registered is not approved.
    let (status, body) = token_response(&s, &id, &secret, Some("admin")).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (StatusCode::BAD_REQUEST, Some("invalid_scope")),
        "{body}"
    );
    let (status, body) = token_response(&s, &id, &secret, None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        body["scope"], "users:read",
        "D22: admin only when asked for by name"
    );

    let v = gatehouse(&dir, &["client", "approve-admin", &id, "--json"], None)
        .await
        .json();
    assert_eq!(
        v["client_id"],
        id.as_str(),
        "D40: a command that changes a record prints it: {v}"
    );
    assert!(
        v.get("client_secret").is_none_or(Value::is_null),
        "the secret is shown only at creation: {v}"
    );

    // Takes effect on the server's next request (D40).
    let (status, body) = token_response(&s, &id, &secret, Some("admin")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["scope"], "admin");
    let t = body["access_token"].as_str().unwrap();
    // admin satisfies every scope check (D22), inside the client's own organization.
    let res = s
        .call(
            Method::POST,
            "/v1/users",
            t,
            Some(json!({"email": "boss@example.com", "name": "Boss", "role": "admin"})),
        )
        .await;
    assert_eq!(res.status(), StatusCode::CREATED);
    assert_eq!(
        s.call(Method::GET, "/v1/products", t, None).await.status(),
        StatusCode::OK
    );
    // Omitting scope still leaves admin out.
    let (_, body) = token_response(&s, &id, &secret, None).await;
    assert_eq!(body["scope"], "users:read");

    // Unknown or malformed client ids.
    let unknown = gatehouse_domain::ClientId::generate().to_string();
    gatehouse(&dir, &["client", "approve-admin", &unknown, "--json"], None)
        .await
        .fails();
    gatehouse(&dir, &["client", "approve-admin", "nope", "--json"], None)
        .await
        .fails();
}

// ---------------------------------------------------------------------------
// user create
// ---------------------------------------------------------------------------

#[tokio::test]
async fn user_create_reads_the_password_from_stdin_and_prints_the_user() {
    let s = TestServer::start().await;
    let dir = s.data_dir();
    let org = s.creds.org.clone();
    let out = gatehouse(
        &dir,
        &[
            "user",
            "create",
            "--org",
            &org,
            "--email",
            "Ops@Example.com",
            "--name",
            "Ops Person",
            "--role",
            "admin",
            "--password-stdin",
            "--json",
        ],
        Some("a long enough passphrase\n"),
    )
    .await;
    let u = out.json();
    let id = u["id"].as_str().expect("id");
    assert!(id.starts_with("usr_"), "{u}");
    assert!(
        u["email"]
            .as_str()
            .is_some_and(|e| e.eq_ignore_ascii_case("ops@example.com")),
        "{u}"
    );
    assert_eq!(u["name"], "Ops Person");
    assert_eq!(u["role"], "admin");
    assert_eq!(
        u["status"], "active",
        "D40: an active user, no invitation round trip"
    );
    for ts in ["created_at", "updated_at"] {
        assert!(
            u[ts].as_str().is_some_and(is_rfc3339_millis_utc),
            "D4 {ts}: {u}"
        );
    }
    let mut keys: Vec<&str> = u.as_object().unwrap().keys().map(String::as_str).collect();
    keys.sort();
    assert_eq!(
        keys,
        vec![
            "created_at",
            "email",
            "id",
            "name",
            "role",
            "status",
            "updated_at"
        ],
        "the User schema of interface.md §2.1, nothing more (no password hash)"
    );

    // The server's API returns the same record (D40).
    let t = s.token("users:read").await;
    let res = s
        .call(Method::GET, &format!("/v1/users/{id}"), &t, None)
        .await;
    assert_eq!(res.status(), StatusCode::OK);
    let got: Value = res.json().await.unwrap();
    assert_eq!(got["data"], u);

    // The same e-mail again in the same organization is refused (D2).
    gatehouse(
        &dir,
        &[
            "user",
            "create",
            "--org",
            &org,
            "--email",
            "ops@example.com",
            "--name",
            "Dup",
            "--role",
            "viewer",
            "--password-stdin",
            "--json",
        ],
        Some("another long passphrase\n"),
    )
    .await
    .fails();
}

#[tokio::test]
async fn user_create_roles_and_a_twelve_character_password() {
    // D19: at least 12 characters; exactly 12 is enough.
    let s = TestServer::start().await;
    let dir = s.data_dir();
    let org = create_org(&dir, "Tenant").await;
    for (role, email) in [("editor", "ed@example.com"), ("viewer", "vi@example.com")] {
        let u = gatehouse(
            &dir,
            &[
                "user",
                "create",
                "--org",
                &org,
                "--email",
                email,
                "--name",
                "Someone",
                "--role",
                role,
                "--password-stdin",
                "--json",
            ],
            Some("x7#kq9!mzp2w\n"),
        )
        .await
        .json();
        assert_eq!(u["role"], role);
        assert_eq!(u["status"], "active");
    }
}

#[tokio::test]
async fn user_create_refuses_bad_passwords_and_bad_input() {
    let s = TestServer::start().await;
    let dir = s.data_dir();
    let org = s.creds.org.clone();
    let unknown_org = OrgId::generate().to_string();
    let user = |org: &str, email: &str, role: &str| -> Vec<String> {
        [
            "user",
            "create",
            "--org",
            org,
            "--email",
            email,
            "--name",
            "N",
            "--role",
            role,
            "--password-stdin",
            "--json",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    };
    let cases: Vec<(Vec<String>, Option<&str>, &str)> = vec![
        // 11 characters: too short. With its newline it would be 12, so this
        // also shows that the trailing newline is dropped (D40).
        (
            user(&org, "short@example.com", "viewer"),
            Some("abcdefghij1\n"),
            "short@example.com",
        ),
        (
            user(&org, "tiny@example.com", "viewer"),
            Some("tiny\n"),
            "tiny@example.com",
        ),
        (
            user(&org, "empty@example.com", "viewer"),
            Some("\n"),
            "empty@example.com",
        ),
        (
            user(&org, "none@example.com", "viewer"),
            None,
            "none@example.com",
        ),
        // D19: not the e-mail, not a common password.
        (
            user(&org, "sameaspass@example.com", "viewer"),
            Some("sameaspass@example.com\n"),
            "sameaspass@example.com",
        ),
        (
            user(&org, "common@example.com", "viewer"),
            Some("password1234\n"),
            "common@example.com",
        ),
        // Unknown or malformed organization.
        (
            user(&unknown_org, "orgless@example.com", "viewer"),
            Some("a long enough passphrase\n"),
            "orgless@example.com",
        ),
        (
            user("acme", "orgless2@example.com", "viewer"),
            Some("a long enough passphrase\n"),
            "orgless2@example.com",
        ),
        // D10: `member` is not a role.
        (
            user(&org, "member@example.com", "member"),
            Some("a long enough passphrase\n"),
            "member@example.com",
        ),
        // D8: not an e-mail address.
        (
            user(&org, "not-an-email", "viewer"),
            Some("a long enough passphrase\n"),
            "not-an-email",
        ),
    ];
    for (args, stdin, _) in &cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        gatehouse(&dir, &args, *stdin).await.fails();
    }
    // --password-stdin is required.
    gatehouse(
        &dir,
        &[
            "user",
            "create",
            "--org",
            &org,
            "--email",
            "nopw@example.com",
            "--name",
            "N",
            "--role",
            "viewer",
            "--json",
        ],
        None,
    )
    .await
    .fails();

    // Nobody was created.
    let t = s.token("users:read").await;
    let list: Value = s
        .call(Method::GET, "/v1/users", &t, None)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(list["meta"]["total"], 0, "{list}");
}
