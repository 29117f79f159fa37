//! The outer layer every request passes: request ids (D7), the error
//! envelope for every error response (D6), security headers (D31), the
//! behind-proxy redirect, and one log line per request.

use std::time::Instant;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use gatehouse_domain::RequestId;
use tracing::Instrument;

use crate::AppState;
use crate::error::{ApiError, ErrorCode, PendingError, envelope};

/// Where the rate limiter leaves the `X-RateLimit-*` values for the response (D28).
#[derive(Clone, Default)]
pub struct RateSlot(std::sync::Arc<std::sync::Mutex<Option<gatehouse_auth::ratelimit::RateInfo>>>);

impl RateSlot {
    pub fn set(&self, info: gatehouse_auth::ratelimit::RateInfo) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = Some(info);
    }
    pub fn peek(&self) -> Option<gatehouse_auth::ratelimit::RateInfo> {
        *self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
    fn take(&self) -> Option<gatehouse_auth::ratelimit::RateInfo> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).take()
    }
}

/// The request's id, for `meta.request_id` and logs.
#[derive(Clone, Debug)]
pub struct RequestCtx {
    pub request_id: RequestId,
}

static X_REQUEST_ID: header::HeaderName = header::HeaderName::from_static("x-request-id");

/// D31: the `Strict-Transport-Security` of HTTPS answers (here and on the
/// envelopes `transport` writes for hyper's own errors).
pub const HSTS: &str = "max-age=31536000; includeSubDomains";

/// D31 (revised): whether HTTPS answers carry [`HSTS`] — not when
/// `public_url`'s host is `localhost`, a `*.localhost` name or a loopback
/// address (127.0.0.0/8, `::1`), where it would pin a developer's other
/// local servers to HTTPS. The server's configuration (`ServerConfig::hsts`,
/// `TransportConfig::hsts`) is set from this.
pub fn sends_hsts(public_url: &str) -> bool {
    let Some(host) = public_url.parse::<axum::http::Uri>().ok().and_then(|u| {
        u.host()
            .map(|h| h.trim_end_matches('.').to_ascii_lowercase())
    }) else {
        return true;
    };
    if host == "localhost" || host.ends_with(".localhost") {
        return false;
    }
    match host.trim_start_matches('[').trim_end_matches(']').parse() {
        Ok(std::net::IpAddr::V4(a)) => !a.is_loopback(),
        Ok(std::net::IpAddr::V6(a)) => {
            !(a.is_loopback() || a.to_ipv4_mapped().is_some_and(|v| v.is_loopback()))
        }
        Err(_) => true,
    }
}

/// What a page rendered while answering a request may show about it: the
/// `X-Request-ID` the response will carry (printed on error pages for
/// support), the page that led here (`Referer`) and the request's own path
/// and query (for a way back that does not loop).
#[derive(Clone, Debug)]
pub struct PageRequest {
    pub request_id: HeaderValue,
    pub referer: Option<HeaderValue>,
    pub target: axum::http::Uri,
}

tokio::task_local! {
    /// Set around every handler by [`outer`]; read by the page templates.
    pub static PAGE_REQUEST: PageRequest;
}

impl PageRequest {
    /// The current request's, when called inside a handler.
    pub fn current() -> Option<PageRequest> {
        PAGE_REQUEST.try_with(Clone::clone).ok()
    }
}

/// D7: a valid UUID from the client is echoed as-is; otherwise one is made.
fn request_id(req: &Request) -> (HeaderValue, RequestId) {
    if let Some(v) = req.headers().get(&X_REQUEST_ID)
        && let Some(u) = v.to_str().ok().and_then(|s| uuid::Uuid::try_parse(s).ok())
    {
        return (v.clone(), RequestId::from_uuid_bytes(u.as_bytes()));
    }
    let u = uuid::Uuid::new_v4();
    let text = u.hyphenated().to_string();
    (
        HeaderValue::from_str(&text).expect("a UUID is a valid header"),
        RequestId::from_uuid_bytes(u.as_bytes()),
    )
}

/// The request metrics of D42, with their handles registered once per
/// (route, method, status) rather than looked up by label strings on every
/// request.
#[derive(Default)]
pub struct RequestMetrics {
    hasher: std::hash::RandomState,
    /// Handles by a hash of their labels; a bucket holds every entry with
    /// that hash, so a collision only costs a comparison.
    handles: std::sync::RwLock<std::collections::HashMap<u64, Vec<Handles>>>,
}

