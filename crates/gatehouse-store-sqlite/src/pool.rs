//! A bounded pool of rusqlite connections: many readers, one writer.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Weak};
use std::time::Duration;

use gatehouse_store::{ChainSeal, StoreError, StoreResult};
use rusqlite::{Connection, OpenFlags, Transaction, TransactionBehavior};
use tokio::sync::Semaphore;

use crate::db_err;
use crate::generation::Generation;
use crate::schema::MIGRATIONS;

#[derive(Clone)]
pub(crate) struct Pool {
    inner: Arc<Inner>,
}

struct Inner {
    path: PathBuf,
    readers: Mutex<Vec<Connection>>,
    read_gate: Arc<Semaphore>,
    writer: Mutex<Connection>,
    /// Writes waiting for the writer (see [`Pool::write`]).
    queue: Mutex<Queue>,
    /// Batches committed, and the writes they held (group commit's effect).
    commits: std::sync::atomic::AtomicU64,
    committed_writes: std::sync::atomic::AtomicU64,
    /// Set by the writer's update hook when a transaction touched `clients`
    /// or `organizations`.
    clients_dirty: Arc<AtomicBool>,
    /// Bumped after each commit that changed a client (see [`Generation`]).
    generation: Option<Generation>,
    /// Wakes the checkpointer after a commit (see [`checkpointer`]).
    checkpoint: Arc<CheckpointSignal>,
    /// D58: audit entries are sealed in their INSERT when set (see
    /// [`WriteTx::chain_seal`]); set once, before the first write.
    seal: std::sync::OnceLock<ChainSeal>,
}

/// A write's view of the batch's transaction: the transaction itself (by
/// `Deref`, so a `&WriteTx` passes where a `&Connection` is asked), and
/// what the writer knows beside it.
pub(crate) struct WriteTx<'t, 'c> {
    tx: &'t Transaction<'c>,
    seal: Option<ChainSeal>,
}

impl<'c> std::ops::Deref for WriteTx<'_, 'c> {
    type Target = Transaction<'c>;
    fn deref(&self) -> &Transaction<'c> {
        self.tx
    }
}

impl WriteTx<'_, '_> {
    /// The chain seal audit entries are sealed with as they are written
    /// (D58; `crate::audit::insert_audit`), if the store was given one.
    pub(crate) fn chain_seal(&self) -> Option<ChainSeal> {
        self.seal
    }
}

/// Between the writer and the checkpointer thread: whether commits are
/// waiting to be copied into the database file, and how long the WAL was
/// at the last checkpoint (frames).
#[derive(Default)]
struct CheckpointSignal {
    pending: Mutex<bool>,
    wake: Condvar,
    wal_frames: AtomicI64,
}

/// The checkpointer copies committed pages from the WAL into the database
/// file at most this often.
const CHECKPOINT_EVERY: Duration = Duration::from_millis(100);

/// A WAL longer than this (frames of one page) after a checkpoint means the
/// checkpointer cannot catch up under a steady stream of batches (a passive
/// checkpoint never backfills a frame written after it began): the writer
/// then checkpoints between two batches itself, which lets the next batch
/// start the WAL from its beginning again. 16,000 pages is 64 MiB.
const WAL_FRAMES_LIMIT: i64 = 16_000;

/// Readers open at most at once. Reads are short; more connections than this
/// only add memory on a 2-core machine.
const MAX_READERS: usize = 8;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding a connection leaves it usable: SQLite rolls back
    // an unfinished transaction when the `Transaction` is dropped.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl CheckpointSignal {
    fn poke(&self) {
        let mut pending = lock(&self.pending);
        if !*pending {
            *pending = true;
            self.wake.notify_one();
        }
    }
}

