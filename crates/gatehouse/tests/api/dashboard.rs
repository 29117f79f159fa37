//! D48: the developer dashboard over plain HTTP — the built-in client's
//! sign-in (no consent, several organizations), the session cookies, the
//! security rules every page follows (CSRF, CSP, framing, `no-store`),
//! `/v1` ignoring cookies, sign-out by POST only. The same pages in
//! Chromium are `tests/browser.rs`.

use std::sync::OnceLock;

use gatehouse_domain::{
    Email, Name, NewUser, OrgId, Plan, Role, Timestamp, User, UserId, UserStatus,
};
use reqwest::{Method, StatusCode};

use crate::common::browser::{Browser, Page};
use crate::common::{PUBLIC_URL, TestServer};

pub(crate) const PASSWORD: &str = "dashboard-password-1234";
/// D48 (continued): the pending choice of organization.
pub(crate) const PICK_COOKIE: &str = "__Host-gh_dash_pick";

pub(crate) fn password_hash() -> String {
    static HASH: OnceLock<String> = OnceLock::new();
    HASH.get_or_init(|| gatehouse_auth::password::hash_blocking(PASSWORD))
        .clone()
}

pub(crate) async fn person(s: &TestServer, org: &OrgId, email: &str, role: Role) -> User {
    let u = NewUser {
        id: UserId::generate(),
        email: Email::parse(email).unwrap(),
        name: Name::parse("Dash Person").unwrap(),
        role,
        status: UserStatus::Active,
        password_hash: Some(password_hash()),
        created_at: Timestamp::now(),
    };
    s.store()
        .insert_user(org, &u, crate::common::operator())
        .await
        .unwrap()
}

/// A path of ours from a `Location` (absolute on `public_url`, or a path).
pub(crate) fn local(location: &str) -> String {
    location
        .strip_prefix(PUBLIC_URL)
        .unwrap_or(location)
        .to_owned()
}

/// `/dashboard` → sign-in → `/oauth/authorize`: the sign-in page.
pub(crate) async fn to_login(b: &mut Browser<'_>) -> Page {
    let home = b.get("/dashboard").await;
    assert_eq!(home.status, StatusCode::SEE_OTHER);
    assert_eq!(home.location().as_deref(), Some("/dashboard/signin"));
    let start = b.get("/dashboard/signin").await;
    assert_eq!(start.status, StatusCode::SEE_OTHER);
    let flow = start
        .set_cookies()
        .into_iter()
        .find(|c| c.starts_with("__Host-gh_dash_flow="))
        .expect("the sign-in's state and verifier in a cookie");
    for attr in ["Secure", "HttpOnly", "SameSite=Lax", "Path=/"] {
        assert!(flow.contains(attr), "{attr} on {flow}");
    }
    let authorize = start.location().unwrap();
    assert!(authorize.starts_with("/oauth/authorize?"), "{authorize}");
    assert!(authorize.contains("client_id=app_dashboard"));
    assert!(authorize.contains("code_challenge_method=S256"), "PKCE");
    let login = b.get(&authorize).await;
    assert_eq!(login.status, StatusCode::OK, "{}", login.body);
    assert!(login.body.contains("Gatehouse dashboard"));
    assert!(
        !login.body.contains("/password/forgot"),
        "no organization, so no reset link"
    );
    login
}

/// Follows the redirect to the callback and from it to the dashboard.
pub(crate) async fn through_callback(b: &mut Browser<'_>, back: &Page) -> Page {
    assert_eq!(back.status, StatusCode::SEE_OTHER, "{}", back.body);
    let location = back.location().unwrap();
    assert!(
        location.starts_with(&format!("{PUBLIC_URL}/dashboard/callback?")),
        "D48: the one redirect URI: {location}"
    );
    assert!(location.contains("iss="), "RFC 9207");
    let done = b.get(&local(&location)).await;
    assert_eq!(done.status, StatusCode::SEE_OTHER, "{}", done.body);
    assert_eq!(done.location().as_deref(), Some("/dashboard/applications"));
    let session = done
        .set_cookies()
        .into_iter()
        .find(|c| c.starts_with("__Host-gh_dash="))
        .expect("the dashboard's session cookie");
    for attr in ["Secure", "HttpOnly", "SameSite=Lax", "Path=/"] {
        assert!(session.contains(attr), "{attr} on {session}");
    }
    done
}

/// Signs `email` in (one organization): no consent page.
pub(crate) async fn sign_in(b: &mut Browser<'_>, email: &str) {
    let login = to_login(b).await;
    let form = login.form_with("password").unwrap();
    let back = b
        .submit(&form, &[("email", email), ("password", PASSWORD)])
        .await;
    through_callback(b, &back).await;
}

fn csrf(page: &Page) -> String {
    page.form_with("csrf_token")
        .and_then(|f| {
            f.hidden
                .into_iter()
                .find(|(k, _)| k == "csrf_token")
                .map(|(_, v)| v)
        })
        .expect("a form with a CSRF token")
}

fn check_headers(page: &Page) {
    let h = |n: &str| {
        page.headers
            .get(n)
            .map(|v| v.to_str().unwrap().to_owned())
            .unwrap_or_default()
    };
    let csp = h("content-security-policy");
    assert!(csp.contains("default-src 'none'"), "{csp}");
    assert!(csp.contains("frame-ancestors 'none'"), "{csp}");
    assert!(!csp.contains("unsafe-inline"), "{csp}");
    assert!(!csp.contains("http"), "no outside host: {csp}");
    assert_eq!(h("x-frame-options"), "DENY");
    assert_eq!(h("cache-control"), "no-store");
}

#[tokio::test]
async fn a_person_signs_in_without_consent_and_manages_the_team() {
    let s = TestServer::start().await;
    let admin = person(&s, &s.org(), "dash-admin@example.com", Role::Admin).await;
    let mut b = Browser::new(&s);
    sign_in(&mut b, admin.email.as_str()).await;

    let team = b.get("/dashboard/users").await;
    assert_eq!(team.status, StatusCode::OK, "{}", team.body);
    check_headers(&team);
    assert!(team.body.contains("dash-admin@example.com"));
    assert!(team.body.contains("Invite a teammate"), "admins invite");

    // Invite, through the management API's rules.
    let token = csrf(&team);
    let invited = b
        .post(
            "/dashboard/users",
            &[
                ("csrf_token", &token),
                ("email", "teammate@example.com"),
                ("name", "Team Mate"),
                ("role", "editor"),
            ],
        )
        .await;
    assert_eq!(invited.status, StatusCode::SEE_OTHER, "{}", invited.body);
    let team = b.get("/dashboard/users?done=invited").await;
    assert!(team.body.contains("teammate@example.com"));
    assert!(team.body.contains("The invitation was sent."));

    // A refusal of the API is shown in words (a duplicate address).
    let again = b
        .post(
            "/dashboard/users",
            &[
                ("csrf_token", &token),
                ("email", "teammate@example.com"),
                ("name", "Team Mate"),
                ("role", "editor"),
            ],
        )
        .await;
    assert_eq!(again.status, StatusCode::CONFLICT, "{}", again.body);
    assert!(again.body.contains("role=\"alert\""));

    // Changing a role.
    let mate = s
        .store()
        .find_user_by_email(&s.org(), &Email::parse("teammate@example.com").unwrap())
        .await
        .unwrap()
        .unwrap()
        .0;
    let changed = b
        .post(
            &format!("/dashboard/users/{}", mate.id),
            &[("csrf_token", &token), ("role", "viewer")],
        )
        .await;
    assert_eq!(changed.status, StatusCode::SEE_OTHER, "{}", changed.body);
    let mate = s
        .store()
        .get_user(&s.org(), &mate.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(mate.role, Role::Viewer);

    // Deactivating and reactivating an active teammate.
    let active = person(&s, &s.org(), "active-mate@example.com", Role::Viewer).await;
    for (status, expected) in [
        ("inactive", UserStatus::Inactive),
        ("active", UserStatus::Active),
    ] {
        let res = b
            .post(
                &format!("/dashboard/users/{}", active.id),
                &[("csrf_token", &token), ("status", status)],
            )
            .await;
        assert_eq!(res.status, StatusCode::SEE_OTHER, "{}", res.body);
        let now = s
            .store()
            .get_user(&s.org(), &active.id)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(now.status, expected);
    }

    // Every page: the security headers, whatever it shows.
    for path in [
        "/dashboard/applications",
        "/dashboard/applications/new",
        "/dashboard/api-keys",
        "/dashboard/usage",
        "/dashboard/users",
        "/dashboard/organization",
    ] {
        let page = b.get(path).await;
        assert_eq!(page.status, StatusCode::OK, "{path}: {}", page.body);
        check_headers(&page);
        assert!(page.body.contains("Organization"));
    }
}

#[tokio::test]
async fn forms_without_their_csrf_token_are_refused() {
    let s = TestServer::start().await;
    let admin = person(&s, &s.org(), "csrf@example.com", Role::Admin).await;
    let mut b = Browser::new(&s);
    sign_in(&mut b, admin.email.as_str()).await;
    for (path, fields) in [
        (
            "/dashboard/users",
            vec![
                ("email", "x@example.com"),
                ("name", "X"),
                ("role", "viewer"),
            ],
        ),
        ("/dashboard/api-keys", vec![("name", "k")]),
        ("/dashboard/applications", vec![("name", "a")]),
        ("/dashboard/signout", vec![]),
    ] {
        let missing = b.post(path, &fields).await;
        assert_eq!(missing.status, StatusCode::FORBIDDEN, "{path}");
        let mut wrong = fields.clone();
        let forged = "f".repeat(43);
        wrong.push(("csrf_token", &forged));
        let wrong = b.post(path, &wrong).await;
        assert_eq!(wrong.status, StatusCode::FORBIDDEN, "{path}");
    }
    let team = b.get("/dashboard/users").await;
    assert!(!team.body.contains("x@example.com"), "nothing was done");
}

#[tokio::test]
async fn v1_never_accepts_the_dashboard_cookies() {
    let s = TestServer::start().await;
    let admin = person(&s, &s.org(), "cookies@example.com", Role::Admin).await;
    let mut b = Browser::new(&s);
    sign_in(&mut b, admin.email.as_str()).await;
    let cookies = b
        .jar
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join("; ");
    assert!(cookies.contains("__Host-gh_dash="));
    for path in ["/v1/users", "/v1/me"] {
        let res = s
            .request(Method::GET, path)
            .header("cookie", &cookies)
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), StatusCode::UNAUTHORIZED, "{path}");
    }
}

