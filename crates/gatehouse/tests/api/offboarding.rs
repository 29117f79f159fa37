//! Ownership and offboarding (D46 revised, issue 24): whatever a person
//! creates is theirs, whatever their role, and what a credential creates is
//! its owner's; deactivating an owner suspends their applications, moving
//! one away from a leaver needs a new secret, and narrowing an application
//! revokes exactly what carries the removed scope. Each test drives the
//! server over HTTPS as an outside client would. A child of `oauth_flow`
//! (its sign-in helpers) beside `management` (its callers), so it runs on
//! SQLite here and on PostgreSQL in `api_postgres`.

use serde_json::json;

use super::management::{cc_status, console, create_app, json_of, person_token};
use super::*;

/// What an admin may do here through the console.
const ADMIN_SCOPES: &str =
    "applications:read applications:write users:read users:write products:read products:write";

/// A client-credentials access token for `id`/`secret` with `scope`.
async fn cc_token(s: &TestServer, id: &str, secret: &str, scope: &str) -> String {
    let res = s
        .request(Method::POST, "/oauth/token")
        .basic_auth(id, Some(secret))
        .form(&[("grant_type", "client_credentials"), ("scope", scope)])
        .send()
        .await
        .unwrap();
    let body = json_of(res, StatusCode::OK).await;
    body["access_token"].as_str().unwrap().to_owned()
}

/// client_credentials for `id`/`secret`: D46 (revised)'s refusal of a
/// suspended application, `invalid_client` with "application suspended".
async fn expect_suspended(s: &TestServer, id: &str, secret: &str) {
    let res = s
        .request(Method::POST, "/oauth/token")
        .basic_auth(id, Some(secret))
        .form(&[("grant_type", "client_credentials")])
        .send()
        .await
        .unwrap();
    let body = expect_oauth_error(res, StatusCode::UNAUTHORIZED, "invalid_client").await;
    assert_eq!(body["error_description"], "application suspended", "{body}");
}

/// A `GET /v1/products` with `token`: its status.
async fn products_status(s: &TestServer, token: &str) -> StatusCode {
    s.call(Method::GET, "/v1/products", token, None)
        .await
        .status()
}

/// An API key made with `token`: (id, key, owner_id).
async fn new_key(s: &TestServer, token: &str, scopes: Value) -> (String, String, Value) {
    let k = json_of(
        s.call(
            Method::POST,
            "/v1/api-keys",
            token,
            Some(json!({"name": "k", "scopes": scopes})),
        )
        .await,
        StatusCode::CREATED,
    )
    .await;
    (
        k["data"]["id"].as_str().unwrap().to_owned(),
        k["data"]["key"].as_str().unwrap().to_owned(),
        k["data"]["owner_id"].clone(),
    )
}

/// A confidential application made with `token`: (id, secret, owner_id).
async fn new_app(s: &TestServer, token: &str, scopes: Value) -> (String, String, Value) {
    let a = json_of(
        create_app(
            s,
            token,
            json!({"name": "a", "type": "confidential", "redirect_uris": [REDIRECT], "scopes": scopes}),
        )
        .await,
        StatusCode::CREATED,
    )
    .await;
    (
        a["data"]["id"].as_str().unwrap().to_owned(),
        a["data"]["client_secret"].as_str().unwrap().to_owned(),
        a["data"]["owner_id"].clone(),
    )
}

