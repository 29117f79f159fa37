//! RP-initiated logout (D49, OpenID Connect): `/oauth/logout`, a browser
//! page that ends the session and the chains begun in it, asking first
//! unless the `id_token_hint` names this very session.

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use minijinja::context;

use crate::http::form::Form;
use crate::state::AppState;
use crate::web::pages;

/// `/oauth/logout` (a browser page: no CORS).
pub fn router() -> Router<AppState> {
    Router::new().route("/oauth/logout", get(logout).post(logout))
}

struct LogoutParams {
    id_token_hint: Option<String>,
    client_id: Option<String>,
    post_logout_redirect_uri: Option<String>,
    state: Option<String>,
    /// The confirmation form's "Sign out" (with its CSRF token, checked
    /// apart).
    confirmed: bool,
}

impl LogoutParams {
    /// The request's parameters (a query or a form, each read by the one
    /// form reader, which refuses a parameter given twice: D45 continued);
    /// an empty value reads as absent.
    fn of(form: &Form, is_post: bool) -> Self {
        let get = |k: &str| form.get(k).map(str::to_owned);
        Self {
            id_token_hint: get("id_token_hint"),
            client_id: get("client_id"),
            post_logout_redirect_uri: get("post_logout_redirect_uri"),
            state: get("state"),
            confirmed: is_post && form.value("confirm") == Some("yes"),
        }
    }
}

/// A sign-out request that cannot be followed: an error page; nothing
/// ends and nothing is followed.
fn refused_logout(st: &AppState, message: &str) -> Response {
    pages::message(
        st,
        StatusCode::BAD_REQUEST,
        "This sign-out link is not valid",
        message,
    )
}

