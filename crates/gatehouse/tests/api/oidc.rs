//! OpenID Connect (D49): discovery, ID tokens on code exchange, refresh and
//! grace replay, userinfo, `prompt` and `max_age`, remembered consent and
//! `/v1/me/applications`, RP-initiated logout. A child of `oauth_flow`, whose
//! browser and helpers it drives.

use super::*;

const LOGOUT_TO: &str = "https://app.example.com/signed-out";
const OIDC_SCOPES: &str = "openid profile email users:read profile:read profile:write";

/// A confidential client registered for the OpenID scopes, with a
/// post-logout redirect URI.
async fn oidc_app(s: &TestServer) -> App {
    let secret = gatehouse_auth::secrets::new_client_secret();
    let c = gatehouse_store::NewClient {
        id: ClientId::generate(),
        name: "OIDC App".into(),
        secret_hash: Some(gatehouse_auth::secrets::hash_secret(&secret)),
        scopes: ScopeSet::parse(OIDC_SCOPES).unwrap(),
        redirect_uris: vec![REDIRECT.into()],
        post_logout_redirect_uris: vec![LOGOUT_TO.into()],
        admin_approved: false,
        owner: None,
        created_at: Timestamp::now(),
    };
    s.store()
        .insert_client(&s.org(), &c, crate::common::operator())
        .await
        .unwrap();
    App {
        id: c.id.to_string(),
        secret: Some(secret),
    }
}

/// The request's parameters without `prompt=consent` (which the older
/// tests add) plus `extra`.
fn params_with<'a>(req: &'a AuthRequest, extra: &[(&'a str, &'a str)]) -> Vec<(&'a str, &'a str)> {
    let mut p: Vec<_> = req
        .params()
        .into_iter()
        .filter(|(k, _)| *k != "prompt")
        .collect();
    p.extend_from_slice(extra);
    p
}

/// Signs in and allows, in `b`: the code.
async fn sign_in_and_allow(
    b: &mut Browser<'_>,
    req: &AuthRequest,
    extra: &[(&str, &str)],
    email: &str,
) -> String {
    let login = b.authorize(&params_with(req, extra)).await;
    login.expect_login(StatusCode::OK);
    let consent = b.login(&login, email, PASSWORD).await;
    consent.expect_consent();
    let back = b.decide(&consent, "allow").await;
    back.expect_redirect_to(&req.redirect_uri)
        .get("code")
        .expect("a code")
        .clone()
}

fn id_token_of(pair: &Value) -> String {
    pair["id_token"]
        .as_str()
        .unwrap_or_else(|| panic!("D49: an id_token with openid: {pair}"))
        .to_owned()
}

fn jwt_header(token: &str) -> Value {
    let part = token.split('.').next().unwrap();
    serde_json::from_slice(&B64.decode(part).unwrap()).unwrap()
}

fn at_hash(access_token: &str) -> String {
    let d = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, access_token.as_bytes());
    B64.encode(&d.as_ref()[..16])
}

#[tokio::test]
async fn d49_discovery_documents_publish_the_provider() {
    let s = TestServer::start().await;
    for path in [
        "/.well-known/openid-configuration",
        "/.well-known/oauth-authorization-server",
    ] {
        let res = s.request(Method::GET, path).send().await.unwrap();
        assert_eq!(res.status(), StatusCode::OK, "{path}");
        let doc: Value = res.json().await.unwrap();
        assert_eq!(doc["issuer"], PUBLIC_URL, "{path}");
        for (k, v) in [
            ("userinfo_endpoint", "/oauth/userinfo"),
            ("end_session_endpoint", "/oauth/logout"),
            ("introspection_endpoint", "/oauth/introspect"),
        ] {
            assert_eq!(doc[k], format!("{PUBLIC_URL}{v}"), "{path} {k}");
        }
        assert_eq!(
            doc["subject_types_supported"],
            serde_json::json!(["public"])
        );
        assert_eq!(
            doc["id_token_signing_alg_values_supported"],
            serde_json::json!(["ES256"])
        );
        assert_eq!(doc["authorization_response_iss_parameter_supported"], true);
        assert_eq!(doc["request_uri_parameter_supported"], false);
        let claims: Vec<&str> = doc["claims_supported"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c.as_str().unwrap())
            .collect();
        for c in [
            "sub",
            "name",
            "updated_at",
            "email",
            "email_verified",
            "auth_time",
            "nonce",
        ] {
            assert!(claims.contains(&c), "{path} claims_supported has {c}");
        }
        let scopes = doc["scopes_supported"].as_array().unwrap();
        for sc in ["openid", "profile", "email"] {
            assert!(scopes.iter().any(|v| v == sc), "{path} lists {sc}");
        }
    }
}

