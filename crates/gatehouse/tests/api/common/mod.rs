//! The test harness: a real server per test.

#![allow(dead_code)]

pub(crate) mod browser;
pub(crate) mod oidc;

use std::path::PathBuf;

use gatehouse::config::Settings;
use gatehouse::run::{self, BootstrapCredentials, Running};
use gatehouse_auth::secrets;
use gatehouse_domain::{
    ClientId, Email, Name, NewUser, OrgId, Organization, Plan, Role, ScopeSet, Timestamp, User,
    UserId, UserStatus,
};
use gatehouse_store::{NewClient, Store};
use reqwest::{Method, RequestBuilder, Response, StatusCode};
use serde_json::Value;

/// The `public_url` every test server is configured with. Deliberately not
/// the address the tests connect to, so a test notices when the server uses
/// the wrong one.
pub(crate) const PUBLIC_URL: &str = "https://gatehouse.example";

/// The storage backend a test binary runs the suite on (D44): `api` on
/// SQLite, `api_postgres` on a throwaway PostgreSQL cluster.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

/// Data directories of running test servers and the database URL each uses,
/// so the CLI run against a server's data directory reaches its database.
static DATABASES: std::sync::Mutex<Vec<(PathBuf, String)>> = std::sync::Mutex::new(Vec::new());

/// `--database-url URL` when the server on `dir` keeps its data elsewhere
/// than in the directory (PostgreSQL); empty otherwise.
pub(crate) fn db_args(dir: &std::path::Path) -> Vec<String> {
    let dbs = DATABASES.lock().unwrap_or_else(|e| e.into_inner());
    dbs.iter()
        .find(|(d, _)| d == dir)
        .map(|(_, url)| vec!["--database-url".to_owned(), url.clone()])
        .unwrap_or_default()
}

/// A fresh PostgreSQL database for one test server. Without PostgreSQL
/// binaries the whole `api_postgres` binary is skipped, loudly — unless
/// `GATEHOUSE_REQUIRE_POSTGRES=1` (as in CI), where that is a failure.
pub(crate) async fn postgres_url() -> String {
    match gatehouse_store_postgres::testing::fresh_database_url().await {
        Some(url) => url,
        None => {
            eprintln!(
                "\n*** api_postgres SKIPPED: PostgreSQL binaries (initdb, postgres) not found; \
                 install Debian's postgresql package to run the suite on PostgreSQL ***\n"
            );
            std::process::exit(0);
        }
    }
}

pub(crate) struct TestServer {
    pub running: Option<Running>,
    /// `https://127.0.0.1:PORT`
    pub base: String,
    /// `http://127.0.0.1:PORT` (the 301 listener)
    pub http_base: String,
    pub client: reqwest::Client,
    pub creds: BootstrapCredentials,
    pub settings: Settings,
    pub dir: tempfile::TempDir,
}

fn install_crypto() {
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
}

/// An HTTPS client trusting the server's self-signed certificate.
pub(crate) fn https_client(cert: &std::path::Path) -> reqwest::Client {
    install_crypto();
    let pem = std::fs::read(cert).expect("certificate");
    reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(&pem).expect("pem"))
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("client")
}

/// A client of the test server whose connections come from `source`, a
/// loopback address other than 127.0.0.1 (for per-address rules, D28).
pub(crate) fn client_from(s: &TestServer, source: std::net::IpAddr) -> reqwest::Client {
    install_crypto();
    let mut b = reqwest::Client::builder()
        .local_address(source)
        .redirect(reqwest::redirect::Policy::none());
    if let Some(cert) = s.running.as_ref().and_then(|r| r.cert_path.as_ref()) {
        let pem = std::fs::read(cert).expect("certificate");
        b = b.add_root_certificate(reqwest::Certificate::from_pem(&pem).expect("pem"));
    }
    b.build().expect("client")
}

impl TestServer {
    pub(crate) async fn start() -> Self {
        Self::start_with(|_| {}).await
    }

