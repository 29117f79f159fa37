//! Second factors and the organization's policy (D56): a person's own
//! factors under `/v1/me/mfa`, an admin's view and reset under
//! `/v1/users/{id}/mfa`, and `/v1/organization/security`.
//!
//! Factors are added and removed on the account page only (it asks for a
//! recent sign-in and shows secrets once); the API lists them.

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use gatehouse_domain::{Scope, UserId};

use crate::api::extract::{AnyScope, Authorized, Body, Id, ProfileRead, UsersWrite};
use crate::api::requests::UpdateSecurityRequest;
use crate::api::responses::{SecurityResponse, mfa_items};
use crate::http::error::ApiError;
use crate::http::middleware::RequestCtx;
use crate::http::respond;
use crate::state::AppState;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/me/mfa", get(list_mine))
        .route("/users/{user_id}/mfa", get(list_users).delete(reset_users))
        .route(
            "/organization/security",
            get(show_policy).patch(update_policy),
        )
}

#[utoipa::path(
    get,
    path = "/v1/me/mfa",
    operation_id = "listMyMfa",
    tag = "Profile",
    summary = "Your second factors, then (last) how many recovery codes are left",
    responses(
        (status = 200, description = "Factors by creation; the recovery codes item last when you have codes", body = crate::http::respond::Single<'static, Vec<crate::api::responses::MfaItem<'static>>>),
        (status = 404, description = "The token acts for no user", body = crate::http::error::ErrorEnvelope<'static>),
    ),
    security(("bearer" = ["profile:read"]), ("oauth2" = ["profile:read"])),
)]
pub(crate) async fn list_mine(
    auth: Authorized<ProfileRead>,
    ctx: RequestCtx,
    State(st): State<AppState>,
) -> Result<Response, ApiError> {
    let id = crate::api::profile::user_of(&auth, "second factors")?;
    let factors = st.app.mfa_of(auth.org(), &id).await?;
    Ok(respond::single(&ctx, StatusCode::OK, &mfa_items(&factors)))
}

#[utoipa::path(
    get,
    path = "/v1/users/{user_id}/mfa",
    operation_id = "listUserMfa",
    tag = "Users",
    summary = "A person's second factors, as they see them",
    params(
        ("user_id" = String, Path, pattern = "^usr_[A-Za-z0-9]+$", description = "A user id (`usr_…`)."),
    ),
    responses(
        (status = 200, description = "Factors, then the recovery codes item", body = crate::http::respond::Single<'static, Vec<crate::api::responses::MfaItem<'static>>>),
        (status = 404, description = "No such user", body = crate::http::error::ErrorEnvelope<'static>),
    ),
    security(("bearer" = ["users:write"]), ("oauth2" = ["users:write"])),
)]
pub(crate) async fn list_users(
    auth: Authorized<UsersWrite>,
    ctx: RequestCtx,
    State(st): State<AppState>,
    Id(user): Id<UserId>,
) -> Result<Response, ApiError> {
    let factors = st.app.mfa_of(auth.org(), &user).await?;
    Ok(respond::single(&ctx, StatusCode::OK, &mfa_items(&factors)))
}

#[utoipa::path(
    delete,
    path = "/v1/users/{user_id}/mfa",
    operation_id = "resetUserMfa",
    tag = "Users",
    summary = "Remove every second factor and recovery code of a person, end their sessions and revoke their tokens",
    params(
        ("user_id" = String, Path, pattern = "^usr_[A-Za-z0-9]+$", description = "A user id (`usr_…`)."),
    ),
    responses(
        (status = 204, description = "Reset (also when there was nothing to remove); the person is e-mailed"),
        (status = 404, description = "No such user", body = crate::http::error::ErrorEnvelope<'static>),
    ),
    security(("bearer" = ["users:write"]), ("oauth2" = ["users:write"])),
)]
pub(crate) async fn reset_users(
    auth: Authorized<UsersWrite>,
    ctx: RequestCtx,
    State(st): State<AppState>,
    Id(user): Id<UserId>,
) -> Result<Response, ApiError> {
    st.app
        .reset_mfa(auth.org(), &user, &auth.origin(&ctx))
        .await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

#[utoipa::path(
    get,
    path = "/v1/organization/security",
    operation_id = "getSecurityPolicy",
    tag = "Organization",
    summary = "Your organization's second-factor policy (any valid token of it)",
    responses(
        (status = 200, description = "The policy", body = crate::http::respond::Single<'static, SecurityResponse>),
    ),
    security(("bearer" = []), ("oauth2" = [])),
)]
pub(crate) async fn show_policy(
    auth: Authorized<AnyScope>,
    ctx: RequestCtx,
    State(st): State<AppState>,
) -> Result<Response, ApiError> {
    let policy = st.app.security_policy(auth.org()).await?;
    Ok(respond::single(
        &ctx,
        StatusCode::OK,
        &SecurityResponse::from(&policy),
    ))
}

#[utoipa::path(
    patch,
    path = "/v1/organization/security",
    operation_id = "updateSecurityPolicy",
    tag = "Organization",
    summary = "Change the second-factor policy (users:write on a person's token, admin on an organization-wide credential)",
    request_body(content = UpdateSecurityRequest, content_type = "application/json"),
    responses(
        (status = 200, description = "The policy as changed", body = crate::http::respond::Single<'static, SecurityResponse>),
        (status = 400, description = "Invalid fields", body = crate::http::error::ErrorEnvelope<'static>),
        (status = 403, description = "`INSUFFICIENT_SCOPE`", body = crate::http::error::ErrorEnvelope<'static>),
        (status = 413, description = "Body over 64 KiB", body = crate::http::error::ErrorEnvelope<'static>),
        (status = 415, description = "Not JSON", body = crate::http::error::ErrorEnvelope<'static>),
    ),
    security(("bearer" = ["users:write"]), ("oauth2" = ["users:write"]), ("bearer" = ["admin"])),
)]
pub(crate) async fn update_policy(
    auth: Authorized<AnyScope>,
    ctx: RequestCtx,
    State(st): State<AppState>,
    request: axum::extract::Request,
) -> Result<Response, ApiError> {
    // D56: a person's token needs `users:write` (only admins hold it,
    // D29); an organization-wide credential needs `admin`.
    let needed = if auth.caller.user().is_some() {
        Scope::UsersWrite
    } else {
        Scope::Admin
    };
    if !auth.caller.scopes().satisfies(needed) {
        return Err(crate::api::extract::insufficient_scope(needed));
    }
    // The body is read only after the scope is known to suffice (D9's
    // order: 403 before 400).
    let Body(patch) =
        <Body<UpdateSecurityRequest> as axum::extract::FromRequest<AppState>>::from_request(
            request, &st,
        )
        .await?;
    let policy = st
        .app
        .update_security_policy(auth.org(), patch, &auth.origin(&ctx))
        .await?;
    Ok(respond::single(
        &ctx,
        StatusCode::OK,
        &SecurityResponse::from(&policy),
    ))
}
