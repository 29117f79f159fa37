//! `POST /oauth/introspect` (RFC 7662, D49). The caller authenticates as at
//! the token endpoint (HTTP Basic or form `client_secret`, D20) under the
//! same D28 (revised) failure guard; errors are RFC 6749 §5.2 bodies (D21)
//! and every answer carries `Cache-Control: no-store`. The rule — what is
//! active, who may ask — is `App::introspect`
//! (`gatehouse-app/src/oauth/introspect.rs`).

use std::net::SocketAddr;

use axum::Router;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use gatehouse_auth::{ActiveToken, OAuthError};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::api::oauth::{client_endpoint, undecodable};
use crate::http::respond::no_store;
use crate::state::AppState;

pub fn router() -> Router<AppState> {
    Router::new().route("/oauth/introspect", post(introspect))
}

/// An introspection request (RFC 7662 §2.1); the client authenticates as at
/// the token endpoint.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[schema(as = IntrospectRequest)]
pub struct IntrospectForm {
    /// An access token, an API key of the caller's organization, or a
    /// refresh token issued to the caller.
    #[serde(default)]
    #[schema(value_type = String, required = true)]
    pub token: Option<String>,
    /// `access_token`, `refresh_token` or `api_key`; only a hint.
    #[serde(default)]
    #[schema(value_type = String)]
    pub token_type_hint: Option<String>,
    #[serde(default)]
    #[schema(value_type = String)]
    pub client_id: Option<String>,
    #[serde(default)]
    #[schema(value_type = String)]
    pub client_secret: Option<String>,
}

/// The introspection answer (RFC 7662 §2.2): `{"active": false}` alone, or
/// an active token's facts.
#[derive(Clone, Debug, Default, Serialize, ToSchema)]
#[schema(as = IntrospectionResponse)]
pub struct IntrospectionResponse {
    pub active: bool,
    /// Space-separated scopes.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = String)]
    pub scope: Option<String>,
    /// Absent for an API key.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = String)]
    pub client_id: Option<String>,
    /// The user; the client for client credentials; the key's id for an API key.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = String)]
    pub sub: Option<String>,
    /// Unix seconds; absent for an API key without an expiry.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = i64)]
    pub exp: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = i64)]
    pub iat: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = String)]
    pub iss: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = String)]
    pub aud: Option<String>,
    /// `Bearer`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = String)]
    pub token_type: Option<&'static str>,
    /// `access_token`, `refresh_token` or `api_key`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = String)]
    pub token_use: Option<&'static str>,
    /// The organization.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = String)]
    pub org: Option<String>,
    /// D56: how the person signed in (RFC 8176 values), for a person's token.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Vec<String>)]
    pub amr: Option<Vec<String>>,
    /// D56: the authentication context class reached.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = String)]
    pub acr: Option<&'static str>,
    /// D56: when the person last authenticated (Unix seconds).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = i64)]
    pub auth_time: Option<i64>,
}

impl From<Option<ActiveToken>> for IntrospectionResponse {
    fn from(t: Option<ActiveToken>) -> Self {
        let Some(t) = t else {
            return Self::default();
        };
        Self {
            active: true,
            scope: Some(t.scopes.to_string()),
            client_id: t.client_id.map(|c| c.to_string()),
            sub: Some(t.sub),
            exp: t.exp,
            iat: Some(t.iat),
            iss: Some(t.iss),
            aud: Some(t.aud),
            token_type: Some("Bearer"),
            token_use: Some(t.token_use.as_str()),
            org: Some(t.org.to_string()),
            acr: t.authn.as_ref().map(|a| a.acr.as_str()),
            amr: t.authn.map(|a| a.amr),
            auth_time: t.auth_time,
        }
    }
}

/// `POST /oauth/introspect` (RFC 7662, D49).
#[utoipa::path(
    post,
    path = "/oauth/introspect",
    operation_id = "introspect",
    tag = "OAuth",
    summary = "Introspect a token (RFC 7662; confidential clients only)",
    request_body(content = IntrospectForm, content_type = "application/x-www-form-urlencoded"),
    responses(
        (status = 200, description = "The token's state: `{\"active\": false}` for anything not active", body = IntrospectionResponse),
        (status = 400, description = "OAuth error", body = crate::api::oauth_wire::OAuthErrorBody),
        (status = 401, description = "Client authentication failed, or a public client", body = crate::api::oauth_wire::OAuthErrorBody),
        (status = 429, description = "Too many failed client authentications", body = crate::api::oauth_wire::OAuthErrorBody),
    ),
)]
pub(crate) async fn introspect(
    State(st): State<AppState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    ctx: crate::http::middleware::RequestCtx,
    req: Request,
) -> Response {
    // D58: the introspection's audit entry names this request.
    let request = ctx.request_ref(None);
    let result = client_endpoint(&st, peer, req, true, async |auth, form| {
        let auth = auth.as_ref().map_err(Clone::clone)?;
        let req: IntrospectForm = form.decode().map_err(undecodable)?;
        let Some(token) = req.token.as_deref() else {
            // The caller's credentials are checked before its request (as
            // at /oauth/revoke): a bad secret is 401 whatever the form says.
            st.app.check_client_authentication(auth, true).await?;
            return Err(OAuthError::invalid_request("token is required"));
        };
        st.app
            .introspect(auth, token, req.token_type_hint.as_deref(), &request)
            .await
    })
    .await;
    match result {
        Ok(answer) => {
            let mut res = (
                StatusCode::OK,
                axum::Json(IntrospectionResponse::from(answer)),
            )
                .into_response();
            no_store(res.headers_mut());
            res
        }
        Err(res) => res,
    }
}