#[utoipa::path(
    get,
    path = "/oauth/logout",
    operation_id = "logout",
    tag = "OAuth",
    summary = "Sign out (OpenID Connect RP-initiated logout); also by POST",
    params(
        ("id_token_hint" = Option<String>, Query, description = "An ID token Gatehouse issued (it may have expired). The session ends without asking only when the hint's `sub` and `sid` name this very session; with any other hint, or none, the person is asked to confirm first."),
        ("client_id" = Option<String>, Query, description = "The application asking; when a hint is sent too, it must name the same application (else an error page)."),
        ("post_logout_redirect_uri" = Option<String>, Query, description = "Where to go afterwards: one of the post-logout redirect URIs registered for the application the hint's `aud` or `client_id` names (of the session's organization), matched exactly."),
        ("state" = Option<String>, Query, description = "Passed back to the post-logout redirect URI."),
    ),
    responses(
        (status = 200, description = "Signed-out page, or the confirmation page (HTML)", body = crate::http::schemas::Html, content_type = "text/html"),
        (status = 303, description = "Signed out; back to the post-logout redirect URI"),
        (status = 400, description = "A repeated parameter, or a hint and a `client_id` naming different applications: an error page (HTML); nothing is ended", body = crate::http::schemas::Html, content_type = "text/html"),
    ),
)]
pub(crate) async fn logout(
    State(st): State<AppState>,
    browser: pages::Browser,
    request: Request,
) -> Response {
    let is_post = request.method() == Method::POST;
    let (headers, form) = if is_post {
        match pages::read_form(request).await {
            Ok(f) => f,
            Err(m) => return refused_logout(&st, m),
        }
    } else {
        let (parts, _) = request.into_parts();
        match pages::read_query(&parts.uri) {
            Ok(f) => (parts.headers, f),
            Err(m) => return refused_logout(&st, m),
        }
    };
    let p = LogoutParams::of(&form, is_post);
    let confirmed = p.confirmed && pages::csrf_ok(&st, &headers, &form);
    let cookie = pages::session_cookie(&st, &headers);
    let session = match &cookie {
        Some(c) => st.app.session(c).await.ok().flatten(),
        None => None,
    };
    let of_session = |c: &gatehouse_domain::Client| session.as_ref().is_none_or(|s| s.org == c.org);
    // D49: the hint's signature and `iss` check out (even after it
    // expired) and its `aud` is a client that exists.
    let hint = match &p.id_token_hint {
        Some(h) => st.app.logout_hint(h).await.unwrap_or_else(|e| {
            tracing::error!(cause = %e, "logout: reading the hint's client failed");
            None
        }),
        None => None,
    };
    // D49 (revised): a hint and a `client_id` must name the same client.
    if let (Some((_, c)), Some(id)) = (&hint, &p.client_id)
        && c.id.as_str() != id
    {
        return refused_logout(
            &st,
            "Its id_token_hint and client_id name different applications.",
        );
    }
    // With a session, only a client of its organization counts (D49): a
    // hint of another organization is no hint, and its `client_id` names
    // nobody whose sign-out page may be followed.
    let hint = hint.filter(|(_, c)| of_session(c));
    let client = match (&hint, &p.client_id) {
        (Some((_, c)), _) => Some(c.clone()),
        (None, Some(id)) => match gatehouse_domain::ClientId::parse(id) {
            Some(id) => st.app.resolve_client(&id).await.ok().flatten(),
            None => None,
        }
        .filter(|c| of_session(c)),
        (None, None) => None,
    };
    // Matched exactly, with no loopback port leeway (D49).
    let target = match (&client, &p.post_logout_redirect_uri) {
        (Some(c), Some(uri)) if c.post_logout_redirect_uris.iter().any(|u| u == uri) => {
            Some(uri.clone())
        }
        _ => None,
    };
    // D49 (revised): without asking only when the hint names this very
    // session; without a session, a valid hint's client is followed at
    // once (there is nothing to end). Anything else — another person's ID
    // token, an earlier session's, a `client_id` alone, no hint — asks
    // first: a link alone must not sign anyone out.
    let at_once = match (&session, &hint) {
        (Some(s), Some((h, _))) => h.names(s),
        (None, Some(_)) => true,
        (_, None) => false,
    };
    if !(at_once || confirmed) {
        // The form carries the client the request named, so the redirect
        // survives the confirmation; never the hint itself.
        let hidden: Vec<(&str, String)> = [
            ("client_id", client.as_ref().map(|c| c.id.to_string())),
            (
                "post_logout_redirect_uri",
                p.post_logout_redirect_uri.clone(),
            ),
            ("state", p.state.clone()),
        ]
        .into_iter()
        .filter_map(|(k, v)| v.map(|v| (k, v)))
        .collect();
        let (csrf, new) = pages::csrf_token(&st, &headers);
        let res = st.templates.page(
            "logout.html",
            context! {
                csrf => &csrf, params => hidden,
                client_name => client.as_ref().map(|c| c.name.clone()),
                expired => p.confirmed && !confirmed,
            },
        );
        return pages::with_csrf(&st, res, &csrf, new);
    }
    // A session is ended when the person confirmed, or when the hint named
    // it; a valid hint without a live session ends nothing.
    if (confirmed || session.is_some())
        && let Some(c) = &cookie
        && let Err(e) = st
            .app
            .logout(c, browser.request, client.as_ref().map(|c| c.id.clone()))
            .await
    {
        tracing::error!(cause = %e, "logout failed");
        return pages::message(
            &st,
            StatusCode::SERVICE_UNAVAILABLE,
            "Try again in a moment",
            "The service is temporarily unavailable, so you may still be signed in.",
        );
    }
    let mut res = match target {
        Some(uri) => {
            let mut pairs: Vec<(&str, &str)> = Vec::new();
            if let Some(s) = &p.state {
                pairs.push(("state", s));
            }
            let query = serde_urlencoded::to_string(&pairs).unwrap_or_default();
            let location = if query.is_empty() {
                uri
            } else {
                let sep = if uri.contains('?') { '&' } else { '?' };
                format!("{uri}{sep}{query}")
            };
            let mut res = StatusCode::SEE_OTHER.into_response();
            if let Ok(v) = HeaderValue::from_str(&location) {
                res.headers_mut().insert(header::LOCATION, v);
            }
            res
        }
        None => pages::message(
            &st,
            StatusCode::OK,
            "You are signed out",
            "You can close this window.",
        ),
    };
    res.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    pages::set_session_cookie(&st, &mut res, "", Some(0));
    res
}
