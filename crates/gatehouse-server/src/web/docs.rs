//! Human-readable pages: the reference documentation under `/docs` (D35,
//! D52) and the templates of the sign-in pages, all from auto-escaping
//! templates compiled into the binary, with no external assets.
//!
//! The reference is rendered once per server, on first use, from the
//! OpenAPI document ([`crate::web::reference`]), and kept in [`AppState`]: a
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
use minijinja::{Value, context};

use crate::http::error::{ApiError, ErrorCode};
use crate::state::AppState;
use crate::web::reference::{Reference, Rendered};
use crate::web::templates::Templates;

/// The documentation's stylesheet and script, served by the binary.
const DOCS_CSS: &str = include_str!("../../assets/docs.css");
const DOCS_JS: &str = include_str!("../../assets/docs.js");
const PAGES_CSS: &str = include_str!("../../assets/pages.css");
const DASHBOARD_CSS: &str = include_str!("../../assets/dashboard.css");
const DASHBOARD_JS: &str = include_str!("../../assets/dashboard.js");
/// D56: the passkey ceremonies of the sign-in and account pages.
const PASSKEYS_JS: &str = include_str!("../../assets/passkeys.js");

/// The CSP of the documentation: its own stylesheet and script only.
pub const DOCS_CSP: &str = "default-src 'none'; style-src 'self'; script-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

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
}

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/", get(home))
        .route("/docs", get(index))
        .route("/docs/", get(trailing_slash))
        .route("/docs/errors", get(errors))
        .route("/docs/search", get(search))
        .route("/docs/assets/{file}", get(asset))
        .route("/docs/{page}", get(page))
        .route("/docs/{page}/", get(page_slash))
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
        "passkeys.js" => (PASSKEYS_JS, "text/javascript; charset=utf-8"),
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
