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
//! it was asked (read-your-writes across nodes, D44). Tenant reads
//! ([`Tenant`]: users, products) carry their organization into the SQL join,
//! so tenant isolation stays in the query (D2); only the client look-up of
//! the token endpoint is [`Global`], as client ids are, and the types keep
//! the two apart. A row that cannot be decoded fails its own reads, not the
//! batch's others; a statement that fails fails every read in it with the
//! same error, as each would have failed alone.
//!
//! Waiting is bounded as the pool bounds it (D6: a 503, never a hang): a
//! read still queued after the pool's acquire timeout is answered
//! `Unavailable` instead of joining a batch, and when a statement fails
//! because no connection could be had (the database away), the reads queued
//! behind it fail with it rather than wait for a connection in turn.

use std::collections::HashMap;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

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

/// Reads of one organization's rows (users, products).
pub(crate) struct Tenant;
/// Reads by a globally unique id alone (the token endpoint's client).
pub(crate) struct Global;

/// How a kind of read joins its keys to its table.
pub(crate) trait Scope {
    const JOIN: &'static str;
}
impl Scope for Tenant {
    const JOIN: &'static str = "t.id = k.i AND t.org_id = k.o";
}
impl Scope for Global {
    const JOIN: &'static str = "t.id = k.i";
}

/// `(organization, id)`; `None` for a [`Global`] read.
type Key = (Option<String>, String);
type Answer<V> = StoreResult<Option<V>>;

struct Waiter<V> {
    key: Key,
    asked: Instant,
    tx: oneshot::Sender<Answer<V>>,
}

/// One kind of point read (users, products, clients), batched.
pub(crate) struct PointReads<V, S> {
    inner: Arc<Inner<V>>,
    scope: PhantomData<S>,
}

struct Inner<V> {
    pool: PgPool,
    sql: String,
    decode: fn(&PgRow) -> RowResult<V>,
    /// How long a read may wait in the queue (the pool's acquire timeout).
    wait: Duration,
    state: Mutex<State<V>>,
    /// Statements sent so far (the tests' measure of the sharing).
    statements: AtomicU64,
}

struct State<V> {
    queue: Vec<Waiter<V>>,
    running: usize,
}

impl<V: Clone + Send + 'static, S: Scope> PointReads<V, S> {
    /// Reads of `table`'s rows as `decode` reads its first columns (`cols`);
    /// a read waits in the queue for `wait` at most.
    pub(crate) fn new(
        pool: PgPool,
        (table, cols): (&str, &str),
        decode: fn(&PgRow) -> RowResult<V>,
        wait: Duration,
    ) -> Self {
        // The key as asked comes back as the last two columns, so answers
        // are matched to readers without trusting anything the row holds.
        let sql = format!(
            "SELECT {cols}, k.o, k.i FROM unnest($1::text[], $2::text[]) AS k(o, i) \
             JOIN {table} t ON {}",
            S::JOIN
        );
        Self {
            inner: Arc::new(Inner {
                pool,
                sql,
                decode,
                wait,
                state: Mutex::new(State {
                    queue: Vec::new(),
                    running: 0,
                }),
                statements: AtomicU64::new(0),
            }),
            scope: PhantomData,
        }
    }

    /// Statements sent so far.
    #[cfg(feature = "testing")]
    pub(crate) fn statements(&self) -> u64 {
        self.inner.statements.load(Ordering::Relaxed)
    }

    async fn read(&self, key: Key) -> Answer<V> {
        let (tx, rx) = oneshot::channel();
        let start = {
            let mut state = self.inner.lock();
            state.queue.push(Waiter {
                key,
                asked: Instant::now(),
                tx,
            });
            if state.running < IN_FLIGHT {
                state.running += 1;
                // The slot is owned from here: were the task never to run
                // (a runtime shutting down), dropping it frees the slot.
                let slot = Running {
                    inner: Arc::clone(&self.inner),
                    ended: false,
                };
                Some((slot, state.take(self.inner.wait)))
            } else {
                None
            }
        };
        if let Some((slot, batch)) = start {
            tokio::spawn(slot.run(batch));
        }
        rx.await.unwrap_or_else(|_| {
            Err(StoreError::Unavailable(
                "the batched read stopped before it answered".into(),
            ))
        })
    }
}

impl<V: Clone + Send + 'static> PointReads<V, Tenant> {
    /// The row with this id in this organization.
    pub(crate) async fn get(&self, org: &OrgId, id: &str) -> Answer<V> {
        self.read((Some(org.as_str().to_owned()), id.to_owned()))
            .await
    }
}

impl<V: Clone + Send + 'static> PointReads<V, Global> {
    /// The row with this id, whatever its organization.
    pub(crate) async fn get(&self, id: &str) -> Answer<V> {
        self.read((None, id.to_owned())).await
    }
}

