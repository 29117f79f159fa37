//! Lists with `q`, and deep pages, through the in-memory search index
//! (issue 16, `gatehouse-search`), kept in step with storage.
//!
//! - **The one search.** Storage has no search of its own (issue 25: its
//!   list filters have no `q`): every `q`, on every backend, is answered
//!   here, so D14 and D17 are decided in one place
//!   (`gatehouse_domain::search`).
//! - **Which lists.** Every list or cursor page with `q`, and every offset
//!   page from [`DEEP_OFFSET`] on. A shallow page without `q` reads its
//!   index in storage directly (a few rows, exact counters), as before.
//! - **In step with every writer.** Storage records every change to the
//!   searched fields in the change's own transaction (migration 12, both
//!   backends). Before each search the index asks storage for the changes
//!   since its mark (one small query) and applies them, so a search sees
//!   every write committed before it began, on any node, from the operator
//!   CLI too, with `total` exact (D14, D14 (revised)).
//! - **What it answers.** The ids of the page and the total; the page's rows
//!   are then read from storage by id (one query), so what a client sees of
//!   a row is never older than the search.
//! - **Memory.** An index is built on an organization's first search (about
//!   90 MB and a second or two per million rows), and dropped after
//!   [`IDLE_SECS`] without one. An index that has not caught up for
//!   [`RELOAD_SECS`] reads its list again: storage keeps changes for 30
//!   minutes (`prune_search_changes`).
//! - **Fair to point reads.** Scans run on the blocking pool, at most one
//!   fewer at once than the machine has cores, so a burst of slow searches
//!   leaves a core to every other request.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use gatehouse_domain::search::{self, Needles, SearchKind, product_needles, user_needles};
use gatehouse_domain::{
    Listing, OrgId, Page, Product, ProductId, ProductStatus, Role, SearchText, Timestamp, User,
    UserId, UserStatus,
};
use gatehouse_search::{Filter, Hits, Index};
use gatehouse_store::{SearchStore, StoreError, StoreResult};
use tokio::sync::Semaphore;

use crate::error::{AppResult, OrApp};
use crate::{App, Resource};

/// The user list's filters and search (interface.md §4.3, D14). Storage
/// knows only the equality filters ([`UserFilter::equality`]); `q` is
/// answered here, from the index.
#[derive(Clone, Debug, Default)]
pub struct UserFilter {
    pub role: Option<Role>,
    pub status: Option<UserStatus>,
    /// Case-insensitive substring of `name` or `email` (D14).
    pub q: Option<SearchText>,
}

impl UserFilter {
    /// The filters storage applies (everything but `q`).
    pub fn equality(&self) -> gatehouse_store::UserFilter {
        gatehouse_store::UserFilter {
            role: self.role,
            status: self.status,
        }
    }
}

/// The product list's filter and search (interface.md §4.4, D17).
#[derive(Clone, Debug, Default)]
pub struct ProductFilter {
    pub status: Option<ProductStatus>,
    /// Every word must be a prefix of a word of `name` or `sku` (D17).
    pub q: Option<SearchText>,
}

impl ProductFilter {
    /// The filter storage applies (everything but `q`).
    pub fn equality(&self) -> gatehouse_store::ProductFilter {
        gatehouse_store::ProductFilter {
            status: self.status,
        }
    }
}

/// Offset pages from here on go through the index (a storage index walks
/// every skipped row: 40+ ms at offset 500,000).
pub const DEEP_OFFSET: u64 = 5_000;
/// An index not used for this long is dropped.
pub const IDLE_SECS: u64 = 15 * 60;
/// An index that has not caught up for this long reads its list again
/// (storage keeps changes for [`CHANGES_KEPT_SECS`]).
pub const RELOAD_SECS: u64 = 20 * 60;
/// How long storage keeps recorded changes.
pub const CHANGES_KEPT_SECS: i64 = 30 * 60;
/// Above this many changes at once (a bulk import, a staging reset) the
/// list is read again instead of applying them one by one.
const REBUILD_ABOVE: usize = 20_000;

struct Loaded {
    index: Index,
    mark: i64,
    /// When the last catch-up began (it covers every write committed before).
    synced: Instant,
}

