//! A minimal browser for the sign-in pages (D26): a cookie jar over the
//! harness's client (which follows no redirects), and the page's POST forms
//! submitted with their hidden fields. It knows forms by their fields, not
//! their paths: the login form has `password`, the consent form `decision`.
//! The introspection (D49) and mock (D53) tests use it to obtain codes.

use std::collections::BTreeMap;

use reqwest::header::{COOKIE, LOCATION, SET_COOKIE};
use reqwest::{Method, StatusCode, Url};

use super::TestServer;

/// A response with its body read.
#[derive(Debug)]
pub(crate) struct Page {
    pub status: StatusCode,
    pub headers: reqwest::header::HeaderMap,
    pub body: String,
}

impl Page {
    pub(crate) fn location(&self) -> Option<String> {
        self.headers
            .get(LOCATION)
            .map(|v| v.to_str().unwrap().to_owned())
    }

    /// Every `Set-Cookie` line of the response.
    pub(crate) fn set_cookies(&self) -> Vec<String> {
        self.headers
            .get_all(SET_COOKIE)
            .iter()
            .map(|v| v.to_str().unwrap().to_owned())
            .collect()
    }

    /// Every POST form of the page.
    pub(crate) fn forms(&self) -> Vec<Form> {
        forms(&self.body)
    }

    /// The first POST form that has an input or button named `field`.
    pub(crate) fn form_with(&self, field: &str) -> Option<Form> {
        forms(&self.body)
            .into_iter()
            .find(|f| f.names.iter().any(|n| n == field))
    }
}

/// A form: its action (a path), its hidden fields, the names of its fields.
#[derive(Clone, Debug)]
pub(crate) struct Form {
    pub action: String,
    pub hidden: Vec<(String, String)>,
    pub names: Vec<String>,
}

