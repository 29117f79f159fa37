//! `gatehouse mock` continued (D53, D34): `Prefer` on the OAuth endpoints in
//! RFC 6749's body shape, the mock client's loopback redirect URI, the
//! fixture users' password, plain-HTTP cookies, and the organization id
//! printed with the client.

use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::common::TestServer;
use crate::common::browser::{Browser, sign_in_for_code};

const ENDPOINTS: [&str; 3] = ["/oauth/token", "/oauth/revoke", "/oauth/introspect"];
const MOCK_PASSWORD: &str = "mock-password-1234";

/// A request the endpoint would otherwise answer with success.
fn form(endpoint: &str) -> Vec<(&'static str, &'static str)> {
    match endpoint {
        "/oauth/token" => vec![
            ("grant_type", "client_credentials"),
            ("scope", "users:read"),
        ],
        _ => vec![("token", "gk_live_unknown")],
    }
}

async fn ask(s: &TestServer, endpoint: &str, prefer: &str) -> reqwest::Response {
    s.request(Method::POST, endpoint)
        .basic_auth("mock_client", Some("mock_secret"))
        .header("Prefer", prefer)
        .form(&form(endpoint))
        .send()
        .await
        .unwrap()
}

/// An RFC 6749 §5.2 error (D21): `status`, `error`, `no-store`, only
/// `error` and `error_description` in the body; returns the headers.
async fn expect_oauth(
    res: reqwest::Response,
    status: StatusCode,
    error: &str,
    what: &str,
) -> (reqwest::header::HeaderMap, String) {
    assert_eq!(res.status(), status, "{what}");
    let h = res.headers().clone();
    assert_eq!(h["cache-control"], "no-store", "{what}");
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["error"], error, "{what}: {body}");
    let keys: Vec<&str> = body
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        ["error", "error_description"],
        "{what}: RFC 6749's shape, not the API envelope"
    );
    let d = body["error_description"].as_str().unwrap().to_owned();
    (h, d)
}

fn retry_after(h: &reqwest::header::HeaderMap, what: &str) -> u64 {
    h.get("retry-after")
        .unwrap_or_else(|| panic!("{what}: Retry-After"))
        .to_str()
        .unwrap()
        .parse()
        .unwrap()
}

#[tokio::test]
async fn d53_prefer_code_on_token_revoke_and_introspect() {
    let s = TestServer::start_mock().await;
    for endpoint in ENDPOINTS {
        for (code, status, error) in [
            (400, StatusCode::BAD_REQUEST, "invalid_grant"),
            (401, StatusCode::UNAUTHORIZED, "invalid_client"),
            (
                429,
                StatusCode::TOO_MANY_REQUESTS,
                "temporarily_unavailable",
            ),
            (500, StatusCode::INTERNAL_SERVER_ERROR, "server_error"),
            (
                503,
                StatusCode::SERVICE_UNAVAILABLE,
                "temporarily_unavailable",
            ),
        ] {
            let what = format!("{endpoint} Prefer: code={code}");
            let res = ask(&s, endpoint, &format!("code={code}")).await;
            let (h, _) = expect_oauth(res, status, error, &what).await;
            match code {
                401 => assert!(
                    h["www-authenticate"].to_str().unwrap().starts_with("Basic"),
                    "{what}: WWW-Authenticate Basic as the real one"
                ),
                429 | 503 => assert!(retry_after(&h, &what) >= 1, "{what}"),
                _ => assert!(!h.contains_key("retry-after"), "{what}"),
            }
            assert!(h.contains_key("x-request-id"), "{what}");
        }
        // Without the header the endpoint answers for real.
        let res = s
            .request(Method::POST, endpoint)
            .basic_auth("mock_client", Some("mock_secret"))
            .form(&form(endpoint))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), StatusCode::OK, "{endpoint}");
    }
}

