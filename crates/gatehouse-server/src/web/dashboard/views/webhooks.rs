//! The Webhooks page (D55, D29 continued: admins only, as the API's
//! `webhooks:*` scopes are): an organization's endpoints, adding one (its
//! secret shown once), enabling, disabling, deleting, a test event, and the
//! latest attempts of each. Everything goes through `/v1/webhook-endpoints`
//! with the person's token, so the API's rules and errors are the page's.

use axum::Router;
use axum::extract::{ConnectInfo, Path, Request, State};
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::Response;
use axum::routing::{get, post};
use minijinja::{Value, context};
use serde_json::{Value as Json, json};

use super::fields::{notice, page_status, safe_id, strings};
use super::{Peer, SecretKind, not_found, secret_page};
use crate::state::AppState;
use crate::web::dashboard::api::Reply;
use crate::web::dashboard::{Signed, read_form, render, signed};

/// The attempts shown on an endpoint's page.
const ATTEMPTS_SHOWN: u32 = 20;

pub(super) fn router() -> Router<AppState> {
    Router::new()
        .route("/dashboard/webhooks", get(endpoints).post(create))
        .route("/dashboard/webhooks/{id}", get(endpoint).post(change))
        .route("/dashboard/webhooks/{id}/test", post(test))
        .route("/dashboard/webhooks/{id}/secret", post(rotate))
        .route(
            "/dashboard/webhooks/{id}/delete",
            get(confirm_delete).post(delete),
        )
}

fn endpoint_view(e: &Json) -> Value {
    context! {
        id => e["id"].as_str().unwrap_or(""),
        url => e["url"].as_str().unwrap_or(""),
        description => e["description"].as_str().unwrap_or(""),
        events => strings(&e["enabled_events"]),
        ordering => e["ordering"].as_str().unwrap_or(""),
        status => e["status"].as_str().unwrap_or(""),
        disabled_reason => e["disabled_reason"].as_str(),
        owner_id => e["owner_id"].as_str(),
        created_at => e["created_at"].as_str().unwrap_or(""),
    }
}

/// The rule of a field of the endpoint form, in words (issue 32: beside
/// the field, never the API's `field`/`issue` text).
fn field_rule(field: &str) -> Option<&'static str> {
    Some(match field {
        "url" => {
            "An https:// address of at most 2,048 characters whose host resolves to public addresses only (private and loopback ones only where the operator allowed them)."
        }
        "description" => "At most 500 characters.",
        "enabled_events" => {
            "At least one event type or pattern that names events Gatehouse sends: * for all, user.*, product.created."
        }
        "ordering" => "Choose none or per object.",
        _ => return None,
    })
}

/// The words of a `done=` notice of this page.
fn webhook_notice(uri: &Uri) -> Option<&'static str> {
    match super::fields::query_value(uri, "done").as_deref() {
        Some("enabled") => Some("The endpoint is enabled; you are its owner now."),
        Some("disabled") => {
            Some("The endpoint is disabled; its pending deliveries were cancelled.")
        }
        Some("removed") => Some("The endpoint was deleted."),
        _ => notice(uri),
    }
}

async fn endpoints(
    State(st): State<AppState>,
    ConnectInfo(peer): Peer,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    let signed = signed_or_return!(st, headers, peer);
    list_page(&st, &headers, &signed, None, webhook_notice(&uri), None).await
}

async fn list_page(
    st: &AppState,
    headers: &HeaderMap,
    signed: &Signed,
    failed: Option<Reply>,
    notice: Option<&str>,
    form: Option<Value>,
) -> Response {
    let reply = signed
        .api(st, Method::GET, "/webhook-endpoints?limit=100", None)
        .await;
    let list_problem = (!reply.ok()).then(|| reply.problem());
    let endpoints: Vec<Value> = reply
        .data()
        .as_array()
        .map(|a| a.iter().map(endpoint_view).collect())
        .unwrap_or_default();
    let status = page_status(failed.as_ref().unwrap_or(&reply));
    let (errors, problem) = super::fields::refusal(failed.as_ref(), field_rule);
    render(
        st,
        headers,
        signed,
        status,
        "dash_webhooks.html",
        "webhooks",
        context! {
            endpoints, problem, list_problem, notice, errors,
            form => form.unwrap_or_else(|| context! { events => "*", ordering => "none" }),
            can_write => signed.can(gatehouse_domain::Scope::WebhooksWrite),
        },
    )
    .await
}

/// The event types of the form's text: separated by spaces, commas or
/// lines.
fn patterns(text: &str) -> Vec<String> {
    text.split(|c: char| c == ',' || c.is_whitespace())
        .filter(|p| !p.is_empty())
        .map(str::to_owned)
        .collect()
}

