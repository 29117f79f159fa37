//! Transport and operation: HTTPS and the 301 listener (D31), request ids
//! (D7), health (D42), well-known documents (D23), the error reference page
//! (D6, D35), unknown paths (D6), v0 sunset (D32), first start (D41),
//! restarts, shutdown and durability of the real binary (D43).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use reqwest::header::CONTENT_TYPE;
use reqwest::{Method, Response, StatusCode};
use serde_json::{Value, json};

use crate::common::{PUBLIC_URL, TestServer, expect_error, https_client};

/// A UUID a client might send (D7).
const CLIENT_UUID: &str = "6f1c1f0e-8a3b-4c2d-9e5f-0123456789ab";

fn header<'a>(res: &'a Response, name: &str) -> Option<&'a str> {
    res.headers().get(name).and_then(|v| v.to_str().ok())
}

fn is_uuid(s: &str) -> bool {
    let parts: Vec<&str> = s.split('-').collect();
    parts.len() == 5
        && parts.iter().map(|p| p.len()).collect::<Vec<_>>() == [8, 4, 4, 4, 12]
        && parts
            .iter()
            .all(|p| p.bytes().all(|b| b.is_ascii_hexdigit()))
}

fn request_id_of(res: &Response) -> String {
    header(res, "x-request-id")
        .expect("D7: every response has X-Request-ID")
        .to_owned()
}

fn assert_hsts(res: &Response) {
    let v = header(res, "strict-transport-security").unwrap_or_else(|| {
        panic!(
            "D31: HTTPS responses carry Strict-Transport-Security (status {}, {})",
            res.status(),
            res.url()
        )
    });
    let max_age = v
        .split(';')
        .map(str::trim)
        .find_map(|d| d.strip_prefix("max-age="))
        .and_then(|n| n.trim_matches('"').parse::<u64>().ok())
        .unwrap_or_else(|| panic!("HSTS needs max-age: {v}"));
    assert!(max_age > 0, "HSTS max-age must be positive: {v}");
}

// ---------------------------------------------------------------------------
// D31: plain HTTP is redirected; HTTPS carries HSTS
// ---------------------------------------------------------------------------

#[tokio::test]
async fn plain_http_answers_301_to_the_https_origin_of_public_url() {
    let s = TestServer::start().await;
    let cases: Vec<(Method, &str, Option<&str>)> = vec![
        (Method::GET, "/", None),
        (Method::GET, "/v1/users?limit=5&offset=10", None),
        (Method::GET, "/healthz", None),
        (
            Method::POST,
            "/v1/users?x=1",
            Some(r#"{"email":"a@example.com","name":"A","role":"viewer"}"#),
        ),
        (
            Method::POST,
            "/oauth/token",
            Some("grant_type=client_credentials"),
        ),
        (Method::DELETE, "/v1/users/usr_abc", None),
        (Method::PATCH, "/v1/products/prod_abc?q=a%20b", Some("{}")),
        (Method::PUT, "/anything/at/all", None),
        (Method::HEAD, "/docs/errors", None),
    ];
    for (method, path, body) in cases {
        let mut rb = s
            .client
            .request(method.clone(), format!("{}{path}", s.http_base));
        if let Some(b) = body {
            rb = rb.header(CONTENT_TYPE, "application/json").body(b);
        }
        let res = rb.send().await.unwrap();
        assert_eq!(
            res.status(),
            StatusCode::MOVED_PERMANENTLY,
            "{method} {path}"
        );
        assert_eq!(
            header(&res, "location"),
            Some(format!("https://gatehouse.example{path}").as_str()),
            "D31: same path and query on public_url's https origin ({method} {path})"
        );
        assert!(
            is_uuid(&request_id_of(&res)),
            "D7: redirects carry a request id"
        );
        // RFC 6797 §7.2: HSTS is never sent over plain HTTP.
        assert!(
            header(&res, "strict-transport-security").is_none(),
            "no HSTS over plain HTTP"
        );
    }
}

#[tokio::test]
async fn plain_http_redirect_uses_public_urls_host_and_port() {
    // D31: the HTTPS *origin* of public_url (scheme, host, port), not the address connected to.
    let s =
        TestServer::start_with(|st| st.public_url = "https://api.gatehouse.example:8443".into())
            .await;
    let res = s
        .client
        .get(format!("{}/v1/users?limit=1", s.http_base))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::MOVED_PERMANENTLY);
    assert_eq!(
        header(&res, "location"),
        Some("https://api.gatehouse.example:8443/v1/users?limit=1")
    );
}

#[tokio::test]
async fn plain_http_redirect_does_not_issue_tokens() {
    // D31: the 301 comes "without reading a body": credentials sent over plain HTTP get no token.
    let s = TestServer::start().await;
    let res = s
        .client
        .post(format!("{}/oauth/token", s.http_base))
        .basic_auth(&s.creds.client_id, Some(&s.creds.client_secret))
        .form(&[("grant_type", "client_credentials")])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::MOVED_PERMANENTLY);
    let body = res.text().await.unwrap();
    assert!(!body.contains("access_token"), "{body}");
}

#[tokio::test]
async fn https_responses_carry_hsts() {
    // D31
    let s = TestServer::start().await;
    let t = s.token("users:read").await;
    assert_hsts(&s.request(Method::GET, "/healthz").send().await.unwrap());
    assert_hsts(&s.call(Method::GET, "/v1/users", &t, None).await);
    assert_hsts(&s.request(Method::GET, "/v1/users").send().await.unwrap()); // 401
    assert_hsts(&s.request(Method::GET, "/nope").send().await.unwrap()); // 404
    assert_hsts(&s.request(Method::GET, "/v0/users").send().await.unwrap()); // 410
    assert_hsts(&s.request(Method::GET, "/docs/errors").send().await.unwrap());
    assert_hsts(
        &s.request(Method::GET, "/.well-known/jwks.json")
            .send()
            .await
            .unwrap(),
    );
    let res = s
        .request(Method::POST, "/oauth/token")
        .basic_auth(&s.creds.client_id, Some("wrong"))
        .form(&[("grant_type", "client_credentials")])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::UNAUTHORIZED);
    assert_hsts(&res);
}

#[tokio::test]
async fn behind_a_proxy_plain_http_is_served_and_forwarded_http_is_redirected() {
    // D31 --behind-proxy
    let s = TestServer::start_with(|st| st.behind_proxy = true).await;
    assert!(s.base.starts_with("http://"), "{}", s.base);
    assert!(s.running.as_ref().unwrap().https_addr.is_none());
    let res = s.request(Method::GET, "/healthz").send().await.unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    // The token endpoint and the API work through the proxy.
    let t = s.token("users:read").await;
    let res = s
        .request(Method::GET, "/v1/users")
        .bearer_auth(&t)
        .header("x-forwarded-proto", "https")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let res = s.call(Method::GET, "/v1/users", &t, None).await;
    assert_eq!(res.status(), StatusCode::OK);

    // X-Forwarded-Proto: http → the same 301, whatever the method.
    for (method, path) in [
        (Method::GET, "/v1/users?limit=5"),
        (Method::POST, "/v1/users"),
        (Method::DELETE, "/v1/users/usr_abc?x=y"),
        (Method::GET, "/healthz"),
    ] {
        let res = s
            .request(method.clone(), path)
            .bearer_auth(&t)
            .header("x-forwarded-proto", "http")
            .header("x-request-id", CLIENT_UUID)
            .json(&json!({"email": "p@example.com", "name": "P", "role": "viewer"}))
            .send()
            .await
            .unwrap();
        assert_eq!(
            res.status(),
            StatusCode::MOVED_PERMANENTLY,
            "{method} {path}"
        );
        assert_eq!(
            header(&res, "location"),
            Some(format!("https://gatehouse.example{path}").as_str())
        );
        assert_eq!(request_id_of(&res), CLIENT_UUID, "D7");
    }
    // Nothing was created by the redirected POST.
    let list: Value = s
        .call(Method::GET, "/v1/users", &t, None)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(list["meta"]["total"], 0, "{list}");
    // Nor is a token issued over forwarded plain HTTP.
    let res = s
        .request(Method::POST, "/oauth/token")
        .header("x-forwarded-proto", "http")
        .basic_auth(&s.creds.client_id, Some(&s.creds.client_secret))
        .form(&[("grant_type", "client_credentials")])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::MOVED_PERMANENTLY);
}