#[derive(Default)]
struct Entry {
    /// One catch-up at a time per index.
    sync: tokio::sync::Mutex<()>,
    state: RwLock<Option<Loaded>>,
    used: Mutex<Option<Instant>>,
}

/// Every search index of this process.
pub(crate) struct SearchIndexes {
    entries: Mutex<HashMap<(OrgId, SearchKind), Arc<Entry>>>,
    scans: Arc<Semaphore>,
}

impl SearchIndexes {
    pub(crate) fn new() -> Self {
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        Self {
            entries: Mutex::default(),
            scans: Arc::new(Semaphore::new(cores.saturating_sub(1).max(1))),
        }
    }

    fn entry(&self, org: &OrgId, kind: SearchKind) -> Arc<Entry> {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        let entry = entries.entry((org.clone(), kind)).or_default().clone();
        *entry.used.lock().unwrap_or_else(|e| e.into_inner()) = Some(Instant::now());
        entry
    }

    /// Drops the indexes not used for [`IDLE_SECS`]; returns how many are left.
    pub(crate) fn evict_idle(&self) -> usize {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries.retain(|_, e| {
            e.used
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .is_some_and(|at| at.elapsed() < Duration::from_secs(IDLE_SECS))
        });
        entries.len()
    }

    /// The entry of `org`'s `kind` list, caught up with storage.
    async fn fresh(
        &self,
        store: &dyn SearchStore,
        org: &OrgId,
        kind: SearchKind,
    ) -> StoreResult<Arc<Entry>> {
        let entry = self.entry(org, kind);
        let began = Instant::now();
        let _one = entry.sync.lock().await;
        let known = {
            let state = entry.state.read().unwrap_or_else(|e| e.into_inner());
            match state.as_ref() {
                // A catch-up that began after this request did (while it
                // waited for the lock) already covers every write committed
                // before the request: searches waiting together share one.
                Some(l) if l.synced >= began => return Ok(entry.clone()),
                Some(l) if l.synced.elapsed() < Duration::from_secs(RELOAD_SECS) => Some(l.mark),
                _ => None,
            }
        };
        if let Some(mark) = known {
            let sync_began = Instant::now();
            let changes = store.search_changes(org, kind, mark).await?;
            if changes.changed.len() <= REBUILD_ABOVE {
                let current = if changes.changed.is_empty() {
                    Vec::new()
                } else {
                    let mut ids: Vec<String> =
                        changes.changed.iter().map(|(_, id)| id.clone()).collect();
                    ids.sort_unstable();
                    ids.dedup();
                    index_rows(store, org, kind, &ids).await?
                };
                // On the blocking pool: taking the write lock waits for the
                // scans in progress, which must not stall an async worker.
                let target = entry.clone();
                tokio::task::spawn_blocking(move || {
                    let mut state = target.state.write().unwrap_or_else(|e| e.into_inner());
                    if let Some(loaded) = state.as_mut() {
                        loaded.index.apply(&changes.changed, current);
                        loaded.mark = changes.mark;
                        loaded.synced = sync_began;
                    }
                })
                .await
                .map_err(|e| StoreError::Internal(format!("updating a search index: {e}")))?;
                return Ok(entry.clone());
            }
        }
        // First use, idle too long, or too many changes: read the list.
        let sync_began = Instant::now();
        let mark = store.search_mark().await?;
        let rows = store.search_rows(org, kind).await?;
        let target = entry.clone();
        let (len, bytes) = tokio::task::spawn_blocking(move || {
            let index = Index::from_rows(rows);
            let built = (index.len(), index.bytes());
            *target.state.write().unwrap_or_else(|e| e.into_inner()) = Some(Loaded {
                index,
                mark,
                synced: sync_began,
            });
            built
        })
        .await
        .map_err(|e| StoreError::Internal(format!("building a search index: {e}")))?;
        tracing::debug!(org = %org, kind = kind.as_str(), rows = len, bytes, "search index built");
        Ok(entry.clone())
    }

