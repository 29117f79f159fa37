//! `/healthz` (process up) and `/readyz` (storage reachable, not shutting down) (D42).

use axum::Router;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use crate::http::error::ApiError;
use crate::state::AppState;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
}

#[utoipa::path(
    get,
    path = "/healthz",
    operation_id = "healthz",
    tag = "Operations",
    summary = "The process is up",
    responses(
        (status = 200, description = "Up", body = crate::http::schemas::Status),
    ),
)]
pub(crate) async fn healthz() -> Response {
    axum::Json(serde_json::json!({ "status": "ok" })).into_response()
}

#[utoipa::path(
    get,
    path = "/readyz",
    operation_id = "readyz",
    tag = "Operations",
    summary = "Storage answers and the server is not shutting down",
    responses(
        (status = 200, description = "Ready", body = crate::http::schemas::Status),
        (status = 503, description = "Not ready", body = crate::http::error::ErrorEnvelope<'static>),
    ),
)]
pub(crate) async fn readyz(State(st): State<AppState>) -> Result<Response, ApiError> {
    if st.is_shutting_down() {
        return Err(ApiError::unavailable(5));
    }
    st.app.ready().await.map_err(|e| {
        tracing::error!(cause = %e, "readiness check failed");
        ApiError::unavailable(5)
    })?;
    Ok(axum::Json(serde_json::json!({ "status": "ready" })).into_response())
}
