//! `gatehouse-store-postgres` implements the [`Store`] contract on
//! PostgreSQL, the backend for several nodes sharing one database (D44). It
//! owns the PostgreSQL schema and its migrations (`migrations/*.sql`,
//! embedded and applied at start under an advisory lock), the SQL of every
//! `Store` method, and — behind the `testing` feature — a throwaway cluster
//! for tests ([`testing`]). Its behaviour is the SQLite backend's, as the
//! conformance suite of `gatehouse-store` checks it: the same list order,
//! filters, totals, rules and errors (neither backend searches: `q` is the
//! application's in-memory index).
//!
//! This crate must not import HTTP types, the auth layer (`gatehouse-auth`),
//! the server or the SQLite backend: it knows the domain, the `Store` trait
//! and SQL, nothing else.
//!
//! Concurrency, where SQLite has one writer and PostgreSQL has many:
//!
//! * Transactions run at READ COMMITTED with explicit row locks where a rule
//!   spans rows: the last-admin rule (D13) locks the organization's row before
//!   counting admins, so two concurrent demotions cannot both succeed.
//! * Single-use state changes are conditional updates (`… WHERE used_at IS
//!   NULL`): one caller wins a refresh rotation or a code redemption (D24,
//!   D26), whatever the number of nodes.
//! * Outbox claims use `FOR UPDATE SKIP LOCKED` with a lease (D30, D44).
//! * Revocation ids become visible in increasing order (see
//!   `auth_state::insert_revocation`), so pollers never miss one (D44).
//! * Deadlocks and serialization failures are retried a few times with the
//!   whole transaction; if they persist the caller gets `Unavailable` (503).

mod api_keys;
mod audit;
mod auth_state;
mod batch;
mod clients;
mod effects;
mod events;
mod grants;
mod idempotency;
mod jobs;
mod links;
mod lists;
mod mfa;
mod orgs;
mod outbox;
mod products;
mod rate;
mod revocations;
mod rows;
mod schema;
mod sealed;
mod search;
mod sessions;
mod signing_keys;
#[cfg(feature = "testing")]
pub mod testing;
mod usage;
mod users;
mod webhooks;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use gatehouse_domain::ChainId;
use gatehouse_domain::{
    ApiKey, ApiKeyId, Client, ClientId, DomainError, KeyCut, Listing, NewProduct, NewUser, OrgId,
    Organization, Page, Product, ProductId, ProductPatch, Scope, ScopeSet, Timestamp, UsageRange,
    User, UserId, UserPatch, client, effect, link, product,
    user::{self, UserChange},
    values::Email,
};
use gatehouse_store::prelude::*;
use gatehouse_store::{
    AuthCode, ChainFilter, ClientChanges, Consent, LinkKind, LinkRecord, NewClient, NewLink,
    OutboundEmail, OutboxMessage, ProductFilter, Redeemed, RefreshChain, RefreshToken, Revocation,
    RevocationKind, Rotated, Session, SharedWindow, SigningKeyRecord, Store, StoreError,
    StoreResult, UserFilter,
};
use gatehouse_store::{Credential, UsageCount, UsageMinute};
use gatehouse_store::{NewRevocation, check_org};

use sqlx_core::query::query;
use sqlx_core::query_as::query_as;
use sqlx_core::query_scalar::query_scalar;
use sqlx_core::row::Row;
use sqlx_postgres::{PgConnectOptions, PgConnection, PgPool, PgPoolOptions};

use clients::insert_client_row;
use lists::Filters;
use products::insert_product_row;
use rate::{RATE_BUCKET_MS, RATE_MINUTE_BUCKETS};
use rows::{
    API_KEY_COLS, CLIENT_COLS, CODE_COLS, ORG_COLS, TOKEN_COLS, USER_COLS, api_key_row, chain_row,
    client_row, code_row, org_row, token_row, user_row,
};
use users::{get_user_tx, insert_user_row, lock_user, user_with_lock};

/// Pool settings.
#[derive(Clone, Debug)]
pub struct PgOptions {
    /// Connections held at most (default 16). Each node holds its own pool,
    /// so the nodes' sum must stay under the server's `max_connections`.
    pub max_connections: u32,
    /// How long a request waits for a connection before it fails with
    /// `Unavailable` (default 2 s). It bounds the connection attempts too:
    /// while the server refuses connections sqlx keeps retrying until this
    /// runs out, so it is what a request waits for its 503 during an outage
    /// (D6: 503 with Retry-After, never a hang; the failure drill holds every
    /// answer under 5 s). Pool exhaustion under load waits as long.
    pub acquire_timeout: Duration,
}

impl Default for PgOptions {
    fn default() -> Self {
        Self {
            max_connections: 16,
            acquire_timeout: Duration::from_secs(2),
        }
    }
}

