//! `/v1/applications` (D46): an organization's client applications,
//! managed through the API with the caller's rights. The rules are the
//! application layer's ([`gatehouse_app::manage`]); these handlers parse,
//! call and answer.

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use gatehouse_app::Credential;
use gatehouse_app::manage::ApplicationType;
use gatehouse_domain::{ClientId, Timestamp, UsageRange};

use crate::api::extract::{
    ApplicationsRead, ApplicationsWrite, Authorized, Body, Id, IdBody, IdMaybeBody, Query,
};
use crate::api::requests::{
    CreateApplicationRequest, RotateSecretRequest, UpdateApplicationRequest,
};
use crate::api::responses::{
    ApplicationResponse, RegisteredApplication, RotatedSecretResponse, UsageBucketResponse,
};
use crate::http::error::ApiError;
use crate::http::middleware::RequestCtx;
use crate::http::respond;
use crate::state::AppState;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/applications", get(list).post(create))
        .route(
            "/applications/{app_id}",
            get(show).patch(update).delete(remove),
        )
        .route("/applications/{app_id}/secret", post(rotate_secret))
        .route("/applications/{app_id}/usage", get(usage))
}

/// D46: an answer carrying a secret is never stored by a cache.
pub(crate) fn secret_answer(mut res: Response) -> Response {
    crate::http::respond::no_store(res.headers_mut());
    res
}

/// D46 (continued): the `owner_id` filter of the lists of applications
/// and keys.
pub(crate) fn owner_id(s: &str) -> Result<gatehouse_domain::UserId, String> {
    gatehouse_domain::UserId::parse(s).ok_or_else(|| "must be a user id (usr_…)".to_owned())
}

/// D46 usage: `from` and `to` (RFC 3339; at most 24 hours; default the
/// last hour).
pub(crate) fn usage_range(query: &mut Query) -> Option<UsageRange> {
    let ts = |s: &str| {
        Timestamp::parse_rfc3339(s).ok_or_else(|| {
            "must be an RFC 3339 date and time, e.g. 2026-11-23T10:00:00Z".to_owned()
        })
    };
    let from = query.field("from", ts);
    let to = query.field("to", ts);
    match UsageRange::new(from, to, Timestamp::now()) {
        Ok(r) => Some(r),
        Err(gatehouse_domain::DomainError::Validation(issues)) => {
            query.issues().extend(issues);
            None
        }
        Err(_) => None,
    }
}

#[utoipa::path(
    get,
    path = "/v1/applications",
    operation_id = "listApplications",
    tag = "Applications",
    summary = "List the applications you manage, oldest first (an editor sees its own)",
    params(
        ("limit" = Option<u32>, Query, minimum = 1, description = "Page size (default 20, at most 100); values above 100 are clamped to 100."),
        ("offset" = Option<u64>, Query, description = "Items to skip."),
        ("type" = Option<crate::http::schemas::ApplicationTypeName>, Query, description = "Only applications of this type."),
        ("suspended" = Option<bool>, Query, description = "Only suspended applications (`true`: `suspended_reason` is not null) or only the others (`false`)."),
        ("owner_id" = Option<String>, Query, pattern = "^usr_[A-Za-z0-9]+$", description = "Only the applications this person owns (an editor gets an empty page for anyone but itself)."),
    ),
    responses(
        (status = 200, description = "A page of applications", body = crate::http::respond::List<'static, crate::api::responses::ApplicationResponse<'static>>),
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
    let kind = query.field("type", ApplicationType::parse);
    let suspended = query.field("suspended", |s| match s {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err("must be true or false".to_owned()),
    });
    let owner = query.field("owner_id", owner_id);
    query.finish()?;
    let m = st.app.manager(&auth.caller).await?;
    let filter = gatehouse_app::manage::ApplicationFilter {
        kind,
        suspended,
        owner,
    };
    let listing = st
        .app
        .list_applications(&m, auth.org(), filter, page)
        .await?;
    Ok(respond::list::<_, ApplicationResponse<'_>>(
        &ctx, &listing, page,
    ))
}

#[utoipa::path(
    post,
    path = "/v1/applications",
    operation_id = "createApplication",
    tag = "Applications",
    summary = "Register an application; a confidential one's secret is in this answer only",
    request_body(content = crate::api::requests::CreateApplicationRequest, content_type = "application/json"),
    responses(
        (status = 201, description = "The new application and, when confidential, its `client_secret`; Location names it", body = crate::http::respond::Single<'static, crate::api::responses::RegisteredApplication<'static>>),
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
    Body(reg): Body<CreateApplicationRequest>,
) -> Result<Response, ApiError> {
    let m = st.app.manager(&auth.caller).await?;
    let r = st
        .app
        .register_application(&m, auth.org(), reg, &auth.origin(&ctx))
        .await?;
    let location = format!("{}/applications/{}", st.config.base_url(), r.client.id);
    Ok(secret_answer(respond::created(
        &ctx,
        &location,
        &RegisteredApplication {
            application: ApplicationResponse::from(&r.client),
            client_secret: r.secret.as_deref(),
        },
    )))
}