    pub(crate) async fn start_with(tweak: impl FnOnce(&mut Settings)) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut settings = Settings::with_data_dir(dir.path().to_owned());
        settings.public_url = PUBLIC_URL.into();
        settings.https_addr = "127.0.0.1:0".parse().unwrap();
        settings.http_addr = "127.0.0.1:0".parse().unwrap();
        settings.admin_addr = "127.0.0.1:0".parse().unwrap();
        if crate::BACKEND == Backend::Postgres {
            settings.database_url = postgres_url().await;
        }
        tweak(&mut settings);
        Self::start_in(dir, settings).await
    }

    /// `gatehouse mock` in-process (D34): plain HTTP, fixture data, and the
    /// fixed client as `creds`.
    pub(crate) async fn start_mock() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let base = Settings::with_data_dir(dir.path().to_owned());
        let settings = run::mock_settings(&base, dir.path(), "127.0.0.1:0".parse().unwrap());
        Self::start_in(dir, settings).await
    }

    async fn start_in(dir: tempfile::TempDir, settings: Settings) -> Self {
        let running = run::start(&settings).await.expect("server starts");
        if !settings.database_url.starts_with("sqlite") {
            let mut dbs = DATABASES.lock().unwrap_or_else(|e| e.into_inner());
            for d in [dir.path().to_owned(), settings.data_dir.clone()] {
                dbs.push((d, settings.database_url.clone()));
            }
        }
        let creds = match &running.bootstrap {
            Some(c) => c.clone(),
            None if settings.mock => {
                let id = ClientId::parse(run::MOCK_CLIENT_ID).unwrap();
                let client = running
                    .store
                    .resolve_client(&id)
                    .await
                    .unwrap()
                    .expect("the mock client exists");
                BootstrapCredentials {
                    org: client.org.to_string(),
                    client_id: run::MOCK_CLIENT_ID.into(),
                    client_secret: run::MOCK_CLIENT_SECRET.into(),
                }
            }
            None => serde_json::from_slice(
                &std::fs::read(settings.data_dir.join("bootstrap-credentials.json")).unwrap(),
            )
            .unwrap(),
        };
        let (base, client) = match running.https_addr {
            Some(a) => (
                format!("https://{a}"),
                https_client(running.cert_path.as_ref().unwrap()),
            ),
            None => (
                format!("http://{}", running.http_addr),
                reqwest::Client::builder()
                    .redirect(reqwest::redirect::Policy::none())
                    .build()
                    .unwrap(),
            ),
        };
        let http_base = format!("http://{}", running.http_addr);
        Self {
            running: Some(running),
            base,
            http_base,
            client,
            creds,
            settings,
            dir,
        }
    }

    /// Stops the server gracefully and starts it again on the same data.
    pub(crate) async fn restart(mut self) -> Self {
        self.running.take().unwrap().shutdown().await;
        let mut settings = self.settings.clone();
        settings.https_addr = "127.0.0.1:0".parse().unwrap();
        settings.http_addr = "127.0.0.1:0".parse().unwrap();
        settings.admin_addr = "127.0.0.1:0".parse().unwrap();
        Self::start_in(self.dir, settings).await
    }

    pub(crate) fn store(&self) -> &dyn Store {
        self.running.as_ref().unwrap().store.as_ref()
    }

    pub(crate) fn data_dir(&self) -> PathBuf {
        self.settings.data_dir.clone()
    }

    pub(crate) fn org(&self) -> OrgId {
        OrgId::parse(&self.creds.org).unwrap()
    }

    pub(crate) fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    pub(crate) fn request(&self, method: Method, path: &str) -> RequestBuilder {
        self.client.request(method, self.url(path))
    }

    /// A client-credentials token of the bootstrap client with `scope` (all but admin when empty).
    pub(crate) async fn token(&self, scope: &str) -> String {
        self.token_for(&self.creds.client_id, &self.creds.client_secret, scope)
            .await
    }

    pub(crate) async fn token_for(&self, id: &str, secret: &str, scope: &str) -> String {
        let mut form = vec![("grant_type", "client_credentials")];
        if !scope.is_empty() {
            form.push(("scope", scope));
        }
        let res = self
            .request(Method::POST, "/oauth/token")
            .basic_auth(id, Some(secret))
            .form(&form)
            .send()
            .await
            .unwrap();
        assert_eq!(
            res.status(),
            StatusCode::OK,
            "token request failed: {}",
            res.text().await.unwrap()
        );
        let body: Value = res.json().await.unwrap();
        body["access_token"].as_str().unwrap().to_owned()
    }

    /// Sends an authenticated JSON request.
    pub(crate) async fn call(
        &self,
        method: Method,
        path: &str,
        token: &str,
        body: Option<Value>,
    ) -> Response {
        let mut rb = self.request(method, path).bearer_auth(token);
        if let Some(b) = body {
            rb = rb.json(&b);
        }
        rb.send().await.unwrap()
    }

    /// A new organization (through the store the server uses).
    pub(crate) async fn new_org(&self, plan: Plan) -> OrgId {
        let org = Organization {
            id: OrgId::generate(),
            name: "Other".into(),
            plan,
            per_minute: None,
            per_second: None,
            created_at: Timestamp::now(),
        };
        self.store().create_org(&org).await.unwrap();
        org.id
    }

    /// A confidential client in `org`; returns (client_id, secret).
    pub(crate) async fn new_client(&self, org: &OrgId, scopes: &str) -> (String, String) {
        let secret = secrets::new_client_secret();
        let c = NewClient {
            id: ClientId::generate(),
            name: "test client".into(),
            secret_hash: Some(secrets::hash_secret(&secret)),
            scopes: ScopeSet::parse(scopes).unwrap(),
            redirect_uris: vec![],
            admin_approved: false,
            owner: None,
            created_at: Timestamp::now(),
            post_logout_redirect_uris: vec![],
        };
        self.store()
            .insert_client(org, &c, crate::common::operator())
            .await
            .unwrap();
        (c.id.to_string(), secret)
    }

    /// An active user with a (placeholder) password.
    pub(crate) async fn new_user(&self, org: &OrgId, email: &str, role: Role) -> User {
        let u = NewUser {
            id: UserId::generate(),
            email: Email::parse(email).unwrap(),
            name: Name::parse("Test User").unwrap(),
            role,
            status: UserStatus::Active,
            password_hash: Some("$argon2id$placeholder".into()),
            created_at: Timestamp::now(),
        };
        self.store()
            .insert_user(org, &u, crate::common::operator())
            .await
            .unwrap()
    }
}

