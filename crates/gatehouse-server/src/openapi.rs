//! The OpenAPI 3.1 document (D35), served at `/v1/openapi.json` (no token
//! needed). The schemas of request bodies, resources and the token response
//! are generated (utoipa `ToSchema`) from the very types the handlers read
//! and write (`requests`, `responses`, `oauth_wire`); the operations come
//! from this table — the same table the route-coverage test checks against
//! the routers.

use gatehouse_domain::{API_VERSION, Scope};
use serde_json::{Map, Value, json};

use utoipa::ToSchema;

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
    /// D4.
    pub fn timestamp() -> Object {
        ObjectBuilder::new()
            .schema_type(Type::String)
            .format(Some(SchemaFormat::KnownFormat(KnownFormat::DateTime)))
            .description(Some("RFC 3339 UTC with milliseconds (D4)."))
            .build()
    }
}

/// A schema generated from a type, under `name` (a generic type's own name
/// does not say what it holds).
fn named<T: ToSchema>(name: &str) -> (String, Value) {
    (name.to_owned(), generated::<T>().1)
}

/// A schema generated from a type, under its name.
fn generated<T: ToSchema>() -> (String, Value) {
    let schema = serde_json::to_value(T::schema()).expect("a schema serializes");
    (T::name().into_owned(), schema)
}

/// A query or path parameter.
pub struct Param {
    pub name: &'static str,
    pub location: &'static str,
    pub required: bool,
    pub schema: fn() -> Value,
    pub description: &'static str,
}

/// One documented operation.
pub struct Op {
    pub method: &'static str,
    /// OpenAPI path template, e.g. `/v1/users/{user_id}`.
    pub path: &'static str,
    pub id: &'static str,
    pub summary: &'static str,
    pub tag: &'static str,
    pub scope: Option<Scope>,
    pub params: &'static [Param],
    /// Request body schema name and media type.
    pub body: Option<(&'static str, &'static str)>,
    /// (status, description, schema name or "" for none).
    pub responses: &'static [(u16, &'static str, &'static str)],
}

fn s_int() -> Value {
    json!({"type": "integer", "minimum": 0})
}
fn s_limit() -> Value {
    json!({"type": "integer", "minimum": 1, "default": 20, "description": "Values above 100 are clamped to 100."})
}
fn s_q() -> Value {
    json!({"type": "string", "maxLength": 200})
}
fn s_role() -> Value {
    json!(schemas::role())
}
fn s_user_status() -> Value {
    json!(schemas::user_status())
}
fn s_product_status() -> Value {
    json!(schemas::product_status())
}
fn s_user_id() -> Value {
    json!({"type": "string", "pattern": "^usr_[A-Za-z0-9]+$"})
}
fn s_product_id() -> Value {
    json!({"type": "string", "pattern": "^prod_[A-Za-z0-9]+$"})
}
fn s_string() -> Value {
    json!({"type": "string"})
}

const LIMIT: Param = Param {
    name: "limit",
    location: "query",
    required: false,
    schema: s_limit,
    description: "Page size (default 20, at most 100).",
};
const OFFSET: Param = Param {
    name: "offset",
    location: "query",
    required: false,
    schema: s_int,
    description: "Items to skip.",
};
const Q: Param = Param {
    name: "q",
    location: "query",
    required: false,
    schema: s_q,
    description: "Search text.",
};
const USER_ID: Param = Param {
    name: "user_id",
    location: "path",
    required: true,
    schema: s_user_id,
    description: "A user id (`usr_…`).",
};
const PRODUCT_ID: Param = Param {
    name: "product_id",
    location: "path",
    required: true,
    schema: s_product_id,
    description: "A product id (`prod_…`).",
};
const ROLE: Param = Param {
    name: "role",
    location: "query",
    required: false,
    schema: s_role,
    description: "Only users with this role.",
};
const USER_STATUS: Param = Param {
    name: "status",
    location: "query",
    required: false,
    schema: s_user_status,
    description: "Only users with this status.",
};
const PRODUCT_STATUS: Param = Param {
    name: "status",
    location: "query",
    required: false,
    schema: s_product_status,
    description: "Only products with this status.",
};
const TRANSFER_TO: Param = Param {
    name: "transfer_to",
    location: "query",
    required: false,
    schema: s_user_id,
    description: "An active user of the organization who takes over the deleted user's client applications (D13).",
};
const STARTING_AFTER_USER: Param = Param {
    name: "starting_after",
    location: "query",
    required: false,
    schema: s_user_id,
    description: "The cursor: the last id of the previous page (`meta.next_cursor`).",
};
const STARTING_AFTER_PRODUCT: Param = Param {
    name: "starting_after",
    location: "query",
    required: false,
    schema: s_product_id,
    description: "The cursor: the last id of the previous page (`meta.next_cursor`).",
};
const V0_PATH: Param = Param {
    name: "path",
    location: "path",
    required: true,
    schema: s_string,
    description: "Any path under /v0.",
};

