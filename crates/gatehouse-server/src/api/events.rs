//! `/v1/events` (D54): the organization's record of committed changes,
//! newest first or caught up with `after_sequence`, and how an event shows
//! its objects ([`Published`]: through the same response types as their
//! `GET`).

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::get;
use gatehouse_domain::event::{Event, EventFilter, Publish, TypePattern};
use gatehouse_domain::{API_VERSION, EventId, FieldIssue, Listing, Product, Timestamp, User};
use serde::Serialize;
use serde_json::value::RawValue;
use utoipa::ToSchema;

use crate::api::extract::{Authorized, EventsRead, Id, Query};
use crate::api::responses::{
    ApiKeyResponse, ApplicationResponse, OrganizationResponse, ProductResponse, UserResponse,
};
use crate::http::error::ApiError;
use crate::http::middleware::RequestCtx;
use crate::http::{respond, schemas};
use crate::state::AppState;

/// Shows resources in events exactly as their `GET` does (D54): the
/// server's response types, serialized compactly.
pub struct Published;

impl Publish for Published {
    fn product(&self, p: &Product) -> String {
        serde_json::to_string(&ProductResponse::from(p)).unwrap_or_else(|_| "{}".into())
    }
    fn user(&self, u: &User) -> String {
        serde_json::to_string(&UserResponse::from(u)).unwrap_or_else(|_| "{}".into())
    }
    fn application(&self, c: &gatehouse_domain::Client) -> String {
        serde_json::to_string(&ApplicationResponse::from(c)).unwrap_or_else(|_| "{}".into())
    }
    fn api_key(&self, k: &gatehouse_domain::ApiKey) -> String {
        serde_json::to_string(&ApiKeyResponse::from(k)).unwrap_or_else(|_| "{}".into())
    }
    fn organization(&self, o: &gatehouse_domain::Organization) -> String {
        serde_json::to_string(&OrganizationResponse::from(o)).unwrap_or_else(|_| "{}".into())
    }
    fn consent(
        &self,
        user: &gatehouse_domain::UserId,
        consent: &gatehouse_domain::Consent,
        client: &gatehouse_domain::Client,
    ) -> String {
        let item =
            crate::api::profile::ConsentedApplication::from(&(consent.clone(), client.clone()));
        let mut object = serde_json::to_value(&item).unwrap_or_default();
        if let Some(map) = object.as_object_mut() {
            map.insert("user_id".into(), user.as_str().into());
        }
        object.to_string()
    }
    fn event(&self, org: &gatehouse_domain::OrgId, e: &Event) -> String {
        serde_json::to_string(&EventResponse::of(e, org.as_str())).unwrap_or_else(|_| "{}".into())
    }
    fn webhook_endpoint(&self, e: &gatehouse_domain::webhook::Endpoint) -> String {
        serde_json::to_string(&crate::api::responses::WebhookEndpointResponse::from(e))
            .unwrap_or_else(|_| "{}".into())
    }
    fn factor(&self, user: &gatehouse_domain::UserId, f: &gatehouse_domain::mfa::Factor) -> String {
        let mut object = serde_json::to_value(crate::api::responses::FactorResponse::from(f))
            .unwrap_or_default();
        if let Some(map) = object.as_object_mut() {
            map.insert("user_id".into(), user.as_str().into());
        }
        object.to_string()
    }
    fn security(&self, p: &gatehouse_domain::mfa::SecurityPolicy) -> String {
        serde_json::to_string(&crate::api::responses::SecurityResponse::from(p))
            .unwrap_or_else(|_| "{}".into())
    }
    fn session(&self, s: &gatehouse_domain::session::Session) -> String {
        serde_json::to_string(&crate::api::responses::SessionResponse::of(s, None))
            .unwrap_or_else(|_| "{}".into())
    }
}

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/events", get(list))
        .route("/events/{event_id}", get(show))
}