fn unescape(s: &str) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some(i) = rest.find('&') {
        out.push_str(&rest[..i]);
        rest = &rest[i..];
        let end = rest.find(';').filter(|e| *e <= 10);
        let decoded = end.and_then(|e| {
            let ent = &rest[1..e];
            match ent {
                "amp" => Some('&'),
                "lt" => Some('<'),
                "gt" => Some('>'),
                "quot" => Some('"'),
                "apos" => Some('\''),
                _ => ent
                    .strip_prefix("#x")
                    .or_else(|| ent.strip_prefix("#X"))
                    .and_then(|h| u32::from_str_radix(h, 16).ok())
                    .or_else(|| ent.strip_prefix('#').and_then(|d| d.parse().ok()))
                    .and_then(char::from_u32),
            }
        });
        match (decoded, end) {
            (Some(c), Some(e)) => {
                out.push(c);
                rest = &rest[e + 1..];
            }
            _ => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

fn attr(tag: &str, name: &str) -> Option<String> {
    for quote in ['"', '\''] {
        let needle = format!(" {name}={quote}");
        if let Some(i) = tag.find(&needle) {
            let start = i + needle.len();
            let end = tag[start..].find(quote)? + start;
            return Some(unescape(&tag[start..end]));
        }
    }
    None
}

/// The POST forms of a page.
fn forms(html: &str) -> Vec<Form> {
    let mut out = Vec::new();
    let mut search = 0;
    while let Some(i) = html[search..].find("<form") {
        let start = search + i;
        let Some(tag_end) = html[start..].find('>').map(|e| e + start) else {
            break;
        };
        let tag = &html[start..=tag_end];
        let end = html[tag_end..]
            .find("</form>")
            .map_or(html.len(), |e| e + tag_end);
        search = tag_end;
        if !attr(tag, "method").is_some_and(|m| m.eq_ignore_ascii_case("post")) {
            continue;
        }
        let action = attr(tag, "action").unwrap_or_default();
        let action = match Url::parse(&action) {
            Ok(u) => u.path().to_owned(),
            Err(_) => action,
        };
        let body = &html[tag_end..end];
        let mut form = Form {
            action,
            hidden: vec![],
            names: vec![],
        };
        for open in ["<input", "<button"] {
            let mut from = 0;
            while let Some(j) = body[from..].find(open) {
                let t0 = from + j;
                let t1 = body[t0..].find('>').map_or(body.len() - 1, |e| e + t0);
                let t = &body[t0..=t1];
                from = t1;
                let Some(name) = attr(t, "name") else {
                    continue;
                };
                form.names.push(name.clone());
                if attr(t, "type").is_some_and(|ty| ty.eq_ignore_ascii_case("hidden")) {
                    form.hidden
                        .push((name, attr(t, "value").unwrap_or_default()));
                }
            }
        }
        out.push(form);
    }
    out
}

/// A browser: the harness's client and a cookie jar.
pub(crate) struct Browser<'a> {
    s: &'a TestServer,
    pub jar: BTreeMap<String, String>,
    /// Every `Set-Cookie` line seen, in order.
    pub seen: Vec<String>,
}

impl<'a> Browser<'a> {
    pub(crate) fn new(s: &'a TestServer) -> Self {
        Self {
            s,
            jar: BTreeMap::new(),
            seen: Vec::new(),
        }
    }

    async fn send(&mut self, rb: reqwest::RequestBuilder) -> Page {
        let rb = if self.jar.is_empty() {
            rb
        } else {
            let c = self
                .jar
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join("; ");
            rb.header(COOKIE, c)
        };
        let res = rb.send().await.unwrap();
        let page = Page {
            status: res.status(),
            headers: res.headers().clone(),
            body: res.text().await.unwrap(),
        };
        for c in page.set_cookies() {
            self.seen.push(c.clone());
            let first = c.split(';').next().unwrap().trim();
            let (k, v) = first.split_once('=').unwrap();
            self.jar.insert(k.to_owned(), v.to_owned());
        }
        page
    }

    /// GET `/oauth/authorize` with these parameters.
    pub(crate) async fn authorize(&mut self, params: &[(&str, &str)]) -> Page {
        let mut u = Url::parse(&self.s.url("/oauth/authorize")).unwrap();
        u.query_pairs_mut().extend_pairs(params);
        let rb = self.s.client.get(u);
        self.send(rb).await
    }

    /// GET a path of the server (or a URL).
    pub(crate) async fn get(&mut self, path: &str) -> Page {
        let url = if path.starts_with("https://") || path.starts_with("http://") {
            path.to_owned()
        } else {
            self.s.url(path)
        };
        let rb = self.s.client.get(url);
        self.send(rb).await
    }

    /// POST a form of `fields` to a path, as a browser would.
    pub(crate) async fn post(&mut self, path: &str, fields: &[(&str, &str)]) -> Page {
        let rb = self.s.request(Method::POST, path).form(fields);
        self.send(rb).await
    }

    /// Submits `form` with its hidden fields and `extra`.
    pub(crate) async fn submit(&mut self, form: &Form, extra: &[(&str, &str)]) -> Page {
        let mut fields = form.hidden.clone();
        fields.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        let rb = self.s.request(Method::POST, &form.action).form(&fields);
        self.send(rb).await
    }
}

/// The authorization-code flow through the pages: authorize, sign in as
/// `email` with `password`, allow. Returns (code, PKCE verifier) from the
/// redirect to `redirect_uri`.
pub(crate) async fn sign_in_for_code(
    b: &mut Browser<'_>,
    client_id: &str,
    redirect_uri: &str,
    scope: &str,
    email: &str,
    password: &str,
) -> (String, String) {
    let verifier = format!(
        "{}-{}",
        gatehouse_domain::random::base62(256),
        gatehouse_domain::random::base62(64)
    );
    let challenge = gatehouse_auth::pkce::challenge_for(&verifier);
    let login = b
        .authorize(&[
            ("response_type", "code"),
            ("client_id", client_id),
            ("redirect_uri", redirect_uri),
            ("scope", scope),
            ("state", "st-1"),
            ("code_challenge", &challenge),
            ("code_challenge_method", "S256"),
        ])
        .await;
    assert_eq!(login.status, StatusCode::OK, "a login page: {}", login.body);
    let form = login.form_with("password").expect("a login form");
    let consent = b
        .submit(&form, &[("email", email), ("password", password)])
        .await;
    let form = consent
        .form_with("decision")
        .unwrap_or_else(|| panic!("D26: a consent page after signing in: {}", consent.body));
    let back = b.submit(&form, &[("decision", "allow")]).await;
    let location = back.location().expect("a redirect to the client");
    assert!(
        location.starts_with(redirect_uri),
        "D26: back to {redirect_uri}: {location}"
    );
    let url = Url::parse(&location).unwrap();
    let code = url
        .query_pairs()
        .find(|(k, _)| k == "code")
        .map(|(_, v)| v.into_owned())
        .unwrap_or_else(|| panic!("a code: {location}"));
    (code, verifier)
}