async fn create(State(st): State<AppState>, ConnectInfo(peer): Peer, req: Request) -> Response {
    let (headers, form) = form_or_return!(st, req);
    let signed = signed_or_return!(st, headers, peer);
    let url = form.value("url").unwrap_or("").trim().to_owned();
    let description = form.value("description").unwrap_or("").trim().to_owned();
    let events = form.value("events").unwrap_or("").to_owned();
    let ordering = form.value("ordering").unwrap_or("none").to_owned();
    let body = json!({
        "url": url, "description": description,
        "enabled_events": patterns(&events), "ordering": ordering,
    });
    let reply = signed
        .api(&st, Method::POST, "/webhook-endpoints", Some(&body))
        .await;
    match (reply.ok(), reply.data()["secret"].as_str()) {
        (true, Some(secret)) => {
            let id = reply.data()["id"].as_str().unwrap_or("").to_owned();
            secret_page(
                &st,
                &headers,
                &signed,
                SecretKind::Webhook,
                &id,
                &url,
                secret,
            )
            .await
        }
        _ => {
            let form = context! { url, description, events, ordering };
            list_page(&st, &headers, &signed, Some(reply), None, Some(form)).await
        }
    }
}

async fn endpoint(
    State(st): State<AppState>,
    ConnectInfo(peer): Peer,
    Path(id): Path<String>,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    let signed = signed_or_return!(st, headers, peer);
    let Some(id) = safe_id(&id) else {
        return not_found(&st);
    };
    endpoint_page(&st, &headers, &signed, id, None, webhook_notice(&uri)).await
}

async fn endpoint_page(
    st: &AppState,
    headers: &HeaderMap,
    signed: &Signed,
    id: &str,
    failed: Option<Reply>,
    notice: Option<&str>,
) -> Response {
    let reply = signed
        .api(st, Method::GET, &format!("/webhook-endpoints/{id}"), None)
        .await;
    if reply.status == StatusCode::NOT_FOUND {
        return not_found(st);
    }
    let attempts_reply = signed
        .api(
            st,
            Method::GET,
            &format!("/webhook-endpoints/{id}/attempts?limit={ATTEMPTS_SHOWN}"),
            None,
        )
        .await;
    let attempts: Vec<Value> = attempts_reply
        .data()
        .as_array()
        .map(|a| {
            a.iter()
                .map(|t| {
                    context! {
                        event => t["event"].as_str().unwrap_or(""),
                        attempt => t["attempt"].as_u64(),
                        trigger => t["trigger"].as_str().unwrap_or(""),
                        status => t["status"].as_str().unwrap_or(""),
                        started_at => t["started_at"].as_str(),
                        duration_ms => t["duration_ms"].as_i64(),
                        response_status => t["response_status"].as_u64(),
                        error => t["error"].as_str(),
                        next_attempt_at => t["next_attempt_at"].as_str(),
                    }
                })
                .collect()
        })
        .unwrap_or_default();
    let list_problem = [&reply, &attempts_reply]
        .into_iter()
        .find(|r| !r.ok())
        .map(|r| r.problem());
    let status = page_status(failed.as_ref().unwrap_or(&reply));
    let problem = failed.map(|r| r.problem());
    render(
        st,
        headers,
        signed,
        status,
        "dash_webhook.html",
        "webhooks",
        context! {
            problem, list_problem, notice, attempts,
            endpoint => reply.ok().then(|| endpoint_view(reply.data())),
            can_write => signed.can(gatehouse_domain::Scope::WebhooksWrite),
        },
    )
    .await
}

/// A form posted on an endpoint's page, read and checked: its CSRF token,
/// the signed-in person, the endpoint's id. The four forms (status, test,
/// secret, delete) share it and [`Posted::call`].
struct Posted {
    headers: HeaderMap,
    form: crate::http::form::Form,
    signed: Signed,
    id: String,
}

impl Posted {
    async fn read(st: &AppState, peer: Peer, id: &str, req: Request) -> Result<Self, Response> {
        let ConnectInfo(peer) = peer;
        let (headers, form) = read_form(st, req).await.map_err(|r| *r)?;
        let signed = signed(st, &headers, peer).await.map_err(|r| *r)?;
        let id = safe_id(id).ok_or_else(|| not_found(st))?.to_owned();
        Ok(Self {
            headers,
            form,
            signed,
            id,
        })
    }

