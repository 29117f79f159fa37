//! Lists, filters, search and paging of users (D14) and products (D17),
//! with the same semantics as the SQLite backend.

use gatehouse_domain::values::fold_case;
use gatehouse_domain::{Listing, OrgId, Page, Product, ProductStatus, Role, User, UserStatus};
use gatehouse_store::{ProductFilter, UserFilter};
use sqlx_core::query_builder::QueryBuilder;
use sqlx_core::query_scalar::query_scalar;
use sqlx_core::row::Row;
use sqlx_postgres::{PgConnection, PgRow, Postgres};

use crate::TxResult;
use crate::rows::{PRODUCT_COLS, RowResult, USER_COLS, product_row, user_row};

/// `text` as a LIKE pattern matching itself anywhere: `%`, `_` and the
/// escape character are literal (D9), used with `ESCAPE '\'`.
pub(crate) fn contains_pattern(text: &str) -> String {
    let mut p = String::with_capacity(text.len() + 2);
    p.push('%');
    for ch in text.chars() {
        if matches!(ch, '%' | '_' | '\\') {
            p.push('\\');
        }
        p.push(ch);
    }
    p.push('%');
    p
}

/// D17 as a tsquery: every word a prefix of a stored word (`'blue':* &
/// 'sh':*`). Words are runs of letters and digits, so quoting is only
/// belt and braces.
pub(crate) fn prefix_tsquery(words: &[String]) -> String {
    words
        .iter()
        .map(|w| format!("'{}':*", w.replace('\\', "\\\\").replace('\'', "''")))
        .collect::<Vec<_>>()
        .join(" & ")
}

/// Which table a list reads and how its rows decode.
pub(crate) struct Table<T> {
    pub name: &'static str,
    pub cols: &'static str,
    pub counts: &'static str,
    pub map: fn(&PgRow) -> RowResult<T>,
}

pub(crate) const USERS: Table<User> = Table {
    name: "users",
    cols: USER_COLS,
    counts: "user_counts",
    map: user_row,
};

pub(crate) const PRODUCTS: Table<Product> = Table {
    name: "products",
    cols: PRODUCT_COLS,
    counts: "product_counts",
    map: product_row,
};

/// The equality filters of a list (the columns of its counters too).
#[derive(Clone, Copy, Default)]
pub(crate) struct Filters {
    role: Option<Role>,
    user_status: Option<UserStatus>,
    product_status: Option<ProductStatus>,
}

impl Filters {
    fn push(&self, qb: &mut QueryBuilder<'_, Postgres>, org: &OrgId) {
        qb.push(" WHERE org_id = ")
            .push_bind(org.as_str().to_owned());
        if let Some(role) = self.role {
            qb.push(" AND role = ").push_bind(role.as_str());
        }
        if let Some(status) = self.user_status {
            qb.push(" AND status = ").push_bind(status.as_str());
        }
        if let Some(status) = self.product_status {
            qb.push(" AND status = ").push_bind(status.as_str());
        }
    }
}

/// A search condition on top of the filters.
#[derive(Clone)]
pub(crate) enum Search {
    /// D14, three characters or more: a trigram-indexed LIKE on both columns.
    UserLike { name: String, email: String },
    /// D14, shorter than a trigram (or without a letter or digit): a scan of
    /// the organization's rows, as on SQLite, by position so nothing is a
    /// pattern.
    UserShort { name: String, email: String },
    /// D17: the tsquery of the query's words.
    ProductWords(String),
    /// A `q` with a control character matches nothing (D6 continued,
    /// [`gatehouse_domain::SearchText::matches_nothing`]). PostgreSQL text
    /// cannot even carry a NUL, so such a `q` must not reach the database.
    Nothing,
}

impl Search {
    fn push(&self, qb: &mut QueryBuilder<'_, Postgres>) {
        match self {
            Search::UserLike { name, email } => {
                qb.push(" AND (name_fold LIKE ")
                    .push_bind(name.clone())
                    .push(" ESCAPE '\\' OR email_norm LIKE ")
                    .push_bind(email.clone())
                    .push(" ESCAPE '\\')");
            }
            Search::UserShort { name, email } => {
                qb.push(" AND (strpos(name_fold, ")
                    .push_bind(name.clone())
                    .push(") > 0 OR strpos(email_norm, ")
                    .push_bind(email.clone())
                    .push(") > 0)");
            }
            Search::Nothing => {
                qb.push(" AND false");
            }
            Search::ProductWords(tsquery) => {
                qb.push(" AND words @@ ")
                    .push_bind(tsquery.clone())
                    .push("::tsquery");
            }
        }
    }
}

/// A list request reduced to filters and an optional search.
#[derive(Clone)]
pub(crate) struct Query {
    filters: Filters,
    search: Option<Search>,
}

impl Query {
    pub(crate) fn users(f: &UserFilter) -> Self {
        let search = f.q.as_ref().map(|q| {
            if q.matches_nothing() {
                return Search::Nothing;
            }
            let text = q.as_str();
            // The same case folding as `name_fold` (lower case) and as
            // `email_norm`'s local part (full folding, D8 revised). A
            // domain is keyed by its A-label, so a Unicode domain in `q`
            // finds no e-mail here (SQLite searches the stored form).
            let folded = text.to_lowercase();
            let email_folded = fold_case(text);
            // A pattern without a letter or digit yields no trigram, and the
            // index would have to be read whole: scan the organization instead.
            if text.chars().count() >= 3 && folded.chars().any(char::is_alphanumeric) {
                Search::UserLike {
                    name: contains_pattern(&folded),
                    email: contains_pattern(&email_folded),
                }
            } else {
                Search::UserShort {
                    name: folded,
                    email: email_folded,
                }
            }
        });
        Self {
            filters: Filters {
                role: f.role,
                user_status: f.status,
                product_status: None,
            },
            search,
        }
    }

