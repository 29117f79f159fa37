//! D52: the reference documentation under `/docs` (every operation of the
//! OpenAPI document, OAuth error codes, search, quick start, a strict CSP
//! with nothing from elsewhere), `/` and `/docs/` redirects, and the page
//! chrome of the sign-in pages (request id on error pages, a way back).

use std::collections::HashMap;

use reqwest::header::{self, HeaderMap};
use reqwest::{Method, StatusCode};
use serde_json::Value;

use crate::common::{PUBLIC_URL, TestServer};

fn header_of<'h>(h: &'h HeaderMap, name: &str) -> &'h str {
    h.get(name).and_then(|v| v.to_str().ok()).unwrap_or("")
}

/// The text of HTML as a reader sees it (the entities the templates write).
fn unescape(s: &str) -> String {
    s.replace("&#x2f;", "/")
        .replace("&#x2F;", "/")
        .replace("&quot;", "\"")
        .replace("&#x27;", "'")
        .replace("&#39;", "'")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&")
}

/// GET `path`; (status, headers, body with entities decoded).
async fn get(s: &TestServer, path: &str) -> (StatusCode, HeaderMap, String) {
    let res = s.request(Method::GET, path).send().await.unwrap();
    let status = res.status();
    let headers = res.headers().clone();
    let body = res.text().await.unwrap();
    (status, headers, unescape(&body))
}

/// `/password/forgot` with these query pairs.
fn forgot_path(pairs: &[(&str, &str)]) -> String {
    let mut url = reqwest::Url::parse("https://x/password/forgot").unwrap();
    url.query_pairs_mut().extend_pairs(pairs);
    format!("/password/forgot?{}", url.query().unwrap_or(""))
}

/// The section of a page with `id`, up to its end.
fn section<'a>(html: &'a str, id: &str) -> Option<&'a str> {
    let start = html.find(&format!("<section class=\"op\" id=\"{id}\""))?;
    let rest = &html[start..];
    Some(&rest[..rest.find("</section>")?])
}

/// The named schemas an answer or body refers to directly.
fn refs(v: &Value) -> Vec<String> {
    let text = v.to_string();
    text.split("\"$ref\":\"#/components/schemas/")
        .skip(1)
        .map(|p| p.split('"').next().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn root_redirects_to_docs_and_a_trailing_slash_is_forgiven() {
    let s = TestServer::start().await;
    for (path, status) in [
        ("/", StatusCode::FOUND),
        ("/docs/", StatusCode::PERMANENT_REDIRECT),
    ] {
        let res = s.request(Method::GET, path).send().await.unwrap();
        assert_eq!(res.status(), status, "{path}");
        assert_eq!(header_of(res.headers(), "location"), "/docs", "{path}");
        assert!(res.headers().contains_key("x-request-id"), "D7 on {path}");
    }
    let (status, headers, _) = get(&s, "/docs").await;
    assert_eq!(status, StatusCode::OK);
    assert!(header_of(&headers, "content-type").starts_with("text/html"));
    // Every page forgives it; an unknown page is the 404 envelope.
    let res = s.request(Method::GET, "/docs/users/").send().await.unwrap();
    assert_eq!(res.status(), StatusCode::PERMANENT_REDIRECT);
    assert_eq!(header_of(res.headers(), "location"), "/docs/users");
    for path in ["/docs/nope", "/docs/nope/"] {
        let res = s.request(Method::GET, path).send().await.unwrap();
        crate::common::expect_error(res, StatusCode::NOT_FOUND, "RESOURCE_NOT_FOUND").await;
    }
}

#[tokio::test]
async fn every_operation_of_the_openapi_document_is_documented_with_curl_and_schemas() {
    let s = TestServer::start().await;
    let doc: Value = s
        .request(Method::GET, "/v1/openapi.json")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let (_, _, overview) = get(&s, "/docs").await;
    let mut pages: HashMap<String, String> = HashMap::new();
    let mut seen = 0;
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            let id = op["operationId"].as_str().unwrap();
            seen += 1;
            // The overview links every operation to its page.
            let anchor = format!("#{id}\"");
            let at = overview
                .find(&anchor)
                .unwrap_or_else(|| panic!("/docs links to {method} {path} ({id})"));
            let href_start = overview[..at].rfind("href=\"").unwrap() + 6;
            let page = overview[href_start..at].to_owned();
            assert!(page.starts_with("/docs/"), "{id} is on a docs page: {page}");
            if !pages.contains_key(&page) {
                let (status, _, html) = get(&s, &page).await;
                assert_eq!(status, StatusCode::OK, "{page}");
                pages.insert(page.clone(), html);
            }
            let html = &pages[&page];
            let sec = section(html, id).unwrap_or_else(|| panic!("{page} has a section for {id}"));
            let what = format!("{} {path} ({id})", method.to_uppercase());
            assert!(sec.contains(&method.to_uppercase()), "{what}: method");
            assert!(
                sec.contains(&format!("<code>{path}</code>")),
                "{what}: path"
            );
            let curl = sec
                .split("<pre tabindex=\"0\"><code>")
                .nth(1)
                .unwrap_or_else(|| panic!("{what}: a code block"));
            assert!(curl.starts_with("curl "), "{what}: a curl example");
            let static_prefix = path.split('{').next().unwrap();
            assert!(
                curl.contains(static_prefix),
                "{what}: the curl example calls the path"
            );
            for p in op["parameters"].as_array().into_iter().flatten() {
                let name = p["name"].as_str().unwrap();
                assert!(
                    sec.contains(&format!("<code>{name}</code>")),
                    "{what}: parameter {name}"
                );
            }
            let mut schemas = refs(&op["requestBody"]);
            for (status, answer) in op["responses"].as_object().unwrap() {
                assert!(
                    sec.contains(&format!(">{status}</span>")),
                    "{what}: answer {status}"
                );
                schemas.extend(refs(answer));
            }
            for name in schemas {
                assert!(
                    sec.contains(&format!("/docs/schemas#{name}\"")),
                    "{what}: links its schema {name}"
                );
            }
            if let Some(scope) = op["security"][0]["bearer"][0].as_str() {
                assert!(
                    sec.contains(&format!("<code>{scope}</code>")),
                    "{what}: scope {scope}"
                );
            }
            // Errors are linked to their codes.
            if op["responses"].get("401").is_some() {
                assert!(sec.contains("/docs/errors#"), "{what}: error codes linked");
            }
        }
    }
    assert!(seen > 20, "the document has {seen} operations");
    // Every schema the pages link to has its anchor.
    let (_, _, schemas) = get(&s, "/docs/schemas").await;
    for name in doc["components"]["schemas"].as_object().unwrap().keys() {
        assert!(
            schemas.contains(&format!("id=\"{name}\"")),
            "/docs/schemas#{name}"
        );
    }
}

