//! The OpenAPI 3.1 document (D35), served at `/v1/openapi.json` (no token
//! needed), generated with utoipa from the handlers (`#[utoipa::path]`: path,
//! parameters, body, answers, scope) and the types they read and write
//! (`ToSchema`: `requests`, `responses`, `respond`, `oauth_wire`, the error
//! envelope). What every operation shares — the answers any request can get
//! before it is routed (D45), the 401/403/429/500/503 of every scoped
//! operation, the links to `public_url` — is added here, once.

use axum::Router;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use gatehouse_domain::{API_VERSION, Scope};
use serde_json::{Map, Value, json};
use utoipa::{OpenApi, ToSchema};

use super::oauth_wire::{OAuthErrorBody, RevokeForm, TokenForm, TokenResponse};
use super::requests::{
    CreateProductRequest, CreateUserRequest, UpdateProductRequest, UpdateProfileRequest,
    UpdateUserRequest,
};
use super::responses::{ProductResponse, UserResponse};
use crate::http::error::ErrorEnvelope;
use crate::http::respond::{List, ListMeta, Meta, Single};
use crate::http::schemas::{
    AnyObject, ApplicationTypeName, ProductStatusName, RoleName, UserStatusName,
};
use crate::state::AppState;

#[derive(OpenApi)]
#[openapi(paths(
    super::users::list,
    super::users::create,
    super::users::show,
    super::users::update,
    super::users::remove,
    super::users::reinvite,
    super::profile::show,
    super::profile::update,
    super::profile::list_applications,
    super::profile::forget_application,
    super::sessions::list_mine,
    super::sessions::end_mine,
    super::sessions::revoke_others,
    super::sessions::list_users,
    super::sessions::end_users_all,
    super::sessions::end_users,
    super::mfa::list_mine,
    super::mfa::list_users,
    super::mfa::reset_users,
    super::mfa::show_policy,
    super::mfa::update_policy,
    super::products::list,
    super::products::create,
    super::products::show,
    super::products::update,
    super::products::remove,
    super::applications::list,
    super::applications::create,
    super::applications::show,
    super::applications::update,
    super::applications::remove,
    super::applications::rotate_secret,
    super::applications::usage,
    super::api_keys::list,
    super::api_keys::create,
    super::api_keys::show,
    super::api_keys::revoke,
    super::api_keys::usage,
    super::organization::show,
    super::events::list,
    super::events::show,
    super::audit::list,
    super::audit::export,
    super::audit::checkpoints,
    super::webhooks::list,
    super::webhooks::create,
    super::webhooks::show,
    super::webhooks::update,
    super::webhooks::remove,
    super::webhooks::rotate_secret,
    super::webhooks::attempts,
    super::webhooks::test,
    super::webhooks::replay,
    super::webhooks::redeliver,
    super::v2::users,
    super::v2::products,
    super::v2::events,
    super::versions::sunset,
    super::oauth::token,
    super::oauth::revoke,
    super::introspect::introspect,
    crate::web::authorize::start,
    super::oidc::userinfo,
    crate::web::logout::logout,
    super::wellknown::jwks,
    super::wellknown::audit_keys,
    super::wellknown::metadata,
    super::wellknown::openid_configuration,
    openapi,
    super::health::healthz,
    super::health::readyz
))]
struct Api;

/// `/v1/openapi.json`.
pub fn router() -> Router<AppState> {
    Router::new().route("/v1/openapi.json", get(openapi))
}

/// A schema generated from a type, under `name` (see [`RENAMED`]); the
/// path macro's copy has the resource inline, this one refers to it.
fn named<T: ToSchema>(name: &str) -> (String, Value) {
    (name.to_owned(), generated::<T>().1)
}

/// A schema generated from a type, under its name.
fn generated<T: ToSchema>() -> (String, Value) {
    let schema = serde_json::to_value(T::schema()).expect("a schema serializes");
    (T::name().into_owned(), schema)
}

