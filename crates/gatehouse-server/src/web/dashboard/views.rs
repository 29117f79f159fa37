//! The dashboard's pages (D48): applications, API keys, usage, users, products,
//! organization and (admins) webhooks and activity. Each handler reads the
//! signed-in person, calls the management API in process (`super::api`)
//! and renders the JSON it gets back; a form's POST answers with a 303 to
//! the page (or, when it shows a secret, with the page itself, `no-store`).

use std::net::SocketAddr;

use axum::Router;
use axum::extract::{ConnectInfo, Path, Request, State};
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::Response;
use axum::routing::{get, post};
use gatehouse_domain::{Scope, ScopeSet};
use minijinja::{Value, context};
use serde_json::{Value as Json, json};

mod fields;

use self::fields::{
    form_errors, lines, notice, page_status, problem_ctx, query_value, refusal, safe_id,
    scope_choices, strings, ticked_scopes, union,
};
use super::api::Reply;
use super::{Signed, chart, message, read_form, render, signed};
use crate::state::AppState;

pub(super) fn router() -> Router<AppState> {
    Router::new()
        .route("/dashboard/applications", get(apps).post(create_app))
        .route("/dashboard/applications/new", get(new_app))
        .route("/dashboard/applications/{id}", get(app).post(update_app))
        .route("/dashboard/applications/{id}/secret", post(rotate_secret))
        .route(
            "/dashboard/applications/{id}/delete",
            get(confirm_delete).post(delete_app),
        )
        .route("/dashboard/api-keys", get(keys).post(create_key))
        .route(
            "/dashboard/api-keys/{id}/revoke",
            get(confirm_revoke_key).post(revoke_key),
        )
        .route("/dashboard/usage", get(usage))
        .route("/dashboard/organization", get(organization))
        // Issue 32: an unknown dashboard address gets an HTML page with the
        // navigation (the routes above, and those merged below, win).
        .route("/dashboard/{*rest}", get(unknown_page))
        .merge(users::router())
        .merge(products::router())
        .merge(webhooks::router())
        .merge(activity::router())
        .merge(account::router())
}

type Peer = ConnectInfo<SocketAddr>;

/// The scopes' rule on the application and API-key forms, in words.
const SCOPES_RULE: &str = "Choose at least one scope, among those your role may grant (the OpenID Connect ones need no role).";

/// The rule of a field of the application and API-key forms, in words
/// (issue 32: beside the field, never the API's `field`/`issue` text).
fn credential_field_rule(field: &str) -> Option<&'static str> {
    Some(match field {
        "name" => gatehouse_domain::Name::RULE,
        "redirect_uris" | "post_logout_redirect_uris" => gatehouse_domain::RedirectUri::RULE,
        "scopes" => SCOPES_RULE,
        "type" => "Choose confidential or public.",
        "expires_at" => "Choose one of the expiries offered.",
        "grace_seconds" => "Choose one of the periods offered.",
        _ => return None,
    })
}

/// A dashboard address that names no page: 404 in HTML, with the
/// navigation for a signed-in person, else the plain message page (never
/// the sign-in: there is nothing to come back to).
async fn unknown_page(
    State(st): State<AppState>,
    ConnectInfo(peer): Peer,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    match signed(&st, &headers, peer).await {
        Ok(signed) => {
            render(
                &st,
                &headers,
                &signed,
                StatusCode::NOT_FOUND,
                "dash_not_found.html",
                "",
                context! { path => uri.path() },
            )
            .await
        }
        Err(_) => message(
            &st,
            StatusCode::NOT_FOUND,
            "Not found",
            "There is no dashboard page at this address. The dashboard starts at /dashboard.",
        ),
    }
}

fn not_found(st: &AppState) -> Response {
    message(
        st,
        StatusCode::NOT_FOUND,
        "Not found",
        "There is nothing at this address in your organization.",
    )
}

/// The scopes an application may be registered with here: those the
/// person holds, and the OpenID Connect ones (D49: anyone may list them).
fn app_scopes(signed: &Signed) -> ScopeSet {
    union(ScopeSet::identity(), signed.grant.scopes())
}

macro_rules! signed_or_return {
    ($st:expr, $headers:expr, $peer:expr) => {
        match signed(&$st, &$headers, $peer).await {
            Ok(s) => s,
            Err(res) => return *res,
        }
    };
}

macro_rules! form_or_return {
    ($st:expr, $req:expr) => {
        match read_form(&$st, $req).await {
            Ok(f) => f,
            Err(res) => return *res,
        }
    };
}

