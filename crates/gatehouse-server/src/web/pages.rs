//! Helpers for the server-rendered pages: cookies, CSRF (double submit), form
//! bodies, the peer address.

use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::Response;
use gatehouse_domain::random;
use minijinja::context;
use subtle::ConstantTimeEq;

use crate::http::form::Form;
pub use crate::http::form::{form_problem, read_form, read_query};
pub use crate::http::middleware::client_ip;
use crate::state::AppState;

pub const CSRF_COOKIE: &str = "__Host-gh_csrf";
pub const SESSION_COOKIE: &str = "__Host-gh_session";
/// D53: the mock serves plain HTTP, where a browser keeps no `__Host-` or
/// `Secure` cookie, so its cookies are these, without `Secure`.
pub const MOCK_CSRF_COOKIE: &str = "gh_csrf";
pub const MOCK_SESSION_COOKIE: &str = "gh_session";
/// D48: the dashboard's session (its sealed grant) and its sign-in in
/// progress (state and PKCE verifier).
pub const DASHBOARD_COOKIE: &str = "__Host-gh_dash";
pub const DASHBOARD_FLOW_COOKIE: &str = "__Host-gh_dash_flow";
/// D48 (continued): the choice of organization pending in this browser.
pub const DASHBOARD_PICK_COOKIE: &str = "__Host-gh_dash_pick";
pub const MOCK_DASHBOARD_PICK_COOKIE: &str = "gh_dash_pick";
pub const MOCK_DASHBOARD_COOKIE: &str = "gh_dash";
pub const MOCK_DASHBOARD_FLOW_COOKIE: &str = "gh_dash_flow";
/// D56: the sign-in waiting for its second step.
pub const SECOND_STEP_COOKIE: &str = "__Host-gh_mfa";
pub const MOCK_SECOND_STEP_COOKIE: &str = "gh_mfa";

/// The pages' cookies: `__Host-` names with `Secure` over HTTPS (D26, D48),
/// plain names without `Secure` in the mock (D53).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cookies {
    secure: bool,
}

impl Cookies {
    pub fn of(st: &AppState) -> Self {
        Self {
            secure: !st.config.mock,
        }
    }

    pub fn csrf(self) -> &'static str {
        if self.secure {
            CSRF_COOKIE
        } else {
            MOCK_CSRF_COOKIE
        }
    }

    pub fn session(self) -> &'static str {
        if self.secure {
            SESSION_COOKIE
        } else {
            MOCK_SESSION_COOKIE
        }
    }

    pub fn dashboard(self) -> &'static str {
        if self.secure {
            DASHBOARD_COOKIE
        } else {
            MOCK_DASHBOARD_COOKIE
        }
    }

    pub fn dashboard_pick(self) -> &'static str {
        if self.secure {
            DASHBOARD_PICK_COOKIE
        } else {
            MOCK_DASHBOARD_PICK_COOKIE
        }
    }

    pub fn second_step(self) -> &'static str {
        if self.secure {
            SECOND_STEP_COOKIE
        } else {
            MOCK_SECOND_STEP_COOKIE
        }
    }

    pub fn dashboard_flow(self) -> &'static str {
        if self.secure {
            DASHBOARD_FLOW_COOKIE
        } else {
            MOCK_DASHBOARD_FLOW_COOKIE
        }
    }
}

/// The browser session cookie's value.
pub fn session_cookie(st: &AppState, headers: &HeaderMap) -> Option<String> {
    cookie(headers, Cookies::of(st).session())
}

/// Sets the browser session cookie (D26).
pub fn set_session_cookie(st: &AppState, res: &mut Response, value: &str, max_age: Option<i64>) {
    set_cookie(st, res, Cookies::of(st).session(), value, max_age);
}

/// The value of a cookie.
pub fn cookie(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.to_owned())
        .filter(|v| !v.is_empty())
}

/// `Set-Cookie` for a cookie that only this origin's HTTPS pages see (D26);
/// in the mock, which serves plain HTTP, without `Secure` (D53).
pub fn set_cookie(
    st: &AppState,
    res: &mut Response,
    name: &str,
    value: &str,
    max_age: Option<i64>,
) {
    let age = max_age
        .map(|a| format!("; Max-Age={a}"))
        .unwrap_or_default();
    let secure = if Cookies::of(st).secure {
        "; Secure"
    } else {
        ""
    };
    let v = format!("{name}={value}; Path=/{secure}; HttpOnly; SameSite=Lax{age}");
    if let Ok(v) = HeaderValue::from_str(&v) {
        res.headers_mut().append(header::SET_COOKIE, v);
    }
}

/// The CSRF token of this browser: the cookie's, or a new one to set.
pub fn csrf_token(st: &AppState, headers: &HeaderMap) -> (String, bool) {
    match cookie(headers, Cookies::of(st).csrf()) {
        Some(t) if t.len() >= 32 => (t, false),
        _ => (random::base62(256), true),
    }
}

/// Attaches the CSRF cookie when it is new.
pub fn with_csrf(st: &AppState, mut res: Response, token: &str, is_new: bool) -> Response {
    if is_new {
        set_cookie(st, &mut res, Cookies::of(st).csrf(), token, None);
    }
    res
}

