//! PostgreSQL: events (D54). A change writes its events without a
//! `sequence`; each gets a `ticket` as it is written, after its object's row
//! (so of two changes to one object, the later one's events have the larger
//! tickets: it waited on the row). [`EventStore::sequence_events`] then gives
//! each organization's events their sequences in ticket order, once no
//! transaction that could hold a smaller ticket is still running:
//!
//! 1. A *cut* records the last ticket handed out and, assigned after it was
//!    read, a transaction id of the sequencer's own (`next_xid`): every
//!    ticket up to the cut belongs to a transaction below `next_xid`.
//! 2. Once the oldest running transaction is at or above `next_xid`, all of
//!    those have committed or rolled back: the tickets up to the cut are
//!    final, and their events are sequenced in ticket order.
//!
//! Two assumptions the argument rests on: the ticket sequence hands out one
//! value at a time (`CACHE 1`, the default: a backend caching values could
//! hand out one below a cut it read later; a unit test checks it), and the
//! rounds run at READ COMMITTED, as `write_tx!` opens every transaction (a
//! statement's snapshot is taken after the advisory lock was granted).
//!
//! No writer waits for this: a writer only takes a ticket. The cut lives in
//! `event_cut` and the high-water mark (every ticket at or below it is
//! sequenced, or rolled back) in `event_progress`, so a crash or another
//! node (under a transaction-level advisory lock, one at a time, D44)
//! carries on where it stopped.

use gatehouse_domain::EventId;
use gatehouse_domain::event::{Event, NewEvent};
use gatehouse_store::{
    EVENT_COLS, EventFilter, EventParam, EventRow, EventStore, actor_columns, decode_event,
    event_where,
};
use sqlx_postgres::{PgArguments, PgRow, Postgres};

use super::*;
use crate::rows::{RowResult, corrupt};
use crate::{TxResult, snapshot_read, typed, write_tx};

/// The transaction-level advisory-lock key of the sequencer (`"eventseq"`).
const SEQUENCER_LOCK: i64 = 0x6576_656e_7473_6571;

/// Events sequenced per transaction at most; a larger backlog takes more.
const SEQUENCE_BATCH: i64 = 5_000;

/// The transaction's id is taken before any ticket is drawn: the
/// sequencer's cut counts on every ticket at or below it belonging to a
/// transaction whose id is below the cut's `next_xid`. A transaction whose
/// first write were its events would otherwise draw its ticket (a
/// sequence's `nextval`, evaluated in the insert's projection) before it has
/// an id (assigned only as the row is stored), and a cut taken between the
/// two could pass over its events for good.
///
/// `pg_current_xact_id()` is a *stable* function: named only in a subquery
/// whose column no one reads, the planner drops it (it did, until this
/// filter). As a one-time filter (`WHERE … IS NOT NULL`) it is evaluated
/// before the first row is projected; the unit test below checks the plan.
const INSERT_ONE: &str = "INSERT INTO events (id, org_id, type, object_id, created_at,
         actor_type, actor_id, actor_client_id, request_id, idempotency_key, object, previous)
     SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12
     FROM (SELECT pg_current_xact_id() AS xid) AS xid_first
     WHERE xid_first.xid IS NOT NULL";

/// [`INSERT_ONE`] for several rows, in the order given (`ORDER BY ord`: the
/// `ticket` default is evaluated above the sort).
const INSERT_MANY: &str = "INSERT INTO events (id, org_id, type, object_id, created_at,
         actor_type, actor_id, actor_client_id, request_id, idempotency_key, object, previous)
     SELECT id, $1, type, object_id, created_at, actor_type, actor_id, actor_client_id,
            request_id, idempotency_key, object, previous
     FROM (SELECT pg_current_xact_id() AS xid) AS xid_first,
          unnest($2::text[], $3::text[], $4::text[], $5::bigint[], $6::text[], $7::text[],
                 $8::text[], $9::text[], $10::text[], $11::text[], $12::text[])
          WITH ORDINALITY
          AS e(id, type, object_id, created_at, actor_type, actor_id, actor_client_id,
               request_id, idempotency_key, object, previous, ord)
     WHERE xid_first.xid IS NOT NULL
     ORDER BY ord";

