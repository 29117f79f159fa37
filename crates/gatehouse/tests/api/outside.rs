//! Issue 24, "the smaller holes found from outside": each test drives the
//! real server over HTTPS as an outside client would — a browser with its
//! cookie jar, a relying party, an API client — on both backends.
//!
//! - Logout (D49 revised): only a hint that names this very session ends
//!   it without asking; a hint and `client_id` must agree; with a session,
//!   only its organization's clients are followed.
//! - Repeated parameters (D45 continued) at `/oauth/authorize`,
//!   `/oauth/logout` and the sign-in pages.
//! - Replays of answers that carry a secret are `no-store` (D50 continued).
//! - No HSTS for a loopback `public_url` (D31 revised).
//! - Discovery offers no JWT client authentication (D49 continued).

use reqwest::header::{CACHE_CONTROL, PRAGMA};
use reqwest::{Method, Response, StatusCode, Url};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::common::browser::{Browser, Page};
use crate::common::oidc::{
    REDIRECT, Rp, claims, expect_confirmation, id_token, location_param, logout, person,
    refresh_status, rp, session_works, sign_in,
};
use crate::common::{PUBLIC_URL, TestServer, raw_tls};

const LOGOUT_TO: &str = "https://rp.example.com/signed-out";
const OTHER_LOGOUT_TO: &str = "https://other-rp.example.com/bye";

/// A redirect (303) to `to` with `state` (when given) after the logout.
#[track_caller]
fn expect_redirect_to(page: &Page, to: &str, state: Option<&str>) {
    assert_eq!(page.status, StatusCode::SEE_OTHER, "{}", page.body);
    let want = match state {
        Some(s) => format!("{to}?state={s}"),
        None => to.to_owned(),
    };
    assert_eq!(page.location().as_deref(), Some(want.as_str()));
}

/// An error page: 400, HTML, never a redirect.
#[track_caller]
fn expect_error_page(page: &Page) {
    assert_eq!(page.status, StatusCode::BAD_REQUEST, "{}", page.body);
    assert!(page.location().is_none(), "{:?}", page.location());
    assert!(
        page.headers["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/html"),
        "{:?}",
        page.headers
    );
}

// ---------------------------------------------------------------------------
// Item 3: logout (D49 revised)
// ---------------------------------------------------------------------------

#[tokio::test]
async fn d49_revised_a_colleagues_id_token_asks_first_and_ends_nothing_until_confirmed() {
    let s = TestServer::start().await;
    let app = rp(&s, &s.org(), LOGOUT_TO).await;
    person(&s, &s.org(), "alice@example.com").await;
    person(&s, &s.org(), "bob@example.com").await;
    let mut alice = Browser::new(&s);
    let alices = sign_in(&mut alice, &s, &app, "alice@example.com").await;
    let mut bob = Browser::new(&s);
    let bobs = sign_in(&mut bob, &s, &app, "bob@example.com").await;

    // Bob's ID token in Alice's browser: a page that asks, nothing ends.
    let page = logout(
        &mut alice,
        &s,
        &[
            ("id_token_hint", id_token(&bobs)),
            ("post_logout_redirect_uri", LOGOUT_TO),
            ("state", "s1"),
        ],
    )
    .await;
    let form = expect_confirmation(&page);
    assert!(
        session_works(&mut alice, &app).await,
        "D49 revised: a colleague's ID token signs nobody out without asking"
    );
    assert!(session_works(&mut bob, &app).await);

    // Confirmed: Alice's session ends, and the hint's client's registered
    // URI is followed.
    let page = alice.submit(&form, &[]).await;
    expect_redirect_to(&page, LOGOUT_TO, Some("s1"));
    assert!(!session_works(&mut alice, &app).await);
    assert_eq!(
        refresh_status(&s, &app, &alices).await,
        StatusCode::BAD_REQUEST,
        "the chains begun in the session are revoked"
    );
    assert!(session_works(&mut bob, &app).await, "Bob was never asked");
    assert_eq!(refresh_status(&s, &app, &bobs).await, StatusCode::OK);
}

