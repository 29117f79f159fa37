//! What the in-memory search index (issue 16, `gatehouse-app::search`)
//! reads: an organization's whole list once, then only what changed.

use async_trait::async_trait;
use gatehouse_domain::search::{SearchKind, SearchRow};
use gatehouse_domain::{OrgId, Product, Timestamp, User};

use crate::StoreResult;

/// A row of the index from its stored columns, the one decoding both
/// backends call: `codes` are a user's role and status, or a product's
/// status (the second unused). `Err` names the column whose text no record
/// can hold, with that text, for the backend's corrupt-row error.
pub fn indexed_row(
    kind: SearchKind,
    (created_at, id): (i64, String),
    (name, other): (&str, &str),
    codes: [Option<&str>; 2],
) -> Result<SearchRow, (&'static str, String)> {
    use gatehouse_domain::{ProductStatus, Role, UserStatus, search};
    fn parse<T, E>(
        column: &'static str,
        text: Option<&str>,
        f: impl Fn(&str) -> Result<T, E>,
    ) -> Result<T, (&'static str, String)> {
        let text = text.unwrap_or_default();
        f(text).map_err(|_| (column, text.to_owned()))
    }
    let (text, attrs) = match kind {
        SearchKind::Users => (
            search::user_text(name, other),
            search::user_attrs(
                parse("role", codes[0], Role::parse)?,
                parse("status", codes[1], UserStatus::parse)?,
            ),
        ),
        SearchKind::Products => (
            search::product_text(name, other),
            search::product_attrs(parse("status", codes[0], ProductStatus::parse)?),
        ),
    };
    Ok(SearchRow {
        created_at,
        id,
        text,
        attrs,
    })
}

/// The rows changed since a mark, and the mark to ask from next time.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SearchChanges {
    pub mark: i64,
    /// `(created_at, id)` of every row inserted, deleted, or changed in a
    /// searched field or a filter since the mark asked from (a row may be
    /// reported more than once, and some earlier changes again).
    pub changed: Vec<(i64, String)>,
}

/// Reads for the search index. Every change to `users` and `products`
/// (from any process or node, the operator CLI included) is recorded in the
/// change's own transaction, by the database's triggers.
#[async_trait]
pub trait SearchStore: Send + Sync {
    /// A mark to read changes from: taken before [`SearchStore::search_rows`],
    /// every change the rows might miss comes after it.
    async fn search_mark(&self) -> StoreResult<i64>;
    /// Every row of the organization's list as the index holds it, in list
    /// order (`created_at` descending, then `id` descending).
    async fn search_rows(&self, org: &OrgId, kind: SearchKind) -> StoreResult<Vec<SearchRow>>;
    /// The rows of the organization's list changed after `since` was taken:
    /// every change committed after it is reported, either now or on a later
    /// call from the mark this one returns.
    async fn search_changes(
        &self,
        org: &OrgId,
        kind: SearchKind,
        since: i64,
    ) -> StoreResult<SearchChanges>;
    /// The users of these ids that exist in the organization, in any order.
    async fn users_by_ids(&self, org: &OrgId, ids: &[String]) -> StoreResult<Vec<User>>;
    /// The products of these ids that exist in the organization, in any order.
    async fn products_by_ids(&self, org: &OrgId, ids: &[String]) -> StoreResult<Vec<Product>>;
    /// Forgets changes recorded before `before` (an index that has not
    /// looked since reads the whole list again). Returns how many.
    async fn prune_search_changes(&self, before: Timestamp) -> StoreResult<u64>;
}
