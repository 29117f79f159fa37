//! OpenID Connect's own API endpoint (D49): `/oauth/userinfo`. The
//! discovery document is in `wellknown.rs`; RP-initiated logout, a page,
//! is `web::logout`.

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use gatehouse_auth::flows::UserinfoError;

use crate::http::form::{self, Form};
use crate::state::AppState;

/// `/oauth/userinfo` (CORS like the token endpoint, D36).
pub fn userinfo_router() -> Router<AppState> {
    Router::new().route("/oauth/userinfo", get(userinfo).post(userinfo))
}

/// An RFC 6750 §3 error: the code in `WWW-Authenticate` and in a JSON body.
fn bearer_error(status: StatusCode, code: Option<&str>, description: &str) -> Response {
    let challenge = match code {
        Some(c) if c == "insufficient_scope" => {
            format!("Bearer error=\"{c}\", error_description=\"{description}\", scope=\"openid\"")
        }
        Some(c) => format!("Bearer error=\"{c}\", error_description=\"{description}\""),
        None => "Bearer".to_owned(),
    };
    let body = match code {
        Some(c) => serde_json::json!({"error": c, "error_description": description}),
        None => serde_json::json!({"error": "invalid_token", "error_description": description}),
    };
    let mut res = (status, axum::Json(body)).into_response();
    if let Ok(v) = HeaderValue::from_str(&challenge) {
        res.headers_mut().insert(header::WWW_AUTHENTICATE, v);
    }
    res.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    res
}

/// The bearer token of a userinfo request: the `Authorization` header
/// (exactly one), or on POST the form's `access_token` (RFC 6750 §2.2) —
/// never both.
/// Why a userinfo request's token cannot be read: (status, RFC 6750 code,
/// description).
type BearerProblem = (StatusCode, &'static str, &'static str);

fn bearer(headers: &HeaderMap, form: Option<&Form>) -> Result<Option<String>, BearerProblem> {
    let mut auth = headers.get_all(header::AUTHORIZATION).iter();
    let first = auth.next();
    if auth.next().is_some() {
        return Err((
            StatusCode::BAD_REQUEST,
            "invalid_request",
            "send one Authorization header",
        ));
    }
    let from_header = match first {
        Some(v) => {
            let v = v.to_str().unwrap_or("");
            match v.split_once(' ') {
                Some((scheme, token)) if scheme.eq_ignore_ascii_case("bearer") => {
                    Some(token.trim().to_owned())
                }
                _ => {
                    return Err((
                        StatusCode::UNAUTHORIZED,
                        "invalid_token",
                        "the Authorization header must be Bearer",
                    ));
                }
            }
        }
        None => None,
    };
    let from_form = form
        .and_then(|f| f.value("access_token"))
        .map(str::to_owned);
    match (from_header, from_form) {
        (Some(_), Some(_)) => Err((
            StatusCode::BAD_REQUEST,
            "invalid_request",
            "send the token once, in the header or in the form",
        )),
        (h, f) => Ok(h.or(f)),
    }
}

#[utoipa::path(
    get,
    path = "/oauth/userinfo",
    operation_id = "userinfo",
    tag = "OAuth",
    summary = "The signed-in person's claims (OpenID Connect UserInfo); also by POST",
    responses(
        (status = 200, description = "`sub` and the claims of the token's scopes (`profile`: `name`, `updated_at`; `email`: `email`, `email_verified`)", body = crate::http::schemas::AnyObject),
        (status = 400, description = "Two Authorization headers, or the token both in the header and in the form (`invalid_request`)", body = crate::api::oauth_wire::OAuthErrorBody),
        (status = 401, description = "No token, or an invalid, expired or revoked one (RFC 6750 `invalid_token`)", body = crate::api::oauth_wire::OAuthErrorBody),
        (status = 403, description = "The token has no `openid` scope or acts for no person (`insufficient_scope`)", body = crate::api::oauth_wire::OAuthErrorBody),
    ),
    security(("bearer" = ["openid"]), ("oauth2" = ["openid"])),
)]
pub(crate) async fn userinfo(State(st): State<AppState>, request: Request) -> Response {
    let (headers, form) = if request.method() == Method::POST
        && request
            .headers()
            .get(header::CONTENT_TYPE)
            .is_some_and(|v| {
                v.as_bytes()
                    .starts_with(b"application/x-www-form-urlencoded")
            }) {
        match form::read_form(request).await {
            Ok((h, f)) => (h, Some(f)),
            Err(m) => {
                return bearer_error(StatusCode::BAD_REQUEST, Some("invalid_request"), m);
            }
        }
    } else {
        (request.headers().clone(), None)
    };
    let token = match bearer(&headers, form.as_ref()) {
        Ok(Some(t)) => t,
        Ok(None) => {
            return bearer_error(
                StatusCode::UNAUTHORIZED,
                None,
                "an access token is required",
            );
        }
        Err((status, code, description)) => return bearer_error(status, Some(code), description),
    };
    match st.app.userinfo(&token).await {
        Ok(info) => {
            let mut res = axum::Json(info).into_response();
            res.headers_mut()
                .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
            res
        }
        Err(UserinfoError::InvalidToken) => bearer_error(
            StatusCode::UNAUTHORIZED,
            Some("invalid_token"),
            "the access token is invalid, expired or revoked",
        ),
        Err(UserinfoError::InsufficientScope) => bearer_error(
            StatusCode::FORBIDDEN,
            Some("insufficient_scope"),
            "the token was not issued to a person with the openid scope",
        ),
        Err(UserinfoError::Unavailable(e)) => {
            tracing::error!(cause = %e, "userinfo: storage failed");
            let mut res = bearer_error(
                StatusCode::SERVICE_UNAVAILABLE,
                Some("temporarily_unavailable"),
                "try again in a moment",
            );
            res.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
            res
        }
    }
}
