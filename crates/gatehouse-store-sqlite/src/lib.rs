//! `gatehouse-store-sqlite` implements the [`Store`] contract on SQLite, the
//! embedded default: one database file in WAL mode with durable commits.
//!
//! Access path (measured, see `docs/storage.md`): rusqlite on a bounded pool.
//! Point reads (a user, a product, a client at the token endpoint) run inline
//! on the calling task — a primary-key read costs a few microseconds, far less
//! than a hop to a worker thread. Lists, the search index's reads and every
//! write run on tokio's blocking pool, gated by semaphores (readers: a fixed
//! number of connections; writers: one, as SQLite allows), so no request can
//! grow the thread or connection count without bound.
//!
//! This crate owns SQL for SQLite and its migrations. It must not import the
//! auth layer, HTTP types, or anything of another backend.

mod api_keys;
mod audit;
mod auth_state;
mod clients;
mod effects;
mod events;
mod generation;
mod grants;
mod idempotency;
mod jobs;
mod links;
mod lists;
mod mfa;
mod orgs;
mod outbox;
mod pool;
mod products;
mod rate;
mod revocations;
mod rows;
mod schema;
mod sealed;
mod search;
mod sessions;
mod signing_keys;
mod usage;
mod users;
mod webhooks;

use std::path::Path;

use async_trait::async_trait;
use gatehouse_domain::ChainId;
use gatehouse_domain::{
    ApiKey, ApiKeyId, Client, ClientId, KeyCut, Listing, NewProduct, NewUser, OrgId, Organization,
    Page, Plan, Product, ProductId, ProductPatch, ProductStatus, Role, Scope, ScopeSet, Timestamp,
    UsageRange, User, UserId, UserPatch, UserStatus, client, effect, link, product,
    user::{self, UserChange},
    values::{Email, Name, Sku},
};
use gatehouse_store::prelude::*;
use gatehouse_store::{
    AuthCode, ChainFilter, ClientChanges, Consent, LinkKind, LinkRecord, NewClient, NewLink,
    OutboundEmail, OutboxMessage, ProductFilter, Redeemed, RefreshChain, RefreshToken, Revocation,
    RevocationKind, Rotated, Session, SigningKeyRecord, Store, StoreError, StoreResult, UserFilter,
};
use gatehouse_store::{Credential, UsageCount, UsageMinute};
use gatehouse_store::{NewRevocation, check_org};
use rusqlite::{Connection, OptionalExtension, Row, params};

use clients::insert_client_row;
use lists::*;
use pool::Pool;
use rows::*;
use users::get_user_tx;

/// The SQLite backend. Cheap to clone.
#[derive(Clone)]
pub struct SqliteStore {
    pool: Pool,
}

impl SqliteStore {
    /// Opens (creating if needed) the database at `path` and applies migrations.
    pub fn open(path: &Path) -> StoreResult<Self> {
        let pool = Pool::open(path)?;
        pool.migrate()?;
        Ok(Self { pool })
    }

    /// D58: seals each audit entry in the INSERT that writes it, with
    /// `seal` (`gatehouse_auth::audit::seal_entry`), instead of leaving it
    /// to the sealer's UPDATE after commit. SQLite's one writer commits in
    /// the order it writes, so the chain's order is the commit order either
    /// way; sealing at insert spares every audited write a second write of
    /// its entry (issue 31: code exchange and refresh). A chain that still
    /// has unsealed entries (written by a process without the seal) gets
    /// unsealed ones until the sealer has caught up, so its order holds.
    pub fn sealing_audit_at_insert(self, seal: gatehouse_store::ChainSeal) -> Self {
        self.pool.seal_audit_at_insert(seal);
        self
    }
}

pub(crate) fn db_err(e: rusqlite::Error) -> StoreError {
    use rusqlite::ErrorCode;
    if let rusqlite::Error::SqliteFailure(f, msg) = &e {
        match f.code {
            ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked => {
                return StoreError::Unavailable(e.to_string());
            }
            ErrorCode::ConstraintViolation => {
                let m = msg.as_deref().unwrap_or("");
                if m.contains("users.org_id, users.email_norm") {
                    return StoreError::Duplicate("email");
                }
                if m.contains("products.org_id, products.sku") {
                    return StoreError::Duplicate("sku");
                }
            }
            ErrorCode::CannotOpen
            | ErrorCode::NotADatabase
            | ErrorCode::DiskFull
            | ErrorCode::SystemIoFailure => {
                return StoreError::Unavailable(e.to_string());
            }
            _ => {}
        }
    }
    StoreError::Internal(e.to_string())
}

#[async_trait]
impl Store for SqliteStore {
    async fn ping(&self) -> StoreResult<()> {
        self.pool
            .read(|c| c.query_row("SELECT 1", [], |_| Ok(())).map_err(db_err))
            .await
    }
}

#[cfg(test)]
mod classification {
    use gatehouse_store::StoreError;
    use rusqlite::ffi;

    fn failure(code: i32) -> rusqlite::Error {
        rusqlite::Error::SqliteFailure(ffi::Error::new(code), None)
    }

