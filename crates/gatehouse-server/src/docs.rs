//! Human-readable pages under `/docs` (D35), rendered from auto-escaping
//! templates with no external assets.

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use gatehouse_domain::Scope;
use minijinja::{Environment, context};

use crate::AppState;
use crate::error::{ApiError, ErrorCode};

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
const TEMPLATES: [(&str, &str); 10] = [
    ("base.html", include_str!("../templates/base.html")),
    (
        "docs_index.html",
        include_str!("../templates/docs_index.html"),
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
];

impl Templates {
    pub fn new() -> Self {
        let mut env = Environment::new();
        for (name, src) in TEMPLATES {
            env.add_template(name, src).expect("templates compile");
        }
        Self { env }
    }

    /// Renders a page with a status.
    pub fn page_with_status(
        &self,
        status: StatusCode,
        name: &str,
        ctx: minijinja::Value,
    ) -> Response {
        let mut res = self.page(name, ctx);
        if res.status() == StatusCode::OK {
            *res.status_mut() = status;
        }
        res
    }

    /// Renders a page with the headers every page gets: no framing, a strict
    /// CSP, no caching of pages that may carry personal data or CSRF tokens.
    pub fn page(&self, name: &str, ctx: minijinja::Value) -> Response {
        match self.env.get_template(name).and_then(|t| t.render(ctx)) {
            Ok(html) => {
                let mut res = Html(html).into_response();
                let h = res.headers_mut();
                h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
                h.insert(
                    header::CONTENT_SECURITY_POLICY,
                    // No `form-action`: browsers apply it to the redirect that
                    // follows a form post, which would block the way back to
                    // the client after consent (D26).
                    HeaderValue::from_static("default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'; base-uri 'none'"),
                );
                h.insert(
                    header::REFERRER_POLICY,
                    HeaderValue::from_static("no-referrer"),
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

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/openapi.json", get(openapi))
        .route("/docs", get(index))
        .route("/docs/errors", get(errors))
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

async fn index(State(st): State<AppState>) -> Response {
    let scopes: Vec<_> = Scope::ALL
        .iter()
        .map(|s| context! { name => s.as_str(), description => s.description() })
        .collect();
    let endpoints: Vec<_> = crate::openapi::operations()
        .into_iter()
        .map(|o| {
            context! {
                method => o.method.to_uppercase(), path => o.path, summary => o.summary,
                scope => o.scope.map(|s| s.as_str()).unwrap_or("none"), anchor => o.id,
            }
        })
        .collect();
    st.templates.page(
        "docs_index.html",
        context! { public_url => st.config.public_url.clone(), base_url => st.config.base_url(), scopes, endpoints },
    )
}

async fn errors(State(st): State<AppState>) -> Response {
    let codes: Vec<_> = ErrorCode::ALL
        .iter()
        .map(|c| context! { code => c.as_str(), status => c.status().as_u16(), summary => c.summary() })
        .collect();
    let mut res = st.templates.page(
        "docs_errors.html",
        context! { public_url => st.config.public_url.clone(), codes },
    );
    if res.status() == StatusCode::OK {
        res.headers_mut().insert(
            header::CACHE_CONTROL,
            HeaderValue::from_static("public, max-age=3600"),
        );
    }
    res
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_template_renders_and_escapes() {
        let t = Templates::new();
        for (name, _) in TEMPLATES {
            let ctx = context! { title => "<b>x</b>", message => "<script>", client_name => "A & B", params => vec![("state", "\"><x")] };
            let html = t
                .env
                .get_template(name)
                .and_then(|tpl| tpl.render(ctx))
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            assert!(!html.contains("<script>"), "{name} escapes");
            assert!(!html.contains("\"><x"), "{name} escapes attributes");
        }
    }
}