#[tokio::test]
async fn d49_code_flow_id_token_has_every_claim_nonce_and_at_hash() {
    let s = TestServer::start().await;
    let app = oidc_app(&s).await;
    let user = active_user(&s, "oidc@example.com", Role::Editor).await;
    let req = AuthRequest::new(&app, Some("openid profile email users:read"));
    let mut b = Browser::new(&s);
    let before = Timestamp::now().unix_seconds();
    let login = b
        .authorize(&params_with(&req, &[("nonce", "n-0S6_WzA2Mj")]))
        .await;
    login.expect_login(StatusCode::OK);
    let consent = b.login(&login, "oidc@example.com", PASSWORD).await;
    consent.expect_consent();
    let back = b.decide(&consent, "allow").await;
    let q = back.expect_redirect_to(REDIRECT);
    assert_eq!(
        q.get("iss").map(String::as_str),
        Some(PUBLIC_URL),
        "RFC 9207 iss: {q:?}"
    );
    let code = q["code"].clone();
    let pair = expect_pair(
        exchange(&s, &app, &code, REDIRECT, &req.verifier).await,
        true,
    )
    .await;
    let id_token = id_token_of(&pair);
    let header = jwt_header(&id_token);
    assert_eq!(header["alg"], "ES256");
    assert_eq!(header["typ"], "JWT");
    let jwks: Value = s
        .request(Method::GET, "/.well-known/jwks.json")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(
        jwks["keys"]
            .as_array()
            .unwrap()
            .iter()
            .any(|k| k["kid"] == header["kid"]),
        "signed with a published key"
    );
    let c = claims(&id_token);
    assert_eq!(c["iss"], PUBLIC_URL);
    assert_eq!(c["sub"], user.id.as_str());
    assert_eq!(c["aud"], app.id.as_str());
    let iat = c["iat"].as_i64().unwrap();
    assert_eq!(c["exp"].as_i64().unwrap(), iat + 3600, "exp = iat + 3600");
    let auth_time = c["auth_time"].as_i64().unwrap();
    assert!(auth_time >= before && auth_time <= iat, "{c}");
    assert_eq!(c["nonce"], "n-0S6_WzA2Mj");
    assert_eq!(c["at_hash"], at_hash(str_of(&pair, "access_token")));
    assert!(c["sid"].as_str().is_some_and(|s| !s.is_empty()), "{c}");
    assert_eq!(c["name"], "Flow User");
    assert!(c["updated_at"].is_i64(), "updated_at is epoch seconds: {c}");
    assert_eq!(c["email"], "oidc@example.com");
    assert_eq!(c["email_verified"], false, "made without an invitation");

    // The access token is no ID token, and the ID token no access token.
    assert_eq!(
        users_with(&s, &id_token).await.status(),
        StatusCode::UNAUTHORIZED,
        "an ID token is not a bearer credential"
    );
}

