//! The authorization-code flow with PKCE, its login and consent pages, refresh
//! chains and revocation: interface.md §3.3, §4.5, §5; D20, D21, D23–D26, D29.
//!
//! A small "browser" (a cookie jar over the harness's reqwest client, which
//! follows no redirects) drives the HTML pages: it parses the hidden fields of
//! the forms the server renders and posts them back with the cookies it set.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::OnceLock;
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use gatehouse_domain::{ClientId, Email, Name, NewUser, OrgId, Role, ScopeSet, Timestamp, User};
use gatehouse_domain::{UserId, UserStatus};
use reqwest::header::{
    AUTHORIZATION, CACHE_CONTROL, CONTENT_TYPE, COOKIE, LOCATION, SET_COOKIE, WWW_AUTHENTICATE,
};
use reqwest::{Method, Response, StatusCode, Url};
use serde_json::{Value, json};

use crate::common::{FormPairs, PUBLIC_URL, TestServer, expect_error};

// ---------------------------------------------------------------------------
// Fixtures
// ---------------------------------------------------------------------------

const PASSWORD: &str = "a long passphrase for tests";
pub(crate) const REDIRECT: &str = "https://app.example.com/cb";
const OTHER_REDIRECT: &str = "https://app.example.com/other-cb";
const LOOPBACK_REGISTERED: &str = "http://127.0.0.1:8000/cb";
const ALL_SCOPES: &str =
    "users:read users:write profile:read profile:write products:read products:write";
const KNOWN_SCOPES: [&str; 7] = [
    "users:read",
    "users:write",
    "profile:read",
    "profile:write",
    "admin",
    "products:read",
    "products:write",
];
const CSRF_COOKIE: &str = "__Host-gh_csrf";
const SESSION_COOKIE: &str = "__Host-gh_session";

/// One Argon2id hash of [`PASSWORD`] for every user (the salt is in the PHC string).
fn password_hash() -> String {
    static HASH: OnceLock<String> = OnceLock::new();
    HASH.get_or_init(|| gatehouse_auth::password::hash_blocking(PASSWORD))
        .clone()
}

/// A user with the real password [`PASSWORD`].
async fn user_with_password(
    s: &TestServer,
    org: &OrgId,
    email: &str,
    role: Role,
    status: UserStatus,
) -> User {
    let u = NewUser {
        id: UserId::generate(),
        email: Email::parse(email).unwrap(),
        name: Name::parse("Flow User").unwrap(),
        role,
        status,
        password_hash: Some(password_hash()),
        created_at: Timestamp::now(),
    };
    s.store()
        .insert_user(org, &u, crate::common::operator())
        .await
        .unwrap()
}

pub(crate) async fn active_user(s: &TestServer, email: &str, role: Role) -> User {
    user_with_password(s, &s.org(), email, role, UserStatus::Active).await
}

/// A registered client application.
#[derive(Clone, Debug)]
pub(crate) struct App {
    pub(crate) id: String,
    /// `None` for a public client (D20).
    pub(crate) secret: Option<String>,
}

async fn register(
    s: &TestServer,
    org: &OrgId,
    scopes: &str,
    redirect_uris: &[&str],
    public: bool,
    approve_admin: bool,
) -> App {
    let secret = (!public).then(gatehouse_auth::secrets::new_client_secret);
    let c = gatehouse_store::NewClient {
        id: ClientId::generate(),
        name: "Test App".into(),
        secret_hash: secret.as_deref().map(gatehouse_auth::secrets::hash_secret),
        scopes: ScopeSet::parse(scopes).unwrap(),
        redirect_uris: redirect_uris.iter().map(|u| u.to_string()).collect(),
        admin_approved: false,
        owner: None,
        created_at: Timestamp::now(),
        post_logout_redirect_uris: vec![],
    };
    s.store()
        .insert_client(org, &c, crate::common::operator())
        .await
        .unwrap();
    if approve_admin {
        s.store()
            .approve_admin(org, &c.id, crate::common::operator())
            .await
            .unwrap();
    }
    App {
        id: c.id.to_string(),
        secret,
    }
}

/// A confidential client of the bootstrap organization with every scope but admin.
async fn confidential(s: &TestServer) -> App {
    register(s, &s.org(), ALL_SCOPES, &[REDIRECT], false, false).await
}

fn scope_set(s: &str) -> BTreeSet<String> {
    s.split(' ')
        .filter(|w| !w.is_empty())
        .map(str::to_owned)
        .collect()
}

// ---------------------------------------------------------------------------
// HTML and cookies
// ---------------------------------------------------------------------------

