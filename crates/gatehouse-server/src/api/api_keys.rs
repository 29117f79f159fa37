//! `/v1/api-keys` (D46): an organization's API keys, managed through the
//! API with the caller's rights (`applications:read`/`applications:write`).

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use gatehouse_app::Credential;
use gatehouse_domain::ApiKeyId;

use crate::api::applications::{owner_id, secret_answer, usage_range};
use crate::api::extract::{ApplicationsRead, ApplicationsWrite, Authorized, Body, Id, Query};
use crate::api::requests::CreateApiKeyRequest;
use crate::api::responses::{ApiKeyResponse, CreatedApiKey, UsageBucketResponse};
use crate::http::error::ApiError;
use crate::http::middleware::RequestCtx;
use crate::http::respond;
use crate::state::AppState;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/api-keys", get(list).post(create))
        .route("/api-keys/{key_id}", get(show).delete(revoke))
        .route("/api-keys/{key_id}/usage", get(usage))
}

#[utoipa::path(
    get,
    path = "/v1/api-keys",
    operation_id = "listApiKeys",
    tag = "API keys",
    summary = "List the API keys you manage (revoked ones too), oldest first; an editor sees its own",
    params(
        ("limit" = Option<u32>, Query, minimum = 1, description = "Page size (default 20, at most 100); values above 100 are clamped to 100."),
        ("offset" = Option<u64>, Query, description = "Items to skip."),
        ("owner_id" = Option<String>, Query, pattern = "^usr_[A-Za-z0-9]+$", description = "Only the keys this person owns (an editor gets an empty page for anyone but itself)."),
    ),
    responses(
        (status = 200, description = "A page of API keys", body = crate::http::respond::List<'static, crate::api::responses::ApiKeyResponse<'static>>),
        (status = 400, description = "Invalid query parameter", body = crate::http::error::ErrorEnvelope<'static>),
    ),
    security(("bearer" = ["applications:read"]), ("oauth2" = ["applications:read"])),
)]
pub(crate) async fn list(
    auth: Authorized<ApplicationsRead>,
    ctx: RequestCtx,
    State(st): State<AppState>,
    mut query: Query,
) -> Result<Response, ApiError> {
    let page = query.page();
    let owner = query.field("owner_id", owner_id);
    query.finish()?;
    let m = st.app.manager(&auth.caller).await?;
    let listing = st.app.list_keys(&m, auth.org(), owner, page).await?;
    Ok(respond::list::<_, ApiKeyResponse<'_>>(&ctx, &listing, page))
}

#[utoipa::path(
    post,
    path = "/v1/api-keys",
    operation_id = "createApiKey",
    tag = "API keys",
    summary = "Create an API key; the key is in this answer only",
    request_body(content = crate::api::requests::CreateApiKeyRequest, content_type = "application/json"),
    responses(
        (status = 201, description = "The new key's record and the `key`; Location names it", body = crate::http::respond::Single<'static, crate::api::responses::CreatedApiKey<'static>>),
        (status = 400, description = "Invalid fields", body = crate::http::error::ErrorEnvelope<'static>),
        (status = 403, description = "A scope you do not hold, or applications:* from an editor", body = crate::http::error::ErrorEnvelope<'static>),
        (status = 413, description = "Body over 64 KiB", body = crate::http::error::ErrorEnvelope<'static>),
        (status = 415, description = "Not JSON", body = crate::http::error::ErrorEnvelope<'static>),
    ),
    security(("bearer" = ["applications:write"]), ("oauth2" = ["applications:write"])),
)]
pub(crate) async fn create(
    auth: Authorized<ApplicationsWrite>,
    ctx: RequestCtx,
    State(st): State<AppState>,
    Body(req): Body<CreateApiKeyRequest>,
) -> Result<Response, ApiError> {
    let m = st.app.manager(&auth.caller).await?;
    let (record, key) = st
        .app
        .create_key(&m, auth.org(), req, &auth.origin(&ctx))
        .await?;
    let location = format!("{}/api-keys/{}", st.config.base_url(), record.id);
    Ok(secret_answer(respond::created(
        &ctx,
        &location,
        &CreatedApiKey {
            api_key: ApiKeyResponse::from(&record),
            key: &key,
        },
    )))
}

#[utoipa::path(
    get,
    path = "/v1/api-keys/{key_id}",
    operation_id = "getApiKey",
    tag = "API keys",
    summary = "Get an API key's record",
    params(
        ("key_id" = String, Path, pattern = "^key_[A-Za-z0-9]+$", description = "An API key id (`key_…`)."),
    ),
    responses(
        (status = 200, description = "The key's record", body = crate::http::respond::Single<'static, crate::api::responses::ApiKeyResponse<'static>>),
        (status = 404, description = "No such key that you manage", body = crate::http::error::ErrorEnvelope<'static>),
    ),
    security(("bearer" = ["applications:read"]), ("oauth2" = ["applications:read"])),
)]
pub(crate) async fn show(
    auth: Authorized<ApplicationsRead>,
    ctx: RequestCtx,
    State(st): State<AppState>,
    Id(id): Id<ApiKeyId>,
) -> Result<Response, ApiError> {
    let m = st.app.manager(&auth.caller).await?;
    let key = st.app.managed_key(&m, auth.org(), &id).await?;
    Ok(respond::single(
        &ctx,
        StatusCode::OK,
        &ApiKeyResponse::from(&key),
    ))
}

#[utoipa::path(
    delete,
    path = "/v1/api-keys/{key_id}",
    operation_id = "revokeApiKey",
    tag = "API keys",
    summary = "Revoke an API key: it stops working at once",
    params(
        ("key_id" = String, Path, pattern = "^key_[A-Za-z0-9]+$", description = "An API key id (`key_…`)."),
    ),
    responses(
        (status = 204, description = "Revoked (revoking again keeps the first time)"),
        (status = 404, description = "No such key that you manage", body = crate::http::error::ErrorEnvelope<'static>),
    ),
    security(("bearer" = ["applications:write"]), ("oauth2" = ["applications:write"])),
)]
pub(crate) async fn revoke(
    auth: Authorized<ApplicationsWrite>,
    ctx: RequestCtx,
    State(st): State<AppState>,
    Id(id): Id<ApiKeyId>,
) -> Result<Response, ApiError> {
    let m = st.app.manager(&auth.caller).await?;
    st.app
        .revoke_key(&m, auth.org(), &id, &auth.origin(&ctx))
        .await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

#[utoipa::path(
    get,
    path = "/v1/api-keys/{key_id}/usage",
    operation_id = "getApiKeyUsage",
    tag = "API keys",
    summary = "Requests and 429s per minute made with the key",
    params(
        ("key_id" = String, Path, pattern = "^key_[A-Za-z0-9]+$", description = "An API key id (`key_…`)."),
        ("from" = Option<String>, Query, format = DateTime, description = "Start (RFC 3339; default: an hour before `to`)."),
        ("to" = Option<String>, Query, format = DateTime, description = "End, exclusive (RFC 3339; default: now, the current minute included); at most 24 hours after `from`."),
    ),
    responses(
        (status = 200, description = "One bucket per UTC minute in [from, to), oldest first; a minute's counts are final 60 s after it ends", body = crate::http::respond::Single<'static, Vec<crate::api::responses::UsageBucketResponse>>),
        (status = 400, description = "Invalid query parameter", body = crate::http::error::ErrorEnvelope<'static>),
        (status = 404, description = "No such key that you manage", body = crate::http::error::ErrorEnvelope<'static>),
    ),
    security(("bearer" = ["applications:read"]), ("oauth2" = ["applications:read"])),
)]
pub(crate) async fn usage(
    auth: Authorized<ApplicationsRead>,
    ctx: RequestCtx,
    State(st): State<AppState>,
    Id(id): Id<ApiKeyId>,
    mut query: Query,
) -> Result<Response, ApiError> {
    let range = usage_range(&mut query);
    query.finish()?;
    let Some(range) = range else {
        return Err(ApiError::internal());
    };
    let m = st.app.manager(&auth.caller).await?;
    st.app.managed_key(&m, auth.org(), &id).await?;
    let buckets = st
        .app
        .usage(auth.org(), &Credential::ApiKey(id), range)
        .await?;
    let body: Vec<UsageBucketResponse> = buckets.iter().map(UsageBucketResponse::from).collect();
    Ok(respond::single(&ctx, StatusCode::OK, &body))
}
