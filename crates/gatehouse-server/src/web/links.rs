//! Pages behind e-mailed links: accepting an invitation (D11) and resetting a
//! forgotten password (D19).

use axum::Router;
use std::net::SocketAddr;

use axum::extract::{ConnectInfo, Path, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri, header};
use axum::response::Response;
use axum::routing::get;
use gatehouse_app::AppError;
use gatehouse_auth::password;
use gatehouse_domain::{ClientId, Email};
use minijinja::context;

use crate::http::form::Form;
use crate::http::middleware::RequestCtx;
use crate::state::AppState;
use crate::web::pages;

/// The paths whose last segment is a link's secret token (D11, D19).
const TOKEN_PATHS: [&str; 2] = ["/invite/", "/password/reset/"];

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/invite/{token}", get(invite_form).post(invite_submit))
        .route("/password/forgot", get(forgot_form).post(forgot_submit))
        .route(
            "/password/reset/{token}",
            get(reset_form).post(reset_submit),
        )
}

/// `path` as logs may show it: a link's token replaced by `{token}` (D58:
/// no secret in the server's log; a link token is a password for a while).
pub fn path_for_log(path: &str) -> std::borrow::Cow<'_, str> {
    for prefix in TOKEN_PATHS {
        if let Some(rest) = path.strip_prefix(prefix)
            && !rest.is_empty()
        {
            return format!("{prefix}{{token}}").into();
        }
    }
    path.into()
}

fn dead_link(st: &AppState) -> Response {
    pages::message(
        st,
        StatusCode::NOT_FOUND,
        "This link is no longer valid",
        "It was already used, has expired, or was replaced by a newer one. Ask for a new link.",
    )
}

fn unavailable(st: &AppState, e: AppError) -> Response {
    tracing::error!(cause = %e, "link page: storage failed");
    pages::message(
        st,
        StatusCode::SERVICE_UNAVAILABLE,
        "Try again in a moment",
        "The service is temporarily unavailable.",
    )
}

fn password_form(
    st: &AppState,
    headers: &HeaderMap,
    title: &str,
    intro: &str,
    action: &str,
    error: Option<&str>,
) -> Response {
    let (csrf, new) = pages::csrf_token(st, headers);
    let status = if error.is_some() {
        StatusCode::BAD_REQUEST
    } else {
        StatusCode::OK
    };
    let res = st.templates.page_with_status(
        status,
        "set_password.html",
        context! { title => title, intro => intro, action => action, csrf => &csrf, error => error },
    );
    pages::with_csrf(st, res, &csrf, new)
}

/// Reads and checks the new password of a form; `Err` is the message to show.
fn new_password(form: &Form, email: &str) -> Result<String, String> {
    let pw = form.value("password").unwrap_or_default().to_owned();
    if form.value("confirm").is_some_and(|c| c != pw) {
        return Err("The two passwords differ.".into());
    }
    password::check_policy(&pw, email).map_err(|e| format!("The password {e}."))?;
    Ok(pw)
}

async fn invite_form(
    State(st): State<AppState>,
    Path(token): Path<String>,
    headers: HeaderMap,
) -> Response {
    match st.app.invitation_user(&token).await {
        Ok(Some(user)) => password_form(
            &st,
            &headers,
            "Welcome to Gatehouse",
            &format!("Choose a password for {} to finish joining.", user.email),
            &format!("/invite/{token}"),
            None,
        ),
        Ok(None) => dead_link(&st),
        Err(e) => unavailable(&st, e),
    }
}

async fn invite_submit(
    State(st): State<AppState>,
    Path(token): Path<String>,
    ctx: RequestCtx,
    request: Request,
) -> Response {
    let expired = "The form expired. Open the link from your e-mail again.";
    let (headers, form) = match pages::checked_form(&st, request, expired).await {
        Ok(f) => f,
        Err(res) => return *res,
    };
    let user = match st.app.invitation_user(&token).await {
        Ok(Some(r)) => r,
        Ok(None) => return dead_link(&st),
        Err(e) => return unavailable(&st, e),
    };
    let pw = match new_password(&form, user.email.as_str()) {
        Ok(pw) => pw,
        Err(m) => {
            let intro = format!("Choose a password for {} to finish joining.", user.email);
            return password_form(
                &st,
                &headers,
                "Welcome to Gatehouse",
                &intro,
                &format!("/invite/{token}"),
                Some(&m),
            );
        }
    };
    match st
        .app
        .accept_invitation(&token, pw, page_request(&ctx))
        .await
    {
        // Issue 32: the last page leads on, to the dashboard (where an
        // admin's invitation comes from; another application's people sign
        // in there instead).
        Ok(_) => pages::message_leading_to(
            &st,
            StatusCode::OK,
            "You're in",
            "Your password is set and your account is active. Sign in to the dashboard, or to the application that invited you.",
            pages::Back {
                href: "/dashboard".into(),
                label: "Sign in to the dashboard",
            },
        ),
        Err(e) if e.is_dead_link() => dead_link(&st),
        Err(e) => unavailable(&st, e),
    }
}

