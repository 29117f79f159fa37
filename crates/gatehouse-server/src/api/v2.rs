//! `/v2/` preview (D32), enabled per organization by an operator: lists with
//! real cursor pagination (`limit`, `starting_after`; `meta.next_cursor`),
//! stable under concurrent inserts. Elsewhere `/v2/` answers 404.

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use gatehouse_domain::{API_VERSION, EventId, FieldIssue, OrgId, ProductId, UserId};
use serde::Serialize;

use crate::api::events::{EventResponse, event_filter};
use crate::api::extract::{Authorized, EventsRead, ProductsRead, Query, UsersRead};
use crate::api::products::product_filter;
use crate::api::responses::{ProductResponse, UserResponse};
use crate::api::users::user_filter;
use crate::http::error::{ApiError, ErrorCode};
use crate::http::middleware::RequestCtx;
use crate::state::AppState;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/users", get(users))
        .route("/products", get(products))
        .route("/events", get(events))
}

async fn preview_enabled(st: &AppState, org: &OrgId) -> Result<(), ApiError> {
    if st.app.v2_preview(org).await? {
        Ok(())
    } else {
        Err(ApiError::new(
            ErrorCode::ResourceNotFound,
            "resource (the v2 preview is not enabled for this organization) not found",
        ))
    }
}

/// `limit` as in v1 (default 20, above 100 clamped).
fn limit(query: &mut Query) -> u32 {
    query.page().limit
}

fn cursor_page<T: Serialize>(
    ctx: &RequestCtx,
    mut items: Vec<T>,
    limit: u32,
    id: impl Fn(&T) -> String,
) -> Response {
    let more = items.len() > limit as usize;
    items.truncate(limit as usize);
    let next = if more { items.last().map(&id) } else { None };
    let body = serde_json::json!({
        "data": items,
        "meta": { "limit": limit, "next_cursor": next, "request_id": ctx.request_id.as_str(), "version": API_VERSION },
    });
    (StatusCode::OK, axum::Json(body)).into_response()
}

fn unknown_cursor() -> ApiError {
    ApiError::validation(vec![FieldIssue::new(
        "starting_after",
        "is not an item of this list",
    )])
}

#[utoipa::path(
    get,
    path = "/v2/users",
    operation_id = "listUsersV2",
    tag = "Preview (v2)",
    summary = "Preview: users with cursor pagination",
    params(
        ("limit" = Option<u32>, Query, minimum = 1, description = "Page size (default 20, at most 100); values above 100 are clamped to 100."),
        ("starting_after" = Option<String>, Query, pattern = "^usr_[A-Za-z0-9]+$", description = "The cursor: the last id of the previous page (`meta.next_cursor`)."),
        ("role" = Option<crate::http::schemas::RoleName>, Query, description = "Only users with this role."),
        ("status" = Option<crate::http::schemas::UserStatusName>, Query, description = "Only users with this status."),
        ("q" = Option<String>, Query, max_length = 200, description = "Search text."),
    ),
    responses(
        (status = 200, description = "A page of users", body = crate::http::schemas::UserCursorList),
        (status = 400, description = "Invalid query parameter or cursor", body = crate::http::error::ErrorEnvelope<'static>),
        (status = 404, description = "The preview is not enabled for the organization", body = crate::http::error::ErrorEnvelope<'static>),
    ),
    security(("bearer" = ["users:read"]), ("oauth2" = ["users:read"])),
)]
pub(crate) async fn users(
    auth: Authorized<UsersRead>,
    ctx: RequestCtx,
    State(st): State<AppState>,
    mut query: Query,
) -> Result<Response, ApiError> {
    preview_enabled(&st, auth.org()).await?;
    let limit = limit(&mut query);
    let after = query.field("starting_after", |s| {
        UserId::parse(s).ok_or_else(|| "must be a user id (usr_…)".to_owned())
    });
    let filter = user_filter(&mut query);
    query.finish()?;
    let items = st
        .app
        .list_users_after(auth.org(), &filter, after.as_ref(), limit + 1)
        .await?
        .ok_or_else(unknown_cursor)?;
    let items: Vec<UserResponse<'_>> = items.iter().map(UserResponse::from).collect();
    Ok(cursor_page(&ctx, items, limit, |u| u.id.to_owned()))
}

