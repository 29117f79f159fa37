//! Starting and stopping the server: storage, keys, first-start bootstrap
//! (D41), the HTTPS and plain-HTTP listeners (D31), graceful shutdown (D43).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use gatehouse_app::App;
use gatehouse_app::bootstrap::Bootstrap;
use gatehouse_app::staging::NightlyReset;
use gatehouse_auth::{AuthConfig, AuthService, Issuer, secrets};
use gatehouse_domain::{ClientId, OrgId, Timestamp};
use gatehouse_server::http::transport::TransportConfig;
use gatehouse_server::{AppState, ServerConfig};
use gatehouse_store::Store;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::config::{Env, Settings};
use crate::tls::{TlsListener, ensure_certificate, server_config};

/// How long shutdown waits for requests in flight (D43).
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(30);

/// A running server.
pub struct Running {
    /// The HTTPS listener's address (`None` behind a proxy).
    pub https_addr: Option<SocketAddr>,
    /// The plain-HTTP listener's address.
    pub http_addr: SocketAddr,
    /// The admin listener's address (`/metrics`).
    pub admin_addr: SocketAddr,
    pub state: AppState,
    /// The storage the server runs on, for the background jobs and tests.
    pub store: Arc<dyn Store>,
    /// Credentials printed at first start (D41), if this start created them;
    /// in the mock, its fixed client and organization (D53), at every start.
    pub bootstrap: Option<BootstrapCredentials>,
    /// The certificate in use (tests trust it).
    pub cert_path: Option<std::path::PathBuf>,
    stop: watch::Sender<bool>,
    tasks: JoinSet<std::io::Result<()>>,
    /// SQLite: the lock that makes this the database's one serving process
    /// (D44), held until the process ends or [`Running::shutdown`].
    _serving: Option<std::fs::File>,
}

#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct BootstrapCredentials {
    pub org: String,
    pub client_id: String,
    pub client_secret: String,
}

impl Running {
    /// Stops accepting, lets requests in flight finish (up to 30 s), returns.
    pub async fn shutdown(mut self) {
        self.state.begin_shutdown();
        let _ = self.stop.send(true);
        let drained = tokio::time::timeout(DRAIN_TIMEOUT, async {
            while let Some(r) = self.tasks.join_next().await {
                if let Ok(Err(e)) = r {
                    tracing::warn!(error = %e, "listener ended with an error");
                }
            }
        })
        .await;
        if drained.is_err() {
            tracing::warn!("requests still in flight after 30 s; stopping anyway");
            self.tasks.abort_all();
        }
        // D46: the usage of requests that finished while draining, after the
        // background flush's last round.
        if let Err(e) = self.state.app.flush_usage().await {
            tracing::warn!(error = %e, "storing the last usage counts failed");
        }
    }
}

/// D34: the mock's fixed client, printed at start and in the README.
pub const MOCK_CLIENT_ID: &str = gatehouse_domain::ids::MOCK_CLIENT_ID;
pub const MOCK_CLIENT_SECRET: &str = "mock_secret";
/// D53: the mock client's loopback redirect URI (any port, D20).
pub const MOCK_REDIRECT_URI: &str = "http://127.0.0.1/callback";
/// D53: the password every fixture user of the mock signs in with.
pub const MOCK_PASSWORD: &str = "mock-password-1234";

/// D56 (D53 continued): the mock's fixture user with an authenticator app,
/// and its known secret (base32, 160 bits), printed at start.
pub const MOCK_TOTP_USER: &str = "alan@example.com";
pub const MOCK_TOTP_SECRET: &str = "GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ";

/// D34: settings of `gatehouse mock`: plain HTTP on `addr`, data in `dir`.
pub fn mock_settings(base: &Settings, dir: &std::path::Path, addr: SocketAddr) -> Settings {
    let mut s = Settings::with_data_dir(dir.to_path_buf());
    s.http_addr = addr;
    s.admin_addr = SocketAddr::from(([127, 0, 0, 1], 0));
    s.behind_proxy = true;
    s.public_url = format!("http://{addr}");
    s.mock = true;
    s.mail_from = base.mail_from.clone();
    // D53 (continued): the mock delivers webhooks to loopback as well as
    // public addresses, once and at once, without a retry schedule.
    s.webhook_allow = gatehouse_domain::webhook::AllowList::parse("127.0.0.0/8,::1/128")
        .expect("the loopback ranges parse");
    s.webhook_schedule = gatehouse_domain::webhook::RetrySchedule::single();
    // D53 (continued): the audit log is chained, without checkpoints.
    s.audit.checkpoints = false;
    s
}

