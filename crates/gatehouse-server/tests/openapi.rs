//! D35: the committed `docs/openapi.json` is what the code generates, the
//! document is OpenAPI 3.1, and it documents every API route the routers serve.

use std::collections::BTreeSet;

use gatehouse_server::api::openapi::{document, operations};

const DEFAULT_PUBLIC_URL: &str = "https://localhost:8443";

#[test]
fn committed_document_matches_the_code() {
    let committed: serde_json::Value =
        serde_json::from_str(include_str!("../../../docs/openapi.json"))
            .expect("docs/openapi.json is JSON");
    let generated = document(DEFAULT_PUBLIC_URL);
    assert!(
        committed == generated,
        "docs/openapi.json is stale: regenerate it with `cargo run -q -- openapi > docs/openapi.json`"
    );
}

#[test]
fn document_is_openapi_3_1_with_resolvable_references() {
    let doc = document(DEFAULT_PUBLIC_URL);
    assert_eq!(doc["openapi"], "3.1.0");
    assert_eq!(doc["info"]["version"], "1.2.0");
    let text = doc.to_string();
    let schemas = doc["components"]["schemas"].as_object().unwrap();
    for piece in text.split("\"$ref\":\"#/components/schemas/").skip(1) {
        let name = piece.split('"').next().unwrap();
        assert!(schemas.contains_key(name), "unresolved $ref {name}");
    }
    let mut ids = BTreeSet::new();
    let ops = operations();
    for op in &ops {
        assert!(
            ids.insert(op.id.as_str()),
            "duplicate operationId {}",
            op.id
        );
        for p in op.params.iter().filter(|p| p.location == "path") {
            assert!(
                op.path.contains(&format!("{{{}}}", p.name)),
                "{} declares path parameter {}",
                op.path,
                p.name
            );
        }
        let entry = &doc["paths"][op.path.as_str()][op.method.as_str()];
        assert!(
            entry["responses"]
                .as_object()
                .is_some_and(|r| !r.is_empty()),
            "{} {} has responses",
            op.method,
            op.path
        );
        if op.scope.is_some() {
            for status in ["401", "403", "429"] {
                assert!(
                    entry["responses"].get(status).is_some(),
                    "{} {} documents {status}",
                    op.method,
                    op.path
                );
            }
        }
    }
}

/// Routes as written in the routers' sources, with the prefix each router is nested under.
fn routed() -> BTreeSet<(String, String)> {
    let sources: [(&str, &str); 24] = [
        ("/v1", include_str!("../src/api/users.rs")),
        ("/v1", include_str!("../src/api/audit.rs")),
        ("/v1", include_str!("../src/api/webhooks.rs")),
        ("/v1", include_str!("../src/api/events.rs")),
        ("/v1", include_str!("../src/api/applications.rs")),
        ("/v1", include_str!("../src/api/api_keys.rs")),
        ("/v1", include_str!("../src/api/organization.rs")),
        ("/v1", include_str!("../src/api/products.rs")),
        ("/v1", include_str!("../src/api/profile.rs")),
        ("/v1", include_str!("../src/api/sessions.rs")),
        ("/v1", include_str!("../src/api/mfa.rs")),
        ("/v2", include_str!("../src/api/v2.rs")),
        ("", include_str!("../src/api/oauth.rs")),
        ("", include_str!("../src/web/authorize.rs")),
        ("", include_str!("../src/api/oidc.rs")),
        ("", include_str!("../src/web/logout.rs")),
        ("", include_str!("../src/api/introspect.rs")),
        ("", include_str!("../src/web/links.rs")),
        ("", include_str!("../src/api/wellknown.rs")),
        ("", include_str!("../src/api/health.rs")),
        ("", include_str!("../src/api/openapi.rs")),
        ("", include_str!("../src/web/docs.rs")),
        ("", include_str!("../src/api/versions.rs")),
        ("", include_str!("../src/lib.rs")),
    ];
    let mut out = BTreeSet::new();
    for (prefix, src) in sources {
        let mut rest = src;
        while let Some(i) = rest.find(".route(") {
            rest = rest[i + 7..].trim_start();
            let Some(quoted) = rest.strip_prefix('"') else {
                continue;
            };
            let path = &quoted[..quoted.find('"').unwrap()];
            let after = &quoted[path.len()..];
            let end = after.find(".route(").unwrap_or(after.len()).min(300);
            let handlers = &after[..end];
            for m in ["get", "post", "patch", "delete", "any"] {
                if handlers.contains(&format!("{m}(")) || handlers.contains(&format!(".{m}(")) {
                    out.insert((m.to_owned(), format!("{prefix}{path}")));
                }
            }
        }
    }
    out
}

#[test]
fn every_api_route_is_documented_and_every_documented_route_exists() {
    // Server-rendered pages for people are not part of the API description.
    let pages = [
        "/oauth/authorize/login",
        "/oauth/authorize/decision",
        // D48: the dashboard sign-in's organization picker.
        "/oauth/authorize/account",
        "/invite/{token}",
        "/password/forgot",
        "/password/reset/{token}",
        "/",
        "/docs",
        "/docs/",
        "/docs/errors",
        "/docs/search",
        "/docs/assets/{file}",
        "/docs/{page}",
        "/docs/{page}/",
        "/v0",
        "/v0/{*rest}",
    ];
    let routed = routed();
    assert!(
        routed.len() > 15,
        "the route scan found {} routes",
        routed.len()
    );
    let documented: BTreeSet<(String, String)> = operations()
        .iter()
        .map(|o| (o.method.to_owned(), o.path.to_owned()))
        .collect();
    for (method, path) in &routed {
        // D49: these also answer POST with the same parameters as a form;
        // the document describes them once, by GET.
        let post_twin = ["/oauth/authorize", "/oauth/userinfo", "/oauth/logout"];
        if pages.contains(&path.as_str())
            || (method == "post" && post_twin.contains(&path.as_str()))
        {
            continue;
        }
        assert!(
            documented.contains(&(method.clone(), path.clone())),
            "{method} {path} is served but not documented"
        );
    }
    for (method, path) in &documented {
        if path == "/v0/{path}" {
            continue;
        }
        assert!(
            routed.contains(&(method.clone(), path.clone())),
            "{method} {path} is documented but not served"
        );
    }
}