#[tokio::test]
async fn d49_refresh_and_grace_replay_return_an_id_token_without_nonce() {
    let s = TestServer::start().await;
    let app = oidc_app(&s).await;
    active_user(&s, "refresh@example.com", Role::Viewer).await;
    let req = AuthRequest::new(&app, Some("openid email"));
    let mut b = Browser::new(&s);
    let code = sign_in_and_allow(&mut b, &req, &[("nonce", "abc")], "refresh@example.com").await;
    let first = expect_pair(
        exchange(&s, &app, &code, REDIRECT, &req.verifier).await,
        true,
    )
    .await;
    let first_claims = claims(&id_token_of(&first));
    let next = expect_pair(
        refresh(&s, &app, str_of(&first, "refresh_token")).await,
        true,
    )
    .await;
    let id_token = id_token_of(&next);
    let c = claims(&id_token);
    assert_eq!(c["sub"], first_claims["sub"]);
    assert_eq!(c["auth_time"], first_claims["auth_time"]);
    assert_eq!(c["sid"], first_claims["sid"]);
    assert!(c.get("nonce").is_none(), "no nonce on refresh: {c}");
    assert_eq!(c["at_hash"], at_hash(str_of(&next, "access_token")));
    assert!(c.get("name").is_none(), "no profile claims without profile");
    // D24 grace: the very same answer, ID token included.
    let replay = expect_pair(
        refresh(&s, &app, str_of(&first, "refresh_token")).await,
        true,
    )
    .await;
    assert_eq!(replay["id_token"], next["id_token"]);
    assert_eq!(replay["access_token"], next["access_token"]);
}

#[tokio::test]
async fn d49_openid_only_when_asked_by_name_and_never_to_client_credentials() {
    let s = TestServer::start().await;
    let app = oidc_app(&s).await;
    active_user(&s, "omit@example.com", Role::Viewer).await;
    let req = AuthRequest::new(&app, None);
    let mut b = Browser::new(&s);
    let code = sign_in_and_allow(&mut b, &req, &[], "omit@example.com").await;
    let pair = expect_pair(
        exchange(&s, &app, &code, REDIRECT, &req.verifier).await,
        true,
    )
    .await;
    let granted = scope_set(str_of(&pair, "scope"));
    for sc in ["openid", "profile", "email"] {
        assert!(
            !granted.contains(sc),
            "an omitted scope never includes {sc}: {granted:?}"
        );
    }
    assert!(pair.get("id_token").is_none(), "{pair}");

    for scope in [Some("openid"), Some("users:read email"), None] {
        let mut form = vec![("grant_type", "client_credentials")];
        if let Some(sc) = scope {
            form.push(("scope", sc));
        }
        let res = post_as(&s, &app, "/oauth/token", &form).await;
        match scope {
            Some(_) => {
                expect_oauth_error(res, StatusCode::BAD_REQUEST, "invalid_scope").await;
            }
            None => {
                assert_eq!(res.status(), StatusCode::OK);
                let pair: Value = res.json().await.unwrap();
                assert!(
                    !scope_set(str_of(&pair, "scope")).contains("openid"),
                    "{pair}"
                );
            }
        }
    }
}