/// D34: the mock's organization (plan pro), its fixed client with every
/// scope, and the fixture data; D53: the client's loopback redirect URI and
/// the fixture users' password. Returns the organization's id.
async fn bootstrap_mock(app: &App, store: &dyn Store) -> anyhow::Result<OrgId> {
    let created = app
        .bootstrap(Bootstrap {
            org_name: "Mock",
            client_id: ClientId::parse(MOCK_CLIENT_ID).context("the mock client id")?,
            client_name: "Mock client",
            client_secret: MOCK_CLIENT_SECRET.into(),
            fixture: true,
            redirect_uris: vec![MOCK_REDIRECT_URI.into()],
            fixture_password: Some(MOCK_PASSWORD.into()),
        })
        .await?;
    if let Some(org) = created {
        return Ok(org);
    }
    // Started again on its data (tests restart servers): the fixed client
    // names the organization.
    let id = ClientId::parse(MOCK_CLIENT_ID).context("the mock client id")?;
    store
        .resolve_client(&id)
        .await
        .context("reading the mock client")?
        .map(|c| c.org)
        .context("the mock's database has organizations but not the mock client")
}

/// D41: on an empty database, an organization "Default" (plan pro) and a
/// client approved for every scope; credentials written to
/// `<data_dir>/bootstrap-credentials.json` (0600). Runs once: the store
/// creates them only if no organization exists, atomically.
pub async fn bootstrap(
    app: &App,
    settings: &Settings,
) -> anyhow::Result<Option<BootstrapCredentials>> {
    let secret = secrets::new_client_secret();
    let client_id = ClientId::generate();
    let created = app
        .bootstrap(Bootstrap {
            org_name: "Default",
            client_id: client_id.clone(),
            client_name: "Bootstrap client",
            client_secret: secret.clone(),
            // D33: staging starts with the fixture data.
            fixture: settings.env == Env::Staging,
            redirect_uris: Vec::new(),
            fixture_password: None,
        })
        .await?;
    let Some(org) = created else {
        return Ok(None);
    };
    let creds = BootstrapCredentials {
        org: org.to_string(),
        client_id: client_id.to_string(),
        client_secret: secret,
    };
    let path = settings.data_dir.join("bootstrap-credentials.json");
    crate::write_private_file(&path, serde_json::to_string_pretty(&creds)?.as_bytes())?;
    Ok(Some(creds))
}

/// The application layer of an operator command that reads or ends tokens
/// (issue 32, `gatehouse token …`): what a server loads at start to check
/// a bearer credential — the signing keys (under the master key), the
/// issuer of the public URL, the revocations so far — without serving.
pub async fn token_authority(settings: &Settings) -> anyhow::Result<App> {
    let store = crate::open_existing_store(settings).await?;
    let master = crate::load_master_key(settings.master_key.as_deref(), &settings.data_dir)?;
    let keys = gatehouse_app::keys::load_key_ring(store.as_ref(), master)
        .await
        .context("loading signing keys")?;
    let auth = Arc::new(AuthService::with_config(
        keys,
        Issuer::new(&settings.public_url),
        AuthConfig {
            refresh_grace_secs: settings.refresh_grace_secs,
            refresh_max_days: settings.refresh_max_days,
            staging: settings.env == Env::Staging,
            passkey_url: None,
        },
    ));
    let app = App::new(
        store,
        auth,
        &settings.public_url,
        Arc::new(gatehouse_server::Published),
    );
    app.sync_revocations()
        .await
        .context("loading revocations")?;
    Ok(app)
}