/// `actor` (D54): who made the change.
#[derive(Serialize, ToSchema)]
#[schema(as = EventActor)]
pub struct ActorResponse<'a> {
    /// `user`, `client`, `api_key`, `operator` or `system`.
    #[schema(value_type = String)]
    pub r#type: &'static str,
    #[schema(value_type = Option<String>, required = true)]
    pub id: Option<&'a str>,
    /// The client a person's token was issued to, or the acting client.
    #[schema(value_type = Option<String>, required = true)]
    pub client_id: Option<&'a str>,
}

/// `request` (D54): the request the change came through.
#[derive(Serialize, ToSchema)]
#[schema(as = EventRequest)]
pub struct RequestResponse<'a> {
    #[schema(value_type = String, pattern = "^req_[0-9a-f]{32}$")]
    pub id: &'a str,
    #[schema(value_type = Option<String>, required = true)]
    pub idempotency_key: Option<&'a str>,
}

/// `data` (D54): the object as its `GET` returned it at that commit, and
/// for `*.updated` the old values of the fields that changed.
#[derive(Serialize, ToSchema)]
pub struct EventData {
    #[schema(value_type = Object)]
    pub object: Box<RawValue>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub previous_attributes: Option<Box<RawValue>>,
}

// D54.
/// A committed change of the organization.
#[derive(Serialize, ToSchema)]
#[schema(as = Event)]
pub struct EventResponse<'a> {
    #[schema(value_type = String, pattern = "^evt_[A-Za-z0-9]+$")]
    pub id: &'a str,
    #[schema(value_type = String, example = "product.updated")]
    pub r#type: &'static str,
    #[schema(schema_with = schemas::timestamp)]
    pub created_at: Timestamp,
    #[schema(value_type = String, pattern = "^org_[A-Za-z0-9]+$")]
    pub org: &'a str,
    /// 1, 2, 3 … per organization, without gaps, in commit order; null
    /// only for `webhook_endpoint.test`, which is never sequenced (D54).
    #[schema(minimum = 1, required = true)]
    pub sequence: Option<i64>,
    #[schema(schema_with = schemas::api_version)]
    pub api_version: &'static str,
    pub data: EventData,
    pub actor: ActorResponse<'a>,
    /// Null for the operator and the system.
    #[schema(required = true)]
    pub request: Option<RequestResponse<'a>>,
}

fn raw(json: &str) -> Box<RawValue> {
    RawValue::from_string(json.to_owned())
        .unwrap_or_else(|_| RawValue::from_string("{}".into()).expect("{} is JSON"))
}

impl<'a> EventResponse<'a> {
    pub(crate) fn of(e: &'a Event, org: &'a str) -> Self {
        let ev = &e.event;
        let actor = &ev.origin.actor;
        Self {
            id: ev.id.as_str(),
            r#type: ev.kind.as_str(),
            created_at: ev.created_at,
            org,
            sequence: (ev.kind != gatehouse_domain::event::EventType::WebhookEndpointTest)
                .then_some(e.sequence),
            api_version: API_VERSION,
            data: EventData {
                object: raw(&ev.object),
                previous_attributes: ev.previous.as_deref().map(raw),
            },
            actor: ActorResponse {
                r#type: actor.kind(),
                id: actor.id(),
                client_id: actor.client_id(),
            },
            request: ev.origin.request.as_ref().map(|r| RequestResponse {
                id: &r.id,
                idempotency_key: r.idempotency_key.as_deref(),
            }),
        }
    }
}

/// D54's filters from the query: `type` (repeatable, a trailing wildcard),
/// `object_id`, `from`, `to`.
pub(crate) fn event_filter(query: &mut Query) -> EventFilter {
    let mut types = Vec::new();
    let patterns = query.all("type");
    for p in &patterns {
        match TypePattern::parse(p) {
            Ok(p) => types.extend(p.types()),
            Err(issue) => query.issues().push(FieldIssue::new("type", issue)),
        }
    }
    let time =
        |t: &str| Timestamp::parse_rfc3339(t).ok_or_else(|| "must be an RFC 3339 time".to_owned());
    EventFilter {
        types: (!patterns.is_empty()).then_some(types),
        object_id: query.field("object_id", |s| Ok(s.to_owned())),
        from: query.field("from", time),
        to: query.field("to", time),
        before_sequence: None,
    }
}

