//! The pieces of the outer layer every request passes
//! (`layers::outer`, at the top of the crate): request ids (D7), the request's context for
//! handlers and pages, writing the error envelope (D6), security headers
//! (D31), the limits on the request head (D45), the request metrics (D42),
//! the 404 of unknown paths and the 500 of a panic.

use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use gatehouse_domain::RequestId;

use super::error::{ApiError, ErrorCode, envelope};
use super::limits::{MAX_HEADER_BYTES, MAX_HEADERS, MAX_URI_BYTES};

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
    pub(crate) fn take(&self) -> Option<gatehouse_auth::ratelimit::RateInfo> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).take()
    }
}

/// Where the `/v1` extractor leaves who is asking, for the audit layer
/// (D58): a write refused after authentication (403, 409, 422) is recorded
/// with its actor. Present only on `/v1` writes.
#[derive(Clone, Default)]
pub struct AuditSlot(
    std::sync::Arc<
        std::sync::Mutex<Option<(gatehouse_domain::OrgId, gatehouse_domain::event::Actor)>>,
    >,
);

impl AuditSlot {
    pub fn set(&self, org: gatehouse_domain::OrgId, actor: gatehouse_domain::event::Actor) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = Some((org, actor));
    }
    pub(crate) fn take(&self) -> Option<(gatehouse_domain::OrgId, gatehouse_domain::event::Actor)> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).take()
    }
}

/// The request's id, for `meta.request_id` and logs.
#[derive(Clone, Debug)]
pub struct RequestCtx {
    pub request_id: RequestId,
    /// The client's address as D28 finds it (the peer's, or the one the
    /// trusted proxies name).
    pub client_ip: std::net::IpAddr,
    /// The `User-Agent`, as sent (a cheap handle on the header's bytes).
    pub user_agent: Option<HeaderValue>,
}

impl RequestCtx {
    /// D54's `request` of a change this request makes, with D58's
    /// `source` for the change's audit entry.
    pub fn request_ref(
        &self,
        idempotency_key: Option<String>,
    ) -> gatehouse_domain::event::RequestRef {
        gatehouse_domain::event::RequestRef {
            id: self.request_id.as_str().to_owned(),
            idempotency_key,
            source: Some(gatehouse_domain::event::Source::new(
                self.client_ip,
                self.user_agent.as_ref().and_then(|v| v.to_str().ok()),
            )),
        }
    }
}

pub(crate) static X_REQUEST_ID: header::HeaderName =
    header::HeaderName::from_static("x-request-id");

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
    /// Set around every handler by the outer layer; read by the page templates.
    pub static PAGE_REQUEST: PageRequest;
}

impl PageRequest {
    /// The current request's, when called inside a handler.
    pub fn current() -> Option<PageRequest> {
        PAGE_REQUEST.try_with(Clone::clone).ok()
    }
}

/// D7: a valid UUID from the client is echoed as-is; otherwise one is made.
pub(crate) fn request_id(req: &Request) -> (HeaderValue, RequestId) {
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
    pub(crate) fn record(&self, route: &str, method: &'static str, status: u16, seconds: f64) {
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
pub(crate) fn method_label(m: &axum::http::Method) -> &'static str {
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

/// D45: a request whose target or header section is over the limits gets
/// 414 / 431 with the envelope. (hyper refuses still larger HTTP/1.1 heads
/// itself; `transport` gives those answers the envelope too.)
pub(crate) fn oversized_head(req: &Request) -> Option<ApiError> {
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
    if count > MAX_HEADERS || bytes > MAX_HEADER_BYTES {
        return Some(ApiError::new(
            ErrorCode::HeadersTooLarge,
            format!(
                "the request has {count} header fields ({bytes} bytes); at most {} fields and {MAX_HEADER_BYTES} bytes are accepted",
                MAX_HEADERS
            ),
        ));
    }
    None
}

pub(crate) fn forwarded_plain_http(req: &Request) -> bool {
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

/// A layer that only writes pass through: `GET`, `HEAD` and `OPTIONS`
/// requests go straight to the inner service, the others through `L`.
/// For the `/v1` middleware that acts on writes alone (D50's idempotency,
/// D58's refused writes): an `axum::middleware::from_fn` layer costs every
/// request a boxed future and a clone of the inner service and the state,
/// which the authenticated read paid for nothing (issue 31 measured it).
#[derive(Clone)]
pub struct WritesOnly<L>(pub L);

impl<L, S> tower::Layer<S> for WritesOnly<L>
where
    L: tower::Layer<S>,
    S: Clone,
{
    type Service = WritesOnlyService<S, L::Service>;

    fn layer(&self, inner: S) -> Self::Service {
        WritesOnlyService {
            read: inner.clone(),
            write: self.0.layer(inner),
        }
    }
}

/// The service of [`WritesOnly`].
#[derive(Clone)]
pub struct WritesOnlyService<R, W> {
    read: R,
    write: W,
}

impl<R, W, B> tower::Service<axum::http::Request<B>> for WritesOnlyService<R, W>
where
    R: tower::Service<axum::http::Request<B>>,
    W: tower::Service<axum::http::Request<B>, Response = R::Response, Error = R::Error>,
{
    type Response = R::Response;
    type Error = R::Error;
    type Future = futures_util::future::Either<R::Future, W::Future>;

    fn poll_ready(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        match self.read.poll_ready(cx) {
            std::task::Poll::Ready(Ok(())) => self.write.poll_ready(cx),
            other => other,
        }
    }

    fn call(&mut self, req: axum::http::Request<B>) -> Self::Future {
        use axum::http::Method;
        if matches!(*req.method(), Method::GET | Method::HEAD | Method::OPTIONS) {
            futures_util::future::Either::Left(self.read.call(req))
        } else {
            futures_util::future::Either::Right(self.write.call(req))
        }
    }
}