/// Writes one event without a sequence (a plain `VALUES` row: cheaper to
/// plan and bind than the arrays of [`insert_events`] for one row).
async fn insert_event(c: &mut PgConnection, org: &OrgId, e: &NewEvent) -> TxResult<()> {
    let (actor_type, actor_id, actor_client_id) = actor_columns(&e.origin.actor);
    let request = e.origin.request.as_ref();
    query(INSERT_ONE)
        .bind(e.id.as_str())
        .bind(org.as_str())
        .bind(e.kind.as_str())
        .bind(&e.object_id)
        .bind(e.created_at.millis())
        .bind(actor_type)
        .bind(actor_id)
        .bind(actor_client_id)
        .bind(request.map(|r| r.id.as_str()))
        .bind(request.and_then(|r| r.idempotency_key.as_deref()))
        .bind(&e.object)
        .bind(e.previous.as_deref())
        .execute(&mut *c)
        .await?;
    Ok(())
}

/// Writes a change's events without a sequence, inside its transaction, in
/// one statement (one round trip however many the change tells). The rows
/// take their tickets in the order of `events` (`ORDER BY ord`: the
/// `ticket` default is evaluated above the sort), so the sequencer keeps
/// D54's cascade order within the change.
///
/// Both inserts make sure the transaction has its id before a ticket is
/// drawn (see [`INSERT_ONE`]).
pub(crate) async fn insert_events(
    c: &mut PgConnection,
    org: &OrgId,
    events: &[std::borrow::Cow<'_, NewEvent>],
) -> TxResult<()> {
    match events {
        [] => return Ok(()),
        [one] => insert_event(c, org, one).await?,
        _ => insert_many(c, org, events).await?,
    }
    // D58: each change's audit entry, beside its event, after it (the
    // transaction has its id: the entries' tickets follow the events'),
    // in one more statement however many.
    let rows: Vec<gatehouse_store::AuditRow> = events
        .iter()
        .filter_map(|e| gatehouse_domain::audit::of_event(e))
        .map(|entry| gatehouse_store::AuditRow::of(&entry))
        .collect();
    crate::audit::insert_audits(c, org, &rows).await
}

async fn insert_many(
    c: &mut PgConnection,
    org: &OrgId,
    events: &[std::borrow::Cow<'_, NewEvent>],
) -> TxResult<()> {
    let n = events.len();
    let (mut ids, mut kinds, mut object_ids, mut created) = (
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
    );
    let (mut actor_types, mut actor_ids, mut actor_clients) = (
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
    );
    let (mut request_ids, mut keys, mut objects, mut previous) = (
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
    );
    for e in events {
        let (actor_type, actor_id, actor_client_id) = actor_columns(&e.origin.actor);
        let request = e.origin.request.as_ref();
        ids.push(e.id.as_str());
        kinds.push(e.kind.as_str());
        object_ids.push(e.object_id.as_str());
        created.push(e.created_at.millis());
        actor_types.push(actor_type);
        actor_ids.push(actor_id);
        actor_clients.push(actor_client_id);
        request_ids.push(request.map(|r| r.id.as_str()));
        keys.push(request.and_then(|r| r.idempotency_key.as_deref()));
        objects.push(e.object.as_str());
        previous.push(e.previous.as_deref());
    }
    query(INSERT_MANY)
        .bind(org.as_str())
        .bind(ids)
        .bind(kinds)
        .bind(object_ids)
        .bind(created)
        .bind(actor_types)
        .bind(actor_ids)
        .bind(actor_clients)
        .bind(request_ids)
        .bind(keys)
        .bind(objects)
        .bind(previous)
        .execute(&mut *c)
        .await?;
    Ok(())
}

fn event_row(r: &PgRow) -> RowResult<Event> {
    let row = EventRow {
        id: r.try_get(0)?,
        sequence: r.try_get(1)?,
        kind: r.try_get(2)?,
        object_id: r.try_get(3)?,
        created_at: r.try_get(4)?,
        actor_type: r.try_get(5)?,
        actor_id: r.try_get(6)?,
        actor_client_id: r.try_get(7)?,
        request_id: r.try_get(8)?,
        idempotency_key: r.try_get(9)?,
        object: r.try_get(10)?,
        previous: r.try_get(11)?,
    };
    let id = row.id.clone();
    decode_event(row)
        .map_err(|(column, text)| corrupt("events", column, &id, &format!("holds {text:?}")))
}

fn bound<'q>(
    sql: &'q str,
    params: &'q [EventParam],
) -> sqlx_core::query::Query<'q, Postgres, PgArguments> {
    params.iter().fold(query(sql), |q, p| match p {
        EventParam::Text(t) => q.bind(t.as_str()),
        EventParam::Int(i) => q.bind(*i),
    })
}

