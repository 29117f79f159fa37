//! The OpenAPI schemas of the wire that the Rust types do not say by
//! themselves: schemas of fields whose Rust type says less than the wire
//! does (`schema_with = …` on the types of the envelopes, requests and
//! answers), and of answers no type of ours writes field by field, written
//! out. The
//! OpenAPI document (`api::openapi`) gathers them with the operations.

use std::borrow::Cow;

use serde_json::{Value, json};
use utoipa::openapi::RefOr;
use utoipa::openapi::schema::{
    Array, ArrayBuilder, KnownFormat, Object, ObjectBuilder, Schema, SchemaFormat, Type,
};
use utoipa::{PartialSchema, ToSchema};

pub(crate) fn one_of(values: &[&str]) -> Object {
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
    RoleName as "Role" => json!(role());
    /// `status` of a user list.
    UserStatusName as "UserStatus" => json!(user_status());
    /// `type` of an application list (D46).
    ApplicationTypeName as "ApplicationType" => json!(application_type());
    /// `status` of a product list.
    ProductStatusName as "ProductStatus" => json!(product_status());
    UserCursorList as "UserCursorList" => cursor_list("User");
    ProductCursorList as "ProductCursorList" => cursor_list("Product");
    EventCursorList as "EventCursorList" => cursor_list("Event");
    Jwks as "Jwks" => json!({"type": "object", "required": ["keys"], "properties": {"keys": {"type": "array", "items": {"type": "object"}}}});
    Status as "Status" => json!({"type": "object", "required": ["status"], "properties": {"status": {"type": "string"}}});
    /// Any JSON object (`Object` itself means that to utoipa).
    AnyObject as "Object" => json!({"type": "object"});
    Html as "Html" => json!({"type": "string"});
}

/// D55: an endpoint's `status`.
pub fn endpoint_status() -> Object {
    one_of(&["enabled", "disabled"])
}

/// D55: an endpoint's `ordering`.
pub fn endpoint_ordering() -> Object {
    one_of(&["none", "per_object"])
}

/// D55: why an endpoint is disabled (null while enabled).
pub fn disabled_reason() -> Object {
    ObjectBuilder::new()
        .schema_type(utoipa::openapi::schema::SchemaType::from_iter([
            Type::String,
            Type::Null,
        ]))
        .enum_values(Some([
            json!("manual"),
            json!("gone"),
            json!("failing"),
            json!("owner_removed"),
            Value::Null,
        ]))
        .build()
}

/// D55: `enabled_events`, patterns as in the `type` filter of `/v1/events`.
pub fn event_patterns() -> Array {
    ArrayBuilder::new()
        .items(
            ObjectBuilder::new()
                .schema_type(Type::String)
                .description(Some(
                    "An event type (`user.created`), a prefix ending in `.*` (`user.*`), or `*`.",
                ))
                .build(),
        )
        .min_items(Some(1))
        .max_items(Some(50))
        .build()
}
