//! Human-readable pages: the reference documentation under `/docs` (D35,
//! D52) and the templates of the sign-in pages, all from auto-escaping
//! templates compiled into the binary, with no external assets.
//!
//! The reference is rendered once per server, on first use, from the
//! OpenAPI document ([`crate::reference`]), and kept in [`AppState`]: a
//! page per tag (`/docs/users`, `/docs/oauth`, …), `/docs/schemas`,
//! `/docs/errors`, `/docs/quickstart`, the overview at `/docs`, and a
//! server-side search at `/docs/search?q=`. Its stylesheet and a small
//! script that filters the sidebar as you type are served from
//! `/docs/assets/`; the pages' CSP allows nothing else (no inline script or
//! style, no other host), and everything works without the script.

use std::collections::HashMap;

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderValue, StatusCode, Uri, header};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::get;
use gatehouse_domain::Scope;
use minijinja::value::Serde;
use minijinja::{Environment, Value, context};

use crate::AppState;
use crate::error::{ApiError, ErrorCode};
use crate::reference::Reference;

/// The compiled templates. `.html` templates escape every value.
pub struct Templates {
    env: Environment<'static>,
}

impl Default for Templates {
    fn default() -> Self {
        Self::new()
    }
}

/// Every template, compiled into the binary (no external assets).
const TEMPLATES: [(&str, &str); 25] = [
    ("base.html", include_str!("../templates/base.html")),
    (
        "docs_macros.html",
        include_str!("../templates/docs_macros.html"),
    ),
    (
        "docs_index.html",
        include_str!("../templates/docs_index.html"),
    ),
    ("docs_tag.html", include_str!("../templates/docs_tag.html")),
    (
        "docs_schemas.html",
        include_str!("../templates/docs_schemas.html"),
    ),
    (
        "docs_quickstart.html",
        include_str!("../templates/docs_quickstart.html"),
    ),
    (
        "docs_search.html",
        include_str!("../templates/docs_search.html"),
    ),
    (
        "docs_errors.html",
        include_str!("../templates/docs_errors.html"),
    ),
    (
        "page_base.html",
        include_str!("../templates/page_base.html"),
    ),
    ("login.html", include_str!("../templates/login.html")),
    ("consent.html", include_str!("../templates/consent.html")),
    ("logout.html", include_str!("../templates/logout.html")),
    ("message.html", include_str!("../templates/message.html")),
    (
        "set_password.html",
        include_str!("../templates/set_password.html"),
    ),
    ("forgot.html", include_str!("../templates/forgot.html")),
    ("pick_org.html", include_str!("../templates/pick_org.html")),
    (
        "dash_base.html",
        include_str!("../templates/dash_base.html"),
    ),
    (
        "dash_apps.html",
        include_str!("../templates/dash_apps.html"),
    ),
    ("dash_app.html", include_str!("../templates/dash_app.html")),
    (
        "dash_app_delete.html",
        include_str!("../templates/dash_app_delete.html"),
    ),
    (
        "dash_secret.html",
        include_str!("../templates/dash_secret.html"),
    ),
    (
        "dash_keys.html",
        include_str!("../templates/dash_keys.html"),
    ),
    (
        "dash_usage.html",
        include_str!("../templates/dash_usage.html"),
    ),
    (
        "dash_team.html",
        include_str!("../templates/dash_team.html"),
    ),
    ("dash_org.html", include_str!("../templates/dash_org.html")),
];

/// The documentation's stylesheet and script, served by the binary.
const DOCS_CSS: &str = include_str!("../assets/docs.css");
const DOCS_JS: &str = include_str!("../assets/docs.js");
const PAGES_CSS: &str = include_str!("../assets/pages.css");
const DASHBOARD_CSS: &str = include_str!("../assets/dashboard.css");
const DASHBOARD_JS: &str = include_str!("../assets/dashboard.js");

/// The CSP of the documentation: its own stylesheet and script only.
pub const DOCS_CSP: &str = "default-src 'none'; style-src 'self'; script-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// HTML-escapes `s`.
fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 16);
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#x27;"),
            c => out.push(c),
        }
    }
    out
}