/// Schemas no operation names directly but the document should carry.
fn components() -> Vec<(String, Value)> {
    vec![
        generated::<UserResponse<'static>>(),
        generated::<ProductResponse<'static>>(),
        generated::<super::events::EventResponse<'static>>(),
        generated::<super::audit::CheckpointResponse<'static>>(),
        generated::<super::responses::WebhookEndpointResponse<'static>>(),
        generated::<super::responses::SessionResponse<'static>>(),
        generated::<super::responses::FactorResponse<'static>>(),
        generated::<super::responses::SecurityResponse>(),
        generated::<CreateUserRequest>(),
        generated::<UpdateUserRequest>(),
        generated::<UpdateProfileRequest>(),
        generated::<CreateProductRequest>(),
        generated::<UpdateProductRequest>(),
        generated::<TokenResponse>(),
        generated::<ErrorEnvelope<'static>>(),
        generated::<OAuthErrorBody>(),
        generated::<TokenForm>(),
        generated::<RevokeForm>(),
        generated::<super::introspect::IntrospectForm>(),
        generated::<super::introspect::IntrospectionResponse>(),
        generated::<Meta<'static>>(),
        generated::<ListMeta<'static>>(),
        generated::<RoleName>(),
        generated::<UserStatusName>(),
        generated::<ProductStatusName>(),
        generated::<ApplicationTypeName>(),
        named::<Single<'static, UserResponse<'static>>>("UserEnvelope"),
        named::<Single<'static, ProductResponse<'static>>>("ProductEnvelope"),
        named::<List<'static, UserResponse<'static>>>("UserList"),
        named::<List<'static, ProductResponse<'static>>>("ProductList"),
    ]
}

/// A parameter of a documented operation.
pub struct Param {
    pub name: String,
    /// `path` or `query`.
    pub location: String,
}

/// One documented operation, as the generated document has it.
pub struct Op {
    pub method: String,
    /// OpenAPI path template, e.g. `/v1/users/{user_id}`.
    pub path: String,
    pub id: String,
    pub summary: String,
    pub scope: Option<Scope>,
    pub params: Vec<Param>,
}

/// The scope an operation needs: the one its `security` names.
fn scope_of(op: &Value) -> Option<Scope> {
    op["security"][0]["bearer"][0]
        .as_str()
        .and_then(Scope::parse)
}

/// Every documented operation of the API and the authorization server, in
/// the order of `Api`'s list (the reference page's order).
pub fn operations() -> Vec<Op> {
    let mut out = Vec::new();
    for (path, item) in Api::openapi().paths.paths {
        let item = serde_json::to_value(item).expect("a path item serializes");
        for method in ["get", "post", "put", "patch", "delete"] {
            let op = &item[method];
            if op.is_null() {
                continue;
            }
            let params = op["parameters"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|p| Param {
                    name: p["name"].as_str().unwrap_or_default().to_owned(),
                    location: p["in"].as_str().unwrap_or_default().to_owned(),
                })
                .collect();
            out.push(Op {
                method: method.to_owned(),
                path: path.clone(),
                id: op["operationId"].as_str().unwrap_or_default().to_owned(),
                summary: op["summary"].as_str().unwrap_or_default().to_owned(),
                scope: scope_of(op),
                params,
            });
        }
    }
    out
}

/// Standard error answers of every authenticated API operation.
const API_ERRORS: &[(u16, &str)] = &[
    (401, "Missing, invalid or expired token"),
    (403, "The token lacks the scope"),
    (429, "Rate limit exceeded; see Retry-After"),
    (500, "Unexpected failure"),
    (503, "Temporarily unavailable; see Retry-After"),
];

/// Error answers of every operation, given before routing (D45).
const TRANSPORT_ERRORS: &[(u16, &str)] = &[
    (400, "Malformed request line or header fields"),
    (414, "Request target (path and query) over 8 KiB"),
    (431, "More than 100 header fields, or over 64 KiB of them"),
];

fn error_answer(description: &str) -> Value {
    json!({"description": description, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}})
}

