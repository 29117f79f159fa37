//! What the dashboard's pages read: ids from the path, notices and values
//! from the query, the scopes of a form, lines and lists, and the API's
//! answers (its status and problems, shown in words).

use axum::http::{StatusCode, Uri};
use gatehouse_domain::{Scope, ScopeSet};
use minijinja::{Value, context};
use serde_json::Value as Json;

use crate::http::form::Form;
use crate::web::dashboard::api::{Problem, Reply};

/// An id from the path, only when it has the shape of one (so it cannot
/// change the API path it goes into).
pub(super) fn safe_id(id: &str) -> Option<&str> {
    (!id.is_empty() && id.len() <= 80 && id.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
        .then_some(id)
}

/// What a page says after a redirect (`?done=…`).
pub(super) fn notice(uri: &Uri) -> Option<&'static str> {
    let q: Vec<(String, String)> =
        serde_urlencoded::from_str(uri.query().unwrap_or("")).unwrap_or_default();
    let done = q
        .iter()
        .find(|(k, _)| k == "done")
        .map(|(_, v)| v.as_str())?;
    Some(match done {
        "created" => "Created.",
        "updated" => "Saved.",
        "deleted" => "The application was deleted; its tokens stopped working.",
        "revoked" => "The API key was revoked.",
        "invited" => "The invitation was sent.",
        "changed" => "The change was saved.",
        "tested" => "The test event was delivered.",
        "test-failed" => "The test event was not delivered: see its attempt below.",
        _ => return None,
    })
}

pub(super) fn query_value(uri: &Uri, name: &str) -> Option<String> {
    let q: Vec<(String, String)> =
        serde_urlencoded::from_str(uri.query().unwrap_or("")).unwrap_or_default();
    q.into_iter().find(|(k, _)| k == name).map(|(_, v)| v)
}

/// A scope choice for a form.
pub(super) fn scope_choices(offered: ScopeSet, checked: &[String]) -> Vec<Value> {
    offered
        .iter()
        .map(|s| {
            context! {
                name => s.as_str(), description => s.description(),
                field => format!("scope.{}", s.as_str()),
                checked => checked.iter().any(|c| c == s.as_str()),
            }
        })
        .collect()
}

/// The scopes ticked in a form.
pub(super) fn ticked_scopes(form: &Form) -> Vec<String> {
    Scope::ALL
        .iter()
        .filter(|s| form.get(&format!("scope.{}", s.as_str())).is_some())
        .map(|s| s.as_str().to_owned())
        .collect()
}

pub(super) fn union(a: ScopeSet, b: ScopeSet) -> ScopeSet {
    ScopeSet::from_bits(a.bits() | b.bits())
}

pub(super) fn lines(text: &str) -> Vec<String> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect()
}

pub(super) fn strings(v: &Json) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

pub(super) fn problem_ctx(reply: &Reply) -> Problem {
    reply.problem()
}

/// The status of a page that shows an API error.
pub(super) fn page_status(reply: &Reply) -> StatusCode {
    match reply.status {
        s if s.is_success() => StatusCode::OK,
        StatusCode::UNAUTHORIZED => StatusCode::UNAUTHORIZED,
        s if s.is_server_error() => StatusCode::SERVICE_UNAVAILABLE,
        s => s,
    }
}

/// A refused form's problems, each beside its field in the page's own
/// words (issue 32): `words` names the rule of a field the API named (D6's
/// `details`), never the API's `field`/`issue` text. The page's message
/// says where to look; a problem of no field the form has goes in it.
pub(super) fn form_errors(
    reply: &Reply,
    words: impl Fn(&str) -> Option<&'static str>,
) -> (std::collections::BTreeMap<String, &'static str>, Problem) {
    let mut placed = std::collections::BTreeMap::new();
    let mut unplaced = false;
    for d in reply.body["error"]["details"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let field = d["field"].as_str().unwrap_or("");
        match words(field) {
            Some(w) => {
                placed.insert(field.to_owned(), w);
            }
            None => unplaced = true,
        }
    }
    let mut problem = reply.problem();
    problem.details = Vec::new();
    if !placed.is_empty() {
        problem.message = if unplaced {
            format!(
                "Nothing was saved: correct the fields marked below. ({})",
                problem.message
            )
        } else {
            "Nothing was saved: correct the fields marked below.".to_owned()
        };
    }
    (placed, problem)
}

/// [`form_errors`] of a refusal, if there was one: the fields' words and
/// the page's problem; nothing for a page shown without one.
pub(super) fn refusal(
    failed: Option<&Reply>,
    words: impl Fn(&str) -> Option<&'static str>,
) -> (
    std::collections::BTreeMap<String, &'static str>,
    Option<Problem>,
) {
    match failed {
        Some(r) => {
            let (errors, problem) = form_errors(r, words);
            (errors, Some(problem))
        }
        None => (std::collections::BTreeMap::new(), None),
    }
}

/// After a creation, the new item's page (`{base}/{id}?done={done}`), or
/// the list's when the answer names no id of an id's shape.
pub(super) fn created_page(base: &str, reply: &Reply, done: &str) -> String {
    match reply.data()["id"].as_str().and_then(safe_id) {
        Some(id) => format!("{base}/{id}?done={done}"),
        None => format!("{base}?done={done}"),
    }
}
