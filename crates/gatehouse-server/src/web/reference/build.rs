//! The reference documentation under `/docs` (D35, D52), built once per
//! server from the OpenAPI document ([`crate::openapi::document`]): every
//! operation with its parameters, request and response schemas, scope,
//! errors and a curl example, one page per tag, a page of schemas, the
//! error codes (the API's and the OAuth / OpenID Connect ones), a client
//! quick start, and the entries the search reads. The pages are rendered
//! through the auto-escaping templates of [`crate::docs::Templates`]; this
//! module only turns the document into plain values for them.
//!
//! The OpenID Connect endpoints of D49 (introspection, userinfo, logout,
//! the discovery document) are described by [`supplement`] in the same
//! OpenAPI shape until the code documents them itself; an operation the
//! generated document has always wins.

use std::collections::{BTreeMap, BTreeSet};

use gatehouse_domain::Scope;
use serde::Serialize;
use serde_json::{Value, json};

use crate::error::ErrorCode;

/// Methods in the order a page lists them under one path.
const METHODS: [&str; 5] = ["get", "post", "put", "patch", "delete"];

/// A field of a schema, flattened (`data.email`, `keys[].kid`).
#[derive(Clone, Debug, Serialize)]
pub struct Field {
    pub name: String,
    pub ty: String,
    pub required: bool,
    pub description: String,
    pub values: Vec<String>,
    pub depth: usize,
}

#[derive(Clone, Debug, Serialize)]
pub struct ParamView {
    pub name: String,
    pub location: String,
    pub required: bool,
    pub ty: String,
    pub description: String,
    pub values: Vec<String>,
}

/// A link to an error code on `/docs/errors`.
#[derive(Clone, Debug, Serialize)]
pub struct CodeLink {
    pub code: String,
    pub href: String,
}

#[derive(Clone, Debug, Serialize)]
pub struct BodyView {
    pub content_type: String,
    /// The named schema (a component), when it is one.
    pub schema: Option<String>,
    /// Its type in words.
    pub ty: String,
    pub fields: Vec<Field>,
    pub example: Option<String>,
}

#[derive(Clone, Debug, Serialize)]
pub struct ResponseView {
    pub status: String,
    pub ok: bool,
    pub description: String,
    pub body: Option<BodyView>,
    pub headers: Vec<(String, String)>,
    pub codes: Vec<CodeLink>,
}

/// One operation as its section shows it.
#[derive(Clone, Debug, Serialize)]
pub struct OpView {
    pub id: String,
    pub method: String,
    pub method_class: String,
    pub path: String,
    pub summary: String,
    pub description: String,
    pub tag: String,
    pub href: String,
    pub auth: String,
    pub scope: Option<String>,
    pub params: Vec<ParamView>,
    pub request: Option<BodyView>,
    pub responses: Vec<ResponseView>,
    /// Every error code the operation can answer with, linked.
    pub codes: Vec<CodeLink>,
    pub curl: String,
}

#[derive(Clone, Debug, Serialize)]
pub struct TagView {
    pub name: String,
    pub slug: String,
    pub href: String,
    pub intro: String,
    pub ops: Vec<OpView>,
}

#[derive(Clone, Debug, Serialize)]
pub struct SchemaView {
    pub name: String,
    pub description: String,
    pub ty: String,
    pub values: Vec<String>,
    pub fields: Vec<Field>,
}

/// An error code of the reference page.
#[derive(Clone, Debug, Serialize)]
pub struct CodeView {
    pub code: String,
    pub status: String,
    pub summary: String,
    pub endpoints: String,
}

/// One thing the search can find.
#[derive(Clone, Debug, Serialize)]
pub struct Entry {
    pub kind: &'static str,
    pub title: String,
    pub detail: String,
    pub href: String,
    #[serde(skip)]
    haystack: String,
}

/// Everything the pages show, taken from the document once.
#[derive(Clone, Debug, Serialize)]
pub struct Reference {
    pub public_url: String,
    pub base_url: String,
    pub tags: Vec<TagView>,
    pub schemas: Vec<SchemaView>,
    pub api_codes: Vec<CodeView>,
    pub oauth_codes: Vec<CodeView>,
    #[serde(skip)]
    pub entries: Vec<Entry>,
}

/// The RFC 6749 / RFC 6750 / RFC 7662 / OpenID Connect error codes, with
/// the statuses they come with (303: in the redirect back to the client)
/// and what each means here.
pub const OAUTH_ERRORS: &[(&str, &[u16], &str)] = &[
    (
        "invalid_request",
        &[400, 303],
        "The request is missing a parameter, repeats one, has an unsupported value (e.g. `code_challenge_method=plain`), sends two `Authorization` headers, or authenticates the client twice (HTTP Basic and a form `client_secret`). At `/oauth/authorize`, also `prompt=none` together with another value. Fix the request; retrying it unchanged does not help.",
    ),
    (
        "invalid_client",
        &[401],
        "Client authentication failed: unknown `client_id`, wrong secret, no credentials from a confidential client, or a public client at `/oauth/introspect`. Comes with `WWW-Authenticate: Basic`. Check the credentials (a rotated secret stops working after its grace period).",
    ),
    (
        "invalid_grant",
        &[400],
        "The authorization code, refresh token or PKCE `code_verifier` is invalid, expired, already used, issued to another client, or the `redirect_uri` differs from the authorization request's. A refresh token presented again after the grace window revokes its whole chain. Start the flow again.",
    ),
    (
        "unauthorized_client",
        &[400, 303],
        "This client may not use this grant: e.g. a public client asking for `client_credentials`.",
    ),
    (
        "unsupported_grant_type",
        &[400],
        "`grant_type` is not one of `client_credentials`, `authorization_code`, `refresh_token`.",
    ),
    (
        "invalid_scope",
        &[400, 303],
        "A scope is unknown or not registered for the client (token endpoint), `openid`, `profile` or `email` with `client_credentials`, or — at `/oauth/authorize` — nothing is left to grant after dropping what the client or the person's role may not have.",
    ),
    (
        "unsupported_response_type",
        &[303],
        "`response_type` is not `code` (the only flow offered).",
    ),
    (
        "access_denied",
        &[303],
        "The person chose Deny on the consent page. The redirect carries your `state`.",
    ),
    (
        "login_required",
        &[303],
        "`prompt=none` was asked for, and nobody is signed in (or `max_age` has passed). Send the person through the flow without `prompt=none`.",
    ),
    (
        "consent_required",
        &[303],
        "`prompt=none` was asked for, and the person has not consented to these scopes for this client (always the case for public clients with loopback redirect URIs). Ask again without `prompt=none`.",
    ),
    (
        "request_uri_not_supported",
        &[303],
        "The authorization request used `request_uri`; Gatehouse does not support request objects (`request_uri_parameter_supported: false`).",
    ),
    (
        "temporarily_unavailable",
        &[429, 503, 303],
        "Too many failed client authentications from your address (429), or the server is overloaded or in maintenance (503). Wait the seconds of `Retry-After`, then retry.",
    ),
    (
        "server_error",
        &[500, 303],
        "An unexpected failure. Retry with back-off (1, 2, 4, 8 s) and report the `X-Request-ID`.",
    ),
    (
        "invalid_token",
        &[401],
        "Userinfo (RFC 6750): the access token is missing, malformed, expired or revoked. Comes in `WWW-Authenticate: Bearer error=\"invalid_token\"`. Get a new token (refresh).",
    ),
    (
        "insufficient_scope",
        &[403],
        "Userinfo (RFC 6750): the access token was not granted `openid`. Comes in `WWW-Authenticate: Bearer error=\"insufficient_scope\"`. Ask for `openid` at `/oauth/authorize`.",
    ),
];

