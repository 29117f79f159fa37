//! Browser sessions (D57): a person's own under `/v1/me/sessions`, and an
//! admin's view of a person's under `/v1/users/{id}/sessions`.

use axum::Router;
use axum::extract::{FromRequestParts, Path, State};
use axum::http::StatusCode;
use axum::http::request::Parts;
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use gatehouse_app::Session;
use gatehouse_domain::{Listing, SessionId, UserId};
use serde::Serialize;
use utoipa::ToSchema;

use crate::api::extract::{Authorized, Id, ProfileRead, ProfileWrite, Query, UsersWrite};
use crate::api::responses::SessionResponse;
use crate::http::error::{ApiError, Resource};
use crate::http::middleware::RequestCtx;
use crate::http::respond;
use crate::state::AppState;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/me/sessions", get(list_mine))
        .route("/me/sessions/revoke-others", post(revoke_others))
        .route("/me/sessions/{session_id}", delete(end_mine))
        .route(
            "/users/{user_id}/sessions",
            get(list_users).delete(end_users_all),
        )
        .route("/users/{user_id}/sessions/{session_id}", delete(end_users))
}

impl<'a> From<&'a (Session, bool)> for SessionResponse<'a> {
    fn from((s, current): &'a (Session, bool)) -> Self {
        SessionResponse::of(s, Some(*current))
    }
}

/// A page of sessions with `current` told for the caller's session.
fn shown(listing: Listing<Session>, current: Option<&SessionId>) -> Listing<(Session, bool)> {
    Listing {
        total: listing.total,
        items: listing
            .items
            .into_iter()
            .map(|s| {
                let is = current == Some(&s.id);
                (s, is)
            })
            .collect(),
    }
}

/// The token's user; a credential that acts for no user has no sessions
/// (404, as for `/v1/me`, D15).
fn me<S>(auth: &Authorized<S>) -> Result<UserId, ApiError> {
    crate::api::profile::user_of(auth, "sessions")
}

#[utoipa::path(
    get,
    path = "/v1/me/sessions",
    operation_id = "listMySessions",
    tag = "Profile",
    summary = "Your browser sessions (sign-ins), newest first",
    params(
        ("limit" = Option<u32>, Query, minimum = 1, description = "Page size (default 20, at most 100); values above 100 are clamped to 100."),
        ("offset" = Option<u64>, Query, description = "Items to skip."),
    ),
    responses(
        (status = 200, description = "Newest first; `current` marks the session the calling token acts in", body = crate::http::respond::List<'static, SessionResponse<'static>>),
        (status = 400, description = "Invalid query parameter", body = crate::http::error::ErrorEnvelope<'static>),
        (status = 404, description = "The token acts for no user", body = crate::http::error::ErrorEnvelope<'static>),
    ),
    security(("bearer" = ["profile:read"]), ("oauth2" = ["profile:read"])),
)]
pub(crate) async fn list_mine(
    auth: Authorized<ProfileRead>,
    ctx: RequestCtx,
    State(st): State<AppState>,
    mut query: Query,
) -> Result<Response, ApiError> {
    let page = query.page();
    query.finish()?;
    let id = me(&auth)?;
    let mine = st
        .app
        .my_sessions(auth.org(), &id, auth.caller.chain(), page)
        .await?;
    let listing = shown(mine.listing, mine.current.as_ref());
    Ok(respond::list::<_, SessionResponse<'_>>(
        &ctx, &listing, page,
    ))
}

