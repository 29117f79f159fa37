//! One operation of the document as its section shows it: parameters,
//! bodies, answers with their error codes, and a curl example.

use serde_json::{Value, json};

use super::codes::{OAUTH_ERRORS, api_codes, link, oauth_codes_of};
use super::schema::{
    enum_values, fields, properties, resolve, sample, text, type_of, unwrap_nullable,
};
use super::{BodyView, OpView, ParamView, ResponseView, slug};

/// `'…'` for a shell, when the text needs quoting.
pub(super) fn shell_word(s: &str) -> String {
    if s.chars()
        .all(|c| c.is_ascii_alphanumeric() || "-_.:/=$@%".contains(c))
    {
        s.to_owned()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// A path parameter as a shell variable (`{user_id}` → `$USER_ID`).
pub(super) fn path_var(name: &str) -> String {
    match name {
        // `$PATH` is the shell's; show a real v0 path instead.
        "path" => "users".into(),
        n => format!("${}", n.to_ascii_uppercase()),
    }
}

/// A curl command that makes the request.
pub(super) fn curl(
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

pub(super) fn body_view(doc: &Value, content: &Value, all: bool) -> Option<BodyView> {
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
pub(super) fn op_view(
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
pub(super) fn own_description(d: &str) -> String {
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