/// The OAuth error codes each OAuth endpoint answers with.
fn oauth_codes_of(path: &str) -> &'static [&'static str] {
    match path {
        "/oauth/token" => &[
            "invalid_request",
            "invalid_client",
            "invalid_grant",
            "unauthorized_client",
            "unsupported_grant_type",
            "invalid_scope",
            "temporarily_unavailable",
            "server_error",
        ],
        "/oauth/revoke" | "/oauth/introspect" => &[
            "invalid_request",
            "invalid_client",
            "temporarily_unavailable",
            "server_error",
        ],
        "/oauth/authorize" => &[
            "invalid_request",
            "unauthorized_client",
            "unsupported_response_type",
            "invalid_scope",
            "access_denied",
            "login_required",
            "consent_required",
            "request_uri_not_supported",
            "temporarily_unavailable",
            "server_error",
        ],
        "/oauth/userinfo" => &["invalid_request", "invalid_token", "insufficient_scope"],
        _ => &[],
    }
}

fn error_href(code: &str) -> String {
    format!("/docs/errors#{code}")
}

fn link(code: &str) -> CodeLink {
    CodeLink {
        code: code.to_owned(),
        href: error_href(code),
    }
}

/// The API error codes a response of `status` described as `description`
/// stands for: the status's codes, narrowed by the description where a
/// status has several.
fn api_codes(status: u16, description: &str) -> Vec<&'static str> {
    let d = description.to_ascii_lowercase();
    let all: Vec<ErrorCode> = ErrorCode::ALL
        .iter()
        .copied()
        .filter(|c| c.status().as_u16() == status)
        .collect();
    if all.len() <= 1 {
        return all.iter().map(|c| c.as_str()).collect();
    }
    let named = |c: &ErrorCode| d.contains(&c.as_str().to_ascii_lowercase());
    let fits = |c: &ErrorCode| match c {
        ErrorCode::DuplicateResource => d.contains("exists"),
        ErrorCode::InvalidStateTransition => {
            d.contains("state") || d.contains("status") || d.contains("pending")
        }
        ErrorCode::OwnedResourcesExist => d.contains("owned"),
        ErrorCode::LastAdmin => d.contains("last admin"),
        ErrorCode::InvalidToken | ErrorCode::TokenExpired => true,
        _ => false,
    };
    let picked: Vec<&'static str> = all
        .iter()
        .filter(|c| named(c) || fits(c))
        .map(|c| c.as_str())
        .collect();
    if picked.is_empty() {
        all.iter().map(|c| c.as_str()).collect()
    } else {
        picked
    }
}

/// A tag's page name: `Preview (v2)` → `preview-v2`.
pub fn slug(name: &str) -> String {
    let mut out = String::new();
    for c in name.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('-') {
            out.push('-');
        }
    }
    let s = out.trim_matches('-').to_owned();
    if ["errors", "schemas", "search", "quickstart", "assets", ""].contains(&s.as_str()) {
        format!("api-{s}")
    } else {
        s
    }
}

/// What a few tags are about, shown above their operations.
fn tag_intro(name: &str) -> &'static str {
    match name {
        "Users" => {
            "The people of your organization. Creating a user sends an invitation e-mail; the person becomes `active` once they choose a password. Lists are ordered newest first and paged with `limit` and `offset`."
        }
        "Profile" => {
            "The user a token was issued for (authorization-code tokens only; a client-credentials token or API key acts for no user)."
        }
        "Products" => {
            "The organization's catalog. A product's `status` follows its `stock` unless it is `discontinued`. Search with `q` matches word prefixes of `name` and `sku`."
        }
        "Applications" => {
            "Your organization's client applications (D46): register one and get its `client_secret` once, change its redirect URIs and scopes, rotate the secret with a grace period, delete it, and see its requests per minute. Needs `applications:read` / `applications:write`. An editor sees and changes only the applications it registered; an admin or an organization-wide credential (client credentials, API key) all of them. Nobody can give an application a scope they do not hold."
        }
        "API keys" => {
            "Static keys for servers and scripts (`Authorization: Bearer gk_live_…`). The key is shown once, at creation; afterwards only its `prefix` (first 12 characters). Keys die when revoked, when they expire, and when the person who created them is deactivated or deleted. Managed with the same `applications:*` scopes."
        }
        "Organization" => {
            "Your organization's plan and its rate limits per credential. Any valid token of the organization may read it."
        }
        "Preview (v2)" => {
            "Cursor pagination (`limit`, `starting_after`; `meta.next_cursor`). Enabled per organization by an operator; elsewhere these paths answer 404."
        }
        "OAuth" => {
            "The authorization server (RFC 6749, RFC 7636 PKCE, RFC 7009 revocation, RFC 7662 introspection, OpenID Connect). Its endpoints take `application/x-www-form-urlencoded` forms and answer errors as `{\"error\", \"error_description\"}` (RFC 6749 §5.2), not the API envelope. See the quick start for complete flows."
        }
        "Discovery" => {
            "Documents a client reads to configure itself: server metadata, OpenID Connect discovery, the signing keys, and the OpenAPI document behind this reference."
        }
        "Operations" => {
            "Health checks for load balancers and orchestrators. They need no token and reveal no tenant data."
        }
        "Versions" => {
            "API v0 was removed on 2026-09-01; its paths answer 410 with a link to the v1 equivalent."
        }
        _ => "",
    }
}

