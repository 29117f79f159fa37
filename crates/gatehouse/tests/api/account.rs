//! The account page `/account/security` (D57, D19 continued, D29
//! continued): a person's sessions, ending one or all others, the password
//! change; open to every role; a sign-in within five minutes.

use std::time::{Duration, Instant};

use gatehouse_domain::{Role, Timestamp};
use reqwest::StatusCode;
use serde_json::Value;

use crate::common::TestServer;
use crate::common::browser::{Browser, Page, sign_in_for_code};
use crate::dashboard::{PASSWORD, local, person, sign_in};

const REDIRECT: &str = "https://app.example.com/cb";
const NEW_PASSWORD: &str = "another long passphrase for tests";

/// A confidential application of the organization and a refresh token of
/// `email` from it, signed in in `b`.
async fn app_session(s: &TestServer, b: &mut Browser<'_>, email: &str) -> (String, String, String) {
    let secret = gatehouse_auth::secrets::new_client_secret();
    let c = gatehouse_store::NewClient {
        id: gatehouse_domain::ClientId::generate(),
        name: "Account Test App".into(),
        secret_hash: Some(gatehouse_auth::secrets::hash_secret(&secret)),
        scopes: gatehouse_domain::ScopeSet::parse("profile:read").unwrap(),
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
    let (code, verifier) =
        sign_in_for_code(b, c.id.as_str(), REDIRECT, "profile:read", email, PASSWORD).await;
    let res = s
        .request(reqwest::Method::POST, "/oauth/token")
        .basic_auth(c.id.as_str(), Some(&secret))
        .form(&[
            ("grant_type", "authorization_code"),
            ("code", code.as_str()),
            ("redirect_uri", REDIRECT),
            ("code_verifier", verifier.as_str()),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let pair: Value = res.json().await.unwrap();
    (
        c.id.to_string(),
        secret,
        pair["refresh_token"].as_str().unwrap().to_owned(),
    )
}

async fn refresh_status(s: &TestServer, id: &str, secret: &str, rt: &str) -> StatusCode {
    s.request(reqwest::Method::POST, "/oauth/token")
        .basic_auth(id, Some(secret))
        .form(&[("grant_type", "refresh_token"), ("refresh_token", rt)])
        .send()
        .await
        .unwrap()
        .status()
}

fn form_to(page: &Page, action: &str) -> crate::common::browser::Form {
    page.forms()
        .into_iter()
        .find(|f| f.action == action)
        .unwrap_or_else(|| panic!("a form to {action}: {}", page.body))
}

/// The `.eml` files written so far whose subject says the password changed.
fn password_mails(s: &TestServer) -> usize {
    let Ok(rd) = std::fs::read_dir(s.settings.data_dir.join("outbox")) else {
        return 0;
    };
    rd.filter_map(|e| std::fs::read_to_string(e.ok()?.path()).ok())
        .filter(|m| m.contains("Your Gatehouse password was changed"))
        .count()
}

#[tokio::test]
async fn d57_the_account_page_lists_and_ends_sessions_and_changes_the_password() {
    let s = TestServer::start().await;
    // Every role has the page (D29 continued): a viewer here.
    let me = person(&s, &s.org(), "account@example.com", Role::Viewer).await;
    let mut elsewhere = Browser::new(&s);
    let (app, secret, rt) = app_session(&s, &mut elsewhere, me.email.as_str()).await;

    // Not signed in: the dashboard's sign-in, coming back here.
    let mut b = Browser::new(&s);
    let page = b.get("/account/security").await;
    assert_eq!(page.status, StatusCode::SEE_OTHER);
    assert_eq!(
        page.location().as_deref(),
        Some("/dashboard/signin?next=account")
    );
    sign_in(&mut b, me.email.as_str()).await;
    let page = b.get("/account/security").await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    assert!(page.body.contains("this browser"), "{}", page.body);
    assert!(page.body.contains(&app), "the other session's application");
    assert!(page.body.contains("End every other session (1)"));
    assert!(page.body.contains(">Account</a>"), "the tab for every role");

    // End every other session: the application's refresh token dies.
    let form = form_to(&page, "/account/security/sessions/others");
    let done = b.submit(&form, &[]).await;
    assert_eq!(done.status, StatusCode::SEE_OTHER, "{}", done.body);
    assert_eq!(
        done.location().as_deref(),
        Some("/account/security?done=others")
    );
    assert_eq!(
        refresh_status(&s, &app, &secret, &rt).await,
        StatusCode::BAD_REQUEST
    );
    let page = b.get("/account/security?done=others").await;
    assert!(page.body.contains("Every other session was ended"));
    assert!(!page.body.contains("End every other session"));

    // A second sign-in elsewhere, then the password change.
    let mut other = Browser::new(&s);
    let (app2, secret2, rt2) = app_session(&s, &mut other, me.email.as_str()).await;
    let page = b.get("/account/security").await;
    let form = form_to(&page, "/account/security/password");
    // Each refusal shows next to its field and changes nothing.
    for (fields, words) in [
        (
            [
                ("current_password", "not my password at all"),
                ("new_password", NEW_PASSWORD),
                ("new_password_again", NEW_PASSWORD),
            ],
            "That is not your current password",
        ),
        (
            [
                ("current_password", PASSWORD),
                ("new_password", "short"),
                ("new_password_again", "short"),
            ],
            "The new password must be at least 12 characters",
        ),
        (
            [
                ("current_password", PASSWORD),
                ("new_password", NEW_PASSWORD),
                ("new_password_again", "something else entirely"),
            ],
            "The two new passwords differ.",
        ),
    ] {
        let refused = b.submit(&form, &fields).await;
        assert_eq!(
            refused.status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{}",
            refused.body
        );
        assert!(refused.body.contains(words), "{words}: {}", refused.body);
        assert!(refused.body.contains("aria-invalid=\"true\""));
    }
    assert_eq!(
        refresh_status(&s, &app2, &secret2, &rt2).await,
        StatusCode::OK,
        "a refused change ends nothing"
    );
    let page = b.get("/account/security").await;
    let form = form_to(&page, "/account/security/password");
    let done = b
        .submit(
            &form,
            &[
                ("current_password", PASSWORD),
                ("new_password", NEW_PASSWORD),
                ("new_password_again", NEW_PASSWORD),
            ],
        )
        .await;
    assert_eq!(done.status, StatusCode::SEE_OTHER, "{}", done.body);
    assert_eq!(
        done.location().as_deref(),
        Some("/account/security?done=password")
    );
    // The other session ended (its newest refresh token is refused); this
    // one stays.
    let latest = {
        let res = s
            .request(reqwest::Method::POST, "/oauth/token")
            .basic_auth(&app2, Some(&secret2))
            .form(&[
                ("grant_type", "refresh_token"),
                ("refresh_token", rt2.as_str()),
            ])
            .send()
            .await
            .unwrap();
        res.status()
    };
    assert_eq!(latest, StatusCode::BAD_REQUEST);
    let page = b.get("/account/security?done=password").await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(page.body.contains("Your password was changed"));
    // An e-mail tells the person.
    let start = Instant::now();
    while password_mails(&s) == 0 {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "the e-mail is sent"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The new password signs in; the old one no longer does.
    let mut again = Browser::new(&s);
    let login = crate::dashboard::to_login(&mut again).await;
    let form = login.form_with("password").unwrap();
    let refused = again
        .submit(
            &form,
            &[("email", me.email.as_str()), ("password", PASSWORD)],
        )
        .await;
    assert_eq!(refused.status, StatusCode::UNAUTHORIZED);
    let login = crate::dashboard::to_login(&mut again).await;
    let form = login.form_with("password").unwrap();
    let back = again
        .submit(
            &form,
            &[("email", me.email.as_str()), ("password", NEW_PASSWORD)],
        )
        .await;
    assert_eq!(back.status, StatusCode::SEE_OTHER, "{}", back.body);

    // `user.password_changed`, after the session it ended.
    let ops = s.token("events:read").await;
    let all = crate::events::all_after(&s, &ops, 0).await;
    let kinds: Vec<&str> = all
        .iter()
        .map(|e| e["type"].as_str().unwrap())
        .filter(|t| *t == "session.revoked" || *t == "user.password_changed")
        .collect();
    assert_eq!(
        kinds,
        [
            "session.revoked",
            "session.revoked",
            "user.password_changed"
        ],
        "{all:?}"
    );
    crate::events::assert_valid_events(&s, &all).await;
}

/// D56: the page needs a sign-in at most five minutes old; an older one is
/// asked for the password again (`prompt=login`), and comes back here.
#[tokio::test]
async fn d57_the_account_page_asks_an_old_sign_in_for_the_password_again() {
    let s = TestServer::start().await;
    let me = person(&s, &s.org(), "stale@example.com", Role::Editor).await;
    // A browser session that began ten minutes ago.
    let token = gatehouse_domain::random::token("", 256);
    let began = Timestamp::now().plus_seconds(-600);
    let session = gatehouse_domain::session::Session::signed_in(
        &s.org(),
        &me.id,
        &gatehouse_domain::session::BrowserUse::new("127.0.0.1", None),
        &Default::default(),
        began,
    );
    s.store()
        .create_session(
            &s.org(),
            &gatehouse_auth::flows::digest(&token),
            &session,
            &[],
        )
        .await
        .unwrap();
    let mut b = Browser::new(&s);
    b.jar.insert("__Host-gh_session".into(), token);
    // The dashboard signs in at once with it (no password)...
    let start = b.get("/dashboard/signin?next=account").await;
    let authorize = start.location().unwrap();
    assert!(!authorize.contains("prompt=login"));
    let back = b.get(&authorize).await;
    let done = b.get(&local(&back.location().unwrap())).await;
    assert_eq!(done.location().as_deref(), Some("/account/security"));
    // ...but the account page wants a fresh one.
    let page = b.get("/account/security").await;
    assert_eq!(page.status, StatusCode::SEE_OTHER);
    assert_eq!(
        page.location().as_deref(),
        Some("/dashboard/signin?next=account&fresh=1")
    );
    let start = b.get("/dashboard/signin?next=account&fresh=1").await;
    let authorize = start.location().unwrap();
    assert!(authorize.contains("prompt=login"), "{authorize}");
    let login = b.get(&authorize).await;
    assert_eq!(login.status, StatusCode::OK, "the password again");
    let form = login.form_with("password").unwrap();
    let back = b
        .submit(
            &form,
            &[("email", me.email.as_str()), ("password", PASSWORD)],
        )
        .await;
    let done = b.get(&local(&back.location().unwrap())).await;
    assert_eq!(done.location().as_deref(), Some("/account/security"));
    let page = b.get("/account/security").await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    // Both sessions are listed; the new one is this browser's.
    assert!(
        page.body.contains("End every other session (1)"),
        "{}",
        page.body
    );
}