/// Opens storage, loads keys, bootstraps, binds the listeners and starts serving.
pub async fn start(settings: &Settings) -> anyhow::Result<Running> {
    // The Prometheus recorder goes in before anything can record: metric
    // handles taken earlier (the server caches them per route and status)
    // would belong to the no-op recorder for the life of the process.
    let metrics_router = crate::metrics::router();
    std::fs::create_dir_all(&settings.data_dir).with_context(|| {
        format!(
            "creating the data directory {}",
            settings.data_dir.display()
        )
    })?;
    let store = crate::open_store(&settings.database_url).await?;
    let serving = crate::sqlite_path(&settings.database_url)
        .map(|path| lock_serving(std::path::Path::new(path)))
        .transpose()?;
    let master = crate::load_master_key(settings.master_key.as_deref(), &settings.data_dir)?;
    let keys = gatehouse_app::keys::load_key_ring(store.as_ref(), master)
        .await
        .context("loading signing keys")?;
    // Nothing is in memory yet: the first start's writes need no auth service.
    let first_start = App::operator(store.clone(), Arc::new(gatehouse_server::Published));
    let bootstrap = if settings.mock {
        // D53: the mock's organization id is printed with its client.
        let org = bootstrap_mock(&first_start, store.as_ref()).await?;
        Some(BootstrapCredentials {
            org: org.to_string(),
            client_id: MOCK_CLIENT_ID.into(),
            client_secret: MOCK_CLIENT_SECRET.into(),
        })
    } else {
        bootstrap(&first_start, settings).await?
    };
    let http = TcpListener::bind(settings.http_addr)
        .await
        .with_context(|| format!("binding {}", settings.http_addr))?;
    let http_addr = http.local_addr()?;
    let https = if settings.behind_proxy {
        None
    } else {
        Some(
            TcpListener::bind(settings.https_addr)
                .await
                .with_context(|| format!("binding {}", settings.https_addr))?,
        )
    };
    // D34: the mock's links name the address it really listens on.
    let public_url = if settings.mock {
        format!("http://{http_addr}")
    } else {
        match &https {
            // D1 (revised): a defaulted public URL names the port really bound.
            Some(l)
                if settings.public_url
                    == crate::config::default_public_url(settings.https_addr) =>
            {
                crate::config::default_public_url(l.local_addr()?)
            }
            _ => settings.public_url.clone(),
        }
    };

    let auth_config = AuthConfig {
        refresh_grace_secs: settings.refresh_grace_secs,
        refresh_max_days: settings.refresh_max_days,
        staging: settings.env == Env::Staging,
        // D53 (continued): the mock offers passkeys when reached as
        // `localhost` (WebAuthn allows plain HTTP there).
        passkey_url: settings
            .mock
            .then(|| format!("http://localhost:{}", http_addr.port())),
    };
    let auth = Arc::new(AuthService::with_config(
        keys,
        Issuer::new(&public_url),
        auth_config,
    ));
    // D56: the start log says why passkeys are not offered.
    if let Err(why) = auth.passkeys() {
        tracing::warn!(public_url = %public_url, "{why}");
    }
    // D31 (revised): no HSTS for a loopback `public_url` (nor the mock's
    // plain HTTP).
    let hsts = !settings.mock && gatehouse_server::http::middleware::sends_hsts(&public_url);
    let config = ServerConfig {
        public_url: public_url.clone(),
        hsts,
        behind_proxy: settings.behind_proxy,
        cors_origins: settings.cors_origins.clone(),
        trusted_proxies: settings.trusted_proxies.clone(),
        mock: settings.mock,
        forgot_lookup_delay: settings.forgot_lookup_delay,
        access_log: settings.access_log,
    };
    let transport =
        crate::mail::Transport::from_settings(settings.smtp_url.as_deref(), &settings.data_dir)?;
    // D55: the webhook transport (address rules at connect time), and the
    // resolver both it and the checks at create use.
    let lookup: Arc<dyn gatehouse_app::webhooks::HostLookup> = match settings.webhook_dns {
        Some(server) => test_dns_lookup(server)?,
        None => Arc::new(gatehouse_app::webhooks::SystemLookup),
    };
    let mut sender = crate::webhook_sender::SenderConfig::new(settings.webhook_allow.clone());
    sender.lookup = lookup.clone();
    sender.timeout = settings.webhook_timeout;
    sender.connect_timeout = settings.webhook_connect_timeout;
    sender
        .extra_roots_pem
        .clone_from(&settings.webhook_extra_roots_pem);
    let deliver: Arc<dyn gatehouse_app::deliveries::Deliver> =
        Arc::new(crate::webhook_sender::LazySender::new(sender));
    let app = App::new(
        store.clone(),
        auth,
        &public_url,
        Arc::new(gatehouse_server::Published),
    )
    .with_idempotency_retention_secs(settings.idempotency_retention_secs)
    .with_event_retention_secs(settings.event_retention_secs)
    .with_audit_settings(settings.audit)
    .with_session_limits(settings.session_limits)
    .with_mfa_grace_day(settings.mfa_grace_day_secs)
    .with_webhook_settings(gatehouse_app::webhooks::WebhookSettings {
        allow: settings.webhook_allow.clone(),
        deliver: Some(deliver.clone()),
        lookup,
    });
    app.sync_revocations()
        .await
        .context("loading revocations")?;
    if settings.mock
        && let Some(org) = bootstrap.as_ref().and_then(|b| OrgId::parse(&b.org))
    {
        let secret = data_encoding::BASE32_NOPAD
            .decode(MOCK_TOTP_SECRET.as_bytes())
            .context("the mock's TOTP secret")?;
        app.enrol_fixture_totp(&org, MOCK_TOTP_USER, &secret)
            .await
            .context("the mock's fixture authenticator app")?;
    }
    let state = gatehouse_server::serving_state(app, config);
    let app = gatehouse_server::app(state.clone());
    let (stop, stopped) = watch::channel(false);
    let signal = move || {
        let mut rx = stopped.clone();
        async move {
            let _ = rx.wait_for(|s| *s).await;
        }
    };
    if settings.test_settings {
        // D40 (continued): said at every start, so it is never missed.
        tracing::warn!(
            "--test-settings is on: the minimums of the durations are lifted; never use it in production"
        );
    }
    let mut tasks = JoinSet::new();
    spawn_background(
        &mut tasks,
        state.app.clone(),
        transport,
        settings.mail_from.clone(),
        settings
            .idempotency_retention_secs
            .min(settings.event_retention_secs)
            .min(settings.audit.retention_admin_secs)
            .min(settings.audit.retention_security_secs),
        stop.subscribe(),
    );

    {
        // D55: the webhook delivery worker, with the transport `test` uses.
        let worker = gatehouse_app::deliveries::DeliverySettings {
            schedule: settings.webhook_schedule.clone(),
            max_in_flight: settings.webhook_max_in_flight,
            timeout: settings.webhook_timeout,
            disable_after: settings.webhook_disable_after,
            drain: settings.webhook_drain.min(DRAIN_TIMEOUT),
            ..Default::default()
        };
        let (app, stop, deliver) = (state.app.clone(), stop.subscribe(), deliver.clone());
        tasks.spawn(async move {
            app.run_deliveries(deliver, worker, stop).await;
            Ok(())
        });
    }

    if settings.env == Env::Staging {
        spawn_staging_reset(
            &mut tasks,
            state.app.clone(),
            settings.staging_reset_at,
            stop.subscribe(),
        );
    }
    let admin = TcpListener::bind(settings.admin_addr)
        .await
        .with_context(|| format!("binding the admin listener {}", settings.admin_addr))?;
    let admin_addr = admin.local_addr()?;
    {
        let shutdown = signal();
        tasks.spawn(async move {
            axum::serve(admin, metrics_router)
                .with_graceful_shutdown(shutdown)
                .await
        });
    }
    let transport_config = || {
        let mut t = TransportConfig::new(&public_url, hsts);
        t.head_timeout = settings.head_timeout;
        t.idle_timeout = settings.idle_timeout;
        t
    };
    let (https_addr, cert_path) = if let Some(tcp) = https {
        let configured = settings
            .tls_cert
            .as_deref()
            .zip(settings.tls_key.as_deref());
        let (cert, key, generated) = ensure_certificate(&settings.data_dir, configured)?;
        if generated {
            tracing::info!(cert = %cert.display(), "generated a self-signed certificate for localhost; configure tls_cert and tls_key for production");
        }
        let tls = server_config(&cert, &key)?;
        let listener = TlsListener::new(tcp, tls, settings.head_timeout)?;
        let https_addr = listener.local_addr()?;
        tasks.spawn(gatehouse_server::serve(
            listener,
            app,
            transport_config(),
            signal(),
        ));
        // D31: the 301 listener never reads a body.
        let redirect = gatehouse_server::http::redirect::router(public_url.clone());
        let mut plain = transport_config();
        plain.read_bodies = false;
        plain.hsts = false;
        tasks.spawn(gatehouse_server::serve(http, redirect, plain, signal()));
        (Some(https_addr), Some(cert))
    } else {
        tasks.spawn(gatehouse_server::serve(
            http,
            app,
            transport_config(),
            signal(),
        ));
        (None, None)
    };
    Ok(Running {
        https_addr,
        http_addr,
        admin_addr,
        state,
        store,
        bootstrap,
        cert_path,
        stop,
        tasks,
        _serving: serving,
    })
}

