//! `GET /oauth/authorize` and its login and consent pages (D26, D29).

use axum::Router;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use gatehouse_auth::OAuthErrorKind;
use gatehouse_auth::flows::{AuthorizeError, AuthorizeRequest, LoginError, SESSION_TTL_SECS};
use gatehouse_domain::{Scope, User};
use minijinja::context;

use crate::AppState;
use crate::oauth_wire::AuthorizeParameters;
use crate::pages;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/oauth/authorize", get(start).post(login))
        .route("/oauth/authorize/decision", post(decide))
}

/// `redirect_uri` with `pairs` added to its query.
fn redirect_to(uri: &str, pairs: &[(&str, &str)]) -> Response {
    let query = serde_urlencoded::to_string(pairs).unwrap_or_default();
    let sep = if uri.contains('?') { '&' } else { '?' };
    let target = format!("{uri}{sep}{query}");
    let mut res = StatusCode::SEE_OTHER.into_response();
    if let Ok(v) = HeaderValue::from_str(&target) {
        res.headers_mut().insert(header::LOCATION, v);
    }
    res.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    res
}

fn refuse(st: &AppState, e: AuthorizeError) -> Response {
    match e {
        AuthorizeError::Page(m) => pages::message(
            st,
            StatusCode::BAD_REQUEST,
            "This sign-in link is not valid",
            &m,
        ),
        AuthorizeError::Redirect {
            redirect_uri,
            error,
            description,
            state,
        } => {
            let mut pairs = vec![
                ("error", error.as_str()),
                ("error_description", description.as_str()),
            ];
            if let Some(s) = &state {
                pairs.push(("state", s.as_str()));
            }
            redirect_to(&redirect_uri, &pairs)
        }
    }
}

fn login_page(
    st: &AppState,
    req: &AuthorizeRequest,
    p: &AuthorizeParameters,
    headers: &HeaderMap,
    error: Option<&str>,
    email: &str,
) -> Response {
    let (csrf, new) = pages::csrf_token(st, headers);
    let status = if error.is_some() {
        StatusCode::UNAUTHORIZED
    } else {
        StatusCode::OK
    };
    let res = st.templates.page_with_status(
        status,
        "login.html",
        context! {
            client_name => &req.client.name, client_id => req.client.id.as_str(), csrf => &csrf,
            params => p.hidden(), error => error, email => email,
        },
    );
    pages::with_csrf(st, res, &csrf, new)
}

fn consent_page(
    st: &AppState,
    req: &AuthorizeRequest,
    p: &AuthorizeParameters,
    headers: &HeaderMap,
    user: &User,
) -> Response {
    let granted = req.grantable(user.role);
    if granted.is_empty() {
        return refuse(
            st,
            req.error(
                OAuthErrorKind::InvalidScope,
                "none of the requested scopes can be granted to this user",
            ),
        );
    }
    let scopes: Vec<_> = granted
        .iter()
        .map(|s: Scope| context! { name => s.as_str(), description => s.description() })
        .collect();
    let (csrf, new) = pages::csrf_token(st, headers);
    let res = st.templates.page(
        "consent.html",
        context! { client_name => &req.client.name, user_email => user.email.as_str(), scopes, csrf => &csrf, params => p.hidden() },
    );
    pages::with_csrf(st, res, &csrf, new)
}

async fn session_user(st: &AppState, headers: &HeaderMap, req: &AuthorizeRequest) -> Option<User> {
    let cookie = pages::session_cookie(st, headers)?;
    st.app
        .session_user(&cookie, &req.client.org)
        .await
        .ok()
        .flatten()
}

#[utoipa::path(
    get,
    path = "/oauth/authorize",
    operation_id = "authorize",
    tag = "OAuth",
    summary = "Start the authorization-code flow in a browser (sign-in and consent pages)",
    responses(
        (status = 200, description = "Sign-in or consent page (HTML)", body = crate::openapi::Html, content_type = "text/html"),
        (status = 303, description = "Back to the redirect URI"),
        (status = 400, description = "Unknown client or redirect URI (HTML)", body = crate::openapi::Html, content_type = "text/html"),
    ),
)]
pub(crate) async fn start(State(st): State<AppState>, headers: HeaderMap, uri: Uri) -> Response {
    let p: AuthorizeParameters =
        serde_urlencoded::from_str(uri.query().unwrap_or("")).unwrap_or_default();
    let req = match st.app.check_authorize(&p.to_params()).await {
        Ok(r) => r,
        Err(e) => return refuse(&st, e),
    };
    match session_user(&st, &headers, &req).await {
        Some(user) => consent_page(&st, &req, &p, &headers, &user),
        None => login_page(&st, &req, &p, &headers, None, ""),
    }
}