#[tokio::test]
async fn d53_prefer_error_picks_another_d21_code() {
    let s = TestServer::start_mock().await;
    for endpoint in ENDPOINTS {
        for (prefer, status, error) in [
            (
                "code=400, error=invalid_scope",
                StatusCode::BAD_REQUEST,
                "invalid_scope",
            ),
            (
                "error=unsupported_grant_type",
                StatusCode::BAD_REQUEST,
                "unsupported_grant_type",
            ),
            (
                "code=400; error=unauthorized_client",
                StatusCode::BAD_REQUEST,
                "unauthorized_client",
            ),
            (
                "error=invalid_request",
                StatusCode::BAD_REQUEST,
                "invalid_request",
            ),
            (
                "error=invalid_client",
                StatusCode::UNAUTHORIZED,
                "invalid_client",
            ),
            (
                "error=temporarily_unavailable",
                StatusCode::SERVICE_UNAVAILABLE,
                "temporarily_unavailable",
            ),
            (
                "code=429, error=temporarily_unavailable",
                StatusCode::TOO_MANY_REQUESTS,
                "temporarily_unavailable",
            ),
            (
                "error=server_error",
                StatusCode::INTERNAL_SERVER_ERROR,
                "server_error",
            ),
            (
                "respond-async, code=400",
                StatusCode::BAD_REQUEST,
                "invalid_grant",
            ),
        ] {
            let what = format!("{endpoint} Prefer: {prefer}");
            expect_oauth(ask(&s, endpoint, prefer).await, status, error, &what).await;
        }
    }
}

#[tokio::test]
async fn d53_unknown_prefer_is_invalid_request_naming_the_header() {
    let s = TestServer::start_mock().await;
    for endpoint in ENDPOINTS {
        for prefer in [
            "code=404",
            "code=teapot",
            "error=nonsense",
            "error=access_denied",
            "code=401, error=invalid_grant",
            "code=500, error=temporarily_unavailable",
        ] {
            let what = format!("{endpoint} Prefer: {prefer}");
            let (_, d) = expect_oauth(
                ask(&s, endpoint, prefer).await,
                StatusCode::BAD_REQUEST,
                "invalid_request",
                &what,
            )
            .await;
            assert!(d.contains("Prefer"), "{what}: names the header: {d}");
        }
    }
}

#[tokio::test]
async fn d53_prefer_comes_after_client_authentication() {
    let s = TestServer::start_mock().await;
    for endpoint in ENDPOINTS {
        let what = format!("{endpoint} with a wrong secret");
        let res = s
            .request(Method::POST, endpoint)
            .basic_auth("mock_client", Some("wrong"))
            .header("Prefer", "code=500")
            .form(&form(endpoint))
            .send()
            .await
            .unwrap();
        expect_oauth(res, StatusCode::UNAUTHORIZED, "invalid_client", &what).await;
        // An unknown code is not even read before the credentials are.
        let res = s
            .request(Method::POST, endpoint)
            .header("Prefer", "code=404")
            .form(&form(endpoint))
            .send()
            .await
            .unwrap();
        expect_oauth(res, StatusCode::UNAUTHORIZED, "invalid_client", endpoint).await;
    }
    // D49: a public client cannot introspect, Prefer or not.
    let public = gatehouse_store::NewClient {
        id: gatehouse_domain::ClientId::generate(),
        name: "spa".into(),
        secret_hash: None,
        scopes: gatehouse_domain::ScopeSet::parse("profile:read").unwrap(),
        redirect_uris: vec!["http://127.0.0.1/cb".into()],
        admin_approved: false,
        owner: None,
        created_at: gatehouse_domain::Timestamp::now(),
        post_logout_redirect_uris: vec![],
    };
    s.store()
        .insert_client(&s.org(), &public, crate::common::operator())
        .await
        .unwrap();
    let res = s
        .request(Method::POST, "/oauth/introspect")
        .header("Prefer", "code=500")
        .form(&[("token", "x"), ("client_id", public.id.as_str())])
        .send()
        .await
        .unwrap();
    expect_oauth(
        res,
        StatusCode::UNAUTHORIZED,
        "invalid_client",
        "public client",
    )
    .await;
    // At the revocation endpoint a public client authenticates by its id
    // (D20), so the preference is answered.
    let res = s
        .request(Method::POST, "/oauth/revoke")
        .header("Prefer", "code=503")
        .form(&[("token", "x"), ("client_id", public.id.as_str())])
        .send()
        .await
        .unwrap();
    expect_oauth(
        res,
        StatusCode::SERVICE_UNAVAILABLE,
        "temporarily_unavailable",
        "public client at /oauth/revoke",
    )
    .await;
}