/// Prose with `inline code`: escaped first, then each backtick span (on the
/// escaped text, so nothing inside can become markup) made a `<code>`
/// element. An unpaired backtick stays as it is.
pub fn prose(s: &str) -> String {
    let escaped = escape(s);
    let parts: Vec<&str> = escaped.split('`').collect();
    if parts.len() < 3 {
        return escaped;
    }
    let mut out = String::with_capacity(escaped.len() + 32);
    let pairs = (parts.len() - 1) / 2;
    for (i, part) in parts.iter().enumerate() {
        if i > 0 {
            let closing = i % 2 == 0;
            if i <= pairs * 2 {
                out.push_str(if closing { "</code>" } else { "<code>" });
            } else {
                out.push('`');
            }
        }
        out.push_str(part);
    }
    out
}

impl Templates {
    pub fn new() -> Self {
        let mut env = Environment::new();
        env.add_filter("prose", |s: String| Value::from_safe_string(prose(&s)));
        for (name, src) in TEMPLATES {
            env.add_template(name, src).expect("templates compile");
        }
        Self { env }
    }

    /// A template rendered to a string.
    pub fn render(&self, name: &str, ctx: Value) -> Result<String, minijinja::Error> {
        self.env.get_template(name).and_then(|t| t.render(ctx))
    }

    /// Renders a page with a status.
    pub fn page_with_status(&self, status: StatusCode, name: &str, ctx: Value) -> Response {
        let mut res = self.page(name, ctx);
        if res.status() == StatusCode::OK {
            *res.status_mut() = status;
        }
        res
    }

    /// Renders a page with the headers every page gets: no framing, a strict
    /// CSP, no caching of pages that may carry personal data or CSRF tokens.
    /// Every page may show the request's id (`request_id`, the response's
    /// `X-Request-ID`), error pages do.
    pub fn page(&self, name: &str, ctx: Value) -> Response {
        let request_id = crate::middleware::PageRequest::current()
            .and_then(|p| p.request_id.to_str().ok().map(str::to_owned));
        let ctx = context! { request_id => request_id, ..ctx };
        match self.render(name, ctx) {
            Ok(html) => {
                let mut res = Html(html).into_response();
                let h = res.headers_mut();
                h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
                h.insert(
                    header::CONTENT_SECURITY_POLICY,
                    // No `form-action`: browsers apply it to the redirect that
                    // follows a form post, which would block the way back to
                    // the client after consent (D26).
                    // The stylesheet is served by the binary: no inline style.
                    HeaderValue::from_static("default-src 'none'; style-src 'self'; frame-ancestors 'none'; base-uri 'none'"),
                );
                // `same-origin`: nothing is ever sent to another site, and a
                // page of ours knows which of our pages led to it (the way
                // back of error pages and of "forgot password").
                h.insert(
                    header::REFERRER_POLICY,
                    HeaderValue::from_static("same-origin"),
                );
                h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
                res
            }
            Err(e) => {
                tracing::error!(template = name, error = %e, "template failed");
                ApiError::internal().into_response()
            }
        }
    }
}

/// The reference pages, rendered once.
pub struct Rendered {
    /// By path: `/docs`, `/docs/users`, `/docs/errors`, …
    pages: HashMap<String, String>,
    reference: Reference,
}

impl Rendered {
    pub fn build(templates: &Templates, public_url: &str) -> Result<Self, minijinja::Error> {
        let reference = Reference::build(public_url);
        let scopes: Vec<_> = Scope::ALL
            .iter()
            .map(|s| context! { name => s.as_str(), description => s.description() })
            .collect();
        let common = context! {
            public_url => public_url, base_url => &reference.base_url,
            tags => Value::from(Serde(&reference.tags)), scopes,
        };
        let mut pages = HashMap::new();
        let mut add = |path: &str, template: &str, extra: Value| -> Result<(), minijinja::Error> {
            let html = templates.render(
                template,
                context! { current => path, ..minijinja::value::merge_maps([extra, common.clone()]) },
            )?;
            pages.insert(path.to_owned(), html);
            Ok(())
        };
        add("/docs", "docs_index.html", context! {})?;
        add("/docs/quickstart", "docs_quickstart.html", context! {})?;
        add(
            "/docs/schemas",
            "docs_schemas.html",
            context! { schemas => Value::from(Serde(&reference.schemas)) },
        )?;
        add(
            "/docs/errors",
            "docs_errors.html",
            context! {
                codes => Value::from(Serde(&reference.api_codes)),
                oauth_codes => Value::from(Serde(&reference.oauth_codes)),
            },
        )?;
        for tag in &reference.tags {
            add(
                &tag.href,
                "docs_tag.html",
                context! { tag => Value::from(Serde(tag)) },
            )?;
        }
        Ok(Self { pages, reference })
    }