#[tokio::test]
async fn d49_revised_an_earlier_sessions_id_token_asks_first_and_ones_own_ends_at_once() {
    let s = TestServer::start().await;
    let app = rp(&s, &s.org(), LOGOUT_TO).await;
    person(&s, &s.org(), "carol@example.com").await;
    let mut b = Browser::new(&s);
    let earlier = sign_in(&mut b, &s, &app, "carol@example.com").await;
    // Signing in again (prompt=login) starts another session.
    let current = sign_in(&mut b, &s, &app, "carol@example.com").await;
    let (old_sid, sid) = (
        claims(id_token(&earlier))["sid"].clone(),
        claims(id_token(&current))["sid"].clone(),
    );
    assert!(sid.is_string() && old_sid != sid, "{old_sid} {sid}");

    let page = logout(
        &mut b,
        &s,
        &[
            ("id_token_hint", id_token(&earlier)),
            ("post_logout_redirect_uri", LOGOUT_TO),
        ],
    )
    .await;
    expect_confirmation(&page);
    assert!(
        session_works(&mut b, &app).await,
        "D49 revised: an earlier session's hint does not end this one"
    );

    // The hint of this very session (its sub and sid): at once.
    let page = logout(
        &mut b,
        &s,
        &[
            ("id_token_hint", id_token(&current)),
            ("post_logout_redirect_uri", LOGOUT_TO),
            ("state", "bye"),
        ],
    )
    .await;
    expect_redirect_to(&page, LOGOUT_TO, Some("bye"));
    assert!(!session_works(&mut b, &app).await);
    assert_eq!(
        refresh_status(&s, &app, &current).await,
        StatusCode::BAD_REQUEST
    );
}

#[tokio::test]
async fn d49_revised_a_hint_and_a_client_id_that_disagree_get_an_error_page() {
    let s = TestServer::start().await;
    let app = rp(&s, &s.org(), LOGOUT_TO).await;
    let other = rp(&s, &s.org(), OTHER_LOGOUT_TO).await;
    person(&s, &s.org(), "dave@example.com").await;
    let mut b = Browser::new(&s);
    let pair = sign_in(&mut b, &s, &app, "dave@example.com").await;

    let params = [
        ("id_token_hint", id_token(&pair)),
        ("client_id", other.id.as_str()),
        ("post_logout_redirect_uri", OTHER_LOGOUT_TO),
    ];
    // With the session: refused, no redirect, the session lives on.
    let page = logout(&mut b, &s, &params).await;
    expect_error_page(&page);
    assert!(session_works(&mut b, &app).await);
    // Without a session, the same.
    let mut stranger = Browser::new(&s);
    expect_error_page(&logout(&mut stranger, &s, &params).await);
    // Agreeing, they are followed.
    let page = logout(
        &mut b,
        &s,
        &[
            ("id_token_hint", id_token(&pair)),
            ("client_id", app.id.as_str()),
            ("post_logout_redirect_uri", LOGOUT_TO),
        ],
    )
    .await;
    expect_redirect_to(&page, LOGOUT_TO, None);
}