/// Follows `$ref`s to the schema they name; the name of the first one.
fn resolve<'a>(doc: &'a Value, mut s: &'a Value) -> (&'a Value, Option<String>) {
    let mut name = None;
    for _ in 0..8 {
        let Some(r) = s.get("$ref").and_then(Value::as_str) else {
            break;
        };
        let n = r.rsplit('/').next().unwrap_or(r).to_owned();
        name.get_or_insert(n.clone());
        s = &doc["components"]["schemas"][n.as_str()];
    }
    (s, name)
}

/// The non-null member of an `Option`'s `oneOf: [{type: null}, X]`.
fn unwrap_nullable(s: &Value) -> &Value {
    for key in ["oneOf", "anyOf"] {
        if let Some(members) = s.get(key).and_then(Value::as_array) {
            let real: Vec<&Value> = members
                .iter()
                .filter(|m| m.get("type") != Some(&json!("null")))
                .collect();
            if real.len() == 1 {
                return real[0];
            }
        }
    }
    s
}

/// A schema's type in a few words: `string (date-time)`, `array of User`.
fn type_of(s: &Value) -> String {
    if let Some(r) = s.get("$ref").and_then(Value::as_str) {
        return r.rsplit('/').next().unwrap_or(r).to_owned();
    }
    for key in ["oneOf", "anyOf", "allOf"] {
        if let Some(members) = s.get(key).and_then(Value::as_array) {
            let parts: Vec<String> = members.iter().map(type_of).collect();
            return parts.join(if key == "allOf" { " and " } else { " or " });
        }
    }
    let base = match s.get("type") {
        Some(Value::String(t)) => t.clone(),
        Some(Value::Array(ts)) => ts
            .iter()
            .filter_map(Value::as_str)
            .collect::<Vec<_>>()
            .join(" or "),
        _ if s.get("properties").is_some() => "object".into(),
        _ => "any".into(),
    };
    if base == "array" {
        let items = s.get("items").map(type_of);
        return format!("array of {}", items.unwrap_or_else(|| "any".into()));
    }
    match s.get("format").and_then(Value::as_str) {
        Some(f) if !matches!(f, "int32" | "int64") => format!("{base} ({f})"),
        _ => base,
    }
}