/// The PostgreSQL backend. Cheap to clone (the pool and the batched point
/// reads are shared).
#[derive(Clone)]
pub struct PgStore {
    pool: PgPool,
    reads: Arc<Reads>,
    orgs: Arc<orgs::OrgChanges>,
}

/// The point reads of the request paths, batched ([`batch`]).
struct Reads {
    users: batch::PointReads<User, batch::Tenant>,
    products: batch::PointReads<Product, batch::Tenant>,
    clients: batch::PointReads<Client, batch::Global>,
}

impl Reads {
    fn new(pool: &PgPool, wait: Duration) -> Self {
        Self {
            users: batch::PointReads::new(pool.clone(), ("users", USER_COLS), user_row, wait),
            products: batch::PointReads::new(
                pool.clone(),
                ("products", rows::PRODUCT_COLS),
                rows::product_row,
                wait,
            ),
            clients: batch::PointReads::new(
                pool.clone(),
                ("clients", CLIENT_COLS),
                client_row,
                wait,
            ),
        }
    }
}

impl PgStore {
    /// Connects to the database at `url` (`postgres://…` or
    /// `postgresql://…`, libpq-style parameters such as `sslmode` allowed)
    /// with the default [`PgOptions`], and applies pending migrations.
    pub async fn connect(url: &str) -> StoreResult<Self> {
        Self::connect_with(url, PgOptions::default()).await
    }

    /// [`PgStore::connect`] with explicit pool settings.
    pub async fn connect_with(url: &str, options: PgOptions) -> StoreResult<Self> {
        let connect: PgConnectOptions = url
            .parse()
            .map_err(|e| StoreError::Internal(format!("invalid PostgreSQL URL: {e}")))?;
        let connect = connect.application_name("gatehouse");
        schema::migrate(&connect).await?;
        let pool = PgPoolOptions::new()
            .max_connections(options.max_connections.max(1))
            .acquire_timeout(options.acquire_timeout)
            // A ping before every checkout would double the cost of a point
            // read; a dead connection fails its query once (503) and is
            // dropped, and idle connections are recycled.
            .test_before_acquire(false)
            .idle_timeout(Some(Duration::from_secs(300)))
            .max_lifetime(Some(Duration::from_secs(1800)))
            .connect_lazy_with(connect.clone());
        let reads = Arc::new(Reads::new(&pool, options.acquire_timeout));
        // The listener for organization changes has a connection of its
        // own, outside the pool: it takes none of the requests' connections.
        let listening = PgPoolOptions::new()
            .max_connections(1)
            .acquire_timeout(options.acquire_timeout)
            .test_before_acquire(false)
            .connect_lazy_with(connect);
        let orgs = orgs::OrgChanges::follow(&listening, &pool);
        Ok(Self { pool, reads, orgs })
    }

    /// Statements the batched point reads (users, products, clients) have
    /// sent so far: the tests' check that reads arriving together share one.
    #[cfg(feature = "testing")]
    pub fn point_read_statements(&self) -> u64 {
        self.reads.users.statements()
            + self.reads.products.statements()
            + self.reads.clients.statements()
    }

    /// Applies pending migrations (`gatehouse migrate`); [`PgStore::connect`]
    /// already does this. Safe to run from several nodes at once.
    pub async fn migrate(&self) -> StoreResult<()> {
        schema::migrate(&self.pool.connect_options()).await
    }

    /// Closes the pool: waits for connections in use to come back, then
    /// closes them all (graceful shutdown, D43).
    pub async fn close(&self) {
        self.pool.close().await;
    }
}

/// Maps a database error to the store's errors, like the SQLite backend:
/// unique violations name their field, an unreachable or overloaded server
/// is `Unavailable` (503), anything else `Internal` (500).
pub(crate) fn db_err(e: sqlx_core::Error) -> StoreError {
    use sqlx_core::Error as E;
    match &e {
        E::Database(d) => {
            let code = d.code().unwrap_or_default();
            if code == "23505" {
                match d.constraint() {
                    Some("users_org_email_key") => return StoreError::Duplicate("email"),
                    Some("products_org_sku_key") => return StoreError::Duplicate("sku"),
                    Some("mfa_by_credential") => return StoreError::Duplicate("credential_id"),
                    _ => {}
                }
            }
            // 08: connection exceptions; 53: insufficient resources (too many
            // connections, disk full); 57P0x: shutting down (57P01 is what a
            // `pg_ctl stop -m fast` sends to every session) or cannot connect
            // now; 57014: a query cancelled (statement timeout, an operator);
            // 25006: a write reached a read-only server (a standby during a
            // failover); 40001/40P01: serialization failure or deadlock still
            // there after the retries; 55P03: lock not available. All pass
            // with time: D6's 503 with Retry-After, not a 500.
            if code.starts_with("08")
                || code.starts_with("53")
                || code.starts_with("57P")
                || code == "57014"
                || code == "25006"
                || code == "40001"
                || code == "40P01"
                || code == "55P03"
            {
                return StoreError::Unavailable(e.to_string());
            }
            StoreError::Internal(e.to_string())
        }
        // The server refused, closed or reset the connection, or none could
        // be had within the acquire timeout (an outage, or every connection
        // busy).
        E::Io(_) | E::Tls(_) | E::PoolTimedOut | E::PoolClosed | E::WorkerCrashed => {
            StoreError::Unavailable(e.to_string())
        }
        _ => StoreError::Internal(e.to_string()),
    }
}

