//! Success envelopes (D5), and `Cache-Control: no-store` for answers that
//! carry secrets.

use axum::Json;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use gatehouse_domain::{API_VERSION, Listing, Page};
use serde::Serialize;
use utoipa::ToSchema;

use super::middleware::RequestCtx;
use super::schemas;

/// The request id and the API version of an answer.
#[derive(Serialize, ToSchema)]
pub struct Meta<'a> {
    #[schema(value_type = String, pattern = "^req_[0-9a-f]{32}$")]
    request_id: &'a str,
    #[schema(schema_with = schemas::api_version)]
    version: &'static str,
}

/// One resource and the answer's meta.
#[derive(Serialize, ToSchema)]
pub struct Single<'a, T> {
    data: &'a T,
    meta: Meta<'a>,
}

/// `{"data": {...}, "meta": {"request_id", "version"}}`, serialized straight
/// from the record (no intermediate `serde_json::Value` tree).
pub fn single<T: Serialize>(ctx: &RequestCtx, status: StatusCode, data: &T) -> Response {
    let body = Single {
        data,
        meta: Meta {
            request_id: ctx.request_id.as_str(),
            version: API_VERSION,
        },
    };
    (status, Json(body)).into_response()
}

/// 201 with `Location` (D12, D16).
pub fn created<T: Serialize>(ctx: &RequestCtx, location: &str, data: &T) -> Response {
    let mut res = single(ctx, StatusCode::CREATED, data);
    if let Ok(v) = HeaderValue::from_str(location) {
        res.headers_mut().insert(header::LOCATION, v);
    }
    res
}

/// A page's place in the whole list and the answer's meta.
#[derive(Serialize, ToSchema)]
pub struct ListMeta<'a> {
    total: u64,
    #[schema(minimum = 1, maximum = 100)]
    limit: u32,
    offset: u64,
    #[schema(value_type = String)]
    request_id: &'a str,
    #[schema(value_type = String)]
    version: &'static str,
}

// interface.md §4.2.
/// One page of a list.
#[derive(Serialize, ToSchema)]
pub struct List<'a, T> {
    data: &'a [T],
    meta: ListMeta<'a>,
}

/// `{"data": [...], "meta": {"total", "limit", "offset", "request_id", "version"}}`,
/// each item shown as its response type `R`.
pub fn list<'a, T, R>(ctx: &RequestCtx, listing: &'a Listing<T>, page: Page) -> Response
where
    R: Serialize + From<&'a T>,
{
    let items: Vec<R> = listing.items.iter().map(R::from).collect();
    let body = List {
        data: &items,
        meta: ListMeta {
            total: listing.total,
            limit: page.limit,
            offset: page.offset,
            request_id: ctx.request_id.as_str(),
            version: API_VERSION,
        },
    };
    (StatusCode::OK, Json(body)).into_response()
}

/// No caching of an answer that carries a token or a secret (RFC 6749
/// §5.1), or of a replayed one.
pub fn no_store(h: &mut HeaderMap) {
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(header::PRAGMA, HeaderValue::from_static("no-cache"));
}
