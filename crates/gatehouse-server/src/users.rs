//! `/v1/users` (interface.md §4.3, D10–D14).

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use gatehouse_app::UserFilter;
use gatehouse_domain::user::UserPatch;
use gatehouse_domain::{Email, FieldIssue, Name, Role, SearchText, UserId, UserStatus};

use crate::AppState;
use crate::error::ApiError;
use crate::extract::{Authorized, Fields, IdPath, JsonObject, Query, UsersRead, UsersWrite};
use crate::middleware::RequestCtx;
use crate::respond;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/users", get(list).post(create))
        .route("/users/{user_id}", get(show).patch(update).delete(remove))
        .route("/users/{user_id}/invitation", post(reinvite))
}

fn user_id(raw: &str) -> Result<UserId, ApiError> {
    UserId::parse(raw).ok_or_else(|| ApiError::not_found("user"))
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
    Ok(respond::list(&ctx, &listing, page))
}

async fn show(
    auth: Authorized<UsersRead>,
    ctx: RequestCtx,
    State(st): State<AppState>,
    IdPath(raw): IdPath,
) -> Result<Response, ApiError> {
    let id = user_id(&raw)?;
    let user = st.app.get_user(auth.org(), &id).await?;
    Ok(respond::single(&ctx, StatusCode::OK, &user))
}

async fn create(
    auth: Authorized<UsersWrite>,
    ctx: RequestCtx,
    State(st): State<AppState>,
    body: JsonObject,
) -> Result<Response, ApiError> {
    let mut f = Fields::new(body, &["email", "name", "role"]);
    let email = f.required_str("email", Email::parse);
    let name = f.required_str("name", Name::parse);
    let role = f.required_str("role", Role::parse);
    f.finish()?;
    let (Some(email), Some(name), Some(role)) = (email, name, role) else {
        return Err(ApiError::internal());
    };
    let user = st.app.invite_user(auth.org(), email, name, role).await?;
    let location = format!("{}/users/{}", st.config.base_url(), user.id);
    Ok(respond::created(&ctx, &location, &user))
}

async fn update(
    auth: Authorized<UsersWrite>,
    ctx: RequestCtx,
    State(st): State<AppState>,
    IdPath(raw): IdPath,
    body: JsonObject,
) -> Result<Response, ApiError> {
    let mut f = Fields::new(body, &["name", "role", "status"]);
    let patch = UserPatch {
        name: f.optional_str("name", Name::parse),
        role: f.optional_str("role", Role::parse),
        status: f.optional_str("status", UserStatus::parse_patch),
    };
    f.finish()?;
    let id = user_id(&raw)?;
    let user = st.app.update_user(auth.org(), &id, &patch).await?;
    Ok(respond::single(&ctx, StatusCode::OK, &user))
}

async fn remove(
    auth: Authorized<UsersWrite>,
    State(st): State<AppState>,
    IdPath(raw): IdPath,
    mut query: Query,
) -> Result<Response, ApiError> {
    let transfer_to = match query.get("transfer_to") {
        None => None,
        Some(t) => match UserId::parse(t) {
            Some(u) => Some(u),
            None => {
                query
                    .issues()
                    .push(FieldIssue::new("transfer_to", "must be a user id (usr_…)"));
                None
            }
        },
    };
    query.finish()?;
    let id = user_id(&raw)?;
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
    IdPath(raw): IdPath,
) -> Result<Response, ApiError> {
    let id = user_id(&raw)?;
    let user = st.app.reinvite_user(auth.org(), &id).await?;
    Ok(respond::single(&ctx, StatusCode::ACCEPTED, &user))
}
