//! The Users page (issue 32; it replaces the Team page): the
//! organization's people with search, role and status filters and paging
//! (D14), each person's page (for admins: their sessions from
//! `GET /v1/users/{id}/sessions`, D57, and what they own, D46 continued),
//! inviting, changing a name or role, deactivating and reactivating,
//! resending or cancelling an invitation and deleting (choosing who takes
//! over owned applications, D13). Everything goes through `/v1/users` with
//! the person's token (D48), so the API's rules are the page's.

use axum::Router;
use axum::extract::{ConnectInfo, Path, Request, State};
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{Redirect, Response};
use axum::routing::{get, post};
use gatehouse_domain::{Email, Name, Scope};
use minijinja::{Value, context};
use serde_json::{Value as Json, json};

use super::fields::{created_page, form_errors, notice, page_status, query_value, safe_id};
use super::listing::{self, Filter, Kind, ListPage, ListQuery};
use super::{Peer, not_found};
use crate::state::AppState;
use crate::web::dashboard::api::Reply;
use crate::web::dashboard::{Signed, read_form, render, signed};

/// People on a page when the link names no `limit`.
const PAGE_SIZE: u32 = 50;

const ROLES: [(&str, &str); 3] = [
    ("viewer", "viewer: reads"),
    (
        "editor",
        "editor: reads and changes the catalog and applications",
    ),
    ("admin", "admin: everything, people included"),
];

const ROLE_RULE: &str = "Choose viewer, editor or admin.";

const FILTERS: [Filter; 3] = [
    Filter {
        name: "q",
        label: "Search",
        hint: "name or e-mail",
        kind: Kind::Search,
        more: false,
    },
    Filter {
        name: "role",
        label: "Role",
        hint: "",
        kind: Kind::Choice(&[
            ("", "Any"),
            ("admin", "admin"),
            ("editor", "editor"),
            ("viewer", "viewer"),
        ]),
        more: false,
    },
    Filter {
        name: "status",
        label: "Status",
        hint: "",
        kind: Kind::Choice(&[
            ("", "Any"),
            ("active", "active"),
            ("inactive", "deactivated"),
            ("pending_invite", "invited"),
        ]),
        more: false,
    },
];

pub(super) fn router() -> Router<AppState> {
    Router::new()
        .route("/dashboard/users", get(people).post(invite))
        .route("/dashboard/users/{id}", get(person).post(change))
        .route("/dashboard/users/{id}/invitation", post(reinvite))
        .route(
            "/dashboard/users/{id}/delete",
            get(confirm_delete).post(delete),
        )
        .route(
            "/dashboard/users/{id}/sessions/{session}/end",
            post(end_session),
        )
        // The Team page became this one: old links and bookmarks follow.
        .route(
            "/dashboard/team",
            get(|| async { Redirect::permanent("/dashboard/users") }),
        )
}

/// What the page says next to a filter the API refused.
fn filter_words(field: &str, _value: &str) -> Option<String> {
    Some(
        match field {
            "q" => "Use at most 200 characters.",
            "role" => ROLE_RULE,
            "status" => "Choose active, deactivated or invited.",
            _ => return None,
        }
        .to_owned(),
    )
}

/// The rule of a field of the invitation and person forms, in words.
fn field_rule(field: &str) -> Option<&'static str> {
    Some(match field {
        "email" => Email::RULE,
        "name" => Name::RULE,
        "role" => ROLE_RULE,
        "transfer_to" => TRANSFER_RULE,
        _ => return None,
    })
}

const TRANSFER_RULE: &str =
    "The e-mail address of an active person of the organization, other than the one deleted.";