#[tokio::test]
async fn d53_production_ignores_prefer_on_oauth_endpoints() {
    let s = TestServer::start().await;
    for endpoint in ENDPOINTS {
        let fields = form(endpoint);
        let res = s
            .request(Method::POST, endpoint)
            .basic_auth(&s.creds.client_id, Some(&s.creds.client_secret))
            .header("Prefer", "code=500")
            .form(&fields)
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), StatusCode::OK, "{endpoint}");
    }
}

#[tokio::test]
async fn d53_fixture_user_signs_in_through_the_loopback_redirect_with_plain_http_cookies() {
    let s = TestServer::start_mock().await;
    // D20: the registered http://127.0.0.1/callback, at any port.
    let redirect = "http://127.0.0.1:54321/callback";
    let mut b = Browser::new(&s);
    let (code, verifier) = sign_in_for_code(
        &mut b,
        "mock_client",
        redirect,
        "users:read profile:read",
        "ada@example.com",
        MOCK_PASSWORD,
    )
    .await;
    let res = s
        .request(Method::POST, "/oauth/token")
        .basic_auth("mock_client", Some("mock_secret"))
        .form(&[
            ("grant_type", "authorization_code"),
            ("code", code.as_str()),
            ("redirect_uri", redirect),
            ("code_verifier", verifier.as_str()),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let pair: Value = res.json().await.unwrap();
    assert!(pair["refresh_token"].is_string(), "{pair}");
    // The token acts for Ada.
    let me: Value = s
        .request(Method::GET, "/v1/me")
        .bearer_auth(pair["access_token"].as_str().unwrap())
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(me["data"]["email"], "ada@example.com", "{me}");

    // D53: plain HTTP, so neither `Secure` nor the `__Host-` prefix.
    let names: Vec<&str> = b.jar.keys().map(String::as_str).collect();
    assert_eq!(names, ["gh_csrf", "gh_session"], "cookie names in the mock");
    for line in &b.seen {
        assert!(!line.contains("__Host-"), "no __Host- prefix: {line}");
        assert!(
            !line
                .split(';')
                .any(|a| a.trim().eq_ignore_ascii_case("secure")),
            "no Secure over plain HTTP: {line}"
        );
        assert!(
            line.contains("HttpOnly") && line.contains("SameSite=Lax"),
            "{line}"
        );
    }
}

#[tokio::test]
async fn d53_every_active_fixture_user_has_the_mock_password() {
    let s = TestServer::start_mock().await;
    // (alan@example.com has an authenticator app too: D56's test below.)
    for email in [
        "grace@example.com",
        "katherine@example.com",
        "edsger@example.com",
    ] {
        let mut b = Browser::new(&s);
        sign_in_for_code(
            &mut b,
            "mock_client",
            "http://127.0.0.1:9/callback",
            "profile:read",
            email,
            MOCK_PASSWORD,
        )
        .await;
    }
    // Another password is refused as anywhere (D26): the login page again.
    let mut b = Browser::new(&s);
    let challenge = gatehouse_auth::pkce::challenge_for(&"v".repeat(43));
    let login = b
        .authorize(&[
            ("response_type", "code"),
            ("client_id", "mock_client"),
            ("redirect_uri", "http://127.0.0.1/callback"),
            ("code_challenge", &challenge),
            ("code_challenge_method", "S256"),
        ])
        .await;
    let form = login.form_with("password").expect("a login form");
    let again = b
        .submit(
            &form,
            &[
                ("email", "ada@example.com"),
                ("password", "not-the-password"),
            ],
        )
        .await;
    assert!(again.form_with("password").is_some(), "{}", again.body);
    assert!(!b.jar.contains_key("gh_session"));
}

#[tokio::test]
async fn d53_production_cookies_keep_the_host_prefix_and_secure() {
    let s = TestServer::start().await;
    let mut b = Browser::new(&s);
    let challenge = gatehouse_auth::pkce::challenge_for(&"v".repeat(43));
    // The bootstrap client has no redirect URI: the page is an error page,
    // so use the loopback client of a fresh registration instead.
    let c = gatehouse_store::NewClient {
        id: gatehouse_domain::ClientId::generate(),
        name: "cookies".into(),
        secret_hash: None,
        scopes: gatehouse_domain::ScopeSet::parse("profile:read").unwrap(),
        redirect_uris: vec!["http://127.0.0.1/cb".into()],
        admin_approved: false,
        owner: None,
        created_at: gatehouse_domain::Timestamp::now(),
        post_logout_redirect_uris: vec![],
    };
    s.store()
        .insert_client(&s.org(), &c, crate::common::operator())
        .await
        .unwrap();
    let login = b
        .authorize(&[
            ("response_type", "code"),
            ("client_id", c.id.as_str()),
            ("redirect_uri", "http://127.0.0.1/cb"),
            ("code_challenge", &challenge),
            ("code_challenge_method", "S256"),
        ])
        .await;
    assert_eq!(login.status, StatusCode::OK, "{}", login.body);
    let csrf = b.seen.first().expect("a CSRF cookie");
    assert!(csrf.starts_with("__Host-gh_csrf="), "{csrf}");
    assert!(csrf.contains("; Secure"), "{csrf}");
}

/// D53 (continued): the mock serves D57's sessions like any other
/// endpoint — a fixture user's browser sign-in is listed to her and to an
/// admin — and `Prefer: code=` answers on them as production would, after
/// authentication and before the endpoint acts (a simulated error on a
/// `DELETE` ends nothing).
#[tokio::test]
async fn d53_the_mock_serves_sessions_and_prefer_on_them() {
    let s = TestServer::start_mock().await;
    let redirect = "http://127.0.0.1:54321/callback";
    let mut b = Browser::new(&s);
    let (code, verifier) = sign_in_for_code(
        &mut b,
        "mock_client",
        redirect,
        "profile:read profile:write",
        "ada@example.com",
        MOCK_PASSWORD,
    )
    .await;
    let res = s
        .request(Method::POST, "/oauth/token")
        .basic_auth("mock_client", Some("mock_secret"))
        .form(&[
            ("grant_type", "authorization_code"),
            ("code", code.as_str()),
            ("redirect_uri", redirect),
            ("code_verifier", verifier.as_str()),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let pair: Value = res.json().await.unwrap();
    let ada = pair["access_token"].as_str().unwrap().to_owned();
    let get = |token: &str, path: &str, prefer: Option<&str>| {
        let mut rb = s.request(Method::GET, path).bearer_auth(token);
        if let Some(p) = prefer {
            rb = rb.header("Prefer", p);
        }
        rb.send()
    };
    let ok = |res: reqwest::Response| async move {
        let status = res.status();
        let body: Value = res.json().await.unwrap();
        assert_eq!(status, StatusCode::OK, "{body}");
        body
    };

    // Ada's own list: the one session, hers, as production shows it.
    let mine = ok(get(&ada, "/v1/me/sessions", None).await.unwrap()).await;
    assert_eq!(mine["meta"]["total"], 1, "{mine}");
    let session = &mine["data"][0];
    let id = session["id"].as_str().unwrap().to_owned();
    assert!(id.starts_with("ses_"), "{session}");
    assert_eq!(session["current"], json!(true));
    assert_eq!(session["amr"], json!(["pwd"]));
    assert_eq!(session["applications"], json!(["mock_client"]));
    let me = ok(get(&ada, "/v1/me", None).await.unwrap()).await;
    let ada_id = me["data"]["id"].as_str().unwrap().to_owned();

    // The admin's list (the mock client holds every scope).
    let admin = s.token("users:write").await;
    let admin_path = format!("/v1/users/{ada_id}/sessions");
    let theirs = ok(get(&admin, &admin_path, None).await.unwrap()).await;
    assert_eq!(theirs["meta"]["total"], 1, "{theirs}");
    assert_eq!(theirs["data"][0]["id"], json!(id));
    assert_eq!(theirs["data"][0]["current"], json!(false));

    // Prefer: code= on the six routes, each with the route's own scope.
    let one = format!("/v1/me/sessions/{id}");
    let admin_one = format!("{admin_path}/{id}");
    let routes: [(Method, &str, &str, &str); 6] = [
        (Method::GET, "/v1/me/sessions", &ada, "profile:read"),
        (Method::DELETE, &one, &ada, "profile:write"),
        (
            Method::POST,
            "/v1/me/sessions/revoke-others",
            &ada,
            "profile:write",
        ),
        (Method::GET, &admin_path, &admin, "users:write"),
        (Method::DELETE, &admin_path, &admin, "users:write"),
        (Method::DELETE, &admin_one, &admin, "users:write"),
    ];
    for (method, path, token, scope) in routes {
        for (prefer, status, code) in [
            (
                "code=500",
                StatusCode::INTERNAL_SERVER_ERROR,
                "INTERNAL_ERROR",
            ),
            (
                "respond-async, code=503",
                StatusCode::SERVICE_UNAVAILABLE,
                "SERVICE_UNAVAILABLE",
            ),
            (
                "code=429",
                StatusCode::TOO_MANY_REQUESTS,
                "RATE_LIMIT_EXCEEDED",
            ),
            ("code=404", StatusCode::NOT_FOUND, "RESOURCE_NOT_FOUND"),
            ("code=403", StatusCode::FORBIDDEN, "INSUFFICIENT_SCOPE"),
        ] {
            let what = format!("{method} {path} Prefer: {prefer}");
            let res = s
                .request(method.clone(), path)
                .bearer_auth(token)
                .header("Prefer", prefer)
                .send()
                .await
                .unwrap();
            assert_eq!(res.status(), status, "{what}");
            let h = res.headers().clone();
            assert!(h.contains_key("x-request-id"), "{what}");
            assert!(h.contains_key("x-ratelimit-limit"), "{what}");
            match status {
                StatusCode::TOO_MANY_REQUESTS | StatusCode::SERVICE_UNAVAILABLE => {
                    assert!(retry_after(&h, &what) >= 1, "{what}")
                }
                StatusCode::FORBIDDEN => assert_eq!(
                    h["www-authenticate"],
                    format!("Bearer error=\"insufficient_scope\", scope=\"{scope}\"").as_str(),
                    "{what}: names the route's scope"
                ),
                _ => {}
            }
            let body: Value = res.json().await.unwrap();
            assert_eq!(body["error"]["code"], json!(code), "{what}: {body}");
        }
        // Authentication still comes first.
        let res = s
            .request(method.clone(), path)
            .header("Prefer", "code=500")
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), StatusCode::UNAUTHORIZED, "{method} {path}");
    }
    // No simulated error acted: the session is still there, and Ada's
    // token still works.
    let still = ok(get(&admin, &admin_path, None).await.unwrap()).await;
    assert_eq!(still["meta"]["total"], 1, "{still}");
    assert_eq!(still["data"][0]["id"], json!(id));
    ok(get(&ada, "/v1/me/sessions", None).await.unwrap()).await;

    // Without the header the mock ends it for real.
    let res = s
        .request(Method::DELETE, &admin_one)
        .bearer_auth(&admin)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::NO_CONTENT);
    let gone = ok(get(&admin, &admin_path, None).await.unwrap()).await;
    assert_eq!(gone["meta"]["total"], 0, "{gone}");
    let res = get(&ada, "/v1/me/sessions", None).await.unwrap();
    assert_eq!(
        res.status(),
        StatusCode::UNAUTHORIZED,
        "Ada's token went too"
    );
}

/// `gatehouse mock` prints the organization id with the client (D53), in
/// `--json` and in its text.
#[tokio::test]
async fn d53_gatehouse_mock_prints_the_organization_id() {
    use tokio::io::AsyncBufReadExt;
    let spawn = |json: bool| {
        let mut c = tokio::process::Command::new(env!("CARGO_BIN_EXE_gatehouse"));
        c.args(["mock", "--addr", "127.0.0.1:0"]);
        if json {
            c.arg("--json");
        }
        c.env("GATEHOUSE_LOG", "warn")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap()
    };
    let mut child = spawn(true);
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let line = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
        .await
        .expect("the mock starts within 30 s")
        .unwrap()
        .expect("a line on stdout");
    let info: Value = serde_json::from_str(&line).unwrap();
    let org = info["org"].as_str().expect("D53: org in --json").to_owned();
    assert!(org.starts_with("org_"), "{org}");
    assert_eq!(info["client_id"], json!("mock_client"));
    assert_eq!(info["redirect_uri"], json!("http://127.0.0.1/callback"));
    assert_eq!(info["password"], json!(MOCK_PASSWORD));
    // D56 (D53 continued): the fixture user with a known TOTP secret.
    assert_eq!(info["totp_user"], json!("alan@example.com"));
    assert_eq!(info["totp_secret"].as_str().map(str::len), Some(32));
    // The printed id is the organization the client's tokens belong to.
    let url = info["url"].as_str().unwrap();
    let http = reqwest::Client::new();
    let res = http
        .post(format!("{url}/oauth/token"))
        .basic_auth("mock_client", Some("mock_secret"))
        .form(&[
            ("grant_type", "client_credentials"),
            ("scope", "users:read"),
        ])
        .send()
        .await
        .unwrap();
    let tok: Value = res.json().await.unwrap();
    let res = http
        .post(format!("{url}/oauth/introspect"))
        .basic_auth("mock_client", Some("mock_secret"))
        .form(&[("token", tok["access_token"].as_str().unwrap())])
        .send()
        .await
        .unwrap();
    let v: Value = res.json().await.unwrap();
    assert_eq!(v["org"], json!(org), "{v}");
    child.kill().await.unwrap();

    let mut child = spawn(false);
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let mut text = String::new();
    while !text.contains("client_secret") {
        let line = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
            .await
            .expect("the mock prints within 30 s")
            .unwrap()
            .expect("more output");
        text.push_str(&line);
        text.push('\n');
    }
    let printed = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("org:"))
        .unwrap_or_else(|| panic!("D53: an org line: {text}"))
        .trim();
    assert!(printed.starts_with("org_"), "{text}");
    assert!(text.contains("client_id:     mock_client"), "{text}");
    child.kill().await.unwrap();
}

