//! What every handler can reach: [`AppState`], the server's settings
//! ([`ServerConfig`]), the use cases, the templates and the rendered
//! reference. Below `api` and `web`, which both take it as axum's state.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use gatehouse_app::App;

use crate::http::middleware::RequestMetrics;
use crate::web::reference::Rendered;
use crate::web::templates::Templates;

/// Settings the HTTP layer needs.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// `https://host[:port]` without a trailing slash (D1).
    pub public_url: String,
    /// Add `Strict-Transport-Security` (D31): on for HTTPS and behind a TLS
    /// proxy, unless `public_url` is a loopback one (D31 revised,
    /// `http::middleware::sends_hsts`).
    pub hsts: bool,
    /// Behind a TLS-terminating proxy: answer `X-Forwarded-Proto: http` with 301 (D31).
    pub behind_proxy: bool,
    /// D36: browser origins allowed by CORS on `/oauth/token`, `/oauth/revoke`, `/v1/…`.
    pub cors_origins: Vec<String>,
    /// D28: peers whose `X-Forwarded-For` is believed.
    pub trusted_proxies: Vec<std::net::IpAddr>,
    /// D34: the mock server, which honours `Prefer: code=NNN`.
    pub mock: bool,
    /// D19: a pause before `/password/forgot` looks the address up (tests
    /// only; zero otherwise).
    pub forgot_lookup_delay: std::time::Duration,
}

impl ServerConfig {
    pub fn base_url(&self) -> String {
        format!("{}/v1", self.public_url)
    }
}

/// Everything a handler can reach. Cheap to clone.
#[derive(Clone)]
pub struct AppState(Arc<Inner>);

pub struct Inner {
    /// The use cases.
    pub app: App,
    pub config: ServerConfig,
    pub templates: Templates,
    /// The reference documentation, rendered on first use (D52).
    pub docs: std::sync::OnceLock<Rendered>,
    pub request_metrics: RequestMetrics,
    shutting_down: AtomicBool,
}

impl std::ops::Deref for AppState {
    type Target = Inner;
    fn deref(&self) -> &Inner {
        &self.0
    }
}

impl AppState {
    /// `app` must be a serving one ([`App::new`]): the server needs its
    /// auth service.
    pub fn new(app: App, mut config: ServerConfig) -> Self {
        config.public_url = config.public_url.trim_end_matches('/').to_owned();
        assert!(
            app.auth().is_some(),
            "the server runs on App::new, which has the auth service"
        );
        Self(Arc::new(Inner {
            app,
            config,
            templates: Templates::new(),
            docs: std::sync::OnceLock::new(),
            request_metrics: Default::default(),
            shutting_down: AtomicBool::new(false),
        }))
    }

    /// From now on `/readyz` answers 503 (D42, D43).
    pub fn begin_shutdown(&self) {
        self.0.shutting_down.store(true, Ordering::SeqCst);
    }

    pub fn is_shutting_down(&self) -> bool {
        self.0.shutting_down.load(Ordering::SeqCst)
    }
}