/// A form posted to an item's address: the headers, the form (its CSRF
/// token checked), the person, and the id from the path when it has an
/// id's shape (else the 404 page). `safe_id` and `not_found` must be in
/// scope.
macro_rules! posted_or_return {
    ($st:expr, $req:expr, $peer:expr, $id:expr) => {{
        let (headers, form) = form_or_return!($st, $req);
        let signed = signed_or_return!($st, headers, $peer);
        let Some(id) = safe_id(&$id) else {
            return not_found(&$st);
        };
        (headers, form, signed, id)
    }};
}

mod account;
mod activity;
mod listing;
mod products;
mod users;
mod webhooks;

// ---- Applications ------------------------------------------------------

async fn apps(
    State(st): State<AppState>,
    ConnectInfo(peer): Peer,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    let signed = signed_or_return!(st, headers, peer);
    let reply = signed
        .api(&st, Method::GET, "/applications?limit=100", None)
        .await;
    let problem = (!reply.ok()).then(|| problem_ctx(&reply));
    let apps: Vec<Value> = reply
        .data()
        .as_array()
        .map(|a| a.iter().map(app_view).collect())
        .unwrap_or_default();
    render(
        &st,
        &headers,
        &signed,
        page_status(&reply),
        "dash_apps.html",
        "applications",
        context! {
            apps, problem, notice => notice(&uri),
            total => reply.body["meta"]["total"].as_u64(),
        },
    )
    .await
}

fn app_view(a: &Json) -> Value {
    context! {
        id => a["id"].as_str().unwrap_or(""),
        name => a["name"].as_str().unwrap_or(""),
        kind => a["type"].as_str().unwrap_or(""),
        redirect_uris => strings(&a["redirect_uris"]),
        post_logout_redirect_uris => strings(&a["post_logout_redirect_uris"]),
        scopes => strings(&a["scopes"]),
        admin_approved => a["admin_approved"].as_bool().unwrap_or(false),
        suspended_reason => a["suspended_reason"].as_str(),
        created_at => a["created_at"].as_str().unwrap_or(""),
        updated_at => a["updated_at"].as_str().unwrap_or(""),
    }
}

async fn new_app(
    State(st): State<AppState>,
    ConnectInfo(peer): Peer,
    headers: HeaderMap,
) -> Response {
    let signed = signed_or_return!(st, headers, peer);
    let scopes = scope_choices(app_scopes(&signed), &[]);
    render(
        &st,
        &headers,
        &signed,
        StatusCode::OK,
        "dash_app.html",
        "applications",
        context! { creating => true, scopes, kind => "confidential" },
    )
    .await
}

async fn create_app(State(st): State<AppState>, ConnectInfo(peer): Peer, req: Request) -> Response {
    let (headers, form) = form_or_return!(st, req);
    let signed = signed_or_return!(st, headers, peer);
    let name = form.value("name").unwrap_or("").trim().to_owned();
    let kind = form.value("type").unwrap_or("confidential").to_owned();
    let redirect_uris = lines(form.value("redirect_uris").unwrap_or(""));
    // Issue 32: post-logout redirect URIs at registration too.
    let logout_uris = lines(form.value("post_logout_redirect_uris").unwrap_or(""));
    let scopes = ticked_scopes(&form);
    let body = json!({
        "name": name, "type": kind, "redirect_uris": redirect_uris, "scopes": scopes,
        "post_logout_redirect_uris": logout_uris,
    });
    let reply = signed
        .api(&st, Method::POST, "/applications", Some(&body))
        .await;
    if !reply.ok() {
        let choices = scope_choices(app_scopes(&signed), &scopes);
        let (errors, problem) = form_errors(&reply, credential_field_rule);
        return render(
            &st,
            &headers,
            &signed,
            page_status(&reply),
            "dash_app.html",
            "applications",
            context! {
                creating => true, scopes => choices, problem, errors,
                app => context! {
                    name => name, redirect_uris => redirect_uris,
                    post_logout_redirect_uris => logout_uris,
                },
                kind => kind,
            },
        )
        .await;
    }
    let id = reply.data()["id"].as_str().unwrap_or("").to_owned();
    match reply.data()["client_secret"].as_str() {
        Some(secret) => {
            secret_page(
                &st,
                &headers,
                &signed,
                SecretKind::NewApplication,
                &id,
                reply.data()["name"].as_str().unwrap_or(""),
                secret,
            )
            .await
        }
        None => signed.redirect(&st, &format!("/dashboard/applications/{id}?done=created")),
    }
}