#[tokio::test]
async fn d49_revised_another_organizations_client_is_never_followed_with_a_session() {
    let s = TestServer::start().await;
    let app = rp(&s, &s.org(), LOGOUT_TO).await;
    let elsewhere = s.new_org(gatehouse_domain::Plan::Free).await;
    let foreign = rp(&s, &elsewhere, OTHER_LOGOUT_TO).await;
    person(&s, &s.org(), "erin@example.com").await;
    person(&s, &elsewhere, "frank@example.com").await;
    let mut b = Browser::new(&s);
    let pair = sign_in(&mut b, &s, &app, "erin@example.com").await;

    // Another organization's client_id: asked, and once confirmed signed
    // out on a page of ours, never sent to its URI.
    let page = logout(
        &mut b,
        &s,
        &[
            ("client_id", foreign.id.as_str()),
            ("post_logout_redirect_uri", OTHER_LOGOUT_TO),
            ("state", "x"),
        ],
    )
    .await;
    let form = expect_confirmation(&page);
    let page = b.submit(&form, &[]).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    assert!(
        page.location().is_none(),
        "D49 revised: not another organization's URI: {:?}",
        page.location()
    );
    assert!(!session_works(&mut b, &app).await);
    assert_eq!(
        refresh_status(&s, &app, &pair).await,
        StatusCode::BAD_REQUEST
    );

    // Another organization's person's ID token in this session: no hint.
    let mut other = Browser::new(&s);
    let franks = sign_in(&mut other, &s, &foreign, "frank@example.com").await;
    let _ = sign_in(&mut b, &s, &app, "erin@example.com").await;
    let page = logout(
        &mut b,
        &s,
        &[
            ("id_token_hint", id_token(&franks)),
            ("post_logout_redirect_uri", OTHER_LOGOUT_TO),
        ],
    )
    .await;
    let form = expect_confirmation(&page);
    assert!(session_works(&mut b, &app).await);
    assert!(b.submit(&form, &[]).await.location().is_none());

    // Without a session: a valid hint's client is followed at once, a
    // client_id alone after the confirmation page.
    let mut fresh = Browser::new(&s);
    let page = logout(
        &mut fresh,
        &s,
        &[
            ("id_token_hint", id_token(&franks)),
            ("post_logout_redirect_uri", OTHER_LOGOUT_TO),
        ],
    )
    .await;
    expect_redirect_to(&page, OTHER_LOGOUT_TO, None);
    assert!(session_works(&mut other, &foreign).await, "ended nothing");
    let page = logout(
        &mut fresh,
        &s,
        &[
            ("client_id", foreign.id.as_str()),
            ("post_logout_redirect_uri", OTHER_LOGOUT_TO),
        ],
    )
    .await;
    let form = expect_confirmation(&page);
    expect_redirect_to(&fresh.submit(&form, &[]).await, OTHER_LOGOUT_TO, None);
}

// ---------------------------------------------------------------------------
// Item 4: repeated parameters (D45 continued)
// ---------------------------------------------------------------------------

/// A valid authorization request of `app` (PKCE S256, state `st`).
fn authorize_params(app: &Rp) -> Vec<(&str, String)> {
    let challenge = gatehouse_auth::pkce::challenge_for(&gatehouse_domain::random::base62(256));
    vec![
        ("response_type", "code".to_owned()),
        ("client_id", app.id.clone()),
        ("redirect_uri", REDIRECT.to_owned()),
        ("scope", "openid".to_owned()),
        ("state", "st".to_owned()),
        ("code_challenge", challenge),
        ("code_challenge_method", "S256".to_owned()),
    ]
}

