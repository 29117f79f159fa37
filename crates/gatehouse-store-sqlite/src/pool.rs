//! A bounded pool of rusqlite connections: many readers, one writer.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use gatehouse_store::{StoreError, StoreResult};
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
    write_gate: Arc<Semaphore>,
    /// Set by the writer's update hook when a transaction touched `clients`.
    clients_dirty: Arc<AtomicBool>,
    /// Bumped after each commit that changed a client (see [`Generation`]).
    generation: Option<Generation>,
}

/// Readers open at most at once. Reads are short; more connections than this
/// only add memory on a 2-core machine.
const MAX_READERS: usize = 8;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding a connection leaves it usable: SQLite rolls back
    // an unfinished transaction when the `Transaction` is dropped.
    m.lock().unwrap_or_else(|e| e.into_inner())
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
    c.set_prepared_statement_cache_capacity(64);
    // SQLite's lower() folds only A-Z; searches need Unicode case folding (D14).
    c.create_scalar_function(
        "unicode_lower",
        1,
        rusqlite::functions::FunctionFlags::SQLITE_UTF8
            | rusqlite::functions::FunctionFlags::SQLITE_DETERMINISTIC,
        |ctx| Ok(ctx.get::<Option<String>>(0)?.map(|s| s.to_lowercase())),
    )
    .map_err(db_err)?;
    Ok(c)
}

impl Pool {
    pub(crate) fn open(path: &Path) -> StoreResult<Self> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .map_err(|e| StoreError::Unavailable(format!("{}: {e}", dir.display())))?;
        }
        let mut writer = open_conn(path)?;
        // Every write goes through this one connection, so its update hook
        // sees every change to a client application, whatever the statement.
        let clients_dirty = Arc::new(AtomicBool::new(false));
        let flag = clients_dirty.clone();
        writer
            .update_hook(Some(
                move |_: rusqlite::hooks::Action, _: &str, table: &str, _: i64| {
                    if table == "clients" {
                        flag.store(true, Ordering::Release);
                    }
                },
            ))
            .map_err(db_err)?;
        Ok(Self {
            inner: Arc::new(Inner {
                path: path.to_owned(),
                readers: Mutex::new(Vec::new()),
                read_gate: Arc::new(Semaphore::new(MAX_READERS)),
                writer: Mutex::new(writer),
                write_gate: Arc::new(Semaphore::new(1)),
                clients_dirty,
                generation: Generation::open(path),
            }),
        })
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
        for (version, sql) in MIGRATIONS {
            let tx = c
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(db_err)?;
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
                tracing::info!(version, "applied SQLite migration");
            }
            tx.commit().map_err(db_err)?;
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

    /// Runs a longer read (a list, a search) on the blocking pool.
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

    /// Runs `f` in an immediate transaction on the writer, off the async
    /// runtime; commits when `f` succeeds, rolls back otherwise.
    pub(crate) async fn write<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Transaction<'_>) -> StoreResult<T> + Send + 'static,
    ) -> StoreResult<T> {
        let permit = self
            .inner
            .write_gate
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| StoreError::Unavailable("closed".into()))?;
        let inner = self.inner.clone();
        tokio::task::spawn_blocking(move || {
            let mut c = lock(&inner.writer);
            let out = (|| {
                let tx = c
                    .transaction_with_behavior(TransactionBehavior::Immediate)
                    .map_err(db_err)?;
                let out = f(&tx)?;
                tx.commit().map_err(db_err)?;
                Ok(out)
            })();
            // A change to a client is announced after its commit, never
            // before: a reader that sees the new generation reads the new row.
            if inner.clients_dirty.swap(false, Ordering::AcqRel)
                && out.is_ok()
                && let Some(g) = &inner.generation
            {
                g.bump();
            }
            drop(c);
            drop(permit);
            out
        })
        .await
        .map_err(|e| StoreError::Internal(format!("write task failed: {e}")))?
    }
}

impl Inner {
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
