//! Issue 12, item 8, at the server: today's binary started on the data of
//! the last release (commit c73c7d0) — the SQLite fixture of
//! `gatehouse-store-sqlite/tests/fixtures/` with its master key — migrates
//! it and serves the old credentials: a client secret shown by the old
//! release still gets a token, signed with the signing key the old release
//! made (so the master key still opens it), and the old API key still works.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine;
use reqwest::StatusCode;
use serde_json::Value;

/// From `tests/fixtures/main-c73c7d0.secrets.json` of the SQLite store.
const CONF_ID: &str = "app_DDPOtwsezP0rOTR3b2QqCR";
const CONF_SECRET: &str = "gcs_daT0g41JtsLmstoIUO3J3tdusWCSXobMd2g90QNQY46";
const KEY_SECRET: &str = "gk_live_10OjMIKdDq8asr2a12o3Hu283hzWMkl2faMskmT8Lmf";
const SIGNING_KID: &str = "Fhz49dYv4IQ8ajcbW";

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../gatehouse-store-sqlite/tests/fixtures")
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Kills the server however the test ends.
struct Serve {
    child: Child,
    port: u16,
    stderr: PathBuf,
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Serve {
    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }
}

#[tokio::test]
async fn the_current_binary_serves_old_credentials_from_an_old_data_dir() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir(&data).unwrap();
    // The data directory as the old release left it: its database and the
    // master key that encrypts its signing key.
    std::fs::copy(
        fixtures().join("main-c73c7d0.db"),
        data.join("gatehouse.db"),
    )
    .unwrap();
    std::fs::copy(
        fixtures().join("main-c73c7d0.master.key"),
        data.join("master.key"),
    )
    .unwrap();
    {
        // git does not keep the file mode; a master key readable by others
        // may be refused, as it should be.
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(
            data.join("master.key"),
            std::fs::Permissions::from_mode(0o600),
        )
        .unwrap();
    }

    let (port, admin) = (free_port(), free_port());
    let stderr = dir.path().join("serve.stderr");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_gatehouse"));
    for (k, _) in std::env::vars() {
        if k.starts_with("GATEHOUSE_") {
            cmd.env_remove(k);
        }
    }
    let child = cmd
        .arg("--data-dir")
        .arg(&data)
        .arg("serve")
        .arg("--behind-proxy")
        .arg("--public-url")
        .arg("https://gatehouse.example")
        .arg("--http-addr")
        .arg(format!("127.0.0.1:{port}"))
        .arg("--admin-addr")
        .arg(format!("127.0.0.1:{admin}"))
        .env("GATEHOUSE_LOG", "info")
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&stderr).unwrap())
        .spawn()
        .expect("the gatehouse binary starts");
    let mut serve = Serve {
        child,
        port,
        stderr,
    };

    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(15))
        .build()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(status) = serve.child.try_wait().unwrap() {
            panic!("gatehouse exited early with {status}\n{}", serve.log());
        }
        if let Ok(res) = client.get(serve.url("/readyz")).send().await
            && res.status() == StatusCode::OK
        {
            break;
        }
        assert!(Instant::now() < deadline, "not ready\n{}", serve.log());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        !data.join("bootstrap-credentials.json").exists(),
        "an existing database is not bootstrapped again"
    );

    // The old confidential client's secret still gets a token …
    let res = client
        .post(serve.url("/oauth/token"))
        .basic_auth(CONF_ID, Some(CONF_SECRET))
        .form(&[
            ("grant_type", "client_credentials"),
            ("scope", "users:read"),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK, "{}", serve.log());
    let body: Value = res.json().await.unwrap();
    let token = body["access_token"].as_str().unwrap().to_owned();
    // … signed with the old release's key (decrypted with the old master key).
    let header = token.split('.').next().unwrap();
    let header: Value = serde_json::from_slice(
        &base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(header)
            .unwrap(),
    )
    .unwrap();
    assert_eq!(header["kid"], SIGNING_KID, "{header}");
    // … and reads its organization's users (B: five, two added by the
    // fixture's second step).
    let res = client
        .get(serve.url("/v1/users?limit=100"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let users: Value = res.json().await.unwrap();
    assert_eq!(users["meta"]["total"], 5, "{users}");
    let jwks: Value = client
        .get(serve.url("/.well-known/jwks.json"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(
        jwks["keys"]
            .as_array()
            .unwrap()
            .iter()
            .any(|k| k["kid"] == SIGNING_KID),
        "{jwks}"
    );

    // The old API key still works, with its scopes.
    let res = client
        .get(serve.url("/v1/products?limit=100"))
        .bearer_auth(KEY_SECRET)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let products: Value = res.json().await.unwrap();
    assert_eq!(products["meta"]["total"], 3, "{products}");
    let res = client
        .post(serve.url("/v1/products"))
        .bearer_auth(KEY_SECRET)
        .json(&serde_json::json!({"name": "x", "sku": "X-1", "price": 1, "stock": 1}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::FORBIDDEN, "products:read only");
}
