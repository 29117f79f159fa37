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
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::Response;
use axum::routing::get;
use gatehouse_domain::Timestamp;
use minijinja::{Value, context};
use serde_json::Value as Json;

use super::Peer;
use super::fields::page_status;
use super::listing::{self, Filter, Kind, ListPage, ListQuery};
use crate::state::AppState;
use crate::web::dashboard::{render, signed};

/// Entries on a page when the link names no `limit`.
const PAGE_SIZE: u32 = 25;

/// The longest value of a change shown in full; longer ones are cut.
const VALUE_SHOWN: usize = 120;

pub(super) fn router() -> Router<AppState> {
    Router::new().route("/dashboard/activity", get(activity))
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

/// The `/v1/audit-logs` query of the page's query (a day becomes an instant).
#[cfg(test)]
fn api_query(q: &ListQuery) -> String {
    q.api_query(&FILTERS, PAGE_SIZE, filter_value)
}

/// A filter's value as the API gets it: a day becomes an instant.
fn filter_value(f: &Filter, v: &str) -> String {
    match f.kind {
        Kind::Date => api_time(f.name, v),
        _ => v.to_owned(),
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

async fn activity(
    State(st): State<AppState>,
    ConnectInfo(peer): Peer,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    let signed = signed_or_return!(st, headers, peer);
    let q = ListQuery::of(&uri);
    let l = listing::list(
        &st,
        &signed,
        &q,
        &ListPage {
            api: "/audit-logs",
            page: "/dashboard/activity",
            filters: &FILTERS,
            page_size: PAGE_SIZE,
            value: filter_value,
            words: field_words,
            view: entry_view,
        },
    )
    .await;
    // D29 (continued): without `audit:read` the API refuses, and the page
    // says so in words, with no form and no list (as the Webhooks page).
    let refused = matches!(
        l.reply.status,
        StatusCode::FORBIDDEN | StatusCode::UNAUTHORIZED
    );
    render(
        &st,
        &headers,
        &signed,
        page_status(&l.reply),
        "dash_activity.html",
        "activity",
        context! {
            refused, problem => l.problem, fields => l.filters, entries => l.items,
            paging => l.paging, filtered => l.filtered, more_open => l.more_open,
            past_end => l.past_end, listed => l.reply.ok(),
        },
    )
    .await
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::{ListQuery, api_query, api_time, readable_time, shown};

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
    fn the_api_gets_days_as_instants() {
        let q = ListQuery::from_pairs(vec![
            ("action".to_owned(), "user.".to_owned()),
            ("from".to_owned(), "2025-03-01".to_owned()),
            ("offset".to_owned(), "25".to_owned()),
        ]);
        assert_eq!(
            api_query(&q),
            "action=user.&from=2025-03-01T00%3A00%3A00Z&limit=25&offset=25"
        );
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