enum SecretKind {
    NewApplication,
    Rotated,
    ApiKey,
    Webhook,
    WebhookRotated,
}

/// A page that shows a secret once (`no-store`, as every dashboard page).
async fn secret_page(
    st: &AppState,
    headers: &HeaderMap,
    signed: &Signed,
    kind: SecretKind,
    id: &str,
    name: &str,
    secret: &str,
) -> Response {
    let (title, label, back, section) = match kind {
        SecretKind::NewApplication => (
            "Application registered",
            "Client secret",
            format!("/dashboard/applications/{id}"),
            "applications",
        ),
        SecretKind::Rotated => (
            "New client secret",
            "Client secret",
            format!("/dashboard/applications/{id}"),
            "applications",
        ),
        SecretKind::ApiKey => (
            "API key created",
            "API key",
            "/dashboard/api-keys".to_owned(),
            "api-keys",
        ),
        SecretKind::Webhook => (
            "Webhook endpoint added",
            "Signing secret",
            format!("/dashboard/webhooks/{id}"),
            "webhooks",
        ),
        SecretKind::WebhookRotated => (
            "New signing secret",
            "Signing secret",
            format!("/dashboard/webhooks/{id}"),
            "webhooks",
        ),
    };
    render(
        st,
        headers,
        signed,
        StatusCode::CREATED,
        "dash_secret.html",
        section,
        context! {
            title, label, back, id, name, secret,
            client_id => matches!(kind, SecretKind::NewApplication | SecretKind::Rotated).then_some(id),
            signing => matches!(kind, SecretKind::Webhook | SecretKind::WebhookRotated),
        },
    )
    .await
}

async fn app(
    State(st): State<AppState>,
    ConnectInfo(peer): Peer,
    headers: HeaderMap,
    Path(id): Path<String>,
    uri: Uri,
) -> Response {
    let signed = signed_or_return!(st, headers, peer);
    let Some(id) = safe_id(&id) else {
        return not_found(&st);
    };
    let reply = signed
        .api(&st, Method::GET, &format!("/applications/{id}"), None)
        .await;
    app_page(&st, &headers, &signed, &reply, None, notice(&uri), None).await
}

async fn app_page(
    st: &AppState,
    headers: &HeaderMap,
    signed: &Signed,
    reply: &Reply,
    failed: Option<Reply>,
    notice: Option<&str>,
    typed: Option<Value>,
) -> Response {
    if !reply.ok() {
        return render(
            st,
            headers,
            signed,
            page_status(reply),
            "dash_app.html",
            "applications",
            context! { missing => true, problem => problem_ctx(reply) },
        )
        .await;
    }
    let a = reply.data();
    let checked = strings(&a["scopes"]);
    let offered = union(
        app_scopes(signed),
        checked
            .iter()
            .filter_map(|s| Scope::parse(s))
            .collect::<ScopeSet>(),
    );
    let status = failed.as_ref().map_or(StatusCode::OK, page_status);
    // D48 (continued), issue 32: a refused field (the grace period too) is
    // said next to it, in words, with what was typed.
    let (errors, problem) = refusal(failed.as_ref(), credential_field_rule);
    let grace_issue = errors.get("grace_seconds").copied();
    let app = match typed {
        Some(t) => context! { ..t, ..app_view(a) },
        None => app_view(a),
    };
    render(
        st,
        headers,
        signed,
        status,
        "dash_app.html",
        "applications",
        context! {
            app, scopes => scope_choices(offered, &checked),
            kind => a["type"].as_str().unwrap_or(""), problem, notice, grace_issue, errors,
            // Issue 32: the issuer and endpoints, from the discovery
            // document itself (one place says what they are).
            provider => Value::from(minijinja::value::Serde(crate::api::wellknown::document(st))),
        },
    )
    .await
}