fn user_notice(uri: &Uri) -> Option<&'static str> {
    match query_value(uri, "done").as_deref() {
        Some("reinvited") => Some("A new invitation was sent; the previous link stopped working."),
        Some("deactivated") => Some(
            "Deactivated: their sessions and tokens stopped working, their API keys were revoked and their applications suspended.",
        ),
        Some("reactivated") => Some("Reactivated: their applications work again."),
        Some("deleted") => {
            Some("The person was deleted; their sessions and tokens stopped working.")
        }
        Some("cancelled") => Some("The invitation was cancelled."),
        Some("ended") => Some("The session was ended."),
        _ => notice(uri),
    }
}

fn user_view(u: &Json) -> Value {
    context! {
        id => u["id"].as_str().unwrap_or(""),
        name => u["name"].as_str().unwrap_or(""),
        email => u["email"].as_str().unwrap_or(""),
        role => u["role"].as_str().unwrap_or(""),
        status => u["status"].as_str().unwrap_or(""),
        created_at => u["created_at"].as_str().unwrap_or(""),
        updated_at => u["updated_at"].as_str().unwrap_or(""),
    }
}

fn role_options() -> Vec<Value> {
    ROLES
        .iter()
        .map(|&(value, label)| context! { value, label })
        .collect()
}

// ---- The list -----------------------------------------------------------

async fn people(
    State(st): State<AppState>,
    ConnectInfo(peer): Peer,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    let signed = signed_or_return!(st, headers, peer);
    list_page(
        &st,
        &headers,
        &signed,
        &ListQuery::of(&uri),
        user_notice(&uri),
        None,
    )
    .await
}

/// A refused invitation: what was typed, and the refusal.
struct Refused {
    form: Value,
    reply: Reply,
}

async fn list_page(
    st: &AppState,
    headers: &HeaderMap,
    signed: &Signed,
    q: &ListQuery,
    notice: Option<&str>,
    refused: Option<Refused>,
) -> Response {
    let l = listing::list(
        st,
        signed,
        q,
        &ListPage {
            api: "/users",
            page: "/dashboard/users",
            filters: &FILTERS,
            page_size: PAGE_SIZE,
            value: listing::as_typed,
            words: filter_words,
            view: user_view,
        },
    )
    .await;
    let (status, problem, errors, form) = match refused {
        Some(r) => {
            let (errors, problem) = form_errors(&r.reply, field_rule);
            let errors = with_conflict(&r.reply, errors);
            (page_status(&r.reply), Some(problem), errors, r.form)
        }
        None => (
            page_status(&l.reply),
            None,
            Default::default(),
            context! { role => "viewer" },
        ),
    };
    render(
        st,
        headers,
        signed,
        status,
        "dash_users.html",
        "users",
        context! {
            problem, notice, form, errors,
            users => l.items, list_problem => l.problem, paging => l.paging,
            past_end => l.past_end, filters => l.filters, filtered => l.filtered,
            listed => l.reply.ok(),
            roles => role_options(),
            rules => context! { email => Email::RULE, name => Name::RULE },
        },
    )
    .await
}

/// A taken e-mail address (409) is the e-mail field's problem.
fn with_conflict(
    reply: &Reply,
    mut errors: std::collections::BTreeMap<String, &'static str>,
) -> std::collections::BTreeMap<String, &'static str> {
    if reply.status == StatusCode::CONFLICT {
        errors.insert(
            "email".to_owned(),
            "Someone in the organization already has this e-mail address.",
        );
    }
    errors
}

async fn invite(State(st): State<AppState>, ConnectInfo(peer): Peer, req: Request) -> Response {
    let (headers, form) = form_or_return!(st, req);
    let signed = signed_or_return!(st, headers, peer);
    let email = form.value("email").unwrap_or("").trim().to_owned();
    let name = form.value("name").unwrap_or("").trim().to_owned();
    let role = form.value("role").unwrap_or("viewer").to_owned();
    let body = json!({ "email": email, "name": name, "role": role });
    let reply = signed.api(&st, Method::POST, "/users", Some(&body)).await;
    if reply.ok() {
        return signed.redirect(&st, &created_page("/dashboard/users", &reply, "invited"));
    }
    list_page(
        &st,
        &headers,
        &signed,
        &ListQuery::from_pairs(Vec::new()),
        None,
        Some(Refused {
            form: context! { email, name, role },
            reply,
        }),
    )
    .await
}

