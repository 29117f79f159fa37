//! `/v1/users` (interface.md §4.3, D10–D14).

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use gatehouse_auth::AuthService;
use gatehouse_domain::OrgId;
use gatehouse_domain::user::UserPatch;
use gatehouse_domain::{
    Email, FieldIssue, Name, NewUser, Role, SearchText, Timestamp, UserId, UserStatus,
};
use gatehouse_store::{LinkKind, NewLink, UserFilter};

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
    let listing = st
        .store
        .list_users(auth.org(), &filter, page)
        .await
        .map_err(|e| ApiError::from_store(e, "user"))?;
    Ok(respond::list(&ctx, &listing, page))
}

async fn show(
    auth: Authorized<UsersRead>,
    ctx: RequestCtx,
    State(st): State<AppState>,
    IdPath(raw): IdPath,
) -> Result<Response, ApiError> {
    let id = user_id(&raw)?;
    let user = st
        .store
        .get_user(auth.org(), &id)
        .await
        .map_err(|e| ApiError::from_store(e, "user"))?;
    let user = user.ok_or_else(|| ApiError::not_found("user"))?;
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
    // D11: a new user waits for the invitation to be accepted; D30: the
    // invitation e-mail is queued in the same transaction as the user.
    let link = invitation(&st, auth.org(), &email, &name, role).await?;
    let new = NewUser::invited(email, name, role, Timestamp::now());
    let user = st
        .store
        .insert_user_with_link(auth.org(), &new, Some(&link))
        .await
        .map_err(|e| ApiError::from_store(e, "user"))?;
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
    let now = Timestamp::now();
    let change = st
        .store
        .update_user(auth.org(), &id, &patch, now)
        .await
        .map_err(|e| ApiError::from_store(e, "user"))?;
    if change.revokes_tokens {
        // D11, D29: the next request with the user's tokens is refused.
        st.auth.note_user_revoked(&id, now);
    }
    Ok(respond::single(&ctx, StatusCode::OK, &change.user))
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
    let now = Timestamp::now();
    st.store
        .delete_user_at(auth.org(), &id, transfer_to.as_ref(), now)
        .await
        .map_err(|e| ApiError::from_store(e, "user"))?;
    // D13: every token of the user stops working at once.
    st.auth.note_user_revoked(&id, now);
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// The invitation link and its e-mail (D11, D30).
async fn invitation(
    st: &AppState,
    org: &OrgId,
    email: &Email,
    name: &Name,
    role: Role,
) -> Result<NewLink, ApiError> {
    let org_name = st
        .store
        .get_org(org)
        .await
        .map_err(|e| ApiError::from_store(e, "organization"))?
        .map(|o| o.name)
        .unwrap_or_else(|| "your organization".into());
    let base = st.config.public_url.clone();
    let (_, link) = AuthService::new_link(
        LinkKind::Invitation,
        email.as_str(),
        format!("You are invited to {org_name}"),
        |token| {
            format!(
                "Hello {name},\n\nYou have been invited to join {org_name} as {role}.\nChoose your password here to activate your account:\n\n{base}/invite/{token}\n\nThe link works once and expires in 7 days.\n",
                role = role.as_str()
            )
        },
    );
    Ok(link)
}

/// `POST /v1/users/{id}/invitation` (D19): a new invitation link replaces the old one.
async fn reinvite(
    auth: Authorized<UsersWrite>,
    ctx: RequestCtx,
    State(st): State<AppState>,
    IdPath(raw): IdPath,
) -> Result<Response, ApiError> {
    let id = user_id(&raw)?;
    let user = st
        .store
        .get_user(auth.org(), &id)
        .await
        .map_err(|e| ApiError::from_store(e, "user"))?
        .ok_or_else(|| ApiError::not_found("user"))?;
    let link = invitation(&st, auth.org(), &user.email, &user.name, user.role).await?;
    st.store
        .reissue_invitation(auth.org(), &id, &link)
        .await
        .map_err(|e| ApiError::from_store(e, "user"))?;
    Ok(respond::single(&ctx, StatusCode::ACCEPTED, &user))
}