async fn listing(
    c: &mut PgConnection,
    w: &str,
    params: &[EventParam],
    order_and_page: &str,
) -> TxResult<Listing<Event>> {
    let count_sql = format!("SELECT count(*) FROM events WHERE {w}");
    let total: i64 = bound(&count_sql, params)
        .fetch_one(&mut *c)
        .await?
        .try_get(0)?;
    let sql = format!("SELECT {EVENT_COLS} FROM events WHERE {w} {order_and_page}");
    let rows = bound(&sql, params).fetch_all(&mut *c).await?;
    Ok(Listing {
        items: rows.iter().map(event_row).collect::<RowResult<Vec<_>>>()?,
        total: total.max(0) as u64,
    })
}

/// Sequences the events up to the pending cut, when it is final; answers
/// how many, and whether the cut is used up.
async fn apply_cut(c: &mut PgConnection, ticket: i64) -> TxResult<(u64, bool)> {
    // Along the primary key from the high-water mark (`event_progress`).
    let rows: Vec<(i64, String)> = query_as(
        "SELECT ticket, org_id FROM events
         WHERE ticket > (SELECT done_ticket FROM event_progress) AND ticket <= $1
           AND sequence IS NULL
         ORDER BY ticket LIMIT $2",
    )
    .bind(ticket)
    .bind(SEQUENCE_BATCH)
    .fetch_all(&mut *c)
    .await?;
    let mut per_org: Vec<(String, Vec<i64>)> = Vec::new();
    for (t, org) in &rows {
        match per_org.iter_mut().find(|(o, _)| o == org) {
            Some((_, ts)) => ts.push(*t),
            None => per_org.push((org.clone(), vec![*t])),
        }
    }
    let (mut tickets, mut sequences) = (Vec::new(), Vec::new());
    for (org, ts) in per_org {
        let n = ts.len() as i64;
        let last: i64 = query_scalar(
            "INSERT INTO event_heads (org_id, last_sequence) VALUES ($1, $2)
             ON CONFLICT (org_id) DO UPDATE SET last_sequence = event_heads.last_sequence + $2
             RETURNING last_sequence",
        )
        .bind(&org)
        .bind(n)
        .fetch_one(&mut *c)
        .await?;
        for (i, t) in ts.into_iter().enumerate() {
            tickets.push(t);
            sequences.push(last - n + 1 + i as i64);
        }
    }
    if !tickets.is_empty() {
        query(
            "UPDATE events SET sequence = v.s
             FROM unnest($1::bigint[], $2::bigint[]) AS v(t, s) WHERE events.ticket = v.t",
        )
        .bind(&tickets)
        .bind(&sequences)
        .execute(&mut *c)
        .await?;
    }
    // Every ticket up to the cut (or, when the batch was full, up to its
    // last) is now sequenced or belonged to a transaction that rolled back.
    let used_up = (rows.len() as i64) < SEQUENCE_BATCH;
    let done = if used_up {
        ticket
    } else {
        rows.last().map_or(ticket, |r| r.0)
    };
    query("UPDATE event_progress SET done_ticket = greatest(done_ticket, $1)")
        .bind(done)
        .execute(&mut *c)
        .await?;
    Ok((rows.len() as u64, used_up))
}

/// The sequencer's transaction-level advisory lock, if no one holds it.
async fn try_lock(c: &mut PgConnection) -> TxResult<bool> {
    Ok(query_scalar("SELECT pg_try_advisory_xact_lock($1)")
        .bind(SEQUENCER_LOCK)
        .fetch_one(&mut *c)
        .await?)
}

/// The first half of a round: the pending cut, if it is final. Answers how
/// many it sequenced, and whether a cut is still pending (not final yet, or
/// a backlog larger than one batch).
async fn apply_round(c: &mut PgConnection) -> TxResult<(u64, bool)> {
    // One sequencer at a time; a caller that finds it busy leaves the round
    // to it (its own caller polls or comes back) rather than queue up
    // holding a connection.
    if !try_lock(c).await? {
        return Ok((0, true));
    }
    let cut: Option<(i64, String)> = query_as("SELECT ticket, next_xid FROM event_cut")
        .fetch_optional(&mut *c)
        .await?;
    let Some((ticket, next_xid)) = cut else {
        return Ok((0, false));
    };
    // A snapshot's xmin is the oldest transaction still running among those
    // below its xmax; the cut's `next_xid` is below this snapshot's xmax
    // (it belongs to a committed transaction), so xmin at or above it means
    // no transaction below it is still running.
    let final_: bool = query_scalar("SELECT pg_snapshot_xmin(pg_current_snapshot()) >= $1::xid8")
        .bind(&next_xid)
        .fetch_one(&mut *c)
        .await?;
    if !final_ {
        return Ok((0, true));
    }
    let (n, used_up) = apply_cut(c, ticket).await?;
    if used_up {
        query("DELETE FROM event_cut").execute(&mut *c).await?;
    }
    Ok((n, !used_up))
}

