//! The token endpoint (interface.md §4.5, D20–D22). Errors here follow RFC
//! 6749 §5.2, not the API envelope (D21), and every answer carries
//! `Cache-Control: no-store`.

use axum::Router;
use std::net::SocketAddr;

use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use base64::Engine;
use gatehouse_auth::{ClientAuth, IssuedTokens, OAuthError, OAuthErrorKind};

use crate::api::oauth_wire::{
    OAuthFailure, RevokeForm, TokenForm, TokenRequest, TokenResponse, too_many_failures,
};
use crate::http::form::{Form, FormProblem};
use crate::http::respond::no_store;
use crate::state::AppState;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/oauth/token", post(token))
        .route("/oauth/revoke", post(revoke))
}

pub(crate) fn undecodable(_: FormProblem) -> OAuthError {
    OAuthError::invalid_request("the form body cannot be decoded")
}

/// Reads the form of an OAuth endpoint; a problem is `invalid_request`.
pub(crate) async fn read_form(
    headers: &HeaderMap,
    body: axum::body::Body,
) -> Result<Form, OAuthError> {
    Form::read(headers, body).await.map_err(|p| {
        OAuthError::invalid_request(match p {
            FormProblem::NotAForm => {
                "send the parameters as application/x-www-form-urlencoded".to_owned()
            }
            FormProblem::Incomplete => "the request body was not received in full".to_owned(),
            FormProblem::TooLarge => "the request body is over 64 KiB".to_owned(),
            FormProblem::Undecodable => "the form body cannot be decoded".to_owned(),
            FormProblem::Repeated(k) => format!("the parameter {k} is given more than once"),
        })
    })
}

/// Client credentials from HTTP Basic (RFC 6749 §2.3.1: form-encoded id and
/// secret) or from the form; never both (D20).
pub fn client_auth(headers: &HeaderMap, form: &Form) -> Result<ClientAuth, OAuthError> {
    let mut all = headers.get_all(header::AUTHORIZATION).iter();
    let (first, second) = (all.next(), all.next());
    if second.is_some() {
        // D21 (revised): two Authorization headers are ambiguous.
        return Err(OAuthError::invalid_request(
            "send at most one Authorization header",
        ));
    }
    let basic = match first {
        None => None,
        Some(v) => {
            let text = v.to_str().map_err(|_| OAuthError::invalid_client())?;
            let (scheme, rest) = text
                .split_once(' ')
                .ok_or_else(OAuthError::invalid_client)?;
            if !scheme.eq_ignore_ascii_case("basic") {
                return Err(OAuthError::invalid_client());
            }
            let raw = base64::engine::general_purpose::STANDARD
                .decode(rest.trim())
                .map_err(|_| OAuthError::invalid_client())?;
            let raw = String::from_utf8(raw).map_err(|_| OAuthError::invalid_client())?;
            let (id, secret) = raw.split_once(':').ok_or_else(OAuthError::invalid_client)?;
            let decode = |s: &str| -> Result<String, OAuthError> {
                let plus = s.replace('+', " ");
                percent_encoding::percent_decode_str(&plus)
                    .decode_utf8()
                    .map(|c| c.into_owned())
                    .map_err(|_| OAuthError::invalid_client())
            };
            Some((decode(id)?, decode(secret)?))
        }
    };
    match basic {
        Some((id, secret)) => {
            if form.get("client_secret").is_some() {
                return Err(OAuthError::invalid_request(
                    "use one client authentication method, not two",
                ));
            }
            if form.get("client_id").is_some_and(|f| f != id) {
                return Err(OAuthError::invalid_request(
                    "client_id differs from the authenticated client",
                ));
            }
            Ok(ClientAuth {
                client_id: id,
                secret: Some(secret).filter(|s| !s.is_empty()),
            })
        }
        None => {
            let id = form
                .get("client_id")
                .ok_or_else(OAuthError::invalid_client)?;
            Ok(ClientAuth {
                client_id: id.to_owned(),
                secret: form.get("client_secret").map(str::to_owned),
            })
        }
    }
}

#[utoipa::path(
    post,
    path = "/oauth/token",
    operation_id = "token",
    tag = "OAuth",
    summary = "Issue tokens (client_credentials, authorization_code with PKCE, refresh_token)",
    request_body(content = crate::api::oauth_wire::TokenForm, content_type = "application/x-www-form-urlencoded"),
    responses(
        (status = 200, description = "Tokens", body = crate::api::oauth_wire::TokenResponse),
        (status = 400, description = "OAuth error", body = crate::api::oauth_wire::OAuthErrorBody),
        (status = 401, description = "Client authentication failed", body = crate::api::oauth_wire::OAuthErrorBody),
        (status = 429, description = "Too many failed client authentications", body = crate::api::oauth_wire::OAuthErrorBody),
    ),
)]
pub(crate) async fn token(
    State(st): State<AppState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    ctx: crate::http::middleware::RequestCtx,
    req: Request,
) -> Response {
    // D54: what a token request tells (a reuse) names this request.
    let request = ctx.request_ref(None);
    let result = client_endpoint(&st, peer, req, false, async |auth, form| {
        issue(&st, auth, form, &request).await
    })
    .await;
    match result {
        Ok(tokens) => {
            let mut res = (StatusCode::OK, axum::Json(TokenResponse::from(tokens))).into_response();
            no_store(res.headers_mut());
            res
        }
        Err(res) => res,
    }
}

