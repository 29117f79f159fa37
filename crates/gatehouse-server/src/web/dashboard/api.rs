//! The dashboard's one way to act: requests to the `/v1` router, in
//! process, with the signed-in person's access token (D48). The dashboard
//! can do nothing the management API (D46) would not let that person do.

use std::net::SocketAddr;

use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::{HeaderValue, Method, Request, StatusCode, header};
use http_body_util::BodyExt;
use serde_json::Value;
use tower::ServiceExt;

use crate::state::AppState;

/// The largest answer the dashboard reads (a page of 100 items, a day of
/// usage buckets).
const MAX_BODY: usize = 4 * 1024 * 1024;

/// An answer of the API: its status and JSON body (`Null` when empty).
#[derive(Clone, Debug)]
pub struct Reply {
    pub status: StatusCode,
    pub body: Value,
}

impl Reply {
    pub fn ok(&self) -> bool {
        self.status.is_success()
    }

    /// `data` of a success.
    pub fn data(&self) -> &Value {
        &self.body["data"]
    }

    /// The error in words for the person: the envelope's message and the
    /// problems it lists (D6).
    pub fn problem(&self) -> Problem {
        let e = &self.body["error"];
        let code = e["code"].as_str().unwrap_or("").to_owned();
        let message = match e["message"].as_str() {
            Some(m) if !m.is_empty() => friendly(&code, m),
            _ => format!(
                "The request failed ({}).",
                self.status.canonical_reason().unwrap_or("error")
            ),
        };
        let details = e["details"]
            .as_array()
            .map(|d| {
                d.iter()
                    .map(|d| {
                        let field = d["field"].as_str().unwrap_or("");
                        let issue = d["issue"].as_str().unwrap_or("");
                        if field.is_empty() {
                            issue.to_owned()
                        } else {
                            format!("{field}: {issue}")
                        }
                    })
                    .collect()
            })
            .unwrap_or_default();
        Problem {
            code,
            message,
            details,
        }
    }
}

/// An API error as a page shows it.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Problem {
    pub code: String,
    pub message: String,
    pub details: Vec<String>,
}

/// Some codes read better with a sentence of the dashboard's own.
fn friendly(code: &str, message: &str) -> String {
    match code {
        "INSUFFICIENT_SCOPE" => format!("Your role does not allow this. ({message})"),
        "RATE_LIMITED" => format!(
            "Too many requests for your organization right now; try again in a minute. ({message})"
        ),
        _ => message.to_owned(),
    }
}

/// Sends one request to `/v1{path}` as the bearer of `token`.
pub async fn call(
    st: &AppState,
    peer: SocketAddr,
    token: &str,
    method: Method,
    path: &str,
    body: Option<&Value>,
) -> Reply {
    let mut builder = Request::builder()
        .method(method)
        .uri(format!("/v1{path}"))
        .header(header::ACCEPT, "application/json");
    if let Ok(v) = HeaderValue::from_str(&format!("Bearer {token}")) {
        builder = builder.header(header::AUTHORIZATION, v);
    }
    // D54: what the call changes tells the page request's id (the inner
    // request takes a UUID from X-Request-ID as its own, D7).
    if let Some(page) = crate::http::middleware::PageRequest::current() {
        builder = builder.header("x-request-id", page.request_id);
    }
    let body = match body {
        Some(b) => {
            builder = builder.header(header::CONTENT_TYPE, "application/json");
            Body::from(serde_json::to_vec(b).unwrap_or_default())
        }
        None => Body::empty(),
    };
    let Ok(mut req) = builder.body(body) else {
        return unavailable();
    };
    req.extensions_mut().insert(ConnectInfo(peer));
    let Ok(res) = crate::api::v1_service(st).oneshot(req).await;
    let status = res.status();
    let bytes = match http_body_util::Limited::new(res.into_body(), MAX_BODY)
        .collect()
        .await
    {
        Ok(c) => c.to_bytes(),
        Err(_) => return unavailable(),
    };
    let body = if bytes.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&bytes).unwrap_or(Value::Null)
    };
    Reply { status, body }
}

fn unavailable() -> Reply {
    Reply {
        status: StatusCode::SERVICE_UNAVAILABLE,
        body: serde_json::json!({"error": {"code": "SERVICE_UNAVAILABLE",
            "message": "The service is temporarily unavailable. Try again in a moment."}}),
    }
}

impl From<Problem> for minijinja::Value {
    fn from(p: Problem) -> Self {
        minijinja::Value::from(minijinja::value::Serde(p))
    }
}