/// Started again on its data, the mock finds its organization instead of
/// creating one (D53's printed id stays the same).
#[tokio::test]
async fn d53_a_restarted_mock_keeps_its_organization() {
    let s = TestServer::start_mock().await;
    let org = s.creds.org.clone();
    let s = s.restart().await;
    assert_eq!(s.creds.org, org);
    assert_eq!(
        s.running.as_ref().unwrap().bootstrap.as_ref().unwrap().org,
        org
    );
}

/// D56 (D53 continued): one fixture user has an authenticator app with the
/// secret the mock prints, so a client can test the second step; the mock
/// serves `/v1/me/mfa` and `/v1/organization/security`.
#[tokio::test]
async fn d56_the_mock_fixture_user_asks_for_a_code_of_the_printed_secret() {
    const SECRET: &str = "GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ";
    let s = TestServer::start_mock().await;
    let mut b = Browser::new(&s);
    let verifier = "v".repeat(43);
    let challenge = gatehouse_auth::pkce::challenge_for(&verifier);
    let login = b
        .authorize(&[
            ("response_type", "code"),
            ("client_id", "mock_client"),
            ("redirect_uri", "http://127.0.0.1:9/callback"),
            ("scope", "profile:read"),
            ("code_challenge", &challenge),
            ("code_challenge_method", "S256"),
        ])
        .await;
    let form = login.form_with("password").expect("a login form");
    let step = b
        .submit(
            &form,
            &[("email", "alan@example.com"), ("password", MOCK_PASSWORD)],
        )
        .await;
    assert!(
        step.body.contains("Enter your sign-in code"),
        "{}",
        step.body
    );
    let t = crate::mfa::server_time(&s).await;
    let form = step.form_with("code").expect("the code form");
    let consent = b
        .submit(&form, &[("code", &crate::mfa::totp_at(SECRET, t))])
        .await;
    let form = consent
        .form_with("decision")
        .unwrap_or_else(|| panic!("consent: {}", consent.body));
    let back = b.submit(&form, &[("decision", "allow")]).await;
    let location = back.location().unwrap();
    let code = reqwest::Url::parse(&location)
        .unwrap()
        .query_pairs()
        .find(|(k, _)| k == "code")
        .map(|(_, v)| v.into_owned())
        .unwrap();
    let res = s
        .request(reqwest::Method::POST, "/oauth/token")
        .basic_auth("mock_client", Some("mock_secret"))
        .form(&[
            ("grant_type", "authorization_code"),
            ("code", code.as_str()),
            ("redirect_uri", "http://127.0.0.1:9/callback"),
            ("code_verifier", verifier.as_str()),
        ])
        .send()
        .await
        .unwrap();
    let pair: Value = res.json().await.unwrap();
    let token = pair["access_token"].as_str().unwrap();
    let mine: Value = s
        .call(reqwest::Method::GET, "/v1/me/mfa", token, None)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(mine["data"][0]["type"], "totp", "{mine}");
    let policy: Value = s
        .call(
            reqwest::Method::GET,
            "/v1/organization/security",
            token,
            None,
        )
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(policy["data"]["mfa"], "optional", "{policy}");
}

