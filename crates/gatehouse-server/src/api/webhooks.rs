//! `/v1/webhook-endpoints` (D55): an organization's webhook endpoints,
//! for admins and organization-wide credentials (`webhooks:read`,
//! `webhooks:write`, D29 continued).

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use gatehouse_domain::EndpointId;

use crate::api::applications::secret_answer;
use crate::api::extract::{
    Authorized, Body, Id, IdBody, IdMaybeBody, Query, WebhooksRead, WebhooksWrite,
};
use crate::api::requests::{
    CreateWebhookEndpointRequest, RedeliverRequest, ReplayRequest, RotateWebhookSecretRequest,
    UpdateWebhookEndpointRequest,
};
use crate::api::responses::{
    WebhookAttemptResponse, WebhookEndpointResponse, WebhookEndpointWithSecret,
};
use crate::http::error::ApiError;
use crate::http::middleware::RequestCtx;
use crate::http::respond;
use crate::state::AppState;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/webhook-endpoints", get(list).post(create))
        .route(
            "/webhook-endpoints/{endpoint_id}",
            get(show).patch(update).delete(remove),
        )
        .route(
            "/webhook-endpoints/{endpoint_id}/secret",
            post(rotate_secret),
        )
        .route("/webhook-endpoints/{endpoint_id}/attempts", get(attempts))
        .route("/webhook-endpoints/{endpoint_id}/test", post(test))
        .route("/webhook-endpoints/{endpoint_id}/replay", post(replay))
        .route("/events/{event_id}/redeliver", post(redeliver))
}

#[utoipa::path(
    get,
    path = "/v1/webhook-endpoints",
    operation_id = "listWebhookEndpoints",
    tag = "Webhooks",
    summary = "List the organization's webhook endpoints, newest first",
    params(
        ("limit" = Option<u32>, Query, minimum = 1, description = "Page size (default 20, at most 100); values above 100 are clamped to 100."),
        ("offset" = Option<u64>, Query, description = "Items to skip."),
    ),
    responses(
        (status = 200, description = "A page of endpoints", body = crate::http::respond::List<'static, crate::api::responses::WebhookEndpointResponse<'static>>),
        (status = 400, description = "Invalid query parameter", body = crate::http::error::ErrorEnvelope<'static>),
    ),
    security(("bearer" = ["webhooks:read"]), ("oauth2" = ["webhooks:read"])),
)]
pub(crate) async fn list(
    auth: Authorized<WebhooksRead>,
    ctx: RequestCtx,
    State(st): State<AppState>,
    mut query: Query,
) -> Result<Response, ApiError> {
    let page = query.page();
    query.finish()?;
    let listing = st.app.list_endpoints(auth.org(), page).await?;
    Ok(respond::list::<_, WebhookEndpointResponse<'_>>(
        &ctx, &listing, page,
    ))
}