/// An error inside a transaction: a store error (a rule, not found) ends it;
/// a database error may be retried when it is a deadlock or a
/// serialization failure.
pub(crate) enum TxError {
    Store(StoreError),
    Db(sqlx_core::Error),
}

pub(crate) type TxResult<T> = Result<T, TxError>;

impl From<StoreError> for TxError {
    fn from(e: StoreError) -> Self {
        TxError::Store(e)
    }
}

impl From<DomainError> for TxError {
    fn from(e: DomainError) -> Self {
        TxError::Store(StoreError::Rule(e))
    }
}

impl From<sqlx_core::Error> for TxError {
    fn from(e: sqlx_core::Error) -> Self {
        TxError::Db(e)
    }
}

impl TxError {
    fn into_store(self) -> StoreError {
        match self {
            TxError::Store(e) => e,
            TxError::Db(e) => db_err(e),
        }
    }

    fn retryable(&self) -> bool {
        match self {
            TxError::Db(sqlx_core::Error::Database(d)) => {
                matches!(d.code().as_deref(), Some("40001" | "40P01"))
            }
            _ => false,
        }
    }
}

/// Retries of a transaction that hit a deadlock or serialization failure.
const MAX_RETRIES: u32 = 4;

fn backoff(attempt: u32) -> Duration {
    // 5, 10, 20, 40 ms, plus a little spread so two losers do not collide again.
    let spread = u64::from(std::process::id() % 7 + attempt);
    Duration::from_millis((5u64 << (attempt - 1).min(4)) + spread)
}

/// Pins the output type of an async block (for `?` inside it).
fn typed<T, F: Future<Output = TxResult<T>>>(f: F) -> F {
    f
}

/// Runs `$body` in a transaction on `$store`'s pool, with `$tx` bound to the
/// transaction; commits when the body returns `Ok`, rolls back otherwise.
/// A `return` inside the body leaves the body (and still commits an `Ok`).
/// Deadlocks and serialization failures rerun the whole body.
macro_rules! write_tx {
    ($store:expr, |$tx:ident| $body:expr) => {{
        let mut attempt: u32 = 0;
        loop {
            let outcome = typed(async {
                let mut $tx = $store.pool.begin().await?;
                let out = typed(async { $body }).await?;
                $tx.commit().await?;
                Ok(out)
            })
            .await;
            match outcome {
                Err(e) if e.retryable() && attempt < MAX_RETRIES => {
                    attempt += 1;
                    tracing::debug!(
                        attempt,
                        "retrying a PostgreSQL transaction after a conflict"
                    );
                    tokio::time::sleep(backoff(attempt)).await;
                }
                other => break other.map_err(TxError::into_store),
            }
        }
    }};
}
pub(crate) use write_tx;

/// Runs `$body` in a read-only REPEATABLE READ transaction bound to `$c`:
/// every statement sees one snapshot, so a list's page and its total agree
/// even while another transaction (a staging reset, D33) commits between
/// them. Rolled back if dropped early.
macro_rules! snapshot_read {
    ($store:expr, |$c:ident| $body:expr) => {{
        typed(async {
            let mut tx = $store.pool.begin().await?;
            query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                .execute(&mut *tx)
                .await?;
            let out = {
                let $c: &mut PgConnection = &mut tx;
                $body
            }?;
            tx.commit().await?;
            Ok(out)
        })
        .await
        .map_err(TxError::into_store)
    }};
}
pub(crate) use snapshot_read;

/// Runs `$body` on a pooled connection bound to `$c` (reads).
macro_rules! read {
    ($store:expr, |$c:ident| $body:expr) => {{
        typed(async {
            let mut conn = $store.pool.acquire().await?;
            let $c: &mut PgConnection = &mut conn;
            $body
        })
        .await
        .map_err(TxError::into_store)
    }};
}
pub(crate) use read;

pub(crate) fn bits(s: ScopeSet) -> i32 {
    i32::from(s.bits())
}

#[async_trait]
impl Store for PgStore {
    async fn ping(&self) -> StoreResult<()> {
        query("SELECT 1")
            .execute(&self.pool)
            .await
            .map_err(db_err)?;
        Ok(())
    }
}