async fn forgot_form(State(st): State<AppState>, uri: Uri, headers: HeaderMap) -> Response {
    // D45 (continued): a parameter given twice is the page's error.
    let q = match pages::read_query(&uri) {
        Ok(q) => q,
        Err(m) => return pages::message(&st, StatusCode::BAD_REQUEST, "Reset your password", m),
    };
    let client_id = q.value("client_id").unwrap_or_default().to_owned();
    if ClientId::parse(&client_id).is_none() {
        return pages::message(
            &st,
            StatusCode::BAD_REQUEST,
            "Reset your password",
            "Open this page from the sign-in page of your application.",
        );
    }
    let (csrf, new) = pages::csrf_token(&st, &headers);
    let back = pages::way_back(&st, q.value("return_to"));
    let res = st.templates.page(
        "forgot.html",
        context! { csrf => &csrf, client_id => client_id, sent => false, back => minijinja::value::Serde(back) },
    );
    pages::with_csrf(&st, res, &csrf, new)
}

async fn forgot_submit(
    State(st): State<AppState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    ctx: RequestCtx,
    request: Request,
) -> Response {
    let expired = "The form expired. Go back and try again.";
    let (headers, form) = match pages::checked_form(&st, request, expired).await {
        Ok(f) => f,
        Err(res) => return *res,
    };
    let source = pages::client_ip(&headers, peer, &st.config.trusted_proxies);
    // The address must name an account the mail path can reach; anything
    // else is looked up as nobody (the answer is the same either way).
    let asked = form
        .value("client_id")
        .and_then(ClientId::parse)
        .zip(form.value("email").and_then(|e| Email::parse(e).ok()));
    if let Err(wait) = st.app.request_password_reset(
        source,
        asked,
        st.config.forgot_lookup_delay,
        Some(ctx.request_ref(None)),
    ) {
        let mut res = pages::message(
            &st,
            StatusCode::TOO_MANY_REQUESTS,
            "Too many requests",
            &format!(
                "Too many password resets were asked for from your network. Try again in {} minutes.",
                wait.div_ceil(60)
            ),
        );
        if let Ok(v) = HeaderValue::from_str(&wait.to_string()) {
            res.headers_mut().insert(header::RETRY_AFTER, v);
        }
        return res;
    }
    let back = pages::way_back(&st, form.value("return_to"));
    st.templates.page(
        "forgot.html",
        context! { sent => true, back => minijinja::value::Serde(back) },
    )
}

async fn reset_form(
    State(st): State<AppState>,
    Path(token): Path<String>,
    headers: HeaderMap,
) -> Response {
    match st.app.reset_user(&token).await {
        Ok(Some(user)) => password_form(
            &st,
            &headers,
            "Choose a new password",
            &format!("For {}.", user.email),
            &format!("/password/reset/{token}"),
            None,
        ),
        Ok(None) => dead_link(&st),
        Err(e) => unavailable(&st, e),
    }
}

async fn reset_submit(
    State(st): State<AppState>,
    Path(token): Path<String>,
    ctx: RequestCtx,
    request: Request,
) -> Response {
    let expired = "The form expired. Open the link from your e-mail again.";
    let (headers, form) = match pages::checked_form(&st, request, expired).await {
        Ok(f) => f,
        Err(res) => return *res,
    };
    let user = match st.app.reset_user(&token).await {
        Ok(Some(r)) => r,
        Ok(None) => return dead_link(&st),
        Err(e) => return unavailable(&st, e),
    };
    let pw = match new_password(&form, user.email.as_str()) {
        Ok(pw) => pw,
        Err(m) => {
            return password_form(
                &st,
                &headers,
                "Choose a new password",
                &format!("For {}.", user.email),
                &format!("/password/reset/{token}"),
                Some(&m),
            );
        }
    };
    // D19: a reset ends every session and token of the user (the app
    // layer notes the revocation).
    match st.app.reset_password(&token, pw, page_request(&ctx)).await {
        Ok(_) => pages::message(
            &st,
            StatusCode::OK,
            "Password changed",
            "Sign in again with your new password.",
        ),
        Err(e) if e.is_dead_link() => dead_link(&st),
        Err(e) => unavailable(&st, e),
    }
}

/// The page request a link's change came from, as its events name it (D54).
fn page_request(ctx: &RequestCtx) -> gatehouse_domain::event::RequestRef {
    ctx.request_ref(None)
}

#[cfg(test)]
mod tests {
    use super::path_for_log;

    #[test]
    fn d58_link_tokens_never_reach_the_log() {
        assert_eq!(path_for_log("/invite/abcDEF123"), "/invite/{token}");
        assert_eq!(
            path_for_log("/password/reset/xyz-987_q"),
            "/password/reset/{token}"
        );
        assert_eq!(path_for_log("/password/forgot"), "/password/forgot");
        assert_eq!(path_for_log("/v1/users/usr_1"), "/v1/users/usr_1");
        assert_eq!(path_for_log("/invite/"), "/invite/");
    }
}