// ---------------------------------------------------------------------------
// D7: request ids
// ---------------------------------------------------------------------------

#[tokio::test]
async fn every_response_has_a_request_id_and_a_client_uuid_is_echoed() {
    let s = TestServer::start().await;
    let t = s.token("users:read users:write").await;
    let with_id = |rb: reqwest::RequestBuilder| rb.header("x-request-id", CLIENT_UUID);

    let responses = vec![
        (
            "healthz",
            with_id(s.request(Method::GET, "/healthz"))
                .send()
                .await
                .unwrap(),
        ),
        (
            "200 list",
            with_id(s.request(Method::GET, "/v1/users").bearer_auth(&t))
                .send()
                .await
                .unwrap(),
        ),
        (
            "401",
            with_id(s.request(Method::GET, "/v1/users"))
                .send()
                .await
                .unwrap(),
        ),
        (
            "404",
            with_id(s.request(Method::GET, "/nope"))
                .send()
                .await
                .unwrap(),
        ),
        (
            "405",
            with_id(s.request(Method::DELETE, "/v1/users").bearer_auth(&t))
                .send()
                .await
                .unwrap(),
        ),
        (
            "410",
            with_id(s.request(Method::GET, "/v0/users"))
                .send()
                .await
                .unwrap(),
        ),
        (
            "400",
            with_id(s.request(Method::POST, "/v1/users").bearer_auth(&t))
                .header(CONTENT_TYPE, "application/json")
                .body("{not json")
                .send()
                .await
                .unwrap(),
        ),
        (
            "token",
            with_id(s.request(Method::POST, "/oauth/token"))
                .basic_auth(&s.creds.client_id, Some(&s.creds.client_secret))
                .form(&[("grant_type", "client_credentials")])
                .send()
                .await
                .unwrap(),
        ),
        (
            "token error",
            with_id(s.request(Method::POST, "/oauth/token"))
                .basic_auth(&s.creds.client_id, Some("wrong"))
                .form(&[("grant_type", "client_credentials")])
                .send()
                .await
                .unwrap(),
        ),
        (
            "jwks",
            with_id(s.request(Method::GET, "/.well-known/jwks.json"))
                .send()
                .await
                .unwrap(),
        ),
        (
            "docs",
            with_id(s.request(Method::GET, "/docs/errors"))
                .send()
                .await
                .unwrap(),
        ),
        (
            "301",
            with_id(s.client.get(format!("{}/v1/users?x=1", s.http_base)))
                .send()
                .await
                .unwrap(),
        ),
    ];
    // As-is: an upper-case UUID is not rewritten.
    let upper = CLIENT_UUID.to_ascii_uppercase();
    let res = s
        .request(Method::GET, "/healthz")
        .header("x-request-id", &upper)
        .send()
        .await
        .unwrap();
    assert_eq!(
        header(&res, "x-request-id"),
        Some(upper.as_str()),
        "D7: echoed as-is"
    );
    for (what, res) in responses {
        assert_eq!(
            header(&res, "x-request-id"),
            Some(CLIENT_UUID),
            "D7: a client's UUID is echoed as-is on every response ({what}, status {})",
            res.status()
        );
    }
}

#[tokio::test]
async fn meta_request_id_is_req_plus_the_uuids_hex_digits() {
    // D5, D7
    let s = TestServer::start().await;
    let t = s.token("users:read users:write").await;
    let res = s
        .request(Method::GET, "/v1/users")
        .bearer_auth(&t)
        .header("x-request-id", CLIENT_UUID)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let body: Value = res.json().await.unwrap();
    let want = format!("req_{}", CLIENT_UUID.replace('-', ""));
    assert_eq!(body["meta"]["request_id"], want.as_str(), "{body}");

    let other = "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d";
    let res = s
        .request(Method::POST, "/v1/users")
        .bearer_auth(&t)
        .header("x-request-id", other)
        .json(&json!({"email": "rid@example.com", "name": "Rid", "role": "viewer"}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::CREATED);
    assert_eq!(request_id_of(&res), other);
    let body: Value = res.json().await.unwrap();
    assert_eq!(
        body["meta"]["request_id"],
        format!("req_{}", other.replace('-', "")).as_str(),
        "{body}"
    );
}

#[tokio::test]
async fn the_server_makes_a_request_id_when_none_or_no_uuid_is_sent() {
    // D7
    let s = TestServer::start().await;
    let t = s.token("users:read").await;
    let mut seen = Vec::new();
    for sent in [
        None,
        Some("not-a-uuid"),
        Some(""),
        Some("6f1c1f0e-8a3b-4c2d-9e5f-0123456789abXX"),
        Some("req_123"),
    ] {
        let mut rb = s.request(Method::GET, "/v1/users").bearer_auth(&t);
        if let Some(v) = sent {
            rb = rb.header("x-request-id", v);
        }
        let res = rb.send().await.unwrap();
        assert_eq!(res.status(), StatusCode::OK);
        let id = request_id_of(&res);
        assert!(
            is_uuid(&id),
            "D7: the server makes a UUID (sent {sent:?}, got {id})"
        );
        assert_ne!(Some(id.as_str()), sent);
        let body: Value = res.json().await.unwrap();
        let meta = body["meta"]["request_id"].as_str().unwrap().to_owned();
        assert!(meta.starts_with("req_"), "{meta}");
        assert_eq!(
            meta,
            format!("req_{}", id.replace('-', "").to_ascii_lowercase()),
            "one id per request"
        );
        seen.push(id);
    }
    // Without a client id: errors and redirects still get one, and they differ.
    let a = request_id_of(&s.request(Method::GET, "/nope").send().await.unwrap());
    let b = request_id_of(
        &s.client
            .get(format!("{}/", s.http_base))
            .send()
            .await
            .unwrap(),
    );
    seen.push(a);
    seen.push(b);
    let mut unique = seen.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), seen.len(), "request ids are unique: {seen:?}");
}

// ---------------------------------------------------------------------------
// D42: health
// ---------------------------------------------------------------------------

#[tokio::test]
async fn healthz_and_readyz_need_no_token() {
    let s = TestServer::start().await;
    for path in ["/healthz", "/readyz"] {
        let res = s.request(Method::GET, path).send().await.unwrap();
        assert_eq!(res.status(), StatusCode::OK, "{path}");
        assert!(res.headers().get("www-authenticate").is_none());
        let text = res.text().await.unwrap();
        assert!(
            !text.contains(&s.creds.org) && !text.contains(&s.creds.client_id),
            "D42: no tenant data: {text}"
        );
    }
}

#[tokio::test]
async fn readyz_is_503_once_shutdown_has_begun() {
    // D42, D43
    let s = TestServer::start().await;
    s.running.as_ref().unwrap().state.begin_shutdown();
    let res = s.request(Method::GET, "/readyz").send().await.unwrap();
    let retry = header(&res, "retry-after").map(str::to_owned);
    expect_error(res, StatusCode::SERVICE_UNAVAILABLE, "SERVICE_UNAVAILABLE").await;
    let retry: u64 = retry
        .expect("D6: SERVICE_UNAVAILABLE carries Retry-After")
        .parse()
        .unwrap();
    assert!(retry >= 1);
    // The process is still up.
    assert_eq!(
        s.request(Method::GET, "/healthz")
            .send()
            .await
            .unwrap()
            .status(),
        StatusCode::OK
    );
}

// ---------------------------------------------------------------------------
// D23: well-known documents
// ---------------------------------------------------------------------------

