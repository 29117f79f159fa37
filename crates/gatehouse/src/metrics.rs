//! `/metrics` in Prometheus text format on the admin listener (D42): request
//! counts and latency by route template and status, tokens issued by grant,
//! revocations, rate-limit rejections, outbox backlog. Labels never carry
//! tenant data (route templates, not paths).

use std::sync::OnceLock;

use axum::Router;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};

/// The process-wide recorder (installed once, however many servers a test starts).
pub fn handle() -> &'static PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE.get_or_init(|| {
        let recorder = PrometheusBuilder::new()
            .set_buckets(&[
                0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
            ])
            .expect("static buckets")
            .build_recorder();
        let handle = recorder.handle();
        if metrics::set_global_recorder(recorder).is_err() {
            tracing::warn!("a metrics recorder was already installed");
        }
        handle
    })
}

pub fn router() -> Router {
    let h = handle();
    Router::new().route(
        "/metrics",
        get(move || async move {
            let mut res: Response = h.render().into_response();
            res.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
            );
            res
        }),
    )
}