/// A passive checkpoint on `c`: copies what it can of the WAL into the
/// database file without waiting for readers or the writer; answers the
/// WAL's length in frames (what was written since it last started over),
/// or `None` when another checkpoint was running (SQLite answers busy and
/// no length).
/// Applies the migrations `schema_migrations` does not list yet, all in one
/// transaction, and answers their versions. One transaction: the database
/// moves to the new version whole or stays at the old one (an older binary
/// still runs on it), and a fresh database pays for one commit, not one per
/// migration (26 fsyncs were half of a cold start, issue 31).
fn apply_migrations(c: &mut Connection, migrations: &[(i64, &str)]) -> StoreResult<Vec<i64>> {
    let tx = c
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(db_err)?;
    let mut applied = Vec::new();
    for (version, sql) in migrations {
        let done: bool = tx
            .query_row(
                "SELECT EXISTS (SELECT 1 FROM schema_migrations WHERE version = ?1)",
                [version],
                |r| r.get(0),
            )
            .map_err(db_err)?;
        if !done {
            tx.execute_batch(sql).map_err(db_err)?;
            tx.execute(
                "INSERT INTO schema_migrations (version, applied_at, checksum) VALUES (?1, unixepoch('subsec') * 1000, ?2)",
                rusqlite::params![version, crate::schema::checksum(sql)],
            )
            .map_err(db_err)?;
            applied.push(*version);
        }
    }
    tx.commit().map_err(db_err)?;
    Ok(applied)
}

fn wal_checkpoint(c: &Connection) -> rusqlite::Result<Option<i64>> {
    c.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |r| {
        Ok((r.get::<_, i64>(0)? == 0).then_some(r.get::<_, i64>(1)?))
    })
}

/// The checkpointer thread: after commits, at most every
/// [`CHECKPOINT_EVERY`], a passive checkpoint on its own connection, beside
/// the writer (WAL mode lets them run at once). Ends once the pool is gone.
fn checkpointer(c: Connection, signal: Arc<CheckpointSignal>, owner: Weak<Inner>) {
    loop {
        {
            let mut pending = lock(&signal.pending);
            while !*pending {
                let (next, _) = signal
                    .wake
                    .wait_timeout(pending, Duration::from_secs(1))
                    .unwrap_or_else(|e| e.into_inner());
                pending = next;
                if owner.strong_count() == 0 {
                    return;
                }
            }
            *pending = false;
        }
        if owner.strong_count() == 0 {
            return;
        }
        match wal_checkpoint(&c) {
            Ok(Some(frames)) => signal.wal_frames.store(frames, Ordering::Relaxed),
            Ok(None) => {}
            Err(e) => {
                tracing::warn!(error = %e, "checkpoint failed; retried after the next commit")
            }
        }
        std::thread::sleep(CHECKPOINT_EVERY);
    }
}

fn open_conn(path: &Path) -> StoreResult<Connection> {
    let c = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(db_err)?;
    // WAL: readers never wait for the writer. synchronous=FULL: a commit is on
    // disk before it is acknowledged, so neither `kill -9` nor a power cut
    // loses an acknowledged write (D43).
    c.execute_batch(
        "PRAGMA journal_mode = WAL;
         PRAGMA synchronous = FULL;
         PRAGMA foreign_keys = ON;
         PRAGMA busy_timeout = 5000;
         PRAGMA temp_store = MEMORY;
         PRAGMA cache_size = -16000;",
    )
    .map_err(db_err)?;
    // The query planner's stability guarantee: a statement's plan never
    // depends on the values bound to it. Without it, SQLite marks a
    // statement whose plan looked at a bound value (here: a BLOB compared
    // while weighing a partial index) to be compiled again after every
    // rebinding, so a cached statement was re-prepared on each use: 8 % of
    // the server's CPU under the grants benchmark went to that (issue 31).
    // Nothing here relies on value-dependent plans (no LIKE, no STAT4 data).
    c.set_db_config(
        rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG,
        true,
    )
    .map_err(db_err)?;
    c.set_prepared_statement_cache_capacity(64);
    Ok(c)
}