#[tokio::test]
async fn jwks_publishes_the_p256_key_that_signs_tokens() {
    let s = TestServer::start().await;
    let res = s
        .request(Method::GET, "/.well-known/jwks.json")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    assert!(
        header(&res, "content-type").is_some_and(|c| c.starts_with("application/json")),
        "JSON"
    );
    let jwks: Value = res.json().await.unwrap();
    let keys = jwks["keys"].as_array().expect("a JWK set");
    assert!(!keys.is_empty());
    for k in keys {
        assert_eq!(k["kty"], "EC", "{k}");
        assert_eq!(k["crv"], "P-256", "{k}");
        assert!(k["kid"].as_str().is_some_and(|s| !s.is_empty()), "{k}");
        for c in ["x", "y"] {
            let v = k[c].as_str().unwrap_or_else(|| panic!("{c} in {k}"));
            assert_eq!(v.len(), 43, "32 bytes base64url without padding: {k}");
        }
        if let Some(alg) = k.get("alg") {
            assert_eq!(alg, "ES256");
        }
        for private in ["d", "p", "q", "k"] {
            assert!(
                k.get(private).is_none(),
                "no private material ({private}) in {k}"
            );
        }
    }
    let token = s.token("users:read").await;
    let header_json: Value = {
        use base64::Engine;
        let h = token.split('.').next().unwrap();
        serde_json::from_slice(
            &base64::engine::general_purpose::URL_SAFE_NO_PAD
                .decode(h)
                .unwrap(),
        )
        .unwrap()
    };
    assert!(
        keys.iter().any(|k| k["kid"] == header_json["kid"]),
        "the token's kid {} is published",
        header_json["kid"]
    );
}

#[tokio::test]
async fn authorization_server_metadata() {
    // D23, RFC 8414
    let s = TestServer::start().await;
    let res = s
        .request(Method::GET, "/.well-known/oauth-authorization-server")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    assert!(header(&res, "content-type").is_some_and(|c| c.starts_with("application/json")));
    let m: Value = res.json().await.unwrap();
    assert_eq!(m["issuer"], PUBLIC_URL, "{m}");
    assert_eq!(
        m["token_endpoint"],
        format!("{PUBLIC_URL}/oauth/token"),
        "{m}"
    );
    assert_eq!(
        m["jwks_uri"],
        format!("{PUBLIC_URL}/.well-known/jwks.json"),
        "{m}"
    );
    let list = |k: &str| -> Vec<String> {
        m[k].as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    };
    assert!(
        list("grant_types_supported").contains(&"client_credentials".to_owned()),
        "{m}"
    );
    for method in ["client_secret_basic", "client_secret_post"] {
        assert!(
            list("token_endpoint_auth_methods_supported").contains(&method.to_owned()),
            "{m}"
        );
    }
    let scopes = list("scopes_supported");
    for sc in [
        "users:read",
        "users:write",
        "profile:read",
        "profile:write",
        "admin",
        "products:read",
        "products:write",
    ] {
        assert!(
            scopes.contains(&sc.to_owned()),
            "scope {sc} advertised: {m}"
        );
    }
    // The issuer is what tokens carry.
    let t = s.token("users:read").await;
    let claims: Value = {
        use base64::Engine;
        let p = t.split('.').nth(1).unwrap();
        serde_json::from_slice(
            &base64::engine::general_purpose::URL_SAFE_NO_PAD
                .decode(p)
                .unwrap(),
        )
        .unwrap()
    };
    assert_eq!(claims["iss"], m["issuer"]);
}

// ---------------------------------------------------------------------------
// D6, D35: error reference page, unknown paths, wrong methods
// ---------------------------------------------------------------------------

/// Every code the server can emit (interface.md §7.3, D6).
const ALL_CODES: [&str; 16] = [
    "VALIDATION_ERROR",
    "INVALID_TOKEN",
    "TOKEN_EXPIRED",
    "INSUFFICIENT_SCOPE",
    "RESOURCE_NOT_FOUND",
    "DUPLICATE_RESOURCE",
    "RATE_LIMIT_EXCEEDED",
    "INTERNAL_ERROR",
    "METHOD_NOT_ALLOWED",
    "INVALID_STATE_TRANSITION",
    "OWNED_RESOURCES_EXIST",
    "LAST_ADMIN",
    "API_VERSION_SUNSET",
    "PAYLOAD_TOO_LARGE",
    "UNSUPPORTED_MEDIA_TYPE",
    "SERVICE_UNAVAILABLE",
];

fn has_anchor(html: &str, code: &str) -> bool {
    html.contains(&format!("id=\"{code}\"")) || html.contains(&format!("id='{code}'"))
}

#[tokio::test]
async fn error_reference_page_has_an_anchor_for_every_code() {
    // D6: `docs` is {public_url}/docs/errors#<CODE>, and that page exists with id="<CODE>".
    let s = TestServer::start().await;
    let res = s.request(Method::GET, "/docs/errors").send().await.unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    assert!(
        header(&res, "content-type").is_some_and(|c| c.starts_with("text/html")),
        "an HTML page"
    );
    let html = res.text().await.unwrap();
    for code in ALL_CODES {
        assert!(
            has_anchor(&html, code),
            "D6: /docs/errors has an element with id=\"{code}\""
        );
    }
    // D35: nothing fetched from a CDN.
    for tag in ["<script src=\"http", "<link href=\"http", "<img src=\"http"] {
        assert!(!html.contains(tag), "D35: no external assets ({tag})");
    }
    // The docs index exists too (D35).
    let res = s.request(Method::GET, "/docs").send().await.unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    assert!(header(&res, "content-type").is_some_and(|c| c.starts_with("text/html")));
}

#[tokio::test]
async fn docs_links_in_error_envelopes_resolve() {
    // D6: follow the `docs` link of real errors (public_url swapped for the test address).
    let s = TestServer::start().await;
    let page = s
        .request(Method::GET, "/docs/errors")
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let t = s.token("users:read").await;
    let errors = vec![
        s.request(Method::GET, "/v1/users").send().await.unwrap(),
        s.request(Method::GET, "/v0/users").send().await.unwrap(),
        s.request(Method::GET, "/nope").send().await.unwrap(),
        s.call(Method::GET, "/v1/products", &t, None).await,
        s.call(Method::GET, "/v1/users?limit=abc", &t, None).await,
    ];
    for res in errors {
        let body: Value = res.json().await.unwrap();
        let docs = body["error"]["docs"].as_str().unwrap();
        let rest = docs
            .strip_prefix(PUBLIC_URL)
            .unwrap_or_else(|| panic!("docs on public_url: {docs}"));
        let (path, anchor) = rest.split_once('#').unwrap();
        assert_eq!(path, "/docs/errors");
        assert_eq!(anchor, body["error"]["code"].as_str().unwrap());
        assert!(has_anchor(&page, anchor), "{anchor}");
    }
}

#[tokio::test]
async fn unknown_paths_are_404_envelopes() {
    // D6: unknown routes, inside and outside /v1.
    let s = TestServer::start().await;
    let t = s.token("").await;
    for path in [
        "/nope",
        "/oauth/nope",
        "/.well-known/nope",
        "/docs/nope",
        "/v1/nope",
        "/v1/users/usr_x/extra",
        "/V1/users",
        "/v2/users",
        "/v10/users",
    ] {
        let res = s
            .request(Method::GET, path)
            .bearer_auth(&t)
            .send()
            .await
            .unwrap();
        expect_error(res, StatusCode::NOT_FOUND, "RESOURCE_NOT_FOUND").await;
    }
    for path in ["/nope", "/index.html", "/api/v1/users"] {
        let res = s.request(Method::GET, path).send().await.unwrap();
        expect_error(res, StatusCode::NOT_FOUND, "RESOURCE_NOT_FOUND").await;
    }
    let res = s
        .request(Method::POST, "/nope")
        .json(&json!({"a": 1}))
        .send()
        .await
        .unwrap();
    expect_error(res, StatusCode::NOT_FOUND, "RESOURCE_NOT_FOUND").await;
}