impl<V> State<V> {
    /// The next batch: up to [`MAX_BATCH`] of the queued reads, oldest
    /// first. Reads that have waited longer than `wait` are answered
    /// `Unavailable` instead, as a pool checkout would have been.
    fn take(&mut self, wait: Duration) -> Vec<Waiter<V>> {
        let now = Instant::now();
        let mut batch = Vec::with_capacity(self.queue.len().min(MAX_BATCH));
        let mut rest = Vec::new();
        for w in self.queue.drain(..) {
            if now.duration_since(w.asked) > wait {
                let _ = w.tx.send(Err(StoreError::Unavailable(
                    "timed out waiting for the database".into(),
                )));
            } else if batch.len() < MAX_BATCH {
                batch.push(w);
            } else {
                rest.push(w);
            }
        }
        self.queue = rest;
        batch
    }

    /// Answers every queued read with `e`.
    fn fail_all(&mut self, e: &StoreError) {
        fail(self.queue.drain(..), e);
    }
}

impl<V> Inner<V> {
    fn lock(&self) -> std::sync::MutexGuard<'_, State<V>> {
        // The lock guards a queue and a counter, never left half-changed.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A running batch's slot, taken in [`PointReads::read`] under the lock.
/// Should the task stop before it hands the slot back (a panic, its runtime
/// shutting down, never being polled), dropping it frees the slot and the
/// queued reads are answered `Unavailable` (their senders dropped), so no
/// later read waits behind a batch that will never finish.
struct Running<V> {
    inner: Arc<Inner<V>>,
    ended: bool,
}

impl<V: Clone + Send + 'static> Running<V> {
    /// Answers `batch`, then every batch queued meanwhile, until the queue
    /// is empty.
    async fn run(mut self, mut batch: Vec<Waiter<V>>) {
        loop {
            let outage = self.inner.answer(batch).await;
            let mut state = self.inner.lock();
            if let Some(e) = outage {
                // No connection could be had for a whole acquire timeout:
                // the reads queued meanwhile would wait as long again.
                state.fail_all(&e);
            }
            batch = state.take(self.inner.wait);
            if batch.is_empty() {
                // In the same lock as the check: a read queued after it
                // finds a free slot and starts its own batch.
                state.running -= 1;
                self.ended = true;
                return;
            }
        }
    }
}

impl<V> Drop for Running<V> {
    fn drop(&mut self) {
        if !self.ended {
            let mut state = self.inner.lock();
            state.running -= 1;
            state.queue.clear();
        }
    }
}

impl<V: Clone> Inner<V> {
    /// Sends one statement for `batch` and answers its reads; returns the
    /// error when no connection could be had (the pool timed out).
    async fn answer(&self, batch: Vec<Waiter<V>>) -> Option<StoreError> {
        let mut keys: Vec<&Key> = batch.iter().map(|w| &w.key).collect();
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
                let outage = matches!(
                    e,
                    sqlx_core::Error::PoolTimedOut | sqlx_core::Error::PoolClosed
                );
                let e = db_err(e);
                fail(batch, &e);
                return outage.then_some(e);
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
                    fail(batch, &db_err(e));
                    return None;
                }
            }
        }
        for w in batch {
            let answer = match found.get(&w.key) {
                None => Ok(None),
                Some(Ok(v)) => Ok(Some(v.clone())),
                Some(Err(e)) => Err(e.clone()),
            };
            let _ = w.tx.send(answer);
        }
        None
    }
}

/// Answers each of `waiters` with `e`, as each would have failed alone.
fn fail<V>(waiters: impl IntoIterator<Item = Waiter<V>>, e: &StoreError) {
    for w in waiters {
        let _ = w.tx.send(Err(e.clone()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn waiter(id: &str, age: Duration) -> (Waiter<u8>, oneshot::Receiver<Answer<u8>>) {
        let (tx, rx) = oneshot::channel();
        let asked = Instant::now().checked_sub(age).expect("a clock past boot");
        let key = (None, id.to_owned());
        (Waiter { key, asked, tx }, rx)
    }

    /// A read queued longer than the wait is answered 503 instead of joining
    /// the batch (D6: the bound a pool checkout had); the rest go oldest
    /// first, at most MAX_BATCH at once, the others staying queued.
    #[test]
    fn take_sheds_reads_queued_too_long_and_caps_the_batch() {
        let wait = Duration::from_secs(2);
        let (old, mut old_rx) = waiter("old", Duration::from_secs(3));
        let mut state = State {
            queue: vec![old],
            running: 1,
        };
        let mut fresh = Vec::new();
        for n in 0..MAX_BATCH + 5 {
            let (w, rx) = waiter(&format!("r{n}"), Duration::ZERO);
            state.queue.push(w);
            fresh.push(rx);
        }
        let batch = state.take(wait);
        assert!(matches!(
            old_rx.try_recv(),
            Ok(Err(StoreError::Unavailable(_)))
        ));
        let ids: Vec<&str> = batch.iter().map(|w| w.key.1.as_str()).collect();
        assert_eq!(ids.len(), MAX_BATCH);
        assert_eq!((ids[0], ids[MAX_BATCH - 1]), ("r0", "r255"));
        let left: Vec<&str> = state.queue.iter().map(|w| w.key.1.as_str()).collect();
        assert_eq!(left, ["r256", "r257", "r258", "r259", "r260"]);
        assert!(
            fresh.iter_mut().all(|rx| rx.try_recv().is_err()),
            "nobody else answered"
        );
    }
}