/// The request with `name` sent a second time, with `value`.
fn with_twice<'a>(
    params: &[(&'a str, String)],
    name: &'a str,
    value: &str,
) -> Vec<(&'a str, String)> {
    let mut p = params.to_vec();
    p.push((name, value.to_owned()));
    p
}

/// `/oauth/authorize` by GET (query) or POST (form), in a fresh browser.
async fn authorize(s: &TestServer, by_post: bool, params: &[(&str, String)]) -> Page {
    let mut b = Browser::new(s);
    if by_post {
        let fields: Vec<(&str, &str)> = params.iter().map(|(k, v)| (*k, v.as_str())).collect();
        b.post("/oauth/authorize", &fields).await
    } else {
        let mut u = Url::parse(&s.url("/oauth/authorize")).unwrap();
        u.query_pairs_mut().extend_pairs(params);
        b.get(u.as_str()).await
    }
}

#[tokio::test]
async fn d45_continued_authorize_answers_a_repeated_client_id_or_redirect_uri_with_the_error_page()
{
    let s = TestServer::start().await;
    let app = rp(&s, &s.org(), LOGOUT_TO).await;
    let ok = authorize_params(&app);
    for by_post in [false, true] {
        // The request as it is: the sign-in page.
        let page = authorize(&s, by_post, &ok).await;
        assert_eq!(page.status, StatusCode::OK, "{}", page.body);
        assert!(page.form_with("password").is_some());
        // Sent twice, even with the same value, never a redirect.
        for (name, value) in [
            ("client_id", app.id.as_str()),
            ("redirect_uri", REDIRECT),
            ("redirect_uri", "https://evil.example/cb"),
        ] {
            let page = authorize(&s, by_post, &with_twice(&ok, name, value)).await;
            expect_error_page(&page);
            assert!(page.body.contains(name), "names {name}: {}", page.body);
        }
    }
}

#[tokio::test]
async fn d45_continued_authorize_sends_any_other_repeated_parameter_back_as_invalid_request() {
    let s = TestServer::start().await;
    let app = rp(&s, &s.org(), LOGOUT_TO).await;
    let ok = authorize_params(&app);
    for by_post in [false, true] {
        for (name, value) in [
            ("scope", "openid profile:read"),
            ("response_type", "code"),
            ("code_challenge_method", "S256"),
            ("nonce", "n"),
            ("prompt", "login"),
            ("unknown_extension", "1"),
            ("state", "st"),
        ] {
            // Twice with the same value: still ambiguous.
            let mut params = ok.clone();
            params.retain(|(k, _)| *k != name);
            params.extend([(name, value.to_owned()), (name, value.to_owned())]);
            let page = authorize(&s, by_post, &params).await;
            assert_eq!(
                page.status,
                StatusCode::SEE_OTHER,
                "{name} twice (post: {by_post}): {}",
                page.body
            );
            assert!(page.location().unwrap().starts_with(REDIRECT));
            assert_eq!(
                location_param(&page, "error").as_deref(),
                Some("invalid_request"),
                "{name} twice (post: {by_post})"
            );
            assert!(
                location_param(&page, "error_description").is_some_and(|d| d.contains(name)),
                "{:?}",
                page.location()
            );
            assert_eq!(location_param(&page, "iss").as_deref(), Some(PUBLIC_URL));
            assert!(location_param(&page, "code").is_none());
            let state = location_param(&page, "state");
            if name == "state" {
                assert_eq!(state, None, "a repeated state is not sent back");
            } else {
                assert_eq!(state.as_deref(), Some("st"), "{name}");
            }
        }
    }
}

#[tokio::test]
async fn d45_continued_logout_refuses_a_repeated_parameter_and_ends_nothing() {
    let s = TestServer::start().await;
    let app = rp(&s, &s.org(), LOGOUT_TO).await;
    person(&s, &s.org(), "gina@example.com").await;
    let mut b = Browser::new(&s);
    let pair = sign_in(&mut b, &s, &app, "gina@example.com").await;
    let hint = id_token(&pair);
    for (name, value) in [
        ("post_logout_redirect_uri", LOGOUT_TO),
        ("id_token_hint", hint),
        ("state", "a"),
    ] {
        let mut params = vec![
            ("id_token_hint", hint),
            ("post_logout_redirect_uri", LOGOUT_TO),
            ("state", "a"),
        ];
        params.push((name, value));
        let page = logout(&mut b, &s, &params).await;
        expect_error_page(&page);
        assert!(
            session_works(&mut b, &app).await,
            "{name} twice ends nothing"
        );
        // The same by POST.
        let page = b.post("/oauth/logout", &params).await;
        expect_error_page(&page);
        assert!(session_works(&mut b, &app).await);
    }
    // Once each: this session's hint ends it at once.
    let page = logout(
        &mut b,
        &s,
        &[
            ("id_token_hint", hint),
            ("post_logout_redirect_uri", LOGOUT_TO),
        ],
    )
    .await;
    expect_redirect_to(&page, LOGOUT_TO, None);
}

#[tokio::test]
async fn d45_continued_sign_in_pages_refuse_a_repeated_parameter() {
    let s = TestServer::start().await;
    let app = rp(&s, &s.org(), LOGOUT_TO).await;
    person(&s, &s.org(), "hana@example.com").await;
    let id = app.id.as_str();

    // The forgotten-password page by GET, and its form.
    let mut b = Browser::new(&s);
    let page = b
        .get(&format!("/password/forgot?client_id={id}&return_to=/docs"))
        .await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    let forgot = page.form_with("email").expect("the forgot form");
    let page = b
        .get(&format!("/password/forgot?client_id={id}&client_id={id}"))
        .await;
    expect_error_page(&page);
    assert!(page.form_with("email").is_none());
    let page = b
        .submit(
            &forgot,
            &[("email", "hana@example.com"), ("email", "x@example.com")],
        )
        .await;
    expect_error_page(&page);

    // The login form: a repeated e-mail signs nobody in.
    let ok = authorize_params(&app);
    let mut b = Browser::new(&s);
    let mut u = Url::parse(&s.url("/oauth/authorize")).unwrap();
    u.query_pairs_mut().extend_pairs(&ok);
    let login = b.get(u.as_str()).await;
    let form = login.form_with("password").expect("a login form");
    let page = b
        .submit(
            &form,
            &[
                ("email", "hana@example.com"),
                ("email", "hana@example.com"),
                ("password", crate::common::oidc::PASSWORD),
            ],
        )
        .await;
    expect_error_page(&page);
    assert!(!session_works(&mut b, &app).await, "nobody signed in");

    // The consent form: a repeated decision is no decision.
    let consent = b
        .submit(
            &form,
            &[
                ("email", "hana@example.com"),
                ("password", crate::common::oidc::PASSWORD),
            ],
        )
        .await;
    let form = consent.form_with("decision").expect("a consent page");
    let page = b
        .submit(&form, &[("decision", "allow"), ("decision", "allow")])
        .await;
    expect_error_page(&page);
    assert!(page.location().is_none());
}

// ---------------------------------------------------------------------------
// Item 5: secrets in replays (D50 continued)
// ---------------------------------------------------------------------------

/// A POST with an `Idempotency-Key`.
async fn post_once(s: &TestServer, path: &str, token: &str, key: &str, body: &Value) -> Response {
    s.request(Method::POST, path)
        .bearer_auth(token)
        .header("Idempotency-Key", key)
        .json(body)
        .send()
        .await
        .unwrap()
}

/// The answer's status, `no-store` headers, replay marker and body.
async fn secret_answer(res: Response, what: &str) -> (StatusCode, Option<String>, Value) {
    let status = res.status();
    let h = |n| {
        res.headers()
            .get(n)
            .map(|v: &reqwest::header::HeaderValue| v.to_str().unwrap().to_owned())
    };
    assert_eq!(
        h(CACHE_CONTROL).as_deref(),
        Some("no-store"),
        "D46, D50 continued: the {what} ({status}) of {}",
        res.url().path()
    );
    assert_eq!(h(PRAGMA).as_deref(), Some("no-cache"), "the {what}");
    let replayed = h(reqwest::header::HeaderName::from_static(
        "idempotent-replayed",
    ));
    (status, replayed, res.json().await.unwrap())
}

/// Sends `body` twice with one key: the original and its replay, both
/// `no-store`, the replay a replay of the same answer.
async fn original_and_replay(
    s: &TestServer,
    path: &str,
    token: &str,
    key: &str,
    body: Value,
) -> Value {
    let (status, replayed, first) =
        secret_answer(post_once(s, path, token, key, &body).await, "original").await;
    assert_eq!(status, StatusCode::CREATED, "{first}");
    assert_eq!(replayed, None);
    let (status, replayed, again) =
        secret_answer(post_once(s, path, token, key, &body).await, "replay").await;
    assert_eq!(status, StatusCode::CREATED);
    assert_eq!(replayed.as_deref(), Some("true"), "a replay");
    assert_eq!(again["data"], first["data"], "the original's answer");
    first
}

#[tokio::test]
async fn d50_continued_replays_of_answers_with_a_secret_are_no_store_like_the_original() {
    let s = TestServer::start().await;
    let t = s
        .token("applications:read applications:write users:read")
        .await;

    let key = original_and_replay(
        &s,
        "/v1/api-keys",
        &t,
        "key-1",
        json!({"name": "ci", "scopes": ["users:read"]}),
    )
    .await;
    assert!(key["data"]["key"].as_str().is_some(), "{key}");

    let app = original_and_replay(
        &s,
        "/v1/applications",
        &t,
        "app-1",
        json!({"name": "Backend", "type": "confidential",
               "redirect_uris": [REDIRECT], "scopes": ["users:read"]}),
    )
    .await;
    assert!(app["data"]["client_secret"].as_str().is_some(), "{app}");

    let id = app["data"]["id"].as_str().unwrap();
    let rotated = original_and_replay(
        &s,
        &format!("/v1/applications/{id}/secret"),
        &t,
        "rotate-1",
        json!({}),
    )
    .await;
    assert_ne!(
        rotated["data"]["client_secret"],
        app["data"]["client_secret"]
    );
}

// ---------------------------------------------------------------------------
// Item 7b: HSTS (D31 revised)
// ---------------------------------------------------------------------------

/// The `Strict-Transport-Security` of `s`'s answers: one from the
/// middleware (a 404 envelope) and one from the transport's envelope for
/// hyper's own errors (a 100 KB request target, 414).
async fn hsts_of(s: &TestServer) -> (Option<String>, Option<String>) {
    let res = s
        .request(Method::GET, "/no-such-page")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::NOT_FOUND);
    let routed = res
        .headers()
        .get("strict-transport-security")
        .map(|v| v.to_str().unwrap().to_owned());

    let running = s.running.as_ref().unwrap();
    let mut c = raw_tls(
        running.https_addr.unwrap().port(),
        running.cert_path.as_ref().unwrap(),
        &[b"http/1.1"],
    )
    .await;
    let target = format!("/healthz?{}", "a".repeat(100_000));
    c.write_all(format!("GET {target} HTTP/1.1\r\nHost: localhost\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut raw = Vec::new();
    let read_head = async {
        let mut chunk = [0u8; 4096];
        while !raw.windows(4).any(|w| w == b"\r\n\r\n") {
            match c.read(&mut chunk).await {
                Ok(0) | Err(_) => break,
                Ok(n) => raw.extend_from_slice(&chunk[..n]),
            }
        }
    };
    tokio::time::timeout(std::time::Duration::from_secs(10), read_head)
        .await
        .expect("an answer to the 100 KB target");
    let text = String::from_utf8_lossy(&raw).to_ascii_lowercase();
    let head = text.split("\r\n\r\n").next().unwrap_or("");
    assert!(head.starts_with("http/1.1 414"), "{head}");
    assert!(
        head.contains("content-type: application/json"),
        "the transport's envelope: {head}"
    );
    let transport = head.lines().find_map(|l| {
        l.strip_prefix("strict-transport-security:")
            .map(|v| v.trim().to_owned())
    });
    (routed, transport)
}

#[tokio::test]
async fn d31_revised_no_hsts_when_the_public_url_is_loopback() {
    for public_url in ["https://localhost:8443", "https://127.0.0.1:8443"] {
        let s = TestServer::start_with(|c| c.public_url = public_url.into()).await;
        assert_eq!(
            hsts_of(&s).await,
            (None, None),
            "D31 revised: no HSTS for {public_url}"
        );
    }
    // Any other host: both paths send it.
    let s = TestServer::start_with(|c| c.public_url = "https://auth.example.com".into()).await;
    let (routed, transport) = hsts_of(&s).await;
    for v in [routed, transport] {
        assert!(
            v.as_deref().is_some_and(|v| v.contains("max-age=")),
            "D31: HSTS for auth.example.com: {v:?}"
        );
    }
}

// ---------------------------------------------------------------------------
// Item 7c: discovery (D49 continued)
// ---------------------------------------------------------------------------

#[tokio::test]
async fn d49_continued_discovery_offers_no_jwt_client_authentication() {
    let s = TestServer::start().await;
    for path in [
        "/.well-known/openid-configuration",
        "/.well-known/oauth-authorization-server",
    ] {
        let res = s.request(Method::GET, path).send().await.unwrap();
        assert_eq!(res.status(), StatusCode::OK, "{path}");
        let doc: Value = res.json().await.unwrap();
        assert!(doc["token_endpoint"].is_string(), "{path}: {doc}");
        assert!(
            doc.get("token_endpoint_auth_signing_alg_values_supported")
                .is_none(),
            "{path}: no JWT client authentication is offered"
        );
        let methods = doc["token_endpoint_auth_methods_supported"]
            .as_array()
            .unwrap();
        assert!(
            !methods
                .iter()
                .any(|m| m == "private_key_jwt" || m == "client_secret_jwt"),
            "{path}: {methods:?}"
        );
    }
}
