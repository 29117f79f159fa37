//! Helpers for the server-rendered pages: cookies, CSRF (double submit), form
//! bodies, the peer address.

use std::collections::HashMap;

use axum::extract::Request;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::Response;
use gatehouse_domain::random;
use minijinja::context;
use subtle::ConstantTimeEq;

use crate::AppState;
use crate::extract::MAX_BODY;

pub const CSRF_COOKIE: &str = "__Host-gh_csrf";
pub const SESSION_COOKIE: &str = "__Host-gh_session";

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

/// `Set-Cookie` for a cookie that only this origin's HTTPS pages see (D26).
pub fn set_cookie(res: &mut Response, name: &str, value: &str, max_age: Option<i64>) {
    let age = max_age
        .map(|a| format!("; Max-Age={a}"))
        .unwrap_or_default();
    let v = format!("{name}={value}; Path=/; Secure; HttpOnly; SameSite=Lax{age}");
    if let Ok(v) = HeaderValue::from_str(&v) {
        res.headers_mut().append(header::SET_COOKIE, v);
    }
}

/// The CSRF token of this browser: the cookie's, or a new one to set.
pub fn csrf_token(headers: &HeaderMap) -> (String, bool) {
    match cookie(headers, CSRF_COOKIE) {
        Some(t) if t.len() >= 32 => (t, false),
        _ => (random::base62(256), true),
    }
}

/// Attaches the CSRF cookie when it is new.
pub fn with_csrf(mut res: Response, token: &str, is_new: bool) -> Response {
    if is_new {
        set_cookie(&mut res, CSRF_COOKIE, token, None);
    }
    res
}

/// Whether the form's token matches the cookie (double submit).
pub fn csrf_ok(headers: &HeaderMap, form: &HashMap<String, String>) -> bool {
    match (cookie(headers, CSRF_COOKIE), form.get("csrf_token")) {
        (Some(c), Some(f)) if c.len() >= 32 => c.as_bytes().ct_eq(f.as_bytes()).into(),
        _ => false,
    }
}

/// A form body (`application/x-www-form-urlencoded`), at most 64 KiB.
pub async fn read_form(req: Request) -> Result<(HeaderMap, HashMap<String, String>), &'static str> {
    let headers = req.headers().clone();
    let is_form = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.split(';').next().unwrap_or("").trim())
        .is_some_and(|m| m.eq_ignore_ascii_case("application/x-www-form-urlencoded"));
    if !is_form {
        return Err("The form was not sent as a form.");
    }
    let bytes = axum::body::to_bytes(req.into_body(), MAX_BODY)
        .await
        .map_err(|e| match crate::transport::BodyProblem::of(&e) {
            Some(crate::transport::BodyProblem::Incomplete) => "The form was not received in full.",
            _ => "The form is too large.",
        })?;
    let pairs: Vec<(String, String)> =
        serde_urlencoded::from_bytes(&bytes).map_err(|_| "The form cannot be read.")?;
    let mut form = HashMap::with_capacity(pairs.len());
    for (k, v) in pairs {
        // D45: a field given twice is ambiguous, never guessed at.
        if form.insert(k, v).is_some() {
            return Err("The form has a field twice.");
        }
    }
    Ok((headers, form))
}

/// A message page (errors included).
pub fn message(st: &AppState, status: StatusCode, title: &str, message: &str) -> Response {
    st.templates.page_with_status(
        status,
        "message.html",
        context! { title => title, message => message, is_error => status.is_client_error() || status.is_server_error() },
    )
}

/// The client's address: the peer's, or — when the peer is a trusted proxy —
/// the last untrusted address of `X-Forwarded-For` (D28).
pub fn client_ip(
    headers: &HeaderMap,
    peer: std::net::SocketAddr,
    trusted: &[std::net::IpAddr],
) -> std::net::IpAddr {
    let peer = peer.ip();
    if !trusted.contains(&peer) {
        return peer;
    }
    let forwarded: Vec<std::net::IpAddr> = headers
        .get_all("x-forwarded-for")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    forwarded
        .into_iter()
        .rev()
        .find(|ip| !trusted.contains(ip))
        .unwrap_or(peer)
}