/// The conformance suite's hook to plant corrupt rows. PostgreSQL cannot skip
/// CHECK constraints for one statement, so the test database's own CHECK
/// constraints are dropped first (every test has a fresh database).
#[cfg(feature = "testing")]
#[async_trait]
impl gatehouse_store::conformance::PlantRows for PgStore {
    async fn plant(&self, sql: &str) {
        use sqlx_core::executor::Executor;
        const DROP_CHECKS: &str = "DO $$ DECLARE r record; BEGIN
            FOR r IN SELECT conrelid::regclass AS t, conname FROM pg_constraint
                     WHERE contype = 'c' AND conrelid <> 0
                       AND connamespace = current_schema()::regnamespace LOOP
                EXECUTE format('ALTER TABLE %s DROP CONSTRAINT %I', r.t, r.conname);
            END LOOP;
        END $$";
        let mut tx = self.pool.begin().await.expect("a connection");
        (&mut *tx)
            .execute(DROP_CHECKS)
            .await
            .expect("dropping CHECK constraints");
        (&mut *tx)
            .execute(sql)
            .await
            .unwrap_or_else(|e| panic!("planting {sql:?}: {e}"));
        tx.commit().await.expect("commit");
    }
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;
    use std::error::Error as StdError;

    use sqlx_core::error::{DatabaseError, ErrorKind};

    use super::*;

    /// A server error with only a SQLSTATE, as the driver would report it.
    #[derive(Debug)]
    struct Sqlstate(&'static str);

    impl std::fmt::Display for Sqlstate {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "SQLSTATE {}", self.0)
        }
    }

    impl StdError for Sqlstate {}

    impl DatabaseError for Sqlstate {
        fn message(&self) -> &str {
            self.0
        }
        fn code(&self) -> Option<Cow<'_, str>> {
            Some(Cow::Borrowed(self.0))
        }
        fn as_error(&self) -> &(dyn StdError + Send + Sync + 'static) {
            self
        }
        fn as_error_mut(&mut self) -> &mut (dyn StdError + Send + Sync + 'static) {
            self
        }
        fn into_error(self: Box<Self>) -> Box<dyn StdError + Send + Sync + 'static> {
            self
        }
        fn kind(&self) -> ErrorKind {
            ErrorKind::Other
        }
    }

    fn server(code: &'static str) -> sqlx_core::Error {
        sqlx_core::Error::Database(Box::new(Sqlstate(code)))
    }

    fn io(kind: std::io::ErrorKind) -> sqlx_core::Error {
        sqlx_core::Error::Io(std::io::Error::from(kind))
    }

    #[test]
    fn an_unreachable_or_stopping_server_is_unavailable() {
        // D6: 503 with Retry-After while the database is away, never a 500.
        use std::io::ErrorKind as K;
        let cases = [
            io(K::ConnectionRefused),
            io(K::ConnectionReset),
            io(K::ConnectionAborted),
            io(K::BrokenPipe),
            io(K::UnexpectedEof),
            io(K::TimedOut),
            sqlx_core::Error::PoolTimedOut,
            sqlx_core::Error::PoolClosed,
            server("57P01"), // admin_shutdown: pg_ctl stop -m fast
            server("57P02"), // crash_shutdown
            server("57P03"), // cannot_connect_now: starting up, shutting down
            server("08006"), // connection_failure
            server("08001"),
            server("53300"), // too_many_connections
            server("53100"), // disk_full
            server("57014"), // query_canceled
            server("25006"), // read_only_sql_transaction: a standby
            server("40001"),
            server("40P01"),
            server("55P03"),
        ];
        for e in cases {
            let shown = format!("{e:?}");
            assert!(
                matches!(db_err(e), StoreError::Unavailable(_)),
                "{shown} is Unavailable"
            );
        }
    }

    #[test]
    fn bugs_stay_internal() {
        for e in [
            server("42601"), // syntax_error
            server("42P01"), // undefined_table
            server("23502"), // not_null_violation
            sqlx_core::Error::RowNotFound,
            sqlx_core::Error::Protocol("unexpected message".into()),
            sqlx_core::Error::ColumnNotFound("x".into()),
        ] {
            let shown = format!("{e:?}");
            assert!(
                matches!(db_err(e), StoreError::Internal(_)),
                "{shown} is Internal"
            );
        }
    }

    #[test]
    fn a_request_waits_for_a_connection_well_under_five_seconds() {
        // During an outage sqlx retries refused connections until the
        // acquire timeout: that is the time to the 503, which must come
        // within 5 s (the failure drill in crates/gatehouse/tests/drills.rs).
        assert!(PgOptions::default().acquire_timeout <= Duration::from_secs(2));
    }
}