/// D44: a SQLite database has one serving process. Its lock (`flock` on
/// `<database>-serve.lock`, released by the kernel when the process ends,
/// however it ends) refuses a second `serve`, so what the one process
/// assumes holds: a webhook lease found at its start was left by a
/// process that is gone. Operator commands (D47) take no such lock.
fn lock_serving(database: &std::path::Path) -> anyhow::Result<std::fs::File> {
    let mut name = database.as_os_str().to_owned();
    name.push("-serve.lock");
    let path = std::path::PathBuf::from(name);
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .with_context(|| format!("opening {}", path.display()))?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(std::fs::TryLockError::WouldBlock) => anyhow::bail!(
            "another `gatehouse serve` is running on the SQLite database {} (it holds {}); \
             SQLite serves one process: stop that one, or use PostgreSQL for several nodes (D44)",
            database.display(),
            path.display()
        ),
        Err(std::fs::TryLockError::Error(e)) => {
            Err(e).with_context(|| format!("locking {}", path.display()))
        }
    }
}

/// Background jobs: e-mail delivery (D30), the revocation set kept in step
/// with storage (D25, D44), signing keys re-read when one activates or is
/// rotated elsewhere (D23), and the purge of expired rows (D24) and kept
/// idempotent responses (D50), the usage counts (D46), and the search
/// indexes' housekeeping (issue 16).
fn spawn_background(
    tasks: &mut JoinSet<std::io::Result<()>>,
    app: App,
    transport: crate::mail::Transport,
    mail_from: String,
    shortest_retention_secs: i64,
    stop: watch::Receiver<bool>,
) {
    // Purge every minute (every 12th round of 5 s), or every round when
    // D50's or D54's retention is set shorter than a minute (tests shorten
    // them).
    let purge_every = if shortest_retention_secs < 60 { 1 } else { 12 };
    {
        let (app, stop) = (app.clone(), stop.clone());
        tasks.spawn(async move {
            crate::mail::worker(app, transport, mail_from, stop).await;
            Ok(())
        });
    }
    {
        // D46: usage counts reach storage every 2 s (a minute's counts are
        // final well within 60 s of its end), and once more at shutdown.
        let (app, mut stop) = (app.clone(), stop.clone());
        tasks.spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(2));
            loop {
                let stopping = tokio::select! {
                    _ = tick.tick() => false,
                    _ = stop.wait_for(|s| *s) => true,
                };
                if let Err(e) = app.flush_usage().await {
                    tracing::warn!(error = %e, "storing usage counts failed; kept for the next try");
                }
                if stopping {
                    return Ok(());
                }
            }
        });
    }
    {
        let (app, mut stop) = (app.clone(), stop.clone());
        tasks.spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_millis(500));
            loop {
                tokio::select! {
                    _ = tick.tick() => {}
                    _ = stop.wait_for(|s| *s) => return Ok(()),
                }
                if let Err(e) = app.sync_revocations().await {
                    tracing::warn!(error = %e, "revocation sync failed");
                }
                // D54: committed events get their sequences within half a
                // second even when no one reads them (a no-op on SQLite,
                // whose writes sequence their own).
                if let Err(e) = app.sequence_events().await {
                    tracing::warn!(error = %e, "event sequencing failed");
                }
                // D58: committed audit entries are sealed just after (on
                // PostgreSQL, the events' mark says which are final).
                if let Err(e) = app.seal_audit_log().await {
                    tracing::warn!(error = %e, "sealing the audit log failed");
                }
                app.periodic_audit_checkpoints(Timestamp::now()).await;
            }
        });
    }
    {
        let mut stop = stop.clone();
        tasks.spawn(async move {
            let app = app;
            let mut tick = tokio::time::interval(Duration::from_secs(5));
            let mut rounds = 0u64;
            loop {
                tokio::select! {
                    _ = tick.tick() => {}
                    _ = stop.wait_for(|s| *s) => return Ok(()),
                }
                rounds += 1;
                // Keys every 30 s (or when one is due); purge every minute.
                app.housekeeping_round(
                    Timestamp::now(),
                    rounds.is_multiple_of(6),
                    rounds.is_multiple_of(purge_every),
                )
                .await;
            }
        });
    }
}