    pub(crate) fn products(f: &ProductFilter) -> Self {
        let words = f.q.as_ref().map(|q| q.words()).unwrap_or_default();
        let search = if f.q.as_ref().is_some_and(|q| q.matches_nothing()) {
            Some(Search::Nothing)
        } else {
            // A `q` with no words filters nothing (D17, as on SQLite).
            (!words.is_empty()).then(|| Search::ProductWords(prefix_tsquery(&words)))
        };
        Self {
            filters: Filters {
                product_status: f.status,
                ..Filters::default()
            },
            search,
        }
    }

    fn push_where(&self, qb: &mut QueryBuilder<'_, Postgres>, org: &OrgId) {
        self.filters.push(qb, org);
        if let Some(s) = &self.search {
            s.push(qb);
        }
    }
}

fn offset(page: Page) -> i64 {
    page.offset.min(i64::MAX as u64) as i64
}

/// One page of a list with its exact total (D14).
pub(crate) async fn page<T>(
    c: &mut PgConnection,
    table: &Table<T>,
    org: &OrgId,
    q: &Query,
    page: Page,
) -> TxResult<Listing<T>> {
    if q.search.is_none() {
        // The total from the counters the triggers keep: O(1), not a count
        // of a million rows.
        let mut qb = QueryBuilder::new(format!(
            "SELECT coalesce(sum(n), 0)::bigint FROM {}",
            table.counts
        ));
        q.filters.push(&mut qb, org);
        let total: i64 = qb.build_query_scalar().fetch_one(&mut *c).await?;
        let total = total.max(0) as u64;
        let items = if page.offset >= total {
            Vec::new()
        } else {
            let mut qb = QueryBuilder::new(format!("SELECT {} FROM {}", table.cols, table.name));
            q.push_where(&mut qb, org);
            push_order_and_page(&mut qb, page);
            let rows = qb.build().fetch_all(&mut *c).await?;
            rows.iter().map(table.map).collect::<RowResult<Vec<T>>>()?
        };
        return Ok(Listing { items, total });
    }
    // A search: the page and the number of all matches in one pass
    // (`count(*) OVER ()`), so the matches are found once.
    let n = table.cols.split(',').count();
    let mut qb = QueryBuilder::new(format!(
        "SELECT {}, count(*) OVER () FROM {}",
        table.cols, table.name
    ));
    q.push_where(&mut qb, org);
    push_order_and_page(&mut qb, page);
    let rows = qb.build().fetch_all(&mut *c).await?;
    let mut items = Vec::with_capacity(rows.len());
    let mut total = None;
    for r in &rows {
        items.push((table.map)(r)?);
        total = Some(r.try_get::<i64, _>(n)?.max(0) as u64);
    }
    let total = match total {
        Some(t) => t,
        None if page.offset == 0 => 0,
        // Past the end: an empty page with the true total (D14).
        None => {
            let mut qb = QueryBuilder::new(format!("SELECT count(*) FROM {}", table.name));
            q.push_where(&mut qb, org);
            let t: i64 = qb.build_query_scalar().fetch_one(&mut *c).await?;
            t.max(0) as u64
        }
    };
    Ok(Listing { items, total })
}

fn push_order_and_page(qb: &mut QueryBuilder<'_, Postgres>, page: Page) {
    qb.push(" ORDER BY created_at DESC, id DESC LIMIT ")
        .push_bind(i64::from(page.limit))
        .push(" OFFSET ")
        .push_bind(offset(page));
}

/// D32: up to `limit` rows strictly after the row `after` in the list order;
/// `None` when `after` is not a row of the organization.
pub(crate) async fn after<T>(
    c: &mut PgConnection,
    table: &Table<T>,
    org: &OrgId,
    q: &Query,
    after: Option<&str>,
    limit: u32,
) -> TxResult<Option<Vec<T>>> {
    let mut qb = QueryBuilder::new(format!("SELECT {} FROM {}", table.cols, table.name));
    q.push_where(&mut qb, org);
    if let Some(id) = after {
        let at: Option<i64> = query_scalar(&format!(
            "SELECT created_at FROM {} WHERE id = $1 AND org_id = $2",
            table.name
        ))
        .bind(id)
        .bind(org.as_str())
        .fetch_optional(&mut *c)
        .await?;
        let Some(at) = at else { return Ok(None) };
        // A row comparison in the index's order: a range scan from the cursor.
        qb.push(" AND (created_at, id) < (")
            .push_bind(at)
            .push(", ")
            .push_bind(id.to_owned())
            .push(")");
    }
    qb.push(" ORDER BY created_at DESC, id DESC LIMIT ")
        .push_bind(i64::from(limit));
    let rows = qb.build().fetch_all(&mut *c).await?;
    Ok(Some(
        rows.iter().map(table.map).collect::<RowResult<Vec<T>>>()?,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn like_patterns_are_literal() {
        assert_eq!(contains_pattern("a_1"), "%a\\_1%");
        assert_eq!(contains_pattern("100%"), "%100\\%%");
        assert_eq!(contains_pattern("a\\b"), "%a\\\\b%");
        assert_eq!(contains_pattern("ce ho"), "%ce ho%");
    }

    #[test]
    fn product_queries_are_word_prefixes() {
        let words = vec!["blue".to_owned(), "sh".to_owned()];
        assert_eq!(prefix_tsquery(&words), "'blue':* & 'sh':*");
        assert_eq!(prefix_tsquery(&["o'k".to_owned()]), "'o''k':*");
    }
}