/// Undoes HTML escaping (named and numeric character references).
fn html_unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find('&') {
        out.push_str(&rest[..i]);
        rest = &rest[i..];
        let Some(end) = rest.find(';').filter(|e| *e <= 10) else {
            out.push('&');
            rest = &rest[1..];
            continue;
        };
        let entity = &rest[1..end];
        let decoded = match entity {
            "amp" => Some('&'),
            "lt" => Some('<'),
            "gt" => Some('>'),
            "quot" => Some('"'),
            "apos" => Some('\''),
            _ => {
                if let Some(hex) = entity
                    .strip_prefix("#x")
                    .or_else(|| entity.strip_prefix("#X"))
                {
                    u32::from_str_radix(hex, 16).ok().and_then(char::from_u32)
                } else if let Some(dec) = entity.strip_prefix('#') {
                    dec.parse::<u32>().ok().and_then(char::from_u32)
                } else {
                    None
                }
            }
        };
        match decoded {
            Some(c) => {
                out.push(c);
                rest = &rest[end + 1..];
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// The value of attribute `name` in one tag (`<input …>`), unescaped.
fn attr(tag: &str, name: &str) -> Option<String> {
    for quote in ['"', '\''] {
        let needle = format!(" {name}={quote}");
        if let Some(i) = tag.find(&needle) {
            let start = i + needle.len();
            let end = tag[start..].find(quote)? + start;
            return Some(html_unescape(&tag[start..end]));
        }
    }
    None
}

/// A form of a page: its action and its hidden fields.
#[derive(Debug, Clone)]
struct Form {
    action: String,
    hidden: Vec<(String, String)>,
    /// Names of every input, hidden or not.
    inputs: Vec<String>,
    /// (name, value) of submit buttons.
    buttons: Vec<(String, String)>,
}

/// The form whose `action` is `action` (relative, or absolute on the public URL).
fn find_form(html: &str, action: &str) -> Option<Form> {
    let mut search = 0;
    while let Some(i) = html[search..].find("<form") {
        let start = search + i;
        let tag_end = html[start..].find('>')? + start;
        let tag = &html[start..=tag_end];
        let end = html[tag_end..]
            .find("</form>")
            .map(|e| e + tag_end)
            .unwrap_or(html.len());
        search = tag_end;
        let Some(act) = attr(tag, "action") else {
            continue;
        };
        let act_path = act.strip_prefix(PUBLIC_URL).unwrap_or(&act).to_owned();
        if act_path != action {
            continue;
        }
        let body = &html[tag_end..end];
        let mut form = Form {
            action: act_path,
            hidden: vec![],
            inputs: vec![],
            buttons: vec![],
        };
        for (open, list) in [("<input", 0), ("<button", 1)] {
            let mut from = 0;
            while let Some(j) = body[from..].find(open) {
                let t0 = from + j;
                let t1 = body[t0..]
                    .find('>')
                    .map(|e| e + t0)
                    .unwrap_or(body.len() - 1);
                let t = &body[t0..=t1];
                from = t1;
                let name = attr(t, "name");
                if list == 0 {
                    if let Some(n) = &name {
                        form.inputs.push(n.clone());
                        if attr(t, "type").is_some_and(|ty| ty.eq_ignore_ascii_case("hidden")) {
                            form.hidden
                                .push((n.clone(), attr(t, "value").unwrap_or_default()));
                        }
                    }
                } else if let Some(n) = name {
                    form.buttons.push((n, attr(t, "value").unwrap_or_default()));
                }
            }
        }
        return Some(form);
    }
    None
}

/// The text of the page's error paragraph (`class="error"` / `role="alert"`).
fn error_text(html: &str) -> Option<String> {
    let i = html
        .find("role=\"alert\"")
        .or_else(|| html.find("class=\"error\""))?;
    let open_end = html[i..].find('>')? + i + 1;
    let close = html[open_end..].find("</")? + open_end;
    Some(html_unescape(html[open_end..close].trim()))
}

/// The scopes a consent page lists: known scope names, as whole words, in the
/// page before its form (the form's hidden `scope` field repeats the request).
fn consent_scopes(html: &str) -> BTreeSet<String> {
    let start = html
        .find("<main")
        .or_else(|| html.find("<body"))
        .unwrap_or(0);
    let end = html[start..]
        .find("<form")
        .map(|e| e + start)
        .unwrap_or(html.len());
    // The page's text only: attributes (the "not you?" link repeats the
    // request's query, D49) are not what the person reads.
    let mut text = String::new();
    let mut in_tag = false;
    for c in html[start..end].chars() {
        match c {
            '<' => in_tag = true,
            '>' => in_tag = false,
            c if !in_tag => text.push(c),
            _ => {}
        }
    }
    let text = text.as_str();
    let word = |c: char| c.is_ascii_alphanumeric() || c == ':' || c == '_' || c == '-';
    KNOWN_SCOPES
        .iter()
        .filter(|name| {
            text.match_indices(*name).any(|(i, m)| {
                let before = text[..i].chars().next_back();
                let after = text[i + m.len()..].chars().next();
                !before.is_some_and(word) && !after.is_some_and(word)
            })
        })
        .map(|s| s.to_string())
        .collect()
}

fn header(
    res_headers: &reqwest::header::HeaderMap,
    name: impl reqwest::header::AsHeaderName,
) -> String {
    res_headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned()
}

/// A response with its body read.
#[derive(Debug)]
struct Page {
    status: StatusCode,
    headers: reqwest::header::HeaderMap,
    body: String,
}

impl Page {
    async fn read(res: Response) -> Self {
        let status = res.status();
        let headers = res.headers().clone();
        let body = res.text().await.unwrap();
        Self {
            status,
            headers,
            body,
        }
    }

    fn location(&self) -> Option<String> {
        self.headers
            .get(LOCATION)
            .map(|v| v.to_str().unwrap().to_owned())
    }

    fn set_cookies(&self) -> Vec<String> {
        self.headers
            .get_all(SET_COOKIE)
            .iter()
            .map(|v| v.to_str().unwrap().to_owned())
            .collect()
    }

    /// The raw `Set-Cookie` line for cookie `name`, if this response set it.
    fn set_cookie(&self, name: &str) -> Option<String> {
        self.set_cookies().into_iter().find(|c| {
            c.split(';')
                .next()
                .unwrap()
                .trim()
                .starts_with(&format!("{name}="))
        })
    }

    fn is_html(&self) -> bool {
        header(&self.headers, CONTENT_TYPE).starts_with("text/html")
    }

    fn login_form(&self) -> Option<Form> {
        find_form(&self.body, "/oauth/authorize/login").filter(|f| {
            f.inputs.iter().any(|n| n == "email") && f.inputs.iter().any(|n| n == "password")
        })
    }

    fn consent_form(&self) -> Option<Form> {
        find_form(&self.body, "/oauth/authorize/decision")
    }

    /// Asserts a login page (D26: fields `email` and `password`, a CSRF token).
    #[track_caller]
    fn expect_login(&self, status: StatusCode) -> Form {
        assert_eq!(self.status, status, "expected a login page: {}", self.body);
        assert!(self.is_html(), "pages are HTML: {:?}", self.headers);
        let form = self
            .login_form()
            .unwrap_or_else(|| panic!("D26: a login form with email and password: {}", self.body));
        assert!(
            form.hidden
                .iter()
                .any(|(k, v)| k == "csrf_token" && !v.is_empty()),
            "D26: forms carry CSRF tokens: {form:?}"
        );
        form
    }

    #[track_caller]
    fn expect_consent(&self) -> Form {
        assert_eq!(
            self.status,
            StatusCode::OK,
            "expected the consent page: {:?} {}",
            self.location(),
            self.body
        );
        let form = self.consent_form().unwrap_or_else(|| {
            panic!(
                "a consent form posting to /oauth/authorize/decision: {}",
                self.body
            )
        });
        assert!(
            form.hidden
                .iter()
                .any(|(k, v)| k == "csrf_token" && !v.is_empty()),
            "D26: forms carry CSRF tokens: {form:?}"
        );
        assert!(
            form.buttons
                .iter()
                .any(|(n, v)| n == "decision" && v == "allow")
                && form
                    .buttons
                    .iter()
                    .any(|(n, v)| n == "decision" && v == "deny"),
            "D26: decision=allow|deny: {form:?}"
        );
        form
    }

    /// Asserts a redirect to the client (303 or another 3xx) and returns its
    /// query parameters, after checking that it goes to `redirect_uri`.
    #[track_caller]
    fn expect_redirect_to(&self, redirect_uri: &str) -> BTreeMap<String, String> {
        assert!(
            self.status.is_redirection(),
            "expected a redirect to the client, got {}: {}",
            self.status,
            self.body
        );
        let loc = self.location().expect("a Location header");
        let (base, _) = loc.split_once('?').expect("the redirect carries a query");
        let (reg_base, _) = redirect_uri.split_once('?').unwrap_or((redirect_uri, ""));
        assert_eq!(base, reg_base, "redirects to the redirect_uri: {loc}");
        Url::parse(&loc)
            .unwrap()
            .query_pairs()
            .map(|(k, v)| (k.into_owned(), v.into_owned()))
            .collect()
    }

    /// Asserts an error page that does not send the browser anywhere (D26).
    #[track_caller]
    fn expect_error_page(&self, status: StatusCode) {
        assert_eq!(self.status, status, "{:?} {}", self.location(), self.body);
        assert!(
            self.location().is_none(),
            "D26: never a redirect here (Location: {:?})",
            self.location()
        );
        assert!(self.is_html(), "an HTML error page: {:?}", self.headers);
        assert!(
            self.login_form().is_none() && self.consent_form().is_none(),
            "an error page, not a form: {}",
            self.body
        );
    }
}

/// A browser: the harness's client (no redirects followed) and a cookie jar.
struct Browser<'a> {
    s: &'a TestServer,
    jar: BTreeMap<String, String>,
}

impl<'a> Browser<'a> {
    fn new(s: &'a TestServer) -> Self {
        Self {
            s,
            jar: BTreeMap::new(),
        }
    }

    fn cookie_header(&self) -> Option<String> {
        (!self.jar.is_empty()).then(|| {
            self.jar
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join("; ")
        })
    }

    fn absorb(&mut self, page: &Page) {
        for c in page.set_cookies() {
            let first = c.split(';').next().unwrap().trim();
            let (k, v) = first.split_once('=').unwrap();
            let expired = c
                .split(';')
                .any(|a| a.trim().eq_ignore_ascii_case("max-age=0"));
            if v.is_empty() || expired {
                self.jar.remove(k);
            } else {
                self.jar.insert(k.to_owned(), v.to_owned());
            }
        }
    }

    /// GET of an absolute URL (or a path) on the test server.
    async fn get(&mut self, url: &str) -> Page {
        let url = if url.starts_with('/') {
            self.s.url(url)
        } else {
            url.to_owned()
        };
        let mut rb = self.s.client.get(url);
        if let Some(c) = self.cookie_header() {
            rb = rb.header(COOKIE, c);
        }
        let page = Page::read(rb.send().await.unwrap()).await;
        self.absorb(&page);
        page
    }

    /// GET /oauth/authorize with these query parameters.
    async fn authorize(&mut self, params: &[(&str, &str)]) -> Page {
        let url = authorize_url(self.s, params);
        self.get(&url).await
    }

    /// Posts `fields` to `action` with this browser's cookies.
    async fn post(&mut self, action: &str, fields: &[(String, String)]) -> Page {
        let mut rb = self.s.request(Method::POST, action).form(fields);
        if let Some(c) = self.cookie_header() {
            rb = rb.header(COOKIE, c);
        }
        let page = Page::read(rb.send().await.unwrap()).await;
        self.absorb(&page);
        page
    }

    /// Submits `form` with its hidden fields and `extra`.
    async fn submit(&mut self, form: &Form, extra: &[(&str, &str)]) -> Page {
        let mut fields = form.hidden.clone();
        fields.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        self.post(&form.action, &fields).await
    }

    async fn login(&mut self, login: &Page, email: &str, password: &str) -> Page {
        let form = login.login_form().expect("a login form");
        self.submit(&form, &[("email", email), ("password", password)])
            .await
    }

    async fn decide(&mut self, consent: &Page, decision: &str) -> Page {
        let form = consent.consent_form().expect("a consent form");
        self.submit(&form, &[("decision", decision)]).await
    }
}

fn authorize_url(s: &TestServer, params: &[(&str, &str)]) -> String {
    let mut u = Url::parse(&s.url("/oauth/authorize")).unwrap();
    {
        let mut q = u.query_pairs_mut();
        for (k, v) in params {
            q.append_pair(k, v);
        }
    }
    u.to_string()
}

/// A PKCE pair (RFC 7636): (verifier, S256 challenge).
fn pkce() -> (String, String) {
    let verifier = format!(
        "{}-{}",
        gatehouse_domain::random::base62(256),
        gatehouse_domain::random::base62(64)
    );
    (
        verifier.clone(),
        gatehouse_auth::pkce::challenge_for(&verifier),
    )
}

/// An authorization request.
#[derive(Clone, Debug)]
struct AuthRequest {
    client_id: String,
    redirect_uri: String,
    scope: Option<String>,
    state: String,
    verifier: String,
    challenge: String,
}

impl AuthRequest {
    fn new(app: &App, scope: Option<&str>) -> Self {
        let (verifier, challenge) = pkce();
        Self {
            client_id: app.id.clone(),
            redirect_uri: REDIRECT.into(),
            scope: scope.map(str::to_owned),
            state: format!("st-{}", gatehouse_domain::random::base62(64)),
            verifier,
            challenge,
        }
    }

    fn params(&self) -> Vec<(&str, &str)> {
        let mut p = vec![
            ("response_type", "code"),
            ("client_id", self.client_id.as_str()),
            ("redirect_uri", self.redirect_uri.as_str()),
            ("state", self.state.as_str()),
            ("code_challenge", self.challenge.as_str()),
            ("code_challenge_method", "S256"),
            // D49 remembers consent; these tests walk the consent page each
            // time (the remembered path has its own tests in oidc.rs).
            ("prompt", "consent"),
        ];
        if let Some(sc) = &self.scope {
            p.push(("scope", sc.as_str()));
        }
        p
    }
}

/// Runs the pages up to the consent page; returns it.
async fn to_consent(b: &mut Browser<'_>, req: &AuthRequest, email: &str) -> Page {
    let login = b.authorize(&req.params()).await;
    login.expect_login(StatusCode::OK);
    let consent = b.login(&login, email, PASSWORD).await;
    consent.expect_consent();
    consent
}

/// The whole browser part: authorize, log in, allow; returns (code, consent scopes).
async fn obtain_code(s: &TestServer, req: &AuthRequest, email: &str) -> (String, BTreeSet<String>) {
    let mut b = Browser::new(s);
    let consent = to_consent(&mut b, req, email).await;
    let listed = consent_scopes(&consent.body);
    let back = b.decide(&consent, "allow").await;
    let q = back.expect_redirect_to(&req.redirect_uri);
    assert_eq!(
        q.get("state"),
        Some(&req.state),
        "D26: the state comes back: {q:?}"
    );
    assert!(!q.contains_key("error"), "{q:?}");
    let code = q.get("code").expect("D26: a code").clone();
    assert!(code.starts_with("ac_"), "D3: codes are ac_…: {code}");
    (code, listed)
}

// ---------------------------------------------------------------------------
// The token endpoint
// ---------------------------------------------------------------------------

/// `POST path` with client authentication: Basic for a confidential client,
/// `client_id` in the form for a public one.
async fn post_as(s: &TestServer, app: &App, path: &str, form: &[(&str, &str)]) -> Response {
    let mut fields: Vec<(&str, &str)> = form.to_vec();
    let mut rb = s.request(Method::POST, path);
    match &app.secret {
        Some(secret) => rb = rb.basic_auth(&app.id, Some(secret)),
        None => fields.push(("client_id", &app.id)),
    }
    rb.form(&fields).send().await.unwrap()
}

async fn exchange(
    s: &TestServer,
    app: &App,
    code: &str,
    redirect_uri: &str,
    verifier: &str,
) -> Response {
    post_as(
        s,
        app,
        "/oauth/token",
        &[
            ("grant_type", "authorization_code"),
            ("code", code),
            ("redirect_uri", redirect_uri),
            ("code_verifier", verifier),
        ],
    )
    .await
}

pub(crate) async fn refresh(s: &TestServer, app: &App, rt: &str) -> Response {
    post_as(
        s,
        app,
        "/oauth/token",
        &[("grant_type", "refresh_token"), ("refresh_token", rt)],
    )
    .await
}

async fn revoke(s: &TestServer, app: &App, token: &str) -> Response {
    post_as(s, app, "/oauth/revoke", &[("token", token)]).await
}

fn assert_no_store(headers: &reqwest::header::HeaderMap, status: StatusCode) {
    let cc = header(headers, CACHE_CONTROL);
    assert!(
        cc.split(',')
            .any(|d| d.trim().eq_ignore_ascii_case("no-store")),
        "D21: every token response carries Cache-Control: no-store (got {cc:?}, status {status})"
    );
}

/// A token pair from the code or refresh grant (interface.md §2.4, D21, D24).
/// `fresh`: newly minted, so `expires_in` is exactly 3600.
async fn expect_pair(res: Response, fresh: bool) -> Value {
    let status = res.status();
    assert_no_store(res.headers(), status);
    let ct = header(res.headers(), CONTENT_TYPE);
    let text = res.text().await.unwrap();
    assert_eq!(status, StatusCode::OK, "token request failed: {text}");
    assert!(ct.starts_with("application/json"), "{ct}");
    let body: Value = serde_json::from_str(&text).unwrap();
    assert!(
        body["access_token"]
            .as_str()
            .is_some_and(|t| t.split('.').count() == 3),
        "D23: a JWT: {body}"
    );
    assert_eq!(body["token_type"], "Bearer", "{body}");
    let exp = body["expires_in"]
        .as_i64()
        .expect("expires_in is an integer");
    if fresh {
        assert_eq!(exp, 3600, "{body}");
    } else {
        assert!((1..=3600).contains(&exp), "expires_in {exp}: {body}");
    }
    assert!(
        body["refresh_token"]
            .as_str()
            .is_some_and(|t| t.starts_with("rt_")),
        "a refresh token (rt_…, D3): {body}"
    );
    assert!(
        body["scope"].is_string(),
        "RFC 6749 §3.3 / D29: scope: {body}"
    );
    body
}

/// An RFC 6749 §5.2 error of the token or revocation endpoint (D21).
async fn expect_oauth_error(res: Response, status: StatusCode, error: &str) -> Value {
    let got = res.status();
    assert_no_store(res.headers(), got);
    let www = res
        .headers()
        .get(WWW_AUTHENTICATE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let text = res.text().await.unwrap();
    assert_eq!(got, status, "expected {status} {error}, body: {text}");
    let body: Value =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"));
    assert_eq!(body["error"], error, "{body}");
    if status == StatusCode::UNAUTHORIZED {
        let www = www.expect("D21: a failed client authentication carries WWW-Authenticate");
        assert!(www.to_ascii_lowercase().starts_with("basic"), "{www}");
    }
    body
}

async fn expect_invalid_grant(res: Response) {
    expect_oauth_error(res, StatusCode::BAD_REQUEST, "invalid_grant").await;
}

/// RFC 7009 / D25: 200 with an empty body.
async fn expect_revoked(res: Response) {
    let status = res.status();
    let text = res.text().await.unwrap();
    assert_eq!(status, StatusCode::OK, "D25: 200 (not 204): {text}");
    assert!(text.is_empty(), "D25: an empty body: {text:?}");
}

/// GET /v1/users with a bearer token.
async fn users_with(s: &TestServer, token: &str) -> Response {
    s.call(Method::GET, "/v1/users", token, None).await
}

#[track_caller]
fn str_of<'v>(v: &'v Value, k: &str) -> &'v str {
    v[k].as_str().unwrap_or_else(|| panic!("{k} in {v}"))
}

async fn assert_works(s: &TestServer, token: &str, what: &str) {
    let res = users_with(s, token).await;
    let status = res.status();
    assert_eq!(
        status,
        StatusCode::OK,
        "{what} should work: {}",
        res.text().await.unwrap()
    );
}

async fn assert_dead(s: &TestServer, token: &str, what: &str) {
    let res = users_with(s, token).await;
    assert_eq!(
        res.status(),
        StatusCode::UNAUTHORIZED,
        "{what} should be refused"
    );
    expect_error(res, StatusCode::UNAUTHORIZED, "INVALID_TOKEN").await;
}

/// The claims of a JWT (signature not checked).
fn claims(token: &str) -> Value {
    let part = token.split('.').nth(1).unwrap();
    serde_json::from_slice(&B64.decode(part).unwrap()).unwrap()
}

/// Code flow to a token pair, for `email` at `app` with `scope`.
pub(crate) async fn pair_for(s: &TestServer, app: &App, email: &str, scope: Option<&str>) -> Value {
    let req = AuthRequest::new(app, scope);
    let (code, _) = obtain_code(s, &req, email).await;
    expect_pair(
        exchange(s, app, &code, &req.redirect_uri, &req.verifier).await,
        true,
    )
    .await
}

// ---------------------------------------------------------------------------
// The whole flow with a standard client library (the `oauth2` crate)
// ---------------------------------------------------------------------------

/// oauth2's `AsyncHttpClient` over the harness's reqwest 0.13 client.
async fn oauth2_send(
    client: reqwest::Client,
    req: oauth2::HttpRequest,
) -> Result<oauth2::HttpResponse, reqwest::Error> {
    let req = reqwest::Request::try_from(req)?;
    let res = client.execute(req).await?;
    let mut builder = oauth2::http::Response::builder().status(res.status());
    for (name, value) in res.headers() {
        builder = builder.header(name, value);
    }
    let body = res.bytes().await?.to_vec();
    Ok(builder.body(body).expect("a valid response"))
}

/// D24, D25, D26 with the `oauth2` crate: authorize URL with PKCE → login →
/// consent → code → tokens that work → refresh → revoke → refused.
#[tokio::test]
async fn d26_d24_d25_oauth2_crate_code_flow_refresh_and_revoke() {
    use oauth2::basic::{BasicClient, BasicErrorResponseType, BasicTokenType};
    use oauth2::{
        AuthUrl, AuthorizationCode, ClientSecret, CsrfToken, PkceCodeChallenge, RedirectUrl,
        RequestTokenError, RevocationUrl, Scope, StandardRevocableToken, TokenResponse, TokenUrl,
    };

    let s = TestServer::start().await;
    let app = confidential(&s).await;
    let user = active_user(&s, "reader@example.com", Role::Viewer).await;
    let http = |req: oauth2::HttpRequest| oauth2_send(s.client.clone(), req);

    let client = BasicClient::new(oauth2::ClientId::new(app.id.clone()))
        .set_client_secret(ClientSecret::new(app.secret.clone().unwrap()))
        .set_auth_uri(AuthUrl::new(s.url("/oauth/authorize")).unwrap())
        .set_token_uri(TokenUrl::new(s.url("/oauth/token")).unwrap())
        .set_revocation_url(RevocationUrl::new(s.url("/oauth/revoke")).unwrap())
        .set_redirect_uri(RedirectUrl::new(REDIRECT.into()).unwrap());
    let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
    let (url, state) = client
        .authorize_url(CsrfToken::new_random)
        .add_scope(Scope::new("users:read".into()))
        .add_scope(Scope::new("profile:read".into()))
        .set_pkce_challenge(challenge)
        .url();

    // The browser part.
    let mut b = Browser::new(&s);
    let login = b.get(url.as_str()).await;
    login.expect_login(StatusCode::OK);
    let consent = b.login(&login, "reader@example.com", PASSWORD).await;
    consent.expect_consent();
    assert_eq!(
        consent_scopes(&consent.body),
        scope_set("users:read profile:read"),
        "D29: the consent page lists what will be granted"
    );
    let callback = b.decide(&consent, "allow").await;
    let q = callback.expect_redirect_to(REDIRECT);
    assert_eq!(
        q.get("state").map(String::as_str),
        Some(state.secret().as_str())
    );
    let code = q.get("code").expect("a code").clone();

    // The code for tokens, with the PKCE verifier.
    let tok = client
        .exchange_code(AuthorizationCode::new(code.clone()))
        .set_pkce_verifier(verifier)
        .request_async(&http)
        .await
        .expect("the oauth2 crate exchanges the code");
    assert_eq!(*tok.token_type(), BasicTokenType::Bearer);
    assert_eq!(tok.expires_in(), Some(Duration::from_secs(3600)));
    let granted: BTreeSet<String> = tok
        .scopes()
        .map(|v| v.iter().map(|s| s.to_string()).collect())
        .unwrap_or_default();
    assert_eq!(
        granted,
        scope_set("users:read profile:read"),
        "D29: scope says what was granted"
    );
    let access1 = tok.access_token().secret().clone();
    let rt1 = tok.refresh_token().expect("a refresh token").clone();

    // D23: a token for the user, through this client.
    let c = claims(&access1);
    assert_eq!(c["sub"], user.id.as_str(), "{c}");
    assert_eq!(c["client_id"], app.id, "{c}");
    assert_eq!(scope_set(c["scope"].as_str().unwrap()), granted, "{c}");

    // The token works on the API, and /v1/me is that user (D15).
    assert_works(&s, &access1, "the first access token").await;
    let res = s.call(Method::GET, "/v1/me", &access1, None).await;
    assert_eq!(res.status(), StatusCode::OK);
    let me: Value = res.json().await.unwrap();
    assert_eq!(me["data"]["id"], user.id.as_str(), "{me}");
    assert_eq!(me["data"]["email"], "reader@example.com", "{me}");
    // Scope enforcement still applies (users:write was not asked for).
    let res = s
        .call(
            Method::POST,
            "/v1/users",
            &access1,
            Some(serde_json::json!({"email": "x@example.com", "name": "X", "role": "viewer"})),
        )
        .await;
    expect_error(res, StatusCode::FORBIDDEN, "INSUFFICIENT_SCOPE").await;

    // Refresh: new tokens (D24 rotation) that work.
    let tok2 = client
        .exchange_refresh_token(&rt1)
        .request_async(&http)
        .await
        .expect("the oauth2 crate refreshes");
    let access2 = tok2.access_token().secret().clone();
    let rt2 = tok2
        .refresh_token()
        .expect("a rotated refresh token")
        .clone();
    assert_ne!(rt2.secret(), rt1.secret(), "D24: rotated on every refresh");
    assert_ne!(access2, access1);
    assert_works(&s, &access2, "the refreshed access token").await;
    let res = s.call(Method::GET, "/v1/me", &access2, None).await;
    assert_eq!(res.status(), StatusCode::OK);
    // D24: the previous access token of the chain is invalid after the refresh.
    assert_dead(&s, &access1, "the access token before the refresh (D24)").await;

    // Revoke the current refresh token (RFC 7009 through the crate).
    client
        .revoke_token(StandardRevocableToken::RefreshToken(rt2.clone()))
        .unwrap()
        .request_async(&http)
        .await
        .expect("D25: revocation succeeds");

    // The refresh token is refused, and the chain's access token too.
    match client
        .exchange_refresh_token(&rt2)
        .request_async(&http)
        .await
    {
        Err(RequestTokenError::ServerResponse(e)) => {
            assert_eq!(*e.error(), BasicErrorResponseType::InvalidGrant)
        }
        other => panic!("expected invalid_grant after revocation, got {other:?}"),
    }
    assert_dead(&s, &access2, "an access token of a revoked chain (D25)").await;

    // The code cannot be used again either (D26 single use).
    let (_, v2) = PkceCodeChallenge::new_random_sha256();
    match client
        .exchange_code(AuthorizationCode::new(code))
        .set_pkce_verifier(v2)
        .request_async(&http)
        .await
    {
        Err(RequestTokenError::ServerResponse(e)) => {
            assert_eq!(*e.error(), BasicErrorResponseType::InvalidGrant)
        }
        other => panic!("expected invalid_grant for a used code, got {other:?}"),
    }
}

/// D20/D26: a public client runs the whole flow with the `oauth2` crate and no
/// secret (client_id in the body), refresh and revocation included.
#[tokio::test]
async fn d20_oauth2_crate_public_client_flow_without_secret() {
    use oauth2::basic::BasicClient;
    use oauth2::{
        AuthUrl, AuthorizationCode, CsrfToken, PkceCodeChallenge, RedirectUrl, RevocationUrl,
        Scope, StandardRevocableToken, TokenResponse, TokenUrl,
    };

    let s = TestServer::start().await;
    let app = register(&s, &s.org(), ALL_SCOPES, &[REDIRECT], true, false).await;
    active_user(&s, "spa@example.com", Role::Editor).await;
    let http = |req: oauth2::HttpRequest| {
        assert!(
            req.headers().get(AUTHORIZATION).is_none(),
            "a public client sends no Authorization header"
        );
        let body = String::from_utf8_lossy(req.body()).into_owned();
        assert!(!body.contains("client_secret"), "{body}");
        assert!(body.contains("client_id="), "{body}");
        oauth2_send(s.client.clone(), req)
    };
    let client = BasicClient::new(oauth2::ClientId::new(app.id.clone()))
        .set_auth_uri(AuthUrl::new(s.url("/oauth/authorize")).unwrap())
        .set_token_uri(TokenUrl::new(s.url("/oauth/token")).unwrap())
        .set_revocation_url(RevocationUrl::new(s.url("/oauth/revoke")).unwrap())
        .set_redirect_uri(RedirectUrl::new(REDIRECT.into()).unwrap());
    let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
    let (url, state) = client
        .authorize_url(CsrfToken::new_random)
        .add_scope(Scope::new("users:read".into()))
        .set_pkce_challenge(challenge)
        .url();
    let mut b = Browser::new(&s);
    let login = b.get(url.as_str()).await;
    login.expect_login(StatusCode::OK);
    let consent = b.login(&login, "spa@example.com", PASSWORD).await;
    consent.expect_consent();
    let q = b
        .decide(&consent, "allow")
        .await
        .expect_redirect_to(REDIRECT);
    assert_eq!(
        q.get("state").map(String::as_str),
        Some(state.secret().as_str())
    );
    let tok = client
        .exchange_code(AuthorizationCode::new(q["code"].clone()))
        .set_pkce_verifier(verifier)
        .request_async(&http)
        .await
        .expect("D20: a public client exchanges its code with client_id only");
    assert_works(&s, tok.access_token().secret(), "a public client's token").await;
    let rt = tok.refresh_token().expect("a refresh token").clone();
    let tok2 = client
        .exchange_refresh_token(&rt)
        .request_async(&http)
        .await
        .expect("D20: a public client refreshes with client_id only");
    assert_works(&s, tok2.access_token().secret(), "the refreshed token").await;
    client
        .revoke_token(StandardRevocableToken::RefreshToken(
            tok2.refresh_token().unwrap().clone(),
        ))
        .unwrap()
        .request_async(&http)
        .await
        .expect("D20/D25: a public client revokes with client_id only");
    assert_dead(&s, tok2.access_token().secret(), "a revoked chain's token").await;
}

// ---------------------------------------------------------------------------
// D26: checks of the authorization request
// ---------------------------------------------------------------------------

/// D26: an unknown client is answered with a 400 page, never a redirect.
#[tokio::test]
async fn d26_unknown_client_is_an_error_page_not_a_redirect() {
    let s = TestServer::start().await;
    let app = confidential(&s).await;
    let mut b = Browser::new(&s);
    let good = AuthRequest::new(&app, Some("users:read"));
    let unknown = ClientId::generate().to_string();
    for client_id in [
        Some(unknown.as_str()),
        Some("app_nonsense"),
        Some("garbage"),
        Some(""),
        None,
    ] {
        let params: Vec<(&str, &str)> = good
            .params()
            .into_iter()
            .filter(|(k, _)| *k != "client_id")
            .chain(client_id.map(|c| ("client_id", c)))
            .collect();
        let page = b.authorize(&params).await;
        page.expect_error_page(StatusCode::BAD_REQUEST);
        assert!(page.set_cookie(SESSION_COOKIE).is_none());
    }
    // The same request with the real client_id is fine.
    let page = b.authorize(&good.params()).await;
    page.expect_login(StatusCode::OK);
}

/// D26/D20: a redirect URI not registered exactly is a 400 page, never a redirect.
#[tokio::test]
async fn d26_unregistered_redirect_uri_is_an_error_page_not_a_redirect() {
    let s = TestServer::start().await;
    let app = register(
        &s,
        &s.org(),
        ALL_SCOPES,
        &[REDIRECT, LOOPBACK_REGISTERED],
        false,
        false,
    )
    .await;
    let mut b = Browser::new(&s);
    let not_registered = [
        Some("https://evil.example.com/cb"),
        Some("https://app.example.com/cb/"),
        Some("https://app.example.com/cb?x=1"),
        Some("https://app.example.com/CB"),
        Some("https://app.example.com:8443/cb"),
        Some("http://app.example.com/cb"),
        Some("https://app.example.com.evil.example/cb"),
        Some("https://app.example.com/cb#frag"),
        Some(OTHER_REDIRECT),
        // Loopback: only the port may differ (RFC 8252 §7.3).
        Some("http://127.0.0.1:8000/other"),
        Some("http://localhost:8000/cb"),
        Some("http://[::1]:8000/cb"),
        Some("https://127.0.0.1:8000/cb"),
        Some(""),
        None,
    ];
    for uri in not_registered {
        let req = AuthRequest::new(&app, Some("users:read"));
        let mut params: Vec<(&str, &str)> = req
            .params()
            .into_iter()
            .filter(|(k, _)| *k != "redirect_uri")
            .collect();
        if let Some(u) = uri {
            params.push(("redirect_uri", u));
        }
        let page = b.authorize(&params).await;
        page.expect_error_page(StatusCode::BAD_REQUEST);
        // Even with everything else wrong too, still no redirect.
        let mut bad: Vec<(&str, &str)> = vec![
            ("response_type", "token"),
            ("client_id", app.id.as_str()),
            ("code_challenge_method", "plain"),
            ("state", "s"),
        ];
        if let Some(u) = uri {
            bad.push(("redirect_uri", u));
        }
        b.authorize(&bad)
            .await
            .expect_error_page(StatusCode::BAD_REQUEST);
    }
    // The exact registered URIs are accepted.
    for uri in [REDIRECT, LOOPBACK_REGISTERED] {
        let mut req = AuthRequest::new(&app, Some("users:read"));
        req.redirect_uri = uri.into();
        b.authorize(&req.params())
            .await
            .expect_login(StatusCode::OK);
    }
}

fn without_param<'a>(base: &[(&'a str, &'a str)], name: &str) -> Vec<(&'a str, &'a str)> {
    base.iter().copied().filter(|(k, _)| *k != name).collect()
}

