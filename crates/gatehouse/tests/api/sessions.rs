//! D57: browser sessions a person and an admin see and end, over HTTP, on
//! both backends. A child of `oauth_flow`, whose browser and sign-in
//! helpers it drives.

use std::time::Duration;

use serde_json::json;

use super::*;

const SCOPES: &str = "profile:read profile:write users:read";

/// Signs `email` in to `app` in the browser `b` (a new session when `b`
/// has none) and exchanges the code: the token pair.
async fn sign_in_with(b: &mut Browser<'_>, app: &App, email: &str, scope: &str) -> Value {
    let req = AuthRequest::new(app, Some(scope));
    let consent = to_consent(b, &req, email).await;
    let back = b.decide(&consent, "allow").await;
    let q = back.expect_redirect_to(&req.redirect_uri);
    let code = q.get("code").expect("a code").clone();
    expect_pair(
        exchange(b.s, app, &code, &req.redirect_uri, &req.verifier).await,
        true,
    )
    .await
}

async fn sessions_of(s: &TestServer, token: &str, path: &str) -> Value {
    let res = s.call(Method::GET, path, token, None).await;
    let status = res.status();
    let body: Value = res.json().await.unwrap();
    assert_eq!(status, StatusCode::OK, "{body}");
    body
}

async fn status_of(s: &TestServer, method: Method, path: &str, token: &str) -> StatusCode {
    s.call(method, path, token, None).await.status()
}

/// The refresh of `pair` is refused with `invalid_grant` (its chain was
/// revoked).
async fn refused_refresh(s: &TestServer, app: &App, pair: &Value) {
    let res = refresh(s, app, str_of(pair, "refresh_token")).await;
    assert_eq!(res.status(), StatusCode::BAD_REQUEST);
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["error"], "invalid_grant", "{body}");
}

#[tokio::test]
async fn d57_a_person_sees_their_sessions_and_ends_them() {
    let s = TestServer::start().await;
    let app = register(&s, &s.org(), SCOPES, &[REDIRECT], false, false).await;
    let me = active_user(&s, "sessions@example.com", Role::Editor).await;
    let other = active_user(&s, "stranger@example.com", Role::Editor).await;
    let (mut laptop, mut phone) = (Browser::new(&s), Browser::new(&s));
    let first = sign_in_with(&mut laptop, &app, me.email.as_str(), SCOPES).await;
    tokio::time::sleep(Duration::from_millis(5)).await;
    let second = sign_in_with(&mut phone, &app, me.email.as_str(), SCOPES).await;
    let mut theirs = Browser::new(&s);
    let stranger = sign_in_with(&mut theirs, &app, other.email.as_str(), SCOPES).await;

    let token = str_of(&first, "access_token");
    let body = sessions_of(&s, token, "/v1/me/sessions").await;
    assert_eq!(body["meta"]["total"], 2, "{body}");
    let list = body["data"].as_array().unwrap();
    // Newest first (D14 continued); `current` only on the caller's.
    assert_eq!(list[0]["current"], false);
    assert_eq!(list[1]["current"], true, "{body}");
    assert!(list[0]["created_at"].as_str() > list[1]["created_at"].as_str());
    for item in list {
        assert!(str_of(item, "id").starts_with("ses_"), "{item}");
        assert!(str_of(item, "ip").starts_with("127."), "{item}");
        assert_eq!(item["amr"], json!(["pwd"]));
        assert_eq!(item["applications"], json!([app.id]));
        assert!(item["last_seen_at"].is_string());
        assert!(item.get("user_agent").is_some(), "{item}");
    }
    let (older, newer) = (str_of(&list[1], "id"), str_of(&list[0], "id"));
    // D49: the session's id is the `sid` of its ID tokens' session.
    let theirs_list = sessions_of(&s, str_of(&stranger, "access_token"), "/v1/me/sessions").await;
    let theirs_id = str_of(&theirs_list["data"][0], "id").to_owned();

    // Paging (D14): one per page, the exact total.
    let page = sessions_of(&s, token, "/v1/me/sessions?limit=1&offset=1").await;
    assert_eq!(page["meta"]["total"], 2);
    assert_eq!(page["data"][0]["id"], older);

    // Another person's session, an unknown one, a malformed id: 404.
    for id in [theirs_id.as_str(), "ses_unknown0000", "nope"] {
        let res = s
            .call(
                Method::DELETE,
                &format!("/v1/me/sessions/{id}"),
                token,
                None,
            )
            .await;
        expect_error(res, StatusCode::NOT_FOUND, "RESOURCE_NOT_FOUND").await;
    }
    assert_works(
        &s,
        str_of(&stranger, "access_token"),
        "the stranger's token",
    )
    .await;

    // Ending needs `profile:write`.
    let without = s.token("users:read").await;
    assert_eq!(
        status_of(&s, Method::POST, "/v1/me/sessions/revoke-others", &without).await,
        StatusCode::FORBIDDEN
    );

    // revoke-others: the phone's session ends, with its chain and tokens.
    let res = s
        .call(Method::POST, "/v1/me/sessions/revoke-others", token, None)
        .await;
    let status = res.status();
    let body: Value = res.json().await.unwrap();
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["data"], json!({"revoked": 1}));
    assert!(body["meta"]["request_id"].is_string());
    refused_refresh(&s, &app, &second).await;
    assert_dead(&s, str_of(&second, "access_token"), "the phone's token").await;
    let left = sessions_of(&s, token, "/v1/me/sessions").await;
    assert_eq!(left["meta"]["total"], 1);
    assert_eq!(left["data"][0]["id"], older);
    // The phone's browser is signed out: the next request asks for a password.
    let req = AuthRequest::new(&app, Some(SCOPES));
    phone
        .authorize(&req.params())
        .await
        .expect_login(StatusCode::OK);
    let _ = newer;

    // Ending the caller's own session: its chains go too.
    let res = s
        .call(
            Method::DELETE,
            &format!("/v1/me/sessions/{older}"),
            token,
            None,
        )
        .await;
    assert_eq!(res.status(), StatusCode::NO_CONTENT);
    refused_refresh(&s, &app, &first).await;
    assert_dead(&s, token, "a token of the ended session").await;
    // The stranger's session was never touched.
    expect_pair(
        refresh(&s, &app, str_of(&stranger, "refresh_token")).await,
        true,
    )
    .await;
}

