//! `/.well-known/jwks.json` and the RFC 8414 metadata (D23).

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use gatehouse_domain::Scope;

use crate::state::AppState;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/.well-known/jwks.json", get(jwks))
        .route("/.well-known/audit-keys.json", get(audit_keys))
        .route("/.well-known/oauth-authorization-server", get(metadata))
        .route(
            "/.well-known/openid-configuration",
            get(openid_configuration),
        )
}

#[utoipa::path(
    get,
    path = "/.well-known/audit-keys.json",
    operation_id = "getAuditKeys",
    tag = "Discovery",
    summary = "The keys that signed the audit log's checkpoints (a JWK set that verifies no token)",
    responses(
        (status = 200, description = "A JWK set", body = crate::http::schemas::Jwks),
    ),
)]
pub(crate) async fn audit_keys(State(st): State<AppState>) -> Response {
    // D58: every key that signed a kept checkpoint, also after it left the
    // signing-key ring.
    match st.app.audit_keys_document().await {
        Ok(doc) => key_set(doc.to_string()),
        Err(e) => crate::http::error::ApiError::from(e).into_response(),
    }
}

#[utoipa::path(
    get,
    path = "/.well-known/jwks.json",
    operation_id = "jwks",
    tag = "Discovery",
    summary = "Public keys that verify access tokens",
    responses(
        (status = 200, description = "A JWK set", body = crate::http::schemas::Jwks),
    ),
)]
pub(crate) async fn jwks(State(st): State<AppState>) -> Response {
    // D23: a key added by `gatehouse keys rotate` in another process is
    // published at once; on a storage hiccup the loaded ring still answers.
    if let Err(e) = st.app.reload_keys().await {
        tracing::warn!(error = %e, "could not reload signing keys for the JWKS");
    }
    key_set(st.app.jwks().to_string())
}

/// A published JWK set: JSON, cached five minutes (short enough that a key
/// published before it signs, D23, is seen in time).
fn key_set(body: String) -> Response {
    let mut res = body.into_response();
    let h = res.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
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
        (status = 200, description = "Metadata", body = crate::http::schemas::AnyObject),
    ),
)]
pub(crate) async fn metadata(State(st): State<AppState>) -> Response {
    axum::Json(document(&st)).into_response()
}

/// The metadata both documents share (RFC 8414, OpenID Connect Discovery
/// 1.0; D23, D49): the OpenID provider's fields are in the RFC 8414
/// document too. No `token_endpoint_auth_signing_alg_values_supported`:
/// no JWT client authentication is offered (D49 continued).
pub(crate) fn document(st: &AppState) -> serde_json::Value {
    let base = st.config.public_url.trim_end_matches('/');
    let scopes: Vec<&str> = Scope::ALL.iter().map(|s| s.as_str()).collect();
    serde_json::json!({
        "issuer": base,
        "authorization_endpoint": format!("{base}/oauth/authorize"),
        "token_endpoint": format!("{base}/oauth/token"),
        "revocation_endpoint": format!("{base}/oauth/revoke"),
        "revocation_endpoint_auth_methods_supported": ["client_secret_basic", "client_secret_post", "none"],
        "introspection_endpoint": format!("{base}/oauth/introspect"),
        "introspection_endpoint_auth_methods_supported": ["client_secret_basic", "client_secret_post"],
        "userinfo_endpoint": format!("{base}/oauth/userinfo"),
        "end_session_endpoint": format!("{base}/oauth/logout"),
        "code_challenge_methods_supported": ["S256"],
        "jwks_uri": format!("{base}/.well-known/jwks.json"),
        "scopes_supported": scopes,
        "response_types_supported": ["code"],
        "response_modes_supported": ["query"],
        "grant_types_supported": ["authorization_code", "client_credentials", "refresh_token"],
        "token_endpoint_auth_methods_supported": ["client_secret_basic", "client_secret_post", "none"],
        "subject_types_supported": ["public"],
        "id_token_signing_alg_values_supported": ["ES256"],
        "userinfo_signing_alg_values_supported": ["none"],
        "claims_supported": [
            "iss", "sub", "aud", "exp", "iat", "auth_time", "nonce", "at_hash", "sid",
            "amr", "acr", "name", "updated_at", "email", "email_verified"
        ],
        // D56: the levels, lowest first; an Essential `acr` in `claims`.
        "acr_values_supported": gatehouse_domain::mfa::Level::ALL.map(|l| l.as_str()),
        "prompt_values_supported": ["none", "login", "consent", "select_account"],
        "authorization_response_iss_parameter_supported": true,
        "request_parameter_supported": false,
        "request_uri_parameter_supported": false,
        "claims_parameter_supported": true,
        "frontchannel_logout_supported": false,
        "backchannel_logout_supported": false,
        "service_documentation": format!("{base}/docs"),
    })
}

#[utoipa::path(
    get,
    path = "/.well-known/openid-configuration",
    operation_id = "openidConfiguration",
    tag = "Discovery",
    summary = "OpenID provider metadata (OpenID Connect Discovery 1.0)",
    responses(
        (status = 200, description = "Metadata", body = crate::http::schemas::AnyObject),
    ),
)]
pub(crate) async fn openid_configuration(State(st): State<AppState>) -> Response {
    axum::Json(document(&st)).into_response()
}