fn enum_values(s: &Value) -> Vec<String> {
    s.get("enum")
        .and_then(Value::as_array)
        .map(|vs| {
            vs.iter()
                .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

fn text(v: &Value) -> String {
    v.as_str().unwrap_or_default().trim().to_owned()
}

/// The properties of an object schema (through `allOf`), with whether each
/// is required.
fn properties<'a>(doc: &'a Value, s: &'a Value) -> Vec<(String, &'a Value, bool)> {
    let (s, _) = resolve(doc, s);
    let mut out = Vec::new();
    if let Some(all) = s.get("allOf").and_then(Value::as_array) {
        for member in all {
            out.extend(properties(doc, member));
        }
    }
    let required: BTreeSet<&str> = s
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    if let Some(props) = s.get("properties").and_then(Value::as_object) {
        for (name, p) in props {
            out.push((name.clone(), p, required.contains(name.as_str())));
        }
    }
    out
}

/// The fields of a schema, nested ones under their parent's name.
fn fields(doc: &Value, schema: &Value, prefix: &str, depth: usize, out: &mut Vec<Field>) {
    for (name, p, required) in properties(doc, schema) {
        let inner = unwrap_nullable(p);
        let (resolved, _) = resolve(doc, inner);
        let description = match text(&p["description"]) {
            d if d.is_empty() => text(&resolved["description"]),
            d => d,
        };
        let full = format!("{prefix}{name}");
        out.push(Field {
            name: full.clone(),
            ty: type_of(p),
            required,
            description,
            values: enum_values(resolved),
            depth,
        });
        if depth >= 3 {
            continue;
        }
        if !properties(doc, resolved).is_empty() {
            fields(doc, resolved, &format!("{full}."), depth + 1, out);
        } else if resolved.get("type") == Some(&json!("array")) {
            let (items, _) = resolve(doc, &resolved["items"]);
            if !properties(doc, items).is_empty() {
                fields(doc, items, &format!("{full}[]."), depth + 1, out);
            }
        }
    }
}

/// An example value of a schema, for bodies and curl commands.
fn sample(doc: &Value, schema: &Value, name: &str, all: bool, depth: usize) -> Value {
    let s = unwrap_nullable(schema);
    let (s, _) = resolve(doc, s);
    if let Some(e) = s.get("example") {
        return e.clone();
    }
    if let Some(first) = s["enum"].as_array().and_then(|e| e.first()) {
        return first.clone();
    }
    let props = properties(doc, s);
    if !props.is_empty() {
        if depth > 4 {
            return json!({});
        }
        let mut out = serde_json::Map::new();
        let wanted: Vec<_> = if all {
            props
        } else {
            let req: Vec<_> = props.iter().filter(|p| p.2).cloned().collect();
            if req.is_empty() {
                props.into_iter().take(1).collect()
            } else {
                req
            }
        };
        for (n, p, _) in wanted {
            out.insert(n.clone(), sample(doc, p, &n, all, depth + 1));
        }
        return Value::Object(out);
    }
    let ty = match s.get("type") {
        Some(Value::String(t)) => t.as_str(),
        Some(Value::Array(ts)) => ts
            .iter()
            .filter_map(Value::as_str)
            .find(|t| *t != "null")
            .unwrap_or("string"),
        _ => "string",
    };
    match ty {
        "array" => {
            if depth > 4 {
                return json!([]);
            }
            let item_name = name.strip_suffix('s').unwrap_or(name);
            json!([sample(doc, &s["items"], item_name, all, depth + 1)])
        }
        "integer" => match name {
            "iat" | "updated_at" | "auth_time" => json!(1_795_000_000),
            "exp" => json!(1_795_003_600),
            "price" => json!(1999),
            "stock" => json!(25),
            "limit" => json!(20),
            "offset" | "total" => json!(0),
            "expires_in" => json!(3600),
            _ => s.get("minimum").cloned().unwrap_or(json!(1)),
        },
        "number" => json!(1.5),
        "boolean" => json!(true),
        "object" => json!({}),
        _ => {
            if s.get("format").and_then(Value::as_str) == Some("date-time") {
                return json!("2026-11-22T02:31:42.123Z");
            }
            // An id's pattern names its prefix (`^prod_[A-Za-z0-9]+$`).
            if let Some(prefix) = s["pattern"]
                .as_str()
                .and_then(|p| p.strip_prefix('^'))
                .and_then(|p| p.split_once('_'))
                .map(|(prefix, _)| prefix)
                .filter(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_lowercase()))
            {
                return json!(format!("{prefix}_7kQm2XcVbN9pLz4R"));
            }
            json!(match name {
                "email" => "ada@example.com",
                "name" => "Ada Lovelace",
                "sku" => "SHIRT-BLUE-M",
                "request_id" => "req_4f0c2a7d9e3b4c1a8f6e5d2b7a9c0e1f",
                "version" => gatehouse_domain::API_VERSION,
                "id" => "usr_7kQm2XcVbN9pLz4R",
                "owner_id" | "user_id" | "sub" => "usr_7kQm2XcVbN9pLz4R",
                "client_id" => "app_3fJx9QpLm2VbN7kZ",
                "org" => "org_9dKs2LmQp4XvB8nW",
                "iss" => "https://localhost:8443",
                "aud" => "https://localhost:8443/v1",
                "access_token" => "eyJhbGciOiJFUzI1NiIs…",
                "refresh_token" => "rt_…",
                "scope" => "users:read products:read",
                "token_type" => "Bearer",
                "code" => "VALIDATION_ERROR",
                "message" => "email is required",
                "field" => "email",
                "issue" => "is required",
                "status" => "ok",
                "docs" => "https://localhost:8443/docs/errors#VALIDATION_ERROR",
                "next_cursor" => "usr_7kQm2XcVbN9pLz4R",
                _ => "string",
            })
        }
    }
}

/// `'…'` for a shell, when the text needs quoting.
fn shell_word(s: &str) -> String {
    if s.chars()
        .all(|c| c.is_ascii_alphanumeric() || "-_.:/=$@%".contains(c))
    {
        s.to_owned()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// A path parameter as a shell variable (`{user_id}` → `$USER_ID`).
fn path_var(name: &str) -> String {
    match name {
        // `$PATH` is the shell's; show a real v0 path instead.
        "path" => "users".into(),
        n => format!("${}", n.to_ascii_uppercase()),
    }
}

/// A curl command that makes the request.
fn curl(
    doc: &Value,
    public_url: &str,
    method: &str,
    path: &str,
    op: &Value,
    bearer: bool,
) -> String {
    let mut url_path = String::new();
    let mut rest = path;
    while let Some(open) = rest.find('{') {
        url_path.push_str(&rest[..open]);
        let Some(close) = rest[open..].find('}') else {
            break;
        };
        url_path.push_str(&path_var(&rest[open + 1..open + close]));
        rest = &rest[open + close + 1..];
    }
    url_path.push_str(rest);
    let mut query = Vec::new();
    for p in op["parameters"].as_array().into_iter().flatten() {
        if p["in"] == "query" && p["required"] == json!(true) {
            let name = text(&p["name"]);
            let v = sample(doc, &p["schema"], &name, false, 0);
            let v = match v.as_str() {
                Some("string") => format!("${}", name.to_ascii_uppercase()),
                Some(s) => s.to_owned(),
                None => v.to_string(),
            };
            query.push(format!("{name}={v}"));
        }
    }
    let mut url = format!("{public_url}{url_path}");
    if !query.is_empty() {
        url = format!("{url}?{}", query.join("&"));
    }
    let mut lines = vec![format!("curl -sS \"{url}\"")];
    let upper = method.to_ascii_uppercase();
    let content = &op["requestBody"]["content"];
    let json_body = content.get("application/json");
    let form_body = content.get("application/x-www-form-urlencoded");
    if !(upper == "GET" || (upper == "POST" && (json_body.is_some() || form_body.is_some()))) {
        lines.push(format!("-X {upper}"));
    }
    if bearer {
        lines.push("-H \"Authorization: Bearer $TOKEN\"".into());
    }
    if let Some(body) = json_body {
        let example = sample(doc, &body["schema"], "", false, 0);
        lines.push("-H 'Content-Type: application/json'".into());
        lines.push(format!("-d {}", shell_word(&example.to_string())));
    } else if let Some(body) = form_body {
        let props = properties(doc, &body["schema"]);
        if props.iter().any(|(n, _, _)| n == "client_secret") {
            lines.push("-u \"$CLIENT_ID:$CLIENT_SECRET\"".into());
        }
        for (name, p, required) in props {
            // `scope` is optional, but a request should say what it needs.
            if !required && name != "scope" {
                continue;
            }
            let v = sample(doc, p, &name, false, 0);
            let v = match v.as_str() {
                Some("string") | None => format!("${}", name.to_ascii_uppercase()),
                Some(s) => s.to_owned(),
            };
            lines.push(format!("-d {}", shell_word(&format!("{name}={v}"))));
        }
    }
    lines.join(" \\\n  ")
}

fn body_view(doc: &Value, content: &Value, all: bool) -> Option<BodyView> {
    let (content_type, media) = content.as_object()?.iter().next()?;
    let schema = &media["schema"];
    let mut fs = Vec::new();
    if !schema.is_null() {
        fields(doc, schema, "", 0, &mut fs);
    }
    let (_, name) = resolve(doc, schema);
    let example = (content_type == "application/json" && !schema.is_null())
        .then(|| sample(doc, schema, "", all, 0))
        .filter(|v| v.is_object() || v.is_array())
        .and_then(|v| serde_json::to_string_pretty(&v).ok());
    Some(BodyView {
        content_type: content_type.clone(),
        ty: type_of(schema),
        schema: name,
        fields: fs,
        example,
    })
}

/// One operation of the document as its section shows it.
fn op_view(
    doc: &Value,
    public_url: &str,
    path: &str,
    method: &str,
    op: &Value,
    tag: &str,
) -> OpView {
    let scope = op["security"]
        .as_array()
        .into_iter()
        .flatten()
        .find_map(|s| s["bearer"][0].as_str().map(str::to_owned));
    let is_oauth = path.starts_with("/oauth/");
    let bearer = scope.is_some() || op["x-bearer"] == json!(true);
    let auth = match (&scope, is_oauth) {
        (Some(s), _) => format!(
            "Bearer token (access token or API key) with the `{s}` scope, or `admin`."
        ),
        (None, _) if bearer => "Bearer access token issued for a user with `openid`.".into(),
        (None, _) if path == "/oauth/authorize" => {
            "None from the client: the person signs in on Gatehouse's own page.".into()
        }
        (None, true)
            if properties(
                doc,
                &op["requestBody"]["content"]["application/x-www-form-urlencoded"]["schema"],
            )
            .iter()
            .any(|(n, _, _)| n == "client_secret")
                || op["x-client-auth"] == json!(true) =>
        {
            "Client authentication: HTTP Basic (`client_secret_basic`) or `client_id` and `client_secret` in the form (`client_secret_post`); public clients send only `client_id`.".into()
        }
        _ => "None.".into(),
    };
    let params = op["parameters"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| {
            let (s, _) = resolve(doc, unwrap_nullable(&p["schema"]));
            ParamView {
                name: text(&p["name"]),
                location: text(&p["in"]),
                required: p["required"] == json!(true),
                ty: type_of(&p["schema"]),
                description: text(&p["description"]),
                values: enum_values(s),
            }
        })
        .collect();
    let oauth_codes = oauth_codes_of(path);
    let mut all_codes: Vec<String> = Vec::new();
    let mut responses = Vec::new();
    for (status, r) in op["responses"].as_object().into_iter().flatten() {
        let code: u16 = status.parse().unwrap_or(0);
        let description = text(&r["description"]);
        let body = body_view(doc, &r["content"], true);
        let is_api_error = body
            .as_ref()
            .is_some_and(|b| b.schema.as_deref() == Some("Error"));
        let codes: Vec<String> = if is_api_error {
            api_codes(code, &description)
                .into_iter()
                .map(str::to_owned)
                .collect()
        } else if let Some(listed) = r["x-error-codes"].as_array() {
            listed.iter().map(text).collect()
        } else if body.as_ref().is_some_and(|b| b.content_type == "text/html") {
            // A page for a person, not a code for a client.
            Vec::new()
        } else {
            oauth_codes
                .iter()
                .filter(|c| {
                    OAUTH_ERRORS
                        .iter()
                        .any(|(n, statuses, _)| n == *c && statuses.contains(&code))
                })
                .map(|c| (*c).to_owned())
                .collect()
        };
        for c in &codes {
            if !all_codes.contains(c) {
                all_codes.push(c.clone());
            }
        }
        let headers = r["headers"]
            .as_object()
            .into_iter()
            .flatten()
            .map(|(n, h)| (n.clone(), text(&h["description"])))
            .collect();
        responses.push(ResponseView {
            ok: code < 400,
            status: status.clone(),
            description,
            // An error's body is the envelope every error has; its link says so.
            body: if code >= 400 {
                body.map(|b| BodyView {
                    fields: vec![],
                    example: None,
                    ..b
                })
            } else {
                body
            },
            headers,
            codes: codes.iter().map(|c| link(c)).collect(),
        });
    }
    for c in oauth_codes {
        if !all_codes.iter().any(|x| x == c) {
            all_codes.push((*c).to_owned());
        }
    }
    let id = text(&op["operationId"]);
    let tag_slug = slug(tag);
    OpView {
        href: format!("/docs/{tag_slug}#{id}"),
        method: method.to_ascii_uppercase(),
        method_class: method.to_owned(),
        path: path.to_owned(),
        summary: text(&op["summary"]),
        description: own_description(&text(&op["description"])),
        tag: tag.to_owned(),
        auth,
        scope,
        params,
        request: body_view(doc, &op["requestBody"]["content"], false),
        responses,
        codes: all_codes.iter().map(|c| link(c)).collect(),
        curl: curl(doc, public_url, method, path, op, bearer),
        id,
    }
}

/// An operation's description without the sentence the document adds to
/// every scoped one ("Needs the `x` scope … Errors: see …"): the page says
/// that under Authentication and Error codes.
fn own_description(d: &str) -> String {
    match d.find("Errors: see ") {
        Some(i) if d.starts_with("Needs the `") => {
            let rest = &d[i..];
            let end = rest
                .find("/docs/errors.")
                .map_or(rest.len(), |j| j + "/docs/errors.".len());
            rest[end..].trim().to_owned()
        }
        _ => d.to_owned(),
    }
}

/// D49's endpoints, in the document's shape, for the pages only (the
/// generated document describes what the code serves; these are added to
/// the pages until the code documents them itself).
pub fn supplement() -> Value {
    let oauth_error =
        json!({"application/json": {"schema": {"$ref": "#/components/schemas/OAuthError"}}});
    let client_auth_props = json!({
        "client_id": {"type": "string", "description": "With `client_secret_post`; omit with HTTP Basic."},
        "client_secret": {"type": "string", "description": "With `client_secret_post`; omit with HTTP Basic."},
    });
    let mut introspect_props = json!({
        "token": {"type": "string", "description": "An access token or API key of your organization, or a refresh token issued to you."},
        "token_type_hint": {"type": "string", "enum": ["access_token", "refresh_token", "api_key"], "description": "Where to look first; the answer is the same without it."},
    });
    let logout_props = json!({
        "id_token_hint": {"type": "string", "description": "An ID token the client received (an expired one is fine): names the user, session and client. Only one of the person's current session signs them out without asking."},
        "client_id": {"type": "string", "description": "The client, when there is no hint; sent with one, it must be the hint's `aud`."},
        "post_logout_redirect_uri": {"type": "string", "description": "Where to send the browser afterwards; must be registered exactly for the client (`post_logout_redirect_uris`)."},
        "state": {"type": "string", "description": "Returned unchanged on the redirect."},
    });
    for (k, v) in client_auth_props.as_object().into_iter().flatten() {
        introspect_props[k] = v.clone();
    }
    let userinfo_answer = json!({
        "200": {"description": "Claims of the user (OpenID Connect Core §5.3)", "content": {"application/json": {"schema": {"type": "object", "required": ["sub"], "properties": {
            "sub": {"type": "string", "description": "The user's id (`usr_…`)."},
            "name": {"type": "string", "description": "With `profile`."},
            "updated_at": {"type": "integer", "description": "With `profile`: epoch seconds."},
            "email": {"type": "string", "description": "With `email`."},
            "email_verified": {"type": "boolean", "description": "With `email`: true once the person accepted an invitation or reset their password."},
        }}}}},
        "401": {"description": "No, malformed, expired or revoked access token (`WWW-Authenticate: Bearer error=\"invalid_token\"`)", "x-error-codes": ["invalid_token"]},
        "403": {"description": "The token was not granted `openid` (`WWW-Authenticate: Bearer error=\"insufficient_scope\"`)", "x-error-codes": ["insufficient_scope"]},
    });
    let logout_answers = json!({
        "303": {"description": "To the registered `post_logout_redirect_uri`, with `state`"},
        "200": {"description": "A signed-out page, or a page asking to confirm unless the hint names the current session (HTML)", "content": {"text/html": {"schema": {"$ref": "#/components/schemas/Html"}}}},
        "400": {"description": "The hint and `client_id` name different clients, or a parameter is given twice: an error page (HTML); nothing ends", "content": {"text/html": {"schema": {"$ref": "#/components/schemas/Html"}}}},
    });
    let logout = |method: &str| {
        let mut op = json!({
            "operationId": if method == "get" { "logout" } else { "logoutPost" },
            "tags": ["OAuth"],
            "summary": format!("End the browser session (OpenID Connect RP-initiated logout), by {}", method.to_ascii_uppercase()),
            "description": "Ends the person's Gatehouse session and revokes the refresh chains begun in it, then redirects to `post_logout_redirect_uri` when it is registered for the client the hint or `client_id` names (exact match, no loopback port leeway); otherwise shows a signed-out page. Only an `id_token_hint` whose `sub` and `sid` name the current session ends it at once; any other hint, or none, asks the person to confirm first (D49 revised). With a session, only a client of its organization is followed; without one, a valid hint's client is followed at once.",
            "responses": logout_answers.clone(),
        });
        if method == "get" {
            op["parameters"] = Value::Array(
                logout_props
                    .as_object()
                    .into_iter()
                    .flatten()
                    .map(|(n, s)| json!({"name": n, "in": "query", "required": false, "description": s["description"], "schema": {"type": "string"}}))
                    .collect(),
            );
        } else {
            op["requestBody"] = json!({"content": {"application/x-www-form-urlencoded": {"schema": {"type": "object", "properties": logout_props.clone()}}}});
        }
        op
    };
    let q = |name: &str, required: bool, description: &str, schema: Value| json!({"name": name, "in": "query", "required": required, "description": description, "schema": schema});
    let authorize_params = json!([
        q(
            "response_type",
            true,
            "`code` (the only flow).",
            json!({"type": "string", "enum": ["code"]})
        ),
        q(
            "client_id",
            true,
            "Your application's id (`app_…`).",
            json!({"type": "string"})
        ),
        q(
            "redirect_uri",
            true,
            "One of the application's registered redirect URIs, exactly (loopback `http://127.0.0.1` URIs may change the port).",
            json!({"type": "string"})
        ),
        q(
            "scope",
            false,
            "Space-separated. Omitted: what the application is registered for, within the person's role, without `admin`, `openid`, `profile` or `email`. Scopes the application or role may not have are dropped.",
            json!({"type": "string"})
        ),
        q(
            "state",
            false,
            "An unguessable value you check when the browser comes back; returned unchanged.",
            json!({"type": "string"})
        ),
        q(
            "code_challenge",
            true,
            "PKCE (RFC 7636): base64url of the SHA-256 of your `code_verifier`.",
            json!({"type": "string"})
        ),
        q(
            "code_challenge_method",
            true,
            "`S256`; `plain` is refused.",
            json!({"type": "string", "enum": ["S256"]})
        ),
        q(
            "nonce",
            false,
            "OpenID Connect: echoed in the ID token.",
            json!({"type": "string"})
        ),
        q(
            "prompt",
            false,
            "`none` (never show a page: answers `login_required` or `consent_required` instead), `login` (sign in again), `consent` (ask again).",
            json!({"type": "string", "enum": ["none", "login", "consent"]})
        ),
        q(
            "max_age",
            false,
            "Seconds since the person last signed in after which they must sign in again.",
            json!({"type": "integer", "minimum": 0})
        ),
        q(
            "login_hint",
            false,
            "Pre-fills the e-mail on the sign-in page.",
            json!({"type": "string"})
        ),
    ]);
    json!({
        "/oauth/authorize": {"get": {
            "parameters": authorize_params,
            "description": "Send the person's browser here (GET, or POST with the same parameters as a form). Gatehouse checks `client_id` and `redirect_uri` first — if either is wrong it shows an error page and never redirects — then shows its sign-in and consent pages and sends the browser back to `redirect_uri` with `code`, `state` and `iss`, or with `error` (see the codes below). Exchange the code at `POST /oauth/token` within 5 minutes, with the `code_verifier`.",
        }},
        "/oauth/introspect": {"post": {
            "operationId": "introspect", "tags": ["OAuth"], "x-client-auth": true,
            "summary": "Token introspection (RFC 7662)",
            "description": "For confidential clients (a public client gets 401 `invalid_client`); the client authenticates as at the token endpoint. Answers `{\"active\": false}` for anything invalid, expired, revoked, unknown, of another organization, or (refresh tokens) issued to another client. Introspecting never uses up a refresh token.",
            "requestBody": {"required": true, "content": {"application/x-www-form-urlencoded": {"schema": {"type": "object", "required": ["token"], "properties": introspect_props}}}},
            "responses": {
                "200": {"description": "Whether the token is active, and if so what it carries", "content": {"application/json": {"schema": {"type": "object", "required": ["active"], "properties": {
                    "active": {"type": "boolean"},
                    "scope": {"type": "string", "description": "Space-separated scopes."},
                    "client_id": {"type": "string", "description": "Absent for an API key."},
                    "sub": {"type": "string", "description": "The user, the client (no user), or the API key's id."},
                    "exp": {"type": "integer", "description": "Epoch seconds; an API key's `expires_at`, or absent."},
                    "iat": {"type": "integer"},
                    "iss": {"type": "string"},
                    "aud": {"type": "string"},
                    "token_type": {"type": "string", "enum": ["Bearer"]},
                    "token_use": {"type": "string", "enum": ["access_token", "refresh_token", "api_key"]},
                    "org": {"type": "string", "description": "The organization (`org_…`)."},
                }}}}},
                "400": {"description": "OAuth error", "content": oauth_error.clone()},
                "401": {"description": "Client authentication failed, or a public client", "content": oauth_error.clone()},
                "429": {"description": "Too many failed client authentications", "content": oauth_error.clone()},
            },
        }},
        "/oauth/userinfo": {
            "get": {"operationId": "userinfo", "tags": ["OAuth"], "x-bearer": true,
                "summary": "Claims about the signed-in user (OpenID Connect)",
                "description": "Send the access token as `Authorization: Bearer`. Returns `sub` and the claims of the token's scopes: `profile` → `name`, `updated_at`; `email` → `email`, `email_verified`. CORS is allowed for the configured origins.",
                "responses": userinfo_answer.clone()},
            "post": {"operationId": "userinfoPost", "tags": ["OAuth"], "x-bearer": true,
                "summary": "Claims about the signed-in user, by POST",
                "description": "The same as `GET /oauth/userinfo`.",
                "responses": userinfo_answer},
        },
        "/oauth/logout": {"get": logout("get"), "post": logout("post")},
        "/.well-known/openid-configuration": {"get": {
            "operationId": "openidConfiguration", "tags": ["Discovery"],
            "summary": "OpenID Connect discovery document",
            "description": "The server metadata (issuer, endpoints, `jwks_uri`, supported scopes, grants and PKCE methods) plus `userinfo_endpoint`, `end_session_endpoint`, `introspection_endpoint`, `subject_types_supported: [\"public\"]`, `id_token_signing_alg_values_supported: [\"ES256\"]`, `claims_supported`, `authorization_response_iss_parameter_supported: true` and `request_uri_parameter_supported: false`. OpenID Connect libraries read it to configure themselves.",
            "responses": {"200": {"description": "Metadata", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Object"}}}}},
        }},
    })
}

/// The document with [`supplement`]'s operations added where it lacks them.
pub fn with_supplement(mut doc: Value) -> Value {
    let extra = supplement();
    for (path, item) in extra.as_object().into_iter().flatten() {
        for (method, op) in item.as_object().into_iter().flatten() {
            let slot = &mut doc["paths"][path.as_str()];
            match slot.get_mut(method.as_str()) {
                // The POST twins of userinfo and logout (D49), which the
                // generated document describes once, by GET.
                None => slot[method.as_str()] = op.clone(),
                // What the generated operation does not say yet (the
                // authorization request's parameters) is added to it.
                Some(existing) => {
                    for key in ["parameters", "description"] {
                        if existing.get(key).is_none()
                            && let Some(v) = op.get(key)
                        {
                            existing[key] = v.clone();
                        }
                    }
                }
            }
        }
    }
    doc
}

fn haystack(parts: &[&str]) -> String {
    parts.join(" \u{1f} ").to_lowercase()
}

impl Reference {
    /// Everything the pages show, from the served document.
    pub fn build(public_url: &str) -> Self {
        let doc = with_supplement(crate::openapi::document(public_url));
        Self::from_document(&doc, public_url)
    }

    pub fn from_document(doc: &Value, public_url: &str) -> Self {
        let mut tag_names: Vec<String> = doc["tags"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|t| text(&t["name"]))
            .collect();
        let mut by_tag: BTreeMap<String, Vec<OpView>> = BTreeMap::new();
        for (path, item) in doc["paths"].as_object().into_iter().flatten() {
            for method in METHODS {
                let op = &item[method];
                if !op.is_object() {
                    continue;
                }
                let tag = op["tags"][0].as_str().unwrap_or("Other").to_owned();
                if !tag_names.contains(&tag) {
                    tag_names.push(tag.clone());
                }
                let view = op_view(doc, public_url, path, method, op, &tag);
                by_tag.entry(tag).or_default().push(view);
            }
        }
        let tags: Vec<TagView> = tag_names
            .into_iter()
            .filter_map(|name| {
                let ops = by_tag.remove(&name)?;
                let s = slug(&name);
                Some(TagView {
                    href: format!("/docs/{s}"),
                    slug: s,
                    intro: tag_intro(&name).to_owned(),
                    name,
                    ops,
                })
            })
            .collect();
        let schemas: Vec<SchemaView> = doc["components"]["schemas"]
            .as_object()
            .into_iter()
            .flatten()
            .map(|(name, s)| {
                let mut fs = Vec::new();
                fields(doc, s, "", 0, &mut fs);
                SchemaView {
                    name: name.clone(),
                    description: text(&s["description"]),
                    ty: type_of(s),
                    values: enum_values(s),
                    fields: fs,
                }
            })
            .collect();
        let mut uses: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for t in &tags {
            for o in &t.ops {
                for c in &o.codes {
                    let e = uses.entry(c.code.clone()).or_default();
                    let name = format!("{} {}", o.method, o.path);
                    if !e.contains(&name) {
                        e.push(name);
                    }
                }
            }
        }
        let api_codes = ErrorCode::ALL
            .iter()
            .map(|c| CodeView {
                code: c.as_str().to_owned(),
                status: c.status().as_u16().to_string(),
                summary: c.summary().to_owned(),
                endpoints: String::new(),
            })
            .collect();
        let oauth_codes = OAUTH_ERRORS
            .iter()
            .map(|(code, statuses, summary)| CodeView {
                code: (*code).to_owned(),
                status: statuses
                    .iter()
                    .map(|s| match s {
                        303 => "in the redirect".to_owned(),
                        s => s.to_string(),
                    })
                    .collect::<Vec<_>>()
                    .join(", "),
                summary: (*summary).to_owned(),
                endpoints: uses.get(*code).map(|u| u.join(", ")).unwrap_or_default(),
            })
            .collect();
        let mut r = Reference {
            public_url: public_url.to_owned(),
            base_url: format!("{public_url}/v1"),
            tags,
            schemas,
            api_codes,
            oauth_codes,
            entries: Vec::new(),
        };
        r.entries = r.search_entries();
        r
    }

    fn search_entries(&self) -> Vec<Entry> {
        let mut out = Vec::new();
        for t in &self.tags {
            out.push(Entry {
                kind: "Section",
                title: t.name.clone(),
                detail: t.intro.clone(),
                href: t.href.clone(),
                haystack: haystack(&[&t.name, &t.intro]),
            });
            for o in &t.ops {
                let params: Vec<&str> = o.params.iter().map(|p| p.name.as_str()).collect();
                let codes: Vec<&str> = o.codes.iter().map(|c| c.code.as_str()).collect();
                out.push(Entry {
                    kind: "Operation",
                    title: format!("{} {}", o.method, o.path),
                    detail: o.summary.clone(),
                    href: o.href.clone(),
                    haystack: haystack(&[
                        &o.method,
                        &o.path,
                        &o.summary,
                        &o.id,
                        &o.tag,
                        &o.description,
                        o.scope.as_deref().unwrap_or(""),
                        &params.join(" "),
                        &codes.join(" "),
                    ]),
                });
            }
        }
        for s in &self.schemas {
            let names: Vec<&str> = s.fields.iter().map(|f| f.name.as_str()).collect();
            out.push(Entry {
                kind: "Schema",
                title: s.name.clone(),
                detail: s.description.clone(),
                href: format!("/docs/schemas#{}", s.name),
                haystack: haystack(&[&s.name, &s.description, &names.join(" ")]),
            });
        }
        for c in self.api_codes.iter().chain(&self.oauth_codes) {
            out.push(Entry {
                kind: "Error code",
                title: c.code.clone(),
                detail: c.summary.clone(),
                href: error_href(&c.code),
                haystack: haystack(&[&c.code, &c.summary, &c.status]),
            });
        }
        for s in Scope::ALL {
            out.push(Entry {
                kind: "Scope",
                title: s.as_str().to_owned(),
                detail: s.description().to_owned(),
                href: "/docs#scopes".into(),
                haystack: haystack(&[s.as_str(), s.description()]),
            });
        }
        for (title, anchor, words) in GUIDES {
            out.push(Entry {
                kind: "Guide",
                title: (*title).to_owned(),
                detail: String::new(),
                href: (*anchor).to_owned(),
                haystack: haystack(&[title, words]),
            });
        }
        out
    }

    /// The entries matching every word of `q`, best first (at most 50).
    pub fn search(&self, q: &str) -> Vec<Entry> {
        let words: Vec<String> = q
            .split_whitespace()
            .map(str::to_lowercase)
            .take(10)
            .collect();
        if words.is_empty() {
            return Vec::new();
        }
        let mut hits: Vec<(usize, &Entry)> = self
            .entries
            .iter()
            .filter(|e| words.iter().all(|w| e.haystack.contains(w.as_str())))
            .map(|e| {
                let title = e.title.to_lowercase();
                let rank = if words.iter().all(|w| title.contains(w.as_str())) {
                    0
                } else {
                    1
                };
                (rank, e)
            })
            .collect();
        hits.sort_by_key(|(rank, _)| *rank);
        hits.into_iter().take(50).map(|(_, e)| e.clone()).collect()
    }
}

/// Sections of the guides, for the search: (title, link, words).
const GUIDES: &[(&str, &str, &str)] = &[
    (
        "Quick start",
        "/docs/quickstart",
        "getting started first request",
    ),
    (
        "Trust the self-signed certificate",
        "/docs/quickstart#certificate",
        "tls https cacert NODE_EXTRA_CA_CERTS REQUESTS_CA_BUNDLE verify cert.pem curl node python",
    ),
    (
        "Client credentials",
        "/docs/quickstart#client-credentials",
        "machine to machine token client_id client_secret",
    ),
    (
        "Authorization code with PKCE",
        "/docs/quickstart#authorization-code",
        "pkce code_verifier code_challenge S256 browser sign in openid",
    ),
    (
        "Refresh and revoke",
        "/docs/quickstart#refresh",
        "refresh_token rotate revoke",
    ),
    (
        "Client libraries",
        "/docs/quickstart#libraries",
        "sdk rust go java dotnet php ruby node python openid-client authlib",
    ),
    (
        "Authentication",
        "/docs#authentication",
        "bearer token api key gk_live authorization header",
    ),
    (
        "Rate limits",
        "/docs#rate-limits",
        "429 retry-after x-ratelimit plan",
    ),
    (
        "Envelopes and pagination",
        "/docs#envelopes",
        "data meta limit offset total request_id",
    ),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs() {
        assert_eq!(slug("Preview (v2)"), "preview-v2");
        assert_eq!(slug("OAuth"), "oauth");
        assert_eq!(slug("Errors"), "api-errors");
    }

    #[test]
    fn codes_follow_the_description() {
        assert_eq!(api_codes(404, "No such user"), ["RESOURCE_NOT_FOUND"]);
        assert_eq!(
            api_codes(409, "The sku exists; or IDEMPOTENCY_KEY_IN_USE: …"),
            ["DUPLICATE_RESOURCE", "IDEMPOTENCY_KEY_IN_USE"]
        );
        assert_eq!(
            api_codes(422, "Owned client applications or last admin"),
            ["OWNED_RESOURCES_EXIST", "LAST_ADMIN"]
        );
        assert_eq!(api_codes(401, "x"), ["INVALID_TOKEN", "TOKEN_EXPIRED"]);
    }

    #[test]
    fn every_operation_has_a_curl_example_and_the_supplement_is_added() {
        let r = Reference::build("https://localhost:8443");
        let ops: Vec<&OpView> = r.tags.iter().flat_map(|t| &t.ops).collect();
        for o in &ops {
            assert!(o.curl.starts_with("curl "), "{}", o.id);
            assert!(
                o.curl.contains(
                    &o.path
                        .replace("{user_id}", "$USER_ID")
                        .replace("{product_id}", "$PRODUCT_ID")
                        .replace("{app_id}", "$APP_ID")
                        .replace("{key_id}", "$KEY_ID")
                        .replace("{path}", "users")
                ),
                "{}: {}",
                o.id,
                o.curl
            );
        }
        for id in ["introspect", "userinfo", "logout", "openidConfiguration"] {
            assert!(ops.iter().any(|o| o.id == id), "{id}");
        }
        let create = ops.iter().find(|o| o.id == "createUser").unwrap();
        assert!(
            create.curl.contains("\"email\":\"ada@example.com\""),
            "{}",
            create.curl
        );
        assert!(create.curl.contains("Bearer $TOKEN"));
        let token = ops.iter().find(|o| o.id == "token").unwrap();
        assert!(
            token.curl.contains("grant_type=client_credentials"),
            "{}",
            token.curl
        );
        assert!(token.codes.iter().any(|c| c.code == "invalid_grant"));
    }

    #[test]
    fn search_finds_operations_codes_and_guides() {
        let r = Reference::build("https://localhost:8443");
        assert!(
            r.search("list users")
                .iter()
                .any(|e| e.href.ends_with("#listUsers"))
        );
        assert!(
            r.search("invalid_grant")
                .iter()
                .any(|e| e.href == "/docs/errors#invalid_grant")
        );
        assert!(
            r.search("NODE_EXTRA_CA_CERTS")
                .iter()
                .any(|e| e.href.ends_with("#certificate"))
        );
        assert!(r.search("   ").is_empty());
    }
}