    /// One call to `/v1/webhook-endpoints/{id}{rest}` as the person.
    async fn call(&self, st: &AppState, method: Method, rest: &str, body: Option<Json>) -> Reply {
        let path = format!("/webhook-endpoints/{}{rest}", self.id);
        self.signed.api(st, method, &path, body.as_ref()).await
    }

    /// Back to the endpoint's page with `done=` when the API said yes.
    fn done(&self, st: &AppState, done: &str) -> Response {
        let path = format!("/dashboard/webhooks/{}?done={done}", self.id);
        self.signed.redirect(st, &path)
    }

    /// The endpoint's page with the API's refusal.
    async fn refused(&self, st: &AppState, reply: Reply) -> Response {
        endpoint_page(st, &self.headers, &self.signed, &self.id, Some(reply), None).await
    }
}

macro_rules! posted_or_return {
    ($st:expr, $peer:expr, $id:expr, $req:expr) => {
        match Posted::read(&$st, $peer, &$id, $req).await {
            Ok(p) => p,
            Err(res) => return res,
        }
    };
}

/// Enables or disables an endpoint (`status`), as `PATCH` does.
async fn change(
    State(st): State<AppState>,
    peer: Peer,
    Path(id): Path<String>,
    req: Request,
) -> Response {
    let p = posted_or_return!(st, peer, id, req);
    // As given: a value the API does not know is its 400, shown here.
    let status = p.form.value("status").unwrap_or("").to_owned();
    let reply = p
        .call(&st, Method::PATCH, "", Some(json!({ "status": status })))
        .await;
    if reply.ok() {
        return p.done(
            &st,
            if status == "enabled" {
                "enabled"
            } else {
                "disabled"
            },
        );
    }
    p.refused(&st, reply).await
}

/// Sends the unsequenced `webhook_endpoint.test` event and shows the
/// endpoint with that attempt on top.
async fn test(
    State(st): State<AppState>,
    peer: Peer,
    Path(id): Path<String>,
    req: Request,
) -> Response {
    let p = posted_or_return!(st, peer, id, req);
    let reply = p.call(&st, Method::POST, "/test", Some(json!({}))).await;
    if reply.ok() {
        let delivered = reply.data()["status"].as_str() == Some("succeeded");
        return p.done(&st, if delivered { "tested" } else { "test-failed" });
    }
    p.refused(&st, reply).await
}

/// Rotates the signing secret with the API's default grace (the previous
/// secret signs alongside for 24 hours) and shows the new one once.
async fn rotate(
    State(st): State<AppState>,
    peer: Peer,
    Path(id): Path<String>,
    req: Request,
) -> Response {
    let p = posted_or_return!(st, peer, id, req);
    let reply = p.call(&st, Method::POST, "/secret", Some(json!({}))).await;
    let data = reply.data();
    match (reply.ok(), data["secret"].as_str()) {
        (true, Some(secret)) => {
            let url = data["url"].as_str().unwrap_or("");
            let kind = SecretKind::WebhookRotated;
            secret_page(&st, &p.headers, &p.signed, kind, &p.id, url, secret).await
        }
        _ => p.refused(&st, reply).await,
    }
}

/// Asks before a deletion, as the applications page does.
async fn confirm_delete(
    State(st): State<AppState>,
    ConnectInfo(peer): Peer,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Response {
    let signed = signed_or_return!(st, headers, peer);
    let Some(id) = safe_id(&id) else {
        return not_found(&st);
    };
    let reply = signed
        .api(&st, Method::GET, &format!("/webhook-endpoints/{id}"), None)
        .await;
    if reply.status == StatusCode::NOT_FOUND {
        return not_found(&st);
    }
    render(
        &st,
        &headers,
        &signed,
        page_status(&reply),
        "dash_webhook_delete.html",
        "webhooks",
        context! {
            list_problem => (!reply.ok()).then(|| reply.problem()),
            endpoint => reply.ok().then(|| endpoint_view(reply.data())),
        },
    )
    .await
}

async fn delete(
    State(st): State<AppState>,
    peer: Peer,
    Path(id): Path<String>,
    req: Request,
) -> Response {
    let p = posted_or_return!(st, peer, id, req);
    let reply = p.call(&st, Method::DELETE, "", None).await;
    if reply.ok() {
        return p.signed.redirect(&st, "/dashboard/webhooks?done=removed");
    }
    p.refused(&st, reply).await
}

#[cfg(test)]
mod tests {
    use super::patterns;

    #[test]
    fn event_types_are_split_on_commas_spaces_and_lines() {
        assert_eq!(
            patterns("user.*, product.created\n  consent.revoked,,"),
            ["user.*", "product.created", "consent.revoked"]
        );
        assert!(patterns("  \n ").is_empty());
    }
}