#[utoipa::path(
    get,
    path = "/v1/applications/{app_id}",
    operation_id = "getApplication",
    tag = "Applications",
    summary = "Get an application",
    params(
        ("app_id" = String, Path, pattern = "^app_[A-Za-z0-9]+$", description = "An application id (`app_…`), also its `client_id`."),
    ),
    responses(
        (status = 200, description = "The application", body = crate::http::respond::Single<'static, crate::api::responses::ApplicationResponse<'static>>),
        (status = 404, description = "No such application that you manage", body = crate::http::error::ErrorEnvelope<'static>),
    ),
    security(("bearer" = ["applications:read"]), ("oauth2" = ["applications:read"])),
)]
pub(crate) async fn show(
    auth: Authorized<ApplicationsRead>,
    ctx: RequestCtx,
    State(st): State<AppState>,
    Id(id): Id<ClientId>,
) -> Result<Response, ApiError> {
    let m = st.app.manager(&auth.caller).await?;
    let app = st.app.managed_application(&m, auth.org(), &id).await?;
    Ok(respond::single(
        &ctx,
        StatusCode::OK,
        &ApplicationResponse::from(&app),
    ))
}

#[utoipa::path(
    patch,
    path = "/v1/applications/{app_id}",
    operation_id = "updateApplication",
    tag = "Applications",
    summary = "Change an application (redirect URIs and scopes need every scope it is registered for)",
    params(
        ("app_id" = String, Path, pattern = "^app_[A-Za-z0-9]+$", description = "An application id (`app_…`)."),
    ),
    request_body(content = crate::api::requests::UpdateApplicationRequest, content_type = "application/json"),
    responses(
        (status = 200, description = "The changed application", body = crate::http::respond::Single<'static, crate::api::responses::ApplicationResponse<'static>>),
        (status = 400, description = "Invalid fields", body = crate::http::error::ErrorEnvelope<'static>),
        (status = 403, description = "The change needs a scope you do not hold (moving an application needs an admin or an organization-wide credential)", body = crate::http::error::ErrorEnvelope<'static>),
        (status = 404, description = "No such application that you manage, or no such user for `owner_id`", body = crate::http::error::ErrorEnvelope<'static>),
        (status = 413, description = "Body over 64 KiB", body = crate::http::error::ErrorEnvelope<'static>),
        (status = 415, description = "Not JSON", body = crate::http::error::ErrorEnvelope<'static>),
        (status = 422, description = "`owner_id` names a user who is not active (`INVALID_STATE_TRANSITION`)", body = crate::http::error::ErrorEnvelope<'static>),
    ),
    security(("bearer" = ["applications:write"]), ("oauth2" = ["applications:write"])),
)]
pub(crate) async fn update(
    auth: Authorized<ApplicationsWrite>,
    ctx: RequestCtx,
    State(st): State<AppState>,
    req: IdBody<ClientId, UpdateApplicationRequest>,
) -> Result<Response, ApiError> {
    let m = st.app.manager(&auth.caller).await?;
    let app = st
        .app
        .update_application(&m, auth.org(), &req.id, req.body, &auth.origin(&ctx))
        .await?;
    Ok(respond::single(
        &ctx,
        StatusCode::OK,
        &ApplicationResponse::from(&app),
    ))
}

#[utoipa::path(
    delete,
    path = "/v1/applications/{app_id}",
    operation_id = "deleteApplication",
    tag = "Applications",
    summary = "Delete an application: every token, refresh token, code and session it holds stops working at once",
    params(
        ("app_id" = String, Path, pattern = "^app_[A-Za-z0-9]+$", description = "An application id (`app_…`)."),
    ),
    responses(
        (status = 204, description = "Deleted"),
        (status = 404, description = "No such application that you manage", body = crate::http::error::ErrorEnvelope<'static>),
    ),
    security(("bearer" = ["applications:write"]), ("oauth2" = ["applications:write"])),
)]
pub(crate) async fn remove(
    auth: Authorized<ApplicationsWrite>,
    ctx: RequestCtx,
    State(st): State<AppState>,
    Id(id): Id<ClientId>,
) -> Result<Response, ApiError> {
    let m = st.app.manager(&auth.caller).await?;
    st.app
        .delete_application(&m, auth.org(), &id, &auth.origin(&ctx))
        .await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

#[utoipa::path(
    post,
    path = "/v1/applications/{app_id}/secret",
    operation_id = "rotateApplicationSecret",
    tag = "Applications",
    summary = "Issue a new secret (in this answer only); the previous one works for grace_seconds more",
    params(
        ("app_id" = String, Path, pattern = "^app_[A-Za-z0-9]+$", description = "An application id (`app_…`)."),
    ),
    request_body(content = Option<crate::api::requests::RotateSecretRequest>, content_type = "application/json", description = "Optional; without it the previous secret stops working now."),
    responses(
        (status = 201, description = "The new `client_secret`", body = crate::http::respond::Single<'static, crate::api::responses::RotatedSecretResponse<'static>>),
        (status = 400, description = "Invalid fields", body = crate::http::error::ErrorEnvelope<'static>),
        (status = 403, description = "Rotating needs a scope you do not hold", body = crate::http::error::ErrorEnvelope<'static>),
        (status = 404, description = "No such application that you manage", body = crate::http::error::ErrorEnvelope<'static>),
        (status = 413, description = "Body over 64 KiB", body = crate::http::error::ErrorEnvelope<'static>),
        (status = 415, description = "Not JSON", body = crate::http::error::ErrorEnvelope<'static>),
        (status = 422, description = "A public application has no secret, or one moved away from a former owner is rotated with a grace (`INVALID_STATE_TRANSITION`: rotate with no grace)", body = crate::http::error::ErrorEnvelope<'static>),
    ),
    security(("bearer" = ["applications:write"]), ("oauth2" = ["applications:write"])),
)]
pub(crate) async fn rotate_secret(
    auth: Authorized<ApplicationsWrite>,
    ctx: RequestCtx,
    State(st): State<AppState>,
    req: IdMaybeBody<ClientId, RotateSecretRequest>,
) -> Result<Response, ApiError> {
    let m = st.app.manager(&auth.caller).await?;
    let r = st
        .app
        .rotate_application_secret(&m, auth.org(), &req.id, req.body, &auth.origin(&ctx))
        .await?;
    Ok(secret_answer(respond::single(
        &ctx,
        StatusCode::CREATED,
        &RotatedSecretResponse {
            application: ApplicationResponse::from(&r.client),
            client_secret: &r.secret,
            previous_secret_expires_at: r.previous_valid_until,
        },
    )))
}

#[utoipa::path(
    get,
    path = "/v1/applications/{app_id}/usage",
    operation_id = "getApplicationUsage",
    tag = "Applications",
    summary = "Requests and 429s per minute made with the application's access tokens",
    params(
        ("app_id" = String, Path, pattern = "^app_[A-Za-z0-9]+$", description = "An application id (`app_…`)."),
        ("from" = Option<String>, Query, format = DateTime, description = "Start (RFC 3339; default: an hour before `to`)."),
        ("to" = Option<String>, Query, format = DateTime, description = "End, exclusive (RFC 3339; default: now, the current minute included); at most 24 hours after `from`."),
    ),
    responses(
        (status = 200, description = "One bucket per UTC minute in [from, to), oldest first; a minute's counts are final 60 s after it ends", body = crate::http::respond::Single<'static, Vec<crate::api::responses::UsageBucketResponse>>),
        (status = 400, description = "Invalid query parameter", body = crate::http::error::ErrorEnvelope<'static>),
        (status = 404, description = "No such application that you manage", body = crate::http::error::ErrorEnvelope<'static>),
    ),
    security(("bearer" = ["applications:read"]), ("oauth2" = ["applications:read"])),
)]
pub(crate) async fn usage(
    auth: Authorized<ApplicationsRead>,
    ctx: RequestCtx,
    State(st): State<AppState>,
    Id(id): Id<ClientId>,
    mut query: Query,
) -> Result<Response, ApiError> {
    let range = usage_range(&mut query);
    query.finish()?;
    let Some(range) = range else {
        return Err(ApiError::internal());
    };
    let m = st.app.manager(&auth.caller).await?;
    st.app.managed_application(&m, auth.org(), &id).await?;
    let buckets = st
        .app
        .usage(auth.org(), &Credential::Application(id), range)
        .await?;
    let body: Vec<UsageBucketResponse> = buckets.iter().map(UsageBucketResponse::from).collect();
    Ok(respond::single(&ctx, StatusCode::OK, &body))
}
