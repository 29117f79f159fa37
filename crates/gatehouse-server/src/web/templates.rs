//! The pages' templates (the reference, the sign-in and password pages,
//! the dashboard), compiled into the binary with no external assets, and
//! the one way a page is answered ([`Templates::page`]): auto-escaping,
//! the request's id, and the headers every page gets.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use minijinja::{Environment, Value, context};

use crate::http::error::ApiError;
use crate::http::middleware::PageRequest;

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
const TEMPLATES: [(&str, &str); 42] = [
    (
        "account_security.html",
        include_str!("../../templates/account_security.html"),
    ),
    ("base.html", include_str!("../../templates/base.html")),
    (
        "docs_macros.html",
        include_str!("../../templates/docs_macros.html"),
    ),
    (
        "docs_index.html",
        include_str!("../../templates/docs_index.html"),
    ),
    (
        "docs_tag.html",
        include_str!("../../templates/docs_tag.html"),
    ),
    (
        "docs_schemas.html",
        include_str!("../../templates/docs_schemas.html"),
    ),
    (
        "docs_quickstart.html",
        include_str!("../../templates/docs_quickstart.html"),
    ),
    (
        "docs_search.html",
        include_str!("../../templates/docs_search.html"),
    ),
    (
        "docs_errors.html",
        include_str!("../../templates/docs_errors.html"),
    ),
    (
        "page_base.html",
        include_str!("../../templates/page_base.html"),
    ),
    ("login.html", include_str!("../../templates/login.html")),
    (
        "second_step.html",
        include_str!("../../templates/second_step.html"),
    ),
    ("enrol.html", include_str!("../../templates/enrol.html")),
    (
        "account_totp.html",
        include_str!("../../templates/account_totp.html"),
    ),
    (
        "recovery_codes.html",
        include_str!("../../templates/recovery_codes.html"),
    ),
    ("consent.html", include_str!("../../templates/consent.html")),
    ("logout.html", include_str!("../../templates/logout.html")),
    ("message.html", include_str!("../../templates/message.html")),
    (
        "set_password.html",
        include_str!("../../templates/set_password.html"),
    ),
    ("forgot.html", include_str!("../../templates/forgot.html")),
    (
        "pick_org.html",
        include_str!("../../templates/pick_org.html"),
    ),
    (
        "dash_base.html",
        include_str!("../../templates/dash_base.html"),
    ),
    (
        "dash_apps.html",
        include_str!("../../templates/dash_apps.html"),
    ),
    (
        "dash_app.html",
        include_str!("../../templates/dash_app.html"),
    ),
    (
        "dash_app_delete.html",
        include_str!("../../templates/dash_app_delete.html"),
    ),
    (
        "dash_secret.html",
        include_str!("../../templates/dash_secret.html"),
    ),
    (
        "dash_keys.html",
        include_str!("../../templates/dash_keys.html"),
    ),
    (
        "dash_usage.html",
        include_str!("../../templates/dash_usage.html"),
    ),
    (
        "dash_macros.html",
        include_str!("../../templates/dash_macros.html"),
    ),
    (
        "dash_users.html",
        include_str!("../../templates/dash_users.html"),
    ),
    (
        "dash_user.html",
        include_str!("../../templates/dash_user.html"),
    ),
    (
        "dash_user_delete.html",
        include_str!("../../templates/dash_user_delete.html"),
    ),
    (
        "dash_products.html",
        include_str!("../../templates/dash_products.html"),
    ),
    (
        "dash_product.html",
        include_str!("../../templates/dash_product.html"),
    ),
    (
        "dash_product_delete.html",
        include_str!("../../templates/dash_product_delete.html"),
    ),
    (
        "dash_org.html",
        include_str!("../../templates/dash_org.html"),
    ),
    (
        "dash_key_revoke.html",
        include_str!("../../templates/dash_key_revoke.html"),
    ),
    (
        "dash_not_found.html",
        include_str!("../../templates/dash_not_found.html"),
    ),
    (
        "dash_webhooks.html",
        include_str!("../../templates/dash_webhooks.html"),
    ),
    (
        "dash_webhook.html",
        include_str!("../../templates/dash_webhook.html"),
    ),
    (
        "dash_webhook_delete.html",
        include_str!("../../templates/dash_webhook_delete.html"),
    ),
    (
        "dash_activity.html",
        include_str!("../../templates/dash_activity.html"),
    ),
];

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

