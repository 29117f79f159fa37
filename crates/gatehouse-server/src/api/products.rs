//! `/v1/products` (interface.md §4.4, D16–D18).

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use gatehouse_app::ProductFilter;
use gatehouse_domain::{ProductId, ProductStatus, SearchText};

use crate::api::extract::{Authorized, Body, Id, IdBody, ProductsRead, ProductsWrite, Query};
use crate::api::requests::{CreateProductRequest, UpdateProductRequest};
use crate::api::responses::ProductResponse;
use crate::http::error::ApiError;
use crate::http::middleware::RequestCtx;
use crate::http::respond;
use crate::state::AppState;

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

#[utoipa::path(
    get,
    path = "/v1/products",
    operation_id = "listProducts",
    tag = "Products",
    summary = "List the catalog, newest first",
    params(
        ("limit" = Option<u32>, Query, minimum = 1, description = "Page size (default 20, at most 100); values above 100 are clamped to 100."),
        ("offset" = Option<u64>, Query, description = "Items to skip."),
        ("status" = Option<crate::http::schemas::ProductStatusName>, Query, description = "Only products with this status."),
        ("q" = Option<String>, Query, max_length = 200, description = "Search text."),
    ),
    responses(
        (status = 200, description = "A page of products", body = crate::http::respond::List<'static, crate::api::responses::ProductResponse<'static>>),
        (status = 400, description = "Invalid query parameter", body = crate::http::error::ErrorEnvelope<'static>),
    ),
    security(("bearer" = ["products:read"]), ("oauth2" = ["products:read"])),
)]
pub(crate) async fn list(
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

#[utoipa::path(
    get,
    path = "/v1/products/{product_id}",
    operation_id = "getProduct",
    tag = "Products",
    summary = "Get a product",
    params(
        ("product_id" = String, Path, pattern = "^prod_[A-Za-z0-9]+$", description = "A product id (`prod_…`)."),
    ),
    responses(
        (status = 200, description = "The product", body = crate::http::respond::Single<'static, crate::api::responses::ProductResponse<'static>>),
        (status = 404, description = "No such product", body = crate::http::error::ErrorEnvelope<'static>),
    ),
    security(("bearer" = ["products:read"]), ("oauth2" = ["products:read"])),
)]
pub(crate) async fn show(
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

#[utoipa::path(
    post,
    path = "/v1/products",
    operation_id = "createProduct",
    tag = "Products",
    summary = "Add a product",
    request_body(content = crate::api::requests::CreateProductRequest, content_type = "application/json"),
    responses(
        (status = 201, description = "The new product; Location names it", body = crate::http::respond::Single<'static, crate::api::responses::ProductResponse<'static>>),
        (status = 400, description = "Invalid fields", body = crate::http::error::ErrorEnvelope<'static>),
        (status = 409, description = "The sku exists in the catalog", body = crate::http::error::ErrorEnvelope<'static>),
        (status = 413, description = "Body over 64 KiB", body = crate::http::error::ErrorEnvelope<'static>),
        (status = 415, description = "Not JSON", body = crate::http::error::ErrorEnvelope<'static>),
    ),
    security(("bearer" = ["products:write"]), ("oauth2" = ["products:write"])),
)]
pub(crate) async fn create(
    auth: Authorized<ProductsWrite>,
    ctx: RequestCtx,
    State(st): State<AppState>,
    Body(new): Body<CreateProductRequest>,
) -> Result<Response, ApiError> {
    let p = st
        .app
        .create_product(auth.org(), &new, &auth.origin(&ctx))
        .await?;
    let location = format!("{}/products/{}", st.config.base_url(), p.id);
    Ok(respond::created(
        &ctx,
        &location,
        &ProductResponse::from(&p),
    ))
}

#[utoipa::path(
    patch,
    path = "/v1/products/{product_id}",
    operation_id = "updateProduct",
    tag = "Products",
    summary = "Change a product (status follows stock unless discontinued)",
    params(
        ("product_id" = String, Path, pattern = "^prod_[A-Za-z0-9]+$", description = "A product id (`prod_…`)."),
    ),
    request_body(content = crate::api::requests::UpdateProductRequest, content_type = "application/json"),
    responses(
        (status = 200, description = "The updated product", body = crate::http::respond::Single<'static, crate::api::responses::ProductResponse<'static>>),
        (status = 400, description = "Invalid fields", body = crate::http::error::ErrorEnvelope<'static>),
        (status = 404, description = "No such product", body = crate::http::error::ErrorEnvelope<'static>),
        (status = 409, description = "The sku exists in the catalog", body = crate::http::error::ErrorEnvelope<'static>),
        (status = 413, description = "Body over 64 KiB", body = crate::http::error::ErrorEnvelope<'static>),
        (status = 415, description = "Not JSON", body = crate::http::error::ErrorEnvelope<'static>),
        (status = 422, description = "Status disagrees with stock", body = crate::http::error::ErrorEnvelope<'static>),
    ),
    security(("bearer" = ["products:write"]), ("oauth2" = ["products:write"])),
)]
pub(crate) async fn update(
    auth: Authorized<ProductsWrite>,
    ctx: RequestCtx,
    State(st): State<AppState>,
    req: IdBody<ProductId, UpdateProductRequest>,
) -> Result<Response, ApiError> {
    let p = st
        .app
        .update_product(auth.org(), &req.id, &req.body, &auth.origin(&ctx))
        .await?;
    Ok(respond::single(
        &ctx,
        StatusCode::OK,
        &ProductResponse::from(&p),
    ))
}

#[utoipa::path(
    delete,
    path = "/v1/products/{product_id}",
    operation_id = "deleteProduct",
    tag = "Products",
    summary = "Remove a product",
    params(
        ("product_id" = String, Path, pattern = "^prod_[A-Za-z0-9]+$", description = "A product id (`prod_…`)."),
    ),
    responses(
        (status = 204, description = "Deleted"),
        (status = 404, description = "No such product", body = crate::http::error::ErrorEnvelope<'static>),
    ),
    security(("bearer" = ["products:write"]), ("oauth2" = ["products:write"])),
)]
pub(crate) async fn remove(
    auth: Authorized<ProductsWrite>,
    ctx: RequestCtx,
    State(st): State<AppState>,
    Id(id): Id<ProductId>,
) -> Result<Response, ApiError> {
    st.app
        .delete_product(auth.org(), &id, &auth.origin(&ctx))
        .await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}