#[tokio::test]
async fn d57_an_admin_lists_and_ends_a_persons_sessions() {
    let s = TestServer::start().await;
    let app = register(&s, &s.org(), SCOPES, &[REDIRECT], false, false).await;
    let me = active_user(&s, "watched@example.com", Role::Viewer).await;
    let other = active_user(&s, "bystander@example.com", Role::Viewer).await;
    let (mut a, mut b, mut c) = (Browser::new(&s), Browser::new(&s), Browser::new(&s));
    let one = sign_in_with(&mut a, &app, me.email.as_str(), SCOPES).await;
    let two = sign_in_with(&mut b, &app, me.email.as_str(), SCOPES).await;
    let theirs = sign_in_with(&mut c, &app, other.email.as_str(), SCOPES).await;

    let path = format!("/v1/users/{}/sessions", me.id);
    let reader = s.token("users:read").await;
    assert_eq!(
        status_of(&s, Method::GET, &path, &reader).await,
        StatusCode::FORBIDDEN,
        "D57: the admin's endpoints need users:write"
    );
    let admin = s.token("users:write").await;
    let body = sessions_of(&s, &admin, &path).await;
    assert_eq!(body["meta"]["total"], 2);
    assert_eq!(body["data"][0]["current"], false);
    let newest = str_of(&body["data"][0], "id").to_owned();
    let their_id = str_of(
        &sessions_of(&s, &admin, &format!("/v1/users/{}/sessions", other.id)).await["data"][0],
        "id",
    )
    .to_owned();
    // Unknown person: 404; a session that is another person's: 404.
    assert_eq!(
        status_of(
            &s,
            Method::GET,
            &format!("/v1/users/{}/sessions", UserId::generate()),
            &admin
        )
        .await,
        StatusCode::NOT_FOUND
    );
    let res = s
        .call(Method::DELETE, &format!("{path}/{their_id}"), &admin, None)
        .await;
    expect_error(res, StatusCode::NOT_FOUND, "RESOURCE_NOT_FOUND").await;
    assert_works(&s, str_of(&theirs, "access_token"), "the bystander").await;

    // One session.
    let res = s
        .call(Method::DELETE, &format!("{path}/{newest}"), &admin, None)
        .await;
    assert_eq!(res.status(), StatusCode::NO_CONTENT);
    refused_refresh(&s, &app, &two).await;
    expect_pair(refresh(&s, &app, str_of(&one, "refresh_token")).await, true).await;
    // All of them (204 also when none is left afterwards).
    for _ in 0..2 {
        let res = s.call(Method::DELETE, &path, &admin, None).await;
        assert_eq!(res.status(), StatusCode::NO_CONTENT);
    }
    assert_eq!(sessions_of(&s, &admin, &path).await["meta"]["total"], 0);
    assert_dead(
        &s,
        str_of(&one, "access_token"),
        "the first session's token",
    )
    .await;
    expect_pair(
        refresh(&s, &app, str_of(&theirs, "refresh_token")).await,
        true,
    )
    .await;
}