/// Adds what every operation shares to one generated operation.
fn complete(op: &mut Map<String, Value>, public_url: &str) {
    optional_body(op);
    let scope = scope_of(&Value::Object(op.clone()));
    let mut responses = op
        .remove("responses")
        .and_then(|r| match r {
            Value::Object(m) => Some(m),
            _ => None,
        })
        .unwrap_or_default();
    match scope {
        Some(scope) => {
            op.insert(
                "description".into(),
                json!(format!(
                    "Needs the `{}` scope (or `admin`). Errors: see {public_url}/docs/errors.",
                    scope.as_str()
                )),
            );
            for (status, desc) in API_ERRORS {
                responses
                    .entry(status.to_string())
                    .or_insert_with(|| error_answer(desc));
            }
        }
        // D46 `/v1/organization`: a bearer credential but no scope; it can
        // be refused as any other (401, 429, 5xx), and by the mock's 403.
        None if op
            .get("security")
            .and_then(|s| s.get(0))
            .is_some_and(|s| s.get("bearer").is_some()) =>
        {
            op.insert(
                "description".into(),
                json!(format!(
                    "Needs any valid token or API key of the organization. Errors: see {public_url}/docs/errors."
                )),
            );
            for (status, desc) in API_ERRORS {
                responses
                    .entry(status.to_string())
                    .or_insert_with(|| error_answer(desc));
            }
        }
        None => {
            op.insert("security".into(), json!([]));
        }
    }
    // D45: any request, to any operation, can be refused before it is
    // routed: a malformed head, an over-long target, too many or too large
    // header fields. Those answers carry the API envelope everywhere.
    for (status, desc) in TRANSPORT_ERRORS {
        responses
            .entry(status.to_string())
            .or_insert_with(|| error_answer(desc));
    }
    op.insert("responses".into(), Value::Object(responses));
}

/// An optional body (`request_body(content = Option<T>)`): utoipa writes
/// its schema as "null or T", but JSON `null` is not an accepted body —
/// the body is either absent or a T. Say that: the schema T, not required.
fn optional_body(op: &mut Map<String, Value>) {
    let Some(Value::Object(content)) = op.get_mut("requestBody").and_then(|b| b.get_mut("content"))
    else {
        return;
    };
    let mut optional = false;
    for media in content.values_mut() {
        let schema = &mut media["schema"];
        if let Some([null, real]) = schema
            .get("oneOf")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            && null == &json!({"type": "null"})
        {
            *schema = real.clone();
            optional = true;
        }
    }
    if optional {
        op["requestBody"]["required"] = json!(false);
    }
}

/// D50: every POST under `/v1` takes an `Idempotency-Key`; the answers it
/// adds (a malformed key, a key in use, a key reused) and the header of a
/// replay are documented on each.
fn idempotent(op: &mut Map<String, Value>) {
    let parameter = json!({
        "name": "Idempotency-Key",
        "in": "header",
        "required": false,
        "description": "Makes the POST safe to retry (D50): the first answer (2xx, 404, 409 or 422) is kept for 24 hours per organization, credential and key, and the same request with the same key gets it again, with `Idempotent-Replayed: true`. The same key with another request (method, path, query or body) is 422 `IDEMPOTENCY_KEY_REUSED`; while the first request runs, 409 `IDEMPOTENCY_KEY_IN_USE` with `Retry-After: 1`.",
        "schema": {"type": "string", "minLength": 1, "maxLength": 255, "pattern": "^[ -~]+$"},
    });
    match op.get_mut("parameters") {
        Some(Value::Array(params)) => params.push(parameter),
        _ => {
            op.insert("parameters".into(), json!([parameter]));
        }
    }
    let Some(Value::Object(responses)) = op.get_mut("responses") else {
        return;
    };
    let replayed = json!({
        "description": "`true` when this is the kept answer to an earlier request with the same Idempotency-Key (D50).",
        "schema": {"type": "string", "enum": ["true"]},
    });
    for (status, answer) in responses.iter_mut() {
        if status.starts_with('2')
            && let Value::Object(answer) = answer
        {
            let headers = answer.entry("headers").or_insert_with(|| json!({}));
            if let Value::Object(h) = headers {
                h.insert("Idempotent-Replayed".into(), replayed.clone());
            }
        }
    }
    for (status, desc) in [
        (
            "400",
            "a malformed Idempotency-Key (field `Idempotency-Key`)",
        ),
        (
            "409",
            "IDEMPOTENCY_KEY_IN_USE: a request with this Idempotency-Key is still running; see Retry-After",
        ),
        (
            "422",
            "IDEMPOTENCY_KEY_REUSED: the Idempotency-Key was used with another request",
        ),
    ] {
        match responses.get_mut(status) {
            Some(Value::Object(answer)) => {
                let before = answer
                    .get("description")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned();
                answer.insert("description".into(), json!(format!("{before}; or {desc}")));
            }
            _ => {
                let mut first = desc.to_owned();
                first[..1].make_ascii_uppercase();
                responses.insert(status.into(), error_answer(&first));
            }
        }
    }
}