// ---- A person -----------------------------------------------------------

async fn person(
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
    person_page(&st, &headers, &signed, id, user_notice(&uri), None).await
}

/// A list of what a person owns, or nothing when the reader may not see it.
async fn owned(st: &AppState, signed: &Signed, may: bool, path: &str) -> Option<Vec<Value>> {
    if !may {
        return None;
    }
    let reply = signed.api(st, Method::GET, path, None).await;
    reply.ok().then(|| {
        reply
            .data()
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|x| {
                        context! {
                            id => x["id"].as_str().unwrap_or(""),
                            name => x["name"].as_str().unwrap_or(""),
                            prefix => x["prefix"].as_str(),
                            suspended => x["suspended_reason"].as_str(),
                            revoked_at => x["revoked_at"].as_str(),
                            expires_at => x["expires_at"].as_str(),
                        }
                    })
                    .collect()
            })
            .unwrap_or_default()
    })
}

async fn person_page(
    st: &AppState,
    headers: &HeaderMap,
    signed: &Signed,
    id: &str,
    notice: Option<&str>,
    refused: Option<Refused>,
) -> Response {
    let reply = signed
        .api(st, Method::GET, &format!("/users/{id}"), None)
        .await;
    if reply.status == StatusCode::NOT_FOUND {
        return not_found(st);
    }
    let user = reply.ok().then(|| user_view(reply.data()));
    let admin = signed.can(Scope::UsersWrite);
    // D57: an admin sees a person's sessions; the newest start is their
    // last sign-in among those still open.
    let sessions = if admin && reply.ok() {
        let s = signed
            .api(st, Method::GET, &format!("/users/{id}/sessions"), None)
            .await;
        s.ok().then(|| {
            s.data()
                .as_array()
                .map(|a| {
                    a.iter()
                        .map(|x| {
                            context! {
                                id => x["id"].as_str().unwrap_or(""),
                                created_at => x["created_at"].as_str().unwrap_or(""),
                                last_seen_at => x["last_seen_at"].as_str().unwrap_or(""),
                                ip => x["ip"].as_str(),
                                user_agent => x["user_agent"].as_str(),
                                amr => super::fields::strings(&x["amr"]),
                                applications => super::fields::strings(&x["applications"]),
                            }
                        })
                        .collect::<Vec<_>>()
                })
                .unwrap_or_default()
        })
    } else {
        None
    };
    let last_sign_in = sessions.as_ref().and_then(|s| {
        s.iter()
            .filter_map(|x| x.get_attr("created_at").ok())
            .filter_map(|v| v.as_str().map(str::to_owned))
            .max()
    });
    let may_apps = reply.ok() && signed.can(Scope::ApplicationsRead);
    let applications = owned(
        st,
        signed,
        may_apps,
        &format!("/applications?owner_id={id}&limit=100"),
    )
    .await;
    let keys = owned(
        st,
        signed,
        may_apps,
        &format!("/api-keys?owner_id={id}&limit=100"),
    )
    .await;
    let (status, problem, errors, form) = match refused {
        Some(r) => {
            let (errors, problem) = form_errors(&r.reply, field_rule);
            // A refusal of no form (a status, an invitation, a session)
            // leaves the name and role form as stored.
            let typed = (!r.form.is_undefined()).then_some(r.form);
            (page_status(&r.reply), Some(problem), errors, typed)
        }
        None => (
            page_status(&reply),
            (!reply.ok()).then(|| reply.problem()),
            Default::default(),
            None,
        ),
    };
    let form = form.or_else(|| {
        user.as_ref().map(|u| {
            context! {
                name => u.get_attr("name").ok(),
                role => u.get_attr("role").ok(),
            }
        })
    });
    render(
        st,
        headers,
        signed,
        status,
        "dash_user.html",
        "users",
        context! {
            user, problem, notice, errors, form, sessions, last_sign_in, applications, keys,
            roles => role_options(),
            me => signed.grant.user.as_str(),
            rules => context! { name => Name::RULE },
        },
    )
    .await
}