const LOGIN_FAILED: &str = "That e-mail and password do not match an account that can sign in here, or sign-in is paused for a while after too many attempts.";

async fn login(
    State(st): State<AppState>,
    ConnectInfo(peer): ConnectInfo<std::net::SocketAddr>,
    request: Request,
) -> Response {
    let (headers, form) = match pages::read_form(request).await {
        Ok(f) => f,
        Err(m) => return pages::message(&st, StatusCode::BAD_REQUEST, "Something went wrong", m),
    };
    if !pages::csrf_ok(&st, &headers, &form) {
        return pages::message(
            &st,
            StatusCode::FORBIDDEN,
            "Please try again",
            "The form expired or came from another site. Go back and sign in again.",
        );
    }
    let p = AuthorizeParameters::from_form(&form);
    let req = match st.app.check_authorize(&p.to_params()).await {
        Ok(r) => r,
        Err(e) => return refuse(&st, e),
    };
    let email = form.value("email").unwrap_or("");
    let password = form.value("password").unwrap_or("");
    let source = pages::client_ip(&headers, peer, &st.config.trusted_proxies).to_string();
    match st
        .app
        .login(&req.client.org, email, password, &source)
        .await
    {
        Ok(user) => {
            let Ok(token) = st.app.create_session(&user, &req.client.org).await else {
                return pages::message(
                    &st,
                    StatusCode::SERVICE_UNAVAILABLE,
                    "Try again in a moment",
                    "The service is temporarily unavailable.",
                );
            };
            let mut res = consent_page(&st, &req, &p, &headers, &user);
            pages::set_session_cookie(&st, &mut res, &token, Some(SESSION_TTL_SECS));
            res
        }
        Err(LoginError::Failed) => login_page(&st, &req, &p, &headers, Some(LOGIN_FAILED), email),
        Err(LoginError::Unavailable(cause)) => {
            tracing::error!(%cause, "login failed on storage");
            pages::message(
                &st,
                StatusCode::SERVICE_UNAVAILABLE,
                "Try again in a moment",
                "The service is temporarily unavailable.",
            )
        }
    }
}

async fn decide(State(st): State<AppState>, request: Request) -> Response {
    let (headers, form) = match pages::read_form(request).await {
        Ok(f) => f,
        Err(m) => return pages::message(&st, StatusCode::BAD_REQUEST, "Something went wrong", m),
    };
    if !pages::csrf_ok(&st, &headers, &form) {
        return pages::message(
            &st,
            StatusCode::FORBIDDEN,
            "Please try again",
            "The form expired or came from another site. Go back and try again.",
        );
    }
    let p = AuthorizeParameters::from_form(&form);
    let req = match st.app.check_authorize(&p.to_params()).await {
        Ok(r) => r,
        Err(e) => return refuse(&st, e),
    };
    let Some(user) = session_user(&st, &headers, &req).await else {
        return login_page(&st, &req, &p, &headers, None, "");
    };
    let state = req.state.clone();
    let with_state = |mut pairs: Vec<(&'static str, String)>| {
        if let Some(s) = &state {
            pairs.push(("state", s.clone()));
        }
        pairs
    };
    match form.value("decision") {
        Some("allow") => {
            let granted = req.grantable(user.role);
            if granted.is_empty() {
                return refuse(
                    &st,
                    req.error(
                        OAuthErrorKind::InvalidScope,
                        "none of the requested scopes can be granted to this user",
                    ),
                );
            }
            match st.app.issue_code(&req, &user, granted).await {
                Ok(code) => {
                    let pairs = with_state(vec![("code", code)]);
                    let refs: Vec<(&str, &str)> =
                        pairs.iter().map(|(k, v)| (*k, v.as_str())).collect();
                    redirect_to(&req.redirect_uri, &refs)
                }
                Err(e) => {
                    tracing::error!(cause = %e, "issuing a code failed");
                    refuse(
                        &st,
                        req.error(OAuthErrorKind::Unavailable, "try again in a moment"),
                    )
                }
            }
        }
        Some("deny") => {
            let pairs = with_state(vec![(
                "error",
                OAuthErrorKind::AccessDenied.as_str().to_owned(),
            )]);
            let refs: Vec<(&str, &str)> = pairs.iter().map(|(k, v)| (*k, v.as_str())).collect();
            redirect_to(&req.redirect_uri, &refs)
        }
        _ => pages::message(
            &st,
            StatusCode::BAD_REQUEST,
            "Something went wrong",
            "Choose Allow or Deny.",
        ),
    }
}
