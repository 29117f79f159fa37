//! SQLite: events (D54). SQLite serializes writers, so the transaction that
//! writes an event gives it its organization's next `sequence`
//! ([`insert_events`]): commit order and no gaps, with no wait a writer
//! would not have anyway. `sequence_events` has nothing to do.

use gatehouse_domain::EventId;
use gatehouse_domain::event::{Event, NewEvent};
use gatehouse_store::{
    EVENT_COLS, EventFilter, EventParam, EventRow, EventStore, actor_columns, decode_event,
    event_where,
};
use rusqlite::types::Value;

use super::*;
use crate::pool::WriteTx;
use crate::rows::corrupt;

/// Writes a change's events with `org`'s next sequences, in order, inside
/// its transaction: one update of the organization's head for them all;
/// each with its audit entry (D58).
pub(crate) fn insert_events(
    c: &WriteTx<'_, '_>,
    org: &OrgId,
    events: &[std::borrow::Cow<'_, NewEvent>],
) -> StoreResult<()> {
    if events.is_empty() {
        return Ok(());
    }
    let n = events.len() as i64;
    let last: i64 = c
        .prepare_cached(
            "INSERT INTO event_heads (org_id, last_sequence) VALUES (?1, ?2)
             ON CONFLICT (org_id) DO UPDATE SET last_sequence = last_sequence + ?2
             RETURNING last_sequence",
        )
        .and_then(|mut s| s.query_row(params![org.as_str(), n], |r| r.get(0)))
        .map_err(db_err)?;
    let mut insert = c
        .prepare_cached(
            "INSERT INTO events (id, org_id, sequence, type, object_id, created_at, actor_type,
                                 actor_id, actor_client_id, request_id, idempotency_key, object,
                                 previous)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
        )
        .map_err(db_err)?;
    for (i, e) in events.iter().enumerate() {
        let (actor_type, actor_id, actor_client_id) = actor_columns(&e.origin.actor);
        let request = e.origin.request.as_ref();
        insert
            .execute(params![
                e.id.as_str(),
                org.as_str(),
                last - n + 1 + i as i64,
                e.kind.as_str(),
                e.object_id,
                e.created_at.millis(),
                actor_type,
                actor_id,
                actor_client_id,
                request.map(|r| r.id.as_str()),
                request.and_then(|r| r.idempotency_key.as_deref()),
                e.object,
                e.previous,
            ])
            .map_err(db_err)?;
        // D58: the entry that records the change, beside its event.
        if let Some(entry) = gatehouse_domain::audit::of_event(e) {
            crate::audit::insert_audit(c, org, &gatehouse_store::AuditRow::of(&entry))?;
        }
    }
    Ok(())
}

fn event_row(r: &Row<'_>) -> rusqlite::Result<Event> {
    let row = EventRow {
        id: r.get(0)?,
        sequence: r.get(1)?,
        kind: r.get(2)?,
        object_id: r.get(3)?,
        created_at: r.get(4)?,
        actor_type: r.get(5)?,
        actor_id: r.get(6)?,
        actor_client_id: r.get(7)?,
        request_id: r.get(8)?,
        idempotency_key: r.get(9)?,
        object: r.get(10)?,
        previous: r.get(11)?,
    };
    let id = row.id.clone();
    decode_event(row)
        .map_err(|(column, text)| corrupt("events", column, &id, &format!("holds {text:?}")))
}

fn values(params: Vec<EventParam>) -> Vec<Value> {
    params
        .into_iter()
        .map(|p| match p {
            EventParam::Text(t) => Value::Text(t),
            EventParam::Int(i) => Value::Integer(i),
        })
        .collect()
}

fn select(c: &Connection, sql: &str, params: &[Value]) -> StoreResult<Vec<Event>> {
    let mut stmt = c.prepare_cached(sql).map_err(db_err)?;
    let rows = stmt
        .query_map(rusqlite::params_from_iter(params.iter()), event_row)
        .map_err(db_err)?;
    rows.collect::<rusqlite::Result<Vec<_>>>().map_err(db_err)
}

#[async_trait]
impl EventStore for SqliteStore {
    async fn list_events(
        &self,
        org: &OrgId,
        filter: &EventFilter,
        page: Page,
    ) -> StoreResult<Listing<Event>> {
        let (w, params) = event_where(org, filter, |n| format!("?{n}"));
        let params = values(params);
        self.pool
            .read_blocking(move |c| {
                let total = count(c, &format!("SELECT count(*) FROM events WHERE {w}"), &params)?;
                let sql = format!(
                    "SELECT {EVENT_COLS} FROM events WHERE {w} ORDER BY sequence DESC LIMIT {} OFFSET {}",
                    page.limit,
                    page.offset.min(i64::MAX as u64)
                );
                Ok(Listing {
                    items: select(c, &sql, &params)?,
                    total,
                })
            })
            .await
    }
    async fn events_after(
        &self,
        org: &OrgId,
        filter: &EventFilter,
        after: i64,
        limit: u32,
    ) -> StoreResult<Listing<Event>> {
        let (w, mut params) = event_where(org, filter, |n| format!("?{n}"));
        params.push(EventParam::Int(after));
        let w = format!("{w} AND sequence > ?{}", params.len());
        let params = values(params);
        self.pool
            .read_blocking(move |c| {
                let total = count(
                    c,
                    &format!("SELECT count(*) FROM events WHERE {w}"),
                    &params,
                )?;
                let sql = format!(
                    "SELECT {EVENT_COLS} FROM events WHERE {w} ORDER BY sequence LIMIT {limit}"
                );
                Ok(Listing {
                    items: select(c, &sql, &params)?,
                    total,
                })
            })
            .await
    }
    async fn get_event(&self, org: &OrgId, id: &EventId) -> StoreResult<Option<Event>> {
        self.pool
            .read(|c| {
                c.prepare_cached(&format!(
                    "SELECT {EVENT_COLS} FROM events WHERE id = ?1 AND org_id = ?2"
                ))
                .and_then(|mut s| {
                    s.query_row(params![id.as_str(), org.as_str()], event_row)
                        .optional()
                })
                .map_err(db_err)
            })
            .await
    }
    async fn sequence_events(&self) -> StoreResult<u64> {
        Ok(0)
    }
    async fn event_mark(&self) -> StoreResult<i64> {
        Ok(0)
    }
    async fn sequenced_through(&self, _mark: i64) -> StoreResult<bool> {
        Ok(true)
    }
    async fn purge_events(&self, before: Timestamp, batch: u32) -> StoreResult<u64> {
        // Per organization, the oldest `batch` events by sequence (which is
        // time order here: one writer, stamped as it writes), those past
        // the retention; at most `batch` in all per call.
        self.pool
            .write(move |tx| {
                let orgs: Vec<String> = tx
                    .prepare_cached("SELECT org_id FROM event_heads")
                    .and_then(|mut s| s.query_map([], |r| r.get(0))?.collect())
                    .map_err(db_err)?;
                let mut purged = 0u64;
                for org in orgs {
                    let left = u64::from(batch).saturating_sub(purged);
                    if left == 0 {
                        break;
                    }
                    purged += tx
                        .prepare_cached(
                            "DELETE FROM events WHERE org_id = ?1 AND created_at < ?2 AND sequence IN
                             (SELECT sequence FROM events WHERE org_id = ?1 ORDER BY sequence LIMIT ?3)",
                        )
                        .and_then(|mut s| s.execute(params![org, before.millis(), left as i64]))
                        .map_err(db_err)? as u64;
                }
                Ok(purged)
            })
            .await
    }
}