impl Pool {
    pub(crate) fn open(path: &Path) -> StoreResult<Self> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .map_err(|e| StoreError::Unavailable(format!("{}: {e}", dir.display())))?;
        }
        let mut writer = open_conn(path)?;
        // The writer never checkpoints on commit (SQLite's default, every
        // 1,000 pages, copies pages and fsyncs the database file inside a
        // commit, on the one thread every write waits for): the checkpointer
        // thread does it beside the writer.
        // When a complete checkpoint lets the WAL start over, a file that
        // grew past 64 MiB under a burst is cut back to that.
        writer
            .execute_batch("PRAGMA wal_autocheckpoint = 0; PRAGMA journal_size_limit = 67108864;")
            .map_err(db_err)?;
        let checkpoint = Arc::new(CheckpointSignal::default());
        // Every write goes through this one connection, so its update hook
        // sees every change to a client application, whatever the statement.
        let clients_dirty = Arc::new(AtomicBool::new(false));
        let flag = clients_dirty.clone();
        writer
            .update_hook(Some(
                move |_: rusqlite::hooks::Action, _: &str, table: &str, _: i64| {
                    // Clients and organizations are kept in memory against
                    // the generation (the token endpoint's clients, the
                    // organizations' names and limits).
                    if table == "clients" || table == "organizations" {
                        flag.store(true, Ordering::Release);
                    }
                },
            ))
            .map_err(db_err)?;
        let pool = Self {
            inner: Arc::new(Inner {
                path: path.to_owned(),
                readers: Mutex::new(Vec::new()),
                read_gate: Arc::new(Semaphore::new(MAX_READERS)),
                writer: Mutex::new(writer),
                queue: Mutex::new(Queue::default()),
                commits: Default::default(),
                committed_writes: Default::default(),
                clients_dirty,
                generation: Generation::open(path),
                checkpoint: checkpoint.clone(),
                seal: std::sync::OnceLock::new(),
            }),
        };
        let checkpointing = open_conn(path)?;
        let owner = Arc::downgrade(&pool.inner);
        std::thread::Builder::new()
            .name("sqlite-checkpoint".into())
            .spawn(move || checkpointer(checkpointing, checkpoint, owner))
            .map_err(|e| StoreError::Unavailable(format!("checkpointer thread: {e}")))?;
        Ok(pool)
    }

    /// Commits so far, and the successful writes they held.
    #[cfg(test)]
    pub(crate) fn commit_counts(&self) -> (u64, u64) {
        (
            self.inner.commits.load(Ordering::Relaxed),
            self.inner.committed_writes.load(Ordering::Relaxed),
        )
    }

    /// D58: from now on, audit entries are sealed in their INSERT with
    /// `seal` (the first call wins; the binary makes it before serving).
    pub(crate) fn seal_audit_at_insert(&self, seal: ChainSeal) {
        let _ = self.inner.seal.set(seal);
    }

    /// The shared client generation (see [`Generation`]); `None` without one.
    pub(crate) fn clients_version(&self) -> Option<u64> {
        self.inner.generation.as_ref().map(Generation::load)
    }

    pub(crate) fn migrate(&self) -> StoreResult<()> {
        let mut c = lock(&self.inner.writer);
        c.execute_batch("CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL, checksum BLOB)")
            .map_err(db_err)?;
        crate::schema::check_applied(&mut c, &self.inner.path)?;
        for version in apply_migrations(&mut c, MIGRATIONS)? {
            tracing::info!(version, "applied SQLite migration");
        }
        crate::schema::rekey_emails(&mut c)
    }

    /// Runs a short read inline on the calling task.
    pub(crate) async fn read<T>(
        &self,
        f: impl FnOnce(&Connection) -> StoreResult<T>,
    ) -> StoreResult<T> {
        let _permit = self
            .inner
            .read_gate
            .acquire()
            .await
            .map_err(|_| StoreError::Unavailable("closed".into()))?;
        self.inner.with_reader(f)
    }

    /// Runs a longer read (a list, a search index's whole list) on the blocking pool.
    pub(crate) async fn read_blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Connection) -> StoreResult<T> + Send + 'static,
    ) -> StoreResult<T> {
        let permit = self
            .inner
            .read_gate
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| StoreError::Unavailable("closed".into()))?;
        let inner = self.inner.clone();
        tokio::task::spawn_blocking(move || {
            // One read transaction: a list's page and its total come from the
            // same snapshot, so no answer mixes two states of the data (D33's
            // atomic reset, and any concurrent write).
            let r = inner.with_reader(|c| {
                let tx = c.unchecked_transaction().map_err(crate::db_err)?;
                let r = f(&tx)?;
                tx.commit().map_err(crate::db_err)?;
                Ok(r)
            });
            drop(permit);
            r
        })
        .await
        .map_err(|e| StoreError::Internal(format!("read task failed: {e}")))?
    }

    /// Runs `f` on the writer, off the async runtime, and answers once it
    /// is durably committed (or failed). Writes that arrive while another
    /// batch is committing are committed together (group commit, issue 16):
    /// one `BEGIN IMMEDIATE … COMMIT` and one fsync for the batch, each write
    /// in its own savepoint, so a write that fails is rolled back alone and
    /// the others still commit. Every write sees the ones before it, exactly
    /// as if they had run one after the other; none is acknowledged before
    /// the commit that holds it is on disk (`synchronous = FULL`, D43).
    pub(crate) async fn write<T: Send + 'static>(
        &self,
        f: impl FnOnce(&WriteTx<'_, '_>) -> StoreResult<T> + Send + 'static,
    ) -> StoreResult<T> {
        let (send, receive) = tokio::sync::oneshot::channel::<StoreResult<T>>();
        let job: Job = Box::new(move |tx| {
            let Some(tx) = tx else {
                // Not run: its batch could not even begin.
                let done: Done = Box::new(move |failed: Option<&Failure>| {
                    let _ = send.send(Err(failed.map_or_else(
                        || StoreError::Unavailable("the write was not run".into()),
                        Failure::error,
                    )));
                });
                return (false, done);
            };
            let out = f(tx);
            let ok = out.is_ok();
            let done: Done = Box::new(move |failed: Option<&Failure>| {
                let answer = match (out, failed) {
                    (Ok(v), None) => Ok(v),
                    (Ok(_), Some(failure)) => Err(failure.error()),
                    (Err(e), _) => Err(e),
                };
                let _ = send.send(answer);
            });
            (ok, done)
        });
        let start = {
            let mut queue = lock(&self.inner.queue);
            queue.jobs.push(job);
            !std::mem::replace(&mut queue.running, true)
        };
        if start {
            let inner = self.inner.clone();
            tokio::task::spawn_blocking(move || inner.drain());
        }
        receive
            .await
            .map_err(|_| StoreError::Internal("a write was dropped unanswered".into()))?
    }
}