#[utoipa::path(
    get,
    path = "/v1/events",
    operation_id = "listEvents",
    tag = "Events",
    summary = "List the organization's events, newest first, or catch up after a sequence",
    params(
        ("limit" = Option<u32>, Query, minimum = 1, description = "Page size (default 20, at most 100); values above 100 are clamped to 100."),
        ("offset" = Option<u64>, Query, description = "Items to skip; must be 0 with `after_sequence`."),
        ("type" = Option<Vec<String>>, Query, description = "Only events of these types (repeatable; `user.*` matches every `user.` type)."),
        ("object_id" = Option<String>, Query, description = "Only events about this object."),
        ("from" = Option<String>, Query, description = "Only events created at or after this time (RFC 3339)."),
        ("to" = Option<String>, Query, description = "Only events created before this time (RFC 3339)."),
        ("after_sequence" = Option<i64>, Query, minimum = 0, description = "The catch-up cursor: the events after this sequence, oldest first; `total` counts them."),
    ),
    responses(
        (status = 200, description = "A page of events", body = crate::http::respond::List<'static, EventResponse<'static>>),
        (status = 400, description = "Invalid query parameter", body = crate::http::error::ErrorEnvelope<'static>),
    ),
    security(("bearer" = ["events:read"]), ("oauth2" = ["events:read"])),
)]
pub(crate) async fn list(
    auth: Authorized<EventsRead>,
    ctx: RequestCtx,
    State(st): State<AppState>,
    mut query: Query,
) -> Result<Response, ApiError> {
    let page = query.page();
    let filter = event_filter(&mut query);
    let after = query.field("after_sequence", |s| {
        s.parse::<i64>()
            .ok()
            .filter(|n| *n >= 0)
            .ok_or_else(|| "must be a whole number of at least 0".to_owned())
    });
    if after.is_some() && page.offset != 0 {
        // D14 (continued): the cursor and an offset do not mix.
        query
            .issues()
            .push(FieldIssue::new("offset", "must be 0 with after_sequence"));
    }
    query.finish()?;
    let org = auth.org();
    let listing: Listing<Event> = match after {
        Some(n) => st.app.events_after(org, &filter, n, page.limit).await?,
        None => st.app.list_events(org, &filter, page).await?,
    };
    let shown = Listing {
        items: listing
            .items
            .iter()
            .map(|e| EventResponse::of(e, org.as_str()))
            .collect::<Vec<_>>(),
        total: listing.total,
    };
    Ok(respond::list::<_, Shown<'_>>(&ctx, &shown, page))
}

/// A rendered event, as a list item.
#[derive(Serialize)]
#[serde(transparent)]
struct Shown<'a>(&'a EventResponse<'a>);

impl<'a> From<&'a EventResponse<'a>> for Shown<'a> {
    fn from(e: &'a EventResponse<'a>) -> Self {
        Shown(e)
    }
}

#[utoipa::path(
    get,
    path = "/v1/events/{event_id}",
    operation_id = "getEvent",
    tag = "Events",
    summary = "Get an event",
    params(
        ("event_id" = String, Path, pattern = "^evt_[A-Za-z0-9]+$", description = "An event id (`evt_…`)."),
    ),
    responses(
        (status = 200, description = "The event", body = crate::http::respond::Single<'static, EventResponse<'static>>),
        (status = 404, description = "No such event (or purged after the retention)", body = crate::http::error::ErrorEnvelope<'static>),
    ),
    security(("bearer" = ["events:read"]), ("oauth2" = ["events:read"])),
)]
pub(crate) async fn show(
    auth: Authorized<EventsRead>,
    ctx: RequestCtx,
    State(st): State<AppState>,
    Id(id): Id<EventId>,
) -> Result<Response, ApiError> {
    let org = auth.org();
    let e = st.app.get_event(org, &id).await?;
    Ok(respond::single(
        &ctx,
        StatusCode::OK,
        &EventResponse::of(&e, org.as_str()),
    ))
}