/// D53 (continued), D56: the mock offers passkeys only when it is reached
/// as `localhost` (its relying party, where WebAuthn allows plain HTTP);
/// at its IP address the sign-in page has the password form alone.
#[tokio::test]
async fn d56_the_mock_offers_passkeys_only_as_localhost() {
    let s = TestServer::start_mock().await;
    let authorize = "/oauth/authorize?response_type=code&client_id=mock_client&redirect_uri=http%3A%2F%2F127.0.0.1%3A5000%2Fcallback&scope=profile%3Aread&state=s&code_challenge=E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM&code_challenge_method=S256";
    let at_ip = s.request(Method::GET, authorize).send().await.unwrap();
    assert_eq!(at_ip.status(), StatusCode::OK);
    let page = at_ip.text().await.unwrap();
    assert!(page.contains("id=\"password\""), "{page}");
    assert!(
        !page.contains("data-passkey"),
        "no passkey at an IP address"
    );

    let url = url::Url::parse(&s.url("/")).unwrap();
    let addr = std::net::SocketAddr::new(
        url.host_str().unwrap().parse().unwrap(),
        url.port().unwrap(),
    );
    let local = reqwest::Client::builder()
        .resolve("localhost", addr)
        .build()
        .unwrap();
    let page = local
        .get(format!("http://localhost:{}{authorize}", addr.port()))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(page.contains("Sign in with a passkey"), "{page}");
    assert!(
        page.contains("&quot;rpId&quot;:&quot;localhost&quot;"),
        "the relying party is localhost: {page}"
    );
}

