//! The developer dashboard (D48) under `/dashboard`: server-rendered pages
//! where an organization's people manage applications, API keys and their
//! team.
//!
//! - Sign-in: the built-in client `app_dashboard`
//!   (`gatehouse_auth::dashboard`) goes through `/oauth/authorize` like any
//!   application — same accounts, sign-in page and throttles — with PKCE and
//!   a `state` kept in a short-lived cookie, and redeems its code at
//!   `/dashboard/callback` with its secret.
//! - Session: the grant (access token, expiry, the browser session it began
//!   in) sealed with AES-256-GCM in a `__Host-` cookie, so any node can
//!   serve the next page; refreshed while the Gatehouse browser session
//!   lives.
//! - Acting: only through the `/v1` router, in process ([`api`]), with the
//!   person's access token; the API's errors are shown in words.
//! - Every page: auto-escaping templates, a CSRF token on every form
//!   (double submit, as the sign-in pages), a CSP without `unsafe-inline`
//!   or other hosts, `X-Frame-Options: DENY`, `Cache-Control: no-store`.

pub mod api;
pub mod chart;
mod views;

use std::net::SocketAddr;

use axum::Router;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use gatehouse_auth::dashboard::{DASHBOARD_CLIENT_ID, DashboardGrant, DashboardRefreshError};
use gatehouse_auth::pkce;
use gatehouse_domain::{Scope, Timestamp, random};
use minijinja::{Value, context};
use subtle::ConstantTimeEq;

use crate::http::form::Form;
use crate::state::AppState;
use crate::web::pages::{self, Cookies};

/// The dashboard's Content-Security-Policy: its own stylesheet and script,
/// images from itself or `data:`, forms only to itself, no framing.
pub const DASHBOARD_CSP: &str = "default-src 'none'; style-src 'self'; script-src 'self'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// How long a sign-in may take between `/dashboard/signin` and the callback.
const FLOW_TTL_SECS: i64 = 600;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/dashboard", get(home))
        .route("/dashboard/", get(home))
        .route("/dashboard/signin", get(sign_in))
        .route("/dashboard/callback", get(callback))
        .route("/dashboard/signout", post(sign_out))
        .merge(views::router())
}

/// The signed-in person, as the pages see them.
pub(crate) struct Signed {
    pub grant: DashboardGrant,
    /// The grant sealed anew after a refresh: the cookie to set.
    pub renewed: Option<String>,
    pub peer: SocketAddr,
}

impl Signed {
    pub(crate) fn can(&self, scope: Scope) -> bool {
        self.grant.scopes().contains(scope)
    }

    /// A 303 to a dashboard page, carrying the renewed session cookie.
    pub(crate) fn redirect(&self, st: &AppState, path: &str) -> Response {
        let mut res = see_other(path);
        if let Some(sealed) = &self.renewed {
            set_dashboard_cookie(st, &mut res, sealed, &self.grant);
        }
        res
    }

    /// One request to the management API as this person.
    pub(crate) async fn api(
        &self,
        st: &AppState,
        method: Method,
        path: &str,
        body: Option<&serde_json::Value>,
    ) -> api::Reply {
        api::call(st, self.peer, &self.grant.access_token, method, path, body).await
    }
}

