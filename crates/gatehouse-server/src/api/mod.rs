//! What programs call: the `/v1` resources with their idempotency layer
//! (D50), the `/v2` preview, the sunset of v0, the health checks, the OAuth
//! and OpenID Connect endpoints (token, revocation, introspection,
//! userinfo, the discovery documents), the extractors that establish the
//! tenant and the caller, the wire types of requests and answers, and the
//! OpenAPI document that describes them.

pub mod api_keys;
pub mod applications;
pub mod audit;
pub mod events;
pub mod extract;
pub mod health;
pub mod idempotency;
pub mod introspect;
pub mod mfa;
pub mod oauth;
pub mod oauth_wire;
pub mod oidc;
pub mod openapi;
pub mod organization;
pub mod products;
pub mod profile;
pub mod requests;
pub mod responses;
pub mod sessions;
pub mod users;
pub mod v2;
pub mod versions;
pub mod webhooks;
pub mod wellknown;

use axum::Router;

use crate::layers::with_layers;
use crate::state::AppState;

/// The `/v1` API (paths relative to `/v1`), with its idempotency layer
/// (D50). The server nests it under `/v1`; the dashboard (D48) calls the
/// same routes in-process ([`v1_service`]).
pub fn v1_routes(state: &AppState) -> Router<AppState> {
    use crate::http::middleware::WritesOnly;
    Router::new()
        .merge(users::router())
        .merge(products::router())
        .merge(profile::router())
        // D57: browser sessions.
        .merge(sessions::router())
        .merge(mfa::router())
        // D46: the management API.
        .merge(applications::router())
        .merge(api_keys::router())
        .merge(organization::router())
        // D54: the record of changes.
        .merge(events::router())
        // D55: webhook endpoints.
        .merge(webhooks::router())
        // D58: the audit log.
        .merge(audit::router())
        // D50: `Idempotency-Key` on the POSTs under /v1 (reads pass by
        // the layer: `WritesOnly`).
        .layer(WritesOnly(axum::middleware::from_fn_with_state(
            state.clone(),
            idempotency::layer,
        )))
        // D58: refused writes and non-catalog POSTs recorded (outside the
        // idempotency layer, so it sees what a replay answered).
        .layer(WritesOnly(axum::middleware::from_fn_with_state(
            state.clone(),
            audit::record_writes,
        )))
}

/// `/v1` alone, with the layers every route gets: what the dashboard
/// sends its requests to (D48), so it can do nothing the API cannot.
pub fn v1_service(state: &AppState) -> Router {
    with_layers(Router::new().nest("/v1", v1_routes(state)), state.clone())
}