struct Handles {
    route: Box<str>,
    method: &'static str,
    status: u16,
    requests: metrics::Counter,
    duration: metrics::Histogram,
}

impl RequestMetrics {
    fn record(&self, route: &str, method: &'static str, status: u16, seconds: f64) {
        use std::hash::BuildHasher;
        let key = self.hasher.hash_one((route, method, status));
        let hit = |h: &&Handles| &*h.route == route && h.method == method && h.status == status;
        {
            let map = self.handles.read().unwrap_or_else(|e| e.into_inner());
            if let Some(h) = map.get(&key).and_then(|b| b.iter().find(hit)) {
                h.requests.increment(1);
                h.duration.record(seconds);
                return;
            }
        }
        let labels = [
            ("route", route.to_owned()),
            ("method", method.to_owned()),
            ("status", status.to_string()),
        ];
        let h = Handles {
            route: route.into(),
            method,
            status,
            requests: metrics::counter!("gatehouse_http_requests_total", &labels),
            duration: metrics::histogram!("gatehouse_http_request_duration_seconds", &labels[..2]),
        };
        h.requests.increment(1);
        h.duration.record(seconds);
        let mut map = self.handles.write().unwrap_or_else(|e| e.into_inner());
        let bucket = map.entry(key).or_default();
        if !bucket.iter().any(|b| hit(&b)) {
            bucket.push(h);
        }
    }
}

/// The method as a metric label: the standard ones by name, anything else as
/// `OTHER`, so a client cannot grow the label set without bound.
fn method_label(m: &axum::http::Method) -> &'static str {
    match m.as_str() {
        "GET" => "GET",
        "POST" => "POST",
        "PUT" => "PUT",
        "PATCH" => "PATCH",
        "DELETE" => "DELETE",
        "HEAD" => "HEAD",
        "OPTIONS" => "OPTIONS",
        "TRACE" => "TRACE",
        "CONNECT" => "CONNECT",
        _ => "OTHER",
    }
}

pub async fn outer(State(state): State<AppState>, mut req: Request, next: Next) -> Response {
    let started = Instant::now();
    let (echo, rid) = request_id(&req);
    let method = req.method().clone();
    let uri = req.uri().clone();
    let path = uri.path();
    // Route templates only (never raw paths with ids): no tenant data in labels (D42).
    let route = req
        .extensions()
        .get::<axum::extract::MatchedPath>()
        .cloned();
    let span = tracing::info_span!("request", request_id = %rid.as_str(), %method, %path);

    let slot = RateSlot::default();
    let mut res = if let Some(err) = oversized_head(&req) {
        err.into_response()
    } else if state.config.behind_proxy && forwarded_plain_http(&req) {
        crate::redirect::to_https(&state.config.public_url, req.uri())
    } else {
        req.extensions_mut().insert(RequestCtx {
            request_id: rid.clone(),
        });
        req.extensions_mut().insert(slot.clone());
        let page = PageRequest {
            request_id: echo.clone(),
            referer: req.headers().get(header::REFERER).cloned(),
            target: uri.clone(),
        };
        PAGE_REQUEST
            .scope(page, next.run(req))
            .instrument(span.clone())
            .await
    };
    if let Some(info) = slot.take() {
        let h = res.headers_mut();
        h.insert("x-ratelimit-limit", HeaderValue::from(info.limit));
        h.insert("x-ratelimit-remaining", HeaderValue::from(info.remaining));
        h.insert("x-ratelimit-reset", HeaderValue::from(info.reset));
    }

    if let Some(PendingError(err)) = res.extensions_mut().remove::<PendingError>() {
        write_envelope(&mut res, &err, &state.config.public_url);
    } else if res.status() == StatusCode::METHOD_NOT_ALLOWED
        && !res.headers().contains_key(header::CONTENT_TYPE)
    {
        // axum's own 405 (with its `Allow` header): give it our envelope.
        let err = ApiError::new(
            ErrorCode::MethodNotAllowed,
            format!("{method} is not allowed on {path}"),
        );
        write_envelope(&mut res, &err, &state.config.public_url);
    }

    let h = res.headers_mut();
    h.insert(X_REQUEST_ID.clone(), echo);
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    if state.config.hsts {
        h.insert(
            header::STRICT_TRANSPORT_SECURITY,
            HeaderValue::from_static(HSTS),
        );
    }
    let status = res.status().as_u16();
    let elapsed = started.elapsed().as_secs_f64();
    let ms = elapsed * 1000.0;
    let route = route.as_ref().map_or("unmatched", |m| m.as_str());
    state
        .request_metrics
        .record(route, method_label(&method), status, elapsed);
    if status == 429 {
        metrics::counter!("gatehouse_rate_limit_rejections_total").increment(1);
    }
    span.in_scope(|| {
        if status >= 500 {
            tracing::warn!(status, ms, "request failed");
        } else {
            tracing::debug!(status, ms, "request");
        }
    });
    res
}