/// The person of this request's dashboard cookie (refreshing the access
/// token when it is due), or the way to the sign-in.
pub(crate) async fn signed(
    st: &AppState,
    headers: &HeaderMap,
    peer: SocketAddr,
) -> Result<Signed, Box<Response>> {
    let cookies = Cookies::of(st);
    let Some(grant) =
        pages::cookie(headers, cookies.dashboard()).and_then(|c| st.app.open_grant(&c))
    else {
        return Err(Box::new(to_sign_in(st)));
    };
    // A token revoked since (sign-out elsewhere, a deactivation, a
    // demotion) is refreshed like an expired one: the refresh decides.
    let usable = st.app.verify_access_token(&grant.access_token).is_ok();
    if usable && !grant.needs_refresh(Timestamp::now()) {
        return Ok(Signed {
            grant,
            renewed: None,
            peer,
        });
    }
    let session = pages::session_cookie(st, headers);
    let browser = pages::browser_use(st, headers, peer);
    match st
        .app
        .refresh_dashboard(&grant, session.as_deref(), &browser)
        .await
    {
        Ok(grant) => Ok(Signed {
            renewed: Some(st.app.seal_grant(&grant)),
            grant,
            peer,
        }),
        Err(DashboardRefreshError::Ended) => Err(Box::new(to_sign_in(st))),
        Err(DashboardRefreshError::Unavailable(e)) => {
            tracing::error!(cause = %e, "dashboard: refreshing the session failed");
            Err(Box::new(message(
                st,
                StatusCode::SERVICE_UNAVAILABLE,
                "Try again in a moment",
                "The service is temporarily unavailable.",
            )))
        }
    }
}

/// A 303 to a path of this server.
pub(crate) fn see_other(path: &str) -> Response {
    let mut res = StatusCode::SEE_OTHER.into_response();
    if let Ok(v) = HeaderValue::from_str(path) {
        res.headers_mut().insert(header::LOCATION, v);
    }
    secure(&mut res);
    res
}

fn to_sign_in(st: &AppState) -> Response {
    let mut res = see_other("/dashboard/signin");
    // A stale or forged dashboard cookie is dropped.
    pages::set_cookie(st, &mut res, Cookies::of(st).dashboard(), "", Some(0));
    res
}

/// The headers of every dashboard response (D48).
pub(crate) fn secure(res: &mut Response) {
    let h = res.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(DASHBOARD_CSP),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
}

/// A message page with the dashboard's headers.
pub(crate) fn message(st: &AppState, status: StatusCode, title: &str, text: &str) -> Response {
    let mut res = pages::message(st, status, title, text);
    secure(&mut res);
    res
}

/// A dashboard page: the layout's context (who is signed in, the
/// navigation, the CSRF token), the headers, the renewed cookie.
pub(crate) async fn render(
    st: &AppState,
    headers: &HeaderMap,
    signed: &Signed,
    status: StatusCode,
    template: &str,
    section: &str,
    ctx: Value,
) -> Response {
    let (csrf, new) = pages::csrf_token(st, headers);
    let me = signed.api(st, Method::GET, "/me", None).await;
    let email = me.data()["email"].as_str().unwrap_or("").to_owned();
    let role = me.data()["role"].as_str().unwrap_or("").to_owned();
    let org_name = st.app.org_name(&signed.grant.org).await.unwrap_or_default();
    let ctx = context! {
        csrf => &csrf, section => section, me_email => email, me_role => role,
        org_name => org_name, is_admin => signed.can(Scope::UsersWrite),
        // D58, D29 (continued): the Activity page and the links to an
        // item's history are for those who may read the audit log.
        can_audit => signed.can(Scope::AuditRead),
        ..ctx
    };
    let mut res = st.templates.page_with_status(status, template, ctx);
    secure(&mut res);
    if let Some(sealed) = &signed.renewed {
        set_dashboard_cookie(st, &mut res, sealed, &signed.grant);
    }
    pages::with_csrf(st, res, &csrf, new)
}

fn set_dashboard_cookie(st: &AppState, res: &mut Response, sealed: &str, g: &DashboardGrant) {
    let age = (g.session_expires_at - Timestamp::now().unix_seconds()).max(0);
    pages::set_cookie(st, res, Cookies::of(st).dashboard(), sealed, Some(age));
}