/// D57: the browser sign-in ends after `GATEHOUSE_SESSION_IDLE` without use
/// or `GATEHOUSE_SESSION_MAX` after it began; neither revokes anything: the
/// refresh token still works and the session stays listed while its chain
/// lives.
#[tokio::test]
async fn d57_idle_and_absolute_expiry_end_the_sign_in_but_not_the_tokens() {
    let s = TestServer::start_with(|settings| {
        settings.test_settings = true;
        settings.session_limits.idle_secs = 2;
        settings.session_limits.max_secs = 5;
    })
    .await;
    let app = register(&s, &s.org(), SCOPES, &[REDIRECT], false, false).await;
    let me = active_user(&s, "expiry@example.com", Role::Editor).await;

    // Idle: nothing for longer than 2 s.
    let mut b = Browser::new(&s);
    let pair = sign_in_with(&mut b, &app, me.email.as_str(), SCOPES).await;
    tokio::time::sleep(Duration::from_millis(2600)).await;
    let req = AuthRequest::new(&app, Some(SCOPES));
    b.authorize(&req.params())
        .await
        .expect_login(StatusCode::OK);
    let pair = expect_pair(
        refresh(&s, &app, str_of(&pair, "refresh_token")).await,
        true,
    )
    .await;
    let listed = sessions_of(&s, str_of(&pair, "access_token"), "/v1/me/sessions").await;
    assert_eq!(
        listed["meta"]["total"], 1,
        "listed while its chain lives: {listed}"
    );
    assert_eq!(listed["data"][0]["current"], true);

    // Absolute: used every half second, it still ends 5 s after it began.
    let mut b = Browser::new(&s);
    sign_in_with(&mut b, &app, me.email.as_str(), SCOPES).await;
    let began = std::time::Instant::now();
    while began.elapsed() < Duration::from_millis(3800) {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let page = b
            .authorize(&AuthRequest::new(&app, Some(SCOPES)).params())
            .await;
        page.expect_consent();
    }
    assert!(
        began.elapsed() > Duration::from_secs(2),
        "kept past the idle time by use"
    );
    tokio::time::sleep(Duration::from_millis(5600).saturating_sub(began.elapsed())).await;
    b.authorize(&AuthRequest::new(&app, Some(SCOPES)).params())
        .await
        .expect_login(StatusCode::OK);
}

/// D54, D57: a sign-in tells `user.signed_in` (the session, the client
/// signed in to as `actor.client_id`); an explicit end tells
/// `session.revoked`, the session as it was.
#[tokio::test]
async fn d57_sign_ins_and_ends_are_told() {
    // Counts the events exactly: without D58's audit checkpoints, whose
    // `audit.checkpoint` comes when the sealer first reaches a chain, at a
    // moment no test can fix.
    let s = TestServer::start_with(|c| c.audit.checkpoints = false).await;
    let app = register(&s, &s.org(), SCOPES, &[REDIRECT], false, false).await;
    let me = active_user(&s, "told@example.com", Role::Editor).await;
    let ops = s.token("events:read").await;
    let start = crate::events::all_after(&s, &ops, 0).await.len() as i64;
    let mut b = Browser::new(&s);
    let pair = sign_in_with(&mut b, &app, me.email.as_str(), SCOPES).await;
    let res = s
        .call(
            Method::POST,
            "/v1/me/sessions/revoke-others",
            str_of(&pair, "access_token"),
            None,
        )
        .await;
    assert_eq!(res.status(), StatusCode::OK);
    let listed = sessions_of(&s, str_of(&pair, "access_token"), "/v1/me/sessions").await;
    let id = str_of(&listed["data"][0], "id").to_owned();
    let res = s
        .call(
            Method::DELETE,
            &format!("/v1/me/sessions/{id}"),
            str_of(&pair, "access_token"),
            None,
        )
        .await;
    assert_eq!(res.status(), StatusCode::NO_CONTENT);
    let all = crate::events::all_after(&s, &ops, start).await;
    let kinds: Vec<&str> = all.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["user.signed_in", "session.revoked"], "{all:?}");
    let signed = &all[0];
    assert_eq!(signed["actor"]["type"], "user");
    assert_eq!(signed["actor"]["id"], me.id.as_str());
    assert_eq!(signed["actor"]["client_id"], app.id.as_str());
    assert_eq!(signed["data"]["object"]["id"], id.as_str());
    assert_eq!(signed["data"]["object"]["amr"], json!(["pwd"]));
    assert!(signed["data"]["object"].get("current").is_none());
    let ended = &all[1];
    assert_eq!(ended["data"]["object"]["id"], id.as_str());
    assert_eq!(ended["data"]["object"]["applications"], json!([app.id]));
    assert_eq!(ended["actor"]["client_id"], app.id.as_str());
    crate::events::assert_valid_events(&s, &all).await;
}
