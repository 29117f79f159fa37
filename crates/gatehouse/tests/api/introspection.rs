//! Token introspection, RFC 7662 (D49): `POST /oauth/introspect` for
//! confidential clients, authenticated as at the token endpoint (D20) under
//! D28 (revised)'s failure guard; `{"active": false}` for anything not an
//! active token of the caller's organization (or, for refresh tokens, of the
//! caller itself); introspecting never uses up a refresh token.

use std::collections::BTreeSet;

use gatehouse_auth::{password, secrets};
use gatehouse_domain::{
    ApiKey, ApiKeyId, ClientId, Email, Name, NewUser, Plan, Role, ScopeSet, Timestamp, UserId,
    UserStatus,
};
use gatehouse_store::NewClient;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::common::browser::{Browser, sign_in_for_code};
use crate::common::{PUBLIC_URL, TestServer};

const PASSWORD: &str = "a long passphrase for introspection";
const REDIRECT: &str = "http://127.0.0.1/cb";
const OTHER_SOURCE: std::net::IpAddr = std::net::IpAddr::V4(std::net::Ipv4Addr::new(127, 0, 0, 3));

/// A client of the test server's organization with a redirect URI, for
/// the authorization-code flow: (id, secret); `secret` is `None` for a
/// public client.
async fn app_client(s: &TestServer, public: bool) -> (String, Option<String>) {
    let secret = (!public).then(secrets::new_client_secret);
    let c = NewClient {
        id: ClientId::generate(),
        name: "introspection app".into(),
        secret_hash: secret.as_deref().map(secrets::hash_secret),
        scopes: ScopeSet::parse("users:read profile:read").unwrap(),
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
    (c.id.to_string(), secret)
}

/// An active user of the test server's organization who signs in with [`PASSWORD`].
async fn person(s: &TestServer, email: &str) -> UserId {
    let u = NewUser {
        id: UserId::generate(),
        email: Email::parse(email).unwrap(),
        name: Name::parse("Ida Introspected").unwrap(),
        role: Role::Editor,
        status: UserStatus::Active,
        password_hash: Some(password::hash(PASSWORD.to_owned()).await),
        created_at: Timestamp::now(),
    };
    s.store()
        .insert_user(&s.org(), &u, crate::common::operator())
        .await
        .unwrap()
        .id
}

/// The token response of the authorization-code flow for `email` at the
/// confidential client (`id`, `secret`).
async fn user_tokens(s: &TestServer, id: &str, secret: &str, email: &str) -> Value {
    let mut b = Browser::new(s);
    let (code, verifier) =
        sign_in_for_code(&mut b, id, REDIRECT, "users:read", email, PASSWORD).await;
    let res = s
        .request(Method::POST, "/oauth/token")
        .basic_auth(id, Some(secret))
        .form(&[
            ("grant_type", "authorization_code"),
            ("code", &code),
            ("redirect_uri", REDIRECT),
            ("code_verifier", &verifier),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    res.json().await.unwrap()
}

async fn refresh(s: &TestServer, id: &str, secret: &str, rt: &str) -> reqwest::Response {
    s.request(Method::POST, "/oauth/token")
        .basic_auth(id, Some(secret))
        .form(&[("grant_type", "refresh_token"), ("refresh_token", rt)])
        .send()
        .await
        .unwrap()
}

/// `POST /oauth/introspect` as (`id`, `secret`) with HTTP Basic.
async fn introspect_as(
    s: &TestServer,
    id: &str,
    secret: &str,
    form: &[(&str, &str)],
) -> reqwest::Response {
    s.request(Method::POST, "/oauth/introspect")
        .basic_auth(id, Some(secret))
        .form(form)
        .send()
        .await
        .unwrap()
}

/// The answer for `token`, asked by the bootstrap client: 200, `no-store`.
async fn introspect(s: &TestServer, token: &str) -> Value {
    let (id, secret) = (s.creds.client_id.clone(), s.creds.client_secret.clone());
    answer(introspect_as(s, &id, &secret, &[("token", token)]).await).await
}

async fn answer(res: reqwest::Response) -> Value {
    let status = res.status();
    let cache = res.headers().get("cache-control").cloned();
    let body: Value = res.json().await.unwrap();
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(cache.unwrap(), "no-store", "D49: Cache-Control: no-store");
    body
}

fn inactive(v: &Value, why: &str) {
    assert_eq!(v, &json!({"active": false}), "{why}: only `active: false`");
}

fn keys(v: &Value) -> BTreeSet<&str> {
    v.as_object().unwrap().keys().map(String::as_str).collect()
}

async fn expect_oauth_error(res: reqwest::Response, status: StatusCode, error: &str) -> Value {
    assert_eq!(res.status(), status);
    assert_eq!(res.headers()["cache-control"], "no-store");
    if status == StatusCode::UNAUTHORIZED {
        assert!(
            res.headers()["www-authenticate"]
                .to_str()
                .unwrap()
                .starts_with("Basic"),
            "RFC 6749 §5.2: WWW-Authenticate: Basic"
        );
    }
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["error"], error, "{body}");
    assert!(body["error_description"].is_string(), "{body}");
    body
}

#[tokio::test]
async fn d49_client_credentials_access_token_is_active() {
    let s = TestServer::start().await;
    let t = s.token("users:read products:read").await;
    let v = introspect(&s, &t).await;
    let all = [
        "active",
        "scope",
        "client_id",
        "sub",
        "exp",
        "iat",
        "iss",
        "aud",
        "token_type",
        "token_use",
        "org",
    ];
    assert_eq!(keys(&v), all.into_iter().collect());
    assert_eq!(v["active"], true);
    let scopes: BTreeSet<&str> = v["scope"].as_str().unwrap().split(' ').collect();
    assert_eq!(
        scopes,
        ["products:read", "users:read"].into_iter().collect()
    );
    assert_eq!(v["client_id"], s.creds.client_id.as_str());
    assert_eq!(
        v["sub"],
        s.creds.client_id.as_str(),
        "client credentials: sub is the client"
    );
    assert_eq!(v["iss"], PUBLIC_URL);
    assert_eq!(v["aud"], format!("{PUBLIC_URL}/v1"));
    assert_eq!(v["token_type"], "Bearer");
    assert_eq!(v["token_use"], "access_token");
    assert_eq!(v["org"], s.creds.org.as_str());
    let (iat, exp) = (v["iat"].as_i64().unwrap(), v["exp"].as_i64().unwrap());
    assert_eq!(exp - iat, 3600);
    // form client_secret (client_secret_post) works as well as Basic.
    let res = s
        .request(Method::POST, "/oauth/introspect")
        .form(&[
            ("token", t.as_str()),
            ("client_id", &s.creds.client_id),
            ("client_secret", &s.creds.client_secret),
            ("token_type_hint", "refresh_token"),
        ])
        .send()
        .await
        .unwrap();
    let w = answer(res).await;
    assert_eq!(w["active"], true, "D49: token_type_hint is only a hint");
}

#[tokio::test]
async fn d49_user_access_token_and_own_refresh_token_are_active_and_introspection_consumes_nothing()
{
    let s = TestServer::start().await;
    let (id, secret) = app_client(&s, false).await;
    let secret = secret.unwrap();
    let user = person(&s, "ida@example.com").await;
    let pair = user_tokens(&s, &id, &secret, "ida@example.com").await;
    let at = pair["access_token"].as_str().unwrap();
    let rt = pair["refresh_token"].as_str().unwrap();

    // The user's access token, asked by another client of the organization.
    let v = introspect(&s, at).await;
    assert_eq!(v["active"], true, "{v}");
    assert_eq!(v["sub"], user.as_str());
    assert_eq!(v["client_id"], id.as_str());
    assert_eq!(v["scope"], "users:read");
    assert_eq!(v["token_use"], "access_token");

    // The refresh token, asked by its own client, twice.
    for _ in 0..2 {
        let v = answer(introspect_as(&s, &id, &secret, &[("token", rt)]).await).await;
        assert_eq!(v["active"], true, "{v}");
        assert_eq!(v["token_use"], "refresh_token");
        assert_eq!(v["sub"], user.as_str());
        assert_eq!(v["client_id"], id.as_str());
        assert_eq!(v["org"], s.creds.org.as_str());
        assert_eq!(v["scope"], "users:read");
        assert_eq!(v["token_type"], "Bearer");
        assert_eq!(v["iss"], PUBLIC_URL);
        assert!(v["exp"].as_i64().unwrap() > v["iat"].as_i64().unwrap());
    }
    // D49: looking used nothing up: the refresh works as the first use.
    let res = refresh(&s, &id, &secret, rt).await;
    assert_eq!(res.status(), StatusCode::OK, "the refresh still works");
    let next: Value = res.json().await.unwrap();
    let rt2 = next["refresh_token"].as_str().unwrap();
    // The used token is no longer active; its successor is.
    inactive(
        &answer(introspect_as(&s, &id, &secret, &[("token", rt)]).await).await,
        "a used refresh token",
    );
    let v = answer(introspect_as(&s, &id, &secret, &[("token", rt2)]).await).await;
    assert_eq!(v["active"], true, "{v}");
    // D24: the access token issued with the used refresh token died with it.
    inactive(&introspect(&s, at).await, "the replaced access token");
    let at2 = next["access_token"].as_str().unwrap();
    assert_eq!(introspect(&s, at2).await["active"], true);
}

#[tokio::test]
async fn d49_another_clients_refresh_token_is_inactive() {
    let s = TestServer::start().await;
    let (id, secret) = app_client(&s, false).await;
    let secret = secret.unwrap();
    person(&s, "ole@example.com").await;
    let pair = user_tokens(&s, &id, &secret, "ole@example.com").await;
    let rt = pair["refresh_token"].as_str().unwrap();
    // The bootstrap client is of the same organization but not the token's client.
    inactive(&introspect(&s, rt).await, "another client's refresh token");
    // And that look did not use it up either.
    assert_eq!(refresh(&s, &id, &secret, rt).await.status(), StatusCode::OK);
}

#[tokio::test]
async fn d49_api_key_of_the_organization_is_active() {
    let s = TestServer::start().await;
    let raw = secrets::new_api_key(false);
    let key = ApiKey {
        id: ApiKeyId::generate(),
        org: s.org(),
        name: "introspected".into(),
        scopes: ScopeSet::parse("products:read").unwrap(),
        created_at: Timestamp::now(),
        prefix: String::new(),
        owner: None,
        expires_at: None,
        last_used_at: None,
        revoked_at: None,
    };
    s.store()
        .insert_api_key(
            &key.org,
            &key,
            &secrets::hash_secret(&raw),
            crate::common::operator(),
        )
        .await
        .unwrap();
    let v = introspect(&s, &raw).await;
    assert_eq!(v["active"], true, "{v}");
    assert_eq!(v["token_use"], "api_key");
    assert_eq!(v["sub"], key.id.as_str(), "D49: sub is the key's id");
    assert!(v.get("client_id").is_none(), "D49: no client_id: {v}");
    assert!(v.get("exp").is_none(), "D49: a key without expiry: {v}");
    assert_eq!(v["scope"], "products:read");
    assert_eq!(v["org"], s.creds.org.as_str());
    assert_eq!(v["token_type"], "Bearer");
    assert_eq!(v["iat"], key.created_at.unix_seconds());
    // A revoked key is inactive.
    s.store()
        .revoke_api_key(
            &key.org,
            &key.id,
            Timestamp::now(),
            crate::common::operator(),
        )
        .await
        .unwrap();
    inactive(&introspect(&s, &raw).await, "a revoked API key");
}

#[tokio::test]
async fn d49_revoked_tokens_are_inactive() {
    let s = TestServer::start().await;
    let t = s.token("users:read").await;
    assert_eq!(introspect(&s, &t).await["active"], true);
    let res = s
        .request(Method::POST, "/oauth/revoke")
        .basic_auth(&s.creds.client_id, Some(&s.creds.client_secret))
        .form(&[("token", t.as_str())])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    inactive(&introspect(&s, &t).await, "a revoked access token");

    let (id, secret) = app_client(&s, false).await;
    let secret = secret.unwrap();
    person(&s, "rev@example.com").await;
    let pair = user_tokens(&s, &id, &secret, "rev@example.com").await;
    let rt = pair["refresh_token"].as_str().unwrap();
    let res = s
        .request(Method::POST, "/oauth/revoke")
        .basic_auth(&id, Some(&secret))
        .form(&[("token", rt)])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    inactive(
        &answer(introspect_as(&s, &id, &secret, &[("token", rt)]).await).await,
        "a revoked refresh token",
    );
    inactive(
        &introspect(&s, pair["access_token"].as_str().unwrap()).await,
        "an access token of a revoked chain",
    );
}

#[tokio::test]
async fn d49_another_organizations_tokens_are_inactive() {
    let s = TestServer::start().await;
    let other = s.new_org(Plan::Free).await;
    let (oid, osecret) = s.new_client(&other, "users:read").await;
    let theirs = s.token_for(&oid, &osecret, "users:read").await;
    inactive(
        &introspect(&s, &theirs).await,
        "another organization's token",
    );
    // Nor does the other organization learn about ours.
    let ours = s.token("users:read").await;
    inactive(
        &answer(introspect_as(&s, &oid, &osecret, &[("token", &ours)]).await).await,
        "our token asked by another organization",
    );
    // Each sees its own.
    let v = answer(introspect_as(&s, &oid, &osecret, &[("token", &theirs)]).await).await;
    assert_eq!(v["org"], other.as_str());
}

#[tokio::test]
async fn d49_garbage_and_unknown_tokens_are_inactive() {
    let s = TestServer::start().await;
    let t = s.token("users:read").await;
    let mut tampered = t.clone();
    tampered.pop();
    tampered.push(if t.ends_with('A') { 'B' } else { 'A' });
    for (token, why) in [
        ("garbage", "garbage"),
        ("rt_unknown", "an unknown refresh token"),
        ("gk_live_unknown", "an unknown API key"),
        ("gk_test_unknown", "a staging key in production"),
        ("a.b.c", "a malformed JWT"),
        (tampered.as_str(), "a forged signature"),
    ] {
        inactive(&introspect(&s, token).await, why);
    }
}

#[tokio::test]
async fn d49_missing_token_is_invalid_request() {
    let s = TestServer::start().await;
    let res = introspect_as(&s, &s.creds.client_id, &s.creds.client_secret, &[]).await;
    expect_oauth_error(res, StatusCode::BAD_REQUEST, "invalid_request").await;
    let res = s
        .request(Method::POST, "/oauth/introspect")
        .basic_auth(&s.creds.client_id, Some(&s.creds.client_secret))
        .body("token=x")
        .send()
        .await
        .unwrap();
    expect_oauth_error(res, StatusCode::BAD_REQUEST, "invalid_request").await;
}

#[tokio::test]
async fn d49_public_client_and_bad_secret_are_invalid_client() {
    let s = TestServer::start().await;
    let t = s.token("users:read").await;
    let (public, _) = app_client(&s, true).await;
    let res = s
        .request(Method::POST, "/oauth/introspect")
        .form(&[("token", t.as_str()), ("client_id", &public)])
        .send()
        .await
        .unwrap();
    expect_oauth_error(res, StatusCode::UNAUTHORIZED, "invalid_client").await;
    let res = introspect_as(&s, &s.creds.client_id, "wrong", &[("token", &t)]).await;
    expect_oauth_error(res, StatusCode::UNAUTHORIZED, "invalid_client").await;
    // Without any client authentication.
    let res = s
        .request(Method::POST, "/oauth/introspect")
        .form(&[("token", t.as_str())])
        .send()
        .await
        .unwrap();
    expect_oauth_error(res, StatusCode::UNAUTHORIZED, "invalid_client").await;
    // D21 (revised): Basic and a form secret together are ambiguous.
    let res = s
        .request(Method::POST, "/oauth/introspect")
        .basic_auth(&s.creds.client_id, Some(&s.creds.client_secret))
        .form(&[
            ("token", t.as_str()),
            ("client_secret", &s.creds.client_secret),
        ])
        .send()
        .await
        .unwrap();
    expect_oauth_error(res, StatusCode::BAD_REQUEST, "invalid_request").await;
}

#[tokio::test]
async fn d49_d28_failed_authentications_are_guarded() {
    let s = TestServer::start().await;
    let t = s.token("users:read").await;
    let from = crate::common::client_from(&s, OTHER_SOURCE);
    let attempt = |secret: &str| {
        from.post(s.url("/oauth/introspect"))
            .basic_auth(&s.creds.client_id, Some(secret.to_owned()))
            .form(&[("token", t.as_str())])
            .send()
    };
    for i in 0..10 {
        let res = attempt("wrong").await.unwrap();
        assert_eq!(res.status(), StatusCode::UNAUTHORIZED, "attempt {}", i + 1);
    }
    // D28 (revised): the pair is blocked, even with the right secret.
    let res = attempt(&s.creds.client_secret).await.unwrap();
    assert_eq!(res.status(), StatusCode::TOO_MANY_REQUESTS);
    let retry: u64 = res.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=300).contains(&retry), "Retry-After {retry}");
    assert_eq!(res.headers()["cache-control"], "no-store");
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["error"], "temporarily_unavailable", "{body}");
    // The guard is shared with the token endpoint (one count per pair).
    let res = from
        .post(s.url("/oauth/token"))
        .basic_auth(&s.creds.client_id, Some(&s.creds.client_secret))
        .form(&[("grant_type", "client_credentials")])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::TOO_MANY_REQUESTS);
    // Another address with the right secret is not blocked.
    let v = introspect(&s, &t).await;
    assert_eq!(v["active"], true);
}

