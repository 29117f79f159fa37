//! Invitations and password resets by e-mail: the durable outbox and its
//! `.eml` files (D30), the invitation lifecycle (D11), the password pages and
//! their rules (D19), re-sending an invitation (D19).
//!
//! The pages are driven like a browser without a cookie jar: the CSRF cookie
//! a page sets is sent back by hand in a `Cookie:` header, with the hidden
//! `csrf_token` of the form.

use std::path::Path;
use std::time::{Duration, Instant};

use gatehouse_auth::{AccessClaims, AuthService, jwt};
use gatehouse_domain::{
    ClientId, Email, Name, NewUser, OrgId, Plan, Role, ScopeSet, Timestamp, User, UserId,
};
use gatehouse_store::{NewLink, OutboundEmail};
use reqwest::{Method, StatusCode, header};
use serde_json::{Value, json};

use crate::common::{FormPairs, PUBLIC_URL, TestServer, expect_error};

const CSRF_COOKIE: &str = "__Host-gh_csrf";
/// A password every rule of D19 accepts.
const GOOD_PASSWORD: &str = "correct horse battery staple";
/// How long a test waits for the outbox worker (it polls every 250 ms).
const MAIL_WAIT: Duration = Duration::from_secs(10);

// ---------------------------------------------------------------------------
// The outbox directory and its RFC 5322 files
// ---------------------------------------------------------------------------

/// One delivered message, parsed.
#[derive(Debug, Clone)]
pub(crate) struct Mail {
    file: String,
    headers: Vec<(String, String)>,
    /// The body after undoing its Content-Transfer-Encoding.
    pub(crate) body: String,
}

impl Mail {
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    fn is_to(&self, addr: &str) -> bool {
        self.header("To")
            .is_some_and(|to| to.to_lowercase().contains(&addr.to_lowercase()))
    }

