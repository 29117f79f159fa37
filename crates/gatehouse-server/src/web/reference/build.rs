//! Building the [`Reference`] from the document, once per server: the
//! tags with their operations, the schemas, the error codes, and the
//! entries the search reads.

use std::collections::BTreeMap;

use gatehouse_domain::Scope;
use serde_json::Value;

use super::codes::{OAUTH_ERRORS, error_href};
use super::operation::op_view;
use super::schema::{enum_values, fields, text, type_of};
use super::supplement::with_supplement;
use super::{CodeView, Entry, OpView, Reference, SchemaView, TagView, slug};
use crate::http::error::ErrorCode;

/// Methods in the order a page lists them under one path.
pub(super) const METHODS: [&str; 5] = ["get", "post", "put", "patch", "delete"];

/// What a few tags are about, shown above their operations.
pub(super) fn tag_intro(name: &str) -> &'static str {
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

pub(super) fn haystack(parts: &[&str]) -> String {
    parts.join(" \u{1f} ").to_lowercase()
}

impl Reference {
    /// Everything the pages show, from the served document.
    pub fn build(public_url: &str) -> Self {
        let doc = with_supplement(crate::api::openapi::document(public_url));
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
pub(super) const GUIDES: &[(&str, &str, &str)] = &[
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
                        .replace("{event_id}", "$EVENT_ID")
                        .replace("{endpoint_id}", "$ENDPOINT_ID")
                        .replace("{session_id}", "$SESSION_ID")
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