/// The frame of the endpoints where a client authenticates (`/oauth/token`,
/// `/oauth/revoke`, `/oauth/introspect`): the form read once, the client's
/// credentials as presented (D20), D28 (revised)'s guard before anything
/// else, the mock's `Prefer` after it (D53), then `work`; a failed client
/// authentication is counted for the guard. `Err` is the response to send.
pub(crate) async fn client_endpoint<T>(
    st: &AppState,
    peer: SocketAddr,
    req: Request,
    introspection: bool,
    work: impl AsyncFnOnce(&Result<ClientAuth, OAuthError>, &Form) -> Result<T, OAuthError>,
) -> Result<T, Response> {
    let (parts, body) = req.into_parts();
    let headers = &parts.headers;
    let form = read_form(headers, body)
        .await
        .map_err(|e| OAuthFailure(e).into_response())?;
    let source = crate::http::middleware::client_ip(headers, peer, &st.config.trusted_proxies);
    // The client authentication is read once: for D28's guard and for the work.
    let auth = client_auth(headers, &form);
    let presented = presented_client_id(&auth, &form);
    if let Some(wait) = st.app.auth_failures_blocked(presented, source) {
        return Err(too_many_failures(wait));
    }
    // D53: the mock answers a `Prefer` after client authentication.
    if let Some(simulator) = &st.simulator {
        let request = crate::state::OAuthRequest {
            headers,
            auth: &auth,
            presented,
            source,
            introspection,
        };
        if let Some(res) = simulator.oauth_answer(st, request).await {
            return Err(res);
        }
    }
    let result = work(&auth, &form).await;
    if matches!(&result, Err(e) if e.kind == OAuthErrorKind::InvalidClient && !e.is_suspension()) {
        st.app.record_auth_failure(presented, source);
    }
    result.map_err(|e| OAuthFailure(e).into_response())
}

/// The client id a request names, authenticated or not (for D28's guard).
pub(crate) fn presented_client_id<'a>(
    auth: &'a Result<ClientAuth, OAuthError>,
    form: &'a Form,
) -> Option<&'a str> {
    match auth {
        Ok(a) => Some(a.client_id.as_str()),
        Err(_) => form.get("client_id"),
    }
}

async fn issue(
    st: &AppState,
    auth: &Result<ClientAuth, OAuthError>,
    form: &Form,
    request: &gatehouse_domain::event::RequestRef,
) -> Result<IssuedTokens, OAuthError> {
    let params: TokenForm = form.decode().map_err(undecodable)?;
    let grant = TokenRequest::of(&params)
        .ok_or_else(|| OAuthError::invalid_request("grant_type is required"))?;
    // An unsupported grant is answered as such whatever the credentials.
    let client = || auth.as_ref().map_err(Clone::clone);
    match grant {
        TokenRequest::ClientCredentials { scope } => {
            st.app.client_credentials(client()?, scope, request).await
        }
        TokenRequest::AuthorizationCode {
            code,
            redirect_uri,
            code_verifier,
        } => {
            st.app
                .authorization_code(client()?, code, redirect_uri, code_verifier, Some(request))
                .await
        }
        TokenRequest::RefreshToken {
            refresh_token,
            scope,
        } => {
            st.app
                .refresh(client()?, refresh_token, scope, Some(request))
                .await
        }
        TokenRequest::Unsupported(other) => Err(OAuthError::new(
            OAuthErrorKind::UnsupportedGrantType,
            format!("grant_type {other} is not supported"),
        )),
    }
}

/// `POST /oauth/revoke` (RFC 7009, D25): 200 with an empty body for any token,
/// valid or not; 401 `invalid_client` for bad client credentials.
#[utoipa::path(
    post,
    path = "/oauth/revoke",
    operation_id = "revoke",
    tag = "OAuth",
    summary = "Revoke a token (RFC 7009)",
    request_body(content = crate::api::oauth_wire::RevokeForm, content_type = "application/x-www-form-urlencoded"),
    responses(
        (status = 200, description = "Revoked, or already invalid"),
        (status = 400, description = "OAuth error", body = crate::api::oauth_wire::OAuthErrorBody),
        (status = 401, description = "Client authentication failed", body = crate::api::oauth_wire::OAuthErrorBody),
        (status = 429, description = "Too many failed client authentications", body = crate::api::oauth_wire::OAuthErrorBody),
    ),
)]
pub(crate) async fn revoke(
    State(st): State<AppState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    ctx: crate::http::middleware::RequestCtx,
    req: Request,
) -> Response {
    // D58: a revocation's audit entry names this request.
    let request = ctx.request_ref(None);
    let result = client_endpoint(&st, peer, req, false, async |auth, form| {
        let auth = auth.as_ref().map_err(Clone::clone)?;
        let req: RevokeForm = form.decode().map_err(undecodable)?;
        let token = req
            .token
            .as_deref()
            .ok_or_else(|| OAuthError::invalid_request("token is required"))?;
        st.app
            .revoke(auth, token, req.token_type_hint.as_deref(), &request)
            .await
    })
    .await;
    match result {
        Ok(()) => {
            let mut res = StatusCode::OK.into_response();
            no_store(res.headers_mut());
            res
        }
        Err(res) => res,
    }
}