const JSON: &str = "application/json";
const FORM: &str = "application/x-www-form-urlencoded";

/// Every operation of the API and the authorization server.
pub const OPERATIONS: &[Op] = &[
    Op {
        method: "get",
        path: "/v1/users",
        id: "listUsers",
        summary: "List the organization's users, newest first",
        tag: "Users",
        scope: Some(Scope::UsersRead),
        params: &[LIMIT, OFFSET, ROLE, USER_STATUS, Q],
        body: None,
        responses: &[
            (200, "A page of users", "UserList"),
            (400, "Invalid query parameter", "Error"),
        ],
    },
    Op {
        method: "post",
        path: "/v1/users",
        id: "createUser",
        summary: "Invite a user (created as pending_invite; an invitation e-mail is sent)",
        tag: "Users",
        scope: Some(Scope::UsersWrite),
        params: &[],
        body: Some(("NewUser", JSON)),
        responses: &[
            (201, "The new user; Location names it", "UserEnvelope"),
            (400, "Invalid fields", "Error"),
            (409, "The e-mail exists in the organization", "Error"),
            (413, "Body over 64 KiB", "Error"),
            (415, "Not JSON", "Error"),
        ],
    },
    Op {
        method: "get",
        path: "/v1/users/{user_id}",
        id: "getUser",
        summary: "Get a user",
        tag: "Users",
        scope: Some(Scope::UsersRead),
        params: &[USER_ID],
        body: None,
        responses: &[
            (200, "The user", "UserEnvelope"),
            (404, "No such user in the organization", "Error"),
        ],
    },
    Op {
        method: "patch",
        path: "/v1/users/{user_id}",
        id: "updateUser",
        summary: "Change a user's name, role or status (all or nothing)",
        tag: "Users",
        scope: Some(Scope::UsersWrite),
        params: &[USER_ID],
        body: Some(("UserPatch", JSON)),
        responses: &[
            (200, "The updated user", "UserEnvelope"),
            (400, "Invalid fields", "Error"),
            (404, "No such user", "Error"),
            (413, "Body over 64 KiB", "Error"),
            (415, "Not JSON", "Error"),
            (422, "Forbidden state change or last admin", "Error"),
        ],
    },
    Op {
        method: "delete",
        path: "/v1/users/{user_id}",
        id: "deleteUser",
        summary: "Delete a user; their sessions and tokens stop working at once",
        tag: "Users",
        scope: Some(Scope::UsersWrite),
        params: &[USER_ID, TRANSFER_TO],
        body: None,
        responses: &[
            (204, "Deleted", ""),
            (400, "Invalid transfer_to", "Error"),
            (404, "No such user", "Error"),
            (422, "Owned client applications or last admin", "Error"),
        ],
    },
    Op {
        method: "post",
        path: "/v1/users/{user_id}/invitation",
        id: "resendInvitation",
        summary: "Send a new invitation (the previous link stops working)",
        tag: "Users",
        scope: Some(Scope::UsersWrite),
        params: &[USER_ID],
        body: None,
        responses: &[
            (202, "A new invitation is queued", "UserEnvelope"),
            (404, "No such user", "Error"),
            (422, "The user is not pending_invite", "Error"),
        ],
    },
    Op {
        method: "get",
        path: "/v1/me",
        id: "getProfile",
        summary: "The profile of the user the token acts for",
        tag: "Profile",
        scope: Some(Scope::ProfileRead),
        params: &[],
        body: None,
        responses: &[
            (200, "The user", "UserEnvelope"),
            (404, "The token acts for no user", "Error"),
        ],
    },
    Op {
        method: "patch",
        path: "/v1/me",
        id: "updateProfile",
        summary: "Change your own name",
        tag: "Profile",
        scope: Some(Scope::ProfileWrite),
        params: &[],
        body: Some(("ProfilePatch", JSON)),
        responses: &[
            (200, "The user", "UserEnvelope"),
            (400, "Invalid fields", "Error"),
            (404, "The token acts for no user", "Error"),
            (413, "Body over 64 KiB", "Error"),
            (415, "Not JSON", "Error"),
        ],
    },
    Op {
        method: "get",
        path: "/v1/products",
        id: "listProducts",
        summary: "List the catalog, newest first",
        tag: "Products",
        scope: Some(Scope::ProductsRead),
        params: &[LIMIT, OFFSET, PRODUCT_STATUS, Q],
        body: None,
        responses: &[
            (200, "A page of products", "ProductList"),
            (400, "Invalid query parameter", "Error"),
        ],
    },
    Op {
        method: "post",
        path: "/v1/products",
        id: "createProduct",
        summary: "Add a product",
        tag: "Products",
        scope: Some(Scope::ProductsWrite),
        params: &[],
        body: Some(("NewProduct", JSON)),
        responses: &[
            (201, "The new product; Location names it", "ProductEnvelope"),
            (400, "Invalid fields", "Error"),
            (409, "The sku exists in the catalog", "Error"),
            (413, "Body over 64 KiB", "Error"),
            (415, "Not JSON", "Error"),
        ],
    },
    Op {
        method: "get",
        path: "/v1/products/{product_id}",
        id: "getProduct",
        summary: "Get a product",
        tag: "Products",
        scope: Some(Scope::ProductsRead),
        params: &[PRODUCT_ID],
        body: None,
        responses: &[
            (200, "The product", "ProductEnvelope"),
            (404, "No such product", "Error"),
        ],
    },
    Op {
        method: "patch",
        path: "/v1/products/{product_id}",
        id: "updateProduct",
        summary: "Change a product (status follows stock unless discontinued)",
        tag: "Products",
        scope: Some(Scope::ProductsWrite),
        params: &[PRODUCT_ID],
        body: Some(("ProductPatch", JSON)),
        responses: &[
            (200, "The updated product", "ProductEnvelope"),
            (400, "Invalid fields", "Error"),
            (404, "No such product", "Error"),
            (409, "The sku exists in the catalog", "Error"),
            (413, "Body over 64 KiB", "Error"),
            (415, "Not JSON", "Error"),
            (422, "Status disagrees with stock", "Error"),
        ],
    },
    Op {
        method: "delete",
        path: "/v1/products/{product_id}",
        id: "deleteProduct",
        summary: "Remove a product",
        tag: "Products",
        scope: Some(Scope::ProductsWrite),
        params: &[PRODUCT_ID],
        body: None,
        responses: &[(204, "Deleted", ""), (404, "No such product", "Error")],
    },
    Op {
        method: "get",
        path: "/v2/users",
        id: "listUsersV2",
        summary: "Preview: users with cursor pagination",
        tag: "Preview (v2)",
        scope: Some(Scope::UsersRead),
        params: &[LIMIT, STARTING_AFTER_USER, ROLE, USER_STATUS, Q],
        body: None,
        responses: &[
            (200, "A page of users", "UserCursorList"),
            (400, "Invalid query parameter or cursor", "Error"),
            (
                404,
                "The preview is not enabled for the organization",
                "Error",
            ),
        ],
    },
    Op {
        method: "get",
        path: "/v2/products",
        id: "listProductsV2",
        summary: "Preview: products with cursor pagination",
        tag: "Preview (v2)",
        scope: Some(Scope::ProductsRead),
        params: &[LIMIT, STARTING_AFTER_PRODUCT, PRODUCT_STATUS, Q],
        body: None,
        responses: &[
            (200, "A page of products", "ProductCursorList"),
            (400, "Invalid query parameter or cursor", "Error"),
            (
                404,
                "The preview is not enabled for the organization",
                "Error",
            ),
        ],
    },
    Op {
        method: "get",
        path: "/v0/{path}",
        id: "v0Sunset",
        summary: "API v0 was removed on 2026-09-01",
        tag: "Versions",
        scope: None,
        params: &[V0_PATH],
        body: None,
        responses: &[(410, "Gone; Link names the v1 successor", "Error")],
    },
    Op {
        method: "post",
        path: "/oauth/token",
        id: "token",
        summary: "Issue tokens (client_credentials, authorization_code with PKCE, refresh_token)",
        tag: "OAuth",
        scope: None,
        params: &[],
        body: Some(("TokenRequest", FORM)),
        responses: &[
            (200, "Tokens", "TokenResponse"),
            (400, "OAuth error", "OAuthError"),
            (401, "Client authentication failed", "OAuthError"),
            (429, "Too many failed client authentications", "OAuthError"),
        ],
    },
    Op {
        method: "post",
        path: "/oauth/revoke",
        id: "revoke",
        summary: "Revoke a token (RFC 7009)",
        tag: "OAuth",
        scope: None,
        params: &[],
        body: Some(("RevokeRequest", FORM)),
        responses: &[
            (200, "Revoked, or already invalid", ""),
            (400, "OAuth error", "OAuthError"),
            (401, "Client authentication failed", "OAuthError"),
            (429, "Too many failed client authentications", "OAuthError"),
        ],
    },
    Op {
        method: "get",
        path: "/oauth/authorize",
        id: "authorize",
        summary: "Start the authorization-code flow in a browser (sign-in and consent pages)",
        tag: "OAuth",
        scope: None,
        params: &[],
        body: None,
        responses: &[
            (200, "Sign-in or consent page (HTML)", "Html"),
            (303, "Back to the redirect URI", ""),
            (400, "Unknown client or redirect URI (HTML)", "Html"),
        ],
    },
    Op {
        method: "get",
        path: "/.well-known/jwks.json",
        id: "jwks",
        summary: "Public keys that verify access tokens",
        tag: "Discovery",
        scope: None,
        params: &[],
        body: None,
        responses: &[(200, "A JWK set", "Jwks")],
    },
    Op {
        method: "get",
        path: "/.well-known/oauth-authorization-server",
        id: "metadata",
        summary: "Authorization server metadata (RFC 8414)",
        tag: "Discovery",
        scope: None,
        params: &[],
        body: None,
        responses: &[(200, "Metadata", "Object")],
    },
    Op {
        method: "get",
        path: "/v1/openapi.json",
        id: "openapi",
        summary: "This document",
        tag: "Discovery",
        scope: None,
        params: &[],
        body: None,
        responses: &[(200, "OpenAPI 3.1", "Object")],
    },
    Op {
        method: "get",
        path: "/healthz",
        id: "healthz",
        summary: "The process is up",
        tag: "Operations",
        scope: None,
        params: &[],
        body: None,
        responses: &[(200, "Up", "Status")],
    },
    Op {
        method: "get",
        path: "/readyz",
        id: "readyz",
        summary: "Storage answers and the server is not shutting down",
        tag: "Operations",
        scope: None,
        params: &[],
        body: None,
        responses: &[(200, "Ready", "Status"), (503, "Not ready", "Error")],
    },
];

