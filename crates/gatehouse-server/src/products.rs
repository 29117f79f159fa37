//! `/v1/products` (interface.md §4.4, D16–D18).

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use gatehouse_app::ProductFilter;
use gatehouse_domain::{ProductId, ProductStatus, SearchText};

use crate::AppState;
use crate::error::ApiError;
use crate::extract::{Authorized, Body, Id, IdBody, ProductsRead, ProductsWrite, Query};
use crate::middleware::RequestCtx;
use crate::requests::{CreateProductRequest, UpdateProductRequest};
use crate::respond;
use crate::responses::ProductResponse;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/products", get(list).post(create))
        .route(
            "/products/{product_id}",
            get(show).patch(update).delete(remove),
        )
}

/// The list filters (interface.md §4.4), shared by v1 and v2.
pub(crate) fn product_filter(query: &mut Query) -> ProductFilter {
    ProductFilter {
        status: query.field("status", ProductStatus::parse),
        q: query.field("q", SearchText::parse).flatten(),
    }
}

async fn list(
    auth: Authorized<ProductsRead>,
    ctx: RequestCtx,
    State(st): State<AppState>,
    mut query: Query,
) -> Result<Response, ApiError> {
    let page = query.page();
    let filter = product_filter(&mut query);
    query.finish()?;
    let listing = st.app.list_products(auth.org(), &filter, page).await?;
    Ok(respond::list::<_, ProductResponse<'_>>(
        &ctx, &listing, page,
    ))
}

async fn show(
    auth: Authorized<ProductsRead>,
    ctx: RequestCtx,
    State(st): State<AppState>,
    Id(id): Id<ProductId>,
) -> Result<Response, ApiError> {
    let p = st.app.get_product(auth.org(), &id).await?;
    Ok(respond::single(
        &ctx,
        StatusCode::OK,
        &ProductResponse::from(&p),
    ))
}

async fn create(
    auth: Authorized<ProductsWrite>,
    ctx: RequestCtx,
    State(st): State<AppState>,
    Body(new): Body<CreateProductRequest>,
) -> Result<Response, ApiError> {
    let p = st.app.create_product(auth.org(), &new).await?;
    let location = format!("{}/products/{}", st.config.base_url(), p.id);
    Ok(respond::created(
        &ctx,
        &location,
        &ProductResponse::from(&p),
    ))
}

async fn update(
    auth: Authorized<ProductsWrite>,
    ctx: RequestCtx,
    State(st): State<AppState>,
    req: IdBody<ProductId, UpdateProductRequest>,
) -> Result<Response, ApiError> {
    let p = st
        .app
        .update_product(auth.org(), &req.id, &req.body)
        .await?;
    Ok(respond::single(
        &ctx,
        StatusCode::OK,
        &ProductResponse::from(&p),
    ))
}

async fn remove(
    auth: Authorized<ProductsWrite>,
    State(st): State<AppState>,
    Id(id): Id<ProductId>,
) -> Result<Response, ApiError> {
    st.app.delete_product(auth.org(), &id).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}