    /// The rendered page at `path`.
    pub fn page(&self, path: &str) -> Option<&str> {
        self.pages.get(path).map(String::as_str)
    }
}

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/openapi.json", get(openapi))
        .route("/", get(home))
        .route("/docs", get(index))
        .route("/docs/", get(trailing_slash))
        .route("/docs/errors", get(errors))
        .route("/docs/search", get(search))
        .route("/docs/assets/{file}", get(asset))
        .route("/docs/{page}", get(page))
        .route("/docs/{page}/", get(page_slash))
}

/// D35: the OpenAPI document, no token needed.
#[utoipa::path(
    get,
    path = "/v1/openapi.json",
    operation_id = "openapi",
    tag = "Discovery",
    summary = "This document",
    responses(
        (status = 200, description = "OpenAPI 3.1", body = crate::openapi::AnyObject),
    ),
)]
pub(crate) async fn openapi(State(st): State<AppState>) -> Response {
    axum::Json(crate::openapi::document(&st.config.public_url)).into_response()
}

/// D52: `/` is the documentation (302: the home page may change one day).
async fn home() -> Response {
    let mut res = StatusCode::FOUND.into_response();
    res.headers_mut()
        .insert(header::LOCATION, HeaderValue::from_static("/docs"));
    res
}

/// D52: `/docs/` is forgiven, permanently.
async fn trailing_slash() -> Response {
    Redirect::permanent("/docs").into_response()
}

/// The reference, rendered on first use.
fn rendered(st: &AppState) -> Option<&Rendered> {
    if let Some(r) = st.docs.get() {
        return Some(r);
    }
    match Rendered::build(&st.templates, &st.config.public_url) {
        Ok(r) => Some(st.docs.get_or_init(|| r)),
        Err(e) => {
            tracing::error!(error = %e, "the reference documentation failed to render");
            None
        }
    }
}

/// A documentation page with its headers: the strict CSP of the
/// documentation, no framing, cacheable (no personal data).
fn docs_response(html: String) -> Response {
    let mut res = Html(html).into_response();
    let h = res.headers_mut();
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(DOCS_CSP),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("public, max-age=300"),
    );
    res
}

fn serve_page(st: &AppState, path: &str) -> Response {
    match rendered(st) {
        Some(r) => match r.page(path) {
            Some(html) => docs_response(html.to_owned()),
            None => ApiError::new(
                ErrorCode::ResourceNotFound,
                format!("no resource at {path}"),
            )
            .into_response(),
        },
        None => ApiError::internal().into_response(),
    }
}

async fn index(State(st): State<AppState>) -> Response {
    serve_page(&st, "/docs")
}

async fn errors(State(st): State<AppState>) -> Response {
    serve_page(&st, "/docs/errors")
}

async fn page(State(st): State<AppState>, Path(page): Path<String>) -> Response {
    serve_page(&st, &format!("/docs/{page}"))
}

/// A trailing slash is forgiven on every page (D52 names `/docs/`).
async fn page_slash(State(st): State<AppState>, Path(page): Path<String>) -> Response {
    let target = format!("/docs/{page}");
    match (rendered(&st), HeaderValue::from_str(&target)) {
        (Some(r), Ok(location)) if r.page(&target).is_some() => {
            let mut res = StatusCode::PERMANENT_REDIRECT.into_response();
            res.headers_mut().insert(header::LOCATION, location);
            res
        }
        _ => ApiError::new(
            ErrorCode::ResourceNotFound,
            format!("no resource at {target}/"),
        )
        .into_response(),
    }
}