fn schema_ref(name: &str) -> Value {
    json!({"$ref": format!("#/components/schemas/{name}")})
}

/// The schemas: generated from the types below, and written out for the
/// answers no type of ours writes field by field — the v2 cursor pages
/// (written through `serde_json::Value`, keys sorted), the JWK set, the
/// health status, HTML pages.
fn components() -> Value {
    let cursor_meta = json!({"type": "object", "required": ["limit", "next_cursor", "request_id", "version"], "properties": {
        "limit": {"type": "integer", "minimum": 1, "maximum": 100}, "next_cursor": {"type": ["string", "null"]},
        "request_id": {"type": "string"}, "version": {"type": "string"}}});
    let mut all = json!({
        "UserCursorList": {"type": "object", "required": ["data", "meta"], "properties": {"data": {"type": "array", "items": schema_ref("User")}, "meta": cursor_meta}},
        "ProductCursorList": {"type": "object", "required": ["data", "meta"], "properties": {"data": {"type": "array", "items": schema_ref("Product")}, "meta": cursor_meta}},
        "Jwks": {"type": "object", "required": ["keys"], "properties": {"keys": {"type": "array", "items": {"type": "object"}}}},
        "Status": {"type": "object", "required": ["status"], "properties": {"status": {"type": "string"}}},
        "Object": {"type": "object"},
        "Html": {"type": "string"},
    });
    let types = [
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
        generated::<Meta<'static>>(),
        generated::<ListMeta<'static>>(),
        named::<Single<'static, UserResponse<'static>>>("UserEnvelope"),
        named::<Single<'static, ProductResponse<'static>>>("ProductEnvelope"),
        named::<List<'static, UserResponse<'static>>>("UserList"),
        named::<List<'static, ProductResponse<'static>>>("ProductList"),
    ];
    let map = all.as_object_mut().expect("an object");
    for (name, schema) in types {
        map.insert(name, schema);
    }
    all
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

fn content(schema: &str, media: &str) -> Value {
    if schema.is_empty() {
        return Value::Null;
    }
    let media = if schema == "Html" { "text/html" } else { media };
    json!({ media: { "schema": schema_ref(schema) } })
}

fn operation(op: &Op, public_url: &str) -> Value {
    let mut o = Map::new();
    o.insert("operationId".into(), json!(op.id));
    o.insert("summary".into(), json!(op.summary));
    o.insert("tags".into(), json!([op.tag]));
    let params: Vec<Value> = op
        .params
        .iter()
        .map(|p| json!({"name": p.name, "in": p.location, "required": p.required, "schema": (p.schema)(), "description": p.description}))
        .collect();
    if !params.is_empty() {
        o.insert("parameters".into(), json!(params));
    }
    if let Some((schema, media)) = op.body {
        o.insert(
            "requestBody".into(),
            json!({"required": true, "content": content(schema, media)}),
        );
    }
    let mut responses = Map::new();
    for (status, desc, schema) in op.responses {
        let mut r = Map::new();
        r.insert("description".into(), json!(desc));
        let c = content(schema, JSON);
        if !c.is_null() {
            r.insert("content".into(), c);
        }
        responses.insert(status.to_string(), Value::Object(r));
    }
    match op.scope {
        Some(scope) => {
            o.insert(
                "security".into(),
                json!([{"bearer": [scope.as_str()]}, {"oauth2": [scope.as_str()]}]),
            );
            o.insert(
                "description".into(),
                json!(format!(
                    "Needs the `{}` scope (or `admin`). Errors: see {public_url}/docs/errors.",
                    scope.as_str()
                )),
            );
            for (status, desc) in API_ERRORS {
                responses.entry(status.to_string()).or_insert_with(
                    || json!({"description": desc, "content": content("Error", JSON)}),
                );
            }
        }
        None => {
            o.insert("security".into(), json!([]));
        }
    }
    // D45: any request, to any operation, can be refused before it is
    // routed: a malformed head, an over-long target, too many or too large
    // header fields. Those answers carry the API envelope everywhere.
    for (status, desc) in TRANSPORT_ERRORS {
        responses
            .entry(status.to_string())
            .or_insert_with(|| json!({"description": desc, "content": content("Error", JSON)}));
    }
    o.insert("responses".into(), Value::Object(responses));
    Value::Object(o)
}

/// The document, with `servers` and links pointing at `public_url`.
pub fn document(public_url: &str) -> Value {
    let mut paths = Map::new();
    for op in OPERATIONS {
        let entry = paths.entry(op.path.to_owned()).or_insert_with(|| json!({}));
        entry
            .as_object_mut()
            .unwrap()
            .insert(op.method.into(), operation(op, public_url));
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
        "tags": [{"name": "Users"}, {"name": "Profile"}, {"name": "Products"}, {"name": "Preview (v2)"}, {"name": "OAuth"}, {"name": "Discovery"}, {"name": "Operations"}, {"name": "Versions"}],
        "paths": paths,
        "components": {
            "schemas": components(),
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