/// Whether a dashboard form carries this browser's CSRF token; the refusal
/// page otherwise.
pub(crate) fn check_csrf(
    st: &AppState,
    headers: &HeaderMap,
    form: &Form,
) -> Result<(), Box<Response>> {
    if pages::csrf_ok(st, headers, form) {
        Ok(())
    } else {
        Err(Box::new(message(
            st,
            StatusCode::FORBIDDEN,
            "Please try again",
            "The form expired or came from another site. Go back, reload the page and try again.",
        )))
    }
}

/// A dashboard form: read, CSRF-checked.
pub(crate) async fn read_form(
    st: &AppState,
    req: Request,
) -> Result<(HeaderMap, Form), Box<Response>> {
    let (headers, form) = pages::read_form(req).await.map_err(|m| {
        Box::new(message(
            st,
            StatusCode::BAD_REQUEST,
            "Something went wrong",
            m,
        ))
    })?;
    check_csrf(st, &headers, &form)?;
    Ok((headers, form))
}

async fn home(
    State(st): State<AppState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
) -> Response {
    match signed(&st, &headers, peer).await {
        Ok(_) => see_other("/dashboard/applications"),
        Err(res) => *res,
    }
}

/// Where a sign-in may lead back to (`?next=`): a fixed list, so the
/// parameter can never send anyone elsewhere.
fn after_sign_in(next: Option<&str>) -> &'static str {
    match next {
        Some("account") => "/account/security",
        _ => "/dashboard/applications",
    }
}

/// Starts the sign-in: state, PKCE verifier and where to go afterwards in a
/// short-lived cookie, then the authorization request of the built-in
/// client. `?next=account` comes back to the account page; `?fresh=1`
/// asks for the password again even in a signed-in browser (`prompt=login`:
/// the account page needs a recent sign-in, D56).
async fn sign_in(State(st): State<AppState>, uri: axum::http::Uri) -> Response {
    let q: Vec<(String, String)> =
        serde_urlencoded::from_str(uri.query().unwrap_or("")).unwrap_or_default();
    let value = |k: &str| q.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
    let next = if value("next") == Some("account") {
        "account"
    } else {
        ""
    };
    let state = random::base62(128);
    let verifier = random::base62(256);
    let mut params = vec![
        ("response_type", "code"),
        ("client_id", DASHBOARD_CLIENT_ID),
        ("state", state.as_str()),
        ("code_challenge_method", "S256"),
    ];
    let redirect = st.app.dashboard_redirect_uri();
    let challenge = pkce::challenge_for(&verifier);
    params.push(("redirect_uri", redirect.as_str()));
    params.push(("code_challenge", challenge.as_str()));
    if value("fresh") == Some("1") {
        params.push(("prompt", "login"));
    }
    let query = serde_urlencoded::to_string(&params).unwrap_or_default();
    let mut res = see_other(&format!("/oauth/authorize?{query}"));
    pages::set_cookie(
        &st,
        &mut res,
        Cookies::of(&st).dashboard_flow(),
        &format!("{state}.{verifier}.{next}"),
        Some(FLOW_TTL_SECS),
    );
    res
}

#[derive(serde::Deserialize)]
struct CallbackQuery {
    code: Option<String>,
    state: Option<String>,
    error: Option<String>,
    error_description: Option<String>,
    iss: Option<String>,
}

