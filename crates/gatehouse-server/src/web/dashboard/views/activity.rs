//! The Activity page (D58: "the dashboard gains an Activity page for
//! admins"; D29 continued: admins only, as `audit:read` is): the
//! organization's audit log, newest first, a page at a time.
//!
//! Like every dashboard page (D48) it reads only through `/v1`, here
//! `GET /v1/audit-logs`, with the person's own token: someone without
//! `audit:read` gets the API's 403 in words, as on the Webhooks page. The
//! filters are a GET form that needs no script; its values go to the API
//! as given (dates become the first instant of the day, in UTC), so a value
//! the API refuses is the API's 400, shown next to its field in the page's
//! own words (D48 continued), and nothing is listed.

use axum::Router;
use axum::extract::{ConnectInfo, State};
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::Response;
use axum::routing::get;
use gatehouse_domain::Timestamp;
use minijinja::{Value, context};
use serde_json::Value as Json;

use super::Peer;
use super::fields::page_status;
use crate::state::AppState;
use crate::web::dashboard::api::{Problem, Reply};
use crate::web::dashboard::{render, signed};

/// Entries on a page when the link names no `limit`.
const PAGE_SIZE: u32 = 25;

/// The longest value of a change shown in full; longer ones are cut.
const VALUE_SHOWN: usize = 120;

pub(super) fn router() -> Router<AppState> {
    Router::new().route("/dashboard/activity", get(activity))
}

/// A filter of the form: its query name (the API's too), its label, and
/// how it is entered.
struct Filter {
    name: &'static str,
    label: &'static str,
    hint: &'static str,
    kind: Kind,
    /// Under "More filters" (open when one of them is given).
    more: bool,
}

enum Kind {
    Text,
    Date,
    Choice(&'static [(&'static str, &'static str)]),
}

const FILTERS: [Filter; 8] = [
    Filter {
        name: "category",
        label: "Category",
        hint: "",
        kind: Kind::Choice(&[
            ("", "Any"),
            ("admin", "admin: changes"),
            ("security", "security: sign-ins, sessions, tokens"),
        ]),
        more: false,
    },
    Filter {
        name: "outcome",
        label: "Outcome",
        hint: "",
        kind: Kind::Choice(&[("", "Any"), ("success", "Success"), ("failure", "Failure")]),
        more: false,
    },
    Filter {
        name: "action",
        label: "Action starts with",
        hint: "such as user. or product.created",
        kind: Kind::Text,
        more: false,
    },
    Filter {
        name: "actor",
        label: "Actor",
        hint: "an id, or operator, system or anonymous",
        kind: Kind::Text,
        more: true,
    },
    Filter {
        name: "target",
        label: "Target",
        hint: "the id of a person, application, key…",
        kind: Kind::Text,
        more: true,
    },
    Filter {
        name: "ip",
        label: "Source address",
        hint: "",
        kind: Kind::Text,
        more: true,
    },
    Filter {
        name: "from",
        label: "From",
        hint: "UTC",
        kind: Kind::Date,
        more: false,
    },
    Filter {
        name: "to",
        label: "To",
        hint: "UTC, this day included",
        kind: Kind::Date,
        more: false,
    },
];

/// What the page says next to a field the API refused (`value` as the
/// link or form gave it): the page's own words, not the API's.
fn field_words(field: &str, value: &str) -> Option<String> {
    Some(match field {
        // A date field cannot show what it cannot read, so the words do.
        "from" | "to" => format!("“{value}” is not a date: choose a day, or leave this empty."),
        "category" => "Choose admin or security.".to_owned(),
        "outcome" => "Choose success or failure.".to_owned(),
        "ip" => "Enter an IP address, such as 203.0.113.7 or 2001:db8::7.".to_owned(),
        "action" | "actor" | "target" => {
            "Use at most 200 characters, without control characters.".to_owned()
        }
        _ => return None,
    })
}

/// The query's first value of each name (trimmed; empty means not given).
fn query_pairs(uri: &Uri) -> Vec<(String, String)> {
    let q: Vec<(String, String)> =
        serde_urlencoded::from_str(uri.query().unwrap_or("")).unwrap_or_default();
    let mut out: Vec<(String, String)> = Vec::new();
    for (k, v) in q {
        if !out.iter().any(|(n, _)| *n == k) {
            out.push((k, v.trim().to_owned()));
        }
    }
    out.retain(|(_, v)| !v.is_empty());
    out
}

fn given<'a>(pairs: &'a [(String, String)], name: &str) -> Option<&'a str> {
    pairs
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