#[utoipa::path(
    get,
    path = "/v2/products",
    operation_id = "listProductsV2",
    tag = "Preview (v2)",
    summary = "Preview: products with cursor pagination",
    params(
        ("limit" = Option<u32>, Query, minimum = 1, description = "Page size (default 20, at most 100); values above 100 are clamped to 100."),
        ("starting_after" = Option<String>, Query, pattern = "^prod_[A-Za-z0-9]+$", description = "The cursor: the last id of the previous page (`meta.next_cursor`)."),
        ("status" = Option<crate::http::schemas::ProductStatusName>, Query, description = "Only products with this status."),
        ("q" = Option<String>, Query, max_length = 200, description = "Search text."),
    ),
    responses(
        (status = 200, description = "A page of products", body = crate::http::schemas::ProductCursorList),
        (status = 400, description = "Invalid query parameter or cursor", body = crate::http::error::ErrorEnvelope<'static>),
        (status = 404, description = "The preview is not enabled for the organization", body = crate::http::error::ErrorEnvelope<'static>),
    ),
    security(("bearer" = ["products:read"]), ("oauth2" = ["products:read"])),
)]
pub(crate) async fn products(
    auth: Authorized<ProductsRead>,
    ctx: RequestCtx,
    State(st): State<AppState>,
    mut query: Query,
) -> Result<Response, ApiError> {
    preview_enabled(&st, auth.org()).await?;
    let limit = limit(&mut query);
    let after = query.field("starting_after", |s| {
        ProductId::parse(s).ok_or_else(|| "must be a product id (prod_…)".to_owned())
    });
    let filter = product_filter(&mut query);
    query.finish()?;
    let items = st
        .app
        .list_products_after(auth.org(), &filter, after.as_ref(), limit + 1)
        .await?
        .ok_or_else(unknown_cursor)?;
    let items: Vec<ProductResponse<'_>> = items.iter().map(ProductResponse::from).collect();
    Ok(cursor_page(&ctx, items, limit, |p| p.id.to_owned()))
}

#[utoipa::path(
    get,
    path = "/v2/events",
    operation_id = "listEventsV2",
    tag = "Preview (v2)",
    summary = "Preview: events, newest first, with cursor pagination",
    params(
        ("limit" = Option<u32>, Query, minimum = 1, description = "Page size (default 20, at most 100); values above 100 are clamped to 100."),
        ("starting_after" = Option<String>, Query, pattern = "^evt_[A-Za-z0-9]+$", description = "The cursor: the last id of the previous page (`meta.next_cursor`); the page holds the older events."),
        ("type" = Option<Vec<String>>, Query, description = "Only events of these types (repeatable; `user.*` matches every `user.` type)."),
        ("object_id" = Option<String>, Query, description = "Only events about this object."),
        ("from" = Option<String>, Query, description = "Only events created at or after this time (RFC 3339)."),
        ("to" = Option<String>, Query, description = "Only events created before this time (RFC 3339)."),
    ),
    responses(
        (status = 200, description = "A page of events", body = crate::http::schemas::EventCursorList),
        (status = 400, description = "Invalid query parameter or cursor", body = crate::http::error::ErrorEnvelope<'static>),
        (status = 404, description = "The preview is not enabled for the organization", body = crate::http::error::ErrorEnvelope<'static>),
    ),
    security(("bearer" = ["events:read"]), ("oauth2" = ["events:read"])),
)]
/// D32 (continued): `/v2` serves the third round's lists with cursors. An
/// event's place is its `sequence`, so the cursor (an event id) stands for
/// "older than that event", stable whatever is told meanwhile; catching up
/// oldest first stays `/v1/events?after_sequence=`.
pub(crate) async fn events(
    auth: Authorized<EventsRead>,
    ctx: RequestCtx,
    State(st): State<AppState>,
    mut query: Query,
) -> Result<Response, ApiError> {
    preview_enabled(&st, auth.org()).await?;
    let limit = limit(&mut query);
    let after = query.field("starting_after", |s| {
        EventId::parse(s).ok_or_else(|| "must be an event id (evt_…)".to_owned())
    });
    let filter = event_filter(&mut query);
    query.finish()?;
    let org = auth.org();
    let events = st
        .app
        .events_before(org, &filter, after.as_ref(), limit + 1)
        .await?
        .ok_or_else(unknown_cursor)?;
    let items: Vec<EventResponse<'_>> = events
        .iter()
        .map(|e| EventResponse::of(e, org.as_str()))
        .collect();
    Ok(cursor_page(&ctx, items, limit, |e| e.id.to_owned()))
}