#[tokio::test]
async fn d49_userinfo_answers_openid_tokens_of_people_only() {
    let s = TestServer::start().await;
    let app = oidc_app(&s).await;
    let user = active_user(&s, "info@example.com", Role::Viewer).await;
    let pair = {
        let req = AuthRequest::new(&app, Some("openid profile email"));
        let mut b = Browser::new(&s);
        let code = sign_in_and_allow(&mut b, &req, &[], "info@example.com").await;
        expect_pair(
            exchange(&s, &app, &code, REDIRECT, &req.verifier).await,
            true,
        )
        .await
    };
    let token = str_of(&pair, "access_token");
    for method in [Method::GET, Method::POST] {
        let res = s
            .request(method.clone(), "/oauth/userinfo")
            .header(AUTHORIZATION, format!("Bearer {token}"))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), StatusCode::OK, "{method}");
        let info: Value = res.json().await.unwrap();
        assert_eq!(info["sub"], user.id.as_str());
        assert_eq!(info["email"], "info@example.com");
        assert_eq!(info["email_verified"], false);
        assert_eq!(info["name"], "Flow User");
        assert!(info["updated_at"].is_i64());
    }
    // RFC 6750 §2.2: the token in the form body.
    let res = s
        .request(Method::POST, "/oauth/userinfo")
        .form(&[("access_token", token)])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);

    // Without openid: 403 insufficient_scope.
    let plain = {
        let req = AuthRequest::new(&app, Some("users:read"));
        let mut b = Browser::new(&s);
        let code = sign_in_and_allow(&mut b, &req, &[], "info@example.com").await;
        expect_pair(
            exchange(&s, &app, &code, REDIRECT, &req.verifier).await,
            true,
        )
        .await
    };
    let cc: Value = post_as(
        &s,
        &app,
        "/oauth/token",
        &[("grant_type", "client_credentials")],
    )
    .await
    .json()
    .await
    .unwrap();
    for (what, t) in [
        ("no openid", str_of(&plain, "access_token")),
        ("client credentials", str_of(&cc, "access_token")),
    ] {
        let res = s
            .request(Method::GET, "/oauth/userinfo")
            .header(AUTHORIZATION, format!("Bearer {t}"))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), StatusCode::FORBIDDEN, "{what}");
        let challenge = header(res.headers(), WWW_AUTHENTICATE);
        assert!(
            challenge.contains("insufficient_scope"),
            "{what}: {challenge}"
        );
    }
    for (what, auth) in [("garbage", Some("Bearer nope")), ("none", None)] {
        let mut rb = s.request(Method::GET, "/oauth/userinfo");
        if let Some(a) = auth {
            rb = rb.header(AUTHORIZATION, a);
        }
        let res = rb.send().await.unwrap();
        assert_eq!(res.status(), StatusCode::UNAUTHORIZED, "{what}");
        assert!(header(res.headers(), WWW_AUTHENTICATE).starts_with("Bearer"));
    }
}

#[tokio::test]
async fn d49_prompt_none_login_required_then_consent_required_then_a_code() {
    let s = TestServer::start().await;
    let app = oidc_app(&s).await;
    active_user(&s, "quiet@example.com", Role::Viewer).await;
    let req = AuthRequest::new(&app, Some("openid profile"));
    let mut b = Browser::new(&s);
    let none = [("prompt", "none")];
    let page = b.authorize(&params_with(&req, &none)).await;
    let q = page.expect_redirect_to(REDIRECT);
    assert_eq!(q["error"], "login_required");
    assert_eq!(q["state"], req.state);
    assert_eq!(q["iss"], PUBLIC_URL);
    // Signed in, but never consented.
    let login = b.authorize(&params_with(&req, &[])).await;
    let consent = b.login(&login, "quiet@example.com", PASSWORD).await;
    consent.expect_consent();
    let page = b.authorize(&params_with(&req, &none)).await;
    assert_eq!(
        page.expect_redirect_to(REDIRECT)["error"],
        "consent_required"
    );
    // Consented: prompt=none answers with a code, no page.
    b.decide(&consent, "allow")
        .await
        .expect_redirect_to(REDIRECT);
    let page = b.authorize(&params_with(&req, &none)).await;
    let q = page.expect_redirect_to(REDIRECT);
    assert!(q["code"].starts_with("ac_"), "{q:?}");
    // prompt=none with another value is invalid_request.
    let page = b
        .authorize(&params_with(&req, &[("prompt", "none login")]))
        .await;
    assert_eq!(
        page.expect_redirect_to(REDIRECT)["error"],
        "invalid_request"
    );
}

