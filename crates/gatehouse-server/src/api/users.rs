//! `/v1/users` (interface.md §4.3, D10–D14).

use axum::Router;
use axum::extract::FromRequestParts;
use axum::extract::State;
use axum::http::StatusCode;
use axum::http::request::Parts;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use gatehouse_app::UserFilter;
use gatehouse_domain::{Role, SearchText, UserId, UserStatus};

use crate::api::extract::{Authorized, Body, Id, IdBody, Query, UsersRead, UsersWrite};
use crate::api::requests::{CreateUserRequest, Invitation, UpdateUserRequest};
use crate::api::responses::UserResponse;
use crate::http::error::ApiError;
use crate::http::middleware::RequestCtx;
use crate::http::respond;
use crate::state::AppState;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/users", get(list).post(create))
        .route("/users/{user_id}", get(show).patch(update).delete(remove))
        .route("/users/{user_id}/invitation", post(reinvite))
}

/// The list filters (interface.md §4.3), shared by v1 and v2.
pub(crate) fn user_filter(query: &mut Query) -> UserFilter {
    UserFilter {
        role: query.field("role", Role::parse),
        status: query.field("status", UserStatus::parse),
        q: query.field("q", SearchText::parse).flatten(),
    }
}

#[utoipa::path(
    get,
    path = "/v1/users",
    operation_id = "listUsers",
    tag = "Users",
    summary = "List the organization's users, newest first",
    params(
        ("limit" = Option<u32>, Query, minimum = 1, description = "Page size (default 20, at most 100); values above 100 are clamped to 100."),
        ("offset" = Option<u64>, Query, description = "Items to skip."),
        ("role" = Option<crate::http::schemas::RoleName>, Query, description = "Only users with this role."),
        ("status" = Option<crate::http::schemas::UserStatusName>, Query, description = "Only users with this status."),
        ("q" = Option<String>, Query, max_length = 200, description = "Search text."),
    ),
    responses(
        (status = 200, description = "A page of users", body = crate::http::respond::List<'static, crate::api::responses::UserResponse<'static>>),
        (status = 400, description = "Invalid query parameter", body = crate::http::error::ErrorEnvelope<'static>),
    ),
    security(("bearer" = ["users:read"]), ("oauth2" = ["users:read"])),
)]
pub(crate) async fn list(
    auth: Authorized<UsersRead>,
    ctx: RequestCtx,
    State(st): State<AppState>,
    mut query: Query,
) -> Result<Response, ApiError> {
    let page = query.page();
    let filter = user_filter(&mut query);
    query.finish()?;
    let listing = st.app.list_users(auth.org(), &filter, page).await?;
    Ok(respond::list::<_, UserResponse<'_>>(&ctx, &listing, page))
}

#[utoipa::path(
    get,
    path = "/v1/users/{user_id}",
    operation_id = "getUser",
    tag = "Users",
    summary = "Get a user",
    params(
        ("user_id" = String, Path, pattern = "^usr_[A-Za-z0-9]+$", description = "A user id (`usr_…`)."),
    ),
    responses(
        (status = 200, description = "The user", body = crate::http::respond::Single<'static, crate::api::responses::UserResponse<'static>>),
        (status = 404, description = "No such user in the organization", body = crate::http::error::ErrorEnvelope<'static>),
    ),
    security(("bearer" = ["users:read"]), ("oauth2" = ["users:read"])),
)]
pub(crate) async fn show(
    auth: Authorized<UsersRead>,
    ctx: RequestCtx,
    State(st): State<AppState>,
    Id(id): Id<UserId>,
) -> Result<Response, ApiError> {
    let user = st.app.get_user(auth.org(), &id).await?;
    Ok(respond::single(
        &ctx,
        StatusCode::OK,
        &UserResponse::from(&user),
    ))
}