/// Saves the person form: name and role together, or a status on its own.
async fn change(
    State(st): State<AppState>,
    ConnectInfo(peer): Peer,
    Path(id): Path<String>,
    req: Request,
) -> Response {
    let (headers, form, signed, id) = posted_or_return!(st, req, peer, id);
    let (body, done) = match form.get("status") {
        Some(status) => (
            json!({ "status": status }),
            if status == "inactive" {
                "deactivated"
            } else {
                "reactivated"
            },
        ),
        None => {
            let mut body = serde_json::Map::new();
            if let Some(name) = form.value("name") {
                body.insert("name".into(), json!(name.trim()));
            }
            if let Some(role) = form.value("role") {
                body.insert("role".into(), json!(role));
            }
            (Json::Object(body), "changed")
        }
    };
    let reply = signed
        .api(&st, Method::PATCH, &format!("/users/{id}"), Some(&body))
        .await;
    if reply.ok() {
        return signed.redirect(&st, &format!("/dashboard/users/{id}?done={done}"));
    }
    // A refused status change is no refusal of the name and role form.
    let typed = if form.get("status").is_some() {
        Value::UNDEFINED
    } else {
        context! {
            name => form.value("name").map(str::trim),
            role => form.value("role"),
        }
    };
    person_page(
        &st,
        &headers,
        &signed,
        id,
        None,
        Some(Refused { form: typed, reply }),
    )
    .await
}

async fn reinvite(
    State(st): State<AppState>,
    ConnectInfo(peer): Peer,
    Path(id): Path<String>,
    req: Request,
) -> Response {
    let (headers, _form, signed, id) = posted_or_return!(st, req, peer, id);
    let path = format!("/users/{id}/invitation");
    act(
        &st,
        &headers,
        &signed,
        id,
        (Method::POST, &path, Some(&json!({}))),
        "reinvited",
    )
    .await
}

async fn end_session(
    State(st): State<AppState>,
    ConnectInfo(peer): Peer,
    Path((id, session)): Path<(String, String)>,
    req: Request,
) -> Response {
    let (headers, _form, signed, id) = posted_or_return!(st, req, peer, id);
    let Some(session) = safe_id(&session) else {
        return not_found(&st);
    };
    let path = format!("/users/{id}/sessions/{session}");
    act(
        &st,
        &headers,
        &signed,
        id,
        (Method::DELETE, &path, None),
        "ended",
    )
    .await
}

/// One action on a person through `/v1` (`call`: method, path, body):
/// their page with `done` after it, or with the refusal in words.
async fn act(
    st: &AppState,
    headers: &HeaderMap,
    signed: &Signed,
    id: &str,
    call: (Method, &str, Option<&Json>),
    done: &str,
) -> Response {
    let (method, path, body) = call;
    let reply = signed.api(st, method, path, body).await;
    if reply.ok() {
        return signed.redirect(st, &format!("/dashboard/users/{id}?done={done}"));
    }
    let refused = Refused {
        form: Value::UNDEFINED,
        reply,
    };
    person_page(st, headers, signed, id, None, Some(refused)).await
}

// ---- Deleting (or cancelling an invitation) ------------------------------

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
    delete_page(&st, &headers, &signed, id, None).await
}

