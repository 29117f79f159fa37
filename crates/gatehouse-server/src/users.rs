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

use crate::AppState;
use crate::error::ApiError;
use crate::extract::{Authorized, Body, Id, IdBody, Query, UsersRead, UsersWrite};
use crate::middleware::RequestCtx;
use crate::requests::{CreateUserRequest, Invitation, UpdateUserRequest};
use crate::respond;
use crate::responses::UserResponse;

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

async fn list(
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

async fn show(
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

async fn create(
    auth: Authorized<UsersWrite>,
    ctx: RequestCtx,
    State(st): State<AppState>,
    Body(new): Body<CreateUserRequest>,
) -> Result<Response, ApiError> {
    let Invitation { email, name, role } = new;
    let user = st.app.invite_user(auth.org(), email, name, role).await?;
    let location = format!("{}/users/{}", st.config.base_url(), user.id);
    Ok(respond::created(
        &ctx,
        &location,
        &UserResponse::from(&user),
    ))
}

async fn update(
    auth: Authorized<UsersWrite>,
    ctx: RequestCtx,
    State(st): State<AppState>,
    req: IdBody<UserId, UpdateUserRequest>,
) -> Result<Response, ApiError> {
    let user = st.app.update_user(auth.org(), &req.id, &req.body).await?;
    Ok(respond::single(
        &ctx,
        StatusCode::OK,
        &UserResponse::from(&user),
    ))
}

/// `?transfer_to=usr_…` of a deletion (D13).
struct TransferTo(Option<UserId>);

impl FromRequestParts<AppState> for TransferTo {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, st: &AppState) -> Result<Self, ApiError> {
        let mut query = Query::from_request_parts(parts, st).await?;
        let to = query.field("transfer_to", |t| {
            UserId::parse(t).ok_or_else(|| "must be a user id (usr_…)".to_owned())
        });
        query.finish()?;
        Ok(Self(to))
    }
}

async fn remove(
    auth: Authorized<UsersWrite>,
    State(st): State<AppState>,
    // D9: the query's 400 before the id's 404.
    TransferTo(transfer_to): TransferTo,
    Id(id): Id<UserId>,
) -> Result<Response, ApiError> {
    st.app
        .delete_user(auth.org(), &id, transfer_to.as_ref())
        .await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// `POST /v1/users/{id}/invitation` (D19): a new invitation link replaces the old one.
async fn reinvite(
    auth: Authorized<UsersWrite>,
    ctx: RequestCtx,
    State(st): State<AppState>,
    Id(id): Id<UserId>,
) -> Result<Response, ApiError> {
    let user = st.app.reinvite_user(auth.org(), &id).await?;
    Ok(respond::single(
        &ctx,
        StatusCode::ACCEPTED,
        &UserResponse::from(&user),
    ))
}