#[utoipa::path(
    post,
    path = "/v1/users",
    operation_id = "createUser",
    tag = "Users",
    summary = "Invite a user (created as pending_invite; an invitation e-mail is sent)",
    request_body(content = crate::api::requests::CreateUserRequest, content_type = "application/json"),
    responses(
        (status = 201, description = "The new user; Location names it", body = crate::http::respond::Single<'static, crate::api::responses::UserResponse<'static>>),
        (status = 400, description = "Invalid fields", body = crate::http::error::ErrorEnvelope<'static>),
        (status = 409, description = "The e-mail exists in the organization", body = crate::http::error::ErrorEnvelope<'static>),
        (status = 413, description = "Body over 64 KiB", body = crate::http::error::ErrorEnvelope<'static>),
        (status = 415, description = "Not JSON", body = crate::http::error::ErrorEnvelope<'static>),
    ),
    security(("bearer" = ["users:write"]), ("oauth2" = ["users:write"])),
)]
pub(crate) async fn create(
    auth: Authorized<UsersWrite>,
    ctx: RequestCtx,
    State(st): State<AppState>,
    Body(new): Body<CreateUserRequest>,
) -> Result<Response, ApiError> {
    let Invitation { email, name, role } = new;
    let user = st
        .app
        .invite_user(auth.org(), email, name, role, &auth.origin(&ctx))
        .await?;
    let location = format!("{}/users/{}", st.config.base_url(), user.id);
    Ok(respond::created(
        &ctx,
        &location,
        &UserResponse::from(&user),
    ))
}

#[utoipa::path(
    patch,
    path = "/v1/users/{user_id}",
    operation_id = "updateUser",
    tag = "Users",
    summary = "Change a user's name, role or status (all or nothing)",
    params(
        ("user_id" = String, Path, pattern = "^usr_[A-Za-z0-9]+$", description = "A user id (`usr_…`)."),
    ),
    request_body(content = crate::api::requests::UpdateUserRequest, content_type = "application/json"),
    responses(
        (status = 200, description = "The updated user", body = crate::http::respond::Single<'static, crate::api::responses::UserResponse<'static>>),
        (status = 400, description = "Invalid fields", body = crate::http::error::ErrorEnvelope<'static>),
        (status = 404, description = "No such user", body = crate::http::error::ErrorEnvelope<'static>),
        (status = 413, description = "Body over 64 KiB", body = crate::http::error::ErrorEnvelope<'static>),
        (status = 415, description = "Not JSON", body = crate::http::error::ErrorEnvelope<'static>),
        (status = 422, description = "Forbidden state change or last admin", body = crate::http::error::ErrorEnvelope<'static>),
    ),
    security(("bearer" = ["users:write"]), ("oauth2" = ["users:write"])),
)]
pub(crate) async fn update(
    auth: Authorized<UsersWrite>,
    ctx: RequestCtx,
    State(st): State<AppState>,
    req: IdBody<UserId, UpdateUserRequest>,
) -> Result<Response, ApiError> {
    let user = st
        .app
        .update_user(auth.org(), &req.id, &req.body, &auth.origin(&ctx))
        .await?;
    Ok(respond::single(
        &ctx,
        StatusCode::OK,
        &UserResponse::from(&user),
    ))
}

/// A deletion: the user and `?transfer_to=usr_…`, the heir of their client
/// applications (D13). D9: the query's 400 comes before the id's 404 (a path
/// that cannot be decoded at all is a 404 first).
pub(crate) struct Deletion {
    id: UserId,
    transfer_to: Option<UserId>,
}

impl FromRequestParts<AppState> for Deletion {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, st: &AppState) -> Result<Self, ApiError> {
        let raw = Id::<UserId>::segment(parts, st).await?;
        let mut query = Query::from_request_parts(parts, st).await?;
        let transfer_to = query.field("transfer_to", |t| {
            UserId::parse(t).ok_or_else(|| "must be a user id (usr_…)".to_owned())
        });
        query.finish()?;
        let Id(id) = Id::parse(&raw)?;
        Ok(Self { id, transfer_to })
    }
}

#[utoipa::path(
    delete,
    path = "/v1/users/{user_id}",
    operation_id = "deleteUser",
    tag = "Users",
    summary = "Delete a user; their sessions and tokens stop working at once",
    params(
        ("user_id" = String, Path, pattern = "^usr_[A-Za-z0-9]+$", description = "A user id (`usr_…`)."),
        ("transfer_to" = Option<String>, Query, pattern = "^usr_[A-Za-z0-9]+$", description = "An active user of the organization who takes over the deleted user's client applications (D13)."),
    ),
    responses(
        (status = 204, description = "Deleted"),
        (status = 400, description = "Invalid transfer_to", body = crate::http::error::ErrorEnvelope<'static>),
        (status = 404, description = "No such user", body = crate::http::error::ErrorEnvelope<'static>),
        (status = 422, description = "Owned client applications or last admin", body = crate::http::error::ErrorEnvelope<'static>),
    ),
    security(("bearer" = ["users:write"]), ("oauth2" = ["users:write"])),
)]
pub(crate) async fn remove(
    auth: Authorized<UsersWrite>,
    ctx: RequestCtx,
    State(st): State<AppState>,
    Deletion { id, transfer_to }: Deletion,
) -> Result<Response, ApiError> {
    st.app
        .delete_user(auth.org(), &id, transfer_to.as_ref(), &auth.origin(&ctx))
        .await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// `POST /v1/users/{id}/invitation` (D19): a new invitation link replaces the old one.
#[utoipa::path(
    post,
    path = "/v1/users/{user_id}/invitation",
    operation_id = "resendInvitation",
    tag = "Users",
    summary = "Send a new invitation (the previous link stops working)",
    params(
        ("user_id" = String, Path, pattern = "^usr_[A-Za-z0-9]+$", description = "A user id (`usr_…`)."),
    ),
    responses(
        (status = 202, description = "A new invitation is queued", body = crate::http::respond::Single<'static, crate::api::responses::UserResponse<'static>>),
        (status = 404, description = "No such user", body = crate::http::error::ErrorEnvelope<'static>),
        (status = 422, description = "The user is not pending_invite", body = crate::http::error::ErrorEnvelope<'static>),
    ),
    security(("bearer" = ["users:write"]), ("oauth2" = ["users:write"])),
)]
pub(crate) async fn reinvite(
    auth: Authorized<UsersWrite>,
    ctx: RequestCtx,
    State(st): State<AppState>,
    Id(id): Id<UserId>,
) -> Result<Response, ApiError> {
    let user = st
        .app
        .reinvite_user(auth.org(), &id, &auth.origin(&ctx))
        .await?;
    Ok(respond::single(
        &ctx,
        StatusCode::ACCEPTED,
        &UserResponse::from(&user),
    ))
}
