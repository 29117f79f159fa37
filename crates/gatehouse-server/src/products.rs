//! `/v1/products` (interface.md §4.4, D16–D18).

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use gatehouse_app::ProductFilter;
use gatehouse_domain::values::parse_amount;
use gatehouse_domain::{Name, NewProduct, ProductId, ProductPatch, ProductStatus, SearchText, Sku};

use crate::AppState;
use crate::error::ApiError;
use crate::extract::{Authorized, Fields, IdPath, JsonObject, ProductsRead, ProductsWrite, Query};
use crate::middleware::RequestCtx;
use crate::respond;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/products", get(list).post(create))
        .route(
            "/products/{product_id}",
            get(show).patch(update).delete(remove),
        )
}

fn product_id(raw: &str) -> Result<ProductId, ApiError> {
    ProductId::parse(raw).ok_or_else(|| ApiError::not_found("product"))
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
    Ok(respond::list(&ctx, &listing, page))
}

async fn show(
    auth: Authorized<ProductsRead>,
    ctx: RequestCtx,
    State(st): State<AppState>,
    IdPath(raw): IdPath,
) -> Result<Response, ApiError> {
    let id = product_id(&raw)?;
    let p = st.app.get_product(auth.org(), &id).await?;
    Ok(respond::single(&ctx, StatusCode::OK, &p))
}

/// D16: only `discontinued` may be chosen at creation; otherwise stock decides (D18).
fn creation_status(s: &str) -> Result<bool, String> {
    match s {
        "discontinued" => Ok(true),
        _ => Err(
            "may only be discontinued at creation; otherwise the status follows the stock".into(),
        ),
    }
}

async fn create(
    auth: Authorized<ProductsWrite>,
    ctx: RequestCtx,
    State(st): State<AppState>,
    body: JsonObject,
) -> Result<Response, ApiError> {
    let mut f = Fields::new(body, &["name", "sku", "price", "stock", "status"]);
    let name = f.required_str("name", Name::parse);
    let sku = f.required_str("sku", Sku::parse);
    let price = f.required_int("price", parse_amount);
    let stock = f.required_int("stock", parse_amount);
    let discontinued = f.optional_str("status", creation_status).unwrap_or(false);
    f.finish()?;
    let (Some(name), Some(sku), Some(price), Some(stock)) = (name, sku, price, stock) else {
        return Err(ApiError::internal());
    };
    let new = NewProduct {
        name,
        sku,
        price,
        stock,
        discontinued,
    };
    let p = st.app.create_product(auth.org(), &new).await?;
    let location = format!("{}/products/{}", st.config.base_url(), p.id);
    Ok(respond::created(&ctx, &location, &p))
}

async fn update(
    auth: Authorized<ProductsWrite>,
    ctx: RequestCtx,
    State(st): State<AppState>,
    IdPath(raw): IdPath,
    body: JsonObject,
) -> Result<Response, ApiError> {
    let mut f = Fields::new(body, &["name", "sku", "price", "stock", "status"]);
    let patch = ProductPatch {
        name: f.optional_str("name", Name::parse),
        sku: f.optional_str("sku", Sku::parse),
        price: f.optional_int("price", parse_amount),
        stock: f.optional_int("stock", parse_amount),
        status: f.optional_str("status", ProductStatus::parse),
    };
    f.finish()?;
    let id = product_id(&raw)?;
    let p = st.app.update_product(auth.org(), &id, &patch).await?;
    Ok(respond::single(&ctx, StatusCode::OK, &p))
}

async fn remove(
    auth: Authorized<ProductsWrite>,
    State(st): State<AppState>,
    IdPath(raw): IdPath,
) -> Result<Response, ApiError> {
    let id = product_id(&raw)?;
    st.app.delete_product(auth.org(), &id).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}