#[tokio::test]
async fn a_wrong_method_is_405_with_allow() {
    // D6: known path, wrong method.
    let s = TestServer::start().await;
    let t = s.token("").await;
    let res = s.call(Method::DELETE, "/v1/users", &t, None).await;
    let allow = header(&res, "allow").unwrap_or("").to_ascii_uppercase();
    expect_error(res, StatusCode::METHOD_NOT_ALLOWED, "METHOD_NOT_ALLOWED").await;
    assert!(
        allow.contains("GET") && allow.contains("POST"),
        "Allow lists the methods: {allow}"
    );
    let res = s
        .call(Method::PUT, "/v1/products/prod_abc", &t, Some(json!({})))
        .await;
    let allow = header(&res, "allow").unwrap_or("").to_ascii_uppercase();
    expect_error(res, StatusCode::METHOD_NOT_ALLOWED, "METHOD_NOT_ALLOWED").await;
    assert!(allow.contains("PATCH"), "{allow}");
    let res = s.request(Method::POST, "/healthz").send().await.unwrap();
    let allow = header(&res, "allow").unwrap_or("").to_ascii_uppercase();
    expect_error(res, StatusCode::METHOD_NOT_ALLOWED, "METHOD_NOT_ALLOWED").await;
    assert!(allow.contains("GET"), "{allow}");
}

// ---------------------------------------------------------------------------
// D32: v0 is gone
// ---------------------------------------------------------------------------

#[tokio::test]
async fn v0_paths_are_410_with_sunset_and_successor_link() {
    let s = TestServer::start().await;
    let t = s.token("").await;
    let cases = [
        (Method::GET, "/v0/users", "/v1/users"),
        (
            Method::GET,
            "/v0/users/usr_123?x=1&y=2",
            "/v1/users/usr_123?x=1&y=2",
        ),
        (
            Method::GET,
            "/v0/products?limit=5&offset=10&q=blue%20sh",
            "/v1/products?limit=5&offset=10&q=blue%20sh",
        ),
        (Method::POST, "/v0/users", "/v1/users"),
        (Method::PATCH, "/v0/users/usr_1", "/v1/users/usr_1"),
        (Method::DELETE, "/v0/products/prod_1", "/v1/products/prod_1"),
        (Method::GET, "/v0/no/such/thing", "/v1/no/such/thing"),
        (Method::GET, "/v0", "/v1"),
    ];
    for (method, path, successor) in cases {
        for authed in [false, true] {
            let mut rb = s.request(method.clone(), path);
            if authed {
                rb = rb.bearer_auth(&t);
            }
            if method == Method::POST || method == Method::PATCH {
                rb = rb.json(&json!({"name": "x"}));
            }
            let res = rb.send().await.unwrap();
            let sunset = header(&res, "sunset").map(str::to_owned);
            let link = header(&res, "link").map(str::to_owned);
            expect_error(res, StatusCode::GONE, "API_VERSION_SUNSET").await;
            assert_eq!(
                sunset.as_deref(),
                Some("Tue, 01 Sep 2026 00:00:00 GMT"),
                "{method} {path}"
            );
            assert_eq!(
                link.as_deref(),
                Some(format!("<{PUBLIC_URL}{successor}>; rel=\"successor-version\"").as_str()),
                "{method} {path}"
            );
        }
    }
}

// ---------------------------------------------------------------------------
// D41: first start; restarts
// ---------------------------------------------------------------------------

fn mode(p: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p)
        .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
        .permissions()
        .mode()
        & 0o777
}

#[tokio::test]
async fn first_start_writes_bootstrap_credentials_and_a_restart_keeps_them() {
    let s = TestServer::start().await;
    assert!(
        s.running.as_ref().unwrap().bootstrap.is_some(),
        "the first start bootstraps"
    );
    let path = s.data_dir().join("bootstrap-credentials.json");
    assert_eq!(mode(&path), 0o600, "D41: mode 0600");
    assert_eq!(
        mode(&s.data_dir().join("master.key")),
        0o600,
        "D23: master.key mode 0600"
    );
    let bytes = std::fs::read(&path).unwrap();
    let creds: Value = serde_json::from_slice(&bytes).unwrap();
    assert!(
        creds["org"].as_str().is_some_and(|o| o.starts_with("org_")),
        "{creds}"
    );
    assert!(
        creds["client_id"]
            .as_str()
            .is_some_and(|o| o.starts_with("app_")),
        "{creds}"
    );
    assert!(
        creds["client_secret"]
            .as_str()
            .is_some_and(|o| o.len() >= 43),
        "{creds}"
    );
    assert_eq!(creds["org"], s.creds.org.as_str());
    assert_eq!(creds["client_id"], s.creds.client_id.as_str());
    assert_eq!(creds["client_secret"], s.creds.client_secret.as_str());

    // The Default organization is on the pro plan (D41).
    let org = s.store().get_org(&s.org()).await.unwrap().unwrap();
    assert_eq!(org.name, "Default");
    assert_eq!(org.plan, gatehouse_domain::Plan::Pro);

    // A newcomer can call the API with nothing else; admin included (D41).
    let before = s.token("admin").await;
    assert_eq!(
        s.call(Method::GET, "/v1/users", &before, None)
            .await
            .status(),
        StatusCode::OK
    );

    let s = s.restart().await;
    assert!(
        s.running.as_ref().unwrap().bootstrap.is_none(),
        "D41: no second bootstrap on restart"
    );
    assert_eq!(
        std::fs::read(&path).unwrap(),
        bytes,
        "the credentials file is untouched"
    );
    assert_eq!(mode(&path), 0o600);
    // The same credentials still work, for the same organization.
    let after = s.token("admin").await;
    let org_of = |t: &str| -> Value {
        use base64::Engine;
        let p = t.split('.').nth(1).unwrap();
        let c: Value = serde_json::from_slice(
            &base64::engine::general_purpose::URL_SAFE_NO_PAD
                .decode(p)
                .unwrap(),
        )
        .unwrap();
        c["org"].clone()
    };
    assert_eq!(org_of(&after), org_of(&before));
    // A token issued before the restart still verifies (keys are persisted).
    assert_eq!(
        s.call(Method::GET, "/v1/users", &before, None)
            .await
            .status(),
        StatusCode::OK
    );
}

#[tokio::test]
async fn data_written_before_a_graceful_restart_is_still_there() {
    // D43
    let s = TestServer::start().await;
    let t = s.token("").await;
    let res = s
        .call(
            Method::POST,
            "/v1/users",
            &t,
            Some(json!({"email": "keep@example.com", "name": "Keep", "role": "editor"})),
        )
        .await;
    assert_eq!(res.status(), StatusCode::CREATED);
    let user: Value = res.json().await.unwrap();
    let res = s
        .call(
            Method::POST,
            "/v1/products",
            &t,
            Some(json!({"name": "Kept", "sku": "KEEP-1", "price": 250, "stock": 3})),
        )
        .await;
    assert_eq!(res.status(), StatusCode::CREATED);
    let product: Value = res.json().await.unwrap();

    let s = s.restart().await;
    let t = s.token("").await;
    let uid = user["data"]["id"].as_str().unwrap();
    let got: Value = s
        .call(Method::GET, &format!("/v1/users/{uid}"), &t, None)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(got["data"], user["data"]);
    let pid = product["data"]["id"].as_str().unwrap();
    let got: Value = s
        .call(Method::GET, &format!("/v1/products/{pid}"), &t, None)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(got["data"], product["data"]);
}

// ---------------------------------------------------------------------------
// D43: the real binary — kill -9 loses no acknowledged write; SIGTERM exits 0
// ---------------------------------------------------------------------------

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A `gatehouse serve` process, killed when dropped.
struct ServeProcess {
    child: std::process::Child,
    https: u16,
    admin: u16,
    log: PathBuf,
    stdout: PathBuf,
    /// How it was started, to start it again on other ports.
    again: (PathBuf, PathBuf, u32, Option<String>, Vec<(String, String)>),
}

impl Drop for ServeProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl ServeProcess {
    fn spawn(data_dir: &Path, logs: &Path, n: u32) -> Self {
        Self::spawn_with(data_dir, logs, n, Some(PUBLIC_URL))
    }