#[tokio::test]
async fn d49_remembered_consent_skips_the_page_until_forgotten_and_forgetting_revokes() {
    let s = TestServer::start().await;
    let app = oidc_app(&s).await;
    active_user(&s, "remember@example.com", Role::Viewer).await;
    let scope = "openid profile:read profile:write";
    let req = AuthRequest::new(&app, Some(scope));
    let mut b = Browser::new(&s);
    let code = sign_in_and_allow(&mut b, &req, &[], "remember@example.com").await;
    let pair = expect_pair(
        exchange(&s, &app, &code, REDIRECT, &req.verifier).await,
        true,
    )
    .await;

    // The same request again: no consent page, a code at once.
    let page = b.authorize(&params_with(&req, &[])).await;
    assert!(page.expect_redirect_to(REDIRECT)["code"].starts_with("ac_"));
    // Asking for more than was allowed shows the page.
    let wider = AuthRequest::new(&app, Some("openid profile:read profile:write email"));
    b.authorize(&params_with(&wider, &[]))
        .await
        .expect_consent();
    // prompt=consent always shows it.
    b.authorize(&params_with(&req, &[("prompt", "consent")]))
        .await
        .expect_consent();

    // GET /v1/me/applications lists it.
    let token = str_of(&pair, "access_token");
    let res = s
        .request(Method::GET, "/v1/me/applications")
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let body: Value = res.json().await.unwrap();
    let list = body["data"].as_array().unwrap();
    assert_eq!(list.len(), 1, "{body}");
    assert_eq!(list[0]["id"], app.id.as_str());
    assert_eq!(list[0]["name"], "OIDC App");
    assert_eq!(body["meta"]["total"], 1);
    let scopes: BTreeSet<String> = list[0]["scopes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_owned())
        .collect();
    assert_eq!(scopes, scope_set(scope));
    assert!(list[0]["last_used_at"].as_str().unwrap().ends_with('Z'));

    // DELETE forgets it and revokes the chains and their tokens.
    let res = s
        .request(Method::DELETE, &format!("/v1/me/applications/{}", app.id))
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::NO_CONTENT);
    expect_invalid_grant(refresh(&s, &app, str_of(&pair, "refresh_token")).await).await;
    // D54: `consent.revoked`, the item as the list showed it, plus the person.
    let revoked = crate::events::told(&s, "?type=consent.revoked").await;
    assert_eq!(revoked.len(), 1, "{revoked:?}");
    let mut item = list[0].clone();
    item["user_id"] = revoked[0]["actor"]["id"].clone();
    assert_eq!(revoked[0]["data"]["object"], item);
    assert_eq!(revoked[0]["actor"]["type"], "user");
    assert_eq!(revoked[0]["actor"]["client_id"], app.id.as_str());
    assert_dead(&s, token, "an access token of the forgotten application").await;
    b.authorize(&params_with(&req, &[])).await.expect_consent();
}

#[tokio::test]
async fn d49_forgetting_an_unknown_application_is_404() {
    let s = TestServer::start().await;
    let app = oidc_app(&s).await;
    active_user(&s, "nothing@example.com", Role::Viewer).await;
    let req = AuthRequest::new(&app, Some("profile:read profile:write"));
    let mut b = Browser::new(&s);
    let code = sign_in_and_allow(&mut b, &req, &[], "nothing@example.com").await;
    let pair = expect_pair(
        exchange(&s, &app, &code, REDIRECT, &req.verifier).await,
        true,
    )
    .await;
    let token = str_of(&pair, "access_token");
    let other = confidential(&s).await;
    for id in [other.id.as_str(), "app_doesnotexist", "not-an-id"] {
        let res = s
            .request(Method::DELETE, &format!("/v1/me/applications/{id}"))
            .bearer_auth(token)
            .send()
            .await
            .unwrap();
        expect_error(res, StatusCode::NOT_FOUND, "RESOURCE_NOT_FOUND").await;
    }
}

#[tokio::test]
async fn d49_public_loopback_clients_never_have_consent_remembered() {
    let s = TestServer::start().await;
    let app = register(
        &s,
        &s.org(),
        "openid profile:read",
        &[LOOPBACK_REGISTERED],
        true,
        false,
    )
    .await;
    active_user(&s, "cli@example.com", Role::Viewer).await;
    let mut req = AuthRequest::new(&app, Some("openid profile:read"));
    req.redirect_uri = LOOPBACK_REGISTERED.into();
    let mut b = Browser::new(&s);
    let code = sign_in_and_allow(&mut b, &req, &[], "cli@example.com").await;
    assert!(code.starts_with("ac_"));
    b.authorize(&params_with(&req, &[])).await.expect_consent();
    let page = b.authorize(&params_with(&req, &[("prompt", "none")])).await;
    assert_eq!(
        page.expect_redirect_to(LOOPBACK_REGISTERED)["error"],
        "consent_required"
    );
}

