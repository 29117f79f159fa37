//! `/v1/me` (D15): the profile of the user a token was issued for.

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::get;
use gatehouse_domain::UserId;

use crate::AppState;
use crate::error::{ApiError, ErrorCode};
use crate::extract::{Authorized, Body, ProfileRead, ProfileWrite};
use crate::middleware::RequestCtx;
use crate::requests::UpdateProfileRequest;
use crate::respond;
use crate::responses::UserResponse;

pub fn router() -> Router<AppState> {
    Router::new().route("/me", get(show).patch(update))
}

/// The token's user; a credential that acts for no user gets 404 (D15).
fn me<S>(auth: &Authorized<S>) -> Result<UserId, ApiError> {
    auth.caller.user().cloned().ok_or_else(|| {
        ApiError::new(
            ErrorCode::ResourceNotFound,
            "this credential acts for no user (client credentials or API key), so it has no profile",
        )
    })
}

#[utoipa::path(
    get,
    path = "/v1/me",
    operation_id = "getProfile",
    tag = "Profile",
    summary = "The profile of the user the token acts for",
    responses(
        (status = 200, description = "The user", body = crate::respond::Single<'static, crate::responses::UserResponse<'static>>),
        (status = 404, description = "The token acts for no user", body = crate::error::ErrorEnvelope<'static>),
    ),
    security(("bearer" = ["profile:read"]), ("oauth2" = ["profile:read"])),
)]
pub(crate) async fn show(
    auth: Authorized<ProfileRead>,
    ctx: RequestCtx,
    State(st): State<AppState>,
) -> Result<Response, ApiError> {
    let id = me(&auth)?;
    let user = st.app.profile(auth.org(), &id).await?;
    Ok(respond::single(
        &ctx,
        StatusCode::OK,
        &UserResponse::from(&user),
    ))
}

#[utoipa::path(
    patch,
    path = "/v1/me",
    operation_id = "updateProfile",
    tag = "Profile",
    summary = "Change your own name",
    request_body(content = crate::requests::UpdateProfileRequest, content_type = "application/json"),
    responses(
        (status = 200, description = "The user", body = crate::respond::Single<'static, crate::responses::UserResponse<'static>>),
        (status = 400, description = "Invalid fields", body = crate::error::ErrorEnvelope<'static>),
        (status = 404, description = "The token acts for no user", body = crate::error::ErrorEnvelope<'static>),
        (status = 413, description = "Body over 64 KiB", body = crate::error::ErrorEnvelope<'static>),
        (status = 415, description = "Not JSON", body = crate::error::ErrorEnvelope<'static>),
    ),
    security(("bearer" = ["profile:write"]), ("oauth2" = ["profile:write"])),
)]
pub(crate) async fn update(
    auth: Authorized<ProfileWrite>,
    ctx: RequestCtx,
    State(st): State<AppState>,
    Body(name): Body<UpdateProfileRequest>,
) -> Result<Response, ApiError> {
    let id = me(&auth)?;
    let user = st.app.update_profile(auth.org(), &id, name).await?;
    Ok(respond::single(
        &ctx,
        StatusCode::OK,
        &UserResponse::from(&user),
    ))
}
