//! D56: a second factor on Gatehouse's own sign-in pages. TOTP codes are
//! computed here with an outside implementation (`totp-lite`) from the
//! server's clock (its `Date` header), clear of the last two seconds of a
//! step; recovery codes; the second step's throttles; the organization's
//! policy and its deadline (a short `GATEHOUSE_MFA_GRACE_DAY`); the admin
//! reset; `amr`, `acr` and `auth_time` in tokens, `acr_values` and an
//! Essential `acr`.

use std::time::{Duration, UNIX_EPOCH};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use gatehouse_domain::{Role, Timestamp};
use reqwest::{Method, StatusCode, Url};
use serde_json::{Value, json};

use crate::common::TestServer;
use crate::common::browser::{Browser, Page};
use crate::dashboard::{PASSWORD, person, sign_in};

const REDIRECT: &str = "https://rp.example.com/cb";

/// A confidential relying party of the organization with `openid`.
pub(crate) struct Rp {
    pub(crate) id: String,
    pub(crate) secret: String,
}

pub(crate) async fn rp(s: &TestServer) -> Rp {
    let secret = gatehouse_auth::secrets::new_client_secret();
    let c = gatehouse_store::NewClient {
        id: gatehouse_domain::ClientId::generate(),
        name: "MFA Test RP".into(),
        secret_hash: Some(gatehouse_auth::secrets::hash_secret(&secret)),
        scopes: gatehouse_domain::ScopeSet::parse("openid profile:read").unwrap(),
        redirect_uris: vec![REDIRECT.into()],
        admin_approved: false,
        owner: None,
        created_at: Timestamp::now(),
        post_logout_redirect_uris: vec![],
    };
    s.store()
        .insert_client(&s.org(), &c, crate::common::operator())
        .await
        .unwrap();
    Rp {
        id: c.id.to_string(),
        secret,
    }
}