#[tokio::test]
async fn d49_metadata_and_openapi_name_the_endpoint() {
    let s = TestServer::start().await;
    let meta: Value = s
        .request(Method::GET, "/.well-known/oauth-authorization-server")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        meta["introspection_endpoint"],
        format!("{PUBLIC_URL}/oauth/introspect")
    );
    let doc: Value = s
        .request(Method::GET, "/v1/openapi.json")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let op = &doc["paths"]["/oauth/introspect"]["post"];
    assert_eq!(op["operationId"], "introspect", "{op}");
    assert!(
        doc["components"]["schemas"]["IntrospectionResponse"].is_object(),
        "the answer's schema is published"
    );
}

#[tokio::test]
async fn d49_a_deactivated_users_tokens_are_inactive() {
    let s = TestServer::start().await;
    let (id, secret) = app_client(&s, false).await;
    let secret = secret.unwrap();
    let user = person(&s, "gone@example.com").await;
    let pair = user_tokens(&s, &id, &secret, "gone@example.com").await;
    let admin = s.token("users:read users:write").await;
    let res = s
        .call(
            Method::PATCH,
            &format!("/v1/users/{user}"),
            &admin,
            Some(json!({"status": "inactive"})),
        )
        .await;
    assert_eq!(res.status(), StatusCode::OK);
    // D11: deactivation revokes the user's tokens and refresh chains.
    inactive(
        &introspect(&s, pair["access_token"].as_str().unwrap()).await,
        "a deactivated user's access token",
    );
    let rt = pair["refresh_token"].as_str().unwrap();
    inactive(
        &answer(introspect_as(&s, &id, &secret, &[("token", rt)]).await).await,
        "a deactivated user's refresh token",
    );
}