#[tokio::test]
async fn d49_prompt_login_and_max_age_force_a_fresh_sign_in() {
    let s = TestServer::start().await;
    let app = oidc_app(&s).await;
    active_user(&s, "fresh@example.com", Role::Viewer).await;
    let req = AuthRequest::new(&app, Some("openid"));
    let mut b = Browser::new(&s);
    let code = sign_in_and_allow(&mut b, &req, &[], "fresh@example.com").await;
    let first = expect_pair(
        exchange(&s, &app, &code, REDIRECT, &req.verifier).await,
        true,
    )
    .await;
    let first_auth = claims(&id_token_of(&first))["auth_time"].as_i64().unwrap();

    b.authorize(&params_with(&req, &[("prompt", "login")]))
        .await
        .expect_login(StatusCode::OK);
    tokio::time::sleep(Duration::from_millis(1100)).await;
    // max_age=0: the sign-in a second ago is too old; a generous one is not.
    let page = b
        .authorize(&params_with(&req, &[("max_age", "3600")]))
        .await;
    assert!(page.expect_redirect_to(REDIRECT)["code"].starts_with("ac_"));
    let page = b
        .authorize(&params_with(&req, &[("max_age", "0"), ("prompt", "none")]))
        .await;
    assert_eq!(page.expect_redirect_to(REDIRECT)["error"], "login_required");
    let login = b.authorize(&params_with(&req, &[("max_age", "0")])).await;
    login.expect_login(StatusCode::OK);
    // After signing in again (consent remembered), the code's ID token has
    // the new auth_time.
    let back = b.login(&login, "fresh@example.com", PASSWORD).await;
    let code = back.expect_redirect_to(REDIRECT)["code"].clone();
    let pair = expect_pair(
        exchange(&s, &app, &code, REDIRECT, &req.verifier).await,
        true,
    )
    .await;
    let auth_time = claims(&id_token_of(&pair))["auth_time"].as_i64().unwrap();
    assert!(auth_time > first_auth, "{auth_time} > {first_auth}");
    // max_age that is not a number is invalid_request.
    let page = b
        .authorize(&params_with(&req, &[("max_age", "soon")]))
        .await;
    assert_eq!(
        page.expect_redirect_to(REDIRECT)["error"],
        "invalid_request"
    );
}

#[tokio::test]
async fn d49_request_uri_is_refused_login_hint_prefills_and_post_is_accepted() {
    let s = TestServer::start().await;
    let app = oidc_app(&s).await;
    let req = AuthRequest::new(&app, Some("openid"));
    let mut b = Browser::new(&s);
    let page = b
        .authorize(&params_with(&req, &[("request_uri", "urn:example:req")]))
        .await;
    let q = page.expect_redirect_to(REDIRECT);
    assert_eq!(q["error"], "request_uri_not_supported");
    assert_eq!(q["state"], req.state);

    let page = b
        .authorize(&params_with(&req, &[("login_hint", "hint@example.com")]))
        .await;
    page.expect_login(StatusCode::OK);
    assert!(
        page.body.contains("value=\"hint@example.com\""),
        "{}",
        page.body
    );

    // D49: the authorization request by POST (form-encoded).
    let fields: Vec<(String, String)> = params_with(&req, &[])
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
    let page = b.post("/oauth/authorize", &fields).await;
    page.expect_login(StatusCode::OK);
}

#[tokio::test]
async fn d49_logout_with_a_valid_hint_ends_the_session_and_its_chains() {
    let s = TestServer::start().await;
    let app = oidc_app(&s).await;
    active_user(&s, "bye@example.com", Role::Viewer).await;
    let req = AuthRequest::new(&app, Some("openid"));
    let mut b = Browser::new(&s);
    let code = sign_in_and_allow(&mut b, &req, &[], "bye@example.com").await;
    let pair = expect_pair(
        exchange(&s, &app, &code, REDIRECT, &req.verifier).await,
        true,
    )
    .await;
    let hint = id_token_of(&pair);
    let url = authorize_url(&s, &[]).replace("/oauth/authorize", "/oauth/logout");
    let mut u = Url::parse(&url).unwrap();
    u.query_pairs_mut()
        .append_pair("id_token_hint", &hint)
        .append_pair("post_logout_redirect_uri", LOGOUT_TO)
        .append_pair("state", "after-logout");
    let page = b.get(u.as_str()).await;
    assert_eq!(page.status, StatusCode::SEE_OTHER, "{}", page.body);
    assert_eq!(
        page.location().as_deref(),
        Some(format!("{LOGOUT_TO}?state=after-logout").as_str())
    );
    // The chain begun in the session is revoked, the session is over.
    expect_invalid_grant(refresh(&s, &app, str_of(&pair, "refresh_token")).await).await;
    b.authorize(&params_with(&req, &[]))
        .await
        .expect_login(StatusCode::OK);
}