    /// The token of the first link `{PUBLIC_URL}{prefix}<token>` in the body.
    pub(crate) fn link_token(&self, prefix: &str) -> Option<String> {
        let start = format!("{PUBLIC_URL}{prefix}");
        let at = self.body.find(&start)? + start.len();
        let token: String = self.body[at..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
            .collect();
        (!token.is_empty()).then_some(token)
    }

    pub(crate) fn invite_token(&self) -> String {
        self.link_token("/invite/")
            .unwrap_or_else(|| panic!("an invitation link {PUBLIC_URL}/invite/…: {self:#?}"))
    }

    pub(crate) fn reset_token(&self) -> String {
        self.link_token("/password/reset/")
            .unwrap_or_else(|| panic!("a reset link {PUBLIC_URL}/password/reset/…: {self:#?}"))
    }
}

fn hex(b: u8) -> Option<u8> {
    (b as char).to_digit(16).map(|d| d as u8)
}

/// Quoted-printable (RFC 2045 §6.7): soft line breaks and `=XX` escapes.
fn qp_decode(s: &str) -> String {
    let s = s.replace("=\r\n", "").replace("=\n", "");
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'='
            && i + 2 < b.len()
            && let (Some(h), Some(l)) = (hex(b[i + 1]), hex(b[i + 2]))
        {
            out.push(h * 16 + l);
            i += 3;
            continue;
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn parse_mail(file: String, raw: &str) -> Mail {
    let (head, body) = raw
        .split_once("\r\n\r\n")
        .or_else(|| raw.split_once("\n\n"))
        .unwrap_or_else(|| panic!("{file}: headers and a body separated by an empty line"));
    let mut headers: Vec<(String, String)> = Vec::new();
    for line in head.lines() {
        if line.starts_with(' ') || line.starts_with('\t') {
            // Folded header (RFC 5322 §2.2.3).
            if let Some(last) = headers.last_mut() {
                last.1.push(' ');
                last.1.push_str(line.trim());
            }
            continue;
        }
        let (k, v) = line
            .split_once(':')
            .unwrap_or_else(|| panic!("{file}: a header line: {line:?}"));
        headers.push((k.trim().to_owned(), v.trim().to_owned()));
    }
    let encoding = headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("Content-Transfer-Encoding"))
        .map(|(_, v)| v.to_ascii_lowercase());
    let body = match encoding.as_deref() {
        Some("quoted-printable") => qp_decode(body),
        Some("base64") => {
            use base64::Engine;
            let compact: String = body.chars().filter(|c| !c.is_whitespace()).collect();
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(compact)
                .unwrap_or_else(|e| panic!("{file}: a base64 body: {e}"));
            String::from_utf8_lossy(&bytes).into_owned()
        }
        _ => body.to_owned(),
    };
    Mail {
        file,
        headers,
        body,
    }
}

/// Every file name in the outbox directory (none when it does not exist yet).
fn outbox_names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = match std::fs::read_dir(dir.join("outbox")) {
        Ok(rd) => rd
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect(),
        Err(_) => Vec::new(),
    };
    names.sort();
    names
}

/// The delivered messages: the visible `.eml` files, oldest first.
fn outbox(dir: &Path) -> Vec<Mail> {
    outbox_names(dir)
        .into_iter()
        .filter(|n| !n.starts_with('.') && n.ends_with(".eml"))
        .map(|n| {
            let raw = std::fs::read(dir.join("outbox").join(&n)).unwrap();
            parse_mail(n, &String::from_utf8_lossy(&raw))
        })
        .collect()
}

/// The token of the password-reset link e-mailed to `addr`, once it is
/// there (other e-mails to them may come first).
pub(crate) async fn reset_token_for(dir: &Path, addr: &str) -> String {
    for _ in 0..150 {
        if let Some(t) = mails_to(dir, addr)
            .iter()
            .find(|m| m.body.contains("/password/reset/"))
            .map(Mail::reset_token)
        {
            return t;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("no reset e-mail to {addr} within 15 s")
}

pub(crate) fn mails_to(dir: &Path, addr: &str) -> Vec<Mail> {
    outbox(dir).into_iter().filter(|m| m.is_to(addr)).collect()
}

/// Waits (bounded) until at least `n` messages to `addr` have been delivered.
pub(crate) async fn wait_for_mails(
    dir: &Path,
    addr: &str,
    n: usize,
    within: Duration,
) -> Vec<Mail> {
    let deadline = Instant::now() + within;
    loop {
        let found = mails_to(dir, addr);
        if found.len() >= n {
            return found;
        }
        if Instant::now() > deadline {
            panic!(
                "D30: expected {n} e-mail(s) to {addr} in {}/outbox within {within:?}; found {}; directory: {:?}",
                dir.display(),
                found.len(),
                outbox_names(dir)
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits for the next message to `addr` beyond the `already` seen.
async fn next_mail(dir: &Path, addr: &str, already: usize) -> Mail {
    let mut all = wait_for_mails(dir, addr, already + 1, MAIL_WAIT).await;
    all.swap_remove(already)
}

/// The worker polls every 250 ms: after this, anything queued has been written.
async fn let_the_outbox_run() {
    tokio::time::sleep(Duration::from_millis(1500)).await;
}

/// D30: files are written under a temporary name and renamed; no reader ever
/// sees a partial message, and nothing but `.eml` files is left visible.
fn assert_outbox_clean(dir: &Path) {
    for n in outbox_names(dir) {
        assert!(
            !n.ends_with(".tmp") && !n.starts_with('.'),
            "D30: no temporary file is left behind: {n}"
        );
        assert!(n.ends_with(".eml"), "D30: only .eml files are visible: {n}");
    }
}

/// The RFC 5322 headers a message needs (and the recipient).
fn assert_rfc5322(m: &Mail, to: &str) {
    assert!(m.is_to(to), "To: {to}: {m:#?}");
    for h in ["From", "Subject", "Message-ID", "Date"] {
        assert!(
            m.header(h).is_some_and(|v| !v.trim().is_empty()),
            "RFC 5322 header {h} in {}: {:#?}",
            m.file,
            m.headers
        );
    }
    let id = m.header("Message-ID").unwrap();
    assert!(
        id.starts_with('<') && id.ends_with('>') && id.contains('@'),
        "Message-ID is <id@domain>: {id}"
    );
    // RFC 5322 §3.6.1: a date such as "Tue, 01 Sep 2026 00:00:00 +0000".
    let date = m.header("Date").unwrap();
    assert!(
        date.contains(':') && date.chars().any(|c| c.is_ascii_digit()),
        "Date is an RFC 5322 date-time: {date}"
    );
}

// ---------------------------------------------------------------------------
// Pages and forms
// ---------------------------------------------------------------------------

fn html_unescape(s: &str) -> String {
    s.replace("&quot;", "\"")
        .replace("&#34;", "\"")
        .replace("&#x27;", "'")
        .replace("&#39;", "'")
        .replace("&#x2f;", "/")
        .replace("&#x2F;", "/")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&")
}

/// The value of attribute `attr` in the `<input>`/`<form>` tag at `tag`.
fn attr(tag: &str, attr: &str) -> Option<String> {
    let key = format!("{attr}=\"");
    let at = tag.find(&key)? + key.len();
    let end = tag[at..].find('"')?;
    Some(html_unescape(&tag[at..at + end]))
}

/// The tags `<name …>` of a page.
fn tags<'a>(html: &'a str, name: &str) -> Vec<&'a str> {
    let open = format!("<{name}");
    let mut out = Vec::new();
    let mut rest = html;
    while let Some(i) = rest.find(&open) {
        let tail = &rest[i..];
        let end = tail.find('>').map_or(tail.len(), |e| e + 1);
        out.push(&tail[..end]);
        rest = &tail[end..];
    }
    out
}

/// The value of the form field `name` (hidden inputs).
fn field(html: &str, name: &str) -> Option<String> {
    tags(html, "input")
        .into_iter()
        .find(|t| attr(t, "name").as_deref() == Some(name))
        .and_then(|t| attr(t, "value"))
}

fn has_field(html: &str, name: &str) -> bool {
    tags(html, "input")
        .into_iter()
        .any(|t| attr(t, "name").as_deref() == Some(name))
}

/// A page as a browser saw it.
struct Page {
    status: StatusCode,
    html: String,
    /// `__Host-gh_csrf=…` as set by the page, if it set one.
    cookie: Option<String>,
    set_cookie: Option<String>,
}

impl Page {
    fn csrf(&self) -> String {
        field(&self.html, "csrf_token")
            .unwrap_or_else(|| panic!("a hidden csrf_token field:\n{}", self.html))
    }
}

async fn get_page(s: &TestServer, path: &str, cookie: Option<&str>) -> Page {
    let mut rb = s.request(Method::GET, path);
    if let Some(c) = cookie {
        rb = rb.header(header::COOKIE, c);
    }
    let res = rb.send().await.unwrap();
    let status = res.status();
    let set_cookie = res
        .headers()
        .get_all(header::SET_COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find(|v| v.starts_with(&format!("{CSRF_COOKIE}=")))
        .map(str::to_owned);
    let cookie = set_cookie
        .as_deref()
        .map(|v| v.split(';').next().unwrap().trim().to_owned());
    assert_html(&res);
    let html = res.text().await.unwrap();
    Page {
        status,
        html,
        cookie,
        set_cookie,
    }
}

fn assert_html(res: &reqwest::Response) {
    let ct = res
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    assert!(
        ct.starts_with("text/html"),
        "a page for a browser, not {ct:?} ({})",
        res.url()
    );
}

async fn post_form(
    s: &TestServer,
    path: &str,
    cookie: Option<&str>,
    form: &[(&str, &str)],
) -> (StatusCode, String) {
    let mut rb = s.request(Method::POST, path).form(form);
    if let Some(c) = cookie {
        rb = rb.header(header::COOKIE, c);
    }
    let res = rb.send().await.unwrap();
    let status = res.status();
    assert_html(&res);
    (status, res.text().await.unwrap())
}

/// A browser's CSRF cookie and token, taken from a live form page (the
/// forgot-password page) for posting to pages that no longer show a form.
async fn csrf_pair(s: &TestServer) -> (String, String) {
    let p = get_page(
        s,
        &format!("/password/forgot?client_id={}", s.creds.client_id),
        None,
    )
    .await;
    assert_eq!(p.status, StatusCode::OK, "{}", p.html);
    (p.cookie.clone().expect("a CSRF cookie"), p.csrf())
}

/// The password form of a link page: GET it, then POST `password`/`confirm`
/// with its CSRF token and cookie.
pub(crate) async fn set_password(
    s: &TestServer,
    path: &str,
    pw: &str,
    confirm: &str,
) -> (StatusCode, String) {
    let p = get_page(s, path, None).await;
    assert_eq!(p.status, StatusCode::OK, "the form at {path}:\n{}", p.html);
    let cookie = p.cookie.clone().expect("the form sets a CSRF cookie");
    post_form(
        s,
        path,
        Some(&cookie),
        &[
            ("csrf_token", &p.csrf()),
            ("password", pw),
            ("confirm", confirm),
        ],
    )
    .await
}

/// A D11/D19 password form: posts to its own path, hidden CSRF token, the
/// `password` and `confirm` fields, and a `__Host-` CSRF cookie with the
/// D26 attributes.
fn assert_password_form(p: &Page, path: &str) {
    assert_eq!(p.status, StatusCode::OK, "{}", p.html);
    let form = tags(&p.html, "form");
    assert_eq!(form.len(), 1, "one form:\n{}", p.html);
    assert_eq!(
        attr(form[0], "method").map(|m| m.to_lowercase()).as_deref(),
        Some("post")
    );
    let action = attr(form[0], "action").expect("a form action");
    assert!(
        action == path || action == format!("{PUBLIC_URL}{path}"),
        "the form posts to the same path {path}, not {action}"
    );
    assert!(
        p.csrf().len() >= 16,
        "a CSRF token of some strength: {}",
        p.csrf()
    );
    assert!(has_field(&p.html, "password"), "{}", p.html);
    assert!(has_field(&p.html, "confirm"), "{}", p.html);
    let sc = p.set_cookie.as_deref().expect("a CSRF cookie");
    for a in ["Secure", "HttpOnly", "Path=/", "SameSite=Lax"] {
        assert!(
            sc.split(';').any(|x| x.trim().eq_ignore_ascii_case(a)),
            "D26: the cookie has {a}: {sc}"
        );
    }
    assert!(
        !sc.to_lowercase().contains("domain="),
        "a __Host- cookie has no Domain: {sc}"
    );
}

// ---------------------------------------------------------------------------
// Users and tokens
// ---------------------------------------------------------------------------

/// A token for `user`, signed by the server's own key.
fn user_token(s: &TestServer, user: &UserId, scopes: &str) -> String {
    let auth = &s.running.as_ref().unwrap().state.app.auth().unwrap();
    let claims = AccessClaims::issue(
        s.org(),
        ClientId::parse(&s.creds.client_id).unwrap(),
        Some(user.clone()),
        ScopeSet::parse(scopes).unwrap(),
    );
    jwt::sign(
        &auth.keys().current(),
        auth.issuer(),
        &aws_lc_rs::rand::SystemRandom::new(),
        &claims,
    )
}

/// A token that may manage users (users:read users:write).
async fn admin(s: &TestServer) -> String {
    s.token("users:read users:write").await
}

/// POST /v1/users; the created user.
async fn create_user(s: &TestServer, t: &str, email: &str, role: &str) -> Value {
    let res = s
        .call(
            Method::POST,
            "/v1/users",
            t,
            Some(json!({"email": email, "name": "Invited Person", "role": role})),
        )
        .await;
    assert_eq!(res.status(), StatusCode::CREATED);
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["data"]["status"], "pending_invite", "D11: {body}");
    body["data"].clone()
}

async fn status_of(s: &TestServer, t: &str, id: &str) -> String {
    let res = s
        .call(Method::GET, &format!("/v1/users/{id}"), t, None)
        .await;
    assert_eq!(res.status(), StatusCode::OK);
    let body: Value = res.json().await.unwrap();
    body["data"]["status"].as_str().unwrap().to_owned()
}

/// A new random link token (as the server makes them).
fn new_token() -> String {
    gatehouse_domain::random::token("", 256)
}

/// A pending user inserted with an invitation link whose token we know, so
/// that the pages can be tested without depending on the e-mail of
/// `POST /v1/users` (tested on its own).
async fn invited_user(
    s: &TestServer,
    org: &OrgId,
    email: &str,
    expires_at: Timestamp,
) -> (User, String) {
    let token = new_token();
    let new = NewUser::invited(
        Email::parse(email).unwrap(),
        Name::parse("Pending Person").unwrap(),
        Role::Viewer,
        Timestamp::now(),
    );
    let link = NewLink {
        digest: AuthService::link_digest(&token),
        expires_at,
        email: OutboundEmail {
            to: email.into(),
            subject: "You are invited".into(),
            body: format!("{PUBLIC_URL}/invite/{token}\n"),
        },
    };
    let u = s
        .store()
        .insert_user_with_link(org, &new, Some(&link), crate::common::operator())
        .await
        .unwrap();
    (u, token)
}

fn in_a_week() -> Timestamp {
    Timestamp::now().plus_seconds(7 * 86400)
}

async fn password_is(s: &TestServer, email: &str, pw: &str) -> bool {
    let (_, hash) = s
        .store()
        .find_user_by_email(&s.org(), &Email::parse(email).unwrap())
        .await
        .unwrap()
        .expect("the user exists");
    match hash {
        Some(h) => gatehouse_auth::password::verify(pw.to_owned(), h).await,
        None => false,
    }
}

// ---------------------------------------------------------------------------
// D11, D30: POST /v1/users sends an invitation e-mail; accepting it
// ---------------------------------------------------------------------------

#[tokio::test]
async fn d11_d30_creating_a_user_emails_an_invitation_that_activates_them() {
    let s = TestServer::start().await;
    let t = admin(&s).await;
    let dir = s.data_dir();
    let user = create_user(&s, &t, "invitee@example.com", "editor").await;
    let id = user["id"].as_str().unwrap();

    // D30: delivered by the worker as one RFC 5322 file within a few seconds.
    let mails = wait_for_mails(&dir, "invitee@example.com", 1, MAIL_WAIT).await;
    let_the_outbox_run().await;
    assert_eq!(
        outbox(&dir).len(),
        1,
        "exactly one message for one new user: {:?}",
        outbox_names(&dir)
    );
    assert_outbox_clean(&dir);
    let m = &mails[0];
    assert_rfc5322(m, "invitee@example.com");
    // D1: e-mail links use public_url, not the address the request came to.
    let token = m.invite_token();
    assert!(
        !m.body.contains("127.0.0.1"),
        "links use public_url: {}",
        m.body
    );

    // The invitee chooses a password on the linked page (D11).
    let path = format!("/invite/{token}");
    let form = get_page(&s, &path, None).await;
    assert_password_form(&form, &path);
    assert_eq!(status_of(&s, &t, id).await, "pending_invite");
    let cookie = form.cookie.clone().unwrap();
    let (st, html) = post_form(
        &s,
        &path,
        Some(&cookie),
        &[
            ("csrf_token", &form.csrf()),
            ("password", GOOD_PASSWORD),
            ("confirm", GOOD_PASSWORD),
        ],
    )
    .await;
    assert_eq!(st, StatusCode::OK, "accepted:\n{html}");
    assert!(
        !has_field(&html, "password"),
        "a success page, not the form again:\n{html}"
    );
    assert_eq!(
        status_of(&s, &t, id).await,
        "active",
        "D11: accepting activates"
    );
    assert!(password_is(&s, "invitee@example.com", GOOD_PASSWORD).await);

    // Single use: the link is dead for GET and POST alike.
    let again = get_page(&s, &path, Some(&cookie)).await;
    assert_eq!(again.status, StatusCode::NOT_FOUND, "{}", again.html);
    assert!(!has_field(&again.html, "password"));
    let (st, _) = post_form(
        &s,
        &path,
        Some(&cookie),
        &[
            ("csrf_token", &form.csrf()),
            ("password", "another fine passphrase"),
            ("confirm", "another fine passphrase"),
        ],
    )
    .await;
    assert_eq!(st, StatusCode::NOT_FOUND, "D11: the link is single-use");
    assert!(
        password_is(&s, "invitee@example.com", GOOD_PASSWORD).await,
        "a used link changes nothing"
    );
    assert_eq!(status_of(&s, &t, id).await, "active");
    // D54: the acceptance is a status change, told once, as done by the
    // person through their link (no token, so no client).
    let updated = crate::events::told(&s, &format!("?type=user.updated&object_id={id}")).await;
    assert_eq!(updated.len(), 1, "{updated:?}");
    let e = &updated[0];
    assert_eq!(
        e["actor"],
        json!({"type": "user", "id": id, "client_id": null})
    );
    assert_eq!(e["data"]["object"]["status"], "active");
    assert_eq!(e["data"]["previous_attributes"]["status"], "pending_invite");
    // The page request that sent the password (D54: not null for a user).
    assert!(
        e["request"]["id"].as_str().unwrap().starts_with("req_"),
        "{e}"
    );
}

#[tokio::test]
async fn d30_each_new_user_gets_their_own_invitation() {
    let s = TestServer::start().await;
    let t = admin(&s).await;
    let dir = s.data_dir();
    create_user(&s, &t, "first@example.com", "viewer").await;
    create_user(&s, &t, "second@example.com", "admin").await;
    let a = wait_for_mails(&dir, "first@example.com", 1, MAIL_WAIT).await;
    let b = wait_for_mails(&dir, "second@example.com", 1, MAIL_WAIT).await;
    let_the_outbox_run().await;
    assert_eq!(outbox(&dir).len(), 2, "{:?}", outbox_names(&dir));
    assert_outbox_clean(&dir);
    assert_ne!(a[0].invite_token(), b[0].invite_token());
    assert_ne!(
        a[0].header("Message-ID"),
        b[0].header("Message-ID"),
        "Message-IDs are unique"
    );
    // A duplicate address (D2: 409) queues nothing.
    let res = s
        .call(
            Method::POST,
            "/v1/users",
            &t,
            Some(json!({"email": "FIRST@example.com", "name": "Dup", "role": "viewer"})),
        )
        .await;
    expect_error(res, StatusCode::CONFLICT, "DUPLICATE_RESOURCE").await;
    // A refused request (403) queues nothing either.
    let ro = s.token("users:read").await;
    let res = s
        .call(
            Method::POST,
            "/v1/users",
            &ro,
            Some(json!({"email": "third@example.com", "name": "No", "role": "viewer"})),
        )
        .await;
    expect_error(res, StatusCode::FORBIDDEN, "INSUFFICIENT_SCOPE").await;
    let_the_outbox_run().await;
    assert_eq!(outbox(&dir).len(), 2, "{:?}", outbox_names(&dir));
    assert_eq!(s.store().outbox_backlog().await.unwrap(), 0);
}

// ---------------------------------------------------------------------------
// D19 password rules on the invitation page
// ---------------------------------------------------------------------------

#[tokio::test]
async fn d19_invitation_refuses_weak_passwords_and_keeps_the_user_pending() {
    let s = TestServer::start().await;
    let t = admin(&s).await;
    let email = "policy.person@example.com";
    let (u, token) = invited_user(&s, &s.org(), email, in_a_week()).await;
    let path = format!("/invite/{token}");
    let long = "x".repeat(200) + &"y".repeat(57);
    let cases: Vec<(&str, String, String)> = vec![
        ("11 characters", "elevenchars".into(), "elevenchars".into()),
        ("empty", String::new(), String::new()),
        ("the e-mail", email.into(), email.into()),
        (
            "the e-mail in other case",
            email.to_uppercase(),
            email.to_uppercase(),
        ),
        (
            "a common password",
            "password1234".into(),
            "password1234".into(),
        ),
        ("257 characters", long.clone(), long.clone()),
        (
            "a confirmation that differs",
            GOOD_PASSWORD.into(),
            format!("{GOOD_PASSWORD}!"),
        ),
    ];
    for (what, pw, confirm) in &cases {
        let (st, html) = set_password(&s, &path, pw, confirm).await;
        assert_eq!(
            st,
            StatusCode::BAD_REQUEST,
            "D19: {what} is refused:\n{html}"
        );
        assert!(
            has_field(&html, "password") && field(&html, "csrf_token").is_some(),
            "the form is shown again to retry ({what}):\n{html}"
        );
        assert_eq!(
            status_of(&s, &t, u.id.as_str()).await,
            "pending_invite",
            "{what}: the user stays pending"
        );
    }
    // A refusal does not use the link up; exactly 12 characters is enough.
    let (st, html) = set_password(&s, &path, "tr0ub4dor&3x", "tr0ub4dor&3x").await;
    assert_eq!(st, StatusCode::OK, "12 characters are accepted:\n{html}");
    assert_eq!(status_of(&s, &t, u.id.as_str()).await, "active");
    assert!(password_is(&s, email, "tr0ub4dor&3x").await);
}

#[tokio::test]
async fn d19_a_256_character_password_is_accepted() {
    let s = TestServer::start().await;
    let t = admin(&s).await;
    let (u, token) = invited_user(&s, &s.org(), "long@example.com", in_a_week()).await;
    let pw = "Ab1 ".repeat(64);
    assert_eq!(pw.chars().count(), 256);
    let (st, html) = set_password(&s, &format!("/invite/{token}"), &pw, &pw).await;
    assert_eq!(st, StatusCode::OK, "{html}");
    // Issue 32: the last page leads to the dashboard.
    assert!(
        html.contains("<a href=\"&#x2f;dashboard\">← Sign in to the dashboard</a>"),
        "{html}"
    );
    assert_eq!(status_of(&s, &t, u.id.as_str()).await, "active");
    assert!(password_is(&s, "long@example.com", &pw).await);
}

#[tokio::test]
async fn invitation_form_refuses_a_csrf_mismatch() {
    let s = TestServer::start().await;
    let t = admin(&s).await;
    let (u, token) = invited_user(&s, &s.org(), "csrf@example.com", in_a_week()).await;
    let path = format!("/invite/{token}");
    let p = get_page(&s, &path, None).await;
    assert_password_form(&p, &path);
    let cookie = p.cookie.clone().unwrap();
    let csrf = p.csrf();
    let forged = format!("{CSRF_COOKIE}={}", new_token());
    let attempts: Vec<(&str, Option<&str>, FormPairs<'_>)> = vec![
        (
            "a token that is not the cookie's",
            Some(cookie.as_str()),
            vec![
                ("csrf_token", forged.split_once('=').unwrap().1),
                ("password", GOOD_PASSWORD),
                ("confirm", GOOD_PASSWORD),
            ],
        ),
        (
            "no cookie",
            None,
            vec![
                ("csrf_token", &csrf),
                ("password", GOOD_PASSWORD),
                ("confirm", GOOD_PASSWORD),
            ],
        ),
        (
            "another browser's cookie",
            Some(forged.as_str()),
            vec![
                ("csrf_token", &csrf),
                ("password", GOOD_PASSWORD),
                ("confirm", GOOD_PASSWORD),
            ],
        ),
        (
            "no token",
            Some(cookie.as_str()),
            vec![("password", GOOD_PASSWORD), ("confirm", GOOD_PASSWORD)],
        ),
        (
            "an empty token",
            Some(cookie.as_str()),
            vec![
                ("csrf_token", ""),
                ("password", GOOD_PASSWORD),
                ("confirm", GOOD_PASSWORD),
            ],
        ),
    ];
    for (what, cookie, form) in &attempts {
        let (st, html) = post_form(&s, &path, *cookie, form).await;
        assert_eq!(st, StatusCode::FORBIDDEN, "{what}:\n{html}");
        assert_eq!(
            status_of(&s, &t, u.id.as_str()).await,
            "pending_invite",
            "{what}"
        );
    }
    // The link still works from the real form.
    let (st, html) = post_form(
        &s,
        &path,
        Some(&cookie),
        &[
            ("csrf_token", &csrf),
            ("password", GOOD_PASSWORD),
            ("confirm", GOOD_PASSWORD),
        ],
    )
    .await;
    assert_eq!(st, StatusCode::OK, "{html}");
    assert_eq!(status_of(&s, &t, u.id.as_str()).await, "active");
}

#[tokio::test]
async fn d11_expired_and_unknown_invitation_links_are_dead() {
    let s = TestServer::start().await;
    let t = admin(&s).await;
    let past = Timestamp::now().plus_seconds(-60);
    let (u, token) = invited_user(&s, &s.org(), "late@example.com", past).await;
    let (cookie, csrf) = csrf_pair(&s).await;
    for path in [
        format!("/invite/{token}"),
        format!("/invite/{}", new_token()),
        "/invite/x".to_owned(),
    ] {
        let p = get_page(&s, &path, None).await;
        assert_eq!(p.status, StatusCode::NOT_FOUND, "{path}:\n{}", p.html);
        assert!(!has_field(&p.html, "password"), "no form at {path}");
        let (st, _) = post_form(
            &s,
            &path,
            Some(&cookie),
            &[
                ("csrf_token", &csrf),
                ("password", GOOD_PASSWORD),
                ("confirm", GOOD_PASSWORD),
            ],
        )
        .await;
        assert_eq!(st, StatusCode::NOT_FOUND, "POST {path}");
    }
    assert_eq!(status_of(&s, &t, u.id.as_str()).await, "pending_invite");
}

#[tokio::test]
async fn d11_cancelling_an_invitation_kills_its_link() {
    let s = TestServer::start().await;
    let t = admin(&s).await;
    let (u, token) = invited_user(&s, &s.org(), "cancel@example.com", in_a_week()).await;
    let path = format!("/invite/{token}");
    // The browser opened the form before the invitation was cancelled.
    let form = get_page(&s, &path, None).await;
    assert_password_form(&form, &path);

    let res = s
        .call(
            Method::PATCH,
            &format!("/v1/users/{}", u.id),
            &t,
            Some(json!({"status": "inactive"})),
        )
        .await;
    assert_eq!(res.status(), StatusCode::OK);
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["data"]["status"], "inactive");

    let p = get_page(&s, &path, None).await;
    assert_eq!(p.status, StatusCode::NOT_FOUND, "{}", p.html);
    let (st, _) = post_form(
        &s,
        &path,
        Some(form.cookie.as_deref().unwrap()),
        &[
            ("csrf_token", &form.csrf()),
            ("password", GOOD_PASSWORD),
            ("confirm", GOOD_PASSWORD),
        ],
    )
    .await;
    assert_eq!(st, StatusCode::NOT_FOUND, "D11: the cancelled link is dead");
    assert_eq!(status_of(&s, &t, u.id.as_str()).await, "inactive");
    assert!(!password_is(&s, "cancel@example.com", GOOD_PASSWORD).await);

    // A user who never accepted cannot be activated by PATCH (D11), and
    // cannot be invited again once cancelled (D19: only pending_invite).
    let res = s
        .call(
            Method::PATCH,
            &format!("/v1/users/{}", u.id),
            &t,
            Some(json!({"status": "active"})),
        )
        .await;
    expect_error(
        res,
        StatusCode::UNPROCESSABLE_ENTITY,
        "INVALID_STATE_TRANSITION",
    )
    .await;
    let res = s
        .call(
            Method::POST,
            &format!("/v1/users/{}/invitation", u.id),
            &t,
            None,
        )
        .await;
    expect_error(
        res,
        StatusCode::UNPROCESSABLE_ENTITY,
        "INVALID_STATE_TRANSITION",
    )
    .await;
    // Still dead after all that.
    let p = get_page(&s, &path, None).await;
    assert_eq!(p.status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn d11_pending_to_active_by_patch_is_refused_and_the_link_survives() {
    let s = TestServer::start().await;
    let t = admin(&s).await;
    let (u, token) = invited_user(&s, &s.org(), "patchme@example.com", in_a_week()).await;
    let res = s
        .call(
            Method::PATCH,
            &format!("/v1/users/{}", u.id),
            &t,
            Some(json!({"status": "active"})),
        )
        .await;
    expect_error(
        res,
        StatusCode::UNPROCESSABLE_ENTITY,
        "INVALID_STATE_TRANSITION",
    )
    .await;
    // Renaming a pending user does not touch the invitation either.
    let res = s
        .call(
            Method::PATCH,
            &format!("/v1/users/{}", u.id),
            &t,
            Some(json!({"name": "Renamed Invitee"})),
        )
        .await;
    assert_eq!(res.status(), StatusCode::OK);
    let (st, html) = set_password(
        &s,
        &format!("/invite/{token}"),
        GOOD_PASSWORD,
        GOOD_PASSWORD,
    )
    .await;
    assert_eq!(st, StatusCode::OK, "{html}");
    assert_eq!(status_of(&s, &t, u.id.as_str()).await, "active");
}

// ---------------------------------------------------------------------------
// D19: POST /v1/users/{id}/invitation
// ---------------------------------------------------------------------------

#[tokio::test]
async fn d19_reinvite_sends_a_new_link_and_kills_the_old_one() {
    let s = TestServer::start().await;
    let t = admin(&s).await;
    let dir = s.data_dir();
    let email = "again@example.com";
    let (u, old) = invited_user(&s, &s.org(), email, in_a_week()).await;
    // The e-mail queued with the first link (ours) goes out first.
    let before = wait_for_mails(&dir, email, 1, MAIL_WAIT).await.len();

    let res = s
        .call(
            Method::POST,
            &format!("/v1/users/{}/invitation", u.id),
            &t,
            None,
        )
        .await;
    assert_eq!(res.status(), StatusCode::ACCEPTED, "D19: 202");
    assert!(res.headers().contains_key("x-request-id"));

    let m = next_mail(&dir, email, before).await;
    assert_rfc5322(&m, email);
    let new = m.invite_token();
    assert_ne!(new, old);
    assert_outbox_clean(&dir);

    // The previous link is dead, the new one works.
    let p = get_page(&s, &format!("/invite/{old}"), None).await;
    assert_eq!(
        p.status,
        StatusCode::NOT_FOUND,
        "D19: re-sending invalidates the previous link"
    );
    assert_eq!(status_of(&s, &t, u.id.as_str()).await, "pending_invite");
    let (st, html) =
        set_password(&s, &format!("/invite/{new}"), GOOD_PASSWORD, GOOD_PASSWORD).await;
    assert_eq!(st, StatusCode::OK, "{html}");
    assert_eq!(status_of(&s, &t, u.id.as_str()).await, "active");

    // An active user cannot be invited again.
    let n = mails_to(&dir, email).len();
    let res = s
        .call(
            Method::POST,
            &format!("/v1/users/{}/invitation", u.id),
            &t,
            None,
        )
        .await;
    expect_error(
        res,
        StatusCode::UNPROCESSABLE_ENTITY,
        "INVALID_STATE_TRANSITION",
    )
    .await;
    let_the_outbox_run().await;
    assert_eq!(
        mails_to(&dir, email).len(),
        n,
        "a refused re-invite sends nothing"
    );
}

#[tokio::test]
async fn d19_reinvite_of_a_user_created_through_the_api() {
    let s = TestServer::start().await;
    let t = admin(&s).await;
    let dir = s.data_dir();
    let user = create_user(&s, &t, "twice@example.com", "viewer").await;
    let id = user["id"].as_str().unwrap();
    let first = wait_for_mails(&dir, "twice@example.com", 1, MAIL_WAIT).await;
    let old = first[0].invite_token();
    let res = s
        .call(
            Method::POST,
            &format!("/v1/users/{id}/invitation"),
            &t,
            None,
        )
        .await;
    assert_eq!(res.status(), StatusCode::ACCEPTED);
    let m = next_mail(&dir, "twice@example.com", 1).await;
    let new = m.invite_token();
    assert_ne!(old, new);
    assert_eq!(
        get_page(&s, &format!("/invite/{old}"), None).await.status,
        StatusCode::NOT_FOUND
    );
    let (st, html) =
        set_password(&s, &format!("/invite/{new}"), GOOD_PASSWORD, GOOD_PASSWORD).await;
    assert_eq!(st, StatusCode::OK, "{html}");
    assert_eq!(status_of(&s, &t, id).await, "active");
}

#[tokio::test]
async fn d19_reinvite_needs_users_write_and_the_users_organization() {
    let s = TestServer::start().await;
    let t = admin(&s).await;
    let dir = s.data_dir();
    let email = "guarded@example.com";
    let (u, old) = invited_user(&s, &s.org(), email, in_a_week()).await;
    wait_for_mails(&dir, email, 1, MAIL_WAIT).await;
    let path = format!("/v1/users/{}/invitation", u.id);

    // 401 without a token, 403 without users:write (before 404: D9).
    let res = s.request(Method::POST, &path).send().await.unwrap();
    assert_eq!(res.status(), StatusCode::UNAUTHORIZED);
    let ro = s.token("users:read").await;
    let res = s.call(Method::POST, &path, &ro, None).await;
    expect_error(res, StatusCode::FORBIDDEN, "INSUFFICIENT_SCOPE").await;
    let res = s
        .call(
            Method::POST,
            "/v1/users/usr_doesnotexist000000000000/invitation",
            &ro,
            None,
        )
        .await;
    expect_error(res, StatusCode::FORBIDDEN, "INSUFFICIENT_SCOPE").await;

    // 404 for an id of another organization, an unknown id, a malformed id.
    let other = s.new_org(Plan::Free).await;
    let (stranger, _) = invited_user(&s, &other, "stranger@example.com", in_a_week()).await;
    wait_for_mails(&dir, "stranger@example.com", 1, MAIL_WAIT).await;
    for id in [
        stranger.id.to_string(),
        UserId::generate().to_string(),
        "prod_123".to_owned(),
    ] {
        let res = s
            .call(
                Method::POST,
                &format!("/v1/users/{id}/invitation"),
                &t,
                None,
            )
            .await;
        expect_error(res, StatusCode::NOT_FOUND, "RESOURCE_NOT_FOUND").await;
    }
    let_the_outbox_run().await;
    assert_eq!(mails_to(&dir, email).len(), 1, "refusals send nothing");
    assert_eq!(mails_to(&dir, "stranger@example.com").len(), 1);
    // Nothing was replaced: both original links still work.
    assert_eq!(
        get_page(&s, &format!("/invite/{old}"), None).await.status,
        StatusCode::OK
    );
}

// ---------------------------------------------------------------------------
// D30: durability of the outbox
// ---------------------------------------------------------------------------

/// A server whose mail server is down: nothing listens on port 1.
async fn server_with_dead_smtp() -> TestServer {
    TestServer::start_with(|st| st.smtp_url = Some("smtp://127.0.0.1:1".into())).await
}

#[tokio::test]
async fn d30_an_invitation_queued_while_smtp_is_down_survives_a_restart() {
    let mut s = server_with_dead_smtp().await;
    let t = admin(&s).await;
    let user = create_user(&s, &t, "durable@example.com", "viewer").await;
    // Queued in the same transaction as the user (D30).
    assert!(
        s.store().outbox_backlog().await.unwrap() >= 1,
        "D30: the invitation is in the outbox as soon as the user exists"
    );
    // Delivery fails (and is retried later); nothing is lost meanwhile.
    let_the_outbox_run().await;
    assert!(s.store().outbox_backlog().await.unwrap() >= 1);
    assert!(mails_to(&s.data_dir(), "durable@example.com").is_empty());

    // Restart with file delivery: the message goes out after all.
    s.settings.smtp_url = None;
    let s = s.restart().await;
    let dir = s.data_dir();
    let mails = wait_for_mails(&dir, "durable@example.com", 1, Duration::from_secs(40)).await;
    assert_eq!(mails.len(), 1, "delivered once");
    assert_rfc5322(&mails[0], "durable@example.com");
    assert_outbox_clean(&dir);
    let deadline = Instant::now() + Duration::from_secs(5);
    while s.store().outbox_backlog().await.unwrap() > 0 {
        assert!(Instant::now() < deadline, "the backlog drains");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The link it carries works.
    let (st, html) = set_password(
        &s,
        &format!("/invite/{}", mails[0].invite_token()),
        GOOD_PASSWORD,
        GOOD_PASSWORD,
    )
    .await;
    assert_eq!(st, StatusCode::OK, "{html}");
    let t = admin(&s).await;
    assert_eq!(
        status_of(&s, &t, user["id"].as_str().unwrap()).await,
        "active"
    );
}

#[tokio::test]
async fn d30_a_reset_email_queued_while_smtp_is_down_survives_a_restart() {
    let mut s = server_with_dead_smtp().await;
    s.new_user(&s.org(), "resetlater@example.com", Role::Viewer)
        .await;
    let (st, _) = forgot(&s, "resetlater@example.com").await;
    assert_eq!(st, StatusCode::OK);
    // D19 (revised): the reset is queued just after the answer.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while s.store().outbox_backlog().await.unwrap() == 0 {
        assert!(std::time::Instant::now() < deadline, "the reset was queued");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let_the_outbox_run().await;
    assert!(
        s.store().outbox_backlog().await.unwrap() >= 1,
        "a failed delivery keeps the message"
    );
    s.settings.smtp_url = None;
    let s = s.restart().await;
    let dir = s.data_dir();
    let mails = wait_for_mails(&dir, "resetlater@example.com", 1, Duration::from_secs(40)).await;
    let token = mails[0].reset_token();
    let (st, html) = set_password(
        &s,
        &format!("/password/reset/{token}"),
        GOOD_PASSWORD,
        GOOD_PASSWORD,
    )
    .await;
    assert_eq!(st, StatusCode::OK, "{html}");
    assert!(password_is(&s, "resetlater@example.com", GOOD_PASSWORD).await);
}

// ---------------------------------------------------------------------------
// D19: forgotten passwords
// ---------------------------------------------------------------------------

/// The forgot-password form of the bootstrap client, submitted for `email`.
async fn forgot(s: &TestServer, email: &str) -> (StatusCode, String) {
    forgot_for(s, &s.creds.client_id, email).await
}

async fn forgot_for(s: &TestServer, client_id: &str, email: &str) -> (StatusCode, String) {
    let p = get_page(s, &format!("/password/forgot?client_id={client_id}"), None).await;
    assert_eq!(p.status, StatusCode::OK, "{}", p.html);
    let cookie = p.cookie.clone().expect("a CSRF cookie");
    let form_client = field(&p.html, "client_id").expect("the client_id travels with the form");
    assert_eq!(form_client, client_id);
    assert!(has_field(&p.html, "email"));
    post_form(
        s,
        "/password/forgot",
        Some(&cookie),
        &[
            ("csrf_token", &p.csrf()),
            ("client_id", &form_client),
            ("email", email),
        ],
    )
    .await
}

#[tokio::test]
async fn d19_password_reset_by_email_revokes_old_tokens_and_is_single_use() {
    let s = TestServer::start().await;
    let dir = s.data_dir();
    let email = "forgetful@example.com";
    let u = s.new_user(&s.org(), email, Role::Viewer).await;
    let old_token = user_token(&s, &u.id, "users:read");
    let res = s.call(Method::GET, "/v1/users", &old_token, None).await;
    assert_eq!(res.status(), StatusCode::OK);

    // The same answer whether or not the address has an account.
    let (st_unknown, html_unknown) = forgot(&s, "nobody@example.com").await;
    let (st_known, html_known) = forgot(&s, email).await;
    assert_eq!(st_unknown, StatusCode::OK);
    assert_eq!(st_known, st_unknown, "D19: the same status");
    assert_eq!(html_known, html_unknown, "D19: the same page");
    assert!(!has_field(&html_known, "password"));

    let mails = wait_for_mails(&dir, email, 1, MAIL_WAIT).await;
    let_the_outbox_run().await;
    assert_eq!(mails_to(&dir, email).len(), 1);
    assert!(
        mails_to(&dir, "nobody@example.com").is_empty(),
        "D19: no e-mail for an unknown address"
    );
    assert_eq!(outbox(&dir).len(), 1, "{:?}", outbox_names(&dir));
    assert_outbox_clean(&dir);
    let m = &mails[0];
    assert_rfc5322(m, email);
    let token = m.reset_token();

    // The reset page and its form.
    let path = format!("/password/reset/{token}");
    let p = get_page(&s, &path, None).await;
    assert_password_form(&p, &path);
    let cookie = p.cookie.clone().unwrap();
    let (st, html) = post_form(
        &s,
        &path,
        Some(&cookie),
        &[
            ("csrf_token", &p.csrf()),
            ("password", GOOD_PASSWORD),
            ("confirm", GOOD_PASSWORD),
        ],
    )
    .await;
    assert_eq!(st, StatusCode::OK, "{html}");
    assert!(!has_field(&html, "password"), "a success page:\n{html}");
    assert!(password_is(&s, email, GOOD_PASSWORD).await);

    // D19: a reset revokes the user's tokens.
    let res = s.call(Method::GET, "/v1/users", &old_token, None).await;
    expect_error(res, StatusCode::UNAUTHORIZED, "INVALID_TOKEN").await;
    // ... and leaves the user active.
    let t = admin(&s).await;
    assert_eq!(status_of(&s, &t, u.id.as_str()).await, "active");

    // Single use.
    assert_eq!(
        get_page(&s, &path, None).await.status,
        StatusCode::NOT_FOUND
    );
    let (st, _) = post_form(
        &s,
        &path,
        Some(&cookie),
        &[
            ("csrf_token", &p.csrf()),
            ("password", "yet another passphrase"),
            ("confirm", "yet another passphrase"),
        ],
    )
    .await;
    assert_eq!(
        st,
        StatusCode::NOT_FOUND,
        "D19: the reset link is single-use"
    );
    assert!(password_is(&s, email, GOOD_PASSWORD).await);
    // D19 (continued), D54: one `user.password_changed`, by the person.
    let changed = crate::events::told(
        &s,
        &format!("?type=user.password_changed&object_id={}", u.id),
    )
    .await;
    assert_eq!(changed.len(), 1, "{changed:?}");
    assert_eq!(changed[0]["actor"]["id"], u.id.as_str());
    assert_eq!(changed[0]["actor"]["client_id"], Value::Null);
    assert!(
        changed[0]["request"]["id"]
            .as_str()
            .unwrap()
            .starts_with("req_"),
        "{}",
        changed[0]
    );
    assert_eq!(changed[0]["data"]["object"]["email"], email);

    // D58: the request (once: the unknown address sent nothing) and the
    // change, in the security chain, about the person; never the link.
    let t = s.token("audit:read").await;
    let log = crate::audit::audit_once(&s, &t, "?category=security&action=user.password_", 2).await;
    let actions: Vec<&str> = log["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["action"].as_str().unwrap())
        .collect();
    assert_eq!(
        actions,
        ["user.password_changed", "user.password_reset_requested"],
        "{log}"
    );
    let asked = &log["data"][1];
    assert_eq!(
        asked["target"],
        json!({"type": "user", "id": u.id.as_str()})
    );
    assert_eq!(asked["actor"]["type"], "anonymous");
    assert_eq!(asked["source"]["ip"], "127.0.0.1");
    assert!(
        asked["request"]["id"].as_str().unwrap().starts_with("req_"),
        "{asked}"
    );
    assert!(!log.to_string().contains(&token), "{log}");
}

#[tokio::test]
async fn d19_reset_refuses_weak_passwords_and_csrf_mismatch_without_using_the_link() {
    let s = TestServer::start().await;
    let dir = s.data_dir();
    let email = "careful@example.com";
    let u = s.new_user(&s.org(), email, Role::Editor).await;
    let old_token = user_token(&s, &u.id, "users:read");
    forgot(&s, email).await;
    let token = wait_for_mails(&dir, email, 1, MAIL_WAIT).await[0].reset_token();
    let path = format!("/password/reset/{token}");
    for (what, pw, confirm) in [
        ("11 characters", "elevenchars", "elevenchars"),
        ("the e-mail", email, email),
        ("a common password", "password1234", "password1234"),
        (
            "a different confirmation",
            GOOD_PASSWORD,
            "correct horse battery stapler",
        ),
    ] {
        let (st, html) = set_password(&s, &path, pw, confirm).await;
        assert_eq!(st, StatusCode::BAD_REQUEST, "D19: {what}:\n{html}");
        assert!(has_field(&html, "password"), "the form again ({what})");
    }
    // CSRF.
    let p = get_page(&s, &path, None).await;
    let (st, _) = post_form(
        &s,
        &path,
        Some(&format!("{CSRF_COOKIE}={}", new_token())),
        &[
            ("csrf_token", &p.csrf()),
            ("password", GOOD_PASSWORD),
            ("confirm", GOOD_PASSWORD),
        ],
    )
    .await;
    assert_eq!(st, StatusCode::FORBIDDEN);
    let (st, _) = post_form(
        &s,
        &path,
        None,
        &[
            ("csrf_token", &p.csrf()),
            ("password", GOOD_PASSWORD),
            ("confirm", GOOD_PASSWORD),
        ],
    )
    .await;
    assert_eq!(st, StatusCode::FORBIDDEN);
    // Nothing changed: the old password hash, the old token.
    assert!(!password_is(&s, email, GOOD_PASSWORD).await);
    let res = s.call(Method::GET, "/v1/users", &old_token, None).await;
    assert_eq!(
        res.status(),
        StatusCode::OK,
        "refused resets revoke nothing"
    );
    // The link still works.
    let (st, html) = set_password(&s, &path, GOOD_PASSWORD, GOOD_PASSWORD).await;
    assert_eq!(st, StatusCode::OK, "{html}");
    assert!(password_is(&s, email, GOOD_PASSWORD).await);
}

#[tokio::test]
async fn d19_forgot_form_checks_csrf() {
    let s = TestServer::start().await;
    let dir = s.data_dir();
    s.new_user(&s.org(), "csrfreset@example.com", Role::Viewer)
        .await;
    let p = get_page(
        &s,
        &format!("/password/forgot?client_id={}", s.creds.client_id),
        None,
    )
    .await;
    let (st, _) = post_form(
        &s,
        "/password/forgot",
        Some(&format!("{CSRF_COOKIE}={}", new_token())),
        &[
            ("csrf_token", &p.csrf()),
            ("client_id", &s.creds.client_id),
            ("email", "csrfreset@example.com"),
        ],
    )
    .await;
    assert_eq!(st, StatusCode::FORBIDDEN);
    let_the_outbox_run().await;
    assert!(mails_to(&dir, "csrfreset@example.com").is_empty());
}

#[tokio::test]
async fn d19_forgot_sends_nothing_for_other_organizations_or_users_who_cannot_sign_in() {
    let s = TestServer::start().await;
    let dir = s.data_dir();
    // A user of another organization: the bootstrap client's page does not reach them (D2).
    let other = s.new_org(Plan::Free).await;
    s.new_user(&other, "elsewhere@example.com", Role::Viewer)
        .await;
    // A pending invitee has no password to reset.
    invited_user(&s, &s.org(), "pending@example.com", in_a_week()).await;
    wait_for_mails(&dir, "pending@example.com", 1, MAIL_WAIT).await;
    let reference = forgot(&s, "nobody@example.com").await;
    for email in ["elsewhere@example.com", "pending@example.com"] {
        let answer = forgot(&s, email).await;
        assert_eq!(answer, reference, "D19: the same answer for {email}");
    }
    // A real account gets its e-mail (the worker is running).
    s.new_user(&s.org(), "here@example.com", Role::Viewer).await;
    assert_eq!(forgot(&s, "here@example.com").await, reference);
    wait_for_mails(&dir, "here@example.com", 1, MAIL_WAIT).await;
    let_the_outbox_run().await;
    assert!(mails_to(&dir, "elsewhere@example.com").is_empty());
    assert!(mails_to(&dir, "nobody@example.com").is_empty());
    let after = mails_to(&dir, "pending@example.com");
    assert!(
        after
            .iter()
            .all(|m| m.link_token("/password/reset/").is_none()),
        "no reset link for a pending user"
    );
}

#[tokio::test]
async fn d19_expired_reset_links_are_dead() {
    let s = TestServer::start().await;
    let email = "expired@example.com";
    let u = s.new_user(&s.org(), email, Role::Viewer).await;
    let old_token = user_token(&s, &u.id, "users:read");
    let token = new_token();
    let link = NewLink {
        digest: AuthService::link_digest(&token),
        expires_at: Timestamp::now().plus_seconds(-1),
        email: OutboundEmail {
            to: email.into(),
            subject: "Reset".into(),
            body: format!("{PUBLIC_URL}/password/reset/{token}\n"),
        },
    };
    assert!(
        s.store()
            .request_password_reset(&s.org(), &Email::parse(email).unwrap(), &link, None)
            .await
            .unwrap()
    );
    let path = format!("/password/reset/{token}");
    let p = get_page(&s, &path, None).await;
    assert_eq!(p.status, StatusCode::NOT_FOUND, "{}", p.html);
    let (cookie, csrf) = csrf_pair(&s).await;
    let (st, _) = post_form(
        &s,
        &path,
        Some(&cookie),
        &[
            ("csrf_token", &csrf),
            ("password", GOOD_PASSWORD),
            ("confirm", GOOD_PASSWORD),
        ],
    )
    .await;
    assert_eq!(st, StatusCode::NOT_FOUND);
    assert!(!password_is(&s, email, GOOD_PASSWORD).await);
    let res = s.call(Method::GET, "/v1/users", &old_token, None).await;
    assert_eq!(res.status(), StatusCode::OK);
    // An invitation token is not a reset token, nor the other way round.
    let (_, invite) = invited_user(&s, &s.org(), "mixed@example.com", in_a_week()).await;
    assert_eq!(
        get_page(&s, &format!("/password/reset/{invite}"), None)
            .await
            .status,
        StatusCode::NOT_FOUND
    );
}

// ---------------------------------------------------------------------------
// D19 (revised): the forgot page tells nothing by its timing and floods no
// inbox
// ---------------------------------------------------------------------------

#[tokio::test]
async fn d19_forgot_answers_before_it_looks_the_address_up() {
    // The look-up is slowed to 3 s: an answer that waited for it would show.
    let s = TestServer::start_with(|s| s.forgot_lookup_delay = Duration::from_secs(3)).await;
    let dir = s.data_dir();
    let email = "slowlookup@example.com";
    s.new_user(&s.org(), email, Role::Viewer).await;
    let mut answers = Vec::new();
    for address in [email, "nobody-here@example.com"] {
        let started = Instant::now();
        let answer = forgot(&s, address).await;
        let took = started.elapsed();
        assert!(
            took < Duration::from_millis(1500),
            "D19: {address} was answered after {took:?}, not before the look-up"
        );
        answers.push(answer);
    }
    assert_eq!(answers[0], answers[1], "the same answer");
    // The look-up still happens, after the answer.
    let mails = wait_for_mails(&dir, email, 1, MAIL_WAIT).await;
    assert!(mails[0].link_token("/password/reset/").is_some());
}

#[tokio::test]
async fn d19_a_second_request_within_five_minutes_sends_no_second_email() {
    let s = TestServer::start().await;
    let dir = s.data_dir();
    let email = "onlyonce@example.com";
    s.new_user(&s.org(), email, Role::Viewer).await;
    let first = forgot(&s, email).await;
    let token = wait_for_mails(&dir, email, 1, MAIL_WAIT).await[0].reset_token();
    for _ in 0..5 {
        assert_eq!(forgot(&s, email).await, first, "the same answer");
    }
    // Give the look-ups and the outbox time to do what they would do.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let_the_outbox_run().await;
    assert_eq!(
        mails_to(&dir, email).len(),
        1,
        "D19: one reset e-mail per account per 5 minutes"
    );
    // The link that was sent still works.
    let (st, html) = set_password(
        &s,
        &format!("/password/reset/{token}"),
        GOOD_PASSWORD,
        GOOD_PASSWORD,
    )
    .await;
    assert_eq!(st, StatusCode::OK, "{html}");
}

#[tokio::test]
async fn d19_the_21st_request_from_one_address_in_an_hour_is_429() {
    let s = TestServer::start().await;
    let email = "flooded@example.com";
    s.new_user(&s.org(), email, Role::Viewer).await;
    for i in 0..20 {
        let (st, _) = forgot(&s, &format!("someone{i}@example.com")).await;
        assert_eq!(st, StatusCode::OK, "request {}", i + 1);
    }
    let mut pages = Vec::new();
    for address in [email, "nobody-at-all@example.com"] {
        let p = get_page(
            &s,
            &format!("/password/forgot?client_id={}", s.creds.client_id),
            None,
        )
        .await;
        let res = s
            .request(Method::POST, "/password/forgot")
            .header(header::COOKIE, p.cookie.clone().unwrap())
            .form(&[
                ("csrf_token", p.csrf().as_str()),
                ("client_id", s.creds.client_id.as_str()),
                ("email", address),
            ])
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), StatusCode::TOO_MANY_REQUESTS, "{address}");
        let retry: u64 = res.headers()[header::RETRY_AFTER]
            .to_str()
            .unwrap()
            .parse()
            .unwrap();
        assert!((3500..=3600).contains(&retry), "Retry-After {retry}");
        assert_html(&res);
        // The page shows its own request id for support (it differs per
        // request, whatever the address); the rest is the same.
        let id = res.headers()["x-request-id"].to_str().unwrap().to_owned();
        let html = res.text().await.unwrap();
        assert!(html.contains(&id), "the error page shows its request id");
        pages.push(html.replace(&id, "ID"));
    }
    assert_eq!(pages[0], pages[1], "D19: the same page for every address");
}