/// `gatehouse ARGS` on the test server's data, with its public URL (the
/// issuer its access tokens name).
async fn operator(s: &TestServer, args: &[&str], stdin: Option<&str>) -> crate::cli::Out {
    let dir = s.data_dir();
    let db = crate::common::db_args(&dir);
    let mut all = vec!["--data-dir", dir.to_str().unwrap()];
    all.extend(db.iter().map(String::as_str));
    all.extend_from_slice(args);
    let url = std::path::Path::new(PUBLIC_URL);
    crate::cli::run_with_env(&all, &[("GATEHOUSE_PUBLIC_URL", url)], stdin).await
}

/// Waits (at most 5 s) until the server refuses `token`: another process
/// revoked it, and the server learns it from storage (D40's next request).
async fn refused_soon(s: &TestServer, token: &str, why: &str) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let res = s
            .call(Method::GET, "/v1/products?limit=1", token, None)
            .await;
        if res.status() == StatusCode::UNAUTHORIZED {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{why}: still {}",
            res.status()
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

/// Issue 32: `gatehouse token introspect` answers as D49's endpoint does,
/// for any organization's access token, refresh token or API key (the
/// operator is no client, so nothing restricts the look), and `gatehouse
/// token revoke` ends each as D25 does: the access token, the refresh
/// token's whole chain, the key. The running server refuses them at once;
/// the revocations are in the audit log as the operator's (D58).
#[tokio::test]
async fn operators_introspect_and_revoke_any_token_from_the_command_line() {
    let s = TestServer::start().await;
    let t = s.token("products:read").await;
    let v = operator(&s, &["token", "introspect", &t, "--json"], None)
        .await
        .json();
    assert_eq!(v["active"], true, "{v}");
    assert_eq!(v["token_use"], "access_token");
    assert_eq!(v["org"], s.creds.org.as_str());
    assert_eq!(v["client_id"], s.creds.client_id.as_str());
    assert_eq!(v["scope"], "products:read");
    // From standard input, as text.
    let text = operator(&s, &["token", "introspect", "-"], Some(&format!("{t}\n"))).await;
    assert!(text.status.success(), "{}", text.stderr);
    assert!(text.stdout.contains("active: true"), "{}", text.stdout);
    assert!(
        text.stdout.contains("scope: products:read"),
        "{}",
        text.stdout
    );

    // Another organization's token: the operator sees it too.
    let other = s.new_org(gatehouse_domain::Plan::Pro).await;
    let (oid, osecret) = s.new_client(&other, "products:read").await;
    let ot = s.token_for(&oid, &osecret, "products:read").await;
    let v = operator(&s, &["token", "introspect", &ot, "--json"], None)
        .await
        .json();
    assert_eq!(
        (v["active"].as_bool(), v["org"].as_str()),
        (Some(true), Some(other.as_str()))
    );

    // A person's refresh token (read, never used up).
    let (id, secret) = app_client(&s, false).await;
    let secret = secret.unwrap();
    let user = person(&s, "cli-introspected@example.com").await;
    let pair = user_tokens(&s, &id, &secret, "cli-introspected@example.com").await;
    let rt = pair["refresh_token"].as_str().unwrap();
    let at = pair["access_token"].as_str().unwrap();
    let v = operator(&s, &["token", "introspect", rt, "--json"], None)
        .await
        .json();
    assert_eq!(v["token_use"], "refresh_token", "{v}");
    assert_eq!(v["sub"], user.as_str());

    // Revoked: the access token…
    let r = operator(&s, &["token", "revoke", &t, "--json"], None)
        .await
        .json();
    assert_eq!(r["revoked"], "access_token", "{r}");
    assert!(r["jti"].is_string());
    refused_soon(&s, &t, "a revoked access token").await;
    let v = operator(&s, &["token", "introspect", &t, "--json"], None)
        .await
        .json();
    assert_eq!(v, json!({"active": false}));
    // … the refresh token's chain, with its access token…
    let r = operator(&s, &["token", "revoke", "-", "--json"], Some(rt))
        .await
        .json();
    assert_eq!(r["revoked"], "refresh_chain", "{r}");
    assert_eq!(
        refresh(&s, &id, &secret, rt).await.status(),
        StatusCode::BAD_REQUEST
    );
    refused_soon(&s, at, "the chain's access token").await;
    // … and an API key.
    let key = crate::cli::gatehouse(
        &s.data_dir(),
        &[
            "apikey",
            "create",
            "--org",
            s.creds.org.as_str(),
            "--name",
            "to revoke",
            "--scopes",
            "products:read",
            "--json",
        ],
        None,
    )
    .await
    .json();
    let raw = key["key"].as_str().unwrap();
    assert_eq!(
        s.call(Method::GET, "/v1/products?limit=1", raw, None)
            .await
            .status(),
        StatusCode::OK
    );
    let r = operator(&s, &["token", "revoke", raw, "--json"], None)
        .await
        .json();
    assert_eq!(
        (r["revoked"].as_str(), r["id"].as_str()),
        (Some("api_key"), key["id"].as_str())
    );
    refused_soon(&s, raw, "a revoked API key").await;

    // Nothing live: said, not an error.
    let r = operator(&s, &["token", "revoke", "not-a-token", "--json"], None)
        .await
        .json();
    assert_eq!(r["revoked"], Value::Null);
    let v = operator(&s, &["token", "introspect", "not-a-token", "--json"], None)
        .await
        .json();
    assert_eq!(v, json!({"active": false}));

    // D58: the operator's revocations are recorded.
    let admin = s.token("audit:read").await;
    let log = crate::audit::audit_once(&s, &admin, "?action=token.revoked", 2).await;
    assert_eq!(
        log["meta"]["total"], 2,
        "the access token and the chain: {log}"
    );
    let entries = log["data"].as_array().unwrap();
    assert!(
        entries.iter().all(|e| e["actor"]["type"] == "operator"),
        "{log}"
    );
}