/// The server's Unix time from its `Date` header, waiting out the last two
/// seconds of a step so a code computed now is still of its step when it
/// arrives.
pub(crate) async fn server_time(s: &TestServer) -> u64 {
    loop {
        let res = s.request(Method::GET, "/healthz").send().await.unwrap();
        let date = res.headers()["date"].to_str().unwrap().to_owned();
        let t = httpdate::parse_http_date(&date)
            .unwrap()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs();
        if t % 30 < 28 {
            return t;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// The TOTP code of `secret` (base32) at Unix time `t`, by `totp-lite`.
pub(crate) fn totp_at(secret: &str, t: u64) -> String {
    let key = data_encoding::BASE32_NOPAD
        .decode(secret.as_bytes())
        .expect("a base32 secret");
    totp_lite::totp_custom::<totp_lite::Sha1>(30, 6, &key, t)
}

/// The text between `start` and the next `end` after it.
fn between<'a>(body: &'a str, start: &str, end: &str) -> &'a str {
    let from = body
        .find(start)
        .unwrap_or_else(|| panic!("{start:?} in {body}"))
        + start.len();
    let len = body[from..].find(end).unwrap();
    &body[from..from + len]
}

pub(crate) fn form_to(page: &Page, action: &str) -> crate::common::browser::Form {
    page.forms()
        .into_iter()
        .find(|f| f.action == action)
        .unwrap_or_else(|| panic!("a form to {action}: {}", page.body))
}

/// Adds an authenticator app on the account page of `b` (signed in):
/// its secret and the recovery codes shown once.
pub(crate) async fn enrol_on_account_page(
    s: &TestServer,
    b: &mut Browser<'_>,
) -> (String, Vec<String>) {
    let page = b.get("/account/security").await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    assert!(
        page.body.contains("Add an authenticator app"),
        "{}",
        page.body
    );
    let page = b.get("/account/security/totp").await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    assert!(
        page.body.contains("<svg role=\"img\""),
        "the QR code, inline"
    );
    let secret = between(&page.body, "<code class=\"secret\">", "</code>").to_owned();
    assert_eq!(secret.len(), 32, "160 bits in base32: {secret}");
    let form = form_to(&page, "/account/security/totp");
    // A wrong code keeps the same secret on the page.
    let wrong = b.submit(&form, &[("code", "000000")]).await;
    if !wrong.body.contains("That code is not right") {
        // 000000 happened to be the code: vanishingly rare, but honest.
        assert_eq!(wrong.status, StatusCode::OK);
    }
    let t = server_time(s).await;
    let codes_page = b.submit(&form, &[("code", &totp_at(&secret, t))]).await;
    assert_eq!(codes_page.status, StatusCode::OK, "{}", codes_page.body);
    let codes: Vec<String> = codes_page
        .body
        .split("<li><code>")
        .skip(1)
        .map(|c| c[..11].to_owned())
        .collect();
    assert_eq!(
        codes.len(),
        10,
        "D56: ten recovery codes: {}",
        codes_page.body
    );
    for c in &codes {
        assert_eq!(c.as_bytes()[5], b'-', "XXXXX-XXXXX: {c}");
    }
    assert!(
        codes_page
            .body
            .contains("download=\"gatehouse-recovery-codes.txt\""),
        "with a download"
    );
    (secret, codes)
}

/// An authorization request of `rp` (extra parameters added), the PKCE
/// verifier kept.
pub(crate) struct Auth {
    verifier: String,
    params: Vec<(String, String)>,
}

impl Auth {
    pub(crate) fn new(rp: &Rp, extra: &[(&str, &str)]) -> Self {
        let verifier = gatehouse_domain::random::base62(256);
        let challenge = gatehouse_auth::pkce::challenge_for(&verifier);
        let mut params: Vec<(String, String)> = [
            ("response_type", "code"),
            ("client_id", rp.id.as_str()),
            ("redirect_uri", REDIRECT),
            ("scope", "openid profile:read"),
            ("state", "st-mfa"),
            ("nonce", "n-mfa"),
            ("code_challenge", challenge.as_str()),
            ("code_challenge_method", "S256"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        params.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        Self { verifier, params }
    }

    pub(crate) async fn start(&self, b: &mut Browser<'_>) -> Page {
        let p: Vec<(&str, &str)> = self
            .params
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        b.authorize(&p).await
    }
}

/// Signs in with the password on a login page; the page after it.
pub(crate) async fn password(b: &mut Browser<'_>, login: &Page, email: &str) -> Page {
    let form = login
        .form_with("password")
        .unwrap_or_else(|| panic!("a login form: {}", login.body));
    b.submit(&form, &[("email", email), ("password", PASSWORD)])
        .await
}

pub(crate) async fn second_factor(b: &mut Browser<'_>, page: &Page, code: &str) -> Page {
    let form = form_to(page, "/oauth/authorize/second-factor");
    b.submit(&form, &[("code", code)]).await
}

/// Allows on a consent page and exchanges the code: the token response.
pub(crate) async fn consent_and_exchange(
    s: &TestServer,
    b: &mut Browser<'_>,
    rp: &Rp,
    auth: &Auth,
    page: &Page,
) -> Value {
    let form = page
        .form_with("decision")
        .unwrap_or_else(|| panic!("a consent page: {}", page.body));
    let back = b.submit(&form, &[("decision", "allow")]).await;
    exchange(s, rp, auth, &back).await
}

pub(crate) async fn exchange(s: &TestServer, rp: &Rp, auth: &Auth, back: &Page) -> Value {
    let location = back
        .location()
        .unwrap_or_else(|| panic!("a redirect: {}", back.body));
    let url = Url::parse(&location).unwrap();
    let code = url
        .query_pairs()
        .find(|(k, _)| k == "code")
        .map(|(_, v)| v.into_owned())
        .unwrap_or_else(|| panic!("a code: {location}"));
    let res = s
        .request(Method::POST, "/oauth/token")
        .basic_auth(&rp.id, Some(&rp.secret))
        .form(&[
            ("grant_type", "authorization_code"),
            ("code", code.as_str()),
            ("redirect_uri", REDIRECT),
            ("code_verifier", auth.verifier.as_str()),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    res.json().await.unwrap()
}

/// Whether `page` is what follows a completed sign-in: the consent page,
/// or (a remembered consent, D49) the redirect back with a code.
fn signed_in(page: &Page) -> bool {
    page.form_with("decision").is_some()
        || page
            .location()
            .is_some_and(|l| l.starts_with(REDIRECT) && l.contains("code="))
}

pub(crate) fn claims(token: &str) -> Value {
    let part = token.split('.').nth(1).unwrap();
    serde_json::from_slice(&B64.decode(part).unwrap()).unwrap()
}

fn redirect_error(back: &Page) -> String {
    let location = back.location().unwrap_or_else(|| panic!("{}", back.body));
    let url = Url::parse(&location).unwrap();
    url.query_pairs()
        .find(|(k, _)| k == "error")
        .map(|(_, v)| v.into_owned())
        .unwrap_or_else(|| panic!("an error: {location}"))
}

/// The `.eml` files written so far whose text contains `needle`.
fn mails(s: &TestServer, needle: &str) -> usize {
    let Ok(rd) = std::fs::read_dir(s.settings.data_dir.join("outbox")) else {
        return 0;
    };
    rd.filter_map(|e| std::fs::read_to_string(e.ok()?.path()).ok())
        .filter(|m| m.contains(needle))
        .count()
}

async fn wait_for_mail(s: &TestServer, needle: &str, n: usize) {
    for _ in 0..100 {
        if mails(s, needle) >= n {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{n} e-mails with {needle:?}");
}

#[tokio::test]
async fn d56_totp_is_enrolled_asked_replay_safe_and_told_in_the_claims() {
    let s = TestServer::start().await;
    let me = person(&s, &s.org(), "totp@example.com", Role::Editor).await;
    let email = me.email.as_str();
    let rp = rp(&s).await;

    // Enrolment on the account page.
    let mut b = Browser::new(&s);
    sign_in(&mut b, email).await;
    let (secret, codes) = enrol_on_account_page(&s, &mut b).await;
    wait_for_mail(&s, "An authenticator app was added", 1).await;
    let admin = s.token("users:write").await;
    let res = s
        .call(
            Method::GET,
            &format!("/v1/users/{}/mfa", me.id),
            &admin,
            None,
        )
        .await;
    assert_eq!(res.status(), StatusCode::OK);
    let listed: Value = res.json().await.unwrap();
    let items = listed["data"].as_array().unwrap();
    assert_eq!(items.len(), 2, "{listed}");
    assert_eq!(items[0]["type"], "totp");
    assert!(items[0]["id"].as_str().unwrap().starts_with("mfa_"));
    assert!(items[0]["last_used_at"].is_null());
    assert_eq!(items[1], json!({"type": "recovery_codes", "remaining": 10}));

    // A sign-in now asks for the code after the password.
    let mut rp_browser = Browser::new(&s);
    let auth = Auth::new(&rp, &[]);
    let login = auth.start(&mut rp_browser).await;
    let step = password(&mut rp_browser, &login, email).await;
    assert_eq!(step.status, StatusCode::OK, "{}", step.body);
    assert!(
        step.body.contains("Enter your sign-in code"),
        "{}",
        step.body
    );
    assert!(
        !rp_browser.jar.contains_key("__Host-gh_session"),
        "no session before the second step"
    );
    // A code of step T−2 is refused; the wrong-code page reads like D26's.
    let t = server_time(&s).await;
    let stale = second_factor(&mut rp_browser, &step, &totp_at(&secret, t - 60)).await;
    assert_eq!(stale.status, StatusCode::UNAUTHORIZED, "T−2 refused");
    assert!(stale.body.contains("That code is not right"));
    // T+1 is accepted.
    let t = server_time(&s).await;
    let next = totp_at(&secret, t + 30);
    let consent = second_factor(&mut rp_browser, &stale, &next).await;
    let tokens = consent_and_exchange(&s, &mut rp_browser, &rp, &auth, &consent).await;
    let id = claims(tokens["id_token"].as_str().unwrap());
    assert_eq!(id["amr"], json!(["pwd", "otp", "mfa"]));
    assert_eq!(id["acr"], "urn:gatehouse:acr:mfa");
    let auth_time = id["auth_time"].as_i64().unwrap();
    assert!((auth_time - t as i64).abs() < 60, "{id}");
    let access = claims(tokens["access_token"].as_str().unwrap());
    assert_eq!(access["amr"], id["amr"]);
    assert_eq!(access["acr"], id["acr"]);
    assert_eq!(access["auth_time"], id["auth_time"]);
    // Introspection tells them too.
    let res = s
        .request(Method::POST, "/oauth/introspect")
        .basic_auth(&rp.id, Some(&rp.secret))
        .form(&[("token", tokens["access_token"].as_str().unwrap())])
        .send()
        .await
        .unwrap();
    let seen: Value = res.json().await.unwrap();
    assert_eq!(seen["amr"], id["amr"]);
    assert_eq!(seen["acr"], "urn:gatehouse:acr:mfa");
    // A refresh keeps the sign-in's claims.
    let res = s
        .request(Method::POST, "/oauth/token")
        .basic_auth(&rp.id, Some(&rp.secret))
        .form(&[
            ("grant_type", "refresh_token"),
            ("refresh_token", tokens["refresh_token"].as_str().unwrap()),
        ])
        .send()
        .await
        .unwrap();
    let refreshed: Value = res.json().await.unwrap();
    let again = claims(refreshed["id_token"].as_str().unwrap());
    assert_eq!(again["amr"], id["amr"]);
    assert_eq!(again["auth_time"], id["auth_time"]);

    // The code just accepted (and any older one) is never accepted again.
    let mut other = Browser::new(&s);
    let auth2 = Auth::new(&rp, &[]);
    let login = auth2.start(&mut other).await;
    let step = password(&mut other, &login, email).await;
    let replay = second_factor(&mut other, &step, &next).await;
    assert_eq!(replay.status, StatusCode::UNAUTHORIZED, "a replay");

    // A recovery code works once, in any case and with spaces.
    let messy = format!(" {} ", codes[0].to_lowercase().replace('-', " "));
    let consent = second_factor(&mut other, &replay, &messy).await;
    assert!(signed_in(&consent), "{}", consent.body);
    wait_for_mail(&s, "A recovery code was used", 1).await;
    let mut third = Browser::new(&s);
    let login = Auth::new(&rp, &[]).start(&mut third).await;
    let step = password(&mut third, &login, email).await;
    let used = second_factor(&mut third, &step, &codes[0]).await;
    assert_eq!(used.status, StatusCode::UNAUTHORIZED, "single-use");
    let res = s
        .call(
            Method::GET,
            &format!("/v1/users/{}/mfa", me.id),
            &admin,
            None,
        )
        .await;
    let listed: Value = res.json().await.unwrap();
    assert_eq!(listed["data"][1]["remaining"], 9);
    assert!(listed["data"][0]["last_used_at"].is_string(), "{listed}");

    // The events.
    let events = s.token("events:read").await;
    let res = s
        .call(
            Method::GET,
            "/v1/events?type=user.mfa_enrolled",
            &events,
            None,
        )
        .await;
    let told: Value = res.json().await.unwrap();
    assert_eq!(told["data"].as_array().unwrap().len(), 1, "{told}");
    let object = &told["data"][0]["data"]["object"];
    assert_eq!(object["type"], "totp");
    assert_eq!(object["user_id"], me.id.as_str());
}

#[tokio::test]
async fn d56_wrong_codes_end_the_attempt_then_block_the_second_step() {
    let s = TestServer::start().await;
    let me = person(&s, &s.org(), "throttle@example.com", Role::Viewer).await;
    let email = me.email.as_str();
    let rp = rp(&s).await;
    let mut b = Browser::new(&s);
    sign_in(&mut b, email).await;
    let (secret, codes) = enrol_on_account_page(&s, &mut b).await;

    // Five wrong codes end the attempt: the password is asked again.
    let mut c = Browser::new(&s);
    let auth = Auth::new(&rp, &[]);
    let login = auth.start(&mut c).await;
    let mut page = password(&mut c, &login, email).await;
    for _ in 0..4 {
        page = second_factor(&mut c, &page, "123456").await;
        assert!(
            page.body.contains("That code is not right"),
            "{}",
            page.body
        );
    }
    let ended = second_factor(&mut c, &page, "123456").await;
    assert!(
        ended.body.contains("Too many wrong codes"),
        "{}",
        ended.body
    );
    assert!(ended.form_with("password").is_some(), "the password again");
    // The spent attempt's cookie gains nothing: a right code is refused.
    let t = server_time(&s).await;
    let stale = second_factor(&mut c, &page, &totp_at(&secret, t + 30)).await;
    assert!(stale.form_with("password").is_some(), "{}", stale.body);

    // Five more (a new attempt): ten in fifteen minutes block the second
    // step from every address; a right TOTP code is refused meanwhile.
    let mut page = password(&mut c, &ended, email).await;
    for _ in 0..4 {
        page = second_factor(&mut c, &page, "654321").await;
    }
    let _ = second_factor(&mut c, &page, "654321").await;
    let mut d = Browser::new(&s);
    let login = Auth::new(&rp, &[]).start(&mut d).await;
    let page = password(&mut d, &login, email).await;
    assert!(
        page.body.contains("Enter your sign-in code"),
        "the password still passes"
    );
    // (T+1: the enrolment spent step T.)
    let t = server_time(&s).await;
    let blocked = second_factor(&mut d, &page, &totp_at(&secret, t + 30)).await;
    assert_eq!(blocked.status, StatusCode::UNAUTHORIZED, "blocked");
    assert!(
        blocked.body.contains("That code is not right"),
        "D26's wording"
    );
    // Recovery codes are accepted during the block.
    let consent = second_factor(&mut d, &blocked, &codes[3]).await;
    assert!(consent.form_with("decision").is_some(), "{}", consent.body);

    // D58: each failed second step is a failed sign-in with its reason,
    // about the person; the recovery code's use is recorded too (never the
    // code itself).
    let t = s.token("audit:read").await;
    let chain = crate::audit::security_chain(&s, &t, "user.recovery_code_used").await;
    let entries = chain["data"].as_array().unwrap();
    let reasons: Vec<&str> = entries
        .iter()
        .filter(|e| e["action"] == "user.sign_in_failed")
        .map(|e| {
            assert_eq!(e["target"]["id"], me.id.as_str(), "{e}");
            assert_eq!(e["outcome"], "failure");
            e["reason"].as_str().unwrap()
        })
        .collect();
    // Four wrong, the fifth ends the attempt (a code sent on the spent
    // attempt never reaches the check); four wrong and one ending; the
    // right code while blocked.
    assert_eq!(
        reasons,
        [
            "mfa_failed",
            "mfa_failed",
            "mfa_failed",
            "mfa_failed",
            "mfa_throttled",
            "mfa_failed",
            "mfa_failed",
            "mfa_failed",
            "mfa_failed",
            "mfa_throttled",
            "mfa_throttled",
        ],
        "{chain}"
    );
    let used: Vec<&Value> = entries
        .iter()
        .filter(|e| e["action"] == "user.recovery_code_used")
        .collect();
    assert_eq!(used.len(), 1);
    assert_eq!(used[0]["target"]["id"], me.id.as_str());
    assert_eq!(used[0]["actor"]["id"], me.id.as_str());
    let text = chain.to_string();
    assert!(codes.iter().all(|c| !text.contains(c.as_str())));
    assert!(!text.contains(&secret));
}

#[tokio::test]
async fn d56_the_policy_its_scopes_deadline_and_step_up() {
    let s = TestServer::start_with(|st| {
        st.test_settings = true;
        st.mfa_grace_day_secs = 3;
    })
    .await;
    let rp = rp(&s).await;
    let me = person(&s, &s.org(), "covered@example.com", Role::Editor).await;
    let email = me.email.as_str();

    // Any token of the organization reads the policy.
    let any = s.token("products:read").await;
    let res = s
        .call(Method::GET, "/v1/organization/security", &any, None)
        .await;
    assert_eq!(res.status(), StatusCode::OK);
    let policy: Value = res.json().await.unwrap();
    assert_eq!(policy["data"]["mfa"], "optional");
    assert_eq!(policy["data"]["enrollment_grace_days"], 7);

    // A person signed in before the policy.
    let mut before = Browser::new(&s);
    let auth = Auth::new(&rp, &[]);
    let login = auth.start(&mut before).await;
    let consent = password(&mut before, &login, email).await;
    assert!(consent.form_with("decision").is_some(), "{}", consent.body);

    // PATCH: an organization-wide credential needs `admin`.
    let body = json!({"mfa": "required", "enrollment_grace_days": 1});
    let res = s
        .call(
            Method::PATCH,
            "/v1/organization/security",
            &s.token("users:write").await,
            Some(body.clone()),
        )
        .await;
    crate::common::expect_error(res, StatusCode::FORBIDDEN, "INSUFFICIENT_SCOPE").await;
    let res = s
        .call(
            Method::PATCH,
            "/v1/organization/security",
            &any,
            Some(json!({"mfa": "sometimes"})),
        )
        .await;
    assert_eq!(res.status(), StatusCode::FORBIDDEN, "scope before the body");
    let admin = s.token("admin").await;
    let res = s
        .call(
            Method::PATCH,
            "/v1/organization/security",
            &admin,
            Some(json!({"mfa": "sometimes"})),
        )
        .await;
    crate::common::expect_error(res, StatusCode::BAD_REQUEST, "VALIDATION_ERROR").await;
    let res = s
        .call(
            Method::PATCH,
            "/v1/organization/security",
            &admin,
            Some(body),
        )
        .await;
    assert_eq!(res.status(), StatusCode::OK);
    let policy: Value = res.json().await.unwrap();
    assert_eq!(policy["data"]["mfa"], "required");
    assert_eq!(policy["data"]["enrollment_grace_days"], 1);
    let events = s.token("events:read").await;
    let res = s
        .call(
            Method::GET,
            "/v1/events?type=organization.security_updated",
            &events,
            None,
        )
        .await;
    let told: Value = res.json().await.unwrap();
    assert_eq!(
        told["data"][0]["data"]["object"]["mfa"], "required",
        "{told}"
    );

    // The existing session is not ended but stepped up: the next
    // authorization asks for the enrolment step (skippable: a day left).
    let page = auth.start(&mut before).await;
    assert!(
        page.body.contains("Set up a second factor"),
        "{}",
        page.body
    );
    assert!(page.body.contains("Skip for now"), "{}", page.body);
    assert!(page.body.contains("1 day left"), "{}", page.body);
    let skipped = b_submit_skip(&mut before, &page).await;
    assert!(skipped.form_with("decision").is_some(), "{}", skipped.body);

    // After the grace day (3 s here), only enrolment continues.
    tokio::time::sleep(Duration::from_secs(4)).await;
    let mut late = Browser::new(&s);
    let auth2 = Auth::new(&rp, &[]);
    let login = auth2.start(&mut late).await;
    let page = password(&mut late, &login, email).await;
    assert!(
        page.body.contains("Set up a second factor"),
        "{}",
        page.body
    );
    assert!(!page.body.contains("Skip for now"), "the deadline passed");
    // D58: the sign-in stopped at the enrolment it needs, recorded.
    let t = s.token("audit:read").await;
    let found = crate::audit::audit_once(&s, &t, "?action=user.sign_in_failed", 1).await;
    assert!(
        found["data"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["reason"] == "enrollment_required" && e["target"]["type"] == "user"),
        "{found}"
    );
    let secret = between(&page.body, "<code class=\"secret\">", "</code>").to_owned();
    let form = form_to(&page, "/oauth/authorize/enrol");
    let t = server_time(&s).await;
    let codes = late.submit(&form, &[("code", &totp_at(&secret, t))]).await;
    assert!(
        codes.body.contains("Save your recovery codes"),
        "{}",
        codes.body
    );
    let cont = between(&codes.body, "class=\"button primary\" href=\"", "\"")
        .replace("&#x2f;", "/")
        .replace("&amp;", "&");
    let consent = late.get(&cont).await;
    let tokens = consent_and_exchange(&s, &mut late, &rp, &auth2, &consent).await;
    let id = claims(tokens["id_token"].as_str().unwrap());
    assert_eq!(id["amr"], json!(["pwd", "otp", "mfa"]));

    // While covered, the account page keeps the last factor.
    let page = follow(&mut late, "/account/security").await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    let remove = page
        .forms()
        .into_iter()
        .find(|f| f.action.ends_with("/remove"))
        .unwrap_or_else(|| panic!("a remove form: {}", page.body));
    let refused = late.submit(&remove, &[]).await;
    assert_eq!(refused.status, StatusCode::CONFLICT, "{}", refused.body);
    assert!(
        refused.body.contains("your last one stays"),
        "{}",
        refused.body
    );
    let res = s
        .call(
            Method::GET,
            &format!("/v1/users/{}/mfa", me.id),
            &s.token("users:write").await,
            None,
        )
        .await;
    let listed: Value = res.json().await.unwrap();
    assert_eq!(listed["data"][0]["type"], "totp", "{listed}");
}

/// GETs `path` and follows our own redirects (the dashboard's sign-in of
/// a signed-in browser).
async fn follow(b: &mut Browser<'_>, path: &str) -> Page {
    let mut page = b.get(path).await;
    for _ in 0..8 {
        let Some(next) = page.location() else { break };
        if page.status != StatusCode::SEE_OTHER && page.status != StatusCode::FOUND {
            break;
        }
        page = b.get(&crate::dashboard::local(&next)).await;
    }
    page
}

async fn b_submit_skip(b: &mut Browser<'_>, page: &Page) -> Page {
    let form = form_to(page, "/oauth/authorize/skip");
    b.submit(&form, &[]).await
}

#[tokio::test]
async fn d56_acr_values_essential_acr_and_prompt_none() {
    let s = TestServer::start().await;
    let rp = rp(&s).await;
    let plain = person(&s, &s.org(), "plain@example.com", Role::Viewer).await;

    // `acr_values` is voluntary: a person without a factor signs in.
    let mut b = Browser::new(&s);
    let auth = Auth::new(
        &rp,
        &[("acr_values", "urn:gatehouse:acr:mfa urn:gatehouse:acr:pwd")],
    );
    let login = auth.start(&mut b).await;
    let consent = password(&mut b, &login, plain.email.as_str()).await;
    let tokens = consent_and_exchange(&s, &mut b, &rp, &auth, &consent).await;
    let id = claims(tokens["id_token"].as_str().unwrap());
    assert_eq!(id["amr"], json!(["pwd"]));
    assert_eq!(
        id["acr"], "urn:gatehouse:acr:pwd",
        "the requested level met"
    );

    // An Essential `acr` the person has no factor for: unmet.
    let essential =
        json!({"id_token": {"acr": {"essential": true, "value": "urn:gatehouse:acr:mfa"}}})
            .to_string();
    let auth = Auth::new(&rp, &[("claims", essential.as_str())]);
    let back = auth.start(&mut b).await;
    assert_eq!(redirect_error(&back), "unmet_authentication_requirements");
    assert!(back.location().unwrap().contains("state=st-mfa"));
    // With prompt=none: login_required.
    let auth = Auth::new(&rp, &[("claims", essential.as_str()), ("prompt", "none")]);
    let back = auth.start(&mut b).await;
    assert_eq!(redirect_error(&back), "login_required");
    // A `claims` that is not JSON is invalid_request.
    let auth = Auth::new(&rp, &[("claims", "{not json")]);
    let back = auth.start(&mut b).await;
    assert_eq!(redirect_error(&back), "invalid_request");

    // A person with a factor, signed in with the password before: the
    // Essential request steps the session up.
    let me = person(&s, &s.org(), "stepup@example.com", Role::Viewer).await;
    let mut c = Browser::new(&s);
    sign_in(&mut c, me.email.as_str()).await;
    let (secret, _) = enrol_on_account_page(&s, &mut c).await;
    // A session begun with the password alone (the dashboard's, before
    // the factor) is stepped up, not ended.
    let auth = Auth::new(&rp, &[("claims", essential.as_str())]);
    let page = auth.start(&mut c).await;
    assert!(
        page.body.contains("Enter your sign-in code"),
        "{}",
        page.body
    );
    // T+1: the enrolment spent step T (D56: it counts as accepted).
    let t = server_time(&s).await;
    let consent = second_factor(&mut c, &page, &totp_at(&secret, t + 30)).await;
    let tokens = consent_and_exchange(&s, &mut c, &rp, &auth, &consent).await;
    let id = claims(tokens["id_token"].as_str().unwrap());
    assert_eq!(id["acr"], "urn:gatehouse:acr:mfa");
    assert_eq!(id["amr"], json!(["pwd", "otp", "mfa"]));
    assert!(
        (id["auth_time"].as_i64().unwrap() - t as i64).abs() < 60,
        "the step-up's time"
    );

    // Discovery.
    let res = s
        .request(Method::GET, "/.well-known/openid-configuration")
        .send()
        .await
        .unwrap();
    let meta: Value = res.json().await.unwrap();
    assert_eq!(meta["claims_parameter_supported"], true);
    assert_eq!(
        meta["acr_values_supported"],
        json!(["urn:gatehouse:acr:pwd", "urn:gatehouse:acr:mfa", "phr"])
    );
    for c in ["amr", "acr", "auth_time"] {
        assert!(
            meta["claims_supported"]
                .as_array()
                .unwrap()
                .contains(&json!(c)),
            "{c}"
        );
    }
}

#[tokio::test]
async fn d56_the_admin_reset_removes_factors_and_signs_the_person_out() {
    let s = TestServer::start().await;
    let rp = rp(&s).await;
    let me = person(&s, &s.org(), "reset@example.com", Role::Viewer).await;
    let mut b = Browser::new(&s);
    sign_in(&mut b, me.email.as_str()).await;
    let (secret, _) = enrol_on_account_page(&s, &mut b).await;
    let mut c = Browser::new(&s);
    let auth = Auth::new(&rp, &[]);
    let login = auth.start(&mut c).await;
    let step = password(&mut c, &login, me.email.as_str()).await;
    // T+1: the enrolment spent step T (D56: it counts as accepted).
    let t = server_time(&s).await;
    let consent = second_factor(&mut c, &step, &totp_at(&secret, t + 30)).await;
    let tokens = consent_and_exchange(&s, &mut c, &rp, &auth, &consent).await;

    // Scopes: users:write.
    let path = format!("/v1/users/{}/mfa", me.id);
    let res = s
        .call(Method::DELETE, &path, &s.token("users:read").await, None)
        .await;
    crate::common::expect_error(res, StatusCode::FORBIDDEN, "INSUFFICIENT_SCOPE").await;
    let admin = s.token("users:write").await;
    let res = s.call(Method::DELETE, &path, &admin, None).await;
    assert_eq!(res.status(), StatusCode::NO_CONTENT);
    let res = s.call(Method::GET, &path, &admin, None).await;
    let listed: Value = res.json().await.unwrap();
    assert_eq!(listed["data"], json!([]));
    // Everything of the person is revoked: the refresh token, the session.
    let res = s
        .request(Method::POST, "/oauth/token")
        .basic_auth(&rp.id, Some(&rp.secret))
        .form(&[
            ("grant_type", "refresh_token"),
            ("refresh_token", tokens["refresh_token"].as_str().unwrap()),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::BAD_REQUEST);
    let res = s
        .call(
            Method::GET,
            "/v1/me",
            tokens["access_token"].as_str().unwrap(),
            None,
        )
        .await;
    assert_eq!(res.status(), StatusCode::UNAUTHORIZED);
    wait_for_mail(&s, "were reset", 1).await;
    // Again: 204, nothing to remove.
    let res = s.call(Method::DELETE, &path, &admin, None).await;
    assert_eq!(res.status(), StatusCode::NO_CONTENT);
    let events = s.token("events:read").await;
    let res = s
        .call(
            Method::GET,
            "/v1/events?type=user.mfa_removed",
            &events,
            None,
        )
        .await;
    let told: Value = res.json().await.unwrap();
    assert_eq!(told["data"].as_array().unwrap().len(), 1, "{told}");
    // The next sign-in asks for no second step.
    let page = Auth::new(&rp, &[]).start(&mut c).await;
    let consent = password(&mut c, &page, me.email.as_str()).await;
    assert!(signed_in(&consent), "{}", consent.body);
    // A stranger's id is 404.
    let res = s
        .call(
            Method::DELETE,
            "/v1/users/usr_000000000000000000000/mfa",
            &admin,
            None,
        )
        .await;
    assert_eq!(res.status(), StatusCode::NOT_FOUND);
}

/// D56: "never": a password reset removes no factor and signs nobody in;
/// the next sign-in, with the new password, still asks for the code.
#[tokio::test]
async fn d56_a_password_reset_keeps_the_factor_and_signs_nobody_in() {
    let s = TestServer::start().await;
    let rp = rp(&s).await;
    let me = person(&s, &s.org(), "forgetful@example.com", Role::Editor).await;
    let email = me.email.as_str();
    let mut b = Browser::new(&s);
    sign_in(&mut b, email).await;
    let _ = enrol_on_account_page(&s, &mut b).await;

    let mut r = Browser::new(&s);
    let page = r
        .get(&format!("/password/forgot?client_id={}", rp.id))
        .await;
    let form = form_to(&page, "/password/forgot");
    let sent = r.submit(&form, &[("email", email)]).await;
    assert_eq!(sent.status, StatusCode::OK, "{}", sent.body);
    let token = crate::invitations::reset_token_for(&s.data_dir(), email).await;
    let page = r.get(&format!("/password/reset/{token}")).await;
    let form = page.form_with("password").expect("the reset form");
    let new = "a fresh passphrase after a reset";
    let done = r
        .submit(&form, &[("password", new), ("confirm", new)])
        .await;
    assert_eq!(done.status, StatusCode::OK, "{}", done.body);
    assert!(
        !r.jar.keys().any(|k| k.ends_with("gh_session")),
        "a reset signs nobody in: {:?}",
        r.jar
    );
    let admin = s.token("users:write").await;
    let listed: Value = s
        .call(
            Method::GET,
            &format!("/v1/users/{}/mfa", me.id),
            &admin,
            None,
        )
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(
        listed["data"][0]["type"], "totp",
        "the factor stays: {listed}"
    );
    // The next sign-in: the new password, then the code.
    let mut c = Browser::new(&s);
    let login = Auth::new(&rp, &[]).start(&mut c).await;
    let form = login.form_with("password").unwrap();
    let step = c
        .submit(&form, &[("email", email), ("password", new)])
        .await;
    assert!(
        step.body.contains("Enter your sign-in code"),
        "{}",
        step.body
    );
}

/// Review of D56's second step: nothing skips it. The skip form of the
/// enrolment step refuses a person who has a factor; the consent form of
/// a session the policy no longer lets through gives no code; tries sent
/// in parallel check no more than five codes of one attempt.
#[tokio::test]
async fn d56_nothing_skips_the_second_step() {
    let s = TestServer::start_with(|st| {
        st.test_settings = true;
        st.mfa_grace_day_secs = 2;
    })
    .await;
    let rp = rp(&s).await;
    let me = person(&s, &s.org(), "no-skip@example.com", Role::Editor).await;
    let email = me.email.as_str();
    let mut b = Browser::new(&s);
    sign_in(&mut b, email).await;
    let (secret, _) = enrol_on_account_page(&s, &mut b).await;

    // The skip form, posted by someone who knows the password only.
    let mut x = Browser::new(&s);
    let login = Auth::new(&rp, &[]).start(&mut x).await;
    let step = password(&mut x, &login, email).await;
    assert!(
        step.body.contains("Enter your sign-in code"),
        "{}",
        step.body
    );
    let mut form = form_to(&step, "/oauth/authorize/second-factor");
    form.action = "/oauth/authorize/skip".into();
    let skipped = x.submit(&form, &[]).await;
    assert!(skipped.location().is_none(), "no redirect with a code");
    assert!(skipped.form_with("password").is_some(), "{}", skipped.body);
    assert!(
        !x.jar.keys().any(|k| k.ends_with("gh_session")),
        "no session"
    );

    // Parallel tries of one attempt: at most five codes are checked, so at
    // most four are answered as merely wrong.
    let mut y = Browser::new(&s);
    let login = Auth::new(&rp, &[]).start(&mut y).await;
    let step = password(&mut y, &login, email).await;
    let form = form_to(&step, "/oauth/authorize/second-factor");
    let cookies = y
        .jar
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join("; ");
    let mut fields = form.hidden.clone();
    fields.push(("code".into(), "000001".into()));
    let tries = (0..12).map(|_| {
        s.request(Method::POST, &form.action)
            .header("cookie", cookies.clone())
            .form(&fields)
            .send()
    });
    let answers = futures_util::future::join_all(tries).await;
    let mut wrong = 0;
    for a in answers {
        let body = a.unwrap().text().await.unwrap();
        if body.contains("That code is not right") {
            wrong += 1;
        }
    }
    // (Tries refused unchecked, when five others were already in, are not
    // wrong codes: a burst checks at most five codes, and may check none.)
    assert!(wrong <= 4, "{wrong} codes checked as merely wrong");
    let _ = &secret;

    // A covered person's password-only session, past the deadline: its
    // consent form gives no code.
    let other = person(&s, &s.org(), "covered-later@example.com", Role::Editor).await;
    let mut z = Browser::new(&s);
    let auth = Auth::new(&rp, &[]);
    let login = auth.start(&mut z).await;
    let consent = password(&mut z, &login, other.email.as_str()).await;
    let decision = consent.form_with("decision").expect("a consent page");
    let admin = s.token("admin").await;
    let res = s
        .call(
            Method::PATCH,
            "/v1/organization/security",
            &admin,
            Some(json!({"mfa": "required", "enrollment_grace_days": 0})),
        )
        .await;
    assert_eq!(res.status(), StatusCode::OK);
    let answer = z.submit(&decision, &[("decision", "allow")]).await;
    assert!(
        !answer.location().is_some_and(|l| l.contains("code=")),
        "no code past the policy: {:?}",
        answer.location()
    );
    assert!(
        answer.body.contains("Set up a second factor"),
        "{}",
        answer.body
    );
    assert!(!answer.body.contains("Skip for now"), "grace 0: no skip");

    // Recovery codes stand in for a factor: none without one.
    let mut w = Browser::new(&s);
    let res = s
        .call(
            Method::PATCH,
            "/v1/organization/security",
            &admin,
            Some(json!({"mfa": "optional"})),
        )
        .await;
    assert_eq!(res.status(), StatusCode::OK);
    let plain = person(&s, &s.org(), "no-codes@example.com", Role::Viewer).await;
    sign_in(&mut w, plain.email.as_str()).await;
    let page = w.get("/account/security").await;
    assert!(
        !page.body.contains("/account/security/recovery-codes"),
        "no codes offered"
    );
    let csrf = w.jar.get("__Host-gh_csrf").cloned().unwrap_or_default();
    let made = w
        .post(
            "/account/security/recovery-codes",
            &[("csrf_token", csrf.as_str())],
        )
        .await;
    assert!(
        !made.body.contains("Save your recovery codes"),
        "{}",
        made.body
    );
    let listed: Value = s
        .call(
            Method::GET,
            &format!("/v1/users/{}/mfa", plain.id),
            &s.token("users:write").await,
            None,
        )
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(listed["data"], json!([]), "{listed}");

    // An Essential `acr` without a value asks nothing (any level meets it).
    let any = json!({"id_token": {"acr": {"essential": true}}}).to_string();
    let auth = Auth::new(&rp, &[("claims", any.as_str())]);
    let login = auth.start(&mut w).await;
    let page = if login.form_with("password").is_some() {
        password(&mut w, &login, plain.email.as_str()).await
    } else {
        login
    };
    assert!(signed_in(&page), "{}", page.body);
}