/// utoipa names a generic type's schema after its arguments; the document
/// keeps the names it has always given them.
const RENAMED: [(&str, &str); 4] = [
    ("Single_User", "UserEnvelope"),
    ("Single_Product", "ProductEnvelope"),
    ("List_User", "UserList"),
    ("List_Product", "ProductList"),
];

/// The generated document with [`RENAMED`] applied to schemas and references.
fn generated_document() -> Value {
    let mut text = serde_json::to_string(&Api::openapi()).expect("the document serializes");
    for (from, to) in RENAMED {
        text = text
            .replace(&format!("\"{from}\":"), &format!("\"{to}\":"))
            .replace(
                &format!("\"#/components/schemas/{from}\""),
                &format!("\"#/components/schemas/{to}\""),
            );
    }
    serde_json::from_str(&text).expect("the renamed document is JSON")
}

/// The document, with `servers` and links pointing at `public_url`.
pub fn document(public_url: &str) -> Value {
    let generated = generated_document();
    let mut paths = generated["paths"].clone();
    for (path, item) in paths.as_object_mut().into_iter().flat_map(|m| m.iter_mut()) {
        for (method, op) in item.as_object_mut().into_iter().flat_map(|m| m.iter_mut()) {
            if let Value::Object(op) = op {
                complete(op, public_url);
                if method == "post" && path.starts_with("/v1/") {
                    idempotent(op);
                }
            }
        }
    }
    let mut schemas = generated["components"]["schemas"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    for (name, schema) in components() {
        schemas.insert(name, schema);
    }
    let scopes: Map<String, Value> = Scope::ALL
        .iter()
        .map(|s| (s.as_str().to_owned(), json!(s.description())))
        .collect();
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "Gatehouse API",
            "version": API_VERSION,
            "description": "Users, a product catalog and an OAuth 2.0 authorization server for organizations. Every error uses the envelope {error: {code, message, docs, details}}.",
        },
        "servers": [{"url": public_url}],
        "tags": [{"name": "Users"}, {"name": "Profile"}, {"name": "Products"}, {"name": "Applications"}, {"name": "API keys"}, {"name": "Organization"}, {"name": "Events"}, {"name": "Audit log"}, {"name": "Preview (v2)"}, {"name": "OAuth"}, {"name": "Discovery"}, {"name": "Operations"}, {"name": "Versions"}],
        "paths": paths,
        // D35 continued: one schema per event type (D54).
        "webhooks": super::events::webhook_schemas(),
        "components": {
            "schemas": schemas,
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer", "bearerFormat": "JWT or API key (gk_live_…)"},
                "oauth2": {"type": "oauth2", "flows": {
                    "clientCredentials": {"tokenUrl": format!("{public_url}/oauth/token"), "scopes": scopes},
                    "authorizationCode": {"authorizationUrl": format!("{public_url}/oauth/authorize"), "tokenUrl": format!("{public_url}/oauth/token"), "refreshUrl": format!("{public_url}/oauth/token"), "scopes": scopes},
                }},
            },
        },
    })
}

/// D35: the OpenAPI document, no token needed.
#[utoipa::path(
    get,
    path = "/v1/openapi.json",
    operation_id = "openapi",
    tag = "Discovery",
    summary = "This document",
    responses(
        (status = 200, description = "OpenAPI 3.1", body = AnyObject),
    ),
)]
pub(crate) async fn openapi(State(st): State<AppState>) -> Response {
    axum::Json(document(&st.config.public_url)).into_response()
}