/// A public application made with `token`: its id.
async fn new_public_app(s: &TestServer, token: &str) -> String {
    json_of(
        create_app(
            s,
            token,
            json!({"name": "p", "type": "public", "redirect_uris": [REDIRECT], "scopes": ["products:read"]}),
        )
        .await,
        StatusCode::CREATED,
    )
    .await["data"]["id"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// `PATCH /v1/users/{id}` with an organization-wide token.
async fn set_user(s: &TestServer, id: &str, body: Value) {
    let admin = s.token("users:write").await;
    json_of(
        s.call(
            Method::PATCH,
            &format!("/v1/users/{id}"),
            &admin,
            Some(body),
        )
        .await,
        StatusCode::OK,
    )
    .await;
}

async fn application(s: &TestServer, token: &str, id: &str) -> Value {
    json_of(
        s.call(Method::GET, &format!("/v1/applications/{id}"), token, None)
            .await,
        StatusCode::OK,
    )
    .await["data"]
        .clone()
}

#[tokio::test]
async fn d46_revised_what_an_admin_or_its_credentials_create_is_the_admins_and_dies_with_its_deactivation()
 {
    let s = TestServer::start().await;
    let c = console(&s).await;
    let boss = active_user(&s, "boss@example.com", Role::Admin).await;
    active_user(&s, "other-admin@example.com", Role::Admin).await;
    let admin = person_token(&s, &c, "boss@example.com", ADMIN_SCOPES).await;
    let me = json!(boss.id.to_string());

    // An admin's key and application are the admin's (they were null).
    let (_, key, owner) = new_key(
        &s,
        &admin,
        json!(["users:write", "applications:write", "products:read"]),
    )
    .await;
    assert_eq!(owner, me, "D46 revised: an admin owns the key it creates");
    let (app_id, app_secret, owner) =
        new_app(&s, &admin, json!(["applications:write", "products:read"])).await;
    assert_eq!(
        owner, me,
        "D46 revised: an admin owns the application it creates"
    );

    // What the admin's credentials create is the admin's too.
    let (_, key_of_key, owner) = new_key(&s, &key, json!(["products:read"])).await;
    assert_eq!(owner, me, "a key made with a key is the key owner's");
    let app_token = cc_token(&s, &app_id, &app_secret, "applications:write products:read").await;
    let (_, key_of_app, owner) = new_key(&s, &app_token, json!(["products:read"])).await;
    assert_eq!(
        owner, me,
        "a key made with an application's token is the application owner's"
    );
    let (_, _, owner) = new_app(&s, &key, json!(["products:read"])).await;
    assert_eq!(
        owner, me,
        "an application made with a key is the key owner's"
    );
    for k in [&key, &key_of_key, &key_of_app, &app_token] {
        assert_eq!(products_status(&s, k).await, StatusCode::OK);
    }

    // Deactivated, the admin takes all of it away.
    set_user(&s, boss.id.as_str(), json!({"status": "inactive"})).await;
    for (what, k) in [
        ("the admin's key", &key),
        ("the key's key", &key_of_key),
        ("the application's key", &key_of_app),
        ("the application's earlier token", &app_token),
    ] {
        assert_eq!(
            products_status(&s, k).await,
            StatusCode::UNAUTHORIZED,
            "{what} dies with its owner's deactivation"
        );
    }
    // The key can no longer make a new admin (the finding).
    expect_error(
        s.call(
            Method::POST,
            "/v1/users",
            &key,
            Some(json!({"email": "mallory@example.com", "name": "M", "role": "admin"})),
        )
        .await,
        StatusCode::UNAUTHORIZED,
        "INVALID_TOKEN",
    )
    .await;
    expect_suspended(&s, &app_id, &app_secret).await;
}

#[tokio::test]
async fn d46_revised_a_demoted_admins_key_loses_what_the_new_role_lacks() {
    let s = TestServer::start().await;
    let c = console(&s).await;
    let boss = active_user(&s, "boss@example.com", Role::Admin).await;
    active_user(&s, "other-admin@example.com", Role::Admin).await;
    let admin = person_token(&s, &c, "boss@example.com", ADMIN_SCOPES).await;
    let (_, writer, _) = new_key(&s, &admin, json!(["users:write"])).await;
    let (_, reader, _) = new_key(&s, &admin, json!(["products:read"])).await;
    let (app_id, _, _) = new_app(&s, &admin, json!(["users:write", "products:read"])).await;

    set_user(&s, boss.id.as_str(), json!({"role": "editor"})).await;
    expect_error(
        s.call(
            Method::PATCH,
            &format!("/v1/users/{}", boss.id),
            &writer,
            Some(json!({"name": "Changed"})),
        )
        .await,
        StatusCode::UNAUTHORIZED,
        "INVALID_TOKEN",
    )
    .await;
    assert_eq!(
        products_status(&s, &reader).await,
        StatusCode::OK,
        "a key within the new role stays"
    );
    let org_wide = s.token("applications:read").await;
    assert_eq!(
        application(&s, &org_wide, &app_id).await["scopes"],
        json!(["products:read"]),
        "the demoted admin's application is narrowed"
    );
}

#[tokio::test]
async fn d46_revised_a_deleted_admins_application_needs_an_heir_and_a_new_secret() {
    let s = TestServer::start().await;
    let c = console(&s).await;
    let boss = active_user(&s, "boss@example.com", Role::Admin).await;
    let heir = active_user(&s, "heir@example.com", Role::Admin).await;
    let admin = person_token(&s, &c, "boss@example.com", ADMIN_SCOPES).await;
    let (app_id, secret, _) =
        new_app(&s, &admin, json!(["applications:write", "products:read"])).await;
    let public = new_public_app(&s, &admin).await;
    let before = cc_token(&s, &app_id, &secret, "applications:write products:read").await;

    // D13: the admin's applications block a plain delete now that they are
    // recorded as the admin's.
    let ops = s.token("users:write applications:read").await;
    expect_error(
        s.call(
            Method::DELETE,
            &format!("/v1/users/{}", boss.id),
            &ops,
            None,
        )
        .await,
        StatusCode::UNPROCESSABLE_ENTITY,
        "OWNED_RESOURCES_EXIST",
    )
    .await;
    let gone = s
        .call(
            Method::DELETE,
            &format!("/v1/users/{}?transfer_to={}", boss.id, heir.id),
            &ops,
            None,
        )
        .await;
    assert_eq!(gone.status(), StatusCode::NO_CONTENT);

    // Handed on, the confidential one refuses the secret the leaver holds,
    // and its earlier token is dead; the public one works at once.
    let moved = application(&s, &ops, &app_id).await;
    assert_eq!(moved["owner_id"], heir.id.to_string());
    assert_eq!(moved["suspended_reason"], "secret_rotation_required");
    expect_suspended(&s, &app_id, &secret).await;
    assert_eq!(products_status(&s, &before).await, StatusCode::UNAUTHORIZED);
    expect_error(
        s.call(
            Method::POST,
            "/v1/api-keys",
            &before,
            Some(json!({"name": "late", "scopes": ["products:read"]})),
        )
        .await,
        StatusCode::UNAUTHORIZED,
        "INVALID_TOKEN",
    )
    .await;
    assert_eq!(
        application(&s, &ops, &public).await["suspended_reason"],
        Value::Null
    );

    // Only a rotation with no grace lifts it.
    let manage = s.token("applications:write products:read").await;
    let path = format!("/v1/applications/{app_id}/secret");
    expect_error(
        s.call(
            Method::POST,
            &path,
            &manage,
            Some(json!({"grace_seconds": 60})),
        )
        .await,
        StatusCode::UNPROCESSABLE_ENTITY,
        "INVALID_STATE_TRANSITION",
    )
    .await;
    expect_suspended(&s, &app_id, &secret).await;
    let rotated = json_of(
        s.call(Method::POST, &path, &manage, None).await,
        StatusCode::CREATED,
    )
    .await;
    let new_secret = rotated["data"]["client_secret"].as_str().unwrap();
    assert_eq!(
        rotated["data"]["suspended_reason"],
        Value::Null,
        "{rotated}"
    );
    assert_eq!(cc_status(&s, &app_id, new_secret).await, StatusCode::OK);
    expect_oauth_error(
        s.request(Method::POST, "/oauth/token")
            .basic_auth(&app_id, Some(&secret))
            .form(&[("grant_type", "client_credentials")])
            .send()
            .await
            .unwrap(),
        StatusCode::UNAUTHORIZED,
        "invalid_client",
    )
    .await;
    assert_eq!(
        products_status(&s, &before).await,
        StatusCode::UNAUTHORIZED,
        "tokens from before the suspension stay refused for good"
    );
}

#[tokio::test]
async fn d46_revised_deactivation_suspends_owned_applications_until_the_owner_returns_or_an_admin_moves_them()
 {
    let s = TestServer::start().await;
    let c = console(&s).await;
    let owner = active_user(&s, "owner@example.com", Role::Editor).await;
    let taker = active_user(&s, "taker@example.com", Role::Editor).await;
    let idle = user_with_password(
        &s,
        &s.org(),
        "idle@example.com",
        Role::Editor,
        UserStatus::Inactive,
    )
    .await;
    active_user(&s, "person@example.com", Role::Viewer).await;
    let editor_scopes = "applications:read applications:write products:read products:write";
    let ed = person_token(&s, &c, "owner@example.com", editor_scopes).await;
    let (app_id, secret, owner_id) = new_app(&s, &ed, json!(["products:read"])).await;
    assert_eq!(owner_id, json!(owner.id.to_string()));
    let app = App {
        id: app_id.clone(),
        secret: Some(secret.clone()),
    };
    // A person's sign-in through the application: a refresh chain.
    let pair = pair_for(&s, &app, "person@example.com", Some("products:read")).await;
    let rt = str_of(&pair, "refresh_token").to_owned();
    let before = cc_token(&s, &app_id, &secret, "products:read").await;
    let user_token = str_of(&pair, "access_token").to_owned();

    set_user(&s, owner.id.as_str(), json!({"status": "inactive"})).await;
    let org_wide = s.token("applications:read applications:write").await;
    assert_eq!(
        application(&s, &org_wide, &app_id).await["suspended_reason"],
        "owner_inactive"
    );
    expect_suspended(&s, &app_id, &secret).await;
    for t in [&before, &user_token] {
        assert_eq!(
            products_status(&s, t).await,
            StatusCode::UNAUTHORIZED,
            "access tokens issued to a suspended application are refused"
        );
    }
    let body = expect_oauth_error(
        refresh(&s, &app, &rt).await,
        StatusCode::UNAUTHORIZED,
        "invalid_client",
    )
    .await;
    assert_eq!(body["error_description"], "application suspended");
    // Revocation and introspection authenticate the client too.
    for res in [
        revoke(&s, &app, &before).await,
        post_as(&s, &app, "/oauth/introspect", &[("token", before.as_str())]).await,
    ] {
        let body = expect_oauth_error(res, StatusCode::UNAUTHORIZED, "invalid_client").await;
        assert_eq!(body["error_description"], "application suspended");
    }
    // The list's filter.
    let ids = |v: Value| -> Vec<String> {
        v["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a["id"].as_str().unwrap().to_owned())
            .collect()
    };
    let suspended = json_of(
        s.call(
            Method::GET,
            "/v1/applications?suspended=true",
            &org_wide,
            None,
        )
        .await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(ids(suspended), vec![app_id.clone()]);
    let working = json_of(
        s.call(
            Method::GET,
            "/v1/applications?suspended=false",
            &org_wide,
            None,
        )
        .await,
        StatusCode::OK,
    )
    .await;
    assert!(!ids(working).contains(&app_id));
    expect_error(
        s.call(
            Method::GET,
            "/v1/applications?suspended=maybe",
            &org_wide,
            None,
        )
        .await,
        StatusCode::BAD_REQUEST,
        "VALIDATION_ERROR",
    )
    .await;

    // Active again: the application works again, its refresh chain too;
    // its earlier access tokens stay refused for good.
    set_user(&s, owner.id.as_str(), json!({"status": "active"})).await;
    assert_eq!(
        application(&s, &org_wide, &app_id).await["suspended_reason"],
        Value::Null
    );
    assert_eq!(cc_status(&s, &app_id, &secret).await, StatusCode::OK);
    let renewed = expect_pair(refresh(&s, &app, &rt).await, true).await;
    let rt = str_of(&renewed, "refresh_token").to_owned();
    assert_eq!(products_status(&s, &before).await, StatusCode::UNAUTHORIZED);

    // Deactivated again, then moved: who may move it, and to whom.
    set_user(&s, owner.id.as_str(), json!({"status": "inactive"})).await;
    let path = format!("/v1/applications/{app_id}");
    let ed_taker = person_token(&s, &c, "taker@example.com", editor_scopes).await;
    let (own_app, _, _) = new_app(&s, &ed_taker, json!(["products:read"])).await;
    expect_error(
        s.call(
            Method::PATCH,
            &format!("/v1/applications/{own_app}"),
            &ed_taker,
            Some(json!({"owner_id": owner.id.to_string()})),
        )
        .await,
        StatusCode::FORBIDDEN,
        "INSUFFICIENT_SCOPE",
    )
    .await;
    let stranger = UserId::generate().to_string();
    expect_error(
        s.call(
            Method::PATCH,
            &path,
            &org_wide,
            Some(json!({"owner_id": stranger})),
        )
        .await,
        StatusCode::NOT_FOUND,
        "RESOURCE_NOT_FOUND",
    )
    .await;
    expect_error(
        s.call(
            Method::PATCH,
            &path,
            &org_wide,
            Some(json!({"owner_id": idle.id.to_string()})),
        )
        .await,
        StatusCode::UNPROCESSABLE_ENTITY,
        "INVALID_STATE_TRANSITION",
    )
    .await;
    let moved = json_of(
        s.call(
            Method::PATCH,
            &path,
            &org_wide,
            Some(json!({"owner_id": taker.id.to_string()})),
        )
        .await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(moved["data"]["owner_id"], taker.id.to_string());
    assert_eq!(
        moved["data"]["suspended_reason"],
        "secret_rotation_required"
    );
    // The leaver's secret stays refused, even once they are back.
    set_user(&s, owner.id.as_str(), json!({"status": "active"})).await;
    expect_suspended(&s, &app_id, &secret).await;
    let rotated = json_of(
        s.call(
            Method::POST,
            &format!("{path}/secret"),
            &s.token("applications:write products:read").await,
            None,
        )
        .await,
        StatusCode::CREATED,
    )
    .await;
    let new_secret = rotated["data"]["client_secret"]
        .as_str()
        .unwrap()
        .to_owned();
    let app = App {
        id: app_id.clone(),
        secret: Some(new_secret),
    };
    expect_pair(refresh(&s, &app, &rt).await, true).await;
}

#[tokio::test]
async fn d46_revised_a_public_application_moved_from_a_leaver_resumes_at_once() {
    let s = TestServer::start().await;
    let c = console(&s).await;
    let owner = active_user(&s, "owner@example.com", Role::Editor).await;
    let taker = active_user(&s, "taker@example.com", Role::Editor).await;
    let ed = person_token(
        &s,
        &c,
        "owner@example.com",
        "applications:read applications:write products:read",
    )
    .await;
    let public = new_public_app(&s, &ed).await;
    set_user(&s, owner.id.as_str(), json!({"status": "inactive"})).await;
    let org_wide = s.token("applications:read applications:write").await;
    assert_eq!(
        application(&s, &org_wide, &public).await["suspended_reason"],
        "owner_inactive"
    );
    // Nobody signs in to a suspended application: the verified redirect
    // URI is told, before any sign-in page (D46 revised).
    let app = App {
        id: public.clone(),
        secret: None,
    };
    let req = AuthRequest::new(&app, Some("products:read"));
    let back = Browser::new(&s).authorize(&req.params()).await;
    let told = back.expect_redirect_to(&req.redirect_uri);
    assert_eq!(
        (
            told.get("error").map(String::as_str),
            told.get("error_description").map(String::as_str)
        ),
        (Some("unauthorized_client"), Some("application suspended")),
        "{told:?}"
    );
    // A public client authenticates by its id alone, so it is told too.
    let refused = s
        .request(Method::POST, "/oauth/token")
        .form(&[
            ("grant_type", "authorization_code"),
            ("client_id", public.as_str()),
            ("code", "stale"),
            ("redirect_uri", REDIRECT),
            (
                "code_verifier",
                "0123456789012345678901234567890123456789abc",
            ),
        ])
        .send()
        .await
        .unwrap();
    let body = expect_oauth_error(refused, StatusCode::UNAUTHORIZED, "invalid_client").await;
    assert_eq!(body["error_description"], "application suspended");
    let moved = json_of(
        s.call(
            Method::PATCH,
            &format!("/v1/applications/{public}"),
            &org_wide,
            Some(json!({"owner_id": taker.id.to_string()})),
        )
        .await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(moved["data"]["suspended_reason"], Value::Null);
    pair_for(&s, &app, "taker@example.com", Some("products:read")).await;
}

#[tokio::test]
async fn d46_revised_narrowing_revokes_exactly_the_tokens_and_chains_carrying_the_removed_scope() {
    let s = TestServer::start().await;
    let app = register(
        &s,
        &s.org(),
        "products:read users:read",
        &[REDIRECT],
        false,
        false,
    )
    .await;
    let secret = app.secret.clone().unwrap();
    active_user(&s, "person@example.com", Role::Viewer).await;
    let keeps = cc_token(&s, &app.id, &secret, "products:read").await;
    let carries = cc_token(&s, &app.id, &secret, "users:read").await;
    let both = cc_token(&s, &app.id, &secret, "products:read users:read").await;
    let kept_chain = pair_for(&s, &app, "person@example.com", Some("products:read")).await;
    let cut_chain = pair_for(&s, &app, "person@example.com", Some("users:read")).await;

    let manage = s.token("applications:write products:read users:read").await;
    json_of(
        s.call(
            Method::PATCH,
            &format!("/v1/applications/{}", app.id),
            &manage,
            Some(json!({"scopes": ["products:read"]})),
        )
        .await,
        StatusCode::OK,
    )
    .await;

    assert_eq!(
        products_status(&s, &keeps).await,
        StatusCode::OK,
        "D46 revised: a token without the removed scope keeps working"
    );
    assert_eq!(
        products_status(&s, str_of(&kept_chain, "access_token")).await,
        StatusCode::OK
    );
    for (what, t) in [("users:read", &carries), ("both scopes", &both)] {
        assert_eq!(
            products_status(&s, t).await,
            StatusCode::UNAUTHORIZED,
            "a token carrying {what} is revoked"
        );
    }
    expect_pair(
        refresh(&s, &app, str_of(&kept_chain, "refresh_token")).await,
        true,
    )
    .await;
    expect_invalid_grant(refresh(&s, &app, str_of(&cut_chain, "refresh_token")).await).await;
}

#[tokio::test]
async fn d46_continued_the_lists_filter_by_owner_and_an_editor_sees_only_its_own() {
    let s = TestServer::start().await;
    let c = console(&s).await;
    let boss = active_user(&s, "boss@example.com", Role::Admin).await;
    let ed = active_user(&s, "ed@example.com", Role::Editor).await;
    let admin = person_token(&s, &c, "boss@example.com", ADMIN_SCOPES).await;
    let editor = person_token(
        &s,
        &c,
        "ed@example.com",
        "applications:read applications:write products:read",
    )
    .await;
    let (boss_app, _, _) = new_app(&s, &admin, json!(["products:read"])).await;
    let (ed_app, _, _) = new_app(&s, &editor, json!(["products:read"])).await;
    let (boss_key, _, _) = new_key(&s, &admin, json!(["products:read"])).await;
    let (ed_key, _, _) = new_key(&s, &editor, json!(["products:read"])).await;
    let ids = |v: &Value| -> Vec<String> {
        v["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a["id"].as_str().unwrap().to_owned())
            .collect()
    };
    let org_wide = s.token("applications:read").await;
    for (list, who, want) in [
        ("applications", &boss.id, &boss_app),
        ("applications", &ed.id, &ed_app),
        ("api-keys", &boss.id, &boss_key),
        ("api-keys", &ed.id, &ed_key),
    ] {
        let got = json_of(
            s.call(
                Method::GET,
                &format!("/v1/{list}?owner_id={who}"),
                &org_wide,
                None,
            )
            .await,
            StatusCode::OK,
        )
        .await;
        assert_eq!(ids(&got), vec![want.clone()], "{list} of {who}");
        assert_eq!(got["meta"]["total"], 1);
    }
    for list in ["applications", "api-keys"] {
        let theirs = json_of(
            s.call(
                Method::GET,
                &format!("/v1/{list}?owner_id={}", boss.id),
                &editor,
                None,
            )
            .await,
            StatusCode::OK,
        )
        .await;
        assert_eq!(
            theirs["meta"]["total"], 0,
            "an editor sees only its own {list}"
        );
        expect_error(
            s.call(
                Method::GET,
                &format!("/v1/{list}?owner_id=bob"),
                &org_wide,
                None,
            )
            .await,
            StatusCode::BAD_REQUEST,
            "VALIDATION_ERROR",
        )
        .await;
    }
}

/// The events' types and objects, without D58's `audit.checkpoint` (told
/// when a chain's first entry is sealed, whenever that falls).
fn told(events: &[Value]) -> Vec<(String, String)> {
    events
        .iter()
        .filter(|e| e["type"] != "audit.checkpoint")
        .map(|e| {
            let object = &e["data"]["object"];
            let id = object["id"].as_str().unwrap_or_default();
            (e["type"].as_str().unwrap().to_owned(), id.to_owned())
        })
        .collect()
}

/// D54 over HTTP: demoting, deactivating and deleting a person who owns keys
/// and an application tell what each reaches before the person, in D54's
/// order; each event carries the acting credential and the request it came
/// from, and is valid against its webhook schema. A PATCH that changes
/// nothing and a refused delete tell nothing.
#[tokio::test]
async fn d54_offboarding_tells_what_it_reaches_before_the_person() {
    // Counts the events exactly: without D58's audit checkpoints, whose
    // `audit.checkpoint` comes when the sealer first reaches a chain, at a
    // moment no test can fix.
    let s = TestServer::start_with(|c| c.audit.checkpoints = false).await;
    let c = console(&s).await;
    let boss = active_user(&s, "boss@example.com", Role::Admin).await;
    let heir = active_user(&s, "heir@example.com", Role::Admin).await;
    let admin = person_token(&s, &c, "boss@example.com", ADMIN_SCOPES).await;
    let ops = s.token("users:write events:read").await;
    let start = crate::events::all_after(&s, &ops, 0).await.len() as i64;

    let made = json_of(
        create_app(
            &s,
            &admin,
            json!({"name": "a", "type": "confidential", "redirect_uris": [REDIRECT], "scopes": ["users:write", "products:read"]}),
        )
        .await,
        StatusCode::CREATED,
    )
    .await;
    let app_id = made["data"]["id"].as_str().unwrap().to_owned();
    let (k1, key1, _) = new_key(&s, &admin, json!(["users:write"])).await;
    let (k2, _, _) = new_key(&s, &admin, json!(["products:read"])).await;
    let created = crate::events::all_after(&s, &ops, start).await;
    assert_eq!(
        told(&created),
        [
            ("application.created".to_owned(), app_id.clone()),
            ("api_key.created".to_owned(), k1.clone()),
            ("api_key.created".to_owned(), k2.clone()),
        ]
    );
    // The person acted, through the console's token, in that request.
    let e = &created[0];
    assert_eq!(e["actor"]["type"], "user");
    assert_eq!(e["actor"]["id"], boss.id.to_string());
    assert_eq!(e["actor"]["client_id"], c.id.as_str());
    assert_eq!(e["request"]["id"], made["meta"]["request_id"]);
    assert!(e["data"]["object"].get("client_secret").is_none());
    assert!(
        !created[1].to_string().contains(&key1),
        "no key in {}",
        created[1]
    );

    // Nothing changes: nothing is told.
    set_user(&s, boss.id.as_str(), json!({"role": "admin"})).await;
    // Demoted to viewer: the application loses `users:write`, the
    // `users:write` key is revoked, then the person.
    set_user(&s, boss.id.as_str(), json!({"role": "viewer"})).await;
    // Deactivated: the remaining key, the application suspended, then the
    // person.
    set_user(&s, boss.id.as_str(), json!({"status": "inactive"})).await;
    // A delete without an heir is refused: nothing is told.
    let remove = s.token("users:write").await;
    expect_error(
        s.call(
            Method::DELETE,
            &format!("/v1/users/{}", boss.id),
            &remove,
            None,
        )
        .await,
        StatusCode::UNPROCESSABLE_ENTITY,
        "OWNED_RESOURCES_EXIST",
    )
    .await;
    // Deleted, the application handed on: the application, then the person.
    let gone = s
        .call(
            Method::DELETE,
            &format!("/v1/users/{}?transfer_to={}", boss.id, heir.id),
            &remove,
            None,
        )
        .await;
    assert_eq!(gone.status(), StatusCode::NO_CONTENT);
    // A 204 has no body: its request id is the X-Request-ID header's (a
    // UUID), shown as `meta.request_id` shows ids (`req_` and the hex).
    let header = gone.headers()["x-request-id"].to_str().unwrap();
    let request_id = format!("req_{}", header.replace('-', ""));

    let all = crate::events::all_after(&s, &ops, start).await;
    let after = &all[3..];
    let (app, boss_id) = (app_id.as_str(), boss.id.as_str());
    // D57: the deactivation ended the person's browser session (the one
    // the console's token came from), after the other cascades.
    let ended = after
        .iter()
        .find(|e| e["type"] == "session.revoked")
        .expect("the session ended by the deactivation is told");
    let ses = ended["data"]["object"]["id"].as_str().unwrap();
    assert!(ses.starts_with("ses_"), "{ended}");
    // The demotion before it had revoked the console's chain (D29): no
    // application holds a live chain from it any more.
    assert_eq!(ended["data"]["object"]["applications"], json!([]));
    let want: Vec<(String, String)> = [
        ("application.updated", app),
        ("api_key.revoked", k1.as_str()),
        ("user.updated", boss_id),
        ("api_key.revoked", k2.as_str()),
        ("application.updated", app),
        ("session.revoked", ses),
        ("user.updated", boss_id),
        ("application.updated", app),
        ("user.deleted", boss_id),
    ]
    .iter()
    .map(|(t, id)| (t.to_string(), id.to_string()))
    .collect();
    assert_eq!(told(after), want);
    let seq: Vec<i64> = all
        .iter()
        .map(|e| e["sequence"].as_i64().unwrap())
        .collect();
    assert!(seq.windows(2).all(|w| w[1] == w[0] + 1), "no gap: {seq:?}");

    // What changed, as the GET shows it, with the old values.
    assert_eq!(
        after[0]["data"]["object"]["scopes"],
        json!(["products:read"])
    );
    assert_eq!(
        after[0]["data"]["previous_attributes"]["scopes"],
        json!(["users:write", "products:read"])
    );
    assert_eq!(after[2]["data"]["previous_attributes"]["role"], "admin");
    assert_eq!(after[2]["data"]["object"]["role"], "viewer");
    assert_eq!(
        after[4]["data"]["object"]["suspended_reason"],
        "owner_inactive"
    );
    assert_eq!(after[7]["data"]["object"]["owner_id"], heir.id.to_string());
    assert_eq!(
        after[7]["data"]["previous_attributes"]["owner_id"],
        boss.id.to_string()
    );
    assert_eq!(after[8]["data"]["object"]["status"], "inactive");
    // The delete's events name its request; the actor is the credential.
    for e in &after[7..] {
        assert_eq!(e["request"]["id"], request_id.as_str());
        assert_eq!(e["actor"]["type"], "client");
    }
    crate::events::assert_valid_events(&s, &all).await;
}