/// D53 (continued): the mock's audit log is chained like the server's (each
/// `hash` over the one before and the entry's canonical form), without
/// checkpoints; `Prefer` works on it as on the other operations.
#[tokio::test]
async fn d53_the_mock_serves_a_chained_audit_log_without_checkpoints() {
    let s = TestServer::start_mock().await;
    let t = s
        .token_for("mock_client", "mock_secret", "products:write audit:read")
        .await;
    for sku in ["MOCK-A", "MOCK-B"] {
        let res = s
            .call(
                Method::POST,
                "/v1/products",
                &t,
                Some(json!({"name": sku, "sku": sku, "price": 100, "stock": 1})),
            )
            .await;
        assert_eq!(res.status(), StatusCode::CREATED);
    }
    let chain: Value =
        crate::audit::audit_once(&s, &t, "?category=admin&after_sequence=0&limit=100", 2).await;
    let entries = chain["data"].as_array().unwrap();
    assert!(entries.len() >= 2, "{chain}");
    let mut prev = gatehouse_domain::audit::GENESIS.to_owned();
    for (i, e) in entries.iter().enumerate() {
        assert_eq!(e["sequence"], json!(i + 1));
        let mut body = e.clone();
        let hash = body.as_object_mut().unwrap().remove("hash").unwrap();
        assert_eq!(
            json!(gatehouse_auth::audit::chain_hash(&prev, &body).unwrap()),
            hash,
            "entry {}",
            i + 1
        );
        prev = hash.as_str().unwrap().to_owned();
    }
    // No checkpoint, even after the sealer's rounds.
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let res = s
        .call(Method::GET, "/v1/audit-logs/checkpoints", &t, None)
        .await;
    let listed: Value = res.json().await.unwrap();
    assert_eq!(listed["meta"]["total"], 0, "{listed}");
    let keys: Value = s
        .request(Method::GET, "/.well-known/audit-keys.json")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(keys["keys"], json!([]));
    let res = s
        .request(Method::GET, "/v1/audit-logs")
        .bearer_auth(&t)
        .header("Prefer", "code=429")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::TOO_MANY_REQUESTS);
}
