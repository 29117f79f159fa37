//! OpenID Connect from outside (D49): a relying party registered with
//! post-logout redirect URIs, people who sign in with a real password, a
//! sign-in through the pages that returns the token response (ID token
//! included), and the checks an outside client can make of a browser
//! session. Shared by `outside` (both backends) and `multinode_logout`.

use std::sync::OnceLock;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use gatehouse_auth::{pkce, secrets};
use gatehouse_domain::{
    ClientId, Email, Name, NewUser, OrgId, Role, ScopeSet, Timestamp, User, UserId, UserStatus,
};
use gatehouse_store::NewClient;
use reqwest::{Method, StatusCode, Url};
use serde_json::Value;

use super::TestServer;
use super::browser::{Browser, Page};

pub(crate) const PASSWORD: &str = "a long passphrase from outside";
pub(crate) const REDIRECT: &str = "https://rp.example.com/cb";
pub(crate) const SCOPE: &str = "openid profile:read";

/// A confidential relying party: its id, secret and post-logout URI.
#[derive(Clone, Debug)]
pub(crate) struct Rp {
    pub id: String,
    pub secret: String,
    pub logout_to: String,
}

/// Registers a relying party in `org` whose post-logout redirect URI is
/// `logout_to` (D46, D49).
pub(crate) async fn rp(s: &TestServer, org: &OrgId, logout_to: &str) -> Rp {
    let secret = secrets::new_client_secret();
    let c = NewClient {
        id: ClientId::generate(),
        name: "Relying Party".into(),
        secret_hash: Some(secrets::hash_secret(&secret)),
        scopes: ScopeSet::parse(SCOPE).unwrap(),
        redirect_uris: vec![REDIRECT.into()],
        post_logout_redirect_uris: vec![logout_to.into()],
        admin_approved: false,
        owner: None,
        created_at: Timestamp::now(),
    };
    s.store()
        .insert_client(org, &c, crate::common::operator())
        .await
        .unwrap();
    Rp {
        id: c.id.to_string(),
        secret,
        logout_to: logout_to.into(),
    }
}

/// An active person of `org` who signs in with [`PASSWORD`].
pub(crate) async fn person(s: &TestServer, org: &OrgId, email: &str) -> User {
    static HASH: OnceLock<String> = OnceLock::new();
    let hash = HASH
        .get_or_init(|| gatehouse_auth::password::hash_blocking(PASSWORD))
        .clone();
    let u = NewUser {
        id: UserId::generate(),
        email: Email::parse(email).unwrap(),
        name: Name::parse("Outside Person").unwrap(),
        role: Role::Viewer,
        status: UserStatus::Active,
        password_hash: Some(hash),
        created_at: Timestamp::now(),
    };
    s.store()
        .insert_user(org, &u, crate::common::operator())
        .await
        .unwrap()
}

fn authorize_params<'a>(
    rp: &'a Rp,
    challenge: &'a str,
    prompt: &'a str,
) -> Vec<(&'a str, &'a str)> {
    vec![
        ("response_type", "code"),
        ("client_id", rp.id.as_str()),
        ("redirect_uri", REDIRECT),
        ("scope", SCOPE),
        ("state", "st-outside"),
        ("code_challenge", challenge),
        ("code_challenge_method", "S256"),
        ("prompt", prompt),
    ]
}

/// A query parameter of a redirect's `Location`.
pub(crate) fn location_param(page: &Page, name: &str) -> Option<String> {
    let url = Url::parse(&page.location()?).ok()?;
    url.query_pairs()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.into_owned())
}

/// A fresh sign-in of `email` in `b` (`prompt=login`: always a new browser
/// session), consenting when asked: the token response of its code.
pub(crate) async fn sign_in(b: &mut Browser<'_>, s: &TestServer, rp: &Rp, email: &str) -> Value {
    let verifier = format!(
        "{}-{}",
        gatehouse_domain::random::base62(256),
        gatehouse_domain::random::base62(64)
    );
    let challenge = pkce::challenge_for(&verifier);
    let login = b
        .authorize(&authorize_params(rp, &challenge, "login"))
        .await;
    let form = login
        .form_with("password")
        .unwrap_or_else(|| panic!("a login page: {}", login.body));
    let mut back = b
        .submit(&form, &[("email", email), ("password", PASSWORD)])
        .await;
    if let Some(consent) = back.form_with("decision") {
        back = b.submit(&consent, &[("decision", "allow")]).await;
    }
    let code = location_param(&back, "code")
        .unwrap_or_else(|| panic!("a code: {:?} {}", back.location(), back.body));
    let res = s
        .request(Method::POST, "/oauth/token")
        .basic_auth(&rp.id, Some(&rp.secret))
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
    res.json().await.unwrap()
}

/// Whether `b`'s browser session still signs it in without a page: an
/// authorization request with `prompt=none` answers a code (D49), not
/// `login_required`.
pub(crate) async fn session_works(b: &mut Browser<'_>, rp: &Rp) -> bool {
    let challenge = pkce::challenge_for(&gatehouse_domain::random::base62(256));
    let page = b.authorize(&authorize_params(rp, &challenge, "none")).await;
    assert_eq!(page.status, StatusCode::SEE_OTHER, "{}", page.body);
    match (
        location_param(&page, "code"),
        location_param(&page, "error"),
    ) {
        (Some(_), None) => true,
        (None, Some(e)) if e == "login_required" => false,
        other => panic!("prompt=none answered {other:?}"),
    }
}

/// The status of a refresh with the token response's refresh token (200
/// while the chain lives). Uses the refresh token up: pass a pair once.
pub(crate) async fn refresh_status(s: &TestServer, rp: &Rp, pair: &Value) -> StatusCode {
    s.request(Method::POST, "/oauth/token")
        .basic_auth(&rp.id, Some(&rp.secret))
        .form(&[
            ("grant_type", "refresh_token"),
            ("refresh_token", pair["refresh_token"].as_str().unwrap()),
        ])
        .send()
        .await
        .unwrap()
        .status()
}

/// The ID token of a token response.
pub(crate) fn id_token(pair: &Value) -> &str {
    pair["id_token"]
        .as_str()
        .unwrap_or_else(|| panic!("an id_token: {pair}"))
}

/// A JWT's claims, unverified.
pub(crate) fn claims(jwt: &str) -> Value {
    let payload = jwt.split('.').nth(1).unwrap();
    serde_json::from_slice(&B64.decode(payload).unwrap()).unwrap()
}

/// `GET /oauth/logout` with `params`, in `b`.
pub(crate) async fn logout(b: &mut Browser<'_>, s: &TestServer, params: &[(&str, &str)]) -> Page {
    let mut u = Url::parse(&s.url("/oauth/logout")).unwrap();
    u.query_pairs_mut().extend_pairs(params);
    b.get(u.as_str()).await
}

/// The confirmation page of `/oauth/logout` (D49): 200, its form, no redirect.
#[track_caller]
pub(crate) fn expect_confirmation(page: &Page) -> super::browser::Form {
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    assert!(page.location().is_none(), "{:?}", page.location());
    page.form_with("confirm")
        .unwrap_or_else(|| panic!("a confirmation form: {}", page.body))
}
