//! Events (D54): the organization's record of committed changes, listed
//! newest first or caught up with `after_sequence`. Changes write their
//! events themselves (each write's effects); this area reads them, keeps
//! them sequenced and purges them after the retention.

use gatehouse_domain::event::Event;
use gatehouse_domain::{EventId, Listing, OrgId, Page, Timestamp};
use gatehouse_store::{EventFilter, EventStore};

use crate::error::{AppError, AppResult, OrApp};
use crate::{App, Resource};

/// D54 (D40 continued): how long events are kept by default.
pub const DEFAULT_RETENTION_SECS: i64 = 30 * 86_400;

/// How long a read of events waits for the events written before it to be
/// sequenced.
const READ_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// Events deleted per purge statement: small batches, so a purge never
/// holds up writers for long.
const PURGE_BATCH: u32 = 1_000;

impl App {
    /// Sets how long events are kept (`GATEHOUSE_EVENT_RETENTION`, D54);
    /// before the App is shared.
    pub fn with_event_retention_secs(mut self, secs: i64) -> Self {
        std::sync::Arc::get_mut(&mut self.0)
            .expect("the retention is set before the App is shared")
            .event_retention_secs = secs.max(1);
        self
    }

    pub fn event_retention_secs(&self) -> i64 {
        self.0.event_retention_secs
    }

    /// D54: the events of `org` under `filter`, newest first (D14 continued).
    pub async fn list_events(
        &self,
        org: &OrgId,
        filter: &EventFilter,
        page: Page,
    ) -> AppResult<Listing<Event>> {
        self.sequence_committed().await;
        event_store(self)
            .list_events(org, filter, page)
            .await
            .or_app(Resource::Event)
    }

    /// D32 (continued): `/v2`'s page of events, newest first, older than
    /// the event `cursor` (from the newest without one); `None` when the
    /// cursor is not an event of `org`. Sequences once for the cursor's
    /// look-up and the page together.
    pub async fn events_before(
        &self,
        org: &OrgId,
        filter: &EventFilter,
        cursor: Option<&EventId>,
        limit: u32,
    ) -> AppResult<Option<Vec<Event>>> {
        self.sequence_committed().await;
        let store = event_store(self);
        let mut filter = filter.clone();
        if let Some(id) = cursor {
            match store.get_event(org, id).await.or_app(Resource::Event)? {
                Some(e) => filter.before_sequence = Some(e.sequence),
                None => return Ok(None),
            }
        }
        let page = Page { limit, offset: 0 };
        let listing = store
            .list_events(org, &filter, page)
            .await
            .or_app(Resource::Event)?;
        Ok(Some(listing.items))
    }

    /// D54's catch-up: the events after sequence `after`, oldest first.
    pub async fn events_after(
        &self,
        org: &OrgId,
        filter: &EventFilter,
        after: i64,
        limit: u32,
    ) -> AppResult<Listing<Event>> {
        self.sequence_committed().await;
        event_store(self)
            .events_after(org, filter, after, limit)
            .await
            .or_app(Resource::Event)
    }

    pub async fn get_event(&self, org: &OrgId, id: &EventId) -> AppResult<Event> {
        self.sequence_committed().await;
        event_store(self)
            .get_event(org, id)
            .await
            .or_app(Resource::Event)?
            .ok_or(AppError::NotFound(Resource::Event))
    }

    /// The sequencing job (D54, D44 continued): gives committed events
    /// their sequences; answers how many.
    pub async fn sequence_events(&self) -> AppResult<u64> {
        event_store(self)
            .sequence_events()
            .await
            .or_app(Resource::Storage)
    }

    /// Sequences what was written before a read began, so a client sees
    /// its own writes' events at once. Where sequencing follows commit
    /// (PostgreSQL), that waits for the transactions still running that
    /// could hold an earlier ticket: milliseconds, at most [`READ_WAIT`]
    /// (a long-running writer elsewhere); then the read goes on with what
    /// is sequenced, and the job carries on. A failure is the job's to
    /// retry too.
    pub(crate) async fn sequence_committed(&self) {
        let store = event_store(self);
        let result: Result<(), gatehouse_store::StoreError> = async {
            let mark = store.event_mark().await?;
            let deadline = std::time::Instant::now() + READ_WAIT;
            loop {
                store.sequence_events().await?;
                if store.sequenced_through(mark).await? || std::time::Instant::now() > deadline {
                    return Ok(());
                }
                tokio::time::sleep(std::time::Duration::from_millis(5)).await;
            }
        }
        .await;
        if let Err(e) = result {
            tracing::warn!(error = %e, "sequencing events before a read failed");
        }
    }

    /// Deletes the events older than `retention_secs` before `now`, in
    /// small batches; answers how many.
    pub async fn purge_events(&self, now: Timestamp, retention_secs: i64) -> AppResult<u64> {
        let before = now.plus_seconds(-retention_secs);
        let mut purged = 0;
        loop {
            let n = event_store(self)
                .purge_events(before, PURGE_BATCH)
                .await
                .or_app(Resource::Storage)?;
            purged += n;
            if n < u64::from(PURGE_BATCH) {
                return Ok(purged);
            }
        }
    }
}

/// This area's view of storage: the `EventStore` trait only (issue 25).
fn event_store(app: &App) -> &dyn EventStore {
    app.0.store.as_ref()
}