#[tokio::test]
async fn sign_out_is_a_post_and_ends_the_gatehouse_session() {
    let s = TestServer::start().await;
    let admin = person(&s, &s.org(), "out@example.com", Role::Admin).await;
    let mut b = Browser::new(&s);
    sign_in(&mut b, admin.email.as_str()).await;
    let kept = b.jar.clone();

    let get = b.get("/dashboard/signout").await;
    assert_eq!(get.status, StatusCode::METHOD_NOT_ALLOWED);

    let page = b.get("/dashboard/users").await;
    let token = csrf(&page);
    let out = b
        .post("/dashboard/signout", &[("csrf_token", &token)])
        .await;
    assert_eq!(out.status, StatusCode::OK, "{}", out.body);
    check_headers(&out);
    let cleared = out.set_cookies();
    assert!(
        cleared
            .iter()
            .any(|c| c.starts_with("__Host-gh_dash=;") && c.contains("Max-Age=0"))
    );
    assert!(
        cleared
            .iter()
            .any(|c| c.starts_with("__Host-gh_session=;") && c.contains("Max-Age=0"))
    );

    // The old cookies no longer sign anyone in: the access token is
    // revoked and the browser session is gone, so no refresh.
    let mut replay = Browser::new(&s);
    replay.jar = kept;
    let again = replay.get("/dashboard/users").await;
    assert_eq!(again.status, StatusCode::SEE_OTHER);
    assert_eq!(again.location().as_deref(), Some("/dashboard/signin"));

    // And the authorization server asks for the password again.
    let login = to_login(&mut b).await;
    assert!(login.form_with("password").is_some());
}

#[tokio::test]
async fn several_organizations_ask_which_one() {
    let s = TestServer::start().await;
    let other = s.new_org(Plan::Pro).await;
    person(&s, &s.org(), "twice@example.com", Role::Admin).await;
    person(&s, &other, "twice@example.com", Role::Viewer).await;
    let mut b = Browser::new(&s);
    let login = to_login(&mut b).await;
    let form = login.form_with("password").unwrap();
    let pick = b
        .submit(
            &form,
            &[("email", "twice@example.com"), ("password", PASSWORD)],
        )
        .await;
    assert_eq!(pick.status, StatusCode::OK, "{}", pick.body);
    assert!(pick.body.contains("Choose an organization"));
    assert!(pick.body.contains(other.as_str()));
    assert!(pick.body.contains(s.org().as_str()));
    let form = pick.form_with("org").expect("the choice form");
    // D48 (continued): the choice is in an HttpOnly cookie of this browser,
    // never in the page.
    assert!(
        !form.hidden.iter().any(|(k, _)| k == "pick"),
        "no choice in the page: {:?}",
        form.hidden
    );
    let set = pick
        .set_cookies()
        .into_iter()
        .find(|c| c.starts_with(&format!("{PICK_COOKIE}=")))
        .expect("the choice in a cookie");
    for attr in [
        "Secure",
        "HttpOnly",
        "SameSite=Lax",
        "Path=/",
        "Max-Age=600",
    ] {
        assert!(set.contains(attr), "{attr} on {set}");
    }
    let sealed = b.jar[PICK_COOKIE].clone();
    // A forged choice is refused.
    b.jar.insert(PICK_COOKIE.into(), format!("{sealed}x"));
    let refused = b.submit(&form, &[("org", other.as_str())]).await;
    assert_eq!(refused.status, StatusCode::UNAUTHORIZED, "{}", refused.body);
    // The page (its CSRF token and fields) in another browser, without
    // this browser's cookie, signs nobody in.
    let mut elsewhere = Browser::new(&s);
    elsewhere.jar.insert(
        "__Host-gh_csrf".into(),
        b.jar.get("__Host-gh_csrf").cloned().unwrap(),
    );
    let refused = elsewhere.submit(&form, &[("org", other.as_str())]).await;
    assert_eq!(refused.status, StatusCode::UNAUTHORIZED, "{}", refused.body);
    assert!(refused.body.contains("Sign in again"), "{}", refused.body);
    assert!(
        elsewhere
            .jar
            .get("__Host-gh_session")
            .is_none_or(|v| v.is_empty()),
        "no session for the other browser"
    );

    b.jar.insert(PICK_COOKIE.into(), sealed.clone());
    let back = b.submit(&form, &[("org", other.as_str())]).await;
    assert_eq!(
        b.jar.get(PICK_COOKIE).map(String::as_str),
        Some(""),
        "the choice's cookie is cleared once used"
    );
    // The same choice again, even from this browser: spent.
    let mut again = Browser::new(&s);
    again.jar = b.jar.clone();
    again.jar.remove("__Host-gh_session");
    again.jar.insert(PICK_COOKIE.into(), sealed);
    let replay = again.submit(&form, &[("org", s.org().as_str())]).await;
    assert_eq!(replay.status, StatusCode::UNAUTHORIZED, "{}", replay.body);
    through_callback(&mut b, &back).await;
    let team = b.get("/dashboard/users").await;
    assert_eq!(team.status, StatusCode::OK);
    assert!(team.body.contains("viewer"));
    assert!(
        !team.body.contains("Invite a teammate"),
        "a viewer of the other organization: no invitations"
    );
}

#[tokio::test]
async fn the_built_in_client_is_no_stored_client() {
    let s = TestServer::start().await;
    // Its only redirect URI.
    let mut b = Browser::new(&s);
    let page = b
        .authorize(&[
            ("response_type", "code"),
            ("client_id", "app_dashboard"),
            ("redirect_uri", "https://evil.example/callback"),
            ("state", "x"),
            ("code_challenge", &"a".repeat(43)),
            ("code_challenge_method", "S256"),
        ])
        .await;
    assert_eq!(page.status, StatusCode::BAD_REQUEST);
    assert!(page.location().is_none(), "never a redirect to it");
    // It is not a client of any organization: no secret works at the
    // token endpoint.
    let res = s
        .request(Method::POST, "/oauth/token")
        .basic_auth("app_dashboard", Some("guess"))
        .form(&[("grant_type", "client_credentials")])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::UNAUTHORIZED);
    // Without a sign-in in progress the callback refuses.
    let cb = b
        .get("/dashboard/callback?code=x&state=y&iss=https%3A%2F%2Fgatehouse.example")
        .await;
    assert_eq!(cb.status, StatusCode::BAD_REQUEST);
    check_headers(&cb);
}

/// The value of the page's `<input id="secret" … value="…">`.
fn shown_secret(page: &Page) -> String {
    let i = page
        .body
        .find("id=\"secret\"")
        .expect("a secret on the page");
    let rest = &page.body[i..];
    let v = rest.find("value=\"").unwrap() + 7;
    let end = rest[v..].find('"').unwrap();
    rest[v..v + end].to_owned()
}

async fn client_token(s: &TestServer, id: &str, secret: &str) -> StatusCode {
    s.request(Method::POST, "/oauth/token")
        .basic_auth(id, Some(secret))
        .form(&[("grant_type", "client_credentials")])
        .send()
        .await
        .unwrap()
        .status()
}

