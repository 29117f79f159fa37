//! Reading the OpenAPI document's schemas: `$ref`s, types in a few
//! words, the flattened fields, and example values.

use std::collections::BTreeSet;

use serde_json::{Value, json};

use super::Field;

/// Follows `$ref`s to the schema they name; the name of the first one.
pub(super) fn resolve<'a>(doc: &'a Value, mut s: &'a Value) -> (&'a Value, Option<String>) {
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
pub(super) fn unwrap_nullable(s: &Value) -> &Value {
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
pub(super) fn type_of(s: &Value) -> String {
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

pub(super) fn enum_values(s: &Value) -> Vec<String> {
    s.get("enum")
        .and_then(Value::as_array)
        .map(|vs| {
            vs.iter()
                .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

pub(super) fn text(v: &Value) -> String {
    v.as_str().unwrap_or_default().trim().to_owned()
}

/// The properties of an object schema (through `allOf`), with whether each
/// is required.
pub(super) fn properties<'a>(doc: &'a Value, s: &'a Value) -> Vec<(String, &'a Value, bool)> {
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
pub(super) fn fields(
    doc: &Value,
    schema: &Value,
    prefix: &str,
    depth: usize,
    out: &mut Vec<Field>,
) {
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
pub(super) fn sample(doc: &Value, schema: &Value, name: &str, all: bool, depth: usize) -> Value {
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