    /// `public_url`: `None` leaves it to the default (D1 revised).
    fn spawn_with(data_dir: &Path, logs: &Path, n: u32, public_url: Option<&str>) -> Self {
        Self::spawn_env(data_dir, logs, n, public_url, &[])
    }

    /// With more environment variables (after the ones set here).
    fn spawn_env(
        data_dir: &Path,
        logs: &Path,
        n: u32,
        public_url: Option<&str>,
        envs: &[(String, String)],
    ) -> Self {
        let https = free_port();
        let http = free_port();
        let admin = free_port();
        let log = logs.join(format!("serve-{n}.stderr"));
        let stdout = logs.join(format!("serve-{n}.stdout"));
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_gatehouse"));
        for (k, _) in std::env::vars() {
            if k.starts_with("GATEHOUSE_") {
                cmd.env_remove(k);
            }
        }
        cmd.arg("--data-dir")
            .arg(data_dir)
            .arg("serve")
            .arg("--https-addr")
            .arg(format!("127.0.0.1:{https}"))
            .arg("--http-addr")
            .arg(format!("127.0.0.1:{http}"))
            .env("GATEHOUSE_ADMIN_ADDR", format!("127.0.0.1:{admin}"))
            .env("GATEHOUSE_LOG", "info")
            .stdin(std::process::Stdio::null())
            .stdout(std::fs::File::create(&stdout).unwrap())
            .stderr(std::fs::File::create(&log).unwrap());
        if let Some(url) = public_url {
            cmd.env("GATEHOUSE_PUBLIC_URL", url);
        }
        cmd.envs(envs.iter().map(|(k, v)| (k, v)));
        let child = cmd.spawn().expect("the gatehouse binary starts");
        Self {
            child,
            https,
            admin,
            log,
            stdout,
            again: (
                data_dir.to_owned(),
                logs.to_owned(),
                n,
                public_url.map(str::to_owned),
                envs.to_vec(),
            ),
        }
    }

    fn logs(&self) -> String {
        format!(
            "stdout:\n{}\nstderr:\n{}",
            std::fs::read_to_string(&self.stdout).unwrap_or_default(),
            std::fs::read_to_string(&self.log).unwrap_or_default()
        )
    }

    fn url(&self, path: &str) -> String {
        format!("https://127.0.0.1:{}{path}", self.https)
    }

