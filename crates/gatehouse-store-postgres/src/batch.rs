//! PostgreSQL: point reads that arrive together share one statement.
//!
//! An authenticated read on PostgreSQL needs one row (the user, the product)
//! and a token request needs one (the client). Sent one statement each, the
//! database's per-statement cost (a wake-up, a parse of the bind message, a
//! plan lookup, an index probe, a reply) and the driver's dominate the
//! request, and on a machine whose cores serve both Gatehouse and
//! PostgreSQL that cost is the throughput (issue 16, target 3).
//!
//! So a point read joins a queue, and the queue is drained as one
//! `SELECT … FROM unnest($1, $2) AS k(o, i) JOIN table …`:
//!
//! * While fewer than [`IN_FLIGHT`] batches are running, a read starts a
//!   batch at once, with itself and whatever else is queued: an idle server
//!   answers a lone read with one statement and no added wait, exactly as
//!   before.
//! * When [`IN_FLIGHT`] batches are running, a read waits in the queue, and
//!   the first batch to finish takes the whole queue (up to [`MAX_BATCH`]
//!   keys) as its next statement. Under load a statement answers tens of
//!   requests.
//! * The batch runs in a task of its own, so a caller that goes away (a
//!   client disconnecting, a timeout) never strands the reads batched with
//!   it.
//!
//! Consistency is that of a read of its own: the statement is sent after
//! every read in it was asked for, so each sees every write committed before
//! it was asked (read-your-writes across nodes, D44). Each key carries its
//! organization into the SQL join, so tenant isolation stays in the query
//! (D2); a key without one is the client look-up of the token endpoint,
//! whose ids are global. A row that cannot be decoded fails its own reads,
//! not the batch's others; a statement that fails (the database down) fails
//! every read in it with the same error, as each would have failed alone.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use sqlx_postgres::{PgPool, PgRow};
use tokio::sync::oneshot;

use super::*;
use rows::RowResult;

/// Batches running at once per kind of read. One: while it runs the next
/// gathers, so under load each statement answers as many reads as arrived
/// during the last one. Measured with `scripts/pg-ratio.sh` (64 clients, 2
/// cores): 1 gave 83 % of SQLite's reads and 76 % of its tokens, 2 gave 73 %
/// and 69 %, 4 gave 60 % and 59 % — more statements, each answering fewer.
pub(crate) const IN_FLIGHT: usize = 1;
/// Keys per statement at most.
pub(crate) const MAX_BATCH: usize = 256;

/// `(organization, id)`; `None` for the global client look-up.
type Key = (Option<String>, String);
type Answer<V> = StoreResult<Option<V>>;
type Waiter<V> = (Key, oneshot::Sender<Answer<V>>);

/// One kind of point read (users, products, clients), batched.
pub(crate) struct PointReads<V> {
    inner: Arc<Inner<V>>,
}

struct Inner<V> {
    pool: PgPool,
    sql: String,
    decode: fn(&PgRow) -> RowResult<V>,
    state: Mutex<State<V>>,
    /// Statements sent so far (the tests' measure of the sharing).
    statements: AtomicU64,
}

struct State<V> {
    queue: Vec<Waiter<V>>,
    running: usize,
}

impl<V: Clone + Send + 'static> PointReads<V> {
    /// Reads of `table`'s rows as `decode` reads its first columns (`cols`).
    pub(crate) fn new(
        pool: PgPool,
        (table, cols): (&str, &str),
        decode: fn(&PgRow) -> RowResult<V>,
    ) -> Self {
        // The key as asked comes back as the last two columns, so answers
        // are matched to readers without trusting anything the row holds.
        let sql = format!(
            "SELECT {cols}, k.o, k.i FROM unnest($1::text[], $2::text[]) AS k(o, i) \
             JOIN {table} t ON t.id = k.i AND (k.o IS NULL OR t.org_id = k.o)"
        );
        Self {
            inner: Arc::new(Inner {
                pool,
                sql,
                decode,
                state: Mutex::new(State {
                    queue: Vec::new(),
                    running: 0,
                }),
                statements: AtomicU64::new(0),
            }),
        }
    }

    /// Statements sent so far.
    #[cfg(feature = "testing")]
    pub(crate) fn statements(&self) -> u64 {
        self.inner.statements.load(Ordering::Relaxed)
    }

    /// The row with this id in this organization.
    pub(crate) async fn get(&self, org: &OrgId, id: &str) -> Answer<V> {
        self.read((Some(org.as_str().to_owned()), id.to_owned()))
            .await
    }

    /// The row with this id, whatever its organization (global ids only).
    pub(crate) async fn get_global(&self, id: &str) -> Answer<V> {
        self.read((None, id.to_owned())).await
    }

    async fn read(&self, key: Key) -> Answer<V> {
        let (tx, rx) = oneshot::channel();
        let start = {
            let mut state = self.inner.lock();
            state.queue.push((key, tx));
            if state.running < IN_FLIGHT {
                state.running += 1;
                Some(state.take())
            } else {
                None
            }
        };
        if let Some(batch) = start {
            tokio::spawn(Arc::clone(&self.inner).run(batch));
        }
        rx.await.unwrap_or_else(|_| {
            Err(StoreError::Unavailable(
                "the batched read stopped before it answered".into(),
            ))
        })
    }
}