#[tokio::test]
async fn d49_logout_without_a_valid_hint_asks_first_and_redirects_only_where_registered() {
    let s = TestServer::start().await;
    let app = oidc_app(&s).await;
    active_user(&s, "ask@example.com", Role::Viewer).await;
    let req = AuthRequest::new(&app, Some("openid"));
    let mut b = Browser::new(&s);
    let code = sign_in_and_allow(&mut b, &req, &[], "ask@example.com").await;
    let pair = expect_pair(
        exchange(&s, &app, &code, REDIRECT, &req.verifier).await,
        true,
    )
    .await;

    // A forged hint is no hint: a confirmation page, nobody signed out.
    let forged = {
        let mut parts: Vec<String> = id_token_of(&pair).split('.').map(str::to_owned).collect();
        parts[2] = B64.encode([7u8; 64]);
        parts.join(".")
    };
    let page = b
        .get(&format!(
            "/oauth/logout?id_token_hint={forged}&post_logout_redirect_uri={LOGOUT_TO}"
        ))
        .await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(page.location().is_none());
    let form = find_form(&page.body, "/oauth/logout").expect("a confirmation form");
    // An access token is not an ID token either.
    let page = b
        .get(&format!(
            "/oauth/logout?id_token_hint={}",
            str_of(&pair, "access_token")
        ))
        .await;
    assert!(find_form(&page.body, "/oauth/logout").is_some());
    let still = expect_pair(
        refresh(&s, &app, str_of(&pair, "refresh_token")).await,
        true,
    )
    .await;

    // Confirming without the CSRF token signs nobody out.
    let without: Vec<(String, String)> = form
        .hidden
        .iter()
        .filter(|(k, _)| k != "csrf_token")
        .cloned()
        .collect();
    let page = b.post("/oauth/logout", &without).await;
    assert!(find_form(&page.body, "/oauth/logout").is_some());
    b.authorize(&params_with(&req, &[])).await;

    // Confirmed with client_id and an unregistered URI: signed out, no
    // redirect (a signed-out page).
    let page = b
        .get(&format!(
            "/oauth/logout?client_id={}&post_logout_redirect_uri=https://evil.example/",
            app.id
        ))
        .await;
    let form = find_form(&page.body, "/oauth/logout").unwrap();
    let page = b.submit(&form, &[]).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    assert!(page.location().is_none(), "never to an unregistered URI");
    expect_invalid_grant(refresh(&s, &app, str_of(&still, "refresh_token")).await).await;
    b.authorize(&params_with(&req, &[]))
        .await
        .expect_login(StatusCode::OK);
}