/// A write waiting for the writer: runs in the batch's transaction (or,
/// given none, is not run) and says whether it succeeded, and how to answer
/// once the batch is settled.
type Job = Box<dyn FnOnce(Option<&WriteTx<'_, '_>>) -> (bool, Done) + Send>;
/// Answers a write: `None` when its batch committed.
type Done = Box<dyn FnOnce(Option<&Failure>) + Send>;

/// Why a batch did not commit, for each write of it that had succeeded.
struct Failure {
    unavailable: bool,
    message: String,
}

impl Failure {
    fn from(e: &StoreError) -> Self {
        Self {
            unavailable: matches!(e, StoreError::Unavailable(_)),
            message: e.to_string(),
        }
    }
    fn error(&self) -> StoreError {
        if self.unavailable {
            StoreError::Unavailable(self.message.clone())
        } else {
            StoreError::Internal(self.message.clone())
        }
    }
}

#[derive(Default)]
struct Queue {
    jobs: Vec<Job>,
    /// A blocking task is draining the queue.
    running: bool,
}

/// Writes per batch at most: bounds how long one commit holds the writer.
const MAX_BATCH: usize = 256;

impl Inner {
    /// Runs batches until the queue is empty (on the blocking pool; one
    /// drainer at a time, flagged by `Queue::running`).
    fn drain(&self) {
        loop {
            let batch: Vec<Job> = {
                let mut queue = lock(&self.queue);
                if queue.jobs.is_empty() {
                    queue.running = false;
                    return;
                }
                let n = queue.jobs.len().min(MAX_BATCH);
                queue.jobs.drain(..n).collect()
            };
            self.run_batch(batch);
        }
    }