/// A day of the form (`YYYY-MM-DD`, as a date field sends it).
fn day(text: &str) -> Option<time::Date> {
    let mut parts = text.split('-');
    let (y, m, d) = (parts.next()?, parts.next()?, parts.next()?);
    let digits = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_digit());
    if parts.next().is_some() || !digits(y, 4) || !digits(m, 2) || !digits(d, 2) {
        return None;
    }
    let month = time::Month::try_from(m.parse::<u8>().ok()?).ok()?;
    time::Date::from_calendar_date(y.parse().ok()?, month, d.parse().ok()?).ok()
}

/// The value the API gets for `from` or `to`: a day becomes its first
/// instant (for `to`, the next day's, as `to` is exclusive and the form's
/// day inclusive); anything else goes as typed, for the API to accept (an
/// RFC 3339 time in a link) or refuse.
fn api_time(name: &str, text: &str) -> String {
    match day(text) {
        Some(d) => {
            let d = if name == "to" {
                d.next_day().unwrap_or(d)
            } else {
                d
            };
            format!(
                "{:04}-{:02}-{:02}T00:00:00Z",
                d.year(),
                d.month() as u8,
                d.day()
            )
        }
        None => text.to_owned(),
    }
}

/// The `/v1/audit-logs` query of the page's query.
fn api_query(pairs: &[(String, String)]) -> String {
    let mut out: Vec<(&str, String)> = Vec::new();
    for f in &FILTERS {
        if let Some(v) = given(pairs, f.name) {
            let v = match f.kind {
                Kind::Date => api_time(f.name, v),
                _ => v.to_owned(),
            };
            out.push((f.name, v));
        }
    }
    out.push((
        "limit",
        given(pairs, "limit").map_or_else(|| PAGE_SIZE.to_string(), str::to_owned),
    ));
    if let Some(offset) = given(pairs, "offset") {
        out.push(("offset", offset.to_owned()));
    }
    serde_urlencoded::to_string(out).unwrap_or_default()
}

/// A link to this page with the same filters (as typed) and `offset`.
fn page_link(pairs: &[(String, String)], offset: u64) -> String {
    let mut out: Vec<(&str, String)> = FILTERS
        .iter()
        .filter_map(|f| given(pairs, f.name).map(|v| (f.name, v.to_owned())))
        .collect();
    if let Some(limit) = given(pairs, "limit") {
        out.push(("limit", limit.to_owned()));
    }
    if offset > 0 {
        out.push(("offset", offset.to_string()));
    }
    let q = serde_urlencoded::to_string(out).unwrap_or_default();
    if q.is_empty() {
        "/dashboard/activity".to_owned()
    } else {
        format!("/dashboard/activity?{q}")
    }
}

/// `2026-11-28T11:55:37.688Z` as `2026-11-28 11:55:37 UTC`.
fn readable_time(at: &str) -> String {
    match Timestamp::parse_rfc3339(at).map(Timestamp::to_rfc3339) {
        // Always `YYYY-MM-DDTHH:MM:SS.mmmZ`, in UTC.
        Some(t) if t.len() >= 19 => format!("{} {} UTC", &t[..10], &t[11..19]),
        _ => at.to_owned(),
    }
}

/// A value of `changes` or `details` in a few words: text as it is, a
/// list joined with commas, nothing as "none".
fn shown(v: &Json) -> String {
    let text = match v {
        Json::Null => "none".to_owned(),
        Json::String(s) if s.is_empty() => "(empty)".to_owned(),
        Json::String(s) => s.clone(),
        Json::Array(a) if a.is_empty() => "none".to_owned(),
        Json::Array(a) => a
            .iter()
            .map(|x| match x {
                Json::String(s) => s.clone(),
                x => x.to_string(),
            })
            .collect::<Vec<_>>()
            .join(", "),
        v => v.to_string(),
    };
    if text.chars().count() > VALUE_SHOWN {
        let cut: String = text.chars().take(VALUE_SHOWN).collect();
        format!("{cut}…")
    } else {
        text
    }
}

