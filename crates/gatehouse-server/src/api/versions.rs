//! D32: every `/v0/…` path is gone (410) and names its v1 successor.

use axum::Router;
use axum::extract::State;
use axum::http::{Uri, header};
use axum::routing::any;

use crate::http::error::{ApiError, ErrorCode};
use crate::state::AppState;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v0", any(sunset))
        .route("/v0/{*rest}", any(sunset))
}

#[utoipa::path(
    get,
    path = "/v0/{path}",
    operation_id = "v0Sunset",
    tag = "Versions",
    summary = "API v0 was removed on 2026-09-01",
    params(
        ("path" = String, Path, description = "Any path under /v0."),
    ),
    responses(
        (status = 410, description = "Gone; Link names the v1 successor", body = crate::http::error::ErrorEnvelope<'static>),
    ),
)]
pub(crate) async fn sunset(State(st): State<AppState>, uri: Uri) -> ApiError {
    let rest = uri.path().strip_prefix("/v0").unwrap_or("");
    let query = uri.query().map(|q| format!("?{q}")).unwrap_or_default();
    let successor = format!("{}/v1{rest}{query}", st.config.public_url);
    ApiError::new(
        ErrorCode::ApiVersionSunset,
        "API v0 was removed on 2026-09-01; use v1",
    )
    .with_header(
        header::HeaderName::from_static("sunset"),
        "Tue, 01 Sep 2026 00:00:00 GMT",
    )
    .with_header(
        header::LINK,
        &format!("<{successor}>; rel=\"successor-version\""),
    )
}