async fn update_app(
    State(st): State<AppState>,
    ConnectInfo(peer): Peer,
    Path(id): Path<String>,
    req: Request,
) -> Response {
    let (headers, form, signed, id) = posted_or_return!(st, req, peer, id);
    let path = format!("/applications/{id}");
    let current = signed.api(&st, Method::GET, &path, None).await;
    if !current.ok() {
        return app_page(&st, &headers, &signed, &current, None, None, None).await;
    }
    // Only what changed is sent: D46 asks more of a change of redirect
    // URIs or scopes than of a new name.
    let mut patch = serde_json::Map::new();
    let name = form.value("name").unwrap_or("").trim();
    if current.data()["name"].as_str() != Some(name) {
        patch.insert("name".into(), json!(name));
    }
    let uris = lines(form.value("redirect_uris").unwrap_or(""));
    if strings(&current.data()["redirect_uris"]) != uris {
        patch.insert("redirect_uris".into(), json!(uris));
    }
    let logout_uris = lines(form.value("post_logout_redirect_uris").unwrap_or(""));
    if strings(&current.data()["post_logout_redirect_uris"]) != logout_uris {
        patch.insert("post_logout_redirect_uris".into(), json!(logout_uris));
    }
    let mut scopes = ticked_scopes(&form);
    let mut before = strings(&current.data()["scopes"]);
    scopes.sort();
    before.sort();
    if before != scopes {
        patch.insert("scopes".into(), json!(scopes));
    }
    if patch.is_empty() {
        return signed.redirect(&st, &format!("/dashboard/applications/{id}?done=updated"));
    }
    let reply = signed
        .api(&st, Method::PATCH, &path, Some(&Json::Object(patch)))
        .await;
    if reply.ok() {
        return signed.redirect(&st, &format!("/dashboard/applications/{id}?done=updated"));
    }
    let typed = context! {
        name => name, redirect_uris => uris, post_logout_redirect_uris => logout_uris,
    };
    app_page(
        &st,
        &headers,
        &signed,
        &current,
        Some(reply),
        None,
        Some(typed),
    )
    .await
}

async fn rotate_secret(
    State(st): State<AppState>,
    ConnectInfo(peer): Peer,
    Path(id): Path<String>,
    req: Request,
) -> Response {
    let (headers, form, signed, id) = posted_or_return!(st, req, peer, id);
    // D48 (continued): a grace the dashboard cannot read is never read as
    // none. It goes to the API as it was typed, which refuses it (400 on
    // `grace_seconds`), so nothing is rotated and the page says why.
    let body = form.get("grace_seconds").map(|g| match g.parse::<u64>() {
        Ok(n) => json!({ "grace_seconds": n }),
        Err(_) => json!({ "grace_seconds": g }),
    });
    let reply = signed
        .api(
            &st,
            Method::POST,
            &format!("/applications/{id}/secret"),
            body.as_ref(),
        )
        .await;
    match (reply.ok(), reply.data()["client_secret"].as_str()) {
        (true, Some(secret)) => {
            let current = signed
                .api(&st, Method::GET, &format!("/applications/{id}"), None)
                .await;
            let name = current.data()["name"].as_str().unwrap_or("").to_owned();
            secret_page(
                &st,
                &headers,
                &signed,
                SecretKind::Rotated,
                id,
                &name,
                secret,
            )
            .await
        }
        _ => {
            let current = signed
                .api(&st, Method::GET, &format!("/applications/{id}"), None)
                .await;
            app_page(&st, &headers, &signed, &current, Some(reply), None, None).await
        }
    }
}