    /// Runs `f` on the caught-up index of `org`'s `kind` list, on the
    /// blocking pool, within the scan limit.
    async fn with_index<T: Send + 'static>(
        &self,
        store: &dyn SearchStore,
        org: &OrgId,
        kind: SearchKind,
        scan: bool,
        f: impl FnOnce(&Index) -> T + Send + 'static,
    ) -> StoreResult<T> {
        let entry = self.fresh(store, org, kind).await?;
        // Only a scan (a `q`) waits for the scan limit: a page without `q`
        // skips whole chunks by their counts, microseconds, and must not
        // queue behind searches.
        let permit = if scan {
            Some(
                self.scans
                    .clone()
                    .acquire_owned()
                    .await
                    .map_err(|_| StoreError::Unavailable("shutting down".into()))?,
            )
        } else {
            None
        };
        tokio::task::spawn_blocking(move || {
            let _permit = permit;
            let state = entry.state.read().unwrap_or_else(|e| e.into_inner());
            match state.as_ref() {
                Some(loaded) => Ok(f(&loaded.index)),
                None => Err(StoreError::Internal("a search index vanished".into())),
            }
        })
        .await
        .map_err(|e| StoreError::Internal(format!("a search scan failed: {e}")))?
    }
}

/// What differs between the two searched lists: everything else of a
/// search (the index, the catch-up, paging, reading the page's rows) is
/// written once, below.
pub(crate) trait Searched: Sized + Send + 'static {
    type Filter;
    type Id: Sync;
    const KIND: SearchKind;
    const RESOURCE: Resource;
    /// The needles (`None`: nothing can match) and filter codes of `f`.
    fn terms(f: &Self::Filter) -> (Needles, Filter);
    fn has_q(f: &Self::Filter) -> bool;
    fn id(&self) -> &str;
    fn created_at(&self) -> Timestamp;
    /// What the index holds of the row.
    fn row(&self) -> search::SearchRow;
    fn by_ids(
        store: &dyn SearchStore,
        org: &OrgId,
        ids: &[String],
    ) -> impl Future<Output = StoreResult<Vec<Self>>> + Send;
    fn get(
        store: &dyn SearchStore,
        org: &OrgId,
        id: &Self::Id,
    ) -> impl Future<Output = StoreResult<Option<Self>>> + Send;
}

impl Searched for User {
    type Filter = UserFilter;
    type Id = UserId;
    const KIND: SearchKind = SearchKind::Users;
    const RESOURCE: Resource = Resource::User;
    fn terms(f: &UserFilter) -> (Needles, Filter) {
        let needles = f.q.as_ref().map_or(Some(Vec::new()), user_needles);
        (needles, Filter(search::user_filter_codes(f.role, f.status)))
    }
    fn has_q(f: &UserFilter) -> bool {
        f.q.is_some()
    }
    fn id(&self) -> &str {
        self.id.as_str()
    }
    fn created_at(&self) -> Timestamp {
        self.created_at
    }
    fn row(&self) -> search::SearchRow {
        search::user_row(self)
    }
    async fn by_ids(
        store: &dyn SearchStore,
        org: &OrgId,
        ids: &[String],
    ) -> StoreResult<Vec<Self>> {
        store.users_by_ids(org, ids).await
    }
    async fn get(store: &dyn SearchStore, org: &OrgId, id: &UserId) -> StoreResult<Option<Self>> {
        Ok(store.users_by_ids(org, &[id.to_string()]).await?.pop())
    }
}

impl Searched for Product {
    type Filter = ProductFilter;
    type Id = ProductId;
    const KIND: SearchKind = SearchKind::Products;
    const RESOURCE: Resource = Resource::Product;
    fn terms(f: &ProductFilter) -> (Needles, Filter) {
        let needles = f.q.as_ref().map_or(Some(Vec::new()), product_needles);
        (needles, Filter(search::product_filter_codes(f.status)))
    }
    fn has_q(f: &ProductFilter) -> bool {
        f.q.is_some()
    }
    fn id(&self) -> &str {
        self.id.as_str()
    }
    fn created_at(&self) -> Timestamp {
        self.created_at
    }
    fn row(&self) -> search::SearchRow {
        search::product_row(self)
    }
    async fn by_ids(
        store: &dyn SearchStore,
        org: &OrgId,
        ids: &[String],
    ) -> StoreResult<Vec<Self>> {
        store.products_by_ids(org, ids).await
    }
    async fn get(
        store: &dyn SearchStore,
        org: &OrgId,
        id: &ProductId,
    ) -> StoreResult<Option<Self>> {
        Ok(store.products_by_ids(org, &[id.to_string()]).await?.pop())
    }
}