async fn delete_page(
    st: &AppState,
    headers: &HeaderMap,
    signed: &Signed,
    id: &str,
    refused: Option<Refused>,
) -> Response {
    let reply = signed
        .api(st, Method::GET, &format!("/users/{id}"), None)
        .await;
    if reply.status == StatusCode::NOT_FOUND {
        return not_found(st);
    }
    let user = reply.ok().then(|| user_view(reply.data()));
    // D13: who takes over what the person owns is asked only when they
    // own applications.
    let applications = owned(
        st,
        signed,
        reply.ok() && signed.can(Scope::ApplicationsRead),
        &format!("/applications?owner_id={id}&limit=100"),
    )
    .await
    .unwrap_or_default();
    let (status, problem, errors, form) = match refused {
        Some(r) => {
            let (errors, problem) = form_errors(&r.reply, field_rule);
            (page_status(&r.reply), Some(problem), errors, r.form)
        }
        None => (
            page_status(&reply),
            (!reply.ok()).then(|| reply.problem()),
            Default::default(),
            Value::UNDEFINED,
        ),
    };
    render(
        st,
        headers,
        signed,
        status,
        "dash_user_delete.html",
        "users",
        context! {
            user, applications, problem, errors, form,
            transfer_rule => TRANSFER_RULE,
        },
    )
    .await
}

/// The id of the active person with this e-mail address, found with the
/// list's search (D14) as the person deleting may list people.
async fn active_person(st: &AppState, signed: &Signed, email: &str) -> Option<String> {
    let wanted = Email::parse_for_lookup(email).ok()?;
    let q = serde_urlencoded::to_string([("q", email), ("status", "active"), ("limit", "100")])
        .unwrap_or_default();
    let reply = signed
        .api(st, Method::GET, &format!("/users?{q}"), None)
        .await;
    reply.data().as_array()?.iter().find_map(|u| {
        let e = Email::parse_for_lookup(u["email"].as_str()?).ok()?;
        (e.normalized() == wanted.normalized()).then(|| u["id"].as_str().map(str::to_owned))?
    })
}

async fn delete(
    State(st): State<AppState>,
    ConnectInfo(peer): Peer,
    Path(id): Path<String>,
    req: Request,
) -> Response {
    let (headers, form, signed, id) = posted_or_return!(st, req, peer, id);
    let transfer = form.value("transfer_to").unwrap_or("").trim().to_owned();
    let refuse = |reply: Reply| Refused {
        form: context! { transfer_to => transfer.clone() },
        reply,
    };
    let mut path = format!("/users/{id}");
    if !transfer.is_empty() {
        match active_person(&st, &signed, &transfer).await {
            Some(to) if to != id => match safe_id(&to) {
                Some(to) => path.push_str(&format!("?transfer_to={to}")),
                None => return not_found(&st),
            },
            _ => {
                // D6: a value that names no one is a validation error.
                let reply = Reply {
                    status: StatusCode::BAD_REQUEST,
                    body: json!({"error": {"code": "VALIDATION_ERROR",
                        "message": "No active person of the organization has this e-mail address.",
                        "details": [{"field": "transfer_to", "issue": "no such active user"}]}}),
                };
                return delete_page(&st, &headers, &signed, id, Some(refuse(reply))).await;
            }
        }
    }
    let invited = form.get("invited").is_some();
    let reply = signed.api(&st, Method::DELETE, &path, None).await;
    if reply.ok() {
        let done = if invited { "cancelled" } else { "deleted" };
        return signed.redirect(&st, &format!("/dashboard/users?done={done}"));
    }
    if reply.body["error"]["code"] == "OWNED_RESOURCES_EXIST" {
        let reply = Reply {
            status: reply.status,
            body: json!({"error": {"code": "OWNED_RESOURCES_EXIST",
                "message": "This person owns applications: name who takes them over.",
                "details": [{"field": "transfer_to", "issue": "required"}]}}),
        };
        return delete_page(&st, &headers, &signed, id, Some(refuse(reply))).await;
    }
    delete_page(&st, &headers, &signed, id, Some(refuse(reply))).await
}