/// D58: a person's sign-in, consent, the tokens issued by the code and the
/// refresh, a revocation and the sign-out are recorded in the security
/// chain, each with its actor, source, target and details, and no token
/// text anywhere in it.
#[tokio::test]
async fn d58_sign_in_consent_tokens_revocation_and_sign_out_are_recorded() {
    let s = TestServer::start().await;
    let app = oidc_app(&s).await;
    let user = active_user(&s, "kept@example.com", Role::Viewer).await;
    let req = AuthRequest::new(&app, Some("openid users:read"));
    let mut b = Browser::new(&s);
    let code = sign_in_and_allow(&mut b, &req, &[], "kept@example.com").await;
    let pair = expect_pair(
        exchange(&s, &app, &code, REDIRECT, &req.verifier).await,
        true,
    )
    .await;
    let second = expect_pair(
        refresh(&s, &app, str_of(&pair, "refresh_token")).await,
        true,
    )
    .await;
    let revoked = str_of(&second, "access_token").to_owned();
    let res = post_as(&s, &app, "/oauth/revoke", &[("token", &revoked)]).await;
    assert_eq!(res.status(), StatusCode::OK);
    // Signed out through the ID token's hint.
    let hint = id_token_of(&second);
    let page = b
        .get(&format!(
            "/oauth/logout?id_token_hint={hint}&post_logout_redirect_uri={LOGOUT_TO}"
        ))
        .await;
    assert_eq!(page.status, StatusCode::SEE_OTHER, "{}", page.body);

    let t = s.token("audit:read").await;
    let chain = crate::audit::security_chain(&s, &t, "user.signed_out").await;
    let entries = chain["data"].as_array().unwrap().clone();
    let actions: Vec<&str> = entries
        .iter()
        .map(|e| e["action"].as_str().unwrap())
        .collect();
    let at = |action: &str| {
        actions
            .iter()
            .position(|a| *a == action)
            .unwrap_or_else(|| panic!("{action} in {actions:?}"))
    };
    // In the order they happened.
    assert!(at("user.signed_in") < at("consent.granted"), "{actions:?}");
    assert!(at("consent.granted") < at("token.issued"), "{actions:?}");
    assert!(at("token.revoked") < at("user.signed_out"), "{actions:?}");
    let issued: Vec<&Value> = entries
        .iter()
        .filter(|e| e["action"] == "token.issued")
        .collect();
    assert_eq!(issued.len(), 2, "{actions:?}");
    let first_jti = claims(str_of(&pair, "access_token"))["jti"].clone();
    let second_jti = claims(&revoked)["jti"].clone();
    for (e, grant, jti) in [
        (issued[0], "authorization_code", &first_jti),
        (issued[1], "refresh_token", &second_jti),
    ] {
        assert_eq!(e["category"], "security");
        assert_eq!(e["outcome"], "success");
        assert_eq!(e["actor"]["type"], "user");
        assert_eq!(e["actor"]["id"], user.id.as_str());
        assert_eq!(e["actor"]["client_id"], app.id.as_str());
        assert_eq!(e["target"], json!({"type": "token", "id": jti}));
        assert_eq!(e["details"]["grant_type"], grant);
        assert_eq!(e["details"]["client_id"], app.id.as_str());
        assert_eq!(
            scope_set(e["details"]["scope"].as_str().unwrap()),
            scope_set("openid users:read")
        );
        assert_eq!(e["source"]["ip"], "127.0.0.1");
    }
    let consent = &entries[at("consent.granted")];
    assert_eq!(consent["actor"]["client_id"], app.id.as_str());
    assert_eq!(
        consent["target"],
        json!({"type": "user", "id": user.id.as_str()})
    );
    assert_eq!(
        scope_set(consent["details"]["scope"].as_str().unwrap()),
        scope_set("openid users:read")
    );
    let revocation = &entries[at("token.revoked")];
    assert_eq!(
        revocation["actor"],
        json!({"type": "client", "id": app.id, "client_id": app.id})
    );
    assert_eq!(
        revocation["target"],
        json!({"type": "token", "id": second_jti})
    );
    let out = &entries[at("user.signed_out")];
    assert_eq!(out["actor"]["id"], user.id.as_str());
    assert_eq!(out["actor"]["client_id"], app.id.as_str());
    assert_eq!(out["target"]["type"], "session");
    assert!(
        out["target"]["id"].as_str().unwrap().starts_with("ses_"),
        "{out}"
    );
    assert!(actions.contains(&"session.revoked"), "{actions:?}");
    // No token, code or ID token text in the log.
    let text = chain.to_string();
    for secret in [
        str_of(&pair, "access_token"),
        str_of(&pair, "refresh_token"),
        str_of(&second, "refresh_token"),
        &revoked,
        &hint,
        &code,
    ] {
        assert!(!text.contains(secret), "a token in the audit log");
    }
}