/// D54's catalog, as the OpenAPI document's `webhooks` map shows it (D35
/// continued): for each event type, the event whose `type` is that type and
/// whose `data.object` is the type's object (`previous_attributes` only on
/// `*.updated`, holding old values of the object's fields).
pub(crate) fn webhook_schemas() -> serde_json::Map<String, serde_json::Value> {
    use gatehouse_domain::event::EventType;
    use serde_json::json;
    let reference = |name: &str| json!({"$ref": format!("#/components/schemas/{name}")});
    EventType::ALL
        .iter()
        .map(|t| {
            let name = t.as_str();
            let object = match t {
                EventType::UserCreated
                | EventType::UserUpdated
                | EventType::UserDeleted
                | EventType::UserInvited
                | EventType::UserPasswordChanged => reference("User"),
                EventType::UserSignedIn | EventType::SessionRevoked => reference("Session"),
                EventType::UserMfaEnrolled | EventType::UserMfaRemoved => {
                    json!({"allOf": [reference("MfaFactor"), {
                        "type": "object",
                        "required": ["user_id"],
                        "properties": {"user_id": {"type": "string", "pattern": "^usr_[A-Za-z0-9]+$"}},
                    }]})
                }
                EventType::OrganizationSecurityUpdated => reference("SecurityPolicy"),
                EventType::ProductCreated
                | EventType::ProductUpdated
                | EventType::ProductDeleted => reference("Product"),
                EventType::ApplicationCreated
                | EventType::ApplicationUpdated
                | EventType::ApplicationDeleted
                | EventType::ApplicationSecretRotated => reference("Application"),
                EventType::ApiKeyCreated | EventType::ApiKeyRevoked => reference("ApiKey"),
                EventType::OrganizationUpdated | EventType::StagingReset => {
                    reference("Organization")
                }
                // D58: the checkpoint as the checkpoints list shows it.
                EventType::AuditCheckpoint => reference("AuditCheckpoint"),
                EventType::WebhookEndpointCreated
                | EventType::WebhookEndpointUpdated
                | EventType::WebhookEndpointDeleted
                | EventType::WebhookEndpointDisabled
                | EventType::WebhookEndpointTest => reference("WebhookEndpoint"),
                EventType::ConsentRevoked => json!({"allOf": [reference("ConsentedApplication"), {
                    "type": "object",
                    "required": ["user_id"],
                    "properties": {"user_id": {"type": "string", "pattern": "^usr_[A-Za-z0-9]+$"}},
                }]}),
                EventType::RefreshTokenReuseDetected => json!({
                    "type": "object",
                    "required": ["user_id", "client_id", "sid", "trigger"],
                    "properties": {
                        "user_id": {"type": "string", "pattern": "^usr_[A-Za-z0-9]+$"},
                        "client_id": {"type": "string"},
                        "sid": {"type": ["string", "null"]},
                        "trigger": {"type": "string", "enum": ["refresh_token", "authorization_code"]},
                    },
                }),
            };
            let mut data = json!({
                "type": "object",
                "required": ["object"],
                "properties": {"object": object},
            });
            if name.ends_with(".updated") {
                data["required"] = json!(["object", "previous_attributes"]);
                data["properties"]["previous_attributes"] = json!({
                    "type": "object",
                    "description": "The old values of the fields of `object` that changed.",
                });
            } else {
                data["not"] = json!({"required": ["previous_attributes"]});
            }
            let event = json!({"allOf": [reference("Event"), {
                "type": "object",
                "properties": {"type": {"const": name}, "data": data},
            }]});
            let item = json!({"post": {
                "summary": format!("`{name}`"),
                "description": "Delivered to webhook endpoints (D55) and listed by `GET /v1/events` (D54).",
                "operationId": format!("event_{}", name.replace('.', "_")),
                "tags": ["Events"],
                "requestBody": {"required": true, "content": {"application/json": {"schema": event}}},
                "responses": {"2XX": {"description": "Received; any 2xx succeeds."}},
            }});
            (name.to_owned(), item)
        })
        .collect()
}
