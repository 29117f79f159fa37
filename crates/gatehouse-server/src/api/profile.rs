//! `/v1/me` (D15): the profile of the user a token was issued for.

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::get;
use gatehouse_domain::UserId;

use crate::api::extract::{Authorized, Body, ProfileRead, ProfileWrite};
use crate::api::requests::UpdateProfileRequest;
use crate::api::responses::UserResponse;
use crate::http::error::{ApiError, ErrorCode};
use crate::http::middleware::RequestCtx;
use crate::http::respond;
use crate::state::AppState;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/me", get(show).patch(update))
        .route("/me/applications", get(list_applications))
        .route(
            "/me/applications/{app_id}",
            axum::routing::delete(forget_application),
        )
}

/// The token's user; a credential that acts for no user gets 404 (D15).
fn me<S>(auth: &Authorized<S>) -> Result<UserId, ApiError> {
    user_of(auth, "profile")
}

/// The user a `/v1/me…` request acts for; a credential that acts for no
/// user has no `what` (404, D15).
pub(crate) fn user_of<S>(auth: &Authorized<S>, what: &str) -> Result<UserId, ApiError> {
    auth.caller.user().cloned().ok_or_else(|| {
        ApiError::new(
            ErrorCode::ResourceNotFound,
            format!(
                "this credential acts for no user (client credentials or API key), so it has no {what}"
            ),
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
        (status = 200, description = "The user", body = crate::http::respond::Single<'static, crate::api::responses::UserResponse<'static>>),
        (status = 404, description = "The token acts for no user", body = crate::http::error::ErrorEnvelope<'static>),
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
    request_body(content = crate::api::requests::UpdateProfileRequest, content_type = "application/json"),
    responses(
        (status = 200, description = "The user", body = crate::http::respond::Single<'static, crate::api::responses::UserResponse<'static>>),
        (status = 400, description = "Invalid fields", body = crate::http::error::ErrorEnvelope<'static>),
        (status = 404, description = "The token acts for no user", body = crate::http::error::ErrorEnvelope<'static>),
        (status = 413, description = "Body over 64 KiB", body = crate::http::error::ErrorEnvelope<'static>),
        (status = 415, description = "Not JSON", body = crate::http::error::ErrorEnvelope<'static>),
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
    let user = st
        .app
        .update_profile(auth.org(), &id, name, &auth.origin(&ctx))
        .await?;
    Ok(respond::single(
        &ctx,
        StatusCode::OK,
        &UserResponse::from(&user),
    ))
}

/// D49: an application the person consented to, as `/v1/me/applications`
/// shows it.
#[derive(serde::Serialize, utoipa::ToSchema)]
pub struct ConsentedApplication {
    /// The application's `client_id`.
    #[schema(value_type = String)]
    id: String,
    name: String,
    /// The scopes the person allowed it.
    #[schema(value_type = Vec<String>)]
    scopes: gatehouse_domain::ScopeSet,
    #[schema(value_type = String, format = DateTime)]
    granted_at: gatehouse_domain::Timestamp,
    #[schema(value_type = String, format = DateTime)]
    last_used_at: gatehouse_domain::Timestamp,
}

impl From<&(gatehouse_app::Consent, gatehouse_domain::Client)> for ConsentedApplication {
    fn from((consent, client): &(gatehouse_app::Consent, gatehouse_domain::Client)) -> Self {
        Self {
            id: client.id.as_str().to_owned(),
            name: client.name.clone(),
            scopes: consent.scopes,
            granted_at: consent.created_at,
            last_used_at: consent.last_used_at,
        }
    }
}

#[utoipa::path(
    get,
    path = "/v1/me/applications",
    operation_id = "listMyApplications",
    tag = "Profile",
    summary = "The applications you allowed to act for you (remembered consents)",
    params(
        ("limit" = Option<u32>, Query, minimum = 1, description = "Page size (default 20, at most 100); values above 100 are clamped to 100."),
        ("offset" = Option<u64>, Query, description = "Items to skip."),
    ),
    responses(
        (status = 200, description = "Most recently used first", body = crate::http::respond::List<'static, ConsentedApplication>),
        (status = 400, description = "Invalid query parameter", body = crate::http::error::ErrorEnvelope<'static>),
        (status = 404, description = "The token acts for no user", body = crate::http::error::ErrorEnvelope<'static>),
    ),
    security(("bearer" = ["profile:read"]), ("oauth2" = ["profile:read"])),
)]
pub(crate) async fn list_applications(
    auth: Authorized<ProfileRead>,
    ctx: RequestCtx,
    State(st): State<AppState>,
    mut query: crate::api::extract::Query,
) -> Result<Response, ApiError> {
    let page = query.page();
    query.finish()?;
    let id = me(&auth)?;
    let all = st.app.my_applications(auth.org(), &id).await?;
    let total = all.len() as u64;
    let items = all
        .into_iter()
        .skip(page.offset.min(usize::MAX as u64) as usize)
        .take(page.limit as usize)
        .collect();
    let listing = gatehouse_domain::Listing { items, total };
    Ok(respond::list::<_, ConsentedApplication>(
        &ctx, &listing, page,
    ))
}

#[utoipa::path(
    delete,
    path = "/v1/me/applications/{app_id}",
    operation_id = "forgetMyApplication",
    tag = "Profile",
    summary = "Forget an application's consent and sign it out (its refresh tokens and access tokens stop working)",
    params(
        ("app_id" = String, Path, description = "The application's `client_id`."),
    ),
    responses(
        (status = 204, description = "Forgotten and revoked"),
        (status = 404, description = "No consent or session of yours with this application", body = crate::http::error::ErrorEnvelope<'static>),
    ),
    security(("bearer" = ["profile:write"]), ("oauth2" = ["profile:write"])),
)]
pub(crate) async fn forget_application(
    auth: Authorized<ProfileWrite>,
    ctx: RequestCtx,
    State(st): State<AppState>,
    crate::api::extract::Id(app): crate::api::extract::Id<gatehouse_domain::ClientId>,
) -> Result<Response, ApiError> {
    use axum::response::IntoResponse;
    let id = me(&auth)?;
    let origin = auth.origin(&ctx);
    match st
        .app
        .forget_my_application(auth.org(), &id, &app, &origin)
        .await
    {
        Ok(true) => Ok(StatusCode::NO_CONTENT.into_response()),
        Ok(false) => Err(ApiError::not_found(crate::http::error::Resource::Client)),
        Err(e) => {
            tracing::error!(cause = %e, "forgetting a consent failed");
            Err(ApiError::unavailable(1))
        }
    }
}