fn actor_view(a: &Json) -> Value {
    let kind = a["type"].as_str().unwrap_or("");
    let id = a["id"].as_str();
    // A person acts through a client (the dashboard's is `app_dashboard`).
    let through = a["client_id"].as_str().filter(|c| Some(*c) != id);
    context! {
        kind => match kind {
            "user" => "person",
            "client" => "application",
            "api_key" => "API key",
            "operator" => "operator (command line)",
            "system" => "Gatehouse",
            "anonymous" => "anonymous",
            other => other,
        },
        id, through,
    }
}

fn entry_view(e: &Json) -> Value {
    let at = e["created_at"].as_str().unwrap_or("");
    let changes: Vec<Value> = e["changes"]
        .as_object()
        .map(|c| {
            c.iter()
                .map(|(field, ch)| {
                    context! { field, from => shown(&ch["from"]), to => shown(&ch["to"]) }
                })
                .collect()
        })
        .unwrap_or_default();
    let details: Vec<Value> = e["details"]
        .as_object()
        .map(|d| {
            d.iter()
                .map(|(name, v)| context! { name, value => shown(v) })
                .collect()
        })
        .unwrap_or_default();
    let target = e["target"].as_object().map(|t| {
        context! {
            kind => t.get("type").and_then(Json::as_str).unwrap_or("").replace('_', " "),
            id => t.get("id").and_then(Json::as_str).unwrap_or(""),
        }
    });
    context! {
        id => e["id"].as_str().unwrap_or(""),
        category => e["category"].as_str().unwrap_or(""),
        at, at_text => readable_time(at),
        action => e["action"].as_str().unwrap_or(""),
        failed => e["outcome"].as_str() == Some("failure"),
        reason => e["reason"].as_str(),
        actor => actor_view(&e["actor"]),
        ip => e["source"]["ip"].as_str(),
        target, changes, details,
    }
}

/// The issues of a refused query: the fields' words, and whether the
/// paging itself (`limit`, `offset`: only a hand-made link has them) was
/// refused.
fn issues(reply: &Reply, pairs: &[(String, String)]) -> (Vec<(String, String)>, bool) {
    let mut fields = Vec::new();
    let mut paging = false;
    for d in reply.body["error"]["details"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let field = d["field"].as_str().unwrap_or("");
        match field_words(field, given(pairs, field).unwrap_or("")) {
            Some(words) => fields.push((field.to_owned(), words)),
            None => paging = true,
        }
    }
    (fields, paging)
}