    #[test]
    fn a_full_or_failing_disk_is_unavailable() {
        // D6: a full disk answers writes with 503 and Retry-After, not 500
        // (the disk-full drill in crates/gatehouse/tests/drills.rs).
        for code in [
            ffi::SQLITE_FULL,
            ffi::SQLITE_IOERR,
            ffi::SQLITE_IOERR_WRITE,
            ffi::SQLITE_IOERR_FSYNC,
            ffi::SQLITE_IOERR_SHMSIZE,
            ffi::SQLITE_CANTOPEN,
            ffi::SQLITE_BUSY,
            ffi::SQLITE_LOCKED,
        ] {
            assert!(
                matches!(crate::db_err(failure(code)), StoreError::Unavailable(_)),
                "code {code} is Unavailable"
            );
        }
    }

    #[test]
    fn other_failures_stay_internal() {
        for code in [ffi::SQLITE_ERROR, ffi::SQLITE_MISMATCH, ffi::SQLITE_RANGE] {
            assert!(
                matches!(crate::db_err(failure(code)), StoreError::Internal(_)),
                "code {code} is Internal"
            );
        }
    }
}

#[cfg(test)]
mod conformance {
    use super::SqliteStore;

    fn fresh() -> SqliteStore {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(&dir.path().join("gatehouse.db")).unwrap();
        // The directory must outlive the store; the OS cleans /tmp.
        std::mem::forget(dir);
        store
    }

    /// SQLite checks CHECK constraints per connection: the writer skips
    /// them for the planted statement only.
    #[async_trait::async_trait]
    impl gatehouse_store::conformance::PlantRows for SqliteStore {
        async fn plant(&self, sql: &str) {
            let owned = sql.to_owned();
            self.pool
                .write(move |tx| {
                    tx.execute_batch("PRAGMA ignore_check_constraints = ON")
                        .map_err(super::db_err)?;
                    let planted = tx.execute_batch(&owned).map_err(super::db_err);
                    tx.execute_batch("PRAGMA ignore_check_constraints = OFF")
                        .map_err(super::db_err)?;
                    planted
                })
                .await
                .unwrap_or_else(|e| panic!("planting {sql:?}: {e}"));
        }
    }

    gatehouse_store::store_conformance_tests!(fresh());

    #[tokio::test]
    async fn leases_left_behind_at_start() {
        // One serving process per SQLite database (D44).
        gatehouse_store::conformance::leases_left_behind_at_start(&fresh(), true).await;
    }
}

#[cfg(test)]
mod email_rekeying {
    use gatehouse_store::prelude::*;
    use rusqlite::params;

    use super::SqliteStore;

    fn key_of(db: &std::path::Path, id: &str) -> String {
        let c = rusqlite::Connection::open(db).unwrap();
        c.query_row("SELECT email_norm FROM users WHERE id = ?1", [id], |r| {
            r.get(0)
        })
        .unwrap()
    }

    /// D8 (revised): keys written by the old rule (`to_lowercase()`) are
    /// re-keyed when the store opens; a pair that is now one address keeps
    /// both rows, the later one with its old key.
    #[tokio::test]
    async fn old_keys_are_rekeyed_at_open_and_collisions_keep_both_rows() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("gatehouse.db");
        let org = gatehouse_store::migrated::rekey_org();
        {
            let store = SqliteStore::open(&db).unwrap();
            store.create_org(&org).await.unwrap();
        }
        {
            let c = rusqlite::Connection::open(&db).unwrap();
            for (id, email, at) in gatehouse_store::migrated::PLANTED {
                c.execute(
                    "INSERT INTO users (id, org_id, email, email_norm, name, role, status, created_at, updated_at)
                     VALUES (?1, ?2, ?3, ?4, 'n', 'viewer', 'pending_invite', ?5, ?5)",
                    params![id, org.id.as_str(), email, email.to_lowercase(), at],
                )
                .unwrap();
            }
            // The re-keying reads only the non-ASCII rows, through the
            // partial index.
            let plan: String = c
                .query_row(
                    "EXPLAIN QUERY PLAN SELECT seq, id, org_id, email, email_norm FROM users
                     WHERE length(email) <> length(CAST(email AS BLOB)) ORDER BY created_at, seq",
                    [],
                    |r| r.get(3),
                )
                .unwrap();
            assert!(plan.contains("users_non_ascii_email"), "{plan}");
        }
        assert_eq!(key_of(&db, "usr_rekey2"), "stra\u{df}e@x.com");
        assert_eq!(key_of(&db, "usr_rekey3"), "jose\u{301}@b.example.com");

        let store = SqliteStore::open(&db).unwrap();
        for (id, key) in gatehouse_store::migrated::REKEYED {
            assert_eq!(key_of(&db, id), key, "{id}");
        }
        gatehouse_store::migrated::check_rekeyed(&store, &org.id).await;
        drop(store);

        // Opening again changes nothing and loses nothing.
        let _store = SqliteStore::open(&db).unwrap();
        assert_eq!(key_of(&db, "usr_rekey2"), "stra\u{df}e@x.com");
        assert_eq!(key_of(&db, "usr_rekey3"), "jos\u{e9}@b.example.com");
        let c = rusqlite::Connection::open(&db).unwrap();
        let n: i64 = c
            .query_row("SELECT count(*) FROM users", [], |r| r.get(0))
            .unwrap();
        assert_eq!(n, 4);
    }
}