/// D52: the search, server-side (the form works without script). A query
/// that cannot be read is an empty one.
async fn search(State(st): State<AppState>, uri: Uri) -> Response {
    let Some(r) = rendered(&st) else {
        return ApiError::internal().into_response();
    };
    let pairs: Vec<(String, String)> =
        serde_urlencoded::from_str(uri.query().unwrap_or("")).unwrap_or_default();
    let q: String = pairs
        .into_iter()
        .find(|(k, _)| k == "q")
        .map(|(_, v)| v)
        .unwrap_or_default()
        .chars()
        .filter(|c| !c.is_control())
        .take(200)
        .collect();
    let results = r.reference.search(&q);
    let ctx = context! {
        current => "/docs/search", q => q.trim(), results => Value::from(Serde(&results)),
        public_url => &st.config.public_url, tags => Value::from(Serde(&r.reference.tags)),
    };
    match st.templates.render("docs_search.html", ctx) {
        Ok(html) => docs_response(html),
        Err(e) => {
            tracing::error!(error = %e, "the search page failed to render");
            ApiError::internal().into_response()
        }
    }
}

async fn asset(Path(file): Path<String>) -> Response {
    let (body, content_type) = match file.as_str() {
        "docs.css" => (DOCS_CSS, "text/css; charset=utf-8"),
        "docs.js" => (DOCS_JS, "text/javascript; charset=utf-8"),
        "pages.css" => (PAGES_CSS, "text/css; charset=utf-8"),
        "dashboard.css" => (DASHBOARD_CSS, "text/css; charset=utf-8"),
        "dashboard.js" => (DASHBOARD_JS, "text/javascript; charset=utf-8"),
        _ => {
            return ApiError::new(
                ErrorCode::ResourceNotFound,
                format!("no resource at /docs/assets/{file}"),
            )
            .into_response();
        }
    };
    let mut res = body.into_response();
    let h = res.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    h.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("public, max-age=3600"),
    );
    res
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_template_renders_and_escapes() {
        let t = Templates::new();
        for (name, _) in TEMPLATES {
            let ctx = context! { title => "<b>x</b>", message => "<script>", client_name => "A & B", params => vec![("state", "\"><x")], q => "<script>", results => vec![context! { kind => "<script>", title => "<script>", href => "\"><x", detail => "`<script>`" }], tag => context! { name => "<script>", intro => "`<script>`", ops => Vec::<Value>::new() } };
            let html = t
                .env
                .get_template(name)
                .and_then(|tpl| tpl.render(ctx))
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            assert!(!html.contains("<script>"), "{name} escapes");
            assert!(!html.contains("\"><x"), "{name} escapes attributes");
        }
    }

    #[test]
    fn prose_escapes_then_marks_code() {
        assert_eq!(
            prose("Needs the `users:read` scope"),
            "Needs the <code>users:read</code> scope"
        );
        assert_eq!(
            prose("`<script>` & `a`"),
            "<code>&lt;script&gt;</code> &amp; <code>a</code>"
        );
        assert_eq!(prose("one ` only"), "one ` only");
        assert_eq!(prose("`a` and `b"), "<code>a</code> and `b");
    }

    #[test]
    fn the_reference_renders_without_backticks_in_prose() {
        let t = Templates::new();
        let r = Rendered::build(&t, "https://localhost:8443").expect("renders");
        for (path, html) in &r.pages {
            let outside_pre: String = html
                .split("<pre")
                .enumerate()
                .map(|(i, part)| {
                    if i == 0 {
                        part
                    } else {
                        part.split_once("</pre>").map_or("", |(_, rest)| rest)
                    }
                })
                .collect();
            assert!(
                !outside_pre.contains('`'),
                "{path} shows a literal backtick"
            );
            assert!(!html.contains("<script>"), "{path}: no inline script");
            assert!(!html.contains("style="), "{path}: no inline style");
        }
    }
}
