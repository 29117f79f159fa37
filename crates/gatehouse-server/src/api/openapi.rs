//! The OpenAPI 3.1 document (D35), served at `/v1/openapi.json` (no token
//! needed), generated with utoipa from the handlers (`#[utoipa::path]`: path,
//! parameters, body, answers, scope) and the types they read and write
//! (`ToSchema`: `requests`, `responses`, `respond`, `oauth_wire`, the error
//! envelope). What every operation shares — the answers any request can get
//! before it is routed (D45), the 401/403/429/500/503 of every scoped
//! operation, the links to `public_url` — is added here, once.

use std::borrow::Cow;

use gatehouse_domain::{API_VERSION, Scope};
use serde_json::{Map, Value, json};
use utoipa::openapi::RefOr;
use utoipa::openapi::schema::Schema;
use utoipa::{OpenApi, PartialSchema, ToSchema};

use crate::error::ErrorEnvelope;
use crate::oauth_wire::{OAuthErrorBody, RevokeForm, TokenForm, TokenResponse};
use crate::requests::{
    CreateProductRequest, CreateUserRequest, UpdateProductRequest, UpdateProfileRequest,
    UpdateUserRequest,
};
use crate::respond::{List, ListMeta, Meta, Single};
use crate::responses::{ProductResponse, UserResponse};

/// Schemas of fields whose Rust type says less than the wire does.
pub mod schemas {
    use utoipa::openapi::schema::{
        Array, ArrayBuilder, KnownFormat, Object, ObjectBuilder, SchemaFormat, Type,
    };

    fn one_of(values: &[&str]) -> Object {
        ObjectBuilder::new()
            .schema_type(Type::String)
            .enum_values(Some(values.iter().copied()))
            .build()
    }

    /// D10.
    pub fn role() -> Object {
        one_of(&["admin", "editor", "viewer"])
    }
    pub fn user_status() -> Object {
        one_of(&["active", "inactive", "pending_invite"])
    }
    /// D11: a PATCH may only activate or deactivate.
    pub fn patch_user_status() -> Object {
        one_of(&["active", "inactive"])
    }
    pub fn product_status() -> Object {
        one_of(&["available", "out_of_stock", "discontinued"])
    }
    /// D16: otherwise the stock decides.
    pub fn creation_status() -> Object {
        one_of(&["discontinued"])
    }
    /// interface.md §7.3.
    pub fn error_code() -> Object {
        let codes: Vec<&str> = crate::error::ErrorCode::ALL
            .iter()
            .map(|c| c.as_str())
            .collect();
        one_of(&codes)
    }
    /// D6: every problem of the request, `{field, issue}`.
    pub fn details() -> Array {
        let issue = ObjectBuilder::new()
            .property("field", ObjectBuilder::new().schema_type(Type::String))
            .required("field")
            .property("issue", ObjectBuilder::new().schema_type(Type::String))
            .required("issue");
        ArrayBuilder::new().items(issue).build()
    }
    /// D20–D24.
    pub fn grant_type() -> Object {
        one_of(&["client_credentials", "authorization_code", "refresh_token"])
    }
    /// RFC 7009 §2.1.
    pub fn token_type_hint() -> Object {
        one_of(&["access_token", "refresh_token"])
    }
    pub fn api_version() -> Object {
        one_of(&[gatehouse_domain::API_VERSION])
    }
    pub fn bearer() -> Object {
        one_of(&["Bearer"])
    }
    /// D28.
    pub fn plan() -> Object {
        one_of(&["free", "pro", "enterprise"])
    }
    /// D46: confidential (with a secret) or public (PKCE only, D20).
    pub fn application_type() -> Object {
        one_of(&["confidential", "public"])
    }
    fn scope_array(keep: impl Fn(gatehouse_domain::Scope) -> bool) -> Array {
        let names: Vec<&str> = gatehouse_domain::Scope::ALL
            .into_iter()
            .filter(|s| keep(*s))
            .map(gatehouse_domain::Scope::as_str)
            .collect();
        ArrayBuilder::new()
            .items(one_of(&names))
            .min_items(Some(1))
            .build()
    }
    /// D46: the scopes of an application.
    pub fn scope_list() -> Array {
        scope_array(|_| true)
    }
    /// D46: the scopes of an API key (no sign-in scope, D49).
    pub fn key_scope_list() -> Array {
        scope_array(|s| !s.is_identity())
    }
    /// D4.
    pub fn timestamp() -> Object {
        ObjectBuilder::new()
            .schema_type(Type::String)
            .format(Some(SchemaFormat::KnownFormat(KnownFormat::DateTime)))
            .description(Some("RFC 3339 UTC with milliseconds (D4)."))
            .build()
    }
}