/// Form fields as (name, value) pairs.
pub(crate) type FormPairs<'a> = Vec<(&'a str, &'a str)>;

/// The body of an error response, checked against the envelope of D6.
pub(crate) async fn expect_error(res: Response, status: StatusCode, code: &str) -> Value {
    expect_error_at(res, status, code, PUBLIC_URL).await
}

/// [`expect_error`] for a server whose `public_url` is `public_url`.
pub(crate) async fn expect_error_at(
    res: Response,
    status: StatusCode,
    code: &str,
    public_url: &str,
) -> Value {
    assert_eq!(res.status(), status, "unexpected status");
    assert_eq!(
        res.headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok()),
        Some("application/json"),
        "errors are JSON"
    );
    assert!(
        res.headers().contains_key("x-request-id"),
        "errors carry X-Request-ID"
    );
    let body: Value = res.json().await.unwrap();
    let e = &body["error"];
    assert_eq!(e["code"], code, "{body}");
    assert!(
        e["message"].as_str().is_some_and(|m| !m.is_empty()),
        "{body}"
    );
    assert_eq!(
        e["docs"],
        format!("{public_url}/docs/errors#{code}"),
        "{body}"
    );
    assert!(e["details"].is_array(), "{body}");
    body
}

/// The `details` of a validation error as (field, issue) pairs.
pub(crate) fn details(body: &Value) -> Vec<(String, String)> {
    body["error"]["details"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            (
                d["field"].as_str().unwrap().to_owned(),
                d["issue"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

/// A raw TLS connection to `127.0.0.1:port`, trusting the certificate at
/// `cert` and offering the ALPN protocols `alpn` (tests of the transport
/// itself, D45, where an HTTP client library would hide what is tested).
pub(crate) async fn raw_tls(
    port: u16,
    cert: &std::path::Path,
    alpn: &[&[u8]],
) -> tokio_rustls::client::TlsStream<tokio::net::TcpStream> {
    use rustls::pki_types::pem::PemObject;
    install_crypto();
    let mut roots = rustls::RootCertStore::empty();
    for c in rustls::pki_types::CertificateDer::pem_file_iter(cert).unwrap() {
        roots.add(c.unwrap()).unwrap();
    }
    let mut config = rustls::ClientConfig::builder()
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    let connector = tokio_rustls::TlsConnector::from(std::sync::Arc::new(config));
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    tcp.set_nodelay(true).unwrap();
    connector
        .connect("localhost".try_into().unwrap(), tcp)
        .await
        .expect("TLS handshake")
}

/// What the harness's own writes through the store tell (D54): done by an
/// operator, shown as the API shows them, like `gatehouse` CLI commands.
pub(crate) fn operator() -> &'static gatehouse_domain::event::Teller {
    static TELLER: std::sync::OnceLock<gatehouse_domain::event::Teller> =
        std::sync::OnceLock::new();
    TELLER.get_or_init(|| {
        gatehouse_domain::event::Teller::new(
            gatehouse_domain::event::Origin::operator(),
            std::sync::Arc::new(gatehouse_server::Published),
        )
    })
}