/// Seconds from `now` (Unix seconds) to the next `hh:mm` UTC.
pub fn seconds_until(now: i64, (hh, mm): (u8, u8)) -> i64 {
    let day = now.div_euclid(86_400) * 86_400;
    let mut at = day + i64::from(hh) * 3600 + i64::from(mm) * 60;
    if at <= now {
        at += 86_400;
    }
    at - now
}

/// D33: the staging dataset is restored every day at `at` (UTC).
fn spawn_staging_reset(
    tasks: &mut JoinSet<std::io::Result<()>>,
    app: App,
    at: (u8, u8),
    mut stop: watch::Receiver<bool>,
) {
    tasks.spawn(async move {
        loop {
            let now = Timestamp::now().unix_seconds();
            let wait = seconds_until(now, at);
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_secs(wait as u64)) => {}
                _ = stop.wait_for(|s| *s) => return Ok(()),
            }
            let due = (now + wait).to_string();
            match app.nightly_staging_reset(&due).await {
                Ok(NightlyReset::Done(n)) => {
                    tracing::info!(organizations = n, "staging dataset restored")
                }
                Ok(NightlyReset::ClaimedElsewhere) => {
                    tracing::info!(due, "staging reset already run by another node")
                }
                Err(e) => tracing::error!(error = %e, "staging reset failed"),
            }
        }
    });
}