/// The second half: a new cut, when events wait and none is pending. Its
/// own transaction, begun without an id: the cut's `next_xid` is the id this
/// transaction is given *after* it read the last ticket, and ids are handed
/// out in order, so every transaction that had drawn a ticket up to the cut
/// (having taken its id first, see [`INSERT_ONE`]) has a smaller one.
///
/// Not the snapshot's xmax, which this once was: that is one past the
/// latest *completed* transaction, and a transaction given its id after
/// that one, still running, can be at or above it. The cut then counted
/// as final while that transaction ran, and the events it committed
/// afterwards, below the high-water mark, were never sequenced.
async fn cut_round(c: &mut PgConnection) -> TxResult<()> {
    if !try_lock(c).await? {
        return Ok(());
    }
    let pending: bool = query_scalar("SELECT EXISTS (SELECT 1 FROM event_cut)")
        .fetch_one(&mut *c)
        .await?;
    if pending {
        return Ok(());
    }
    // Events, or audit entries (D58: their tickets are drawn from the same
    // sequence, and the sealer waits for this mark too).
    let waiting: bool = query_scalar(
        "SELECT EXISTS (SELECT 1 FROM events
                        WHERE ticket > (SELECT done_ticket FROM event_progress)
                          AND sequence IS NULL)
             OR EXISTS (SELECT 1 FROM audit_entries
                        WHERE ticket > (SELECT done_ticket FROM event_progress)
                          AND sequence IS NULL)",
    )
    .fetch_one(&mut *c)
    .await?;
    if !waiting {
        return Ok(());
    }
    let last: Option<i64> = query_scalar(
        "SELECT pg_sequence_last_value(pg_get_serial_sequence('events', 'ticket')::regclass)",
    )
    .fetch_one(&mut *c)
    .await?;
    let Some(last) = last else { return Ok(()) };
    // A later statement: the id is assigned here, after `last` was read.
    let next_xid: String = query_scalar("SELECT pg_current_xact_id()::text")
        .fetch_one(&mut *c)
        .await?;
    query("INSERT INTO event_cut (ticket, next_xid) VALUES ($1, $2)")
        .bind(last)
        .bind(&next_xid)
        .execute(&mut *c)
        .await?;
    Ok(())
}