    /// Waits (bounded) until `/healthz` answers 200; returns a client trusting the server's certificate.
    async fn ready(&mut self, data_dir: &Path) -> reqwest::Client {
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut respawns = 0;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                // A port `free_port` gave up was taken by another test's
                // server before this one bound it: start again elsewhere.
                if respawns < 5 && self.logs().contains("Address already in use") {
                    respawns += 1;
                    let (dir, logs, n, url, envs) = self.again.clone();
                    *self = Self::spawn_env(&dir, &logs, n, url.as_deref(), &envs);
                    continue;
                }
                panic!(
                    "gatehouse serve exited early with {status}\n{}",
                    self.logs()
                );
            }
            let cert = data_dir.join("tls/cert.pem");
            if cert.exists()
                && let Ok(pem) = std::fs::read(&cert)
                && reqwest::Certificate::from_pem(&pem).is_ok()
            {
                let client = https_client(&cert);
                if let Ok(res) = client
                    .get(self.url("/healthz"))
                    .timeout(Duration::from_secs(2))
                    .send()
                    .await
                    && res.status() == StatusCode::OK
                {
                    return client;
                }
            }
            assert!(
                Instant::now() < deadline,
                "gatehouse serve did not become healthy\n{}",
                self.logs()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Sends a signal with `kill(1)` and waits (bounded) for the exit status.
    async fn signal_and_wait(&mut self, signal: &str, limit: Duration) -> std::process::ExitStatus {
        let pid = self.child.id().to_string();
        let ok = std::process::Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(&pid)
            .status()
            .unwrap();
        assert!(ok.success(), "kill -{signal} {pid}");
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "no exit {limit:?} after SIG{signal}\n{}",
                self.logs()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

async fn binary_token(
    client: &reqwest::Client,
    p: &ServeProcess,
    creds: &Value,
    scope: &str,
) -> String {
    let res = client
        .post(p.url("/oauth/token"))
        .basic_auth(
            creds["client_id"].as_str().unwrap(),
            creds["client_secret"].as_str(),
        )
        .form(&[("grant_type", "client_credentials"), ("scope", scope)])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let body: Value = res.json().await.unwrap();
    body["access_token"].as_str().unwrap().to_owned()
}

async fn binary_create_user(
    client: &reqwest::Client,
    p: &ServeProcess,
    token: &str,
    email: &str,
) -> Value {
    let res = client
        .post(p.url("/v1/users"))
        .bearer_auth(token)
        .json(&json!({"email": email, "name": "Durable", "role": "viewer"}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::CREATED, "acknowledged write");
    let body: Value = res.json().await.unwrap();
    body["data"].clone()
}

async fn binary_get_user(
    client: &reqwest::Client,
    p: &ServeProcess,
    token: &str,
    id: &str,
) -> Response {
    client
        .get(p.url(&format!("/v1/users/{id}")))
        .bearer_auth(token)
        .send()
        .await
        .unwrap()
}

/// A `gatehouse` operator command on `data_dir`, its JSON output.
fn binary_cli(data_dir: &Path, args: &[&str]) -> Value {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_gatehouse"));
    for (k, _) in std::env::vars() {
        if k.starts_with("GATEHOUSE_") {
            cmd.env_remove(k);
        }
    }
    let out = cmd
        .arg("--data-dir")
        .arg(data_dir)
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// D43 with group commit (issue 16): 32 clients create users as fast as the
/// server acknowledges them, many writes sharing each commit, and the
/// process is killed with SIGKILL mid-load. After a restart every user
/// whose creation was acknowledged (201) is there.
#[tokio::test]
async fn kill_9_mid_load_loses_no_acknowledged_write_of_a_shared_commit() {
    let data = tempfile::tempdir().unwrap();
    let logs = tempfile::tempdir().unwrap();
    let mut first = ServeProcess::spawn(data.path(), logs.path(), 1);
    let client = first.ready(data.path()).await;
    // An organization whose rate limits (D28) do not slow the load.
    let org = binary_cli(
        data.path(),
        &[
            "org",
            "create",
            "--name",
            "Burst",
            "--plan",
            "enterprise",
            "--per-minute",
            "100000000",
            "--per-second",
            "10000000",
            "--json",
        ],
    );
    let app = binary_cli(
        data.path(),
        &[
            "client",
            "create",
            "--org",
            org["id"].as_str().unwrap(),
            "--name",
            "burst",
            "--scopes",
            "users:read users:write",
            "--json",
        ],
    );
    let res = client
        .post(first.url("/oauth/token"))
        .basic_auth(
            app["client_id"].as_str().unwrap(),
            app["client_secret"].as_str(),
        )
        .form(&[
            ("grant_type", "client_credentials"),
            ("scope", "users:read users:write"),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let token = res.json::<Value>().await.unwrap()["access_token"]
        .as_str()
        .unwrap()
        .to_owned();

    let acknowledged = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let mut workers = Vec::new();
    for w in 0..32 {
        let (client, url, token, acknowledged) = (
            client.clone(),
            first.url("/v1/users"),
            token.clone(),
            acknowledged.clone(),
        );
        workers.push(tokio::spawn(async move {
            for i in 0.. {
                let Ok(res) = client
                    .post(&url)
                    .bearer_auth(&token)
                    .json(&json!({"email": format!("w{w}.{i}@example.com"), "name": "Burst", "role": "viewer"}))
                    .send()
                    .await
                else {
                    return;
                };
                if res.status() != StatusCode::CREATED {
                    return;
                }
                let Ok(body) = res.json::<Value>().await else { return };
                acknowledged.lock().unwrap().push(body["data"]["id"].as_str().unwrap().to_owned());
            }
        }));
    }
    // Let the load build, then kill -9 while writes are in flight.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    first.child.kill().unwrap();
    first.child.wait().unwrap();
    for w in workers {
        w.await.unwrap();
    }
    let ids = acknowledged.lock().unwrap().clone();
    assert!(
        ids.len() >= 100,
        "only {} writes acknowledged before the kill",
        ids.len()
    );

    let mut second = ServeProcess::spawn(data.path(), logs.path(), 2);
    let client = second.ready(data.path()).await;
    let mut missing = Vec::new();
    for id in &ids {
        let res = binary_get_user(&client, &second, &token, id).await;
        if res.status() != StatusCode::OK {
            missing.push(id.clone());
        }
    }
    assert!(
        missing.is_empty(),
        "D43: {} of {} acknowledged users lost by kill -9: {missing:?}",
        missing.len(),
        ids.len()
    );
    eprintln!("{} acknowledged creations all survived kill -9", ids.len());
}

#[tokio::test]
async fn kill_9_loses_no_acknowledged_write() {
    // D43, D41 (with the real binary).
    let data = tempfile::tempdir().unwrap();
    let logs = tempfile::tempdir().unwrap();

    let mut first = ServeProcess::spawn(data.path(), logs.path(), 1);
    let client = first.ready(data.path()).await;
    let creds_path = data.path().join("bootstrap-credentials.json");
    let creds_bytes = std::fs::read(&creds_path).expect("D41: bootstrap-credentials.json");
    assert_eq!(mode(&creds_path), 0o600);
    let creds: Value = serde_json::from_slice(&creds_bytes).unwrap();
    let token = binary_token(&client, &first, &creds, "users:read users:write").await;
    let user = binary_create_user(&client, &first, &token, "durable@example.com").await;
    let uid = user["id"].as_str().unwrap().to_owned();

    // kill -9 right after the acknowledgement.
    first.child.kill().unwrap();
    let status = first.child.wait().unwrap();
    assert!(!status.success());
    let first_stdout = std::fs::read_to_string(&first.stdout).unwrap();
    assert!(
        first_stdout.contains(creds["client_secret"].as_str().unwrap()),
        "D41: the first start prints the client_secret once\n{}",
        first.logs()
    );

    let mut second = ServeProcess::spawn(data.path(), logs.path(), 2);
    let client = second.ready(data.path()).await;
    assert_eq!(
        std::fs::read(&creds_path).unwrap(),
        creds_bytes,
        "D41: no second bootstrap"
    );
    // The token from before the crash still verifies; the user is there.
    let res = binary_get_user(&client, &second, &token, &uid).await;
    assert_eq!(
        res.status(),
        StatusCode::OK,
        "D43: the acknowledged write survived kill -9\n{}",
        second.logs()
    );
    let got: Value = res.json().await.unwrap();
    assert_eq!(got["data"], user);
    let second_stdout = std::fs::read_to_string(&second.stdout).unwrap();
    assert!(
        !second_stdout.contains(creds["client_secret"].as_str().unwrap()),
        "D41: the secret is shown once, not on every start"
    );

    // Several writes in a row, then kill -9 again.
    let token = binary_token(&client, &second, &creds, "users:read users:write").await;
    let mut ids = Vec::new();
    for i in 0..5 {
        let u =
            binary_create_user(&client, &second, &token, &format!("burst{i}@example.com")).await;
        ids.push(u["id"].as_str().unwrap().to_owned());
    }
    second.child.kill().unwrap();
    second.child.wait().unwrap();

    let mut third = ServeProcess::spawn(data.path(), logs.path(), 3);
    let client = third.ready(data.path()).await;
    for id in ids.iter().chain([&uid]) {
        let res = binary_get_user(&client, &third, &token, id).await;
        assert_eq!(res.status(), StatusCode::OK, "D43: {id} survived kill -9");
    }
    let status = third.signal_and_wait("TERM", Duration::from_secs(40)).await;
    assert_eq!(
        status.code(),
        Some(0),
        "D43: SIGTERM exits 0\n{}",
        third.logs()
    );
}

#[tokio::test]
async fn sigterm_and_sigint_stop_the_server_with_exit_status_0() {
    // D43
    let data = tempfile::tempdir().unwrap();
    let logs = tempfile::tempdir().unwrap();

    let mut p = ServeProcess::spawn(data.path(), logs.path(), 1);
    let client = p.ready(data.path()).await;
    let creds: Value = serde_json::from_slice(
        &std::fs::read(data.path().join("bootstrap-credentials.json")).unwrap(),
    )
    .unwrap();
    let token = binary_token(&client, &p, &creds, "users:read users:write").await;
    let user = binary_create_user(&client, &p, &token, "graceful@example.com").await;
    let status = p.signal_and_wait("TERM", Duration::from_secs(40)).await;
    assert_eq!(status.code(), Some(0), "D43: SIGTERM exits 0\n{}", p.logs());
    // It no longer accepts connections.
    assert!(
        client
            .get(p.url("/healthz"))
            .timeout(Duration::from_secs(2))
            .send()
            .await
            .is_err()
    );

    let mut p = ServeProcess::spawn(data.path(), logs.path(), 2);
    let client = p.ready(data.path()).await;
    let res = binary_get_user(&client, &p, &token, user["id"].as_str().unwrap()).await;
    assert_eq!(res.status(), StatusCode::OK);
    let status = p.signal_and_wait("INT", Duration::from_secs(40)).await;
    assert_eq!(status.code(), Some(0), "D43: SIGINT exits 0\n{}", p.logs());
}

// ---------------------------------------------------------------------------
// D31: certificates
// ---------------------------------------------------------------------------

#[tokio::test]
async fn configured_pem_certificates_are_served() {
    // D31: certificates come from configured PEM files.
    let certs = tempfile::tempdir().unwrap();
    let generated =
        rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_owned(), "localhost".to_owned()])
            .unwrap();
    let cert = certs.path().join("server.crt");
    let key = certs.path().join("server.key");
    std::fs::write(&cert, generated.cert.pem()).unwrap();
    std::fs::write(&key, generated.signing_key.serialize_pem()).unwrap();
    let (c, k) = (cert.clone(), key.clone());
    let s = TestServer::start_with(move |st| {
        st.tls_cert = Some(c);
        st.tls_key = Some(k);
    })
    .await;
    // A client that trusts only the configured certificate gets through.
    let client = https_client(&cert);
    let res = client.get(s.url("/healthz")).send().await.unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    assert_hsts(&res);
    // One that trusts some other certificate does not.
    let other = tempfile::tempdir().unwrap();
    let stranger = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_owned()]).unwrap();
    let stranger_pem = other.path().join("other.crt");
    std::fs::write(&stranger_pem, stranger.cert.pem()).unwrap();
    assert!(
        https_client(&stranger_pem)
            .get(s.url("/healthz"))
            .send()
            .await
            .is_err()
    );
}

#[tokio::test]
async fn the_self_signed_certificate_is_made_once_and_reused() {
    // D31: when none is configured, the first start generates one in the data directory.
    let s = TestServer::start().await;
    let cert = s
        .running
        .as_ref()
        .unwrap()
        .cert_path
        .clone()
        .expect("a certificate");
    assert!(
        cert.starts_with(s.data_dir()),
        "in the data directory: {}",
        cert.display()
    );
    let pem = std::fs::read(&cert).unwrap();
    let old_client = s.client.clone();
    let s = s.restart().await;
    assert_eq!(
        std::fs::read(&cert).unwrap(),
        pem,
        "a restart reuses the certificate"
    );
    let res = old_client.get(s.url("/healthz")).send().await.unwrap();
    assert_eq!(res.status(), StatusCode::OK);
}

// ---------------------------------------------------------------------------
// D42: /metrics on the admin listener; D43: requests in flight finish
// ---------------------------------------------------------------------------

#[tokio::test]
async fn metrics_are_served_on_the_admin_listener_without_tenant_data() {
    // D42
    let data = tempfile::tempdir().unwrap();
    let logs = tempfile::tempdir().unwrap();
    let mut p = ServeProcess::spawn(data.path(), logs.path(), 1);
    let client = p.ready(data.path()).await;
    let creds: Value = serde_json::from_slice(
        &std::fs::read(data.path().join("bootstrap-credentials.json")).unwrap(),
    )
    .unwrap();
    let token = binary_token(&client, &p, &creds, "users:read users:write").await;
    let user = binary_create_user(&client, &p, &token, "metrics-secret-person@example.com").await;
    let res = client
        .get(p.url("/v1/users"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);

    // Not on the public listener.
    let res = client.get(p.url("/metrics")).send().await.unwrap();
    assert_eq!(
        res.status(),
        StatusCode::NOT_FOUND,
        "D42: /metrics is on a separate admin listener"
    );

    // On the admin listener (plain HTTP, as Prometheus scrapes), no token needed.
    let plain = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let url = format!("http://127.0.0.1:{}/metrics", p.admin);
    let deadline = Instant::now() + Duration::from_secs(10);
    let res = loop {
        match plain.get(&url).timeout(Duration::from_secs(2)).send().await {
            Ok(r) => break r,
            Err(e) => {
                assert!(
                    Instant::now() < deadline,
                    "D42: no admin listener at {url}: {e}\n{}",
                    p.logs()
                );
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    };
    assert_eq!(res.status(), StatusCode::OK);
    assert!(
        header(&res, "content-type").is_some_and(|c| c.starts_with("text/plain")),
        "Prometheus text format"
    );
    let text = res.text().await.unwrap();
    assert!(
        text.contains("# TYPE"),
        "Prometheus exposition format:\n{text}"
    );
    for secret in [
        creds["org"].as_str().unwrap(),
        creds["client_id"].as_str().unwrap(),
        creds["client_secret"].as_str().unwrap(),
        user["id"].as_str().unwrap(),
        "metrics-secret-person",
        token.as_str(),
    ] {
        assert!(
            !text.contains(secret),
            "D42: /metrics leaks no tenant data ({secret})"
        );
    }
}

/// An HTTP/1.1 connection over TLS to 127.0.0.1, trusting `cert`.
async fn raw_tls(cert: &Path, port: u16) -> tokio_rustls::client::TlsStream<tokio::net::TcpStream> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, ServerName};
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_file_iter(cert).unwrap() {
        roots.add(c.unwrap()).unwrap();
    }
    let provider = std::sync::Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(std::sync::Arc::new(config));
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    connector
        .connect(ServerName::try_from("127.0.0.1").unwrap(), tcp)
        .await
        .unwrap()
}

#[tokio::test]
async fn sigterm_finishes_a_request_in_flight_then_exits_0() {
    // D43: stop accepting, finish requests in flight, exit 0.
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let data = tempfile::tempdir().unwrap();
    let logs = tempfile::tempdir().unwrap();
    let mut p = ServeProcess::spawn(data.path(), logs.path(), 1);
    let client = p.ready(data.path()).await;
    let creds: Value = serde_json::from_slice(
        &std::fs::read(data.path().join("bootstrap-credentials.json")).unwrap(),
    )
    .unwrap();
    let token = binary_token(&client, &p, &creds, "users:read users:write").await;

    // A POST whose body arrives in two halves, with SIGTERM in between.
    let body =
        json!({"email": "inflight@example.com", "name": "In Flight", "role": "viewer"}).to_string();
    let (first, second) = body.split_at(body.len() / 2);
    let mut conn = raw_tls(&data.path().join("tls/cert.pem"), p.https).await;
    let head = format!(
        "POST /v1/users HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    conn.write_all(head.as_bytes()).await.unwrap();
    conn.write_all(first.as_bytes()).await.unwrap();
    conn.flush().await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;

    let pid = p.child.id().to_string();
    assert!(
        std::process::Command::new("kill")
            .arg("-TERM")
            .arg(&pid)
            .status()
            .unwrap()
            .success()
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        p.child.try_wait().unwrap().is_none(),
        "D43: the server waits for the request in flight\n{}",
        p.logs()
    );

    conn.write_all(second.as_bytes()).await.unwrap();
    conn.flush().await.unwrap();
    let mut response = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), conn.read_to_end(&mut response))
        .await
        .expect("the response arrives")
        .ok();
    let response = String::from_utf8_lossy(&response);
    assert!(
        response.starts_with("HTTP/1.1 201"),
        "D43: the request in flight completes: {response}\n{}",
        p.logs()
    );

    let deadline = Instant::now() + Duration::from_secs(40);
    let status = loop {
        if let Some(st) = p.child.try_wait().unwrap() {
            break st;
        }
        assert!(
            Instant::now() < deadline,
            "no exit after SIGTERM\n{}",
            p.logs()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(status.code(), Some(0), "D43: exit 0\n{}", p.logs());

    // The acknowledged write is there after a restart.
    let mut p = ServeProcess::spawn(data.path(), logs.path(), 2);
    let client = p.ready(data.path()).await;
    let res = client
        .get(p.url("/v1/users?q=inflight"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    let list: Value = res.json().await.unwrap();
    assert_eq!(list["meta"]["total"], 1, "{list}");
}

/// D56: with an IP address as `public_url`'s host, passkeys are not
/// offered (WebAuthn needs a domain name) and the start log says why; the
/// sign-in page has the password alone.
#[tokio::test]
async fn d56_an_ip_public_url_offers_no_passkeys_and_the_start_log_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let logs = tempfile::tempdir().unwrap();
    let mut p = ServeProcess::spawn_with(dir.path(), logs.path(), 1, Some("https://127.0.0.1:9"));
    let client = p.ready(dir.path()).await;
    // The dashboard's way to its sign-in page (at the public URL, which
    // nothing serves here: the same path at the server's own address).
    let to = client.get(p.url("/dashboard/signin")).send().await.unwrap();
    let location = to.headers()["location"].to_str().unwrap().to_owned();
    let path = &location[location.find("/oauth/authorize").expect("to the sign-in")..];
    let page = client.get(p.url(path)).send().await.unwrap();
    let final_url = page.url().to_string();
    let body = page.text().await.unwrap();
    assert!(
        body.contains("id=\"password\""),
        "the sign-in page: {final_url}: {body}"
    );
    assert!(!body.contains("data-passkey"), "{final_url}: {body}");
    let log = p.logs();
    assert!(
        log.contains("passkeys are not offered: the host of the public URL is an IP address"),
        "{log}"
    );
}

#[tokio::test]
async fn d1_without_public_url_the_issuer_follows_the_https_port() {
    let dir = tempfile::tempdir().unwrap();
    let logs = tempfile::tempdir().unwrap();
    let mut p = ServeProcess::spawn_with(dir.path(), logs.path(), 1, None);
    let client = p.ready(dir.path()).await;
    let meta: Value = client
        .get(p.url("/.well-known/oauth-authorization-server"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        meta["issuer"],
        format!("https://localhost:{}", p.https),
        "D1 (revised): the default public URL names the HTTPS listener's port"
    );
    assert_eq!(
        meta["token_endpoint"],
        format!("https://localhost:{}/oauth/token", p.https)
    );
}

#[tokio::test]
async fn d1_behind_a_proxy_without_public_url_refuses_to_start() {
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_gatehouse"));
    for (k, _) in std::env::vars() {
        if k.starts_with("GATEHOUSE_") {
            cmd.env_remove(k);
        }
    }
    let out = cmd
        .arg("--data-dir")
        .arg(dir.path())
        .args(["serve", "--behind-proxy", "--http-addr"])
        .arg(format!("127.0.0.1:{}", free_port()))
        .env("GATEHOUSE_ADMIN_ADDR", format!("127.0.0.1:{}", free_port()))
        .stdin(std::process::Stdio::null())
        .output();
    let out = tokio::time::timeout(Duration::from_secs(30), out)
        .await
        .expect("it exits at once")
        .unwrap();
    assert!(!out.status.success(), "D1 (revised): refused");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--public-url"), "says what is missing: {err}");
    assert!(
        !dir.path().join("gatehouse.db").exists(),
        "nothing was created"
    );
}

#[tokio::test]
async fn d45_sigterm_exits_promptly_with_a_half_sent_request_open() {
    let dir = tempfile::tempdir().unwrap();
    let logs = tempfile::tempdir().unwrap();
    let mut p = ServeProcess::spawn(dir.path(), logs.path(), 1);
    p.ready(dir.path()).await;
    let cert = dir.path().join("tls/cert.pem");
    let mut half = crate::common::raw_tls(p.https, &cert, &[b"http/1.1"]).await;
    use tokio::io::AsyncWriteExt;
    half.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-A: b")
        .await
        .unwrap();
    let mut silent = crate::common::raw_tls(p.https, &cert, &[b"h2"]).await;
    silent.flush().await.unwrap();
    let started = Instant::now();
    let status = p.signal_and_wait("TERM", Duration::from_secs(10)).await;
    assert!(status.success(), "exit 0 after SIGTERM\n{}", p.logs());
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "D43/D45: SIGTERM waited {:?} on connections without a request",
        started.elapsed()
    );
}

/// Issue 31 (docs/performance.md): the allocator is built without its
/// transparent-huge-page advice, so no part of a serving process's memory
/// asks the kernel for 2 MiB pages (each touch of such a region makes 2 MiB
/// resident; the idle server was a third larger with it). Linux only: the
/// advice shows as `hg` in `/proc/PID/smaps`.
#[cfg(target_os = "linux")]
#[tokio::test]
async fn no_memory_of_the_serving_process_asks_for_transparent_huge_pages() {
    let dir = tempfile::tempdir().unwrap();
    let logs = tempfile::tempdir().unwrap();
    let mut p = ServeProcess::spawn(dir.path(), logs.path(), 1);
    let client = p.ready(dir.path()).await;
    // Some work first, so the heap has grown past its first pages.
    for _ in 0..20 {
        let res = client
            .get(p.url("/.well-known/openid-configuration"))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), StatusCode::OK);
    }
    let smaps = std::fs::read_to_string(format!("/proc/{}/smaps", p.child.id())).unwrap();
    let mut mapping = "";
    let mut advised = Vec::new();
    for line in smaps.lines() {
        if let Some(flags) = line.strip_prefix("VmFlags:") {
            if flags.split_whitespace().any(|f| f == "hg") {
                advised.push(mapping.to_owned());
            }
        } else if line.split_whitespace().next().is_some_and(|a| {
            a.contains('-') && a.chars().all(|c| c.is_ascii_hexdigit() || c == '-')
        }) {
            mapping = line;
        }
    }
    assert!(
        smaps.contains("VmFlags:"),
        "this kernel lists no VmFlags in smaps"
    );
    assert!(
        advised.is_empty(),
        "mappings advised MADV_HUGEPAGE: {advised:#?}"
    );
}

/// Issue 32: one access-log line per request at `info`, with the method,
/// the path without its query, the status, the duration and the request
/// id; `GATEHOUSE_ACCESS_LOG=false` turns it off.
#[tokio::test]
async fn each_request_leaves_one_access_log_line_unless_switched_off() {
    for on in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let logs = tempfile::tempdir().unwrap();
        let envs = if on {
            vec![]
        } else {
            vec![("GATEHOUSE_ACCESS_LOG".to_owned(), "false".to_owned())]
        };
        let mut p = ServeProcess::spawn_env(dir.path(), logs.path(), 1, Some(PUBLIC_URL), &envs);
        let client = p.ready(dir.path()).await;
        let res = client
            .get(p.url("/oauth/authorize?state=secret-state-value&client_id=nobody"))
            .header("x-request-id", "7b0c4e2a-5d1f-4c8e-9a3b-2f6d8e1c0a55")
            .send()
            .await
            .unwrap();
        let status = res.status().as_u16();
        // The line is written after the response: wait for it (bounded).
        let deadline = Instant::now() + Duration::from_secs(5);
        let line = loop {
            let log = p.logs();
            let line = log
                .lines()
                .find(|l| {
                    l.contains("req_7b0c4e2a5d1f4c8e9a3b2f6d8e1c0a55")
                        && l.contains("gatehouse::access")
                })
                .map(str::to_owned);
            if line.is_some() || !on || Instant::now() > deadline {
                break line;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        if !on {
            // Give a line that would come the same time to show.
            tokio::time::sleep(Duration::from_millis(300)).await;
            assert!(
                !p.logs().contains("gatehouse::access"),
                "switched off, yet: {}",
                p.logs()
            );
            continue;
        }
        let line = line.unwrap_or_else(|| panic!("no access line in {}", p.logs()));
        assert!(line.contains(" INFO "), "{line}");
        assert!(line.contains("method=GET"), "{line}");
        assert!(line.contains("path=/oauth/authorize"), "{line}");
        assert!(line.contains(&format!("status={status}")), "{line}");
        assert!(line.contains("ms="), "{line}");
        // No query: states, codes and tokens travel there.
        assert!(!p.logs().contains("secret-state-value"), "{}", p.logs());
        // One line for one request.
        let n = p
            .logs()
            .lines()
            .filter(|l| {
                l.contains("req_7b0c4e2a5d1f4c8e9a3b2f6d8e1c0a55")
                    && l.contains("gatehouse::access")
            })
            .count();
        assert_eq!(n, 1, "{}", p.logs());
    }
}

/// Issue 32: once serving, the start banner says where to go next (the
/// dashboard, the docs, the metrics) and, on a fresh install, gives the
/// command that makes the first admin. The command works as printed, and
/// once there is an admin the next start no longer suggests it.
#[tokio::test]
async fn the_start_banner_leads_to_the_dashboard_and_the_first_admin() {
    let dir = tempfile::tempdir().unwrap();
    let logs = tempfile::tempdir().unwrap();
    let mut p = ServeProcess::spawn(dir.path(), logs.path(), 1);
    p.ready(dir.path()).await;
    let stdout = |p: &ServeProcess| std::fs::read_to_string(&p.stdout).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !stdout(&p).contains("Gatehouse is serving") {
        assert!(Instant::now() < deadline, "no banner: {}", p.logs());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let banner = stdout(&p);
    for line in [
        format!("dashboard: {PUBLIC_URL}/dashboard"),
        format!("docs:      {PUBLIC_URL}/docs"),
        format!("metrics:   http://127.0.0.1:{}/metrics", p.admin),
    ] {
        assert!(banner.contains(&line), "{line:?} in {banner}");
    }
    let creds: serde_json::Value = serde_json::from_slice(
        &std::fs::read(dir.path().join("bootstrap-credentials.json")).unwrap(),
    )
    .unwrap();
    let org = creds["org"].as_str().unwrap();
    let command = banner
        .lines()
        .skip_while(|l| !l.starts_with("Nobody can sign in"))
        .nth(1)
        .unwrap_or_else(|| panic!("a first-admin hint in {banner}"))
        .trim()
        .to_owned();
    assert!(command.contains(&format!("--org {org}")), "{command}");
    // The command as printed, through a shell, the password on standard input.
    let mut sh = tokio::process::Command::new("sh");
    for (k, _) in std::env::vars() {
        if k.starts_with("GATEHOUSE_") {
            sh.env_remove(k);
        }
    }
    let mut child = sh
        .arg("-c")
        .arg(&command)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    {
        use tokio::io::AsyncWriteExt;
        let mut stdin = child.stdin.take().unwrap();
        stdin
            .write_all(b"the first admin's passphrase\n")
            .await
            .unwrap();
    }
    let out = child.wait_with_output().await.unwrap();
    assert!(out.status.success(), "{command}: {out:?}");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("you@example.com"),
        "{out:?}"
    );
    drop(p);
    let mut again = ServeProcess::spawn(dir.path(), logs.path(), 2);
    again.ready(dir.path()).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    while !stdout(&again).contains("Gatehouse is serving") {
        assert!(Instant::now() < deadline, "no banner: {}", again.logs());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The banner is written at once: nothing more comes after it.
    let banner = stdout(&again);
    assert!(banner.contains("dashboard: "), "{banner}");
    assert!(!banner.contains("Nobody can sign in"), "{banner}");
}