/// `GATEHOUSE_WEBHOOK_DNS`'s resolver, in a build with the `test-dns`
/// feature (the tests'); the configuration refuses the setting in any other
/// build, so the refusal here is a second guard. Written so both builds
/// compile the same code but the one line that names the resolver: the
/// lints of the tests' build then cover the operators' build too (`.ci/run`
/// lints once).
fn test_dns_lookup(
    server: std::net::SocketAddr,
) -> anyhow::Result<Arc<dyn gatehouse_app::webhooks::HostLookup>> {
    #[cfg(feature = "test-dns")]
    {
        return Ok(Arc::new(crate::dns::ServerLookup::new(server)));
    }
    #[allow(unreachable_code)]
    {
        let _ = server;
        anyhow::bail!("GATEHOUSE_WEBHOOK_DNS needs the test-dns feature")
    }
}

#[cfg(test)]
mod tests {
    use super::seconds_until;

    #[test]
    fn next_reset_is_later_today_or_tomorrow() {
        // 01:00:00 UTC on some day.
        let one_am = 1_795_305_600 + 3600;
        assert_eq!(one_am % 86_400, 3600);
        assert_eq!(seconds_until(one_am, (2, 0)), 3600);
        // Exactly at the time: the next one is a day later.
        assert_eq!(seconds_until(one_am + 3600, (2, 0)), 86_400);
        assert_eq!(seconds_until(one_am + 3601, (2, 0)), 86_399);
        assert_eq!(seconds_until(one_am, (0, 30)), 86_400 - 1800);
    }
}
