//! `gatehouse-server` owns Gatehouse's HTTP surface: one axum `router()` per
//! resource, the extractors that establish the tenant and the caller
//! ([`extract::Authorized`]) and parse bodies into our error envelope, the
//! single mapping of errors to responses ([`error`]), HTML pages from
//! auto-escaping templates, and [`serve`], which runs the app on a listener
//! it is given (it never binds a socket itself).
//!
//! Handlers are thin: extract, call the application layer
//! ([`gatehouse_app::App`]; the OAuth endpoints reach the auth service
//! through it), map the result. This crate must not name the store, contain
//! SQL or name a storage backend, and must not do TLS or read configuration
//! files — the `gatehouse` binary does both.

pub mod api_keys;
pub mod applications;
pub mod authorize;
pub mod dashboard;
pub mod docs;
pub mod error;
pub mod extract;
pub mod form;
pub mod health;
pub mod idempotency;
pub mod introspect;
pub mod links;
pub mod middleware;
pub mod mock;
pub mod oauth;
pub mod oauth_wire;
pub mod oidc;
pub mod openapi;
pub mod organization;
pub mod pages;
pub mod products;
pub mod profile;
#[cfg(test)]
mod properties;
pub mod redirect;
pub mod reference;
pub mod requests;
pub mod respond;
pub mod responses;
pub mod transport;
pub mod users;
pub mod v2;
pub mod versions;
pub mod wellknown;

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Router;
use gatehouse_app::App;

pub use error::{ApiError, ErrorCode};

/// Settings the HTTP layer needs.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// `https://host[:port]` without a trailing slash (D1).
    pub public_url: String,
    /// Add `Strict-Transport-Security` (D31): on for HTTPS and behind a TLS
    /// proxy, unless `public_url` is a loopback one (D31 revised,
    /// [`middleware::sends_hsts`]).
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
    pub templates: docs::Templates,
    /// The reference documentation, rendered on first use (D52).
    pub docs: std::sync::OnceLock<docs::Rendered>,
    pub request_metrics: middleware::RequestMetrics,
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
            templates: docs::Templates::new(),
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

/// The whole application.
pub fn app(state: AppState) -> Router {
    // D36: with no origins configured there is no CORS layer at all, so no
    // `Access-Control-*` header is ever sent.
    let cors = tower::util::option_layer(cors(&state.config.cors_origins));
    let v1 = v1_routes(&state).layer(cors.clone());
    let routes = Router::new()
        .nest("/v1", v1)
        .nest("/v2", v2::router().layer(cors.clone()))
        .merge(oauth::router().layer(cors.clone()))
        // D49: CORS (D36) also covers /.well-known/* and /oauth/userinfo.
        .merge(oidc::userinfo_router().layer(cors.clone()))
        .merge(wellknown::router().layer(cors))
        .merge(oidc::logout_router())
        .merge(introspect::router())
        .merge(authorize::router())
        .merge(links::router())
        .merge(health::router())
        .merge(docs::router())
        .merge(dashboard::router())
        .merge(versions::router());
    with_layers(routes, state)
}

/// The `/v1` API (paths relative to `/v1`), with its idempotency layer
/// (D50). The server nests it under `/v1`; the dashboard (D48) calls the
/// same routes in-process ([`v1_service`]).
pub fn v1_routes(state: &AppState) -> Router<AppState> {
    Router::new()
        .merge(users::router())
        .merge(products::router())
        .merge(profile::router())
        // D46: the management API.
        .merge(applications::router())
        .merge(api_keys::router())
        .merge(organization::router())
        // D50: `Idempotency-Key` on the POSTs under /v1.
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            idempotency::layer,
        ))
}

/// `/v1` alone, with the layers every route gets: what the dashboard
/// sends its requests to (D48), so it can do nothing the API cannot.
pub fn v1_service(state: &AppState) -> Router {
    with_layers(Router::new().nest("/v1", v1_routes(state)), state.clone())
}

/// D36: CORS for browser clients (single-page applications are public clients).
fn cors(origins: &[String]) -> Option<tower_http::cors::CorsLayer> {
    use axum::http::{HeaderName, HeaderValue, Method, header};
    let origins: Vec<HeaderValue> = origins
        .iter()
        .filter_map(|o| HeaderValue::from_str(o.trim_end_matches('/')).ok())
        .collect();
    if origins.is_empty() {
        return None;
    }
    let layer = tower_http::cors::CorsLayer::new()
        .allow_origin(origins)
        .allow_methods([Method::GET, Method::POST, Method::PATCH, Method::DELETE])
        .allow_headers([
            header::AUTHORIZATION,
            header::CONTENT_TYPE,
            HeaderName::from_static("idempotency-key"),
        ])
        .expose_headers([
            HeaderName::from_static("x-ratelimit-limit"),
            HeaderName::from_static("x-ratelimit-remaining"),
            HeaderName::from_static("x-ratelimit-reset"),
            header::RETRY_AFTER,
            HeaderName::from_static("x-request-id"),
            header::LOCATION,
            HeaderName::from_static(idempotency::REPLAYED),
        ])
        .max_age(std::time::Duration::from_secs(600));
    Some(layer)
}

/// The layers every route gets: the 404 fallback, panic capture, and the
/// outer middleware (request ids, error envelopes, security headers).
pub fn with_layers(routes: Router<AppState>, state: AppState) -> Router {
    routes
        .fallback(middleware::not_found)
        .layer(tower_http::catch_panic::CatchPanicLayer::custom(
            middleware::panic_response,
        ))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            middleware::outer,
        ))
        .with_state(state)
}

/// Serves `app` on `listener` until `shutdown` resolves, then finishes the
/// requests in flight. The caller owns the socket (tests bind `127.0.0.1:0`);
/// see [`transport`] for the connection deadlines and limits (D45).
pub async fn serve<A: transport::Accept>(
    listener: A,
    app: Router,
    config: transport::TransportConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    transport::serve(listener, app, config, shutdown).await
}