fn with_param<'a>(
    base: &[(&'a str, &'a str)],
    name: &'a str,
    value: &'a str,
) -> Vec<(&'a str, &'a str)> {
    let mut p = without_param(base, name);
    p.push((name, value));
    p
}

/// D26: PKCE S256 and response_type=code are required; failures go back to the
/// (trusted) redirect URI with the error and the state, before any login.
#[tokio::test]
async fn d26_missing_or_plain_pkce_and_wrong_response_type_redirect_with_error_and_state() {
    let s = TestServer::start().await;
    let app = confidential(&s).await;
    let mut b = Browser::new(&s);
    let req = AuthRequest::new(&app, Some("users:read"));
    let base = req.params();
    let without = |name: &str| without_param(&base, name);
    let with = |name: &'static str, value: &'static str| with_param(&base, name, value);
    let cases: Vec<(&str, FormPairs<'_>, &[&str])> = vec![
        (
            "no code_challenge",
            without("code_challenge"),
            &["invalid_request"],
        ),
        (
            "no code_challenge_method",
            without("code_challenge_method"),
            &["invalid_request"],
        ),
        (
            "code_challenge_method=plain",
            with("code_challenge_method", "plain"),
            &["invalid_request"],
        ),
        (
            "code_challenge_method=s256",
            with("code_challenge_method", "s256"),
            &["invalid_request"],
        ),
        (
            "a challenge that is no SHA-256",
            with("code_challenge", "tooshort"),
            &["invalid_request"],
        ),
        (
            "response_type=token",
            with("response_type", "token"),
            &["unsupported_response_type", "invalid_request"],
        ),
        (
            "no response_type",
            without("response_type"),
            &["invalid_request", "unsupported_response_type"],
        ),
    ];
    for (what, params, errors) in cases {
        let page = b.authorize(&params).await;
        let q = page.expect_redirect_to(REDIRECT);
        let err = q.get("error").map(String::as_str).unwrap_or("");
        assert!(
            errors.contains(&err),
            "{what}: expected one of {errors:?}, got {q:?}"
        );
        assert_eq!(
            q.get("state"),
            Some(&req.state),
            "{what}: D26 the state comes back: {q:?}"
        );
        assert!(!q.contains_key("code"), "{what}: {q:?}");
        assert!(
            page.set_cookie(SESSION_COOKIE).is_none(),
            "{what}: no login happened"
        );
    }
    // The same request with S256 is fine (so the failures above are PKCE's).
    b.authorize(&base).await.expect_login(StatusCode::OK);
}

