//! What the list pages (Users, Products, Activity) share: a GET form of
//! filters that needs no script, the API's filters and paging (D14) from
//! the page's query, links to the other pages of a list that keep the
//! filters as typed, and a filter the API refuses shown beside its field
//! in the page's own words (issue 32), with nothing listed.

use axum::http::{Method, StatusCode, Uri};
use minijinja::{Value, context};
use serde_json::Value as Json;

use crate::state::AppState;
use crate::web::dashboard::Signed;
use crate::web::dashboard::api::{Problem, Reply};

/// A filter of a list page's form: its query name (the API's too), its
/// label, and how it is entered.
pub(super) struct Filter {
    pub(super) name: &'static str,
    pub(super) label: &'static str,
    pub(super) hint: &'static str,
    pub(super) kind: Kind,
    /// Under "More filters" (open when one of them is given).
    pub(super) more: bool,
}

pub(super) enum Kind {
    Text,
    /// Search text (`q`, D14): a search field.
    Search,
    Date,
    Choice(&'static [(&'static str, &'static str)]),
}

/// A list page's query: the first value of each name, trimmed; an empty
/// value is not given.
pub(super) struct ListQuery(Vec<(String, String)>);

impl ListQuery {
    pub(super) fn of(uri: &Uri) -> Self {
        let q: Vec<(String, String)> =
            serde_urlencoded::from_str(uri.query().unwrap_or("")).unwrap_or_default();
        Self::from_pairs(q)
    }

    pub(super) fn from_pairs(q: Vec<(String, String)>) -> Self {
        let mut out: Vec<(String, String)> = Vec::new();
        for (k, v) in q {
            if !out.iter().any(|(n, _)| *n == k) {
                out.push((k, v.trim().to_owned()));
            }
        }
        out.retain(|(_, v)| !v.is_empty());
        Self(out)
    }

    pub(super) fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// Whether any of the filters is given.
    pub(super) fn filtered(&self, filters: &[Filter]) -> bool {
        filters.iter().any(|f| self.get(f.name).is_some())
    }

    /// The API's query: the filters (each value through `value`), `limit`
    /// (the link's, else `page_size`) and `offset` as given, for the API
    /// to accept or refuse.
    pub(super) fn api_query(
        &self,
        filters: &[Filter],
        page_size: u32,
        value: impl Fn(&Filter, &str) -> String,
    ) -> String {
        let mut out: Vec<(&str, String)> = filters
            .iter()
            .filter_map(|f| self.get(f.name).map(|v| (f.name, value(f, v))))
            .collect();
        out.push((
            "limit",
            self.get("limit")
                .map_or_else(|| page_size.to_string(), str::to_owned),
        ));
        if let Some(offset) = self.get("offset") {
            out.push(("offset", offset.to_owned()));
        }
        serde_urlencoded::to_string(out).unwrap_or_default()
    }

    /// A link to the page at `base` with the same filters (as typed), the
    /// link's `limit`, and `offset`.
    pub(super) fn link(&self, base: &str, filters: &[Filter], offset: u64) -> String {
        let mut out: Vec<(&str, String)> = filters
            .iter()
            .filter_map(|f| self.get(f.name).map(|v| (f.name, v.to_owned())))
            .collect();
        if let Some(limit) = self.get("limit") {
            out.push(("limit", limit.to_owned()));
        }
        if offset > 0 {
            out.push(("offset", offset.to_string()));
        }
        let q = serde_urlencoded::to_string(out).unwrap_or_default();
        if q.is_empty() {
            base.to_owned()
        } else {
            format!("{base}?{q}")
        }
    }
}

/// A list page: where its items come from and how they are shown.
pub(super) struct ListPage<'a> {
    /// The `/v1` collection (`/users`).
    pub(super) api: &'a str,
    /// The page's own address (`/dashboard/users`).
    pub(super) page: &'a str,
    pub(super) filters: &'a [Filter],
    /// Items on a page when the link names no `limit`.
    pub(super) page_size: u32,
    /// A filter's value as the API gets it (the query's by default).
    pub(super) value: fn(&Filter, &str) -> String,
    /// What the page says next to a filter the API refused.
    pub(super) words: fn(&str, &str) -> Option<String>,
    /// An item as the template shows it.
    pub(super) view: fn(&Json) -> Value,
}

/// What [`list`] found: the API's reply, its items as shown, and what the
/// template shows around them.
pub(super) struct Listed {
    pub(super) reply: Reply,
    pub(super) items: Vec<Value>,
    pub(super) problem: Option<Problem>,
    pub(super) filters: Vec<Value>,
    pub(super) more_open: bool,
    pub(super) paging: Option<Value>,
    pub(super) past_end: Option<String>,
    pub(super) filtered: bool,
}

/// One page of a list, through `/v1` as the signed-in person.
pub(super) async fn list(
    st: &AppState,
    signed: &Signed,
    q: &ListQuery,
    l: &ListPage<'_>,
) -> Listed {
    let path = format!("{}?{}", l.api, q.api_query(l.filters, l.page_size, l.value));
    let reply = signed.api(st, Method::GET, &path, None).await;
    let (field_issues, paging_refused) = refused(&reply, q, l.words);
    let items: Vec<Value> = reply
        .data()
        .as_array()
        .map(|a| a.iter().map(l.view).collect())
        .unwrap_or_default();
    let (paging, past_end) = paging(&reply, q, l.page, l.filters, items.len(), l.page_size);
    Listed {
        problem: list_problem(&reply, &field_issues, paging_refused),
        filters: filter_views(l.filters, q, &field_issues),
        more_open: more_open(l.filters, q, &field_issues),
        filtered: q.filtered(l.filters),
        reply,
        items,
        paging,
        past_end,
    }
}

