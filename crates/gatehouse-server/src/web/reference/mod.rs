//! The reference documentation under `/docs` (D35, D52), built once per
//! server from the OpenAPI document (`api::openapi::document`): every
//! operation with its parameters, request and response schemas, scope,
//! errors and a curl example, one page per tag, a page of schemas, the
//! error codes (the API's and the OAuth / OpenID Connect ones), a client
//! quick start, and the entries the search reads. The pages are rendered
//! through the auto-escaping templates of `web::templates::Templates`; this
//! module only turns the document into plain values for them.
//!
//! The OpenID Connect endpoints of D49 (introspection, userinfo, logout,
//! the discovery document) are described by [`supplement`] in the same
//! OpenAPI shape until the code documents them itself; an operation the
//! generated document has always wins.
//!
//! The pages' view types are here; [`build`] makes a [`Reference`] from the
//! document with the helpers of [`codes`], [`schema`] and [`operation`],
//! and [`supplement`] adds D49's endpoints.

pub mod build;
pub mod codes;
pub mod operation;
pub mod schema;
pub mod supplement;

use std::collections::HashMap;

use serde::Serialize;

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

/// The reference pages, rendered once.
pub struct Rendered {
    /// By path: `/docs`, `/docs/users`, `/docs/errors`, …
    pub(in crate::web) pages: HashMap<String, String>,
    pub(in crate::web) reference: Reference,
}

impl Rendered {
    /// The rendered page at `path`.
    pub fn page(&self, path: &str) -> Option<&str> {
        self.pages.get(path).map(String::as_str)
    }
}