    fn run_batch(&self, batch: Vec<Job>) {
        let mut c = lock(&self.writer);
        if self.checkpoint.wal_frames.load(Ordering::Relaxed) > WAL_FRAMES_LIMIT {
            // Between two batches: the whole WAL can be backfilled.
            match wal_checkpoint(&c) {
                Ok(Some(frames)) => self.checkpoint.wal_frames.store(frames, Ordering::Relaxed),
                Ok(None) => {}
                Err(e) => tracing::warn!(error = %e, "checkpoint by the writer failed"),
            }
        }
        let mut dones: Vec<(bool, Done)> = Vec::with_capacity(batch.len());
        let mut jobs = batch.into_iter();
        let settled: Result<(), StoreError> = (|| {
            let tx = c
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(db_err)?;
            let write = WriteTx {
                tx: &tx,
                seal: self.seal.get().copied(),
            };
            for job in jobs.by_ref() {
                tx.execute_batch("SAVEPOINT gh_write").map_err(db_err)?;
                let (ok, done) =
                    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        job(Some(&write))
                    })) {
                        Ok(r) => r,
                        Err(_) => {
                            tracing::error!("a write panicked; rolled back alone");
                            let done: Done = Box::new(|_| {});
                            (false, done)
                        }
                    };
                dones.push((ok, done));
                if tx.is_autocommit() {
                    // SQLite ended the transaction itself (disk full, I/O
                    // error): nothing of this batch was committed.
                    return Err(StoreError::Unavailable(
                        "the write transaction was rolled back by the database".into(),
                    ));
                }
                if ok {
                    tx.execute_batch("RELEASE gh_write").map_err(db_err)?;
                } else {
                    tx.execute_batch("ROLLBACK TO gh_write; RELEASE gh_write")
                        .map_err(db_err)?;
                }
            }
            tx.commit().map_err(db_err)
        })();
        // A change to a client is announced after its commit, never before:
        // a reader that sees the new generation reads the new row.
        if self.clients_dirty.swap(false, Ordering::AcqRel)
            && settled.is_ok()
            && let Some(g) = &self.generation
        {
            g.bump();
        }
        drop(c);
        // Writes the failed batch never reached run in the next one, unless
        // it failed before running any (the transaction could not begin):
        // then they fail with it, so a database that refuses every write
        // answers every caller instead of retrying forever.
        let left: Vec<Job> = jobs.collect();
        if dones.is_empty() {
            for job in left {
                dones.push(job(None));
            }
        } else if !left.is_empty() {
            let mut queue = lock(&self.queue);
            let later = std::mem::take(&mut queue.jobs);
            queue.jobs = left;
            queue.jobs.extend(later);
        }
        if settled.is_ok() {
            self.checkpoint.poke();
            self.commits.fetch_add(1, Ordering::Relaxed);
            self.committed_writes.fetch_add(
                dones.iter().filter(|d| d.0).count() as u64,
                Ordering::Relaxed,
            );
        }
        let failure = settled.as_ref().err().map(Failure::from);
        if let Some(f) = &failure {
            tracing::warn!(error = %f.message, writes = dones.len(), "a batch of writes did not commit");
        }
        for (_, done) in dones {
            done(failure.as_ref());
        }
    }

    fn with_reader<T>(&self, f: impl FnOnce(&Connection) -> StoreResult<T>) -> StoreResult<T> {
        let conn = match lock(&self.readers).pop() {
            Some(c) => c,
            None => open_conn(&self.path)?,
        };
        let out = f(&conn);
        lock(&self.readers).push(conn);
        out
    }
}

#[cfg(test)]
mod tests {
    use gatehouse_domain::{
        Email, Name, NewUser, Organization, Plan, Role, Timestamp, UserId, UserStatus,
    };
    use gatehouse_store::StoreError;
    use gatehouse_store::prelude::*;

    use crate::SqliteStore;