impl<V> State<V> {
    fn take(&mut self) -> Vec<Waiter<V>> {
        if self.queue.len() <= MAX_BATCH {
            std::mem::take(&mut self.queue)
        } else {
            self.queue.drain(..MAX_BATCH).collect()
        }
    }
}

impl<V: Clone + Send + 'static> Inner<V> {
    fn lock(&self) -> std::sync::MutexGuard<'_, State<V>> {
        // The lock guards a queue and a counter, never left half-changed.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Answers `batch`, then every batch queued meanwhile, until the queue
    /// is empty.
    async fn run(self: Arc<Self>, mut batch: Vec<Waiter<V>>) {
        let mut running = Running {
            inner: &self,
            ended: false,
        };
        loop {
            self.answer(batch).await;
            let mut state = self.lock();
            if state.queue.is_empty() {
                // In the same lock as the check: a read queued after it
                // finds a free slot and starts its own batch.
                state.running -= 1;
                running.ended = true;
                return;
            }
            batch = state.take();
        }
    }

    async fn answer(&self, batch: Vec<Waiter<V>>) {
        let mut keys: Vec<&Key> = batch.iter().map(|(k, _)| k).collect();
        keys.sort_unstable();
        keys.dedup();
        let (orgs, ids): (Vec<Option<&str>>, Vec<&str>) =
            keys.iter().map(|(o, i)| (o.as_deref(), i.as_str())).unzip();
        self.statements.fetch_add(1, Ordering::Relaxed);
        let rows = query(&self.sql)
            .bind(orgs)
            .bind(ids)
            .fetch_all(&self.pool)
            .await;
        let rows = match rows {
            Ok(rows) => rows,
            Err(e) => {
                let e = db_err(e);
                for (_, tx) in batch {
                    let _ = tx.send(Err(same_error(&e)));
                }
                return;
            }
        };
        // The asked key is the last two columns; the row's own are before.
        let mut found: HashMap<Key, StoreResult<V>> = HashMap::with_capacity(rows.len());
        for row in &rows {
            let last = row.len();
            let key = row
                .try_get(last - 2)
                .and_then(|o| Ok((o, row.try_get(last - 1)?)));
            match key {
                Ok(key) => {
                    found.insert(key, (self.decode)(row).map_err(db_err));
                }
                Err(e) => {
                    let e = db_err(e);
                    for (_, tx) in batch {
                        let _ = tx.send(Err(same_error(&e)));
                    }
                    return;
                }
            }
        }
        for (key, tx) in batch {
            let answer = match found.get(&key) {
                None => Ok(None),
                Some(Ok(v)) => Ok(Some(v.clone())),
                Some(Err(e)) => Err(same_error(e)),
            };
            let _ = tx.send(answer);
        }
    }
}

/// A running batch's slot. Should the task stop before the queue is empty
/// (its runtime shutting down, a panic), the slot is freed and the queued
/// reads are answered `Unavailable` (their senders dropped), so no later
/// read waits behind a batch that will never finish.
struct Running<'a, V> {
    inner: &'a Inner<V>,
    ended: bool,
}

impl<V> Drop for Running<'_, V> {
    fn drop(&mut self) {
        if !self.ended {
            let mut state = self
                .inner
                .state
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            state.running -= 1;
            state.queue.clear();
        }
    }
}

/// The error a failed statement gives each read batched in it.
fn same_error(e: &StoreError) -> StoreError {
    match e {
        StoreError::Unavailable(why) => StoreError::Unavailable(why.clone()),
        StoreError::Internal(why) => StoreError::Internal(why.clone()),
        other => StoreError::Internal(other.to_string()),
    }
}