/// Longest request target (path and query) answered normally (D45).
pub const MAX_URI_BYTES: usize = 8 * 1024;
/// Most header bytes (names and values) answered normally (D45).
pub const MAX_HEADER_BYTES: usize = 64 * 1024;

/// D45: a request whose target or header section is over the limits gets
/// 414 / 431 with the envelope. (hyper refuses still larger HTTP/1.1 heads
/// itself; `transport` gives those answers the envelope too.)
fn oversized_head(req: &Request) -> Option<ApiError> {
    let uri = req.uri();
    let target = uri.path_and_query().map_or(0, |p| p.as_str().len());
    if target > MAX_URI_BYTES {
        return Some(ApiError::new(
            ErrorCode::UriTooLong,
            format!("the request target is {target} bytes; at most {MAX_URI_BYTES} are accepted"),
        ));
    }
    let headers = req.headers();
    let count = headers.len();
    let bytes: usize = headers
        .iter()
        .map(|(k, v)| k.as_str().len() + v.len())
        .sum();
    if count > crate::transport::MAX_HEADERS || bytes > MAX_HEADER_BYTES {
        return Some(ApiError::new(
            ErrorCode::HeadersTooLarge,
            format!(
                "the request has {count} header fields ({bytes} bytes); at most {} fields and {MAX_HEADER_BYTES} bytes are accepted",
                crate::transport::MAX_HEADERS
            ),
        ));
    }
    None
}

fn forwarded_plain_http(req: &Request) -> bool {
    req.headers()
        .get("x-forwarded-proto")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.split(',')
                .next()
                .unwrap_or("")
                .trim()
                .eq_ignore_ascii_case("http")
        })
}

pub(crate) fn write_envelope(res: &mut Response, err: &ApiError, public_url: &str) {
    *res.body_mut() = Body::from(envelope(err, public_url));
    res.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    res.headers_mut().remove(header::CONTENT_LENGTH);
}

/// Unknown paths (D6): 404 `RESOURCE_NOT_FOUND`.
pub async fn not_found(uri: axum::http::Uri) -> ApiError {
    ApiError::new(
        ErrorCode::ResourceNotFound,
        format!("no resource at {}", uri.path()),
    )
}

/// A panic in a handler becomes a 500 envelope; the cause is logged, not shown.
pub fn panic_response(cause: Box<dyn std::any::Any + Send + 'static>) -> Response {
    let text = cause
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| cause.downcast_ref::<&str>().copied())
        .unwrap_or("(no message)");
    tracing::error!(panic = text, "handler panicked");
    ApiError::internal().into_response()
}

#[cfg(test)]
mod tests {
    use super::sends_hsts;

    #[test]
    fn d31_revised_no_hsts_for_a_loopback_public_url() {
        for url in [
            "https://localhost:8443",
            "https://LOCALHOST",
            "https://localhost.:8443",
            "https://app.localhost",
            "https://a.b.localhost:9443/",
            "https://127.0.0.1:8443",
            "https://127.1.2.3",
            "https://[::1]:8443",
            "https://[::ffff:127.0.0.1]",
        ] {
            assert!(!sends_hsts(url), "{url}");
        }
        for url in [
            "https://gatehouse.example",
            "https://auth.example.com:8443",
            "https://localhost.example.com",
            "https://notlocalhost",
            "https://10.0.0.1",
            "https://[2001:db8::1]",
            "not a url",
        ] {
            assert!(sends_hsts(url), "{url}");
        }
    }
}
