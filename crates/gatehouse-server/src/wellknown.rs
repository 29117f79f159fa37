//! `/.well-known/jwks.json` and the RFC 8414 metadata (D23).

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use gatehouse_domain::Scope;

use crate::AppState;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/.well-known/jwks.json", get(jwks))
        .route("/.well-known/oauth-authorization-server", get(metadata))
}

#[utoipa::path(
    get,
    path = "/.well-known/jwks.json",
    operation_id = "jwks",
    tag = "Discovery",
    summary = "Public keys that verify access tokens",
    responses(
        (status = 200, description = "A JWK set", body = crate::openapi::Jwks),
    ),
)]
pub(crate) async fn jwks(State(st): State<AppState>) -> Response {
    // D23: a key added by `gatehouse keys rotate` in another process is
    // published at once; on a storage hiccup the loaded ring still answers.
    if let Err(e) = st.auth.reload_keys().await {
        tracing::warn!(error = %e, "could not reload signing keys for the JWKS");
    }
    let mut res = st.auth.jwks().to_string().into_response();
    let h = res.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    // Short enough that a key published before it signs (D23) is seen in time.
    h.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("public, max-age=300"),
    );
    res
}

#[utoipa::path(
    get,
    path = "/.well-known/oauth-authorization-server",
    operation_id = "metadata",
    tag = "Discovery",
    summary = "Authorization server metadata (RFC 8414)",
    responses(
        (status = 200, description = "Metadata", body = crate::openapi::AnyObject),
    ),
)]
pub(crate) async fn metadata(State(st): State<AppState>) -> Response {
    let base = &st.config.public_url;
    let scopes: Vec<&str> = Scope::ALL.iter().map(|s| s.as_str()).collect();
    axum::Json(serde_json::json!({
        "issuer": base,
        "authorization_endpoint": format!("{base}/oauth/authorize"),
        "token_endpoint": format!("{base}/oauth/token"),
        "revocation_endpoint": format!("{base}/oauth/revoke"),
        "revocation_endpoint_auth_methods_supported": ["client_secret_basic", "client_secret_post", "none"],
        // D49: RFC 7662, confidential clients only.
        "introspection_endpoint": format!("{base}/oauth/introspect"),
        "introspection_endpoint_auth_methods_supported": ["client_secret_basic", "client_secret_post"],
        "code_challenge_methods_supported": ["S256"],
        "jwks_uri": format!("{base}/.well-known/jwks.json"),
        "scopes_supported": scopes,
        "response_types_supported": ["code"],
        "grant_types_supported": ["authorization_code", "client_credentials", "refresh_token"],
        "token_endpoint_auth_methods_supported": ["client_secret_basic", "client_secret_post", "none"],
        "token_endpoint_auth_signing_alg_values_supported": ["ES256"],
        "service_documentation": format!("{base}/docs"),
    }))
    .into_response()
}