/// The built-in client's redirect URI: checks `state` and `iss`, redeems
/// the code with the client's secret and the PKCE verifier.
async fn callback(
    State(st): State<AppState>,
    headers: HeaderMap,
    uri: axum::http::Uri,
) -> Response {
    // D45 (continued): a parameter given twice is refused like any other
    // unreadable answer.
    let q: CallbackQuery = match pages::read_query(&uri).map(|f| f.decode()) {
        Ok(Ok(q)) => q,
        _ => {
            return message(
                &st,
                StatusCode::BAD_REQUEST,
                "Sign-in failed",
                "The sign-in answer could not be read. Sign in again.",
            );
        }
    };
    let cookies = Cookies::of(&st);
    let flow = pages::cookie(&headers, cookies.dashboard_flow());
    let mut parts = flow.as_deref().unwrap_or("").splitn(3, '.');
    let (state, verifier, next) = (parts.next(), parts.next(), parts.next());
    let (Some(state), Some(verifier)) = (state.filter(|s| !s.is_empty()), verifier) else {
        return message(
            &st,
            StatusCode::BAD_REQUEST,
            "Sign-in failed",
            "This sign-in was not started here or took too long. Sign in again from /dashboard.",
        );
    };
    let state_ok: bool = q
        .state
        .as_deref()
        .is_some_and(|s| s.as_bytes().ct_eq(state.as_bytes()).into());
    if !state_ok || q.iss.as_deref() != Some(st.config.public_url.as_str()) {
        return message(
            &st,
            StatusCode::BAD_REQUEST,
            "Sign-in failed",
            "The sign-in answer does not belong to this browser's sign-in. Sign in again.",
        );
    }
    if let Some(error) = q.error {
        let text = format!(
            "The sign-in was refused: {}",
            q.error_description.as_deref().unwrap_or(error.as_str())
        );
        return message(&st, StatusCode::BAD_REQUEST, "Sign-in failed", &text);
    }
    let code = q.code.unwrap_or_default();
    // D48 (continued): the code works only with the browser session it was
    // issued in.
    let session = pages::session_cookie(&st, &headers);
    let grant = match st
        .app
        .dashboard_token(
            &code,
            verifier,
            &st.app.dashboard_secret(),
            session.as_deref(),
        )
        .await
    {
        Ok(g) => g,
        Err(e) => {
            tracing::info!(cause = %e, "dashboard: the code was refused");
            return message(
                &st,
                StatusCode::BAD_REQUEST,
                "Sign-in failed",
                "The sign-in could not be completed. Sign in again.",
            );
        }
    };
    let mut res = see_other(after_sign_in(next));
    set_dashboard_cookie(&st, &mut res, &st.app.seal_grant(&grant), &grant);
    pages::set_cookie(&st, &mut res, cookies.dashboard_flow(), "", Some(0));
    res
}

/// D48: sign-out is a POST (with its CSRF token); it revokes the access
/// token and ends the Gatehouse browser session (and the refresh chains
/// begun in it, D49).
async fn sign_out(State(st): State<AppState>, browser: pages::Browser, req: Request) -> Response {
    let (headers, _form) = match read_form(&st, req).await {
        Ok(f) => f,
        Err(res) => return *res,
    };
    let cookies = Cookies::of(&st);
    if let Some(grant) =
        pages::cookie(&headers, cookies.dashboard()).and_then(|c| st.app.open_grant(&c))
        && let Err(e) = st.app.revoke_dashboard(&grant).await
    {
        tracing::error!(cause = %e, "dashboard: revoking the access token failed");
        return message(
            &st,
            StatusCode::SERVICE_UNAVAILABLE,
            "Try again in a moment",
            "Signing out failed; you are still signed in. Try again.",
        );
    }
    if let Some(session) = pages::session_cookie(&st, &headers)
        && let Err(e) = st
            .app
            .logout(
                &session,
                browser.request,
                Some(gatehouse_auth::dashboard::dashboard_client_id()),
            )
            .await
    {
        tracing::error!(cause = %e, "dashboard: ending the browser session failed");
        return message(
            &st,
            StatusCode::SERVICE_UNAVAILABLE,
            "Try again in a moment",
            "Signing out failed; you are still signed in. Try again.",
        );
    }
    let mut res = st.templates.page(
        "message.html",
        context! {
            title => "Signed out",
            message => "You are signed out of the dashboard and of Gatehouse in this browser.",
            back => context! { href => "/dashboard", label => "Sign in again" },
        },
    );
    secure(&mut res);
    pages::set_cookie(&st, &mut res, cookies.dashboard(), "", Some(0));
    pages::set_cookie(&st, &mut res, cookies.session(), "", Some(0));
    res
}
