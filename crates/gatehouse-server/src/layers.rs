//! The layers every route gets ([`with_layers`]): the 404 fallback, panic
//! capture, and the outer middleware ([`outer`]): request ids (D7), the
//! error envelope for every error response (D6), security headers (D31),
//! the behind-proxy redirect, and one log line per request. The pieces it
//! is made of are in [`crate::http::middleware`]; this is where they meet
//! the server's settings.

use std::time::Instant;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use tracing::Instrument;

use crate::http::error::{ApiError, ErrorCode, PendingError};
use crate::http::middleware::{
    self, HSTS, PAGE_REQUEST, PageRequest, RateSlot, RequestCtx, X_REQUEST_ID,
    forwarded_plain_http, method_label, oversized_head, request_id, write_envelope,
};
use crate::state::AppState;

/// The access log's target: `GATEHOUSE_LOG=info,gatehouse::access=off`
/// silences it as `--access-log false` does.
pub const ACCESS_LOG: &str = "gatehouse::access";

/// The layers every route gets: the 404 fallback, panic capture, and the
/// outer middleware (request ids, error envelopes, security headers).
pub fn with_layers(routes: Router<AppState>, state: AppState) -> Router {
    routes
        .fallback(middleware::not_found)
        .layer(tower_http::catch_panic::CatchPanicLayer::custom(
            middleware::panic_response,
        ))
        .layer(axum::middleware::from_fn_with_state(state.clone(), outer))
        .with_state(state)
}

/// The outer middleware (see the module's documentation).
pub async fn outer(State(state): State<AppState>, mut req: Request, next: Next) -> Response {
    let started = Instant::now();
    let (echo, rid) = request_id(&req);
    let method = req.method().clone();
    let uri = req.uri().clone();
    // D58: no link token in the log.
    let path = crate::web::links::path_for_log(uri.path());
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
        crate::http::redirect::to_https(&state.config.public_url, req.uri())
    } else {
        let peer = req
            .extensions()
            .get::<axum::extract::ConnectInfo<std::net::SocketAddr>>()
            .map_or(std::net::SocketAddr::from(([0, 0, 0, 0], 0)), |c| c.0);
        let client_ip =
            crate::http::middleware::client_ip(req.headers(), peer, &state.config.trusted_proxies);
        let user_agent = req.headers().get(axum::http::header::USER_AGENT).cloned();
        req.extensions_mut().insert(RequestCtx {
            request_id: rid.clone(),
            client_ip,
            user_agent,
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
        } else if state.config.access_log {
            // Issue 32: the access log, one line per request. The path has
            // no query (codes, states and tokens travel there) and no link
            // token (D58); the span adds the request id, method and path.
            tracing::info!(target: ACCESS_LOG, status, ms, "request");
        } else {
            tracing::debug!(status, ms, "request");
        }
    });
    res
}