#[utoipa::path(
    post,
    path = "/v1/webhook-endpoints",
    operation_id = "createWebhookEndpoint",
    tag = "Webhooks",
    summary = "Register a webhook endpoint; its signing secret is in this answer only",
    request_body(content = crate::api::requests::CreateWebhookEndpointRequest, content_type = "application/json"),
    responses(
        (status = 201, description = "The endpoint and its `secret`; Location names it", body = crate::http::respond::Single<'static, crate::api::responses::WebhookEndpointWithSecret<'static>>),
        (status = 400, description = "Invalid fields (`url`, `description`, `enabled_events`, `ordering`)", body = crate::http::error::ErrorEnvelope<'static>),
        (status = 413, description = "Body over 64 KiB", body = crate::http::error::ErrorEnvelope<'static>),
        (status = 415, description = "Not JSON", body = crate::http::error::ErrorEnvelope<'static>),
        (status = 422, description = "`URL_NOT_ALLOWED`: the URL's host is or resolves to an address webhooks are not sent to; `LIMIT_REACHED`: the organization has 16 endpoints", body = crate::http::error::ErrorEnvelope<'static>),
    ),
    security(("bearer" = ["webhooks:write"]), ("oauth2" = ["webhooks:write"])),
)]
pub(crate) async fn create(
    auth: Authorized<WebhooksWrite>,
    ctx: RequestCtx,
    State(st): State<AppState>,
    Body(req): Body<CreateWebhookEndpointRequest>,
) -> Result<Response, ApiError> {
    let m = st.app.manager(&auth.caller).await?;
    let (endpoint, secret) = st
        .app
        .create_endpoint(&m, auth.org(), req, &auth.origin(&ctx))
        .await?;
    let location = format!("{}/webhook-endpoints/{}", st.config.base_url(), endpoint.id);
    Ok(secret_answer(respond::created(
        &ctx,
        &location,
        &WebhookEndpointWithSecret {
            endpoint: WebhookEndpointResponse::from(&endpoint),
            secret: &secret,
        },
    )))
}

#[utoipa::path(
    get,
    path = "/v1/webhook-endpoints/{endpoint_id}",
    operation_id = "getWebhookEndpoint",
    tag = "Webhooks",
    summary = "Get a webhook endpoint",
    params(
        ("endpoint_id" = String, Path, pattern = "^we_[A-Za-z0-9]+$", description = "A webhook endpoint id (`we_…`)."),
    ),
    responses(
        (status = 200, description = "The endpoint", body = crate::http::respond::Single<'static, crate::api::responses::WebhookEndpointResponse<'static>>),
        (status = 404, description = "No such endpoint", body = crate::http::error::ErrorEnvelope<'static>),
    ),
    security(("bearer" = ["webhooks:read"]), ("oauth2" = ["webhooks:read"])),
)]
pub(crate) async fn show(
    auth: Authorized<WebhooksRead>,
    ctx: RequestCtx,
    State(st): State<AppState>,
    Id(id): Id<EndpointId>,
) -> Result<Response, ApiError> {
    let e = st.app.get_endpoint(auth.org(), &id).await?;
    Ok(respond::single(
        &ctx,
        StatusCode::OK,
        &WebhookEndpointResponse::from(&e),
    ))
}

#[utoipa::path(
    patch,
    path = "/v1/webhook-endpoints/{endpoint_id}",
    operation_id = "updateWebhookEndpoint",
    tag = "Webhooks",
    summary = "Change a webhook endpoint; enabling it makes you its owner",
    params(
        ("endpoint_id" = String, Path, pattern = "^we_[A-Za-z0-9]+$", description = "A webhook endpoint id (`we_…`)."),
    ),
    request_body(content = crate::api::requests::UpdateWebhookEndpointRequest, content_type = "application/json"),
    responses(
        (status = 200, description = "The endpoint as changed", body = crate::http::respond::Single<'static, crate::api::responses::WebhookEndpointResponse<'static>>),
        (status = 400, description = "Invalid fields", body = crate::http::error::ErrorEnvelope<'static>),
        (status = 404, description = "No such endpoint", body = crate::http::error::ErrorEnvelope<'static>),
        (status = 413, description = "Body over 64 KiB", body = crate::http::error::ErrorEnvelope<'static>),
        (status = 415, description = "Not JSON", body = crate::http::error::ErrorEnvelope<'static>),
        (status = 422, description = "`URL_NOT_ALLOWED`: the new URL's host is or resolves to an address webhooks are not sent to", body = crate::http::error::ErrorEnvelope<'static>),
    ),
    security(("bearer" = ["webhooks:write"]), ("oauth2" = ["webhooks:write"])),
)]
pub(crate) async fn update(
    auth: Authorized<WebhooksWrite>,
    ctx: RequestCtx,
    State(st): State<AppState>,
    req: IdBody<EndpointId, UpdateWebhookEndpointRequest>,
) -> Result<Response, ApiError> {
    let m = st.app.manager(&auth.caller).await?;
    let e = st
        .app
        .update_endpoint(&m, auth.org(), &req.id, req.body, &auth.origin(&ctx))
        .await?;
    Ok(respond::single(
        &ctx,
        StatusCode::OK,
        &WebhookEndpointResponse::from(&e),
    ))
}

#[utoipa::path(
    delete,
    path = "/v1/webhook-endpoints/{endpoint_id}",
    operation_id = "deleteWebhookEndpoint",
    tag = "Webhooks",
    summary = "Delete a webhook endpoint; its pending deliveries are cancelled",
    params(
        ("endpoint_id" = String, Path, pattern = "^we_[A-Za-z0-9]+$", description = "A webhook endpoint id (`we_…`)."),
    ),
    responses(
        (status = 204, description = "Deleted"),
        (status = 404, description = "No such endpoint", body = crate::http::error::ErrorEnvelope<'static>),
    ),
    security(("bearer" = ["webhooks:write"]), ("oauth2" = ["webhooks:write"])),
)]
pub(crate) async fn remove(
    auth: Authorized<WebhooksWrite>,
    ctx: RequestCtx,
    State(st): State<AppState>,
    Id(id): Id<EndpointId>,
) -> Result<Response, ApiError> {
    st.app
        .delete_endpoint(auth.org(), &id, &auth.origin(&ctx))
        .await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

#[utoipa::path(
    post,
    path = "/v1/webhook-endpoints/{endpoint_id}/secret",
    operation_id = "rotateWebhookEndpointSecret",
    tag = "Webhooks",
    summary = "Issue a new signing secret (in this answer only); the previous one keeps signing for grace_seconds",
    params(
        ("endpoint_id" = String, Path, pattern = "^we_[A-Za-z0-9]+$", description = "A webhook endpoint id (`we_…`)."),
    ),
    request_body(content = Option<crate::api::requests::RotateWebhookSecretRequest>, content_type = "application/json", description = "Optional; without it the previous secret signs for 86,400 seconds more."),
    responses(
        (status = 201, description = "The endpoint and its new `secret`", body = crate::http::respond::Single<'static, crate::api::responses::WebhookEndpointWithSecret<'static>>),
        (status = 400, description = "Invalid fields", body = crate::http::error::ErrorEnvelope<'static>),
        (status = 404, description = "No such endpoint", body = crate::http::error::ErrorEnvelope<'static>),
        (status = 413, description = "Body over 64 KiB", body = crate::http::error::ErrorEnvelope<'static>),
        (status = 415, description = "Not JSON", body = crate::http::error::ErrorEnvelope<'static>),
    ),
    security(("bearer" = ["webhooks:write"]), ("oauth2" = ["webhooks:write"])),
)]
pub(crate) async fn rotate_secret(
    auth: Authorized<WebhooksWrite>,
    ctx: RequestCtx,
    State(st): State<AppState>,
    req: IdMaybeBody<EndpointId, RotateWebhookSecretRequest>,
) -> Result<Response, ApiError> {
    let (endpoint, secret) = st
        .app
        .rotate_endpoint_secret(auth.org(), &req.id, req.body, &auth.origin(&ctx))
        .await?;
    Ok(secret_answer(respond::single(
        &ctx,
        StatusCode::CREATED,
        &WebhookEndpointWithSecret {
            endpoint: WebhookEndpointResponse::from(&endpoint),
            secret: &secret,
        },
    )))
}

#[utoipa::path(
    get,
    path = "/v1/webhook-endpoints/{endpoint_id}/attempts",
    operation_id = "listWebhookAttempts",
    tag = "Webhooks",
    summary = "The endpoint's delivery log, newest first: attempts made and the next ones queued",
    params(
        ("endpoint_id" = String, Path, pattern = "^we_[A-Za-z0-9]+$", description = "A webhook endpoint id (`we_…`)."),
        ("event" = Option<String>, Query, pattern = "^evt_[A-Za-z0-9]+$", description = "Only the attempts of this event."),
        ("status" = Option<String>, Query, description = "`succeeded`, `failed` or `pending`."),
        ("from" = Option<String>, Query, format = DateTime, description = "Made (or, queued, due) at or after (RFC 3339)."),
        ("to" = Option<String>, Query, format = DateTime, description = "Made (or due) before (RFC 3339)."),
        ("limit" = Option<u32>, Query, minimum = 1, description = "Page size (default 20, at most 100); values above 100 are clamped to 100."),
        ("offset" = Option<u64>, Query, description = "Items to skip."),
    ),
    responses(
        (status = 200, description = "A page of attempts", body = crate::http::respond::List<'static, crate::api::responses::WebhookAttemptResponse<'static>>),
        (status = 400, description = "Invalid query parameter", body = crate::http::error::ErrorEnvelope<'static>),
        (status = 404, description = "No such endpoint", body = crate::http::error::ErrorEnvelope<'static>),
    ),
    security(("bearer" = ["webhooks:read"]), ("oauth2" = ["webhooks:read"])),
)]
pub(crate) async fn attempts(
    auth: Authorized<WebhooksRead>,
    ctx: RequestCtx,
    State(st): State<AppState>,
    Id(id): Id<EndpointId>,
    mut query: Query,
) -> Result<Response, ApiError> {
    let page = query.page();
    let ts = |s: &str| {
        gatehouse_domain::Timestamp::parse_rfc3339(s).ok_or_else(|| {
            "must be an RFC 3339 date and time, e.g. 2026-11-23T10:00:00Z".to_owned()
        })
    };
    let filter = gatehouse_app::AttemptFilter {
        event: query.field("event", |s| {
            gatehouse_domain::EventId::parse(s)
                .ok_or_else(|| "must be an event id (evt_…)".to_owned())
        }),
        status: query.field("status", |s| {
            gatehouse_app::AttemptStatus::parse(s)
                .ok_or_else(|| "must be succeeded, failed or pending".to_owned())
        }),
        from: query.field("from", ts),
        to: query.field("to", ts),
    };
    query.finish()?;
    let listing = st.app.list_attempts(auth.org(), &id, &filter, page).await?;
    Ok(respond::list::<_, WebhookAttemptResponse<'_>>(
        &ctx, &listing, page,
    ))
}

#[utoipa::path(
    post,
    path = "/v1/webhook-endpoints/{endpoint_id}/test",
    operation_id = "testWebhookEndpoint",
    tag = "Webhooks",
    summary = "Send a webhook_endpoint.test event to this endpoint now (also when disabled); the attempt",
    params(
        ("endpoint_id" = String, Path, pattern = "^we_[A-Za-z0-9]+$", description = "A webhook endpoint id (`we_…`)."),
    ),
    responses(
        (status = 200, description = "The attempt, once made (its `status` says how it went)", body = crate::http::respond::Single<'static, crate::api::responses::WebhookAttemptResponse<'static>>),
        (status = 404, description = "No such endpoint", body = crate::http::error::ErrorEnvelope<'static>),
    ),
    security(("bearer" = ["webhooks:write"]), ("oauth2" = ["webhooks:write"])),
)]
pub(crate) async fn test(
    auth: Authorized<WebhooksWrite>,
    ctx: RequestCtx,
    State(st): State<AppState>,
    Id(id): Id<EndpointId>,
) -> Result<Response, ApiError> {
    let attempt = st
        .app
        .test_endpoint(auth.org(), &id, &auth.origin(&ctx))
        .await?;
    Ok(respond::single(
        &ctx,
        StatusCode::OK,
        &WebhookAttemptResponse::from(&attempt),
    ))
}

/// `{"queued": n}`: what a replay queued.
#[derive(serde::Serialize, utoipa::ToSchema)]
#[schema(as = WebhookReplayQueued)]
pub struct Queued {
    pub queued: u64,
}

#[utoipa::path(
    post,
    path = "/v1/webhook-endpoints/{endpoint_id}/replay",
    operation_id = "replayWebhookEndpoint",
    tag = "Webhooks",
    summary = "Queue a fresh schedule for each event in [since, until) the endpoint wants (at most 10,000 a call)",
    params(
        ("endpoint_id" = String, Path, pattern = "^we_[A-Za-z0-9]+$", description = "A webhook endpoint id (`we_…`)."),
    ),
    request_body(content = crate::api::requests::ReplayRequest, content_type = "application/json"),
    responses(
        (status = 202, description = "How many events were queued", body = crate::http::respond::Single<'static, Queued>),
        (status = 400, description = "Invalid fields, or `since` older than the event retention", body = crate::http::error::ErrorEnvelope<'static>),
        (status = 404, description = "No such endpoint", body = crate::http::error::ErrorEnvelope<'static>),
        (status = 413, description = "Body over 64 KiB", body = crate::http::error::ErrorEnvelope<'static>),
        (status = 415, description = "Not JSON", body = crate::http::error::ErrorEnvelope<'static>),
        (status = 422, description = "The endpoint is disabled (`INVALID_STATE_TRANSITION`)", body = crate::http::error::ErrorEnvelope<'static>),
    ),
    security(("bearer" = ["webhooks:write"]), ("oauth2" = ["webhooks:write"])),
)]
pub(crate) async fn replay(
    auth: Authorized<WebhooksWrite>,
    ctx: RequestCtx,
    State(st): State<AppState>,
    req: IdBody<EndpointId, ReplayRequest>,
) -> Result<Response, ApiError> {
    let r = req.body;
    let queued = st
        .app
        .replay(auth.org(), &req.id, r.since, r.until, r.only_failed)
        .await?;
    Ok(respond::single(
        &ctx,
        StatusCode::ACCEPTED,
        &Queued { queued },
    ))
}

#[utoipa::path(
    post,
    path = "/v1/events/{event_id}/redeliver",
    operation_id = "redeliverEvent",
    tag = "Webhooks",
    summary = "Queue an event for one endpoint again; the queued attempt",
    params(
        ("event_id" = String, Path, pattern = "^evt_[A-Za-z0-9]+$", description = "An event id (`evt_…`)."),
    ),
    request_body(content = crate::api::requests::RedeliverRequest, content_type = "application/json"),
    responses(
        (status = 202, description = "The queued attempt", body = crate::http::respond::Single<'static, crate::api::responses::WebhookAttemptResponse<'static>>),
        (status = 400, description = "Invalid fields", body = crate::http::error::ErrorEnvelope<'static>),
        (status = 404, description = "No such event or endpoint", body = crate::http::error::ErrorEnvelope<'static>),
        (status = 413, description = "Body over 64 KiB", body = crate::http::error::ErrorEnvelope<'static>),
        (status = 415, description = "Not JSON", body = crate::http::error::ErrorEnvelope<'static>),
        (status = 422, description = "The endpoint is disabled (`INVALID_STATE_TRANSITION`)", body = crate::http::error::ErrorEnvelope<'static>),
    ),
    security(("bearer" = ["webhooks:write"]), ("oauth2" = ["webhooks:write"])),
)]
pub(crate) async fn redeliver(
    auth: Authorized<WebhooksWrite>,
    ctx: RequestCtx,
    State(st): State<AppState>,
    req: IdBody<gatehouse_domain::EventId, RedeliverRequest>,
) -> Result<Response, ApiError> {
    let attempt = st.app.redeliver(auth.org(), &req.id, &req.body).await?;
    Ok(respond::single(
        &ctx,
        StatusCode::ACCEPTED,
        &WebhookAttemptResponse::from(&attempt),
    ))
}