/// D20/D26 (RFC 8252 §7.3): a loopback redirect URI may come with another
/// port at authorization time; the token request must repeat that same URI.
#[tokio::test]
async fn d20_loopback_redirect_uri_accepts_another_port() {
    let s = TestServer::start().await;
    let app = register(
        &s,
        &s.org(),
        ALL_SCOPES,
        &[LOOPBACK_REGISTERED],
        false,
        false,
    )
    .await;
    active_user(&s, "native@example.com", Role::Viewer).await;
    let mut req = AuthRequest::new(&app, Some("users:read"));
    req.redirect_uri = "http://127.0.0.1:53123/cb".into();
    let (code, _) = obtain_code(&s, &req, "native@example.com").await;
    // The registered port is not the one the request used: invalid_grant.
    expect_invalid_grant(exchange(&s, &app, &code, LOOPBACK_REGISTERED, &req.verifier).await).await;
    // A fresh code, exchanged with the URI of its authorization request.
    let mut req = AuthRequest::new(&app, Some("users:read"));
    req.redirect_uri = "http://127.0.0.1:40999/cb".into();
    let (code, _) = obtain_code(&s, &req, "native@example.com").await;
    let pair = expect_pair(
        exchange(&s, &app, &code, &req.redirect_uri, &req.verifier).await,
        true,
    )
    .await;
    assert_works(
        &s,
        str_of(&pair, "access_token"),
        "a loopback client's token",
    )
    .await;
    // Without a port works as well.
    let mut req = AuthRequest::new(&app, Some("users:read"));
    req.redirect_uri = "http://127.0.0.1/cb".into();
    Browser::new(&s)
        .authorize(&req.params())
        .await
        .expect_login(StatusCode::OK);
}

// ---------------------------------------------------------------------------
// D26: login
// ---------------------------------------------------------------------------

/// D26: a wrong password and an unknown e-mail read the same, with 401, and
/// leave no session.
#[tokio::test]
async fn d26_wrong_password_and_unknown_email_read_the_same() {
    let s = TestServer::start().await;
    let app = confidential(&s).await;
    active_user(&s, "known@example.com", Role::Viewer).await;
    let req = AuthRequest::new(&app, Some("users:read"));
    let mut b = Browser::new(&s);
    let login = b.authorize(&req.params()).await;
    login.expect_login(StatusCode::OK);

    let wrong = b
        .login(&login, "known@example.com", "not the right passphrase")
        .await;
    wrong.expect_login(StatusCode::UNAUTHORIZED);
    let unknown = b.login(&login, "nobody@example.com", PASSWORD).await;
    unknown.expect_login(StatusCode::UNAUTHORIZED);
    let malformed = b.login(&login, "not-an-email", PASSWORD).await;
    malformed.expect_login(StatusCode::UNAUTHORIZED);
    let empty = b.login(&login, "known@example.com", "").await;
    assert!(
        !empty.status.is_success() && !empty.status.is_redirection(),
        "{}",
        empty.status
    );

    let t_wrong = error_text(&wrong.body).expect("an error message");
    assert!(!t_wrong.is_empty());
    assert_eq!(
        Some(&t_wrong),
        error_text(&unknown.body).as_ref(),
        "D26: same answer"
    );
    assert_eq!(
        Some(&t_wrong),
        error_text(&malformed.body).as_ref(),
        "D26: same answer"
    );
    for p in [&wrong, &unknown, &malformed, &empty] {
        assert!(
            p.set_cookie(SESSION_COOKIE).is_none(),
            "no session after a failed login"
        );
        assert!(p.location().is_none(), "no redirect after a failed login");
        assert!(p.consent_form().is_none());
    }
    assert!(!b.jar.contains_key(SESSION_COOKIE));
    // The page still works with the right password afterwards.
    let consent = b.login(&login, "known@example.com", PASSWORD).await;
    consent.expect_consent();
    let session = consent
        .set_cookie(SESSION_COOKIE)
        .expect("a session cookie after login");
    assert!(!session.is_empty());

    // D58: every holder of audit:read reads why each attempt failed.
    let shouty = b.login(&login, "NOBODY@example.com", PASSWORD).await;
    shouty.expect_login(StatusCode::UNAUTHORIZED);
    let t = s.token("audit:read").await;
    crate::audit::audit_once(&s, &t, "?action=user.sign_in_failed", 5).await;
    let log = crate::audit::security_chain(&s, &t, "user.sign_in_failed").await;
    let entries = log["data"].as_array().unwrap();
    let failed: Vec<&Value> = entries
        .iter()
        .filter(|e| e["action"] == "user.sign_in_failed")
        .collect();
    let reasons: Vec<&str> = failed
        .iter()
        .map(|e| e["reason"].as_str().unwrap())
        .collect();
    assert_eq!(
        reasons[..4],
        [
            "bad_credentials",
            "unknown_account",
            "unknown_account",
            "bad_credentials"
        ][..],
        "{log}"
    );
    let known = s
        .store()
        .find_user_by_email(&s.org(), &Email::parse("known@example.com").unwrap())
        .await
        .unwrap()
        .unwrap()
        .0;
    for e in &failed {
        assert_eq!(e["outcome"], "failure");
        assert_eq!(
            e["actor"],
            json!({"type": "anonymous", "id": null, "client_id": null}),
            "{e}"
        );
        assert_eq!(e["details"]["client_id"], app.id.as_str(), "{e}");
        assert_eq!(e["source"]["ip"], "127.0.0.1");
        assert!(!e.to_string().contains(PASSWORD), "no password: {e}");
    }
    assert_eq!(
        failed[0]["target"],
        json!({"type": "user", "id": known.id.as_str()})
    );
    // An address with no account: only its keyed digest, the same for the
    // same address however it was typed; never the text.
    let digest = failed[1]["details"]["identifier_digest"].as_str().unwrap();
    assert_eq!(digest.len(), 64);
    assert_eq!(failed[1]["target"], Value::Null);
    assert_eq!(
        failed.last().unwrap()["details"]["identifier_digest"],
        digest,
        "NOBODY@ and nobody@ are one address"
    );
    assert_eq!(failed[2]["details"]["identifier_digest"], Value::Null);
    assert!(!log.to_string().to_lowercase().contains("nobody"), "{log}");
    assert!(!log.to_string().contains("not-an-email"), "{log}");
    // The sign-in that worked is there too.
    assert!(
        entries
            .iter()
            .any(|e| e["action"] == "user.signed_in" && e["target"]["id"] == known.id.as_str()),
        "{log}"
    );
}

/// D26 (D2): login is within the client's organization.
#[tokio::test]
async fn d26_user_of_another_organization_cannot_log_in() {
    let s = TestServer::start().await;
    let app = confidential(&s).await;
    let other = s.new_org(gatehouse_domain::Plan::Pro).await;
    user_with_password(
        &s,
        &other,
        "elsewhere@example.com",
        Role::Admin,
        UserStatus::Active,
    )
    .await;
    let mut b = Browser::new(&s);
    let req = AuthRequest::new(&app, Some("users:read"));
    let login = b.authorize(&req.params()).await;
    login.expect_login(StatusCode::OK);
    let unknown = b.login(&login, "nobody@example.com", PASSWORD).await;
    let page = b.login(&login, "elsewhere@example.com", PASSWORD).await;
    page.expect_login(StatusCode::UNAUTHORIZED);
    assert!(page.set_cookie(SESSION_COOKIE).is_none());
    assert_eq!(
        error_text(&page.body),
        error_text(&unknown.body),
        "D26: reads the same"
    );

    // And the other organization's own client works for that user (the
    // password is right; only the organization is wrong).
    let other_app = register(&s, &other, ALL_SCOPES, &[REDIRECT], false, false).await;
    let req = AuthRequest::new(&other_app, Some("users:read"));
    let (code, _) = obtain_code(&s, &req, "elsewhere@example.com").await;
    expect_pair(
        exchange(&s, &other_app, &code, REDIRECT, &req.verifier).await,
        true,
    )
    .await;
}

/// D26/D2: a session made through one organization's client does not sign the
/// person in to another organization's client.
#[tokio::test]
async fn d26_session_does_not_cross_organizations() {
    let s = TestServer::start().await;
    let app = confidential(&s).await;
    active_user(&s, "home@example.com", Role::Viewer).await;
    let other = s.new_org(gatehouse_domain::Plan::Pro).await;
    let other_app = register(&s, &other, ALL_SCOPES, &[REDIRECT], false, false).await;
    let mut b = Browser::new(&s);
    to_consent(
        &mut b,
        &AuthRequest::new(&app, Some("users:read")),
        "home@example.com",
    )
    .await;
    assert!(b.jar.contains_key(SESSION_COOKIE));
    let page = b
        .authorize(&AuthRequest::new(&other_app, Some("users:read")).params())
        .await;
    page.expect_login(StatusCode::OK);
}

/// D11/D26: inactive and pending users cannot log in.
#[tokio::test]
async fn d26_inactive_and_pending_users_cannot_log_in() {
    let s = TestServer::start().await;
    let app = confidential(&s).await;
    user_with_password(
        &s,
        &s.org(),
        "off@example.com",
        Role::Admin,
        UserStatus::Inactive,
    )
    .await;
    user_with_password(
        &s,
        &s.org(),
        "invited@example.com",
        Role::Admin,
        UserStatus::PendingInvite,
    )
    .await;
    let mut b = Browser::new(&s);
    let login = b
        .authorize(&AuthRequest::new(&app, Some("users:read")).params())
        .await;
    let reference = b.login(&login, "nobody@example.com", PASSWORD).await;
    for email in ["off@example.com", "invited@example.com"] {
        let page = b.login(&login, email, PASSWORD).await;
        page.expect_login(StatusCode::UNAUTHORIZED);
        assert!(page.set_cookie(SESSION_COOKIE).is_none(), "{email}");
        assert_eq!(
            error_text(&page.body),
            error_text(&reference.body),
            "{email}: reads the same"
        );
    }
    // D58: the log says why.
    assert_eq!(
        sign_in_failures(&s, 3).await,
        ["unknown_account", "inactive", "inactive"]
    );
}

