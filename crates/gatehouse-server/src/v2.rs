//! `/v2/` preview (D32), enabled per organization by an operator: lists with
//! real cursor pagination (`limit`, `starting_after`; `meta.next_cursor`),
//! stable under concurrent inserts. Elsewhere `/v2/` answers 404.

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use gatehouse_domain::{API_VERSION, FieldIssue, OrgId, ProductId, UserId};
use serde::Serialize;

use crate::AppState;
use crate::error::{ApiError, ErrorCode};
use crate::extract::{Authorized, ProductsRead, Query, UsersRead};
use crate::middleware::RequestCtx;
use crate::products::product_filter;
use crate::responses::{ProductResponse, UserResponse};
use crate::users::user_filter;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/users", get(users))
        .route("/products", get(products))
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

async fn users(
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

async fn products(
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