/// Schemas of answers no type of ours writes field by field — the v2
/// cursor pages (written through `serde_json::Value`, keys sorted), the JWK
/// set, the health status, HTML pages — and of the enumerated query
/// parameters, written out.
macro_rules! written_schema {
    ($($(#[$doc:meta])* $name:ident as $shown:literal => $schema:expr;)+) => {$(
        $(#[$doc])*
        pub struct $name;
        impl PartialSchema for $name {
            fn schema() -> RefOr<Schema> {
                serde_json::from_value($schema).expect("a written-out schema is valid")
            }
        }
        impl ToSchema for $name {
            fn name() -> Cow<'static, str> {
                Cow::Borrowed($shown)
            }
        }
    )+};
}

fn cursor_list(item: &str) -> Value {
    let cursor_meta = json!({"type": "object", "required": ["limit", "next_cursor", "request_id", "version"], "properties": {
        "limit": {"type": "integer", "minimum": 1, "maximum": 100}, "next_cursor": {"type": ["string", "null"]},
        "request_id": {"type": "string"}, "version": {"type": "string"}}});
    json!({"type": "object", "required": ["data", "meta"], "properties": {
        "data": {"type": "array", "items": {"$ref": format!("#/components/schemas/{item}")}},
        "meta": cursor_meta}})
}

written_schema! {
    /// `role` of a user list.
    RoleName as "Role" => json!(schemas::role());
    /// `status` of a user list.
    UserStatusName as "UserStatus" => json!(schemas::user_status());
    /// `type` of an application list (D46).
    ApplicationTypeName as "ApplicationType" => json!(schemas::application_type());
    /// `status` of a product list.
    ProductStatusName as "ProductStatus" => json!(schemas::product_status());
    UserCursorList as "UserCursorList" => cursor_list("User");
    ProductCursorList as "ProductCursorList" => cursor_list("Product");
    Jwks as "Jwks" => json!({"type": "object", "required": ["keys"], "properties": {"keys": {"type": "array", "items": {"type": "object"}}}});
    Status as "Status" => json!({"type": "object", "required": ["status"], "properties": {"status": {"type": "string"}}});
    /// Any JSON object (`Object` itself means that to utoipa).
    AnyObject as "Object" => json!({"type": "object"});
    Html as "Html" => json!({"type": "string"});
}

#[derive(OpenApi)]
#[openapi(paths(
    crate::users::list,
    crate::users::create,
    crate::users::show,
    crate::users::update,
    crate::users::remove,
    crate::users::reinvite,
    crate::profile::show,
    crate::profile::update,
    crate::profile::list_applications,
    crate::profile::forget_application,
    crate::products::list,
    crate::products::create,
    crate::products::show,
    crate::products::update,
    crate::products::remove,
    crate::applications::list,
    crate::applications::create,
    crate::applications::show,
    crate::applications::update,
    crate::applications::remove,
    crate::applications::rotate_secret,
    crate::applications::usage,
    crate::api_keys::list,
    crate::api_keys::create,
    crate::api_keys::show,
    crate::api_keys::revoke,
    crate::api_keys::usage,
    crate::organization::show,
    crate::v2::users,
    crate::v2::products,
    crate::versions::sunset,
    crate::oauth::token,
    crate::oauth::revoke,
    crate::introspect::introspect,
    crate::authorize::start,
    crate::oidc::userinfo,
    crate::oidc::logout,
    crate::wellknown::jwks,
    crate::wellknown::metadata,
    crate::wellknown::openid_configuration,
    crate::docs::openapi,
    crate::health::healthz,
    crate::health::readyz
))]
struct Api;

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
        generated::<crate::introspect::IntrospectForm>(),
        generated::<crate::introspect::IntrospectionResponse>(),
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
        "tags": [{"name": "Users"}, {"name": "Profile"}, {"name": "Products"}, {"name": "Applications"}, {"name": "API keys"}, {"name": "Organization"}, {"name": "Preview (v2)"}, {"name": "OAuth"}, {"name": "Discovery"}, {"name": "Operations"}, {"name": "Versions"}],
        "paths": paths,
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