/// D58: the reasons of the failed sign-ins the security chain holds,
/// oldest first.
async fn sign_in_failures(s: &TestServer, n: u64) -> Vec<String> {
    let t = s.token("audit:read").await;
    crate::audit::audit_once(s, &t, "?action=user.sign_in_failed", n).await;
    let res = s
        .call(
            Method::GET,
            "/v1/audit-logs?category=security&action=user.sign_in_failed&after_sequence=0&limit=100",
            &t,
            None,
        )
        .await;
    assert_eq!(res.status(), StatusCode::OK);
    let log: Value = res.json().await.unwrap();
    log["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["reason"].as_str().unwrap().to_owned())
        .collect()
}

/// D26: five failures for one account from one address lock that address out
/// of that account: the sixth attempt, with the right password, is refused
/// with the same text. Other accounts are unaffected.
#[tokio::test]
async fn d26_five_failures_lock_the_account_even_for_the_right_password() {
    let s = TestServer::start().await;
    let app = confidential(&s).await;
    active_user(&s, "target@example.com", Role::Viewer).await;
    active_user(&s, "bystander@example.com", Role::Viewer).await;
    let mut b = Browser::new(&s);
    let login = b
        .authorize(&AuthRequest::new(&app, Some("users:read")).params())
        .await;
    login.expect_login(StatusCode::OK);
    let mut text = None;
    for i in 0..5 {
        let page = b
            .login(
                &login,
                "target@example.com",
                &format!("wrong passphrase number {i}"),
            )
            .await;
        page.expect_login(StatusCode::UNAUTHORIZED);
        let t = error_text(&page.body);
        if let Some(prev) = &text {
            assert_eq!(Some(prev), t.as_ref());
        }
        text = Some(t.unwrap());
    }
    let sixth = b.login(&login, "target@example.com", PASSWORD).await;
    sixth.expect_login(StatusCode::UNAUTHORIZED);
    assert!(
        sixth.set_cookie(SESSION_COOKIE).is_none(),
        "D26: locked out"
    );
    assert!(sixth.consent_form().is_none(), "D26: locked out");
    assert_eq!(
        error_text(&sixth.body),
        text,
        "D26: a throttled attempt reads the same"
    );
    // Case does not get around it (e-mails compare case-insensitively, D8).
    let upper = b.login(&login, "TARGET@example.com", PASSWORD).await;
    upper.expect_login(StatusCode::UNAUTHORIZED);
    // Other accounts are unaffected.
    let other = b.login(&login, "bystander@example.com", PASSWORD).await;
    other.expect_consent();
    // D58: five wrong passwords, then two throttled attempts.
    let mut want = vec!["bad_credentials"; 5];
    want.extend(["throttled", "throttled"]);
    assert_eq!(sign_in_failures(&s, 7).await, want);
}

/// D26: four failures do not lock.
#[tokio::test]
async fn d26_four_failures_do_not_lock() {
    let s = TestServer::start().await;
    let app = confidential(&s).await;
    active_user(&s, "clumsy@example.com", Role::Viewer).await;
    let mut b = Browser::new(&s);
    let login = b
        .authorize(&AuthRequest::new(&app, Some("users:read")).params())
        .await;
    for _ in 0..4 {
        b.login(&login, "clumsy@example.com", "a wrong passphrase here")
            .await
            .expect_login(StatusCode::UNAUTHORIZED);
    }
    b.login(&login, "clumsy@example.com", PASSWORD)
        .await
        .expect_consent();
}

/// D26: forms carry CSRF tokens; a login post without the cookie, without the
/// field or with a mismatch is refused with a 403 page.
#[tokio::test]
async fn d26_login_without_matching_csrf_is_403() {
    let s = TestServer::start().await;
    let app = confidential(&s).await;
    active_user(&s, "csrf@example.com", Role::Viewer).await;
    let req = AuthRequest::new(&app, Some("users:read"));
    let mut b = Browser::new(&s);
    let login = b.authorize(&req.params()).await;
    let form = login.expect_login(StatusCode::OK);
    let cookie = b
        .jar
        .get(CSRF_COOKIE)
        .cloned()
        .expect("D26: a CSRF cookie is set");
    let creds = [
        ("email".to_owned(), "csrf@example.com".to_owned()),
        ("password".to_owned(), PASSWORD.to_owned()),
    ];
    let mut fields = form.hidden.clone();
    fields.extend(creds.iter().cloned());
    let without_field: Vec<(String, String)> = fields
        .iter()
        .filter(|(k, _)| k != "csrf_token")
        .cloned()
        .collect();
    let mismatched: Vec<(String, String)> = fields
        .iter()
        .map(|(k, v)| {
            if k == "csrf_token" {
                (k.clone(), gatehouse_domain::random::base62(256))
            } else {
                (k.clone(), v.clone())
            }
        })
        .collect();
    // Another browser's (valid) token pair, mixed with ours.
    let mut other = Browser::new(&s);
    let other_login = other.authorize(&req.params()).await;
    let other_form = other_login.expect_login(StatusCode::OK);
    let other_token = other_form
        .hidden
        .iter()
        .find(|(k, _)| k == "csrf_token")
        .unwrap()
        .1
        .clone();
    assert_ne!(other_token, cookie);
    let foreign: Vec<(String, String)> = fields
        .iter()
        .map(|(k, v)| {
            if k == "csrf_token" {
                (k.clone(), other_token.clone())
            } else {
                (k.clone(), v.clone())
            }
        })
        .collect();

    let post = |fields: Vec<(String, String)>, cookie: Option<String>| {
        let mut rb = s
            .request(Method::POST, "/oauth/authorize/login")
            .form(&fields);
        if let Some(c) = cookie {
            rb = rb.header(COOKIE, c);
        }
        async move { Page::read(rb.send().await.unwrap()).await }
    };
    let ours = Some(format!("{CSRF_COOKIE}={cookie}"));
    let cases = [
        ("no cookie", post(fields.clone(), None).await),
        ("no field", post(without_field.clone(), ours.clone()).await),
        ("neither", post(without_field, None).await),
        ("mismatched field", post(mismatched, ours.clone()).await),
        ("another browser's token", post(foreign, ours.clone()).await),
        (
            "empty cookie and field",
            post(
                fields
                    .iter()
                    .map(|(k, v)| {
                        if k == "csrf_token" {
                            (k.clone(), String::new())
                        } else {
                            (k.clone(), v.clone())
                        }
                    })
                    .collect(),
                Some(format!("{CSRF_COOKIE}=")),
            )
            .await,
        ),
    ];
    for (what, page) in cases {
        assert_eq!(page.status, StatusCode::FORBIDDEN, "{what}: {}", page.body);
        page.expect_error_page(StatusCode::FORBIDDEN);
        assert!(
            page.set_cookie(SESSION_COOKIE).is_none(),
            "{what}: no session"
        );
    }
    // With the matching pair the same credentials sign in.
    let ok = post(fields, ours).await;
    ok.expect_consent();
}

/// D26: the decision form carries a CSRF token too; a session alone is not enough.
#[tokio::test]
async fn d26_decision_without_matching_csrf_is_403_and_issues_no_code() {
    let s = TestServer::start().await;
    let app = confidential(&s).await;
    active_user(&s, "decider@example.com", Role::Viewer).await;
    let req = AuthRequest::new(&app, Some("users:read"));
    let mut b = Browser::new(&s);
    let consent = to_consent(&mut b, &req, "decider@example.com").await;
    let form = consent.consent_form().unwrap();
    let session = b
        .jar
        .get(SESSION_COOKIE)
        .cloned()
        .expect("a session cookie");
    let csrf = b.jar.get(CSRF_COOKIE).cloned().unwrap();
    let mut allow = form.hidden.clone();
    allow.push(("decision".into(), "allow".into()));
    let no_field: Vec<(String, String)> = allow
        .iter()
        .filter(|(k, _)| k != "csrf_token")
        .cloned()
        .collect();
    let post = |fields: Vec<(String, String)>, cookie: String| {
        let rb = s
            .request(Method::POST, "/oauth/authorize/decision")
            .form(&fields)
            .header(COOKIE, cookie);
        async move { Page::read(rb.send().await.unwrap()).await }
    };
    let cases = [
        (
            "session cookie only",
            post(allow.clone(), format!("{SESSION_COOKIE}={session}")).await,
        ),
        (
            "no csrf field",
            post(
                no_field,
                format!("{SESSION_COOKIE}={session}; {CSRF_COOKIE}={csrf}"),
            )
            .await,
        ),
        (
            "mismatched csrf cookie",
            post(
                allow.clone(),
                format!(
                    "{SESSION_COOKIE}={session}; {CSRF_COOKIE}={}",
                    gatehouse_domain::random::base62(256)
                ),
            )
            .await,
        ),
    ];
    for (what, page) in cases {
        assert_eq!(page.status, StatusCode::FORBIDDEN, "{what}: {}", page.body);
        page.expect_error_page(StatusCode::FORBIDDEN);
    }
    // Without a session, a valid CSRF pair issues no code either.
    let page = post(allow.clone(), format!("{CSRF_COOKIE}={csrf}")).await;
    if let Some(loc) = page.location() {
        assert!(!loc.contains("code="), "no code without a login: {loc}");
    }
    // The real thing still works.
    let q = b
        .decide(&consent, "allow")
        .await
        .expect_redirect_to(REDIRECT);
    assert!(q.contains_key("code"));
}

/// D26: deny sends the person back with error=access_denied and the state.
#[tokio::test]
async fn d26_consent_deny_redirects_access_denied_with_state() {
    let s = TestServer::start().await;
    let app = confidential(&s).await;
    active_user(&s, "denier@example.com", Role::Viewer).await;
    let mut req = AuthRequest::new(&app, Some("users:read"));
    // A state with characters that need escaping in HTML and in URLs.
    req.state = "a b&c=d/e?f'g\"h<i>j%k+l".into();
    let mut b = Browser::new(&s);
    let consent = to_consent(&mut b, &req, "denier@example.com").await;
    let back = b.decide(&consent, "deny").await;
    let q = back.expect_redirect_to(REDIRECT);
    assert_eq!(
        q.get("error").map(String::as_str),
        Some("access_denied"),
        "{q:?}"
    );
    assert_eq!(
        q.get("state"),
        Some(&req.state),
        "D26: the state, unchanged: {q:?}"
    );
    assert!(!q.contains_key("code"), "{q:?}");
    // The same state round-trips through an allow as well.
    let mut consent = b.get(&authorize_url(&s, &req.params())).await;
    if consent.login_form().is_some() {
        consent = b.login(&consent, "denier@example.com", PASSWORD).await;
    }
    consent.expect_consent();
    let q = b
        .decide(&consent, "allow")
        .await
        .expect_redirect_to(REDIRECT);
    assert_eq!(q.get("state"), Some(&req.state));
    assert!(q.contains_key("code"));
}

fn assert_frame_protection(page: &Page, what: &str) {
    assert_eq!(
        header(&page.headers, "x-frame-options").to_ascii_uppercase(),
        "DENY",
        "D26 {what}: X-Frame-Options: DENY"
    );
    let csp = header(&page.headers, "content-security-policy");
    assert!(
        csp.split(';').any(|d| {
            let d = d.trim().to_ascii_lowercase();
            d.starts_with("frame-ancestors") && d.split_whitespace().nth(1) == Some("'none'")
        }),
        "D26 {what}: CSP frame-ancestors 'none' (got {csp:?})"
    );
}

fn assert_cookie_attrs(line: &str, what: &str) {
    let attrs: Vec<String> = line
        .split(';')
        .skip(1)
        .map(|a| a.trim().to_ascii_lowercase())
        .collect();
    for needed in ["secure", "httponly", "samesite=lax"] {
        assert!(
            attrs.iter().any(|a| a == needed),
            "D26 {what}: {needed} (got {line})"
        );
    }
    // The __Host- prefix makes browsers insist on Path=/ and no Domain.
    assert!(
        attrs.iter().any(|a| a == "path=/"),
        "{what}: Path=/ ({line})"
    );
    assert!(
        !attrs.iter().any(|a| a.starts_with("domain=")),
        "{what}: no Domain ({line})"
    );
}

/// D26: the pages forbid framing; cookies are Secure; HttpOnly; SameSite=Lax.
#[tokio::test]
async fn d26_pages_forbid_framing_and_cookies_are_locked_down() {
    let s = TestServer::start().await;
    let app = confidential(&s).await;
    active_user(&s, "headers@example.com", Role::Viewer).await;
    let req = AuthRequest::new(&app, Some("users:read"));
    let mut b = Browser::new(&s);
    let login = b.authorize(&req.params()).await;
    login.expect_login(StatusCode::OK);
    assert_frame_protection(&login, "login page");
    let csrf = login
        .set_cookie(CSRF_COOKIE)
        .expect("D26: a CSRF cookie with the login page");
    assert_cookie_attrs(&csrf, "the CSRF cookie");

    let failed = b
        .login(&login, "headers@example.com", "not the passphrase")
        .await;
    failed.expect_login(StatusCode::UNAUTHORIZED);
    assert_frame_protection(&failed, "failed login page");

    let consent = b.login(&login, "headers@example.com", PASSWORD).await;
    consent.expect_consent();
    assert_frame_protection(&consent, "consent page");
    let session = consent
        .set_cookie(SESSION_COOKIE)
        .expect("a session cookie");
    assert_cookie_attrs(&session, "the session cookie");

    let mut stranger = Browser::new(&s);
    let error = stranger
        .authorize(&[("client_id", "app_unknown"), ("redirect_uri", REDIRECT)])
        .await;
    error.expect_error_page(StatusCode::BAD_REQUEST);
    assert_frame_protection(&error, "error page");

    let forbidden = Browser::new(&s)
        .submit(&login.login_form().unwrap(), &[])
        .await;
    forbidden.expect_error_page(StatusCode::FORBIDDEN);
    assert_frame_protection(&forbidden, "CSRF error page");
}

/// Whether a CSP `form-action` source list admits navigation to `target`.
fn form_action_allows(csp: &str, target: &Url, own_origin: &str) -> bool {
    let Some(directive) = csp
        .split(';')
        .map(str::trim)
        .find(|d| d.to_ascii_lowercase().starts_with("form-action"))
    else {
        return true; // form-action does not fall back to default-src
    };
    let origin = target.origin().ascii_serialization();
    let scheme = format!("{}:", target.scheme());
    directive.split_whitespace().skip(1).any(|src| {
        let src = src.trim_end_matches('/');
        let any_port = src
            .strip_suffix(":*")
            .is_some_and(|host| origin == host || origin.starts_with(&format!("{host}:")));
        src == "*"
            || src.eq_ignore_ascii_case(&scheme)
            || src.eq_ignore_ascii_case(&origin)
            || (src == "'self'" && origin == own_origin)
            || any_port
    })
}

/// D26: the consent decision is a redirect to the client. Chromium and Safari
/// enforce a page's CSP `form-action` on the redirects that follow a form
/// submission (w3c/webappsec-csp#8), so the page that posts the decision must
/// not forbid the client's redirect origin — or no browser flow completes.
#[tokio::test]
async fn d26_consent_page_csp_lets_the_redirect_reach_the_client() {
    let s = TestServer::start().await;
    let app = register(
        &s,
        &s.org(),
        ALL_SCOPES,
        &[REDIRECT, LOOPBACK_REGISTERED],
        false,
        false,
    )
    .await;
    active_user(&s, "csp@example.com", Role::Viewer).await;
    for redirect in [REDIRECT, "http://127.0.0.1:41234/cb"] {
        let mut req = AuthRequest::new(&app, Some("users:read"));
        req.redirect_uri = redirect.into();
        let mut b = Browser::new(&s);
        let consent = to_consent(&mut b, &req, "csp@example.com").await;
        let back = b.decide(&consent, "allow").await;
        back.expect_redirect_to(redirect);
        let target = Url::parse(&back.location().unwrap()).unwrap();
        let csp = header(&consent.headers, "content-security-policy");
        assert!(
            form_action_allows(&csp, &target, PUBLIC_URL),
            "D26: the consent page's CSP ({csp:?}) blocks, in Chromium and Safari, the \
             redirect its own form leads to ({target}); the flow never reaches the client"
        );
    }
}

// ---------------------------------------------------------------------------
// D29/D26: scopes
// ---------------------------------------------------------------------------

/// D29: a viewer asking for users:write gets a token without it; the consent
/// page lists only what will be granted; scope says what was granted.
#[tokio::test]
async fn d29_role_limits_the_granted_scopes() {
    let s = TestServer::start().await;
    let app = confidential(&s).await;
    active_user(&s, "viewer@example.com", Role::Viewer).await;
    let req = AuthRequest::new(&app, Some("users:read users:write products:write"));
    let (code, listed) = obtain_code(&s, &req, "viewer@example.com").await;
    assert_eq!(
        listed,
        scope_set("users:read"),
        "D29: consent lists only the intersection"
    );
    let pair = expect_pair(
        exchange(&s, &app, &code, REDIRECT, &req.verifier).await,
        true,
    )
    .await;
    assert_eq!(
        scope_set(str_of(&pair, "scope")),
        scope_set("users:read"),
        "{pair}"
    );
    let at = str_of(&pair, "access_token");
    assert_eq!(
        scope_set(claims(at)["scope"].as_str().unwrap()),
        scope_set("users:read")
    );
    let res = s
        .call(
            Method::POST,
            "/v1/users",
            at,
            Some(serde_json::json!({"email": "new@example.com", "name": "N", "role": "viewer"})),
        )
        .await;
    expect_error(res, StatusCode::FORBIDDEN, "INSUFFICIENT_SCOPE").await;
    // The refreshed token is no wider.
    let next = expect_pair(
        refresh(&s, &app, str_of(&pair, "refresh_token")).await,
        true,
    )
    .await;
    assert_eq!(
        scope_set(str_of(&next, "scope")),
        scope_set("users:read"),
        "{next}"
    );

    // An editor gets products:write but not users:write.
    active_user(&s, "editor@example.com", Role::Editor).await;
    let req = AuthRequest::new(&app, Some("users:read users:write products:write"));
    let (code, listed) = obtain_code(&s, &req, "editor@example.com").await;
    assert_eq!(listed, scope_set("users:read products:write"));
    let pair = expect_pair(
        exchange(&s, &app, &code, REDIRECT, &req.verifier).await,
        true,
    )
    .await;
    assert_eq!(
        scope_set(str_of(&pair, "scope")),
        scope_set("users:read products:write")
    );
}

/// D26: unknown scopes and scopes the client is not registered for are dropped.
#[tokio::test]
async fn d26_unknown_and_unregistered_scopes_are_dropped() {
    let s = TestServer::start().await;
    let app = register(
        &s,
        &s.org(),
        "users:read profile:read",
        &[REDIRECT],
        false,
        false,
    )
    .await;
    active_user(&s, "boss@example.com", Role::Admin).await;
    let req = AuthRequest::new(
        &app,
        Some("users:read bogus:scope users:write products:read"),
    );
    let (code, listed) = obtain_code(&s, &req, "boss@example.com").await;
    assert_eq!(
        listed,
        scope_set("users:read"),
        "D26: dropped from the consent page"
    );
    let pair = expect_pair(
        exchange(&s, &app, &code, REDIRECT, &req.verifier).await,
        true,
    )
    .await;
    assert_eq!(
        scope_set(str_of(&pair, "scope")),
        scope_set("users:read"),
        "{pair}"
    );
}

/// Runs the pages until the server redirects to the client (at the
/// authorization request, after login, or after allowing).
async fn run_to_redirect(s: &TestServer, req: &AuthRequest, email: &str) -> Page {
    let mut b = Browser::new(s);
    let first = b.authorize(&req.params()).await;
    if first.status.is_redirection() {
        return first;
    }
    first.expect_login(StatusCode::OK);
    let after_login = b.login(&first, email, PASSWORD).await;
    if after_login.status.is_redirection() {
        return after_login;
    }
    assert!(
        after_login.consent_form().is_none(),
        "D26: nothing can be granted, so no consent page should be offered: {}",
        after_login.body
    );
    after_login
}

/// D26: when nothing is left to grant, the redirect carries error=invalid_scope.
#[tokio::test]
async fn d26_nothing_grantable_redirects_invalid_scope() {
    let s = TestServer::start().await;
    let app = register(
        &s,
        &s.org(),
        "users:read users:write profile:read",
        &[REDIRECT],
        false,
        false,
    )
    .await;
    active_user(&s, "viewer@example.com", Role::Viewer).await;
    for scope in [
        "users:write",
        "bogus",
        "products:read",
        "admin",
        "users:write bogus admin",
    ] {
        let req = AuthRequest::new(&app, Some(scope));
        let page = run_to_redirect(&s, &req, "viewer@example.com").await;
        let q = page.expect_redirect_to(REDIRECT);
        assert_eq!(
            q.get("error").map(String::as_str),
            Some("invalid_scope"),
            "{scope}: {q:?}"
        );
        assert_eq!(q.get("state"), Some(&req.state), "{scope}: {q:?}");
        assert!(!q.contains_key("code"), "{scope}: {q:?}");
    }
}

/// D26: an omitted scope means what the client is registered for, within the
/// role, without admin.
#[tokio::test]
async fn d26_omitted_scope_is_client_scopes_within_role_without_admin() {
    let s = TestServer::start().await;
    // Approved for admin, registered for everything.
    let app = register(&s, &s.org(), ALL_SCOPES, &[REDIRECT], false, true).await;
    active_user(&s, "boss@example.com", Role::Admin).await;
    active_user(&s, "viewer@example.com", Role::Viewer).await;

    let req = AuthRequest::new(&app, None);
    let (code, listed) = obtain_code(&s, &req, "boss@example.com").await;
    assert_eq!(
        listed,
        scope_set(ALL_SCOPES),
        "D26: no admin unless asked for"
    );
    let pair = expect_pair(
        exchange(&s, &app, &code, REDIRECT, &req.verifier).await,
        true,
    )
    .await;
    assert_eq!(
        scope_set(str_of(&pair, "scope")),
        scope_set(ALL_SCOPES),
        "{pair}"
    );

    let req = AuthRequest::new(&app, None);
    let (code, listed) = obtain_code(&s, &req, "viewer@example.com").await;
    let viewer = scope_set("users:read products:read profile:read profile:write");
    assert_eq!(listed, viewer);
    let pair = expect_pair(
        exchange(&s, &app, &code, REDIRECT, &req.verifier).await,
        true,
    )
    .await;
    assert_eq!(scope_set(str_of(&pair, "scope")), viewer, "{pair}");

    // A narrower client: its registration bounds the default.
    let narrow = register(
        &s,
        &s.org(),
        "users:read users:write",
        &[REDIRECT],
        false,
        false,
    )
    .await;
    let req = AuthRequest::new(&narrow, None);
    let (code, _) = obtain_code(&s, &req, "viewer@example.com").await;
    let pair = expect_pair(
        exchange(&s, &narrow, &code, REDIRECT, &req.verifier).await,
        true,
    )
    .await;
    assert_eq!(
        scope_set(str_of(&pair, "scope")),
        scope_set("users:read"),
        "{pair}"
    );
}

/// D22/D29: admin only for an approved client AND an admin user.
#[tokio::test]
async fn d29_admin_only_for_approved_client_and_admin_user() {
    let s = TestServer::start().await;
    let approved = register(&s, &s.org(), ALL_SCOPES, &[REDIRECT], false, true).await;
    let unapproved = register(
        &s,
        &s.org(),
        &format!("{ALL_SCOPES} admin"),
        &[REDIRECT],
        false,
        false,
    )
    .await;
    active_user(&s, "boss@example.com", Role::Admin).await;
    active_user(&s, "editor@example.com", Role::Editor).await;

    // Approved client, admin user: admin granted, and it satisfies every scope check.
    let req = AuthRequest::new(&approved, Some("admin users:read"));
    let (code, listed) = obtain_code(&s, &req, "boss@example.com").await;
    assert_eq!(listed, scope_set("admin users:read"));
    let pair = expect_pair(
        exchange(&s, &approved, &code, REDIRECT, &req.verifier).await,
        true,
    )
    .await;
    assert_eq!(
        scope_set(str_of(&pair, "scope")),
        scope_set("admin users:read"),
        "{pair}"
    );
    let req = AuthRequest::new(&approved, Some("admin"));
    let (code, _) = obtain_code(&s, &req, "boss@example.com").await;
    let pair = expect_pair(
        exchange(&s, &approved, &code, REDIRECT, &req.verifier).await,
        true,
    )
    .await;
    assert_eq!(str_of(&pair, "scope"), "admin");
    assert_works(
        &s,
        str_of(&pair, "access_token"),
        "an admin token on users:read",
    )
    .await;

    // Approved client, editor: no admin.
    let req = AuthRequest::new(&approved, Some("admin users:read"));
    let (code, listed) = obtain_code(&s, &req, "editor@example.com").await;
    assert_eq!(
        listed,
        scope_set("users:read"),
        "D29: an editor never gets admin"
    );
    let pair = expect_pair(
        exchange(&s, &approved, &code, REDIRECT, &req.verifier).await,
        true,
    )
    .await;
    assert_eq!(
        scope_set(str_of(&pair, "scope")),
        scope_set("users:read"),
        "{pair}"
    );

    // Unapproved client (even if admin is in its scope list), admin user: no admin.
    let req = AuthRequest::new(&unapproved, Some("admin users:read"));
    let (code, listed) = obtain_code(&s, &req, "boss@example.com").await;
    assert_eq!(
        listed,
        scope_set("users:read"),
        "D22: admin needs the operator's approval"
    );
    let pair = expect_pair(
        exchange(&s, &unapproved, &code, REDIRECT, &req.verifier).await,
        true,
    )
    .await;
    assert_eq!(
        scope_set(str_of(&pair, "scope")),
        scope_set("users:read"),
        "{pair}"
    );
    // … and admin alone leaves nothing.
    let req = AuthRequest::new(&unapproved, Some("admin"));
    let q = run_to_redirect(&s, &req, "boss@example.com")
        .await
        .expect_redirect_to(REDIRECT);
    assert_eq!(
        q.get("error").map(String::as_str),
        Some("invalid_scope"),
        "{q:?}"
    );
}

// ---------------------------------------------------------------------------
// D26: codes at the token endpoint
// ---------------------------------------------------------------------------

/// D26: the token request must carry the matching code_verifier.
#[tokio::test]
async fn d26_wrong_or_missing_code_verifier_is_refused() {
    let s = TestServer::start().await;
    let app = confidential(&s).await;
    active_user(&s, "pkce@example.com", Role::Viewer).await;
    let req = AuthRequest::new(&app, Some("users:read"));
    let (code, _) = obtain_code(&s, &req, "pkce@example.com").await;
    let (other_verifier, _) = pkce();
    expect_invalid_grant(exchange(&s, &app, &code, REDIRECT, &other_verifier).await).await;
    // The challenge itself is not the verifier (no `plain`).
    expect_invalid_grant(exchange(&s, &app, &code, REDIRECT, &req.challenge).await).await;
    // Missing: invalid_request (RFC 6749 §5.2) or invalid_grant.
    let res = post_as(
        &s,
        &app,
        "/oauth/token",
        &[
            ("grant_type", "authorization_code"),
            ("code", &code),
            ("redirect_uri", REDIRECT),
        ],
    )
    .await;
    let status = res.status();
    assert_no_store(res.headers(), status);
    let body: Value = res.json().await.unwrap();
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(
        body["error"] == "invalid_request" || body["error"] == "invalid_grant",
        "{body}"
    );
}

/// D26: the token request must carry the same redirect_uri.
#[tokio::test]
async fn d26_different_redirect_uri_at_token_time_is_invalid_grant() {
    let s = TestServer::start().await;
    let app = register(
        &s,
        &s.org(),
        ALL_SCOPES,
        &[REDIRECT, OTHER_REDIRECT],
        false,
        false,
    )
    .await;
    active_user(&s, "redir@example.com", Role::Viewer).await;
    let req = AuthRequest::new(&app, Some("users:read"));
    let (code, _) = obtain_code(&s, &req, "redir@example.com").await;
    // Another registered URI of the same client is still not the same URI.
    expect_invalid_grant(exchange(&s, &app, &code, OTHER_REDIRECT, &req.verifier).await).await;
    expect_invalid_grant(
        exchange(
            &s,
            &app,
            &code,
            "https://app.example.com/cb/",
            &req.verifier,
        )
        .await,
    )
    .await;
    // Missing redirect_uri.
    let res = post_as(
        &s,
        &app,
        "/oauth/token",
        &[
            ("grant_type", "authorization_code"),
            ("code", &code),
            ("code_verifier", &req.verifier),
        ],
    )
    .await;
    assert_eq!(res.status(), StatusCode::BAD_REQUEST);
}

/// D26: a second use of a code is invalid_grant and revokes what the first issued.
#[tokio::test]
async fn d26_code_reuse_is_invalid_grant_and_revokes_first_tokens() {
    let s = TestServer::start().await;
    let app = confidential(&s).await;
    active_user(&s, "twice@example.com", Role::Viewer).await;
    let req = AuthRequest::new(&app, Some("users:read"));
    let (code, _) = obtain_code(&s, &req, "twice@example.com").await;
    let first = expect_pair(
        exchange(&s, &app, &code, REDIRECT, &req.verifier).await,
        true,
    )
    .await;
    let at = str_of(&first, "access_token");
    let rt = str_of(&first, "refresh_token");
    assert_works(&s, at, "the first use's access token").await;

    // Another authorization of the same user is not affected.
    let other = pair_for(&s, &app, "twice@example.com", Some("users:read")).await;

    expect_invalid_grant(exchange(&s, &app, &code, REDIRECT, &req.verifier).await).await;
    assert_dead(
        &s,
        at,
        "D26: the first use's access token after a second use",
    )
    .await;
    expect_invalid_grant(refresh(&s, &app, rt).await).await;
    // A third use is still invalid_grant.
    expect_invalid_grant(exchange(&s, &app, &code, REDIRECT, &req.verifier).await).await;
    // D54: the revocation told `refresh_token.reuse_detected` once (the
    // third use found the chain revoked already), with the client as actor.
    let reuse = crate::events::told(&s, "?type=refresh_token.reuse_detected").await;
    assert_eq!(reuse.len(), 1, "{reuse:?}");
    let object = &reuse[0]["data"]["object"];
    assert_eq!(object["trigger"], "authorization_code");
    assert_eq!(object["client_id"], app.id.as_str());
    assert_eq!(reuse[0]["actor"]["type"], "client");
    assert_eq!(reuse[0]["actor"]["id"], app.id.as_str());
    assert!(
        reuse[0]["request"]["id"]
            .as_str()
            .unwrap()
            .starts_with("req_")
    );
    assert_works(
        &s,
        str_of(&other, "access_token"),
        "another authorization's token",
    )
    .await;
    expect_pair(
        refresh(&s, &app, str_of(&other, "refresh_token")).await,
        true,
    )
    .await;
}

/// D26: a second use also revokes the successors of the first use's tokens.
#[tokio::test]
async fn d26_code_reuse_after_refresh_revokes_the_whole_chain() {
    let s = TestServer::start().await;
    let app = confidential(&s).await;
    active_user(&s, "chain@example.com", Role::Viewer).await;
    let req = AuthRequest::new(&app, Some("users:read"));
    let (code, _) = obtain_code(&s, &req, "chain@example.com").await;
    let first = expect_pair(
        exchange(&s, &app, &code, REDIRECT, &req.verifier).await,
        true,
    )
    .await;
    let next = expect_pair(
        refresh(&s, &app, str_of(&first, "refresh_token")).await,
        true,
    )
    .await;
    assert_works(&s, str_of(&next, "access_token"), "the refreshed token").await;
    expect_invalid_grant(exchange(&s, &app, &code, REDIRECT, &req.verifier).await).await;
    assert_dead(
        &s,
        str_of(&next, "access_token"),
        "a successor after code reuse",
    )
    .await;
    expect_invalid_grant(refresh(&s, &app, str_of(&next, "refresh_token")).await).await;
}

/// D26/D20: a code presented by another client is invalid_grant.
#[tokio::test]
async fn d26_code_presented_by_another_client_is_invalid_grant() {
    let s = TestServer::start().await;
    let app = confidential(&s).await;
    let thief = confidential(&s).await;
    let public_thief = register(&s, &s.org(), ALL_SCOPES, &[REDIRECT], true, false).await;
    active_user(&s, "victim@example.com", Role::Viewer).await;
    let req = AuthRequest::new(&app, Some("users:read"));
    let (code, _) = obtain_code(&s, &req, "victim@example.com").await;
    expect_invalid_grant(exchange(&s, &thief, &code, REDIRECT, &req.verifier).await).await;
    expect_invalid_grant(exchange(&s, &public_thief, &code, REDIRECT, &req.verifier).await).await;
    // The bootstrap client, too.
    let boot = App {
        id: s.creds.client_id.clone(),
        secret: Some(s.creds.client_secret.clone()),
    };
    expect_invalid_grant(exchange(&s, &boot, &code, REDIRECT, &req.verifier).await).await;
}

/// D20: a confidential client authenticates on the code grant (401
/// invalid_client without its secret or with a wrong one).
#[tokio::test]
async fn d20_confidential_client_without_secret_is_invalid_client() {
    let s = TestServer::start().await;
    let app = confidential(&s).await;
    active_user(&s, "conf@example.com", Role::Viewer).await;
    let req = AuthRequest::new(&app, Some("users:read"));
    let (code, _) = obtain_code(&s, &req, "conf@example.com").await;
    let no_secret = App {
        id: app.id.clone(),
        secret: None,
    };
    let res = exchange(&s, &no_secret, &code, REDIRECT, &req.verifier).await;
    expect_oauth_error(res, StatusCode::UNAUTHORIZED, "invalid_client").await;
    let wrong = App {
        id: app.id.clone(),
        secret: Some("gcs_wrong".into()),
    };
    let res = exchange(&s, &wrong, &code, REDIRECT, &req.verifier).await;
    expect_oauth_error(res, StatusCode::UNAUTHORIZED, "invalid_client").await;
    // client_secret_post with the right secret works (D20).
    let res = s
        .request(Method::POST, "/oauth/token")
        .form(&[
            ("grant_type", "authorization_code"),
            ("code", code.as_str()),
            ("redirect_uri", REDIRECT),
            ("code_verifier", req.verifier.as_str()),
            ("client_id", app.id.as_str()),
            ("client_secret", app.secret.as_deref().unwrap()),
        ])
        .send()
        .await
        .unwrap();
    let pair = expect_pair(res, true).await;
    // The refresh grant needs the secret too.
    let res = refresh(&s, &no_secret, str_of(&pair, "refresh_token")).await;
    expect_oauth_error(res, StatusCode::UNAUTHORIZED, "invalid_client").await;
    expect_pair(
        refresh(&s, &app, str_of(&pair, "refresh_token")).await,
        true,
    )
    .await;
}

/// D20: a public client (no secret) completes the flow with client_id only,
/// and may not use client credentials.
#[tokio::test]
async fn d20_public_client_uses_code_and_refresh_but_not_client_credentials() {
    let s = TestServer::start().await;
    let app = register(&s, &s.org(), ALL_SCOPES, &[REDIRECT], true, false).await;
    active_user(&s, "public@example.com", Role::Viewer).await;
    let pair = pair_for(
        &s,
        &app,
        "public@example.com",
        Some("users:read profile:read"),
    )
    .await;
    assert_works(&s, str_of(&pair, "access_token"), "a public client's token").await;
    let next = expect_pair(
        refresh(&s, &app, str_of(&pair, "refresh_token")).await,
        true,
    )
    .await;
    assert_works(
        &s,
        str_of(&next, "access_token"),
        "a public client's refreshed token",
    )
    .await;

    let res = s
        .request(Method::POST, "/oauth/token")
        .form(&[
            ("grant_type", "client_credentials"),
            ("client_id", app.id.as_str()),
        ])
        .send()
        .await
        .unwrap();
    expect_oauth_error(res, StatusCode::BAD_REQUEST, "unauthorized_client").await;
}

// ---------------------------------------------------------------------------
// D24: refresh chains
// ---------------------------------------------------------------------------

/// D24: rotation; the previous refresh and access tokens of the chain die.
#[tokio::test]
async fn d24_refresh_rotates_and_kills_the_previous_access_token() {
    let s = TestServer::start().await;
    let app = confidential(&s).await;
    active_user(&s, "rot@example.com", Role::Viewer).await;
    let p1 = pair_for(&s, &app, "rot@example.com", Some("users:read")).await;
    let p2 = expect_pair(refresh(&s, &app, str_of(&p1, "refresh_token")).await, true).await;
    assert_ne!(p1["refresh_token"], p2["refresh_token"], "D24: rotated");
    assert_ne!(p1["access_token"], p2["access_token"]);
    assert_dead(
        &s,
        str_of(&p1, "access_token"),
        "D24: the previous access token",
    )
    .await;
    assert_works(&s, str_of(&p2, "access_token"), "the new access token").await;
    let p3 = expect_pair(refresh(&s, &app, str_of(&p2, "refresh_token")).await, true).await;
    assert_ne!(p3["refresh_token"], p2["refresh_token"]);
    assert_ne!(p3["refresh_token"], p1["refresh_token"]);
    assert_dead(
        &s,
        str_of(&p2, "access_token"),
        "D24: the previous access token",
    )
    .await;
    assert_works(&s, str_of(&p3, "access_token"), "the newest access token").await;
    // Same user, same chain claims (D23).
    assert_eq!(
        claims(str_of(&p3, "access_token"))["sub"],
        claims(str_of(&p1, "access_token"))["sub"]
    );
}

/// D24 with the grace window off: a refresh token is single-use; its replay is
/// reuse and revokes the chain.
#[tokio::test]
async fn d24_refresh_token_is_single_use_without_grace() {
    let s = TestServer::start_with(|c| c.refresh_grace_secs = 0).await;
    let app = confidential(&s).await;
    active_user(&s, "once@example.com", Role::Viewer).await;
    let p1 = pair_for(&s, &app, "once@example.com", Some("users:read")).await;
    let p2 = expect_pair(refresh(&s, &app, str_of(&p1, "refresh_token")).await, true).await;
    expect_invalid_grant(refresh(&s, &app, str_of(&p1, "refresh_token")).await).await;
    // Reuse revokes the whole chain (RFC 9700).
    expect_invalid_grant(refresh(&s, &app, str_of(&p2, "refresh_token")).await).await;
    assert_dead(
        &s,
        str_of(&p2, "access_token"),
        "D24: the successor after reuse",
    )
    .await;
}

/// D24: within the grace window the very same pair comes back, expires_in
/// counting down; the pair stays valid (only one successor ever exists).
#[tokio::test]
async fn d24_replay_within_grace_returns_the_same_pair() {
    let s = TestServer::start().await; // default grace: 10 s
    let app = confidential(&s).await;
    active_user(&s, "tabs@example.com", Role::Viewer).await;
    let p1 = pair_for(&s, &app, "tabs@example.com", Some("users:read")).await;
    let rt1 = str_of(&p1, "refresh_token").to_owned();
    let p2 = expect_pair(refresh(&s, &app, &rt1).await, true).await;
    let again = expect_pair(refresh(&s, &app, &rt1).await, false).await;
    assert_eq!(
        again["access_token"], p2["access_token"],
        "D24: the very same access token"
    );
    assert_eq!(
        again["refresh_token"], p2["refresh_token"],
        "D24: the very same refresh token"
    );
    assert_eq!(again["scope"], p2["scope"]);
    tokio::time::sleep(Duration::from_millis(1300)).await;
    let later = expect_pair(refresh(&s, &app, &rt1).await, false).await;
    assert_eq!(later["access_token"], p2["access_token"]);
    assert_eq!(later["refresh_token"], p2["refresh_token"]);
    let exp = later["expires_in"].as_i64().unwrap();
    assert!(
        exp < 3600,
        "D24: expires_in counts down (got {exp} after > 1 s)"
    );
    // The successor works, and is the one to continue with.
    assert_works(
        &s,
        str_of(&p2, "access_token"),
        "the successor access token",
    )
    .await;
    let p3 = expect_pair(refresh(&s, &app, str_of(&p2, "refresh_token")).await, true).await;
    assert_works(&s, str_of(&p3, "access_token"), "the next access token").await;
}

/// D24: concurrent refreshes of one token all succeed with the same pair.
#[tokio::test]
async fn d24_concurrent_refreshes_all_get_the_same_pair() {
    let s = TestServer::start().await;
    let app = confidential(&s).await;
    active_user(&s, "race@example.com", Role::Viewer).await;
    let p1 = pair_for(&s, &app, "race@example.com", Some("users:read")).await;
    let rt1 = str_of(&p1, "refresh_token").to_owned();
    let handles: Vec<_> = (0..8)
        .map(|_| {
            let client = s.client.clone();
            let url = s.url("/oauth/token");
            let (id, secret) = (app.id.clone(), app.secret.clone().unwrap());
            let rt = rt1.clone();
            tokio::spawn(async move {
                let res = client
                    .post(url)
                    .basic_auth(id, Some(secret))
                    .form(&[
                        ("grant_type", "refresh_token"),
                        ("refresh_token", rt.as_str()),
                    ])
                    .send()
                    .await
                    .unwrap();
                expect_pair(res, false).await
            })
        })
        .collect();
    let results: Vec<Value> = tokio::time::timeout(
        Duration::from_secs(60),
        futures_util::future::join_all(handles),
    )
    .await
    .expect("the refreshes finish")
    .into_iter()
    .map(|r| r.expect("D24: every concurrent refresh succeeds"))
    .collect();
    let first = &results[0];
    for r in &results {
        assert_eq!(
            r["access_token"], first["access_token"],
            "D24: one successor"
        );
        assert_eq!(
            r["refresh_token"], first["refresh_token"],
            "D24: one successor"
        );
    }
    assert_works(&s, str_of(first, "access_token"), "the single successor").await;
    expect_pair(
        refresh(&s, &app, str_of(first, "refresh_token")).await,
        true,
    )
    .await;
}

/// D24: after the grace window a replay is reuse: invalid_grant, and the whole
/// chain is revoked (the successor too).
#[tokio::test]
async fn d24_replay_after_grace_window_revokes_the_chain() {
    let s = TestServer::start_with(|c| c.refresh_grace_secs = 1).await;
    let app = confidential(&s).await;
    active_user(&s, "late@example.com", Role::Viewer).await;
    let p1 = pair_for(&s, &app, "late@example.com", Some("users:read")).await;
    // Another authorization of the same user is a different chain.
    let other = pair_for(&s, &app, "late@example.com", Some("users:read")).await;
    let p2 = expect_pair(refresh(&s, &app, str_of(&p1, "refresh_token")).await, true).await;
    let p3 = expect_pair(refresh(&s, &app, str_of(&p2, "refresh_token")).await, true).await;
    tokio::time::sleep(Duration::from_millis(1600)).await;
    expect_invalid_grant(refresh(&s, &app, str_of(&p1, "refresh_token")).await).await;
    expect_invalid_grant(refresh(&s, &app, str_of(&p3, "refresh_token")).await).await;
    assert_dead(
        &s,
        str_of(&p3, "access_token"),
        "D24: the chain's newest access token",
    )
    .await;
    let reuse = crate::events::told(&s, "?type=refresh_token.reuse_detected").await;
    assert_eq!(reuse.len(), 1, "one chain revoked once: {reuse:?}");
    assert_eq!(reuse[0]["data"]["object"]["trigger"], "refresh_token");
    // Another chain of the same user is untouched.
    assert_works(&s, str_of(&other, "access_token"), "another chain's token").await;
    expect_pair(
        refresh(&s, &app, str_of(&other, "refresh_token")).await,
        true,
    )
    .await;
}

/// D24: a revoked chain never benefits from the grace window.
#[tokio::test]
async fn d24_revoked_chain_gets_nothing_from_the_grace_window() {
    let s = TestServer::start().await;
    let app = confidential(&s).await;
    active_user(&s, "revgrace@example.com", Role::Viewer).await;
    let p1 = pair_for(&s, &app, "revgrace@example.com", Some("users:read")).await;
    let p2 = expect_pair(refresh(&s, &app, str_of(&p1, "refresh_token")).await, true).await;
    expect_revoked(revoke(&s, &app, str_of(&p2, "refresh_token")).await).await;
    expect_invalid_grant(refresh(&s, &app, str_of(&p1, "refresh_token")).await).await;
    assert_dead(&s, str_of(&p2, "access_token"), "a revoked chain's token").await;
}

/// D24: a refresh token presented by another client is invalid_grant.
#[tokio::test]
async fn d24_refresh_token_of_another_client_is_invalid_grant() {
    let s = TestServer::start().await;
    let app = confidential(&s).await;
    let other = confidential(&s).await;
    let public_other = register(&s, &s.org(), ALL_SCOPES, &[REDIRECT], true, false).await;
    active_user(&s, "bound@example.com", Role::Viewer).await;
    let p1 = pair_for(&s, &app, "bound@example.com", Some("users:read")).await;
    let rt = str_of(&p1, "refresh_token");
    expect_invalid_grant(refresh(&s, &other, rt).await).await;
    expect_invalid_grant(refresh(&s, &public_other, rt).await).await;
    // Garbage and unknown refresh tokens too.
    expect_invalid_grant(refresh(&s, &app, "rt_doesnotexist").await).await;
    expect_invalid_grant(refresh(&s, &app, "garbage").await).await;
}

/// D24: client credentials issue no refresh token; token responses are never cached.
#[tokio::test]
async fn d24_client_credentials_issue_no_refresh_token() {
    let s = TestServer::start().await;
    let app = confidential(&s).await;
    let res = s
        .request(Method::POST, "/oauth/token")
        .basic_auth(&app.id, app.secret.as_deref())
        .form(&[
            ("grant_type", "client_credentials"),
            ("scope", "users:read"),
        ])
        .send()
        .await
        .unwrap();
    assert_no_store(res.headers(), res.status());
    assert_eq!(res.status(), StatusCode::OK);
    let body: Value = res.json().await.unwrap();
    assert!(body.get("refresh_token").is_none(), "D24: {body}");
    // A refresh grant with an access token in place of a refresh token.
    let res = refresh(&s, &app, str_of(&body, "access_token")).await;
    expect_invalid_grant(res).await;
}

// ---------------------------------------------------------------------------
// D25: revocation
// ---------------------------------------------------------------------------

/// D25: 200 with an empty body for a valid, an already revoked, an unknown and
/// a malformed token.
#[tokio::test]
async fn d25_revoke_is_200_empty_for_valid_revoked_and_garbage() {
    let s = TestServer::start().await;
    let app = confidential(&s).await;
    active_user(&s, "rev@example.com", Role::Viewer).await;
    let p = pair_for(&s, &app, "rev@example.com", Some("users:read")).await;
    let rt = str_of(&p, "refresh_token");
    expect_revoked(revoke(&s, &app, rt).await).await;
    expect_revoked(revoke(&s, &app, rt).await).await;
    expect_revoked(revoke(&s, &app, str_of(&p, "access_token")).await).await;
    expect_revoked(revoke(&s, &app, str_of(&p, "access_token")).await).await;
    for garbage in [
        "garbage",
        "rt_unknown",
        "a.b.c",
        "eyJhbGciOiJub25lIn0.e30.",
        "ac_123",
    ] {
        expect_revoked(revoke(&s, &app, garbage).await).await;
    }
    // With hints, right or wrong.
    let p = pair_for(&s, &app, "rev@example.com", Some("users:read")).await;
    let res = post_as(
        &s,
        &app,
        "/oauth/revoke",
        &[
            ("token", str_of(&p, "refresh_token")),
            ("token_type_hint", "access_token"),
        ],
    )
    .await;
    expect_revoked(res).await;
    // RFC 7009 §2.1: a wrong hint does not stop the revocation.
    expect_invalid_grant(refresh(&s, &app, str_of(&p, "refresh_token")).await).await;
    assert_dead(
        &s,
        str_of(&p, "access_token"),
        "a chain revoked with a wrong hint",
    )
    .await;
}

/// D25: bad client credentials at /oauth/revoke are 401 invalid_client, and
/// nothing is revoked.
#[tokio::test]
async fn d25_revoke_with_bad_client_credentials_is_401() {
    let s = TestServer::start().await;
    let app = confidential(&s).await;
    active_user(&s, "badrev@example.com", Role::Viewer).await;
    let p = pair_for(&s, &app, "badrev@example.com", Some("users:read")).await;
    let rt = str_of(&p, "refresh_token");
    for secret in [Some("gcs_wrong".to_owned()), None] {
        let who = App {
            id: app.id.clone(),
            secret,
        };
        let res = revoke(&s, &who, rt).await;
        expect_oauth_error(res, StatusCode::UNAUTHORIZED, "invalid_client").await;
    }
    let unknown = App {
        id: ClientId::generate().to_string(),
        secret: Some("gcs_whatever".into()),
    };
    expect_oauth_error(
        revoke(&s, &unknown, rt).await,
        StatusCode::UNAUTHORIZED,
        "invalid_client",
    )
    .await;
    assert_works(
        &s,
        str_of(&p, "access_token"),
        "a token after failed revocations",
    )
    .await;
    expect_pair(refresh(&s, &app, rt).await, true).await;
}

/// D25: a client can revoke only its own tokens; another client's are
/// answered 200 and left alone.
#[tokio::test]
async fn d25_revoking_another_clients_token_is_200_and_harmless() {
    let s = TestServer::start().await;
    let app = confidential(&s).await;
    let other = confidential(&s).await;
    let public_other = register(&s, &s.org(), ALL_SCOPES, &[REDIRECT], true, false).await;
    active_user(&s, "mine@example.com", Role::Viewer).await;
    let p = pair_for(&s, &app, "mine@example.com", Some("users:read")).await;
    for by in [&other, &public_other] {
        expect_revoked(revoke(&s, by, str_of(&p, "refresh_token")).await).await;
        expect_revoked(revoke(&s, by, str_of(&p, "access_token")).await).await;
    }
    assert_works(&s, str_of(&p, "access_token"), "D25: left alone").await;
    let next = expect_pair(refresh(&s, &app, str_of(&p, "refresh_token")).await, true).await;
    assert_works(&s, str_of(&next, "access_token"), "D25: the chain lives on").await;
}

/// D25: revoking an access token invalidates that token; the rest of its
/// chain is unaffected.
#[tokio::test]
async fn d25_revoking_an_access_token_kills_only_that_token() {
    let s = TestServer::start().await;
    let app = confidential(&s).await;
    active_user(&s, "one@example.com", Role::Viewer).await;
    let p1 = pair_for(&s, &app, "one@example.com", Some("users:read")).await;
    let other_chain = pair_for(&s, &app, "one@example.com", Some("users:read")).await;
    let at = str_of(&p1, "access_token");
    assert_works(&s, at, "before revocation").await;
    let res = post_as(
        &s,
        &app,
        "/oauth/revoke",
        &[("token", at), ("token_type_hint", "access_token")],
    )
    .await;
    expect_revoked(res).await;
    assert_dead(&s, at, "D25: a revoked access token").await;
    // The refresh token of the chain still works, and so does what it issues.
    let p2 = expect_pair(refresh(&s, &app, str_of(&p1, "refresh_token")).await, true).await;
    assert_works(
        &s,
        str_of(&p2, "access_token"),
        "the chain's next access token",
    )
    .await;
    assert_works(
        &s,
        str_of(&other_chain, "access_token"),
        "another chain's token",
    )
    .await;
    // Without a hint, too.
    expect_revoked(revoke(&s, &app, str_of(&p2, "access_token")).await).await;
    assert_dead(
        &s,
        str_of(&p2, "access_token"),
        "D25: revoked without a hint",
    )
    .await;
    expect_pair(refresh(&s, &app, str_of(&p2, "refresh_token")).await, true).await;
}

/// D25/§3.3: revoking a refresh token (current or already used) revokes its
/// chain: the chain's refresh and access tokens; other chains are unaffected.
#[tokio::test]
async fn d25_revoking_a_refresh_token_kills_its_chain() {
    let s = TestServer::start().await;
    let app = confidential(&s).await;
    active_user(&s, "chainrev@example.com", Role::Viewer).await;

    // The current refresh token.
    let p1 = pair_for(&s, &app, "chainrev@example.com", Some("users:read")).await;
    let bystander = pair_for(&s, &app, "chainrev@example.com", Some("users:read")).await;
    expect_revoked(revoke(&s, &app, str_of(&p1, "refresh_token")).await).await;
    assert_dead(
        &s,
        str_of(&p1, "access_token"),
        "§3.3: an access token derived from a revoked refresh token",
    )
    .await;
    expect_invalid_grant(refresh(&s, &app, str_of(&p1, "refresh_token")).await).await;

    // An already used one: the whole chain goes, successors included.
    let q1 = pair_for(&s, &app, "chainrev@example.com", Some("users:read")).await;
    let q2 = expect_pair(refresh(&s, &app, str_of(&q1, "refresh_token")).await, true).await;
    let q3 = expect_pair(refresh(&s, &app, str_of(&q2, "refresh_token")).await, true).await;
    expect_revoked(revoke(&s, &app, str_of(&q1, "refresh_token")).await).await;
    assert_dead(
        &s,
        str_of(&q3, "access_token"),
        "D25: a descendant of a revoked (used) refresh token",
    )
    .await;
    expect_invalid_grant(refresh(&s, &app, str_of(&q3, "refresh_token")).await).await;

    assert_works(&s, str_of(&bystander, "access_token"), "another chain").await;
    expect_pair(
        refresh(&s, &app, str_of(&bystander, "refresh_token")).await,
        true,
    )
    .await;
}
#[path = "oidc.rs"]
mod oidc;

#[path = "management.rs"]
mod management;

#[path = "offboarding.rs"]
mod offboarding;

#[path = "sessions.rs"]
mod sessions;
