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
    /// Issue 32: one `info` line per request, target `gatehouse::access`
    /// (method, path without its query, status, duration, request id).
    pub access_log: bool,
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
    /// D34, D53: the mock's simulated errors, plugged in from above when
    /// `config.mock` is on; `None` in production, where the endpoints never
    /// look at `Prefer`.
    pub simulator: Option<Arc<dyn Simulator>>,
    shutting_down: AtomicBool,
}

/// The hook the mock server plugs into the endpoints' pipelines (D34,
/// D53), so nothing below it names the mock: each endpoint asks at the one
/// point where the real error would arise (after authentication and rate
/// limiting on `/v1`, after client authentication at `/oauth/*`), and the
/// simulator answers the error the caller asked for, or `None` to go on.
#[async_trait::async_trait]
pub trait Simulator: Send + Sync {
    /// A `/v1` request's preferred error; `rate` is the caller's real
    /// counters, for the error's `X-RateLimit-*` headers (a simulated 429
    /// may update them).
    fn v1_error(
        &self,
        headers: &axum::http::HeaderMap,
        scope: Option<gatehouse_domain::Scope>,
        rate: Option<&mut gatehouse_auth::ratelimit::RateInfo>,
    ) -> Option<crate::http::error::ApiError>;

    /// An OAuth endpoint's preferred answer, after checking the client
    /// authentication as the endpoint would (`introspection`: confidential
    /// clients only, D49); a failed one is answered and counted (D28).
    async fn oauth_answer(
        &self,
        st: &AppState,
        request: OAuthRequest<'_>,
    ) -> Option<axum::response::Response>;
}

/// What an OAuth endpoint knows of a request when it asks the
/// [`Simulator`].
pub struct OAuthRequest<'a> {
    pub headers: &'a axum::http::HeaderMap,
    pub auth: &'a Result<gatehouse_auth::ClientAuth, gatehouse_auth::OAuthError>,
    /// The client id the request names, authenticated or not (D28's guard).
    pub presented: Option<&'a str>,
    pub source: std::net::IpAddr,
    pub introspection: bool,
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
    /// `simulator`: the mock's (D34), plugged in from above by
    /// [`crate::serving_state`]; `None` in production.
    pub fn new(app: App, mut config: ServerConfig, simulator: Option<Arc<dyn Simulator>>) -> Self {
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
            simulator,
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