#[utoipa::path(
    delete,
    path = "/v1/me/sessions/{session_id}",
    operation_id = "endMySession",
    tag = "Profile",
    summary = "End one of your sessions: its sign-in and the refresh and access tokens of the applications signed in through it stop working",
    params(
        ("session_id" = String, Path, pattern = "^ses_[A-Za-z0-9]+$", description = "A session id (`ses_…`)."),
    ),
    responses(
        (status = 204, description = "Ended"),
        (status = 404, description = "No such session of yours", body = crate::http::error::ErrorEnvelope<'static>),
    ),
    security(("bearer" = ["profile:write"]), ("oauth2" = ["profile:write"])),
)]
pub(crate) async fn end_mine(
    auth: Authorized<ProfileWrite>,
    ctx: RequestCtx,
    State(st): State<AppState>,
    Id(session): Id<SessionId>,
) -> Result<Response, ApiError> {
    let id = me(&auth)?;
    st.app
        .end_session(auth.org(), &id, &session, &auth.origin(&ctx))
        .await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// How many sessions `revoke-others` ended.
#[derive(Serialize, ToSchema)]
#[schema(as = RevokedSessions)]
pub struct RevokedSessions {
    pub revoked: u64,
}

#[utoipa::path(
    post,
    path = "/v1/me/sessions/revoke-others",
    operation_id = "revokeMyOtherSessions",
    tag = "Profile",
    summary = "End every session of yours but the one the calling token acts in",
    responses(
        (status = 200, description = "How many sessions ended", body = crate::http::respond::Single<'static, RevokedSessions>),
        (status = 404, description = "The token acts for no user", body = crate::http::error::ErrorEnvelope<'static>),
    ),
    security(("bearer" = ["profile:write"]), ("oauth2" = ["profile:write"])),
)]
pub(crate) async fn revoke_others(
    auth: Authorized<ProfileWrite>,
    ctx: RequestCtx,
    State(st): State<AppState>,
) -> Result<Response, ApiError> {
    let id = me(&auth)?;
    let revoked = st
        .app
        .revoke_other_sessions(auth.org(), &id, auth.caller.chain(), &auth.origin(&ctx))
        .await?;
    Ok(respond::single(
        &ctx,
        StatusCode::OK,
        &RevokedSessions { revoked },
    ))
}

#[utoipa::path(
    get,
    path = "/v1/users/{user_id}/sessions",
    operation_id = "listUserSessions",
    tag = "Users",
    summary = "A person's browser sessions, newest first",
    params(
        ("user_id" = String, Path, pattern = "^usr_[A-Za-z0-9]+$", description = "A user id (`usr_…`)."),
        ("limit" = Option<u32>, Query, minimum = 1, description = "Page size (default 20, at most 100); values above 100 are clamped to 100."),
        ("offset" = Option<u64>, Query, description = "Items to skip."),
    ),
    responses(
        (status = 200, description = "Newest first", body = crate::http::respond::List<'static, SessionResponse<'static>>),
        (status = 400, description = "Invalid query parameter", body = crate::http::error::ErrorEnvelope<'static>),
        (status = 404, description = "No such user in the organization", body = crate::http::error::ErrorEnvelope<'static>),
    ),
    security(("bearer" = ["users:write"]), ("oauth2" = ["users:write"])),
)]
pub(crate) async fn list_users(
    auth: Authorized<UsersWrite>,
    ctx: RequestCtx,
    State(st): State<AppState>,
    Id(user): Id<UserId>,
    mut query: Query,
) -> Result<Response, ApiError> {
    let page = query.page();
    query.finish()?;
    let listing = st.app.user_sessions(auth.org(), &user, page).await?;
    // `current` is the caller's own session, which is listed here only
    // when an admin lists their own sessions.
    let current = st
        .app
        .current_session(auth.org(), auth.caller.chain())
        .await?;
    let listing = shown(listing, current.as_ref());
    Ok(respond::list::<_, SessionResponse<'_>>(
        &ctx, &listing, page,
    ))
}

#[utoipa::path(
    delete,
    path = "/v1/users/{user_id}/sessions",
    operation_id = "endUserSessions",
    tag = "Users",
    summary = "End every session of a person (their refresh and access tokens from those sign-ins stop working)",
    params(
        ("user_id" = String, Path, pattern = "^usr_[A-Za-z0-9]+$", description = "A user id (`usr_…`)."),
    ),
    responses(
        (status = 204, description = "Ended (also when there was none)"),
        (status = 404, description = "No such user in the organization", body = crate::http::error::ErrorEnvelope<'static>),
    ),
    security(("bearer" = ["users:write"]), ("oauth2" = ["users:write"])),
)]
pub(crate) async fn end_users_all(
    auth: Authorized<UsersWrite>,
    ctx: RequestCtx,
    State(st): State<AppState>,
    Id(user): Id<UserId>,
) -> Result<Response, ApiError> {
    st.app
        .end_all_sessions(auth.org(), &user, &auth.origin(&ctx))
        .await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// `/users/{user_id}/sessions/{session_id}`: both ids; a segment that is
/// not one is a 404 (D6).
pub(crate) struct UserSession {
    user: UserId,
    session: SessionId,
}

impl FromRequestParts<AppState> for UserSession {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let Path((user, session)) = Path::<(String, String)>::from_request_parts(parts, state)
            .await
            .map_err(|_| ApiError::not_found(Resource::Any))?;
        let Id(user) = Id::<UserId>::parse(&user)?;
        let Id(session) = Id::<SessionId>::parse(&session)?;
        Ok(Self { user, session })
    }
}

#[utoipa::path(
    delete,
    path = "/v1/users/{user_id}/sessions/{session_id}",
    operation_id = "endUserSession",
    tag = "Users",
    summary = "End one session of a person",
    params(
        ("user_id" = String, Path, pattern = "^usr_[A-Za-z0-9]+$", description = "A user id (`usr_…`)."),
        ("session_id" = String, Path, pattern = "^ses_[A-Za-z0-9]+$", description = "A session id (`ses_…`)."),
    ),
    responses(
        (status = 204, description = "Ended"),
        (status = 404, description = "No such user, or no such session of theirs", body = crate::http::error::ErrorEnvelope<'static>),
    ),
    security(("bearer" = ["users:write"]), ("oauth2" = ["users:write"])),
)]
pub(crate) async fn end_users(
    auth: Authorized<UsersWrite>,
    ctx: RequestCtx,
    State(st): State<AppState>,
    UserSession { user, session }: UserSession,
) -> Result<Response, ApiError> {
    st.app.get_user(auth.org(), &user).await?;
    st.app
        .end_session(auth.org(), &user, &session, &auth.origin(&ctx))
        .await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}