/// A D4 timestamp as a person reads it, relative to `now`: "just now",
/// "3 minutes ago", "in 30 days"; past a month, the date ("on 2026-10-01").
/// Text that is not a timestamp is shown as it is.
pub(crate) fn ago(text: &str, now: gatehouse_domain::Timestamp) -> String {
    let Some(t) = gatehouse_domain::Timestamp::parse_rfc3339(text) else {
        return text.to_owned();
    };
    let secs = (now.millis() - t.millis()) / 1000;
    let (future, secs) = (secs < 0, secs.abs());
    let amount = |n: i64, unit: &str| format!("{n} {unit}{}", if n == 1 { "" } else { "s" });
    let span = match secs {
        0..45 => return if future { "in a moment" } else { "just now" }.to_owned(),
        45..3_570 => amount(((secs + 30) / 60).max(1), "minute"),
        3_570..86_400 => amount(((secs + 1_800) / 3_600).clamp(1, 23), "hour"),
        86_400..2_592_000 => amount((secs + 43_200) / 86_400, "day"),
        _ => return format!("on {}", text.get(..10).unwrap_or(text)),
    };
    if future {
        format!("in {span}")
    } else {
        format!("{span} ago")
    }
}

impl Templates {
    pub fn new() -> Self {
        let mut env = Environment::new();
        env.add_filter("prose", |s: String| Value::from_safe_string(prose(&s)));
        // Issue 32: "3 minutes ago"; templates put it in a `<time>` whose
        // `datetime` and `title` carry the exact instant.
        // Issue 32: the redirect URIs' rule, shown before a form is sent.
        env.add_global("redirect_rule", gatehouse_domain::RedirectUri::RULE);
        env.add_filter("ago", |s: String| {
            ago(&s, gatehouse_domain::Timestamp::now())
        });
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
        let request_id =
            PageRequest::current().and_then(|p| p.request_id.to_str().ok().map(str::to_owned));
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
                    // The stylesheet and the passkey script (D56) are served
                    // by the binary: no inline style or script.
                    HeaderValue::from_static("default-src 'none'; style-src 'self'; script-src 'self'; frame-ancestors 'none'; base-uri 'none'"),
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

#[cfg(test)]
mod tests {

    #[test]
    fn times_read_as_a_person_says_them() {
        let now = gatehouse_domain::Timestamp::parse_rfc3339("2026-11-29T12:00:00.000Z").unwrap();
        for (at, said) in [
            ("2026-11-29T12:00:00.000Z", "just now"),
            ("2026-11-29T11:59:20.000Z", "just now"),
            ("2026-11-29T11:59:00.000Z", "1 minute ago"),
            ("2026-11-29T11:57:00.000Z", "3 minutes ago"),
            ("2026-11-29T11:00:00.000Z", "1 hour ago"),
            ("2026-11-29T02:00:00.000Z", "10 hours ago"),
            ("2026-11-28T12:00:00.000Z", "1 day ago"),
            ("2026-11-19T12:00:00.000Z", "10 days ago"),
            ("2026-12-09T12:00:00.000Z", "in 10 days"),
            ("2026-12-29T12:00:00.000Z", "on 2026-12-29"),
            ("2026-11-29T12:05:00.000Z", "in 5 minutes"),
            ("2026-10-01T08:00:00.000Z", "on 2026-10-01"),
            ("not a time", "not a time"),
        ] {
            assert_eq!(ago(at, now), said, "{at}");
        }
    }

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
}