#[tokio::test]
async fn oauth_endpoints_and_their_error_codes_are_explained() {
    let s = TestServer::start().await;
    let (_, _, errors) = get(&s, "/docs/errors").await;
    for code in [
        "invalid_request",
        "invalid_client",
        "invalid_grant",
        "unauthorized_client",
        "unsupported_grant_type",
        "invalid_scope",
        "temporarily_unavailable",
        "server_error",
        "access_denied",
        "login_required",
        "consent_required",
        "request_uri_not_supported",
        "insufficient_scope",
        "invalid_token",
    ] {
        assert!(
            errors.contains(&format!("id=\"{code}\"")),
            "/docs/errors#{code}"
        );
    }
    let (_, _, oauth) = get(&s, "/docs/oauth").await;
    for id in [
        "authorize",
        "token",
        "revoke",
        "introspect",
        "userinfo",
        "logout",
    ] {
        assert!(section(&oauth, id).is_some(), "/docs/oauth documents {id}");
    }
    let token = section(&oauth, "token").unwrap();
    for code in ["invalid_grant", "unsupported_grant_type", "invalid_client"] {
        assert!(
            token.contains(&format!("/docs/errors#{code}\"")),
            "token links {code}"
        );
    }
    let (_, _, discovery) = get(&s, "/docs/discovery").await;
    for path in [
        "/.well-known/openid-configuration",
        "/.well-known/oauth-authorization-server",
        "/.well-known/jwks.json",
    ] {
        assert!(
            discovery.contains(&format!("<code>{path}</code>")),
            "{path}"
        );
    }
}

#[tokio::test]
async fn the_quick_start_covers_curl_node_python_and_the_servers_certificate() {
    let s = TestServer::start().await;
    let (status, _, html) = get(&s, "/docs/quickstart").await;
    assert_eq!(status, StatusCode::OK);
    for needle in [
        "--cacert data/tls/cert.pem",
        "NODE_EXTRA_CA_CERTS=data/tls/cert.pem",
        "REQUESTS_CA_BUNDLE",
        "session.verify = \"data/tls/cert.pem\"",
        "openid-client",
        "clientCredentialsGrant",
        "authorizationCodeGrant",
        "authlib",
        "code_challenge_method",
        "grant_type=client_credentials",
    ] {
        assert!(html.contains(needle), "the quick start shows {needle}");
    }
    // The certificate is where the quick start says the server writes it.
    assert!(
        s.data_dir().join("tls").join("cert.pem").exists(),
        "the self-signed certificate is <data_dir>/tls/cert.pem"
    );
}

