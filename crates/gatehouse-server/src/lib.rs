//! `gatehouse-server` owns Gatehouse's HTTP surface: one axum `router()` per
//! resource, the extractors that establish the tenant and the caller
//! ([`api::extract::Authorized`]) and parse bodies into our error envelope,
//! the single mapping of errors to responses ([`http::error`]), HTML pages
//! from auto-escaping templates, and [`serve`], which runs the app on a
//! listener it is given (it never binds a socket itself).
//!
//! By audience, from the ground up:
//!
//! - [`http`]: transport, the error envelope, limits, the request context,
//!   success envelopes and the form reader — it names nothing else of this
//!   crate;
//! - [`AppState`] (with [`ServerConfig`]) and [`layers`], the layers every
//!   route gets;
//! - [`api`]: what programs call — `/v1`, `/v2`, the OAuth and OpenID
//!   Connect endpoints, their extractors and wire types, and the OpenAPI
//!   document;
//! - [`web`]: what people see — the sign-in and password pages, the
//!   dashboard and the reference documentation;
//! - [`mock`]: `gatehouse mock`'s simulated errors (D34, D53), which the
//!   extractors and the OAuth endpoints consult.
//!
//! Handlers are thin: extract, call the application layer
//! ([`gatehouse_app::App`]; the OAuth endpoints reach the auth service
//! through it), map the result. This crate must not name the store, contain
//! SQL or name a storage backend, and must not do TLS or read configuration
//! files — the `gatehouse` binary does both.

pub mod api;
pub mod http;
pub mod layers;
pub mod mock;
#[cfg(test)]
mod properties;
mod state;
pub mod web;

use std::future::Future;

use axum::Router;

pub use api::events::Published;
pub use api::{v1_routes, v1_service};
pub use http::error::{ApiError, ErrorCode};
pub use layers::with_layers;
pub use state::{AppState, Inner, ServerConfig, Simulator};

use crate::http::transport;

/// The state a serving process runs on: [`AppState::new`] with the mock's
/// simulated errors plugged in when `config.mock` is on (D34, D53). The
/// mock sits above the endpoints as a layer: nothing below names it.
pub fn serving_state(app: gatehouse_app::App, config: ServerConfig) -> AppState {
    let simulator = config
        .mock
        .then(|| std::sync::Arc::new(mock::Mock) as std::sync::Arc<dyn Simulator>);
    AppState::new(app, config, simulator)
}

/// The whole application.
pub fn app(state: AppState) -> Router {
    // D36: with no origins configured there is no CORS layer at all, so no
    // `Access-Control-*` header is ever sent.
    let cors = tower::util::option_layer(cors(&state.config.cors_origins));
    let v1 = v1_routes(&state).layer(cors.clone());
    let routes = Router::new()
        .nest("/v1", v1)
        .nest("/v2", api::v2::router().layer(cors.clone()))
        .merge(api::oauth::router().layer(cors.clone()))
        // D49: CORS (D36) also covers /.well-known/* and /oauth/userinfo.
        .merge(api::oidc::userinfo_router().layer(cors.clone()))
        .merge(api::wellknown::router().layer(cors))
        .merge(web::logout::router())
        .merge(api::introspect::router())
        .merge(web::authorize::router())
        .merge(web::second_step::router())
        .merge(web::passkeys::router())
        .merge(web::links::router())
        .merge(api::health::router())
        .merge(api::openapi::router())
        .merge(web::docs::router())
        .merge(web::dashboard::router())
        .merge(api::versions::router());
    with_layers(routes, state)
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
            HeaderName::from_static(api::idempotency::REPLAYED),
        ])
        .max_age(std::time::Duration::from_secs(600));
    Some(layer)
}

/// Serves `app` on `listener` until `shutdown` resolves, then finishes the
/// requests in flight. The caller owns the socket (tests bind `127.0.0.1:0`);
/// see [`http::transport`] for the connection deadlines and limits (D45).
pub async fn serve<A: transport::Accept>(
    listener: A,
    app: Router,
    config: transport::TransportConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    transport::serve(listener, app, config, shutdown).await
}