/// Whether the form's token matches the cookie (double submit).
pub fn csrf_ok(st: &AppState, headers: &HeaderMap, form: &Form) -> bool {
    match (
        cookie(headers, Cookies::of(st).csrf()),
        form.value("csrf_token"),
    ) {
        (Some(c), Some(f)) if c.len() >= 32 => c.as_bytes().ct_eq(f.as_bytes()).into(),
        _ => false,
    }
}

/// What a page says when its form's CSRF token does not match.
pub const FORM_EXPIRED: &str =
    "The form expired or came from another site. Go back and sign in again.";

/// A posted form of a page, read and checked against the CSRF cookie: the
/// request's headers and the form, or the page that refuses it (400 for a
/// form that does not read, 403 with `expired` for a token that does not
/// match).
pub async fn checked_form(
    st: &AppState,
    request: axum::extract::Request,
    expired: &str,
) -> Result<(HeaderMap, Form), Box<Response>> {
    let (headers, form) = read_form(request).await.map_err(|m| {
        Box::new(message(
            st,
            StatusCode::BAD_REQUEST,
            "Something went wrong",
            m,
        ))
    })?;
    if !csrf_ok(st, &headers, &form) {
        return Err(Box::new(message(
            st,
            StatusCode::FORBIDDEN,
            "Please try again",
            expired,
        )));
    }
    Ok((headers, form))
}

/// A message page (errors included), with a way back.
pub fn message(st: &AppState, status: StatusCode, title: &str, message: &str) -> Response {
    message_leading_to(st, status, title, message, way_back(st, None))
}

/// [`message`] with its link chosen by the page (`back`), not by where the
/// person came from.
pub fn message_leading_to(
    st: &AppState,
    status: StatusCode,
    title: &str,
    message: &str,
    back: Back,
) -> Response {
    st.templates.page_with_status(
        status,
        "message.html",
        context! {
            title => title, message => message, back => minijinja::value::Serde(back),
            is_error => status.is_client_error() || status.is_server_error(),
        },
    )
}

/// A link back from a page: where the person came from when that is a page
/// of this server, else the documentation's home.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Back {
    pub href: String,
    pub label: &'static str,
}

/// The way back from the page being rendered: `asked` (a `return_to` the
/// page was given), else the `Referer` of the request, each only when it is
/// a page of `public_url` other than this one (and the sign-in page only
/// with its authorization request), else `/docs`.
pub fn way_back(st: &AppState, asked: Option<&str>) -> Back {
    let current = crate::http::middleware::PageRequest::current();
    let here = current.as_ref().map(|p| p.target.to_string());
    let referer = current
        .as_ref()
        .and_then(|p| p.referer.as_ref())
        .and_then(|v| v.to_str().ok());
    let found = asked
        .into_iter()
        .chain(referer)
        .filter_map(|c| local_path(&st.config.public_url, c))
        .find(|p| Some(p) != here.as_ref());
    match found.filter(|h| h != "/docs") {
        Some(href) => {
            let label = if href.starts_with("/oauth/authorize?") {
                "Back to sign in"
            } else {
                "Go back"
            };
            Back { href, label }
        }
        None => Back {
            href: "/docs".into(),
            label: "Go to the Gatehouse home page",
        },
    }
}

/// `candidate` as a path on this server (absolute on `public_url`, or a
/// path), when it is one a page may link back to: no other origin, no
/// control characters, not the bare sign-in path (it needs its query).
pub fn local_path(public_url: &str, candidate: &str) -> Option<String> {
    let path = candidate.strip_prefix(public_url).unwrap_or(candidate);
    let ok = path.starts_with('/')
        && !path.starts_with("//")
        && !path.contains('\\')
        && path.len() <= 4096
        && !path.chars().any(|c| c.is_control() || c.is_whitespace())
        && path != "/oauth/authorize"
        && !path.starts_with("/oauth/authorize/");
    ok.then(|| path.to_owned())
}

/// The browser a page request came from (D57: a session's `ip` and
/// `user_agent`), and the request as events name it (D54).
pub struct Browser {
    pub used: gatehouse_domain::session::BrowserUse,
    pub request: Option<gatehouse_domain::event::RequestRef>,
}

/// The browser use of a request from `peer` with `headers` (D57): the
/// client's address after D28's proxy rules and its `User-Agent`.
pub fn browser_use(
    st: &AppState,
    headers: &HeaderMap,
    peer: std::net::SocketAddr,
) -> gatehouse_domain::session::BrowserUse {
    let ip = client_ip(headers, peer, &st.config.trusted_proxies);
    let agent = headers
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok());
    gatehouse_domain::session::BrowserUse::new(ip.to_string(), agent)
}

impl Browser {
    /// From a request's parts: the client's address after D28's proxy
    /// rules, its `User-Agent`, its request id.
    pub fn of(st: &AppState, parts: &axum::http::request::Parts) -> Self {
        let peer = parts
            .extensions
            .get::<axum::extract::ConnectInfo<std::net::SocketAddr>>()
            .map(|c| c.0)
            .unwrap_or_else(|| std::net::SocketAddr::from(([0, 0, 0, 0], 0)));
        let request = parts
            .extensions
            .get::<crate::http::middleware::RequestCtx>()
            .map(|ctx| ctx.request_ref(None));
        Self {
            used: browser_use(st, &parts.headers, peer),
            request,
        }
    }
}

impl axum::extract::FromRequestParts<AppState> for Browser {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        st: &AppState,
    ) -> Result<Self, Self::Rejection> {
        Ok(Self::of(st, parts))
    }
}