/// A filter's value as typed (most filters).
pub(super) fn as_typed(_: &Filter, v: &str) -> String {
    v.to_owned()
}

/// What a refused list query means for the page: the filters' words (by
/// `words`, from the field and the value as typed), and whether the paging
/// itself (`limit`, `offset`: only a hand-made link has them) was refused.
fn refused(
    reply: &Reply,
    q: &ListQuery,
    words: impl Fn(&str, &str) -> Option<String>,
) -> (Vec<(String, String)>, bool) {
    let mut fields = Vec::new();
    let mut paging = false;
    if reply.status != StatusCode::BAD_REQUEST {
        return (fields, paging);
    }
    for d in reply.body["error"]["details"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let field = d["field"].as_str().unwrap_or("");
        match words(field, q.get(field).unwrap_or("")) {
            Some(w) => fields.push((field.to_owned(), w)),
            None => paging = true,
        }
    }
    (fields, paging)
}

/// The page's problem of a list reply: none, the filters or paging in the
/// page's words, or the API's.
fn list_problem(
    reply: &Reply,
    field_issues: &[(String, String)],
    paging_refused: bool,
) -> Option<Problem> {
    if reply.ok() {
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
    }
}

/// The filters as the form macro (`dash_macros.html`) shows them.
fn filter_views(
    filters: &[Filter],
    q: &ListQuery,
    field_issues: &[(String, String)],
) -> Vec<Value> {
    filters
        .iter()
        .map(|f| {
            let value = q.get(f.name).unwrap_or("");
            let error = field_issues
                .iter()
                .find(|(n, _)| n == f.name)
                .map(|(_, w)| w.as_str());
            let (kind, options) = match f.kind {
                Kind::Text => ("text", Vec::new()),
                Kind::Search => ("search", Vec::new()),
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
        .collect()
}

/// Whether "More filters" opens: one of them is given or refused.
fn more_open(filters: &[Filter], q: &ListQuery, field_issues: &[(String, String)]) -> bool {
    filters.iter().any(|f| {
        f.more && (q.get(f.name).is_some() || field_issues.iter().any(|(n, _)| n == f.name))
    })
}

/// "Items a–b of n" with the links to the previous and next pages (D14's
/// `meta`), and, for a page past the end (the list shrank, or a hand-made
/// offset), the link back to the first page rather than an empty one.
fn paging(
    reply: &Reply,
    q: &ListQuery,
    base: &str,
    filters: &[Filter],
    shown: usize,
    page_size: u32,
) -> (Option<Value>, Option<String>) {
    let meta = &reply.body["meta"];
    let (total, limit, offset) = (
        meta["total"].as_u64().unwrap_or(0),
        meta["limit"]
            .as_u64()
            .unwrap_or(u64::from(page_size))
            .max(1),
        meta["offset"].as_u64().unwrap_or(0),
    );
    let shown_to = offset + shown as u64;
    let past_end = (reply.ok() && shown == 0 && total > 0).then(|| q.link(base, filters, 0));
    let paging = (reply.ok() && shown > 0).then(|| {
        context! {
            first => offset + 1, last => shown_to, total,
            previous => (offset > 0).then(|| q.link(base, filters, offset.saturating_sub(limit))),
            next => (shown_to < total).then(|| q.link(base, filters, shown_to)),
        }
    });
    (paging, past_end)
}

#[cfg(test)]
mod tests {
    use super::{Filter, Kind, ListQuery};

    const FILTERS: [Filter; 2] = [
        Filter {
            name: "q",
            label: "Search",
            hint: "",
            kind: Kind::Search,
            more: false,
        },
        Filter {
            name: "from",
            label: "From",
            hint: "",
            kind: Kind::Date,
            more: false,
        },
    ];

    fn query(p: &[(&str, &str)]) -> ListQuery {
        ListQuery::from_pairs(
            p.iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        )
    }

    #[test]
    fn the_api_gets_the_filters_and_a_page_size() {
        let q = query(&[
            ("q", " ada "),
            ("from", "2025-03-01"),
            ("offset", "25"),
            ("csrf_token", "x"),
            ("q", "second"),
        ]);
        assert_eq!(
            q.api_query(&FILTERS, 25, |f, v| if f.name == "from" {
                format!("{v}T00:00:00Z")
            } else {
                v.to_owned()
            }),
            "q=ada&from=2025-03-01T00%3A00%3A00Z&limit=25&offset=25"
        );
    }

    #[test]
    fn page_links_keep_the_filters_as_typed() {
        let p = query(&[("from", "2025-03-01"), ("limit", "2"), ("q", "")]);
        assert_eq!(
            p.link("/dashboard/x", &FILTERS, 4),
            "/dashboard/x?from=2025-03-01&limit=2&offset=4"
        );
        assert!(p.filtered(&FILTERS));
        assert_eq!(query(&[]).link("/dashboard/x", &FILTERS, 0), "/dashboard/x");
        assert!(!query(&[("q", "  ")]).filtered(&FILTERS));
    }
}