#[tokio::test]
async fn the_search_works_without_script() {
    let s = TestServer::start().await;
    let (status, _, html) = get(&s, "/docs/search?q=list+users").await;
    assert_eq!(status, StatusCode::OK);
    assert!(html.contains("href=\"/docs/users#listUsers\""), "{html}");
    let (_, _, html) = get(&s, "/docs/search?q=invalid_grant").await;
    assert!(html.contains("href=\"/docs/errors#invalid_grant\""));
    let (_, _, html) = get(&s, "/docs/search?q=GET%20%2Fv1%2Fproducts").await;
    assert!(html.contains("href=\"/docs/products#listProducts\""));
    // What is typed is shown escaped, never as markup.
    let res = s
        .request(
            Method::GET,
            "/docs/search?q=%3Cscript%3Ealert(1)%3C/script%3E",
        )
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let raw = res.text().await.unwrap();
    assert!(!raw.contains("<script>alert"), "escaped");
    // The form itself is on every page and asks the server.
    let (_, _, page) = get(&s, "/docs").await;
    assert!(page.contains("action=\"/docs/search\""));
}

#[tokio::test]
async fn docs_have_a_strict_csp_and_load_only_what_the_binary_serves() {
    let s = TestServer::start().await;
    for path in [
        "/docs",
        "/docs/users",
        "/docs/oauth",
        "/docs/errors",
        "/docs/schemas",
        "/docs/quickstart",
        "/docs/search?q=users",
    ] {
        let res = s.request(Method::GET, path).send().await.unwrap();
        assert_eq!(res.status(), StatusCode::OK, "{path}");
        let csp = header_of(res.headers(), "content-security-policy").to_owned();
        assert!(!csp.is_empty(), "{path}: a CSP");
        assert!(!csp.contains("unsafe-inline"), "{path}: {csp}");
        assert!(!csp.contains("unsafe-eval"), "{path}: {csp}");
        assert!(
            !csp.contains("http") && !csp.contains('*'),
            "{path}: no other host: {csp}"
        );
        assert!(csp.contains("script-src 'self'"), "{path}: {csp}");
        assert!(csp.contains("frame-ancestors 'none'"), "{path}: {csp}");
        let html = res.text().await.unwrap();
        assert!(!html.contains("style="), "{path}: no inline style");
        for tag in html.split("<script").skip(1) {
            let head = &tag[..tag.find('>').unwrap()];
            assert!(
                head.contains("src=\"/"),
                "{path}: a script from this server: {head}"
            );
            assert!(
                tag[tag.find('>').unwrap() + 1..].starts_with("</script>"),
                "{path}: no inline script"
            );
        }
        for attr in ["src=\"", "href=\""] {
            for value in html.split(attr).skip(1) {
                let v = unescape(&value[..value.find('"').unwrap()]);
                assert!(
                    v.starts_with('/') || v.starts_with('#'),
                    "{path}: {attr}{v} stays on this server"
                );
            }
        }
    }
    for (asset, kind) in [
        ("/docs/assets/docs.css", "text/css"),
        ("/docs/assets/docs.js", "text/javascript"),
        ("/docs/assets/pages.css", "text/css"),
    ] {
        let res = s.request(Method::GET, asset).send().await.unwrap();
        assert_eq!(res.status(), StatusCode::OK, "{asset}");
        assert!(
            header_of(res.headers(), "content-type").starts_with(kind),
            "{asset}"
        );
        let body = res.text().await.unwrap();
        assert!(
            !body.contains("http://") && !body.contains("https://"),
            "{asset} fetches nothing"
        );
    }
    let res = s
        .request(Method::GET, "/docs/assets/nope.js")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn error_pages_show_the_request_id_of_the_response() {
    let s = TestServer::start().await;
    let sent = "0b6c2a1e-5d4f-4c3b-9a8e-7f6d5c4b3a21";
    for (path, with_id) in [
        ("/password/forgot", false),
        ("/invite/not-a-real-token", false),
        ("/password/reset/not-a-real-token", true),
        (
            "/oauth/authorize?client_id=app_unknown&response_type=code",
            true,
        ),
    ] {
        let mut rb = s.request(Method::GET, path);
        if with_id {
            rb = rb.header("x-request-id", sent);
        }
        let res = rb.send().await.unwrap();
        assert!(res.status().is_client_error(), "{path}: {}", res.status());
        let id = header_of(res.headers(), "x-request-id").to_owned();
        if with_id {
            assert_eq!(id, sent, "D7 echoes a UUID");
        }
        let html = res.text().await.unwrap();
        assert!(
            html.contains(&format!("Reference: <code>{id}</code>")),
            "{path}: the page shows its X-Request-ID {id}:\n{html}"
        );
        assert!(html.contains("class=\"back\""), "{path}: a way back");
    }
    // A page that is not an error shows none.
    let (_, _, ok) = get(
        &s,
        &format!("/password/forgot?client_id={}", s.creds.client_id),
    )
    .await;
    assert!(!ok.contains("Reference:"));
}

#[tokio::test]
async fn the_forgot_password_page_and_error_pages_have_a_way_back() {
    let s = TestServer::start().await;
    let cid = s.creds.client_id.clone();
    let sign_in = format!("/oauth/authorize?response_type=code&client_id={cid}&state=xyz");
    let back_link = |html: &str| -> String {
        let at = html.find("class=\"back\"").expect("a way back");
        let rest = &html[at..];
        let h = rest.find("href=\"").unwrap() + 6;
        rest[h..h + rest[h..].find('"').unwrap()].to_owned()
    };
    // Given where to return to.
    let (_, _, html) = get(
        &s,
        &forgot_path(&[("client_id", &cid), ("return_to", &sign_in)]),
    )
    .await;
    assert_eq!(back_link(&html), sign_in);
    assert!(html.contains("Back to sign in"));
    assert!(
        html.contains(&format!("name=\"return_to\" value=\"{sign_in}\"")),
        "kept for the answer page"
    );
    // From the sign-in page (its Referer; pages send it to this origin only).
    let res = s
        .request(Method::GET, &format!("/password/forgot?client_id={cid}"))
        .header(header::REFERER, format!("{PUBLIC_URL}{sign_in}"))
        .send()
        .await
        .unwrap();
    assert_eq!(header_of(res.headers(), "referrer-policy"), "same-origin");
    let html = unescape(&res.text().await.unwrap());
    assert_eq!(back_link(&html), sign_in);
    // Nowhere known, or somewhere else: the documentation's home.
    for hostile in [
        "",
        "https://evil.example/x",
        "//evil.example/x",
        "/oauth/authorize",
        "javascript:alert(1)",
    ] {
        let res = s
            .request(
                Method::GET,
                &forgot_path(&[("client_id", &cid), ("return_to", hostile)]),
            )
            .header(header::REFERER, "https://evil.example/page")
            .send()
            .await
            .unwrap();
        let html = unescape(&res.text().await.unwrap());
        assert_eq!(back_link(&html), "/docs", "return_to={hostile:?}");
    }
    // An error page reached from one of ours goes back there.
    let res = s
        .request(Method::GET, "/invite/not-a-real-token")
        .header(header::REFERER, format!("{PUBLIC_URL}/docs/quickstart"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::NOT_FOUND);
    let html = unescape(&res.text().await.unwrap());
    assert_eq!(back_link(&html), "/docs/quickstart");
}

/// The sign-in pages (D26, D49) are as strict: their stylesheet is served
/// by the binary, no inline style, no other host.
#[tokio::test]
async fn sign_in_pages_allow_no_inline_style() {
    let s = TestServer::start().await;
    for path in [
        "/oauth/authorize?client_id=app_unknown",
        "/oauth/logout",
        "/password/forgot?client_id=app_unknown",
    ] {
        let res = s.request(Method::GET, path).send().await.unwrap();
        let csp = header_of(res.headers(), "content-security-policy").to_owned();
        assert!(csp.contains("style-src 'self'"), "{path}: {csp}");
        assert!(!csp.contains("unsafe-inline"), "{path}: {csp}");
        assert!(!csp.contains("http") && !csp.contains('*'), "{path}: {csp}");
        let html = res.text().await.unwrap();
        assert!(!html.contains("<style"), "{path}: no inline style element");
        assert!(
            !html.contains("style="),
            "{path}: no inline style attribute"
        );
        assert!(html.contains("href=\"/docs/assets/pages.css\""), "{path}");
    }
}