async fn confirm_delete(
    State(st): State<AppState>,
    ConnectInfo(peer): Peer,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Response {
    let signed = signed_or_return!(st, headers, peer);
    let Some(id) = safe_id(&id) else {
        return not_found(&st);
    };
    let reply = signed
        .api(&st, Method::GET, &format!("/applications/{id}"), None)
        .await;
    let problem = (!reply.ok()).then(|| reply.problem());
    render(
        &st,
        &headers,
        &signed,
        page_status(&reply),
        "dash_app_delete.html",
        "applications",
        context! { app => app_view(reply.data()), problem },
    )
    .await
}

async fn delete_app(
    State(st): State<AppState>,
    ConnectInfo(peer): Peer,
    Path(id): Path<String>,
    req: Request,
) -> Response {
    let (headers, _form, signed, id) = posted_or_return!(st, req, peer, id);
    let reply = signed
        .api(&st, Method::DELETE, &format!("/applications/{id}"), None)
        .await;
    if reply.ok() {
        return signed.redirect(&st, "/dashboard/applications?done=deleted");
    }
    render(
        &st,
        &headers,
        &signed,
        page_status(&reply),
        "dash_app_delete.html",
        "applications",
        context! { app => context! { id => id }, problem => reply.problem() },
    )
    .await
}

// ---- API keys ----------------------------------------------------------

async fn keys(
    State(st): State<AppState>,
    ConnectInfo(peer): Peer,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    let signed = signed_or_return!(st, headers, peer);
    keys_page(&st, &headers, &signed, None, notice(&uri), &[], "").await
}

async fn keys_page(
    st: &AppState,
    headers: &HeaderMap,
    signed: &Signed,
    failed: Option<Reply>,
    notice: Option<&str>,
    checked: &[String],
    name: &str,
) -> Response {
    let reply = signed
        .api(st, Method::GET, "/api-keys?limit=100", None)
        .await;
    let list_problem = (!reply.ok()).then(|| reply.problem());
    let keys: Vec<Value> = reply
        .data()
        .as_array()
        .map(|a| {
            a.iter()
                .map(|k| {
                    context! {
                        id => k["id"].as_str().unwrap_or(""),
                        name => k["name"].as_str().unwrap_or(""),
                        prefix => k["prefix"].as_str().unwrap_or(""),
                        scopes => strings(&k["scopes"]),
                        created_at => k["created_at"].as_str().unwrap_or(""),
                        last_used_at => k["last_used_at"].as_str(),
                        expires_at => k["expires_at"].as_str(),
                        revoked_at => k["revoked_at"].as_str(),
                    }
                })
                .collect()
        })
        .unwrap_or_default();
    let status = page_status(failed.as_ref().unwrap_or(&reply));
    let (errors, problem) = refusal(failed.as_ref(), credential_field_rule);
    render(
        st,
        headers,
        signed,
        status,
        "dash_keys.html",
        "api-keys",
        context! {
            keys, problem, list_problem, notice, name, errors,
            scopes => scope_choices(signed.grant.scopes(), checked),
        },
    )
    .await
}

async fn create_key(State(st): State<AppState>, ConnectInfo(peer): Peer, req: Request) -> Response {
    let (headers, form) = form_or_return!(st, req);
    let signed = signed_or_return!(st, headers, peer);
    let name = form.value("name").unwrap_or("").trim().to_owned();
    let scopes = ticked_scopes(&form);
    let mut body = json!({ "name": name, "scopes": scopes });
    // Issue 32: an optional expiry, chosen as a number of days from now
    // (the form's choices); the API takes the instant.
    if let Some(days) = form
        .value("expires_in")
        .and_then(|d| d.parse::<i64>().ok())
        .filter(|d| KEY_EXPIRY_DAYS.contains(d))
    {
        let at = gatehouse_domain::Timestamp::now().plus_seconds(days * 86_400);
        body["expires_at"] = json!(at.to_string());
    }
    let reply = signed
        .api(&st, Method::POST, "/api-keys", Some(&body))
        .await;
    match (reply.ok(), reply.data()["key"].as_str()) {
        (true, Some(key)) => {
            let id = reply.data()["id"].as_str().unwrap_or("").to_owned();
            secret_page(&st, &headers, &signed, SecretKind::ApiKey, &id, &name, key).await
        }
        _ => keys_page(&st, &headers, &signed, Some(reply), None, &scopes, &name).await,
    }
}

/// The expiries the API-key form offers, in days from now.
const KEY_EXPIRY_DAYS: [i64; 4] = [7, 30, 90, 365];

/// Issue 32: revoking a key asks first (no script needed: a page of its own).
async fn confirm_revoke_key(
    State(st): State<AppState>,
    ConnectInfo(peer): Peer,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Response {
    let signed = signed_or_return!(st, headers, peer);
    let Some(id) = safe_id(&id) else {
        return not_found(&st);
    };
    let reply = signed
        .api(&st, Method::GET, &format!("/api-keys/{id}"), None)
        .await;
    let problem = (!reply.ok()).then(|| reply.problem());
    let k = reply.data();
    render(
        &st,
        &headers,
        &signed,
        page_status(&reply),
        "dash_key_revoke.html",
        "api-keys",
        context! {
            problem,
            key => reply.ok().then(|| context! {
                id => k["id"].as_str().unwrap_or(""),
                name => k["name"].as_str().unwrap_or(""),
                prefix => k["prefix"].as_str().unwrap_or(""),
            }),
        },
    )
    .await
}

async fn revoke_key(
    State(st): State<AppState>,
    ConnectInfo(peer): Peer,
    Path(id): Path<String>,
    req: Request,
) -> Response {
    let (headers, _form, signed, id) = posted_or_return!(st, req, peer, id);
    let reply = signed
        .api(&st, Method::DELETE, &format!("/api-keys/{id}"), None)
        .await;
    if reply.ok() {
        return signed.redirect(&st, "/dashboard/api-keys?done=revoked");
    }
    keys_page(&st, &headers, &signed, Some(reply), None, &[], "").await
}

// ---- Usage -------------------------------------------------------------

async fn usage(
    State(st): State<AppState>,
    ConnectInfo(peer): Peer,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    let signed = signed_or_return!(st, headers, peer);
    let apps = signed
        .api(&st, Method::GET, "/applications?limit=100", None)
        .await;
    let keys = signed
        .api(&st, Method::GET, "/api-keys?limit=100", None)
        .await;
    let options = |reply: &Reply, prefix: &str| -> Vec<Value> {
        reply
            .data()
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|x| {
                        let id = x["id"].as_str().unwrap_or("");
                        context! {
                            value => format!("{prefix}:{id}"),
                            label => format!("{} ({id})", x["name"].as_str().unwrap_or("")),
                        }
                    })
                    .collect()
            })
            .unwrap_or_default()
    };
    let app_options = options(&apps, "application");
    let key_options = options(&keys, "key");
    let selected = query_value(&uri, "of").unwrap_or_default();
    let day = query_value(&uri, "range").as_deref() == Some("day");
    let mut problem = [&apps, &keys]
        .into_iter()
        .find(|r| !r.ok())
        .map(|r| r.problem());
    let mut chart_ctx = None;
    if let Some((kind, id)) = selected.split_once(':')
        && let Some(id) = safe_id(id)
    {
        let base = match kind {
            "application" => Some(format!("/applications/{id}/usage")),
            "key" => Some(format!("/api-keys/{id}/usage")),
            _ => None,
        };
        if let Some(base) = base {
            let now = time::OffsetDateTime::now_utc();
            let to = now
                .replace_second(0)
                .and_then(|t| t.replace_nanosecond(0))
                .unwrap_or(now)
                + time::Duration::minutes(1);
            let from = to
                - if day {
                    time::Duration::hours(24)
                } else {
                    time::Duration::hours(1)
                };
            let fmt = |t: time::OffsetDateTime| {
                t.format(&time::format_description::well_known::Rfc3339)
                    .unwrap_or_default()
            };
            let query = serde_urlencoded::to_string([("from", fmt(from)), ("to", fmt(to))])
                .unwrap_or_default();
            let reply = signed
                .api(&st, Method::GET, &format!("{base}?{query}"), None)
                .await;
            if reply.ok() {
                let buckets: Vec<chart::Bucket> = reply
                    .data()
                    .as_array()
                    .map(|a| {
                        a.iter()
                            .map(|b| chart::Bucket {
                                label: b["start"]
                                    .as_str()
                                    .and_then(|s| s.get(11..16))
                                    .unwrap_or("")
                                    .to_owned(),
                                requests: b["requests"].as_u64().unwrap_or(0),
                                rejected: b["rejected"].as_u64().unwrap_or(0),
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                let summary = chart::summary(&buckets);
                let recent: Vec<Value> = buckets
                    .iter()
                    .rev()
                    .filter(|b| b.requests > 0 || b.rejected > 0)
                    .take(10)
                    .map(|b| {
                        context! { label => &b.label, requests => b.requests, rejected => b.rejected }
                    })
                    .collect();
                chart_ctx = Some(context! {
                    svg => Value::from_safe_string(chart::svg(&buckets, "chart-title", "chart-desc")),
                    summary, recent, from => fmt(from), to => fmt(to),
                });
            } else {
                problem = Some(reply.problem());
            }
        }
    }
    render(
        &st,
        &headers,
        &signed,
        StatusCode::OK,
        "dash_usage.html",
        "usage",
        context! {
            app_options, key_options, selected, day, problem, chart => chart_ctx,
        },
    )
    .await
}

// ---- Organization ------------------------------------------------------

async fn organization(
    State(st): State<AppState>,
    ConnectInfo(peer): Peer,
    headers: HeaderMap,
) -> Response {
    let signed = signed_or_return!(st, headers, peer);
    let reply = signed.api(&st, Method::GET, "/organization", None).await;
    let problem = (!reply.ok()).then(|| reply.problem());
    let o = reply.data();
    render(
        &st,
        &headers,
        &signed,
        page_status(&reply),
        "dash_org.html",
        "organization",
        context! {
            problem,
            org => reply.ok().then(|| context! {
                id => o["id"].as_str().unwrap_or(""),
                name => o["name"].as_str().unwrap_or(""),
                plan => o["plan"].as_str().unwrap_or(""),
                per_minute => o["limits"]["per_minute"].as_u64(),
                per_second => o["limits"]["per_second"].as_u64(),
                created_at => o["created_at"].as_str().unwrap_or(""),
            }),
        },
    )
    .await
}
