//! `/v1/organization` (D46): the caller's organization, its plan and limits.

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::get;

use crate::api::extract::{AnyScope, Authorized};
use crate::api::responses::OrganizationResponse;
use crate::http::error::ApiError;
use crate::http::middleware::RequestCtx;
use crate::http::respond;
use crate::state::AppState;

pub fn router() -> Router<AppState> {
    Router::new().route("/organization", get(show))
}

#[utoipa::path(
    get,
    path = "/v1/organization",
    operation_id = "getOrganization",
    tag = "Organization",
    summary = "Your organization: its plan and rate limits (any valid token of it)",
    responses(
        (status = 200, description = "The organization", body = crate::http::respond::Single<'static, crate::api::responses::OrganizationResponse<'static>>),
    ),
    security(("bearer" = []), ("oauth2" = [])),
)]
pub(crate) async fn show(
    auth: Authorized<AnyScope>,
    ctx: RequestCtx,
    State(st): State<AppState>,
) -> Result<Response, ApiError> {
    let org = st.app.organization(auth.org()).await?;
    Ok(respond::single(
        &ctx,
        StatusCode::OK,
        &OrganizationResponse::from(&org),
    ))
}