#[async_trait]
impl EventStore for PgStore {
    async fn list_events(
        &self,
        org: &OrgId,
        filter: &EventFilter,
        page: Page,
    ) -> StoreResult<Listing<Event>> {
        let (w, params) = event_where(org, filter, |n| format!("${n}"));
        let tail = format!(
            "ORDER BY sequence DESC LIMIT {} OFFSET {}",
            page.limit,
            page.offset.min(i64::MAX as u64)
        );
        snapshot_read!(self, |c| listing(c, &w, &params, &tail).await)
    }
    async fn events_after(
        &self,
        org: &OrgId,
        filter: &EventFilter,
        after: i64,
        limit: u32,
    ) -> StoreResult<Listing<Event>> {
        let (w, mut params) = event_where(org, filter, |n| format!("${n}"));
        params.push(EventParam::Int(after));
        let w = format!("{w} AND sequence > ${}", params.len());
        let tail = format!("ORDER BY sequence LIMIT {limit}");
        snapshot_read!(self, |c| listing(c, &w, &params, &tail).await)
    }
    async fn get_event(&self, org: &OrgId, id: &EventId) -> StoreResult<Option<Event>> {
        let row = query(&format!(
            "SELECT {EVENT_COLS} FROM events WHERE id = $1 AND org_id = $2 AND sequence IS NOT NULL"
        ))
        .bind(id.as_str())
        .bind(org.as_str())
        .fetch_optional(&self.pool)
        .await
        .map_err(db_err)?;
        row.map(|r| event_row(&r)).transpose().map_err(db_err)
    }
    async fn sequence_events(&self) -> StoreResult<u64> {
        // Two rounds: the first takes a cut, the second finds it final at
        // once unless a transaction that was running is still running.
        let mut done = 0;
        for _ in 0..2 {
            let (n, pending) = write_tx!(self, |tx| apply_round(&mut tx).await)?;
            done += n;
            if !pending {
                write_tx!(self, |tx| cut_round(&mut tx).await)?;
            }
        }
        Ok(done)
    }
    async fn event_mark(&self) -> StoreResult<i64> {
        let last: Option<i64> = query_scalar(
            "SELECT pg_sequence_last_value(pg_get_serial_sequence('events', 'ticket')::regclass)",
        )
        .fetch_one(&self.pool)
        .await
        .map_err(db_err)?;
        Ok(last.unwrap_or(0))
    }
    async fn sequenced_through(&self, mark: i64) -> StoreResult<bool> {
        // D58: audit entries up to the mark too: the sealer seals only what
        // the high-water mark has passed, so a read waits for that as well.
        query_scalar(
            "SELECT NOT EXISTS (SELECT 1 FROM events
                                WHERE ticket > (SELECT done_ticket FROM event_progress)
                                  AND ticket <= $1 AND sequence IS NULL)
                AND NOT EXISTS (SELECT 1 FROM audit_entries
                                WHERE ticket > (SELECT done_ticket FROM event_progress)
                                  AND ticket <= $1 AND sequence IS NULL)",
        )
        .bind(mark)
        .fetch_one(&self.pool)
        .await
        .map_err(db_err)
    }
    async fn purge_events(&self, before: Timestamp, batch: u32) -> StoreResult<u64> {
        // The oldest tickets, along the primary key, of the sequenced ones
        // (at or below the high-water mark: an unsequenced event is not yet
        // shown); of those, the ones older than `before`. Tickets follow
        // time up to a transaction's length, so the oldest events go first
        // and no index by time is kept for this (each is one more entry per
        // event written).
        let n = query(
            "DELETE FROM events WHERE ticket IN
             (SELECT ticket FROM
                (SELECT ticket, created_at FROM events
                 WHERE ticket <= (SELECT done_ticket FROM event_progress)
                 ORDER BY ticket LIMIT $2) oldest
              WHERE created_at < $1)",
        )
        .bind(before.millis())
        .bind(i64::from(batch))
        .execute(&self.pool)
        .await
        .map_err(db_err)?
        .rows_affected();
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The plan of an events insert, its parameters bound (EXPLAIN plans
    /// without running it).
    async fn plan(s: &PgStore, sql: &str, many: bool) -> String {
        let explain = format!("EXPLAIN VERBOSE {sql}");
        let q = if many {
            let texts = vec!["x".to_owned()];
            query(&explain)
                .bind("org_x")
                .bind(texts.clone())
                .bind(texts.clone())
                .bind(texts.clone())
                .bind(vec![1_i64])
                .bind(texts.clone())
                .bind(texts.clone())
                .bind(texts.clone())
                .bind(texts.clone())
                .bind(texts.clone())
                .bind(texts.clone())
                .bind(texts)
        } else {
            (0..12).fold(query(&explain), |q, i| {
                if i == 4 { q.bind(1_i64) } else { q.bind("x") }
            })
        };
        let rows = q.fetch_all(&s.pool).await.unwrap();
        rows.iter()
            .map(|r| r.try_get::<String, _>(0).unwrap())
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// The sequencer's argument needs the ticket sequence to hand out one
    /// value at a time (no per-backend cache).
    #[tokio::test]
    async fn the_ticket_sequence_caches_nothing() {
        let Some(s) = crate::testing::fresh_store().await else {
            return;
        };
        let cache: i64 = query_scalar(
            "SELECT cache_size FROM pg_sequences
             WHERE schemaname || '.' || sequencename
                 = pg_get_serial_sequence('events', 'ticket')",
        )
        .fetch_one(&s.pool)
        .await
        .unwrap();
        assert_eq!(cache, 1);
    }

    /// The events inserts take the transaction's id before they draw a
    /// ticket (the sequencer's cut depends on it): `pg_current_xact_id()`
    /// must survive planning, as a one-time filter evaluated before the
    /// projection that calls `nextval`. Written as a subquery's unread
    /// column, the planner dropped it.
    #[tokio::test]
    async fn event_inserts_take_the_transaction_id_before_their_tickets() {
        let Some(s) = crate::testing::fresh_store().await else {
            return;
        };
        for (sql, many) in [(INSERT_ONE, false), (INSERT_MANY, true)] {
            let plan = plan(&s, sql, many).await;
            // A one-time filter runs before its node returns a row, so
            // before any row reaches the projection that draws the ticket.
            assert!(
                plan.contains("One-Time Filter: (pg_current_xact_id() IS NOT NULL)"),
                "no transaction id taken first:\n{plan}"
            );
            assert!(plan.contains("nextval("), "the ticket is drawn:\n{plan}");
        }
    }
}