async fn activity(
    State(st): State<AppState>,
    ConnectInfo(peer): Peer,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    let signed = signed_or_return!(st, headers, peer);
    let pairs = query_pairs(&uri);
    let reply = signed
        .api(
            &st,
            Method::GET,
            &format!("/audit-logs?{}", api_query(&pairs)),
            None,
        )
        .await;
    // D29 (continued): without `audit:read` the API refuses, and the page
    // says so in words, with no form and no list (as the Webhooks page).
    let refused = matches!(
        reply.status,
        StatusCode::FORBIDDEN | StatusCode::UNAUTHORIZED
    );
    let (field_issues, paging_refused) = if reply.status == StatusCode::BAD_REQUEST {
        issues(&reply, &pairs)
    } else {
        (Vec::new(), false)
    };
    let problem: Option<Problem> = if reply.ok() {
        None
    } else if reply.status == StatusCode::BAD_REQUEST
        && (!field_issues.is_empty() || paging_refused)
    {
        Some(Problem {
            code: "VALIDATION_ERROR".to_owned(),
            message: if field_issues.is_empty() {
                "This page of the list does not exist: start again from the first page.".to_owned()
            } else {
                "Nothing is listed until the filters marked below are corrected.".to_owned()
            },
            details: Vec::new(),
        })
    } else {
        Some(reply.problem())
    };
    let fields: Vec<Value> = FILTERS
        .iter()
        .map(|f| {
            let value = given(&pairs, f.name).unwrap_or("");
            let error = field_issues
                .iter()
                .find(|(n, _)| n == f.name)
                .map(|(_, w)| w.as_str());
            let (kind, options) = match f.kind {
                Kind::Text => ("text", Vec::new()),
                Kind::Date => ("date", Vec::new()),
                Kind::Choice(choices) => (
                    "select",
                    choices
                        .iter()
                        .map(|&(v, label)| context! { value => v, label, selected => v == value })
                        .collect(),
                ),
            };
            context! {
                name => f.name, label => f.label, hint => f.hint, kind, value, error, options,
                more => f.more,
            }
        })
        .collect();
    let more_open = FILTERS.iter().any(|f| {
        f.more && (given(&pairs, f.name).is_some() || field_issues.iter().any(|(n, _)| n == f.name))
    });
    let entries: Vec<Value> = reply
        .data()
        .as_array()
        .map(|a| a.iter().map(entry_view).collect())
        .unwrap_or_default();
    let meta = &reply.body["meta"];
    let (total, limit, offset) = (
        meta["total"].as_u64().unwrap_or(0),
        meta["limit"]
            .as_u64()
            .unwrap_or(u64::from(PAGE_SIZE))
            .max(1),
        meta["offset"].as_u64().unwrap_or(0),
    );
    let shown_to = offset + entries.len() as u64;
    // A link past the end (the list shrank, or a hand-made offset) leads
    // back to the first page rather than to an empty one.
    let past_end = (reply.ok() && entries.is_empty() && total > 0).then(|| page_link(&pairs, 0));
    let paging = (reply.ok() && !entries.is_empty()).then(|| {
        context! {
            first => offset + 1, last => shown_to, total,
            previous => (offset > 0).then(|| page_link(&pairs, offset.saturating_sub(limit))),
            next => (shown_to < total).then(|| page_link(&pairs, shown_to)),
        }
    });
    let filtered = FILTERS.iter().any(|f| given(&pairs, f.name).is_some());
    render(
        &st,
        &headers,
        &signed,
        page_status(&reply),
        "dash_activity.html",
        "activity",
        context! {
            problem, refused, fields, entries, paging, filtered, more_open, past_end,
            listed => reply.ok(),
        },
    )
    .await
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::{api_query, api_time, page_link, readable_time, shown};

    fn pairs(p: &[(&str, &str)]) -> Vec<(String, String)> {
        p.iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn days_become_instants_and_the_last_day_is_included() {
        assert_eq!(api_time("from", "2025-03-31"), "2025-03-31T00:00:00Z");
        assert_eq!(api_time("to", "2025-03-31"), "2025-04-01T00:00:00Z");
        assert_eq!(api_time("to", "2024-12-31"), "2025-01-01T00:00:00Z");
        // Anything else goes to the API as typed, which decides.
        assert_eq!(
            api_time("from", "2025-03-31T12:00:00Z"),
            "2025-03-31T12:00:00Z"
        );
        assert_eq!(api_time("from", "yesterday"), "yesterday");
        assert_eq!(api_time("from", "2025-02-30"), "2025-02-30");
    }

    #[test]
    fn the_api_gets_the_filters_and_a_page_size() {
        let q = api_query(&pairs(&[
            ("action", "user."),
            ("from", "2025-03-01"),
            ("offset", "25"),
            ("csrf_token", "x"),
        ]));
        assert_eq!(
            q,
            "action=user.&from=2025-03-01T00%3A00%3A00Z&limit=25&offset=25"
        );
    }

    #[test]
    fn page_links_keep_the_filters_as_typed() {
        let p = pairs(&[("target", "app_1"), ("from", "2025-03-01"), ("limit", "2")]);
        assert_eq!(
            page_link(&p, 4),
            "/dashboard/activity?target=app_1&from=2025-03-01&limit=2&offset=4"
        );
        assert_eq!(page_link(&[], 0), "/dashboard/activity");
    }

    #[test]
    fn values_and_times_read_well() {
        assert_eq!(shown(&json!(null)), "none");
        assert_eq!(shown(&json!(["a:read", "b:write"])), "a:read, b:write");
        assert_eq!(shown(&json!(1999)), "1999");
        assert_eq!(shown(&json!("x".repeat(200))).chars().count(), 121);
        assert_eq!(
            readable_time("2026-11-28T11:55:37.688Z"),
            "2026-11-28 11:55:37 UTC"
        );
        assert_eq!(readable_time("not a time"), "not a time");
    }
}