/// The rows with these ids, in the order of `ids` (rows deleted since the
/// search are left out); no query for none.
async fn rows_in_order<T: Searched>(
    store: &dyn SearchStore,
    org: &OrgId,
    ids: &[String],
) -> StoreResult<Vec<T>> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let rows = T::by_ids(store, org, ids).await?;
    let mut by_id: HashMap<String, T> = rows.into_iter().map(|r| (r.id().to_owned(), r)).collect();
    Ok(ids.iter().filter_map(|i| by_id.remove(i)).collect())
}

/// What the index holds of the rows with these ids (a catch-up).
async fn index_rows(
    store: &dyn SearchStore,
    org: &OrgId,
    kind: SearchKind,
    ids: &[String],
) -> StoreResult<Vec<search::SearchRow>> {
    async fn rows<T: Searched>(
        store: &dyn SearchStore,
        org: &OrgId,
        ids: &[String],
    ) -> StoreResult<Vec<search::SearchRow>> {
        Ok(T::by_ids(store, org, ids)
            .await?
            .iter()
            .map(T::row)
            .collect())
    }
    match kind {
        SearchKind::Users => rows::<User>(store, org, ids).await,
        SearchKind::Products => rows::<Product>(store, org, ids).await,
    }
}

impl App {
    /// Whether an offset page goes through the index (see the module).
    pub(crate) fn searches(q: bool, page: Page) -> bool {
        q || page.offset >= DEEP_OFFSET
    }

    /// An offset page of `T`'s list through the index.
    pub(crate) async fn search_page<T: Searched>(
        &self,
        org: &OrgId,
        filter: &T::Filter,
        page: Page,
    ) -> AppResult<Listing<T>> {
        let (needles, f) = T::terms(filter);
        let hits: Hits = self
            .0
            .search
            .with_index(
                search_store(self),
                org,
                T::KIND,
                T::has_q(filter),
                move |index| index.page(&needles, f, page.offset, page.limit),
            )
            .await
            .or_app(T::RESOURCE)?;
        Ok(Listing {
            items: rows_in_order(search_store(self), org, &hits.ids)
                .await
                .or_app(T::RESOURCE)?,
            total: hits.total,
        })
    }

    /// A cursor page (D32) of `T`'s list with `q` through the index; `None`
    /// when `after` is not in the list.
    pub(crate) async fn search_after<T: Searched>(
        &self,
        org: &OrgId,
        filter: &T::Filter,
        after: Option<&T::Id>,
        limit: u32,
    ) -> AppResult<Option<Vec<T>>> {
        let key = match after {
            None => None,
            Some(id) => match T::get(search_store(self), org, id)
                .await
                .or_app(T::RESOURCE)?
            {
                None => return Ok(None),
                Some(row) => Some((row.created_at().millis(), row.id().to_owned())),
            },
        };
        let (needles, f) = T::terms(filter);
        let ids = self
            .0
            .search
            .with_index(search_store(self), org, T::KIND, true, move |index| {
                index.after(
                    &needles,
                    f,
                    key.as_ref().map(|(at, id)| (*at, id.as_str())),
                    limit,
                )
            })
            .await
            .or_app(T::RESOURCE)?;
        Ok(Some(
            rows_in_order(search_store(self), org, &ids)
                .await
                .or_app(T::RESOURCE)?,
        ))
    }

    /// Housekeeping for the serving loop: drops idle indexes and the changes
    /// storage no longer needs to keep.
    pub async fn search_housekeeping(&self, now: Timestamp) -> AppResult<()> {
        self.0.search.evict_idle();
        search_store(self)
            .prune_search_changes(now.plus_seconds(-CHANGES_KEPT_SECS))
            .await
            .or_app(Resource::Storage)?;
        Ok(())
    }
}

/// This area's view of storage: the `SearchStore` trait only (issue 25).
fn search_store(app: &App) -> &dyn SearchStore {
    app.0.store.as_ref()
}