    /// A batch that cannot begin (another process holds the database's
    /// write lock past the busy timeout) answers every write queued behind
    /// it with `Unavailable`, none left waiting and none retried forever;
    /// once the lock is gone, writes commit again.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn writes_that_cannot_begin_are_all_answered_unavailable() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        let store = SqliteStore::open(&path).unwrap();
        let org = |name: &str| Organization {
            id: gatehouse_domain::OrgId::generate(),
            name: name.into(),
            plan: Plan::Free,
            per_minute: None,
            per_second: None,
            created_at: Timestamp::now(),
        };
        let other = rusqlite::Connection::open(&path).unwrap();
        other.execute_batch("BEGIN EXCLUSIVE").unwrap();
        let writes: Vec<_> = (0..5)
            .map(|i| {
                let (store, o) = (store.clone(), org(&format!("Blocked {i}")));
                tokio::spawn(async move { store.create_org(&o).await })
            })
            .collect();
        for w in writes {
            match w.await.unwrap() {
                Err(StoreError::Unavailable(_)) => {}
                other => panic!("expected Unavailable, got {other:?}"),
            }
        }
        other.execute_batch("ROLLBACK").unwrap();
        let o = org("After");
        store.create_org(&o).await.unwrap();
        assert!(store.get_org(&o.id).await.unwrap().is_some());
    }

    /// Group commit (issue 16): 300 writes at once are committed in fewer
    /// transactions than writes; a write that fails (a duplicate e-mail) is
    /// refused alone and leaves nothing behind, and every other write of its
    /// batch is committed and answered.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_writes_share_commits_and_fail_alone() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(&dir.path().join("db")).unwrap();
        let org = Organization {
            id: gatehouse_domain::OrgId::generate(),
            name: "Acme".into(),
            plan: Plan::Free,
            per_minute: None,
            per_second: None,
            created_at: Timestamp::now(),
        };
        store.create_org(&org).await.unwrap();
        let (commits_before, _) = store.pool.commit_counts();
        let writes = (0..300).map(|i| {
            let (store, org) = (store.clone(), org.id.clone());
            // Every tenth write repeats an address another write also uses.
            let n = if i % 10 == 9 { i - 9 } else { i };
            tokio::spawn(async move {
                let u = NewUser {
                    id: UserId::generate(),
                    email: Email::parse(&format!("u{n}@example.com")).unwrap(),
                    name: Name::parse(&format!("User {i}")).unwrap(),
                    role: Role::Viewer,
                    status: UserStatus::PendingInvite,
                    password_hash: None,
                    created_at: Timestamp::now(),
                };
                store
                    .insert_user(&org, &u, gatehouse_store::conformance::teller())
                    .await
                    .map(|_| u.id)
            })
        });
        let mut created = Vec::new();
        let mut duplicates = 0;
        for w in writes.collect::<Vec<_>>() {
            match w.await.unwrap() {
                Ok(id) => created.push(id),
                Err(StoreError::Duplicate("email")) => duplicates += 1,
                Err(e) => panic!("unexpected {e:?}"),
            }
        }
        assert_eq!(duplicates, 30);
        assert_eq!(created.len(), 270);
        for id in &created {
            assert!(store.get_user(&org.id, id).await.unwrap().is_some());
        }
        let listed = store
            .list_users(
                &org.id,
                &Default::default(),
                gatehouse_domain::Page {
                    limit: 1,
                    offset: 0,
                },
            )
            .await
            .unwrap();
        assert_eq!(listed.total, 270, "the refused writes left nothing");
        let (commits, _) = store.pool.commit_counts();
        assert!(
            commits - commits_before < 270,
            "270 writes in {} commits: none shared",
            commits - commits_before
        );
    }

    /// The writer never checkpoints (`wal_autocheckpoint = 0`); the
    /// checkpointer thread copies committed pages into the database file
    /// beside it. Read with `immutable=1`, which looks at the database file
    /// alone (never the WAL), the last write shows up there by itself.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_checkpointer_copies_commits_into_the_database_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        let store = SqliteStore::open(&path).unwrap();
        let writer_setting: i64 = {
            let c = super::lock(&store.pool.inner.writer);
            c.query_row("PRAGMA wal_autocheckpoint", [], |r| r.get(0))
                .unwrap()
        };
        assert_eq!(writer_setting, 0, "the writer never checkpoints itself");
        let mut last = None;
        for i in 0..50 {
            let o = Organization {
                id: gatehouse_domain::OrgId::generate(),
                name: format!("Org {i}"),
                plan: Plan::Free,
                per_minute: None,
                per_second: None,
                created_at: Timestamp::now(),
            };
            store.create_org(&o).await.unwrap();
            last = Some(o.id);
        }
        let last = last.unwrap();
        let in_file = || {
            let c = rusqlite::Connection::open_with_flags(
                format!("file:{}?immutable=1", path.display()),
                rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_URI,
            )
            .unwrap();
            c.query_row(
                "SELECT count(*) FROM organizations WHERE id = ?1",
                [last.as_str()],
                |r| r.get::<_, i64>(0),
            )
            .unwrap_or(0)
        };
        for _ in 0..100 {
            if in_file() == 1 {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        panic!("the last commit never reached the database file");
    }

    /// Pending migrations apply in one transaction (issue 31's cold start):
    /// one that fails leaves the database as it was before any of them.
    #[test]
    fn migrations_apply_whole_or_not_at_all() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = super::open_conn(&dir.path().join("m.db")).unwrap();
        c.execute_batch("CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL, checksum BLOB)")
            .unwrap();
        let first: &[(i64, &str)] = &[(1, "CREATE TABLE a (x INTEGER)")];
        assert_eq!(super::apply_migrations(&mut c, first).unwrap(), vec![1]);
        // Two more, the second of which fails: neither is kept.
        let next: &[(i64, &str)] = &[
            (1, "CREATE TABLE a (x INTEGER)"),
            (2, "CREATE TABLE b (y INTEGER)"),
            (3, "CREATE TABLE a (z INTEGER)"),
        ];
        assert!(super::apply_migrations(&mut c, next).is_err());
        let tables: Vec<String> = c
            .prepare("SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY name")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(tables, vec!["a", "schema_migrations"]);
        let versions: Vec<i64> = c
            .prepare("SELECT version FROM schema_migrations ORDER BY version")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(versions, vec![1]);
        // Fixed, they apply together.
        let fixed: &[(i64, &str)] = &[
            (1, "CREATE TABLE a (x INTEGER)"),
            (2, "CREATE TABLE b (y INTEGER)"),
            (3, "CREATE TABLE c (z INTEGER)"),
        ];
        assert_eq!(super::apply_migrations(&mut c, fixed).unwrap(), vec![2, 3]);
    }

    /// A cached statement runs as compiled, whatever is bound to it: the
    /// refresh grant's lookup (a BLOB digest, a join to a table with a
    /// partial index) was compiled again on every use before the planner's
    /// stability guarantee was turned on (issue 31).
    #[tokio::test]
    async fn cached_statements_are_not_compiled_again_for_new_bindings() {
        use rusqlite::StatementStatus;
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(&dir.path().join("db")).unwrap();
        let sql = "SELECT t.digest, c.id FROM refresh_tokens t
                   JOIN refresh_chains c ON c.id = t.chain_id WHERE t.digest = ?1";
        for connection in ["reader", "writer"] {
            let mut reprepared = 0;
            for i in 0..4u8 {
                let run = move |c: &rusqlite::Connection| {
                    let mut s = c.prepare_cached(sql).map_err(crate::db_err)?;
                    let mut rows = s.query([vec![i; 32]]).map_err(crate::db_err)?;
                    while rows.next().map_err(crate::db_err)?.is_some() {}
                    drop(rows);
                    Ok(s.get_status(StatementStatus::RePrepare))
                };
                reprepared = if connection == "reader" {
                    store.pool.read(run).await.unwrap()
                } else {
                    store.pool.write(move |tx| run(tx)).await.unwrap()
                };
            }
            assert_eq!(
                reprepared, 0,
                "the {connection}'s statement was compiled again"
            );
        }
    }
}