#[tokio::test]
async fn applications_keys_and_usage_through_the_management_api() {
    let s = TestServer::start().await;
    let admin = person(&s, &s.org(), "apps@example.com", Role::Admin).await;
    let mut b = Browser::new(&s);
    sign_in(&mut b, admin.email.as_str()).await;

    // Register a confidential application.
    let new = b.get("/dashboard/applications/new").await;
    assert_eq!(new.status, StatusCode::OK, "{}", new.body);
    check_headers(&new);
    // Issue 32: the redirect URIs' rule is said before the form is sent,
    // and tied to its field.
    assert!(
        new.body.contains("aria-describedby=\"redirect-rule\""),
        "{}",
        new.body
    );
    assert!(
        new.body.contains("http:&#x2f;&#x2f;127.0.0.1"),
        "the rule in words: {}",
        new.body
    );
    let token = csrf(&new);
    let created = b
        .post(
            "/dashboard/applications",
            &[
                ("csrf_token", &token),
                ("name", "Billing <service>"),
                ("type", "confidential"),
                ("redirect_uris", "https://billing.example/callback\n"),
                // Issue 32: post-logout URIs at registration.
                ("post_logout_redirect_uris", "https://billing.example/bye\n"),
                ("scope.users:read", "on"),
                ("scope.products:read", "on"),
            ],
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    check_headers(&created);
    assert!(created.body.contains("Billing &lt;service&gt;"), "escaped");
    let secret = shown_secret(&created);
    let i = created.body.find("client ID <code>").unwrap() + 16;
    let id = created.body[i..i + created.body[i..].find('<').unwrap()].to_owned();
    assert!(id.starts_with("app_"), "{id}");
    assert_eq!(client_token(&s, &id, &secret).await, StatusCode::OK);

    // Listed, and editable.
    let list = b.get("/dashboard/applications").await;
    assert!(list.body.contains(&id));
    assert!(!list.body.contains(&secret), "the secret is shown once");
    let page = b.get(&format!("/dashboard/applications/{id}")).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    assert!(!page.body.contains(&secret));
    assert!(
        page.body.contains("billing.example&#x2f;bye"),
        "{}",
        page.body
    );
    // Issue 32: the issuer, the discovery URL and the endpoints a library
    // asks for, as the discovery document says them.
    let esc = |u: String| u.replace('/', "&#x2f;");
    for shown in [
        format!("<code>{}</code>", esc(PUBLIC_URL.to_owned())),
        format!(
            "{}/.well-known/openid-configuration",
            esc(PUBLIC_URL.to_owned())
        ),
        esc(format!("{PUBLIC_URL}/oauth/token")),
        esc(format!("{PUBLIC_URL}/oauth/authorize")),
        esc(format!("{PUBLIC_URL}/.well-known/jwks.json")),
    ] {
        assert!(page.body.contains(&shown), "{shown} in {}", page.body);
    }
    let saved = b
        .post(
            &format!("/dashboard/applications/{id}"),
            &[
                ("csrf_token", &token),
                ("name", "Billing"),
                (
                    "redirect_uris",
                    "https://billing.example/callback\nhttps://billing.example/other",
                ),
                ("post_logout_redirect_uris", ""),
                ("scope.users:read", "on"),
            ],
        )
        .await;
    assert_eq!(saved.status, StatusCode::SEE_OTHER, "{}", saved.body);
    let page = b.get(&format!("/dashboard/applications/{id}")).await;
    assert!(
        page.body.contains("billing.example&#x2f;other"),
        "{}",
        page.body
    );

    // Rotate with no grace: the old secret stops at once.
    let rotated = b
        .post(
            &format!("/dashboard/applications/{id}/secret"),
            &[("csrf_token", &token), ("grace_seconds", "0")],
        )
        .await;
    assert_eq!(rotated.status, StatusCode::CREATED, "{}", rotated.body);
    let new_secret = shown_secret(&rotated);
    assert_ne!(new_secret, secret);
    assert_eq!(client_token(&s, &id, &new_secret).await, StatusCode::OK);
    assert_eq!(
        client_token(&s, &id, &secret).await,
        StatusCode::UNAUTHORIZED
    );

    // An API key: shown once, listed by prefix, used, revoked.
    let created = b
        .post(
            "/dashboard/api-keys",
            &[
                ("csrf_token", &token),
                ("name", "ci key"),
                ("scope.users:read", "on"),
                // Issue 32: an expiry chosen at creation.
                ("expires_in", "30"),
            ],
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    let key = shown_secret(&created);
    let listed = s
        .call(
            Method::GET,
            "/v1/api-keys",
            &s.token("applications:read").await,
            None,
        )
        .await
        .json::<serde_json::Value>()
        .await
        .unwrap();
    let expires = listed["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["name"] == "ci key")
        .and_then(|k| k["expires_at"].as_str())
        .and_then(Timestamp::parse_rfc3339)
        .unwrap_or_else(|| panic!("an expiry: {listed}"));
    let in_days = (expires.millis() - Timestamp::now().millis()) as f64 / 86_400_000.0;
    assert!((29.9..=30.0).contains(&in_days), "{in_days} days");
    // D54: the dashboard acts as the person through `app_dashboard`, and
    // the event names the page request that made the change.
    let header = created.headers["x-request-id"].to_str().unwrap();
    let page_request = format!("req_{}", header.replace('-', ""));
    let made = crate::events::told(&s, "?type=api_key.created&limit=1").await;
    assert_eq!(made[0]["actor"]["type"], "user");
    assert_eq!(made[0]["actor"]["client_id"], "app_dashboard");
    assert_eq!(made[0]["request"]["id"], page_request.as_str());
    let used = s
        .request(Method::GET, "/v1/users")
        .bearer_auth(&key)
        .send()
        .await
        .unwrap();
    assert_eq!(used.status(), StatusCode::OK);
    let keys = b.get("/dashboard/api-keys").await;
    assert!(keys.body.contains(&key[..12]));
    assert!(!keys.body.contains(&key));
    assert!(keys.body.contains("expires "), "{}", keys.body);
    // Issue 32: revoking asks first, on a page of its own.
    let revoke_link = keys
        .body
        .split("href=\"")
        .filter_map(|p| p.split('"').next())
        .find(|a| a.ends_with("/revoke"))
        .unwrap()
        .replace("&#x2f;", "/");
    let confirm = b.get(&revoke_link).await;
    assert_eq!(confirm.status, StatusCode::OK, "{}", confirm.body);
    check_headers(&confirm);
    assert!(confirm.body.contains("Revoke ci key?"), "{}", confirm.body);
    let revoke_action = confirm
        .body
        .split("action=\"")
        .filter_map(|p| p.split('"').next())
        .find(|a| a.ends_with("/revoke"))
        .unwrap()
        .replace("&#x2f;", "/");
    assert_eq!(revoke_action, revoke_link);
    // Only asked: the key still works.
    let still = s
        .request(Method::GET, "/v1/users")
        .bearer_auth(&key)
        .send()
        .await
        .unwrap();
    assert_eq!(still.status(), StatusCode::OK);
    let revoked = b.post(&revoke_action, &[("csrf_token", &token)]).await;
    assert_eq!(revoked.status, StatusCode::SEE_OTHER, "{}", revoked.body);
    let used = s
        .request(Method::GET, "/v1/users")
        .bearer_auth(&key)
        .send()
        .await
        .unwrap();
    assert_eq!(used.status(), StatusCode::UNAUTHORIZED);

    // Usage: the application's requests on the chart (counts are flushed
    // every 2 s).
    // (The scope dropped above revoked the application's tokens issued up
    // to that second: a token of the next second is a fresh one.)
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    let bearer = s.token_for(&id, &new_secret, "users:read").await;
    for _ in 0..3 {
        let r = s
            .request(Method::GET, "/v1/users")
            .bearer_auth(&bearer)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::OK);
    }
    let mut seen = false;
    for _ in 0..20 {
        let usage = b
            .get(&format!("/dashboard/usage?of=application:{id}&range=hour"))
            .await;
        assert_eq!(usage.status, StatusCode::OK, "{}", usage.body);
        assert!(usage.body.contains("<svg"));
        if usage.body.contains("requests: 3 in all") {
            seen = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
    assert!(seen, "the three requests on the chart");
    let day = b
        .get(&format!("/dashboard/usage?of=application:{id}&range=day"))
        .await;
    assert_eq!(day.status, StatusCode::OK, "{}", day.body);

    // Delete, after a confirmation page.
    let confirm = b.get(&format!("/dashboard/applications/{id}/delete")).await;
    assert_eq!(confirm.status, StatusCode::OK);
    let deleted = b
        .post(
            &format!("/dashboard/applications/{id}/delete"),
            &[("csrf_token", &token)],
        )
        .await;
    assert_eq!(deleted.status, StatusCode::SEE_OTHER, "{}", deleted.body);
    assert_eq!(
        client_token(&s, &id, &new_secret).await,
        StatusCode::UNAUTHORIZED
    );

    // The organization page shows plan and limits.
    let org = b.get("/dashboard/organization").await;
    assert_eq!(org.status, StatusCode::OK, "{}", org.body);
    assert!(org.body.contains("Requests per minute"));
}

#[tokio::test]
async fn the_dashboard_is_in_no_application_list_and_never_admin() {
    let s = TestServer::start().await;
    let admin = person(&s, &s.org(), "list@example.com", Role::Admin).await;
    let mut b = Browser::new(&s);
    sign_in(&mut b, admin.email.as_str()).await;
    let token = s.token("applications:read").await;
    let res = s
        .call(Method::GET, "/v1/applications?limit=100", &token, None)
        .await;
    let body: serde_json::Value = res.json().await.unwrap();
    assert!(
        !body.to_string().contains("app_dashboard"),
        "D48: in no organization's list: {body}"
    );
    let res = s
        .call(Method::GET, "/v1/applications/app_dashboard", &token, None)
        .await;
    assert_eq!(res.status(), StatusCode::NOT_FOUND);
    // An admin's dashboard offers no `admin` scope to put on anything.
    let keys = b.get("/dashboard/api-keys").await;
    assert!(!keys.body.contains("name=\"scope.admin\""));
}

#[tokio::test]
async fn d57_a_demotion_keeps_the_dashboard_session_and_a_deactivation_ends_it() {
    let s = TestServer::start().await;
    person(&s, &s.org(), "other-admin@example.com", Role::Admin).await;
    let me = person(&s, &s.org(), "demoted@example.com", Role::Admin).await;
    let mut b = Browser::new(&s);
    sign_in(&mut b, me.email.as_str()).await;
    let team = b.get("/dashboard/users").await;
    assert!(team.body.contains("Invite a teammate"));

    // A demotion through the API revokes the person's tokens (D29) but,
    // unlike a deactivation, ends no browser session (D57): the dashboard
    // takes a new token with an editor's rights, without a new sign-in.
    let token = s.token("users:write").await;
    let res = s
        .call(
            Method::PATCH,
            &format!("/v1/users/{}", me.id),
            &token,
            Some(serde_json::json!({"role": "editor"})),
        )
        .await;
    assert_eq!(res.status(), StatusCode::OK);
    // Revocation cut-offs are whole seconds: a token minted in the
    // demotion's second is revoked with the rest.
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    let team = b.get("/dashboard/users").await;
    assert_eq!(team.status, StatusCode::OK, "{}", team.body);
    assert!(team.body.contains("· editor"), "{}", team.body);
    assert!(!team.body.contains("Invite a teammate"));

    // Deactivated: signed out of the dashboard, and no sign-in.
    let res = s
        .call(
            Method::PATCH,
            &format!("/v1/users/{}", me.id),
            &token,
            Some(serde_json::json!({"status": "inactive"})),
        )
        .await;
    assert_eq!(res.status(), StatusCode::OK);
    let team = b.get("/dashboard/users").await;
    assert_eq!(team.status, StatusCode::SEE_OTHER);
    assert_eq!(team.location().as_deref(), Some("/dashboard/signin"));
    let login = to_login(&mut b).await;
    let form = login.form_with("password").unwrap();
    let refused = b
        .submit(
            &form,
            &[("email", me.email.as_str()), ("password", PASSWORD)],
        )
        .await;
    assert_eq!(refused.status, StatusCode::UNAUTHORIZED);
}

/// D53: in the mock (plain HTTP) the dashboard works with cookies that
/// carry neither `Secure` nor the `__Host-` prefix.
#[tokio::test]
async fn the_mock_dashboard_uses_plain_cookies() {
    let s = TestServer::start_mock().await;
    let mut b = Browser::new(&s);
    let start = b.get("/dashboard/signin").await;
    assert_eq!(start.status, StatusCode::SEE_OTHER);
    let flow = start
        .set_cookies()
        .into_iter()
        .find(|c| c.starts_with("gh_dash_flow="))
        .expect("the plain flow cookie");
    assert!(!flow.contains("Secure"), "{flow}");
    let login = b.get(&start.location().unwrap()).await;
    let form = login.form_with("password").expect("the sign-in page");
    let back = b
        .submit(
            &form,
            &[
                ("email", "ada@example.com"),
                ("password", "mock-password-1234"),
            ],
        )
        .await;
    assert_eq!(back.status, StatusCode::SEE_OTHER, "{}", back.body);
    let location = back.location().unwrap();
    let path = location
        .split_once("/dashboard/callback")
        .map(|(_, q)| format!("/dashboard/callback{q}"))
        .unwrap_or_else(|| panic!("{location}"));
    let done = b.get(&path).await;
    assert_eq!(done.status, StatusCode::SEE_OTHER, "{}", done.body);
    assert!(
        done.set_cookies()
            .iter()
            .any(|c| c.starts_with("gh_dash=") && !c.contains("Secure"))
    );
    let team = b.get("/dashboard/users").await;
    assert_eq!(team.status, StatusCode::OK, "{}", team.body);
    assert!(team.body.contains("ada@example.com"));
}

/// D46 through the dashboard: an editor sees and changes only what it
/// registered; the organization's other applications are not there.
#[tokio::test]
async fn an_editor_sees_only_its_own_applications() {
    let s = TestServer::start().await;
    let manager = s
        .token("applications:read applications:write users:read")
        .await;
    let res = s
        .call(
            Method::POST,
            "/v1/applications",
            &manager,
            Some(serde_json::json!({
                "name": "Operator app", "type": "confidential",
                "redirect_uris": [], "scopes": ["users:read"],
            })),
        )
        .await;
    assert_eq!(res.status(), StatusCode::CREATED);
    let theirs: serde_json::Value = res.json().await.unwrap();
    let theirs = theirs["data"]["id"].as_str().unwrap().to_owned();

    let editor = person(&s, &s.org(), "editor@example.com", Role::Editor).await;
    let mut b = Browser::new(&s);
    sign_in(&mut b, editor.email.as_str()).await;
    let list = b.get("/dashboard/applications").await;
    assert_eq!(list.status, StatusCode::OK, "{}", list.body);
    assert!(!list.body.contains(&theirs));
    let other = b.get(&format!("/dashboard/applications/{theirs}")).await;
    assert_eq!(other.status, StatusCode::NOT_FOUND, "{}", other.body);
    let token = csrf(&list);
    let created = b
        .post(
            "/dashboard/applications",
            &[
                ("csrf_token", &token),
                ("name", "Mine"),
                ("type", "public"),
                ("redirect_uris", "https://mine.example/cb"),
                ("scope.products:read", "on"),
            ],
        )
        .await;
    assert_eq!(created.status, StatusCode::SEE_OTHER, "{}", created.body);
    let list = b.get("/dashboard/applications").await;
    assert!(list.body.contains("Mine"));
    // A scope the editor does not hold is not offered, and the API refuses it.
    let new = b.get("/dashboard/applications/new").await;
    assert!(!new.body.contains("name=\"scope.users:write\""));
    let refused = b
        .post(
            "/dashboard/applications",
            &[
                ("csrf_token", &token),
                ("name", "Escalation"),
                ("type", "confidential"),
                ("redirect_uris", ""),
                ("scope.users:write", "on"),
            ],
        )
        .await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN, "{}", refused.body);
    assert!(refused.body.contains("role=\"alert\""));
}

/// D26 across organizations: when the password opens one account but not
/// another with the same address, the other counts a failed login, so one
/// known password buys no unthrottled guesses at another organization's.
#[tokio::test]
async fn a_password_that_opens_one_account_counts_a_failure_at_the_other() {
    let s = TestServer::start().await;
    let other = s.new_org(Plan::Pro).await;
    person(&s, &s.org(), "split@example.com", Role::Editor).await;
    let u = NewUser {
        id: UserId::generate(),
        email: Email::parse("split@example.com").unwrap(),
        name: Name::parse("Other Password").unwrap(),
        role: Role::Editor,
        status: UserStatus::Active,
        password_hash: Some(gatehouse_auth::password::hash_blocking(
            "another long passphrase entirely",
        )),
        created_at: Timestamp::now(),
    };
    s.store()
        .insert_user(&other, &u, crate::common::operator())
        .await
        .unwrap();
    let mut b = Browser::new(&s);
    let login = to_login(&mut b).await;
    let form = login.form_with("password").unwrap();
    let back = b
        .submit(
            &form,
            &[("email", "split@example.com"), ("password", PASSWORD)],
        )
        .await;
    assert!(
        back.status.is_redirection(),
        "one account matched: no choice to make ({})",
        back.body
    );
    let since = Timestamp::from_millis(Timestamp::now().millis() - 60_000);
    let store = s.store();
    let other_failures = store
        .login_failures(&other, "split@example.com", since)
        .await
        .unwrap();
    assert_eq!(other_failures.len(), 1, "the other account's failure");
    let own = store
        .login_failures(&s.org(), "split@example.com", since)
        .await
        .unwrap();
    assert!(own.is_empty(), "the matched account: none");

    // D58: the other organization's audit log records the failure, with
    // its reason and the dashboard as the client; the matched one's none.
    let (id, secret) = s.new_client(&other, "audit:read").await;
    let t = s.token_for(&id, &secret, "audit:read").await;
    let found = crate::audit::audit_once(&s, &t, "?action=user.sign_in_failed", 1).await;
    let e = &found["data"][0];
    assert_eq!(e["reason"], "bad_credentials", "{found}");
    assert_eq!(e["target"]["id"], u.id.as_str());
    assert_eq!(e["details"]["client_id"], "app_dashboard");
    let t = s.token("audit:read").await;
    let mine = crate::audit::audit_once(&s, &t, "?action=user.sign_in_failed", 0).await;
    assert_eq!(mine["meta"]["total"], 0, "{mine}");
}

/// D46 (revised) through the dashboard: an admin owns what it registers
/// there, and a suspended application says why on its page and in the list.
#[tokio::test]
async fn an_admins_application_is_theirs_and_its_suspension_is_shown() {
    let s = TestServer::start().await;
    let owner = person(&s, &s.org(), "owner@example.com", Role::Admin).await;
    let other = person(&s, &s.org(), "other@example.com", Role::Admin).await;
    let mut b = Browser::new(&s);
    sign_in(&mut b, owner.email.as_str()).await;
    let new = b.get("/dashboard/applications/new").await;
    let created = b
        .post(
            "/dashboard/applications",
            &[
                ("csrf_token", &csrf(&new)),
                ("name", "Owned"),
                ("type", "confidential"),
                ("redirect_uris", "https://owned.example/callback\n"),
                ("scope.users:read", "on"),
            ],
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    let i = created.body.find("client ID <code>").unwrap() + 16;
    let id = created.body[i..i + created.body[i..].find('<').unwrap()].to_owned();
    let ops = s.token("applications:read users:write").await;
    let shown: serde_json::Value = s
        .call(Method::GET, &format!("/v1/applications/{id}"), &ops, None)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(shown["data"]["owner_id"], owner.id.to_string());

    let res = s
        .call(
            Method::PATCH,
            &format!("/v1/users/{}", owner.id),
            &ops,
            Some(serde_json::json!({"status": "inactive"})),
        )
        .await;
    assert_eq!(res.status(), StatusCode::OK);
    let mut b = Browser::new(&s);
    sign_in(&mut b, other.email.as_str()).await;
    let page = b.get(&format!("/dashboard/applications/{id}")).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    assert!(
        page.body.contains("Suspended") && page.body.contains("its owner is deactivated"),
        "{}",
        page.body
    );
    let list = b.get("/dashboard/applications").await;
    assert!(list.body.contains("suspended"), "{}", list.body);
}

/// D48 (continued): a grace period the dashboard cannot read is an error
/// next to its field, and nothing is rotated (it used to rotate with no
/// grace and report success).
#[tokio::test]
async fn an_unreadable_grace_is_an_error_next_to_its_field_and_rotates_nothing() {
    let s = TestServer::start().await;
    let admin = person(&s, &s.org(), "rotor@example.com", Role::Admin).await;
    let mut b = Browser::new(&s);
    sign_in(&mut b, admin.email.as_str()).await;
    let new = b.get("/dashboard/applications/new").await;
    let token = csrf(&new);
    let created = b
        .post(
            "/dashboard/applications",
            &[
                ("csrf_token", &token),
                ("name", "Rotated"),
                ("type", "confidential"),
                ("redirect_uris", "https://rotated.example/callback\n"),
                ("scope.users:read", "on"),
            ],
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    let secret = shown_secret(&created);
    let i = created.body.find("client ID <code>").unwrap() + 16;
    let id = created.body[i..i + created.body[i..].find('<').unwrap()].to_owned();

    for grace in ["an hour", "-5", "99999999999999999999999"] {
        let page = b
            .post(
                &format!("/dashboard/applications/{id}/secret"),
                &[("csrf_token", &token), ("grace_seconds", grace)],
            )
            .await;
        assert_eq!(
            page.status,
            StatusCode::BAD_REQUEST,
            "{grace}: {}",
            page.body
        );
        let at = page.body.find("id=\"grace-error\"").unwrap_or_else(|| {
            panic!("{grace}: the error stands next to its field: {}", page.body)
        });
        assert!(
            page.body[at..]
                .find("id=\"grace_seconds\"")
                .is_some_and(|n| n < 400),
            "{grace}: just before the field"
        );
        assert_eq!(
            client_token(&s, &id, &secret).await,
            StatusCode::OK,
            "{grace}: nothing was rotated"
        );
    }
}

/// D48 (continued): the dashboard's code works only with the browser
/// session it was issued in, and once: the answer copied with the sign-in's
/// state and verifier into another browser is refused, and so is a second
/// use in the first.
#[tokio::test]
async fn the_code_works_only_in_the_browser_session_that_signed_in_and_once() {
    let s = TestServer::start().await;
    person(&s, &s.org(), "bound@example.com", Role::Editor).await;
    let mut b = Browser::new(&s);
    let login = to_login(&mut b).await;
    let form = login.form_with("password").unwrap();
    let back = b
        .submit(
            &form,
            &[("email", "bound@example.com"), ("password", PASSWORD)],
        )
        .await;
    assert_eq!(back.status, StatusCode::SEE_OTHER, "{}", back.body);
    let callback = local(&back.location().unwrap());
    // Another browser with the sign-in's state and verifier (everything
    // but the Gatehouse session): refused, and it does not spend the code.
    let mut other = Browser::new(&s);
    other.jar.insert(
        "__Host-gh_dash_flow".into(),
        b.jar["__Host-gh_dash_flow"].clone(),
    );
    let refused = other.get(&callback).await;
    assert_eq!(refused.status, StatusCode::BAD_REQUEST, "{}", refused.body);
    assert!(
        other.jar.get("__Host-gh_dash").is_none_or(|v| v.is_empty()),
        "no dashboard session"
    );
    // Another person's session with it: refused too.
    person(&s, &s.org(), "someone@example.com", Role::Admin).await;
    let mut someone = Browser::new(&s);
    sign_in(&mut someone, "someone@example.com").await;
    someone.jar.insert(
        "__Host-gh_dash_flow".into(),
        b.jar["__Host-gh_dash_flow"].clone(),
    );
    someone.jar.remove("__Host-gh_dash");
    let refused = someone.get(&callback).await;
    assert_eq!(refused.status, StatusCode::BAD_REQUEST, "{}", refused.body);
    // The browser that signed in: once.
    let mut replay = Browser::new(&s);
    replay.jar = b.jar.clone();
    through_callback(&mut b, &back).await;
    let again = replay.get(&callback).await;
    assert_eq!(again.status, StatusCode::BAD_REQUEST, "{}", again.body);
    assert!(
        replay
            .jar
            .get("__Host-gh_dash")
            .is_none_or(|v| v.is_empty()),
        "used once: {:?}",
        replay.seen
    );
}

/// D48 (continued): what one address leaves pending (sign-ins started,
/// codes issued and not redeemed, choices not made) blocks no one else:
/// nothing is kept per pending sign-in, and a spent code takes no room
/// that a newcomer needs.
#[tokio::test]
async fn pending_sign_ins_from_one_address_block_no_one_else() {
    let s = TestServer::start().await;
    person(&s, &s.org(), "flood@example.com", Role::Viewer).await;
    person(&s, &s.org(), "newcomer@example.com", Role::Editor).await;
    let mut flood = Browser::new(&s);
    sign_in(&mut flood, "flood@example.com").await;
    for _ in 0..100 {
        // A code issued at once from the live session, never redeemed.
        let start = flood.get("/dashboard/signin").await;
        let pending = flood.get(&start.location().unwrap()).await;
        assert_eq!(pending.status, StatusCode::SEE_OTHER, "{}", pending.body);
    }
    for _ in 0..50 {
        // A code redeemed (spent), which a per-node cap used to count.
        let start = flood.get("/dashboard/signin").await;
        let back = flood.get(&start.location().unwrap()).await;
        through_callback(&mut flood, &back).await;
    }
    let mut newcomer = Browser::new(&s);
    sign_in(&mut newcomer, "newcomer@example.com").await;
    let page = newcomer.get("/dashboard/applications").await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
}

/// D48 (continued): the built-in client's request is checked like every
/// client's once its redirect URI is trusted: a request object is
/// `request_not_supported` and a missing `response_type` is
/// `invalid_request`, both sent to its redirect URI.
#[tokio::test]
async fn the_dashboards_request_is_checked_like_any_clients() {
    let s = TestServer::start().await;
    let mut b = Browser::new(&s);
    let redirect = format!("{PUBLIC_URL}/dashboard/callback");
    let challenge = "a".repeat(43);
    let base = [
        ("client_id", "app_dashboard"),
        ("redirect_uri", redirect.as_str()),
        ("state", "st"),
        ("code_challenge", challenge.as_str()),
        ("code_challenge_method", "S256"),
    ];
    let mut with_request = base.to_vec();
    with_request.push(("response_type", "code"));
    with_request.push(("request", "eyJhbGciOiJub25lIn0.e30."));
    let page = b.authorize(&with_request).await;
    assert_eq!(page.status, StatusCode::SEE_OTHER, "{}", page.body);
    let to = page.location().unwrap();
    assert!(to.starts_with(&redirect), "{to}");
    assert!(to.contains("error=request_not_supported"), "{to}");
    assert!(to.contains("state=st"), "{to}");
    let page = b.authorize(&base).await;
    assert_eq!(page.status, StatusCode::SEE_OTHER, "{}", page.body);
    let to = page.location().unwrap();
    assert!(to.contains("error=invalid_request"), "{to}");
}

/// D55, D29 (continued): the Webhooks page is for admins. An editor's
/// navigation has no Webhooks tab; the page answers 403 with the API's
/// refusal and no form, and a forged form adds nothing.
#[tokio::test]
async fn the_webhooks_page_is_for_admins_only() {
    let s = TestServer::start().await;
    let editor = person(&s, &s.org(), "hooks-editor@example.com", Role::Editor).await;
    let mut b = Browser::new(&s);
    sign_in(&mut b, editor.email.as_str()).await;
    let apps = b.get("/dashboard/applications").await;
    // (The tab's link text; its `href` is escaped as `&#x2f;dashboard…`.)
    assert!(apps.body.contains(">Users</a>"), "{}", apps.body);
    assert!(!apps.body.contains(">Webhooks</a>"), "{}", apps.body);
    let page = b.get("/dashboard/webhooks").await;
    assert_eq!(page.status, StatusCode::FORBIDDEN, "{}", page.body);
    assert!(page.body.contains("role=\"alert\""));
    assert!(!page.body.contains("Add an endpoint"));
    let token = csrf(&apps);
    let forged = b
        .post(
            "/dashboard/webhooks",
            &[
                ("csrf_token", &token),
                ("url", "https://hooks.example.com/in"),
                ("events", "*"),
                ("ordering", "none"),
            ],
        )
        .await;
    assert_eq!(forged.status, StatusCode::FORBIDDEN, "{}", forged.body);
    let admin = s.token("webhooks:read webhooks:write").await;
    let listed = s
        .call(Method::GET, "/v1/webhook-endpoints", &admin, None)
        .await;
    let listed: serde_json::Value = listed.json().await.unwrap();
    assert_eq!(listed["meta"]["total"], 0);
    // An endpoint's page, its confirmation and its forms: refused in words.
    let made = s
        .call(
            Method::POST,
            "/v1/webhook-endpoints",
            &admin,
            Some(serde_json::json!({"url": "https://hooks.example.com/in"})),
        )
        .await;
    let made: serde_json::Value = made.json().await.unwrap();
    let id = made["data"]["id"].as_str().unwrap().to_owned();
    for page in [
        format!("/dashboard/webhooks/{id}"),
        format!("/dashboard/webhooks/{id}/delete"),
    ] {
        let got = b.get(&page).await;
        assert_eq!(got.status, StatusCode::FORBIDDEN, "{page}: {}", got.body);
        assert!(got.body.contains("role=\"alert\""), "{page}: {}", got.body);
        assert!(!got.body.contains("hooks.example.com"), "{page}");
    }
    for action in ["delete", "secret", "test"] {
        let refused = b
            .post(
                &format!("/dashboard/webhooks/{id}/{action}"),
                &[("csrf_token", &token)],
            )
            .await;
        assert_eq!(
            refused.status,
            StatusCode::FORBIDDEN,
            "{action}: {}",
            refused.body
        );
    }
    let still = s
        .call(
            Method::GET,
            &format!("/v1/webhook-endpoints/{id}"),
            &admin,
            None,
        )
        .await;
    assert_eq!(still.status(), StatusCode::OK, "the editor deleted nothing");

    // An admin sees the tab and the form.
    let admin = person(&s, &s.org(), "hooks-admin@example.com", Role::Admin).await;
    let mut b = Browser::new(&s);
    sign_in(&mut b, admin.email.as_str()).await;
    let page = b.get("/dashboard/webhooks").await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    assert!(page.body.contains(">Webhooks</a>"));
    assert!(page.body.contains("Add an endpoint"));
}

// ---- Activity (D58, D29 continued) ---------------------------------------

/// A link of the page by its `rel` (`prev`, `next`), as a path.
fn rel_link(page: &Page, rel: &str) -> Option<String> {
    let end = page.body.find(&format!("\" rel=\"{rel}\""))?;
    let start = page.body[..end].rfind("href=\"")? + 6;
    Some(
        page.body[start..end]
            .replace("&#x2f;", "/")
            .replace("&amp;", "&"),
    )
}

/// The entries listed on an Activity page.
fn rows(page: &Page) -> usize {
    page.body.matches("<time datetime=\"").count()
}

/// D58: an admin reads the organization's audit log on the Activity page,
/// through `GET /v1/audit-logs`: entries with their time, actor, target and
/// changes; the filters narrow the list (and go to the API, which decides);
/// pages keep the filters; a value the API refuses is an error next to its
/// field, in the page's words, and nothing is listed.
#[tokio::test]
async fn the_activity_page_lists_filters_and_pages_the_audit_log() {
    let s = TestServer::start().await;
    let admin = person(&s, &s.org(), "activity@example.com", Role::Admin).await;
    let t = s
        .token("products:write users:read users:write audit:read")
        .await;
    let mut products = Vec::new();
    for (name, sku) in [
        ("Lamp A", "ACT-A"),
        ("Lamp B", "ACT-B"),
        ("Lamp C", "ACT-C"),
    ] {
        let res = s
            .call(
                Method::POST,
                "/v1/products",
                &t,
                Some(serde_json::json!({"name": name, "sku": sku, "price": 1999, "stock": 0})),
            )
            .await;
        assert_eq!(res.status(), StatusCode::CREATED);
        let body: serde_json::Value = res.json().await.unwrap();
        products.push(body["data"]["id"].as_str().unwrap().to_owned());
    }
    let res = s
        .call(
            Method::POST,
            "/v1/users",
            &t,
            Some(serde_json::json!({"email": "newcomer@example.com", "name": "New Comer", "role": "viewer"})),
        )
        .await;
    assert_eq!(res.status(), StatusCode::CREATED);
    // Listed once sealed (shortly after commit).
    let sealed = crate::audit::audit_once(&s, &t, "?action=product.created", 3).await;
    assert_eq!(sealed["meta"]["total"], 3);
    crate::audit::audit_once(&s, &t, "?action=user.created", 1).await;
    let day = sealed["data"][0]["created_at"].as_str().unwrap()[..10].to_owned();

    let mut b = Browser::new(&s);
    sign_in(&mut b, admin.email.as_str()).await;
    let page = b.get("/dashboard/activity").await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    check_headers(&page);
    assert!(
        page.body.contains(">Activity</a>"),
        "the tab: {}",
        page.body
    );
    assert!(page.body.contains("aria-current=\"page\">Activity</a>"));
    assert!(page.body.contains("<code>product.created</code>"));
    assert!(page.body.contains("<code>user.created</code>"));
    for p in &products {
        assert!(
            page.body
                .contains(&format!("href=\"/dashboard/activity?target={p}\"")),
            "{p}'s entry links to its history"
        );
    }
    // Time, actor and changes of an entry.
    assert!(page.body.contains(&format!("<time datetime=\"{day}T")));
    assert!(page.body.contains(" UTC</time>"));
    assert!(
        page.body.contains("<code>name</code>: none → Lamp A"),
        "a creation's changes, from none: {}",
        page.body
    );
    assert!(
        page.body
            .contains("<span class=\"note\">application</span>")
    );
    // The filter form needs no script: a GET form.
    assert!(
        page.body
            .contains("<form method=\"get\" action=\"/dashboard/activity\"")
    );
    assert!(!page.body.contains("<script>"), "no inline script");

    // Filters narrow: by action prefix.
    let only = b.get("/dashboard/activity?action=product.").await;
    assert_eq!(only.status, StatusCode::OK, "{}", only.body);
    assert_eq!(rows(&only), 3, "{}", only.body);
    assert!(!only.body.contains("<code>user.created</code>"));
    assert!(!only.body.contains("<code>user.signed_in</code>"));
    assert!(
        only.body.contains("value=\"product.\""),
        "the filter stays in its field"
    );
    let users = b
        .get("/dashboard/activity?action=user.&category=admin")
        .await;
    assert!(
        users.body.contains("<code>user.created</code>"),
        "{}",
        users.body
    );
    assert!(!users.body.contains("<code>product.created</code>"));
    assert!(
        !users.body.contains("<code>user.signed_in</code>"),
        "a security entry"
    );
    assert!(users.body.contains("<option value=\"admin\" selected>"));
    // By target.
    let one = b
        .get(&format!("/dashboard/activity?target={}", products[1]))
        .await;
    assert_eq!(rows(&one), 1, "{}", one.body);
    assert!(
        one.body.contains("<details class=\"more\" open>"),
        "the target's field is shown"
    );
    assert!(!page.body.contains("<details class=\"more\" open>"));
    assert!(one.body.contains("Lamp B") && !one.body.contains("Lamp A"));
    // By day: the form's days, the last one included.
    let that_day = b
        .get(&format!(
            "/dashboard/activity?action=product.&from={day}&to={day}"
        ))
        .await;
    assert_eq!(rows(&that_day), 3, "{}", that_day.body);
    let before = b
        .get(&format!(
            "/dashboard/activity?action=product.&to={}",
            day_before(&day)
        ))
        .await;
    assert_eq!(before.status, StatusCode::OK, "{}", before.body);
    assert_eq!(rows(&before), 0, "{}", before.body);
    assert!(before.body.contains("No activity matches these filters."));

    // Pages keep the filters.
    let first = b
        .get("/dashboard/activity?action=product.created&limit=2")
        .await;
    assert_eq!(rows(&first), 2, "{}", first.body);
    assert!(first.body.contains("Entries 1–2 of 3"), "{}", first.body);
    assert!(rel_link(&first, "prev").is_none());
    let next = rel_link(&first, "next").expect("a next page");
    assert_eq!(
        next,
        "/dashboard/activity?action=product.created&limit=2&offset=2"
    );
    let second = b.get(&next).await;
    assert_eq!(rows(&second), 1, "{}", second.body);
    assert!(second.body.contains("Entries 3–3 of 3"));
    assert!(rel_link(&second, "next").is_none());
    assert_eq!(
        rel_link(&second, "prev").as_deref(),
        Some("/dashboard/activity?action=product.created&limit=2")
    );
    let beyond = b
        .get("/dashboard/activity?action=product.created&limit=2&offset=40")
        .await;
    assert_eq!(beyond.status, StatusCode::OK, "{}", beyond.body);
    assert_eq!(rows(&beyond), 0);
    assert!(
        beyond
            .body
            .contains("There are no entries this far into the list."),
        "{}",
        beyond.body
    );
    let bad_page = b.get("/dashboard/activity?offset=-1").await;
    assert_eq!(
        bad_page.status,
        StatusCode::BAD_REQUEST,
        "{}",
        bad_page.body
    );
    assert!(
        bad_page
            .body
            .contains("This page of the list does not exist")
    );
    // Newest first, each product once across the two pages.
    let mut seen: Vec<&String> = products
        .iter()
        .filter(|p| first.body.contains(p.as_str()) || second.body.contains(p.as_str()))
        .collect();
    seen.dedup();
    assert_eq!(seen.len(), 3);
    assert!(first.body.contains(&products[2]) && second.body.contains(&products[0]));

    // A value the API refuses: said next to its field, in words.
    let bad = b
        .get("/dashboard/activity?from=yesterday&action=product.")
        .await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST, "{}", bad.body);
    check_headers(&bad);
    assert!(bad.body.contains("id=\"f-from-error\""), "{}", bad.body);
    assert!(
        bad.body
            .contains("“yesterday” is not a date: choose a day, or leave this empty."),
        "{}",
        bad.body
    );
    assert!(bad.body.contains("aria-describedby=\"f-from-error\""));
    assert!(
        !bad.body.contains("id=\"f-to-error\""),
        "only the bad field"
    );
    assert!(!bad.body.contains("RFC 3339"), "not the API's text");
    assert_eq!(rows(&bad), 0, "nothing listed");
    assert!(
        bad.body.contains("value=\"product.\""),
        "the other filters stay"
    );
    let bad_ip = b.get("/dashboard/activity?ip=not-an-address").await;
    assert_eq!(bad_ip.status, StatusCode::BAD_REQUEST);
    assert!(bad_ip.body.contains("id=\"f-ip-error\""), "{}", bad_ip.body);
}

/// The day before `YYYY-MM-DD`.
fn day_before(day: &str) -> String {
    let t = Timestamp::parse_rfc3339(&format!("{day}T00:00:00Z")).unwrap();
    Timestamp::from_unix_seconds(t.unix_seconds() - 86_400).to_rfc3339()[..10].to_owned()
}

/// D29 (continued): the Activity page is for those who may read the audit
/// log (admins). Others have no tab and no history links, and the page
/// answers 403 with the API's refusal, no form and no entry.
#[tokio::test]
async fn the_activity_page_is_for_admins_only() {
    let s = TestServer::start().await;
    for (email, role) in [
        ("act-editor@example.com", Role::Editor),
        ("act-viewer@example.com", Role::Viewer),
    ] {
        let who = person(&s, &s.org(), email, role).await;
        let mut b = Browser::new(&s);
        sign_in(&mut b, who.email.as_str()).await;
        let apps = b.get("/dashboard/applications").await;
        assert!(apps.body.contains(">Users</a>"), "{}", apps.body);
        assert!(
            !apps.body.contains(">Activity</a>"),
            "{role:?}: {}",
            apps.body
        );
        let page = b.get("/dashboard/activity").await;
        assert_eq!(
            page.status,
            StatusCode::FORBIDDEN,
            "{role:?}: {}",
            page.body
        );
        check_headers(&page);
        assert!(page.body.contains("role=\"alert\""));
        assert!(page.body.contains("Your role does not allow this."));
        assert!(
            !page.body.contains("<form method=\"get\""),
            "no filter form"
        );
        assert_eq!(rows(&page), 0);
        assert!(!page.body.contains(">Activity</a>"));
        let team = b.get("/dashboard/users").await;
        assert!(!team.body.contains("/dashboard/activity?target="));
        // A filtered link changes nothing.
        let filtered = b
            .get("/dashboard/activity?action=user.&from=nonsense")
            .await;
        assert_eq!(filtered.status, StatusCode::FORBIDDEN, "{}", filtered.body);
        assert!(!filtered.body.contains("f-from-error"));
    }
}

/// D58: an application's page, each API key and each person of the team
/// link to their history on the Activity page, which lists what was done to
/// them.
#[tokio::test]
async fn items_link_to_their_history() {
    let s = TestServer::start().await;
    let admin = person(&s, &s.org(), "history@example.com", Role::Admin).await;
    let t = s.token("applications:write users:read audit:read").await;
    let res = s
        .call(
            Method::POST,
            "/v1/applications",
            &t,
            Some(serde_json::json!({
                "name": "History app", "type": "confidential",
                "redirect_uris": ["https://history.example/cb"], "scopes": ["users:read"],
            })),
        )
        .await;
    assert_eq!(res.status(), StatusCode::CREATED);
    let app: serde_json::Value = res.json().await.unwrap();
    let app_id = app["data"]["id"].as_str().unwrap().to_owned();
    let res = s
        .call(
            Method::POST,
            "/v1/api-keys",
            &t,
            Some(serde_json::json!({"name": "history key", "scopes": ["users:read"]})),
        )
        .await;
    assert_eq!(res.status(), StatusCode::CREATED);
    let key: serde_json::Value = res.json().await.unwrap();
    let key_id = key["data"]["id"].as_str().unwrap().to_owned();
    crate::audit::audit_once(&s, &t, &format!("?target={key_id}"), 1).await;
    crate::audit::audit_once(&s, &t, &format!("?target={app_id}"), 1).await;

    let mut b = Browser::new(&s);
    sign_in(&mut b, admin.email.as_str()).await;
    let app_page = b.get(&format!("/dashboard/applications/{app_id}")).await;
    let link = format!("href=\"/dashboard/activity?target={app_id}\"");
    assert!(app_page.body.contains(&link), "{}", app_page.body);
    let keys = b.get("/dashboard/api-keys").await;
    assert!(
        keys.body
            .contains(&format!("href=\"/dashboard/activity?target={key_id}\"")),
        "{}",
        keys.body
    );
    let team = b.get(&format!("/dashboard/users/{}", admin.id)).await;
    assert!(
        team.body
            .contains(&format!("href=\"/dashboard/activity?target={}\"", admin.id)),
        "{}",
        team.body
    );
    // The links lead to the item's own entries.
    let history = b.get(&format!("/dashboard/activity?target={app_id}")).await;
    assert_eq!(history.status, StatusCode::OK, "{}", history.body);
    assert!(history.body.contains("<code>application.created</code>"));
    assert!(!history.body.contains("<code>api_key.created</code>"));
    let history = b.get(&format!("/dashboard/activity?target={key_id}")).await;
    assert!(
        history.body.contains("<code>api_key.created</code>"),
        "{}",
        history.body
    );
    // The admin's own sign-in is a security entry about them.
    let mine = b
        .get(&format!("/dashboard/activity?target={}", admin.id))
        .await;
    assert!(
        mine.body.contains("<code>user.signed_in</code>"),
        "{}",
        mine.body
    );
}

/// Issue 32: an unknown dashboard address is an HTML 404 page — with the
/// navigation for a signed-in person, a plain one otherwise — never the
/// API's JSON.
#[tokio::test]
async fn unknown_dashboard_paths_are_an_html_page_with_the_navigation() {
    let s = TestServer::start().await;
    let admin = person(&s, &s.org(), "lost@example.com", Role::Admin).await;
    let mut b = Browser::new(&s);
    sign_in(&mut b, admin.email.as_str()).await;
    for path in ["/dashboard/nothing-here", "/dashboard/applications/x/y/z"] {
        let page = b.get(path).await;
        assert_eq!(page.status, StatusCode::NOT_FOUND, "{path}: {}", page.body);
        check_headers(&page);
        let ct = page.headers["content-type"].to_str().unwrap();
        assert!(ct.starts_with("text/html"), "{path}: {ct}");
        assert!(page.body.contains("<h1>Not found</h1>"), "{}", page.body);
        assert!(
            page.body.contains("aria-label=\"Dashboard\""),
            "the navigation: {}",
            page.body
        );
        assert!(
            page.body
                .contains(&format!("<code>{}</code>", path.replace('/', "&#x2f;"))),
            "{}",
            page.body
        );
    }
    // The path is escaped like every value (`&` stays raw in a path).
    let page = b.get("/dashboard/a&b").await;
    assert_eq!(page.status, StatusCode::NOT_FOUND);
    assert!(
        page.body
            .contains("<code>&#x2f;dashboard&#x2f;a&amp;b</code>"),
        "{}",
        page.body
    );
    // Signed out: still HTML, and no detour through the sign-in.
    let mut stranger = Browser::new(&s);
    let page = stranger.get("/dashboard/nothing-here").await;
    assert_eq!(page.status, StatusCode::NOT_FOUND, "{}", page.body);
    let ct = page.headers["content-type"].to_str().unwrap();
    assert!(ct.starts_with("text/html"), "{ct}");
    assert!(page.body.contains("Not found"), "{}", page.body);
}

/// The text of an HTML page without its tags (entities as they are).
fn text_of(html: &str) -> String {
    let mut out = String::with_capacity(html.len());
    let mut tag = false;
    for c in html.chars() {
        match c {
            '<' => tag = true,
            '>' => {
                tag = false;
                out.push(' ');
            }
            c if !tag => out.push(c),
            _ => {}
        }
    }
    out.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// An organization whose limits do not bind: a page of a person reads
/// five things through `/v1` with the person's grant (D48), and a test
/// that clicks as fast as it can would pass a pro plan's 50 a second for
/// one credential (D28).
async fn fast_clicking_org(s: &TestServer) -> OrgId {
    let org = gatehouse_domain::Organization {
        id: OrgId::generate(),
        name: "Fast clicks".into(),
        plan: Plan::Enterprise,
        per_minute: Some(1_000_000),
        per_second: Some(100_000),
        created_at: Timestamp::now(),
    };
    s.store().create_org(&org).await.unwrap();
    org.id
}

/// Issue 32: the Users page finds people by search, role and status, a
/// page at a time (D14); a person's page changes their name and role,
/// deactivates and reactivates them, ends their sessions (D57), resends or
/// cancels an invitation and deletes them, naming who takes over their
/// applications (D13). A refused field is said beside it in words.
#[tokio::test]
async fn the_users_page_finds_people_and_manages_each_one() {
    let s = TestServer::start().await;
    let org = fast_clicking_org(&s).await;
    let admin = person(&s, &org, "users-admin@example.com", Role::Admin).await;
    for i in 0..60 {
        let u = NewUser {
            id: UserId::generate(),
            email: Email::parse(&format!("member{i:02}@example.com")).unwrap(),
            name: Name::parse(&format!("Member {i:02}")).unwrap(),
            role: if i % 3 == 0 {
                Role::Editor
            } else {
                Role::Viewer
            },
            status: if i % 2 == 1 {
                UserStatus::PendingInvite
            } else {
                UserStatus::Active
            },
            password_hash: None,
            created_at: Timestamp::now(),
        };
        s.store()
            .insert_user(&org, &u, crate::common::operator())
            .await
            .unwrap();
    }
    let mut b = Browser::new(&s);
    sign_in(&mut b, admin.email.as_str()).await;

    // The old address leads here.
    let team = b.get("/dashboard/team").await;
    assert_eq!(team.status, StatusCode::PERMANENT_REDIRECT);
    assert_eq!(team.location().as_deref(), Some("/dashboard/users"));

    // Paging: 61 people, 50 a page.
    let first = b.get("/dashboard/users").await;
    assert_eq!(first.status, StatusCode::OK, "{}", first.body);
    check_headers(&first);
    let words = text_of(&first.body);
    assert!(words.contains("People 1–50 of 61"), "{words}");
    let links = |html: &str| html.replace("&#x2f;", "/").replace("&amp;", "&");
    assert!(links(&first.body).contains("href=\"/dashboard/users?offset=50\""));
    let second = b.get("/dashboard/users?offset=50").await;
    assert!(text_of(&second.body).contains("People 51–61 of 61"));
    assert!(second.body.contains("rel=\"prev\""));
    // Past the end: a way back, not an empty table.
    let past = b.get("/dashboard/users?offset=500").await;
    assert!(past.body.contains("Go to the first page"), "{}", past.body);

    // Search and filters, kept by the page links.
    let found = b.get("/dashboard/users?q=member0&role=editor").await;
    let words = text_of(&found.body);
    for i in [0, 3, 6, 9] {
        assert!(
            words.contains(&format!("member{i:02}@example.com")),
            "{words}"
        );
    }
    assert!(!words.contains("member01@example.com"), "{words}");
    assert!(!words.contains("member30@example.com"), "{words}");
    let invited = b
        .get("/dashboard/users?status=pending_invite&limit=20")
        .await;
    assert!(
        links(&invited.body)
            .contains("href=\"/dashboard/users?status=pending_invite&limit=20&offset=20\""),
        "{}",
        invited.body
    );
    assert!(!invited.body.contains("\"E-mail\">users-admin@example.com"));
    assert!(second.body.contains("\"E-mail\">users-admin@example.com"));
    let refused = b.get("/dashboard/users?role=owner").await;
    assert_eq!(refused.status, StatusCode::BAD_REQUEST);
    assert!(refused.body.contains("Choose viewer, editor or admin."));
    assert!(
        !refused.body.contains("member00@example.com"),
        "nothing listed"
    );

    // Inviting: a refused field is said beside it, in the page's words.
    let token_field = csrf(&first);
    let bad = b
        .post(
            "/dashboard/users",
            &[
                ("csrf_token", &token_field),
                ("email", "not an address"),
                ("name", "   "),
                ("role", "viewer"),
            ],
        )
        .await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST, "{}", bad.body);
    assert!(
        bad.body.contains("id=\"invite-email-error\""),
        "{}",
        bad.body
    );
    assert!(bad.body.contains(Email::RULE));
    assert!(bad.body.contains("id=\"invite-name-error\""));
    assert!(bad.body.contains("aria-invalid=\"true\""));
    assert!(
        bad.body.contains("value=\"not an address\""),
        "kept as typed"
    );
    assert!(
        !bad.body.contains("must not be empty") && !bad.body.contains("name:"),
        "never the API's words: {}",
        bad.body
    );
    let taken = b
        .post(
            "/dashboard/users",
            &[
                ("csrf_token", &token_field),
                ("email", "member05@example.com"),
                ("name", "Again"),
                ("role", "viewer"),
            ],
        )
        .await;
    assert_eq!(taken.status, StatusCode::CONFLICT);
    assert!(taken.body.contains("already has this e-mail address"));

    // A person: an editor with an application, a key and a session.
    let mate = person(&s, &org, "owner-mate@example.com", Role::Editor).await;
    let mut theirs = Browser::new(&s);
    sign_in(&mut theirs, mate.email.as_str()).await;
    let page = theirs.get("/dashboard/applications/new").await;
    let t = csrf(&page);
    let made = theirs
        .post(
            "/dashboard/applications",
            &[
                ("csrf_token", &t),
                ("name", "Mate's app"),
                ("type", "public"),
                ("redirect_uris", "https://mate.example/cb"),
                ("scope.openid", "on"),
            ],
        )
        .await;
    assert!(made.status.is_success() || made.status.is_redirection());
    let page = theirs.get("/dashboard/api-keys").await;
    let t = csrf(&page);
    let key = theirs
        .post(
            "/dashboard/api-keys",
            &[
                ("csrf_token", &t),
                ("name", "mate key"),
                ("scope.users:read", "on"),
            ],
        )
        .await;
    assert_eq!(key.status, StatusCode::CREATED, "{}", key.body);

    let path = format!("/dashboard/users/{}", mate.id);
    let page = b.get(&path).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    let words = text_of(&page.body);
    assert!(words.contains("Mate's app") || page.body.contains("Mate&#x27;s app"));
    assert!(words.contains("mate key"), "{words}");
    assert!(words.contains("Last sign-in just now"), "{words}");
    assert!(page.body.contains("/sessions/"), "an open session to end");
    assert!(page.body.contains("<time datetime="));

    // Their session, ended from here (D57): their dashboard asks them to
    // sign in again.
    let plain = page.body.replace("&#x2f;", "/");
    let at = plain.find("/sessions/").expect("a session to end") + "/sessions/".len();
    let sid = plain[at..at + plain[at..].find('/').unwrap()].to_owned();
    let t = csrf(&page);
    let ended = b
        .post(&format!("{path}/sessions/{sid}/end"), &[("csrf_token", &t)])
        .await;
    assert_eq!(ended.status, StatusCode::SEE_OTHER, "{}", ended.body);
    let page = b.get(&format!("{path}?done=ended")).await;
    assert!(text_of(&page.body).contains("The session was ended."));
    assert!(
        !page.body.replace("&#x2f;", "/").contains(&sid),
        "gone from the list"
    );
    let out = theirs.get("/dashboard/api-keys").await;
    assert_eq!(
        out.status,
        StatusCode::SEE_OTHER,
        "their dashboard is signed out"
    );

    // A refused status change (the last active admin) leaves the name and
    // role form as stored.
    let mine = format!("/dashboard/users/{}", admin.id);
    let refused = b
        .post(&mine, &[("csrf_token", &t), ("status", "inactive")])
        .await;
    assert_eq!(
        refused.status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "{}",
        refused.body
    );
    assert!(
        refused.body.contains("value=\"Dash Person\""),
        "{}",
        refused.body
    );
    assert!(!refused.body.contains("value=\"None\""));
    assert!(
        refused.body.contains("<option value=\"admin\" selected>"),
        "{}",
        refused.body
    );

    // Name and role together; an empty name is refused beside the field.
    let t = csrf(&page);
    let empty = b
        .post(
            &path,
            &[("csrf_token", &t), ("name", ""), ("role", "viewer")],
        )
        .await;
    assert_eq!(empty.status, StatusCode::BAD_REQUEST);
    assert!(empty.body.contains("id=\"name-error\""));
    assert!(empty.body.contains(Name::RULE));
    let saved = b
        .post(
            &path,
            &[
                ("csrf_token", &t),
                ("name", "Owner Mate"),
                ("role", "editor"),
            ],
        )
        .await;
    assert_eq!(saved.status, StatusCode::SEE_OTHER, "{}", saved.body);
    let now = s.store().get_user(&org, &mate.id).await.unwrap().unwrap();
    assert_eq!(now.name.as_str(), "Owner Mate");

    // Deactivating revokes their key; reactivating brings them back.
    let off = b
        .post(&path, &[("csrf_token", &t), ("status", "inactive")])
        .await;
    assert_eq!(off.status, StatusCode::SEE_OTHER);
    let page = b.get(&format!("{path}?done=deactivated")).await;
    let words = text_of(&page.body);
    assert!(words.contains("their API keys were revoked"), "{words}");
    assert!(
        words.contains("mate key") && words.contains("revoked"),
        "{words}"
    );
    assert!(words.contains("suspended"), "the application: {words}");
    assert!(words.contains("No open session."), "{words}");
    let on = b
        .post(&path, &[("csrf_token", &t), ("status", "active")])
        .await;
    assert_eq!(on.status, StatusCode::SEE_OTHER);

    // Deleting someone who owns an application asks who takes it over.
    let confirm = b.get(&format!("{path}/delete")).await;
    assert_eq!(confirm.status, StatusCode::OK);
    assert!(confirm.body.contains("Who takes over their applications"));
    let t = csrf(&confirm);
    let nobody = b
        .post(
            &format!("{path}/delete"),
            &[("csrf_token", &t), ("transfer_to", "nobody@example.com")],
        )
        .await;
    assert_eq!(nobody.status, StatusCode::BAD_REQUEST);
    assert!(nobody.body.contains("id=\"transfer_to-error\""));
    assert!(s.store().get_user(&org, &mate.id).await.unwrap().is_some());
    let gone = b
        .post(
            &format!("{path}/delete"),
            &[
                ("csrf_token", &t),
                ("transfer_to", "Users-Admin@example.com"),
            ],
        )
        .await;
    assert_eq!(gone.status, StatusCode::SEE_OTHER, "{}", gone.body);
    assert!(s.store().get_user(&org, &mate.id).await.unwrap().is_none());
    let mine = b.get(&format!("/dashboard/users/{}", admin.id)).await;
    assert!(
        text_of(&mine.body).contains("Mate's app") || mine.body.contains("Mate&#x27;s app"),
        "moved to the admin"
    );

    // An invitation: sent again, then cancelled.
    let pending = s
        .store()
        .find_user_by_email(&org, &Email::parse("member01@example.com").unwrap())
        .await
        .unwrap()
        .unwrap()
        .0;
    let path = format!("/dashboard/users/{}", pending.id);
    let page = b.get(&path).await;
    assert!(
        page.body.contains("Send the invitation again"),
        "{}",
        page.body
    );
    let again = b
        .post(&format!("{path}/invitation"), &[("csrf_token", &t)])
        .await;
    assert_eq!(again.status, StatusCode::SEE_OTHER, "{}", again.body);
    let confirm = b.get(&format!("{path}/delete")).await;
    assert!(text_of(&confirm.body).contains("Cancel the invitation of member01@example.com?"));
    let cancelled = b
        .post(
            &format!("{path}/delete"),
            &[("csrf_token", &t), ("invited", "1")],
        )
        .await;
    assert_eq!(cancelled.status, StatusCode::SEE_OTHER);
    assert_eq!(
        cancelled.location().as_deref(),
        Some("/dashboard/users?done=cancelled")
    );
    assert!(
        s.store()
            .get_user(&org, &pending.id)
            .await
            .unwrap()
            .is_none()
    );
}

async fn product_json(s: &TestServer, token: &str, id: &str) -> serde_json::Value {
    let res = s
        .call(Method::GET, &format!("/v1/products/{id}"), token, None)
        .await;
    res.json::<serde_json::Value>().await.unwrap()["data"].clone()
}

/// Issue 32: the Products page. Prices are minor units shown and typed
/// with two decimals and no symbol; stock sets the status unless the
/// product is discontinued (D18); a price the page cannot read is refused
/// beside its field before any request.
#[tokio::test]
async fn the_products_page_adds_changes_discontinues_and_deletes() {
    let s = TestServer::start().await;
    let org = fast_clicking_org(&s).await;
    let editor = person(&s, &org, "catalog@example.com", Role::Editor).await;
    let mut b = Browser::new(&s);
    sign_in(&mut b, editor.email.as_str()).await;
    let list = b.get("/dashboard/products").await;
    assert_eq!(list.status, StatusCode::OK, "{}", list.body);
    check_headers(&list);
    assert!(list.body.contains("Add a product"));
    assert!(
        list.body
            .contains(gatehouse_domain::values::price_text::RULE)
    );
    let t = csrf(&list);

    for (price, why) in [
        ("19.999", "three decimals"),
        ("$5", "a symbol"),
        ("-1", "a sign"),
    ] {
        let bad = b
            .post(
                "/dashboard/products",
                &[
                    ("csrf_token", &t),
                    ("name", "Blue Shirt"),
                    ("sku", "SHIRT-1"),
                    ("price", price),
                    ("stock", "3"),
                ],
            )
            .await;
        assert_eq!(bad.status, StatusCode::BAD_REQUEST, "{why}");
        assert!(
            bad.body.contains("id=\"price-error\""),
            "{why}: {}",
            bad.body
        );
        assert!(bad.body.contains("value=\"Blue Shirt\""), "kept as typed");
    }
    let (client, secret) = s.new_client(&org, "products:read").await;
    let token = s.token_for(&client, &secret, "products:read").await;
    let none = s.call(Method::GET, "/v1/products", &token, None).await;
    let none: serde_json::Value = none.json().await.unwrap();
    assert_eq!(none["meta"]["total"], 0, "nothing was sent to the API");

    let made = b
        .post(
            "/dashboard/products",
            &[
                ("csrf_token", &t),
                ("name", "Blue Shirt"),
                ("sku", "SHIRT-1"),
                ("price", "19.99"),
                ("stock", "3"),
            ],
        )
        .await;
    assert_eq!(made.status, StatusCode::SEE_OTHER, "{}", made.body);
    let path = made.location().unwrap();
    let path = path.split('?').next().unwrap().to_owned();
    let id = path.rsplit('/').next().unwrap().to_owned();
    let p = product_json(&s, &token, &id).await;
    assert_eq!(p["price"], 1999);
    assert_eq!(p["status"], "available");
    let page = b.get(&path).await;
    assert!(page.body.contains("value=\"19.99\""), "{}", page.body);

    // A taken SKU is the SKU's problem.
    let dup = b
        .post(
            "/dashboard/products",
            &[
                ("csrf_token", &t),
                ("name", "Other"),
                ("sku", "SHIRT-1"),
                ("price", "1"),
                ("stock", "0"),
            ],
        )
        .await;
    assert_eq!(dup.status, StatusCode::CONFLICT);
    assert!(dup.body.contains("id=\"sku-error\""));

    // Stock to 0: out of stock; discontinued; back on sale by its stock.
    let saved = b
        .post(
            &path,
            &[
                ("csrf_token", &t),
                ("name", "Blue Shirt"),
                ("sku", "SHIRT-1"),
                ("price", "20"),
                ("stock", "0"),
            ],
        )
        .await;
    assert_eq!(saved.status, StatusCode::SEE_OTHER, "{}", saved.body);
    let p = product_json(&s, &token, &id).await;
    assert_eq!(
        (p["price"].as_i64(), p["status"].as_str()),
        (Some(2000), Some("out_of_stock"))
    );
    let off = b
        .post(&path, &[("csrf_token", &t), ("action", "discontinue")])
        .await;
    assert_eq!(off.status, StatusCode::SEE_OTHER);
    assert_eq!(
        product_json(&s, &token, &id).await["status"],
        "discontinued"
    );
    let filtered = b
        .get("/dashboard/products?status=discontinued&q=blue")
        .await;
    assert!(filtered.body.contains("SHIRT-1"), "{}", filtered.body);
    assert!(filtered.body.contains("20.00"));
    let back = b
        .post(
            &path,
            &[("csrf_token", &t), ("action", "return"), ("stock", "0")],
        )
        .await;
    assert_eq!(back.status, StatusCode::SEE_OTHER, "{}", back.body);
    assert_eq!(
        product_json(&s, &token, &id).await["status"],
        "out_of_stock"
    );
    let other = b.get("/dashboard/products?status=available").await;
    assert!(!other.body.contains("SHIRT-1"));

    // Deleted after a confirmation.
    let confirm = b.get(&format!("{path}/delete")).await;
    assert!(text_of(&confirm.body).contains("Delete Blue Shirt?"));
    let gone = b
        .post(&format!("{path}/delete"), &[("csrf_token", &t)])
        .await;
    assert_eq!(gone.status, StatusCode::SEE_OTHER);
    let res = s
        .call(Method::GET, &format!("/v1/products/{id}"), &token, None)
        .await;
    assert_eq!(res.status(), StatusCode::NOT_FOUND);

    // A viewer reads the catalog but gets no forms.
    let viewer = person(&s, &org, "reader@example.com", Role::Viewer).await;
    let mut v = Browser::new(&s);
    sign_in(&mut v, viewer.email.as_str()).await;
    let list = v.get("/dashboard/products").await;
    assert_eq!(list.status, StatusCode::OK);
    assert!(!list.body.contains("Add the product"));
}

/// Issue 32: the application and API-key forms say a refused field beside
/// it, in the rule's words (never the API's `field: issue`), and keep what
/// was typed, on registration and on a change.
#[tokio::test]
async fn credential_forms_say_refused_fields_beside_them() {
    let s = TestServer::start().await;
    let org = fast_clicking_org(&s).await;
    let admin = person(&s, &org, "forms@example.com", Role::Admin).await;
    let mut b = Browser::new(&s);
    sign_in(&mut b, admin.email.as_str()).await;
    let page = b.get("/dashboard/applications/new").await;
    let t = csrf(&page);
    let refused = b
        .post(
            "/dashboard/applications",
            &[
                ("csrf_token", &t),
                ("name", "Typed app"),
                ("type", "confidential"),
                ("redirect_uris", "http://typed.example/cb"),
            ],
        )
        .await;
    assert!(refused.status.is_client_error(), "{}", refused.body);
    assert!(
        refused.body.contains("id=\"redirect-error\""),
        "{}",
        refused.body
    );
    assert!(
        refused.body.contains("id=\"scopes-error\""),
        "{}",
        refused.body
    );
    assert!(refused.body.contains("aria-invalid=\"true\""));
    assert!(
        refused
            .body
            .contains("http:&#x2f;&#x2f;typed.example&#x2f;cb")
            || refused.body.contains("http://typed.example/cb"),
        "kept as typed"
    );
    assert!(refused.body.contains("value=\"Typed app\""));
    assert!(
        !refused.body.contains("redirect_uris:") && !refused.body.contains("scopes:"),
        "never the API's field: issue: {}",
        refused.body
    );

    // A change: the typed values stay, the refused one is marked.
    let made = b
        .post(
            "/dashboard/applications",
            &[
                ("csrf_token", &t),
                ("name", "Kept app"),
                ("type", "public"),
                ("redirect_uris", "https://kept.example/cb"),
                ("scope.openid", "on"),
            ],
        )
        .await;
    assert_eq!(made.status, StatusCode::SEE_OTHER, "{}", made.body);
    let path = made.location().unwrap();
    let path = path.split('?').next().unwrap().to_owned();
    let changed = b
        .post(
            &path,
            &[
                ("csrf_token", &t),
                ("name", "Renamed app"),
                ("redirect_uris", "https://kept.example/cb#fragment"),
                ("scope.openid", "on"),
            ],
        )
        .await;
    assert!(changed.status.is_client_error(), "{}", changed.body);
    assert!(changed.body.contains("id=\"redirect-error\""));
    assert!(
        changed.body.contains("value=\"Renamed app\""),
        "the typed name stays"
    );
    assert!(
        changed.body.contains("#fragment"),
        "the typed address stays"
    );

    // An API key without a scope.
    let keys = b.get("/dashboard/api-keys").await;
    let k = b
        .post(
            "/dashboard/api-keys",
            &[("csrf_token", &csrf(&keys)), ("name", "no scope")],
        )
        .await;
    assert!(k.status.is_client_error(), "{}", k.body);
    assert!(k.body.contains("id=\"scopes-error\""), "{}", k.body);
    assert!(k.body.contains("value=\"no scope\""));

    // A webhook endpoint: the events, then the address, beside their field.
    let hooks = b.get("/dashboard/webhooks").await;
    let t = csrf(&hooks);
    for (url, events, marked) in [
        ("https://hooks.example/h", "user.*.created!", "events-error"),
        ("http://insecure.example/hook", "*", "url-error"),
    ] {
        let w = b
            .post(
                "/dashboard/webhooks",
                &[
                    ("csrf_token", &t),
                    ("url", url),
                    ("events", events),
                    ("ordering", "none"),
                ],
            )
            .await;
        assert!(w.status.is_client_error(), "{}", w.body);
        assert!(
            w.body.contains(&format!("id=\"{marked}\"")),
            "{marked}: {}",
            w.body
        );
        assert!(
            !w.body.contains("enabled_events:") && !w.body.contains("url:"),
            "{}",
            w.body
        );
    }
}
