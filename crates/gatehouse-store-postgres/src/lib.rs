//! `gatehouse-store-postgres` implements the [`Store`] contract on
//! PostgreSQL, the backend for several nodes sharing one database (D44). It
//! owns the PostgreSQL schema and its migrations (`migrations/*.sql`,
//! embedded and applied at start under an advisory lock), the SQL of every
//! `Store` method, and — behind the `testing` feature — a throwaway cluster
//! for tests ([`testing`]). Its behaviour is the SQLite backend's, as the
//! conformance suite of `gatehouse-store` checks it: the same list order,
//! filters, totals, search semantics, rules and errors.
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

mod auth_state;
mod lists;
mod rows;
mod schema;
#[cfg(feature = "testing")]
pub mod testing;

use std::time::Duration;

use async_trait::async_trait;
use gatehouse_domain::{
    ApiKey, ApiKeyId, Client, ClientId, DomainError, Listing, NewProduct, NewUser, OrgId,
    Organization, Page, Product, ProductId, ProductPatch, Scope, ScopeSet, Timestamp, User, UserId,
    UserPatch, client, link, product,
    user::{self, UserChange},
    values::{Email, words},
};
use gatehouse_store::{
    AuthCode, LinkKind, LinkRecord, NewClient, NewLink, OutboundEmail, OutboxMessage,
    ProductFilter, Redeemed, RefreshChain, RefreshToken, Revocation, RevocationKind, Rotated,
    Session, SharedWindow, SigningKeyRecord, Store, StoreError, StoreResult, UserFilter,
};

/// D28's shared windows count admissions in buckets of this many ms
/// ("counting in sub-second buckets is fine").
const RATE_BUCKET_MS: i64 = 100;
/// Buckets in the one-second and one-minute windows.
const RATE_SECOND_BUCKETS: i64 = 1000 / RATE_BUCKET_MS;
const RATE_MINUTE_BUCKETS: i64 = 60_000 / RATE_BUCKET_MS;
use sqlx_core::query::query;
use sqlx_core::query_as::query_as;
use sqlx_core::query_scalar::query_scalar;
use sqlx_core::row::Row;
use sqlx_postgres::{PgConnectOptions, PgConnection, PgPool, PgPoolOptions};

use lists::Query;
use rows::{
    API_KEY_COLS, CLIENT_COLS, CODE_COLS, ORG_COLS, TOKEN_COLS, USER_COLS, api_key_row, chain_row,
    client_row, code_row, org_row, token_row, user_row,
};

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

/// The PostgreSQL backend. Cheap to clone (the pool is shared).
#[derive(Clone)]
pub struct PgStore {
    pool: PgPool,
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
            .connect_lazy_with(connect);
        Ok(Self { pool })
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

fn bits(s: ScopeSet) -> i16 {
    i16::from(s.bits())
}

async fn insert_org(c: &mut PgConnection, o: &Organization) -> TxResult<()> {
    query("INSERT INTO organizations (id, name, plan, per_minute, per_second, created_at) VALUES ($1, $2, $3, $4, $5, $6)")
        .bind(o.id.as_str())
        .bind(&o.name)
        .bind(o.plan.as_str())
        .bind(o.per_minute.map(i64::from))
        .bind(o.per_second.map(i64::from))
        .bind(o.created_at.millis())
        .execute(&mut *c)
        .await?;
    Ok(())
}

async fn insert_client_row(c: &mut PgConnection, org: &OrgId, n: &NewClient) -> TxResult<()> {
    let r = query(
        "INSERT INTO clients (id, org_id, name, secret_hash, scopes, redirect_uris, admin_approved, owner_id, created_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
    )
    .bind(n.id.as_str())
    .bind(org.as_str())
    .bind(&n.name)
    .bind(n.secret_hash.as_ref().map(|h| &h[..]))
    .bind(bits(n.scopes))
    .bind(&n.redirect_uris)
    .bind(n.admin_approved)
    .bind(n.owner.as_ref().map(UserId::as_str))
    .bind(n.created_at.millis())
    .execute(&mut *c)
    .await;
    match r {
        Ok(_) => Ok(()),
        Err(sqlx_core::Error::Database(d)) if d.code().as_deref() == Some("23503") => {
            Err(client::unknown_owner().into())
        }
        Err(e) => Err(e.into()),
    }
}

async fn get_user_tx(c: &mut PgConnection, org: &OrgId, id: &UserId) -> TxResult<Option<User>> {
    let row = query(&format!(
        "SELECT {USER_COLS} FROM users WHERE id = $1 AND org_id = $2"
    ))
    .bind(id.as_str())
    .bind(org.as_str())
    .fetch_optional(&mut *c)
    .await?;
    Ok(row.as_ref().map(user_row).transpose()?)
}

/// The user, locked for the rest of the transaction (`FOR UPDATE`).
async fn lock_user(c: &mut PgConnection, org: &OrgId, id: &UserId) -> TxResult<Option<User>> {
    user_with_lock(c, org, id, "FOR UPDATE").await
}

async fn user_with_lock(
    c: &mut PgConnection,
    org: &OrgId,
    id: &UserId,
    lock: &str,
) -> TxResult<Option<User>> {
    let row = query(&format!(
        "SELECT {USER_COLS} FROM users WHERE id = $1 AND org_id = $2 {lock}"
    ))
    .bind(id.as_str())
    .bind(org.as_str())
    .fetch_optional(&mut *c)
    .await?;
    Ok(row.as_ref().map(user_row).transpose()?)
}

/// D13: the organization's active admins besides `before`, counted when
/// going to `after` (`None`: deleted) takes an active admin away
/// (`user::removes_active_admin`). Every transaction that may take away an
/// active admin first locks the organization's row (`FOR NO KEY UPDATE`,
/// which does not block inserts' foreign-key checks), so such transactions
/// run one at a time per organization and each counts what the previous one
/// committed: two concurrent demotions of the last two admins cannot both
/// succeed.
async fn other_active_admins(
    c: &mut PgConnection,
    org: &OrgId,
    before: &User,
    after: Option<&User>,
) -> TxResult<Option<u64>> {
    if !user::removes_active_admin(before, after) {
        return Ok(None);
    }
    query("SELECT 1 FROM organizations WHERE id = $1 FOR NO KEY UPDATE")
        .bind(org.as_str())
        .execute(&mut *c)
        .await?;
    let n: i64 = query_scalar(
        "SELECT count(*) FROM users WHERE org_id = $1 AND role = 'admin' AND status = 'active' AND id <> $2",
    )
    .bind(org.as_str())
    .bind(before.id.as_str())
    .fetch_one(&mut *c)
    .await?;
    Ok(Some(n as u64))
}

/// The organization and user of a link of `kind` that may be used at `now`
/// (`link::usable`, D11, D19), both locked; used, expired, replaced and
/// unknown links, and links whose user is not in the state they are for, are
/// `NotFound`.
async fn link_user(
    c: &mut PgConnection,
    kind: LinkKind,
    digest: &[u8; 32],
    now: Timestamp,
) -> TxResult<(OrgId, User)> {
    let (org, id, expires_at, used_at) = auth_state::lock_link(c, kind, digest)
        .await?
        .ok_or(StoreError::NotFound)?;
    let u = lock_user(c, &org, &id).await?.ok_or(StoreError::NotFound)?;
    if !link::usable(kind, used_at, expires_at, u.status, now) {
        return Err(StoreError::NotFound.into());
    }
    Ok((org, u))
}

async fn get_product_tx(
    c: &mut PgConnection,
    org: &OrgId,
    id: &ProductId,
    lock: bool,
) -> TxResult<Option<Product>> {
    let row = query(&format!(
        "SELECT {} FROM products WHERE id = $1 AND org_id = $2{}",
        rows::PRODUCT_COLS,
        if lock { " FOR UPDATE" } else { "" }
    ))
    .bind(id.as_str())
    .bind(org.as_str())
    .fetch_optional(&mut *c)
    .await?;
    Ok(row.as_ref().map(rows::product_row).transpose()?)
}

/// D17: the words a product is found by.
fn product_words(p: &Product) -> Vec<String> {
    let mut w = words(p.name.as_str());
    w.extend(words(p.sku.as_str()));
    w.sort();
    w.dedup();
    w
}

async fn insert_user_row(
    c: &mut PgConnection,
    org: &OrgId,
    u: &NewUser,
    updated_at: Timestamp,
) -> TxResult<()> {
    query(
        "INSERT INTO users (id, org_id, email, email_norm, name, name_fold, role, status, password_hash, created_at, updated_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
    )
    .bind(u.id.as_str())
    .bind(org.as_str())
    .bind(u.email.as_str())
    .bind(u.email.normalized())
    .bind(u.name.as_str())
    .bind(u.name.as_str().to_lowercase())
    .bind(u.role.as_str())
    .bind(u.status.as_str())
    .bind(u.password_hash.as_deref())
    .bind(u.created_at.millis())
    .bind(updated_at.millis())
    .execute(&mut *c)
    .await?;
    Ok(())
}

async fn insert_product_row(c: &mut PgConnection, org: &OrgId, p: &Product) -> TxResult<()> {
    query(
        "INSERT INTO products (id, org_id, name, sku, price, stock, status, words, created_at, updated_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, array_to_tsvector($8::text[]), $9, $10)",
    )
    .bind(p.id.as_str())
    .bind(org.as_str())
    .bind(p.name.as_str())
    .bind(p.sku.as_str())
    .bind(p.price)
    .bind(p.stock)
    .bind(p.status.as_str())
    .bind(product_words(p))
    .bind(p.created_at.millis())
    .bind(p.updated_at.millis())
    .execute(&mut *c)
    .await?;
    Ok(())
}

/// D33: one organization's users and products replaced by the fixture,
/// inside the caller's transaction (which holds the organization's row).
/// Returns the removed users, whose tokens the caller revokes last.
async fn reset_org_tx(
    c: &mut PgConnection,
    org: &OrgId,
    fixture: &gatehouse_domain::Fixture,
    now: Timestamp,
) -> TxResult<Vec<UserId>> {
    let removed: Vec<String> =
        query_scalar("SELECT id FROM users WHERE org_id = $1 ORDER BY id FOR UPDATE")
            .bind(org.as_str())
            .fetch_all(&mut *c)
            .await?;
    let removed: Vec<UserId> = removed.into_iter().map(UserId::from_trusted).collect();
    for id in &removed {
        auth_state::end_user_sessions(c, id, now).await?;
    }
    // Client applications stay; an owner who disappears is cleared (D33).
    query("UPDATE clients SET owner_id = NULL WHERE org_id = $1 AND owner_id IS NOT NULL")
        .bind(org.as_str())
        .execute(&mut *c)
        .await?;
    for sql in [
        "DELETE FROM users WHERE org_id = $1",
        "DELETE FROM products WHERE org_id = $1",
    ] {
        query(sql).bind(org.as_str()).execute(&mut *c).await?;
    }
    for (i, f) in fixture.users.iter().enumerate() {
        // Newest first: the first fixture user gets the latest time.
        let at = now.plus_seconds(-(i as i64));
        let u = NewUser {
            id: UserId::generate(),
            email: f.email.clone(),
            name: f.name.clone(),
            role: f.role,
            status: f.status,
            password_hash: None,
            created_at: at,
        };
        insert_user_row(c, org, &u, at).await?;
    }
    for (i, p) in fixture.products.iter().enumerate() {
        let p = p.clone().into_product(now.plus_seconds(-(i as i64)));
        insert_product_row(c, org, &p).await?;
    }
    Ok(removed)
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

    async fn create_org(&self, org: &Organization) -> StoreResult<()> {
        write_tx!(self, |tx| insert_org(&mut tx, org).await)
    }

    async fn get_org(&self, org: &OrgId) -> StoreResult<Option<Organization>> {
        let row = query(&format!(
            "SELECT {ORG_COLS} FROM organizations WHERE id = $1"
        ))
        .bind(org.as_str())
        .fetch_optional(&self.pool)
        .await
        .map_err(db_err)?;
        row.as_ref().map(org_row).transpose().map_err(db_err)
    }

    async fn v2_preview(&self, org: &OrgId) -> StoreResult<bool> {
        let v: Option<bool> = query_scalar("SELECT v2_preview FROM organizations WHERE id = $1")
            .bind(org.as_str())
            .fetch_optional(&self.pool)
            .await
            .map_err(db_err)?;
        Ok(v.unwrap_or(false))
    }

    async fn set_v2_preview(&self, org: &OrgId, enabled: bool) -> StoreResult<()> {
        write_tx!(self, |tx| {
            let n = query("UPDATE organizations SET v2_preview = $1 WHERE id = $2")
                .bind(enabled)
                .bind(org.as_str())
                .execute(&mut *tx)
                .await?
                .rows_affected();
            if n == 0 {
                return Err(StoreError::NotFound.into());
            }
            Ok(())
        })
    }

    async fn reset_to_fixture(
        &self,
        org: Option<&OrgId>,
        fixture: &gatehouse_domain::Fixture,
        now: Timestamp,
    ) -> StoreResult<u64> {
        write_tx!(self, |tx| {
            // The organizations' rows, locked in id order: a concurrent
            // reset (another node) waits and then sees this one's result,
            // and so does a last-admin check (D13).
            let orgs: Vec<String> = match org {
                Some(o) => {
                    query_scalar("SELECT id FROM organizations WHERE id = $1 FOR NO KEY UPDATE")
                        .bind(o.as_str())
                        .fetch_all(&mut *tx)
                        .await?
                }
                None => {
                    query_scalar("SELECT id FROM organizations ORDER BY id FOR NO KEY UPDATE")
                        .fetch_all(&mut *tx)
                        .await?
                }
            };
            if org.is_some() && orgs.is_empty() {
                return Err(StoreError::NotFound.into());
            }
            let mut removed = Vec::new();
            for o in &orgs {
                let o = OrgId::from_trusted(o.clone());
                removed.extend(reset_org_tx(&mut tx, &o, fixture, now).await?);
            }
            // D13: the removed users' tokens die; revocations last.
            for id in &removed {
                auth_state::revoke_user_tokens(&mut tx, id, now).await?;
            }
            Ok(orgs.len() as u64)
        })
    }

    async fn bootstrap(&self, org: &Organization, client: &NewClient) -> StoreResult<bool> {
        write_tx!(self, |tx| {
            // D41, D44: nodes starting together on an empty database create
            // one organization. The table lock (which blocks writers of
            // organizations, not readers) makes "none exists yet" and the
            // insert one step.
            query("LOCK TABLE organizations IN SHARE ROW EXCLUSIVE MODE")
                .execute(&mut *tx)
                .await?;
            let any: bool = query_scalar("SELECT EXISTS (SELECT 1 FROM organizations)")
                .fetch_one(&mut *tx)
                .await?;
            if any {
                return Ok(false);
            }
            insert_org(&mut tx, org).await?;
            insert_client_row(&mut tx, &org.id, client).await?;
            Ok(true)
        })
    }

    async fn insert_user_with_link(
        &self,
        org: &OrgId,
        u: &NewUser,
        invitation: Option<&NewLink>,
    ) -> StoreResult<User> {
        write_tx!(self, |tx| {
            insert_user_row(&mut tx, org, u, u.created_at).await?;
            if let Some(link) = invitation {
                auth_state::insert_link(
                    &mut tx,
                    LinkKind::Invitation,
                    org,
                    &u.id,
                    link,
                    u.created_at,
                )
                .await?;
            }
            Ok(User {
                id: u.id.clone(),
                email: u.email.clone(),
                name: u.name.clone(),
                role: u.role,
                status: u.status,
                created_at: u.created_at,
                updated_at: u.created_at,
                has_password: u.password_hash.is_some(),
            })
        })
    }

    async fn get_user(&self, org: &OrgId, id: &UserId) -> StoreResult<Option<User>> {
        read!(self, |c| get_user_tx(c, org, id).await)
    }

    async fn list_users(
        &self,
        org: &OrgId,
        filter: &UserFilter,
        page: Page,
    ) -> StoreResult<Listing<User>> {
        let q = Query::users(filter);
        snapshot_read!(self, |c| lists::page(c, &lists::USERS, org, &q, page).await)
    }

    async fn list_users_after(
        &self,
        org: &OrgId,
        filter: &UserFilter,
        after: Option<&UserId>,
        limit: u32,
    ) -> StoreResult<Option<Vec<User>>> {
        let q = Query::users(filter);
        let after = after.map(UserId::as_str);
        read!(self, |c| lists::after(
            c,
            &lists::USERS,
            org,
            &q,
            after,
            limit
        )
        .await)
    }

    async fn update_user(
        &self,
        org: &OrgId,
        id: &UserId,
        patch: &UserPatch,
        now: Timestamp,
    ) -> StoreResult<UserChange> {
        write_tx!(self, |tx| {
            let current = lock_user(&mut tx, org, id)
                .await?
                .ok_or(StoreError::NotFound)?;
            let change = user::apply_patch(&current, patch, now)?;
            if !change.changed {
                return Ok(change);
            }
            let others = other_active_admins(&mut tx, org, &current, Some(&change.user)).await?;
            user::check_change(&current, &change.user, others)?;
            let u = &change.user;
            query(
                "UPDATE users SET name = $1, name_fold = $2, role = $3, status = $4, updated_at = $5
                 WHERE id = $6 AND org_id = $7",
            )
            .bind(u.name.as_str())
            .bind(u.name.as_str().to_lowercase())
            .bind(u.role.as_str())
            .bind(u.status.as_str())
            .bind(u.updated_at.millis())
            .bind(id.as_str())
            .bind(org.as_str())
            .execute(&mut *tx)
            .await?;
            if change.cancels_invitation {
                auth_state::delete_links(&mut tx, LinkKind::Invitation, id).await?;
            }
            if change.revokes_tokens {
                auth_state::end_user_sessions(&mut tx, id, now).await?;
                auth_state::revoke_user_tokens(&mut tx, id, now).await?;
            }
            Ok(change)
        })
    }

    async fn delete_user_at(
        &self,
        org: &OrgId,
        id: &UserId,
        transfer_to: Option<&UserId>,
        now: Timestamp,
    ) -> StoreResult<()> {
        write_tx!(self, |tx| {
            let current = lock_user(&mut tx, org, id)
                .await?
                .ok_or(StoreError::NotFound)?;
            let others = other_active_admins(&mut tx, org, &current, None).await?;
            let owned: i64 =
                query_scalar("SELECT count(*) FROM clients WHERE org_id = $1 AND owner_id = $2")
                    .bind(org.as_str())
                    .bind(id.as_str())
                    .fetch_one(&mut *tx)
                    .await?;
            // The heir stays active until we commit.
            let heir = match transfer_to {
                Some(h) => user_with_lock(&mut tx, org, h, "FOR SHARE").await?,
                None => None,
            };
            let plan =
                user::check_delete(&current, others, owned as u64, transfer_to, heir.as_ref())?;
            if let Some(heir) = &plan.transfer_clients_to {
                query("UPDATE clients SET owner_id = $1 WHERE org_id = $2 AND owner_id = $3")
                    .bind(heir.as_str())
                    .bind(org.as_str())
                    .bind(id.as_str())
                    .execute(&mut *tx)
                    .await?;
            }
            // D13: every session, link, code and refresh chain goes with the
            // user (ON DELETE CASCADE); its access tokens through the
            // revocation, written last.
            query("DELETE FROM users WHERE id = $1 AND org_id = $2")
                .bind(id.as_str())
                .bind(org.as_str())
                .execute(&mut *tx)
                .await?;
            auth_state::revoke_user_tokens(&mut tx, id, now).await?;
            Ok(())
        })
    }

    async fn find_user_by_email(
        &self,
        org: &OrgId,
        email: &Email,
    ) -> StoreResult<Option<(User, Option<String>)>> {
        let row = query(&format!(
            "SELECT {USER_COLS}, password_hash FROM users WHERE org_id = $1 AND email_norm = $2"
        ))
        .bind(org.as_str())
        .bind(email.normalized())
        .fetch_optional(&self.pool)
        .await
        .map_err(db_err)?;
        row.map(|r| Ok((user_row(&r)?, r.try_get::<Option<String>, _>(8)?)))
            .transpose()
            .map_err(db_err)
    }

    async fn reissue_invitation(
        &self,
        org: &OrgId,
        id: &UserId,
        link: &NewLink,
    ) -> StoreResult<()> {
        write_tx!(self, |tx| {
            let u = lock_user(&mut tx, org, id)
                .await?
                .ok_or(StoreError::NotFound)?;
            user::check_reinvite(&u)?;
            auth_state::insert_link(
                &mut tx,
                LinkKind::Invitation,
                org,
                id,
                link,
                Timestamp::now(),
            )
            .await
        })
    }

    async fn find_link(
        &self,
        kind: LinkKind,
        digest: &[u8; 32],
    ) -> StoreResult<Option<LinkRecord>> {
        let row = query(&format!(
            "SELECT {}, t.org_id, t.expires_at, t.used_at
             FROM user_tokens t JOIN users u ON u.id = t.user_id AND u.org_id = t.org_id
             WHERE t.digest = $1 AND t.kind = $2",
            USER_COLS
                .split(", ")
                .map(|c| format!("u.{c}"))
                .collect::<Vec<_>>()
                .join(", ")
        ))
        .bind(&digest[..])
        .bind(kind.as_str())
        .fetch_optional(&self.pool)
        .await
        .map_err(db_err)?;
        let Some(r) = row else { return Ok(None) };
        let rec = (|| {
            Ok::<_, sqlx_core::Error>(LinkRecord {
                kind,
                user: user_row(&r)?,
                org: OrgId::from_trusted(r.try_get(8)?),
                expires_at: Timestamp::from_millis(r.try_get(9)?),
                used_at: r.try_get::<Option<i64>, _>(10)?.map(Timestamp::from_millis),
            })
        })()
        .map_err(db_err)?;
        Ok(Some(rec))
    }

    async fn accept_invitation(
        &self,
        digest: &[u8; 32],
        password_hash: &str,
        now: Timestamp,
    ) -> StoreResult<User> {
        write_tx!(self, |tx| {
            let (org, u) = link_user(&mut tx, LinkKind::Invitation, digest, now).await?;
            let id = u.id.clone();
            auth_state::use_link(&mut tx, digest, now).await?;
            query(
                "UPDATE users SET status = 'active', password_hash = $1, updated_at = $2
                 WHERE id = $3 AND org_id = $4",
            )
            .bind(password_hash)
            .bind(now.millis().max(u.updated_at.millis()))
            .bind(id.as_str())
            .bind(org.as_str())
            .execute(&mut *tx)
            .await?;
            Ok(get_user_tx(&mut tx, &org, &id)
                .await?
                .ok_or(StoreError::NotFound)?)
        })
    }

    async fn request_password_reset(
        &self,
        org: &OrgId,
        email: &Email,
        link: &NewLink,
    ) -> StoreResult<bool> {
        write_tx!(self, |tx| {
            let id: Option<String> = query_scalar(
                "SELECT id FROM users WHERE org_id = $1 AND email_norm = $2 AND status = 'active' FOR UPDATE",
            )
            .bind(org.as_str())
            .bind(email.normalized())
            .fetch_optional(&mut *tx)
            .await?;
            let Some(id) = id.map(UserId::from_trusted) else {
                return Ok(false);
            };
            let now = Timestamp::now();
            // D19 (revised): the rule decides on the sends it reads, in the
            // transaction that records this one (the user row is locked).
            let since = now.plus_seconds(-gatehouse_domain::user::RESET_EMAIL_WINDOW_SECS);
            let recent: Vec<i64> = query_scalar(
                "SELECT requested_at FROM reset_requests WHERE user_id = $1 AND requested_at > $2",
            )
            .bind(id.as_str())
            .bind(since.millis())
            .fetch_all(&mut *tx)
            .await?;
            let recent: Vec<Timestamp> = recent.into_iter().map(Timestamp::from_millis).collect();
            if !gatehouse_domain::user::reset_email_allowed(&recent, now) {
                return Ok(false);
            }
            query("INSERT INTO reset_requests (user_id, requested_at) VALUES ($1, $2)")
                .bind(id.as_str())
                .bind(now.millis())
                .execute(&mut *tx)
                .await?;
            auth_state::insert_link(&mut tx, LinkKind::Reset, org, &id, link, now).await?;
            Ok(true)
        })
    }

    async fn reset_password(
        &self,
        digest: &[u8; 32],
        password_hash: &str,
        now: Timestamp,
    ) -> StoreResult<User> {
        write_tx!(self, |tx| {
            let (org, u) = link_user(&mut tx, LinkKind::Reset, digest, now).await?;
            let id = u.id;
            auth_state::use_link(&mut tx, digest, now).await?;
            query("UPDATE users SET password_hash = $1 WHERE id = $2 AND org_id = $3")
                .bind(password_hash)
                .bind(id.as_str())
                .bind(org.as_str())
                .execute(&mut *tx)
                .await?;
            // The user as updated, as a fresh read returns it.
            let updated = get_user_tx(&mut tx, &org, &id)
                .await?
                .ok_or(StoreError::NotFound)?;
            auth_state::delete_links(&mut tx, LinkKind::Reset, &id).await?;
            // D19: a reset ends the user's sessions and tokens.
            auth_state::end_user_sessions(&mut tx, &id, now).await?;
            auth_state::revoke_user_tokens(&mut tx, &id, now).await?;
            Ok(updated)
        })
    }

    async fn revocations_since(&self, after: i64, now: Timestamp) -> StoreResult<Vec<Revocation>> {
        let rows = query(
            "SELECT id, kind, subject, cutoff, expires_at FROM revocations
             WHERE id > $1 AND expires_at > $2 ORDER BY id LIMIT 10000",
        )
        .bind(after)
        .bind(now.millis())
        .fetch_all(&self.pool)
        .await
        .map_err(db_err)?;
        rows.iter()
            .map(|r| {
                Ok(Revocation {
                    id: r.try_get(0)?,
                    kind: rows::decode(
                        r,
                        1,
                        ("revocations", "kind", &r.try_get::<i64, _>(0)?.to_string()),
                        RevocationKind::parse,
                    )?,
                    subject: r.try_get(2)?,
                    cutoff: r.try_get(3)?,
                    expires_at: Timestamp::from_millis(r.try_get(4)?),
                })
            })
            .collect::<Result<Vec<_>, sqlx_core::Error>>()
            .map_err(db_err)
    }

    async fn insert_revocation(
        &self,
        kind: RevocationKind,
        subject: &str,
        cutoff: i64,
        expires_at: Timestamp,
    ) -> StoreResult<i64> {
        write_tx!(self, |tx| auth_state::insert_revocation(
            &mut tx, kind, subject, cutoff, expires_at
        )
        .await)
    }

    async fn claim_outbox(
        &self,
        now: Timestamp,
        limit: u32,
        lease_ms: i64,
    ) -> StoreResult<Vec<OutboxMessage>> {
        write_tx!(self, |tx| {
            // D30, D44: rows another worker is claiming right now are skipped,
            // not waited for; a claimed row carries a lease, so a second
            // claim finds it only once the lease has run out (a dead worker).
            // MATERIALIZED: the locking sub-select runs exactly once.
            let rows = query(
                "WITH due AS MATERIALIZED (
                     SELECT id FROM outbox
                     WHERE sent_at IS NULL AND next_attempt_at <= $1 AND locked_until <= $1
                     ORDER BY next_attempt_at, id
                     LIMIT $3
                     FOR UPDATE SKIP LOCKED)
                 UPDATE outbox o SET locked_until = $1 + $2, attempts = o.attempts + 1
                 FROM due WHERE o.id = due.id
                 RETURNING o.id, o.recipient, o.subject, o.body, o.attempts, o.created_at",
            )
            .bind(now.millis())
            .bind(lease_ms)
            .bind(i64::from(limit))
            .fetch_all(&mut *tx)
            .await?;
            let mut v = rows
                .iter()
                .map(|r| {
                    Ok(OutboxMessage {
                        id: r.try_get(0)?,
                        email: OutboundEmail {
                            to: r.try_get(1)?,
                            subject: r.try_get(2)?,
                            body: r.try_get(3)?,
                        },
                        attempts: r.try_get::<i32, _>(4)?.max(0) as u32,
                        created_at: Timestamp::from_millis(r.try_get(5)?),
                    })
                })
                .collect::<Result<Vec<_>, sqlx_core::Error>>()?;
            v.sort_by_key(|m| m.id);
            Ok(v)
        })
    }

    async fn outbox_sent(&self, id: i64, now: Timestamp) -> StoreResult<()> {
        write_tx!(self, |tx| {
            query(
                "UPDATE outbox SET sent_at = $2, locked_until = 0, last_error = NULL WHERE id = $1",
            )
            .bind(id)
            .bind(now.millis())
            .execute(&mut *tx)
            .await?;
            Ok(())
        })
    }

    async fn outbox_failed(
        &self,
        id: i64,
        error: &str,
        next_attempt_at: Timestamp,
    ) -> StoreResult<()> {
        let error = error.chars().take(1000).collect::<String>();
        write_tx!(self, |tx| {
            query("UPDATE outbox SET last_error = $2, next_attempt_at = $3, locked_until = 0 WHERE id = $1")
                .bind(id)
                .bind(&error)
                .bind(next_attempt_at.millis())
                .execute(&mut *tx)
                .await?;
            Ok(())
        })
    }

    async fn outbox_backlog(&self) -> StoreResult<u64> {
        let n: i64 = query_scalar("SELECT count(*) FROM outbox WHERE sent_at IS NULL")
            .fetch_one(&self.pool)
            .await
            .map_err(db_err)?;
        Ok(n.max(0) as u64)
    }

    async fn create_session(&self, digest: &[u8; 32], sess: &Session) -> StoreResult<()> {
        write_tx!(self, |tx| {
            query("INSERT INTO sessions (digest, org_id, user_id, created_at, expires_at) VALUES ($1, $2, $3, $4, $5)")
                .bind(&digest[..])
                .bind(sess.org.as_str())
                .bind(sess.user.as_str())
                .bind(sess.created_at.millis())
                .bind(sess.expires_at.millis())
                .execute(&mut *tx)
                .await?;
            Ok(())
        })
    }

    async fn find_session(&self, digest: &[u8; 32]) -> StoreResult<Option<Session>> {
        let row: Option<(String, String, i64, i64)> = query_as(
            "SELECT org_id, user_id, created_at, expires_at FROM sessions WHERE digest = $1",
        )
        .bind(&digest[..])
        .fetch_optional(&self.pool)
        .await
        .map_err(db_err)?;
        Ok(row.map(|(org, user, created, expires)| Session {
            org: OrgId::from_trusted(org),
            user: UserId::from_trusted(user),
            created_at: Timestamp::from_millis(created),
            expires_at: Timestamp::from_millis(expires),
        }))
    }

    async fn delete_session(&self, digest: &[u8; 32]) -> StoreResult<()> {
        write_tx!(self, |tx| {
            query("DELETE FROM sessions WHERE digest = $1")
                .bind(&digest[..])
                .execute(&mut *tx)
                .await?;
            Ok(())
        })
    }

    async fn record_login_failure(
        &self,
        org: &OrgId,
        email_norm: &str,
        source: &str,
        at: Timestamp,
    ) -> StoreResult<()> {
        write_tx!(self, |tx| {
            query("INSERT INTO login_failures (org_id, email_norm, source, at) VALUES ($1, $2, $3, $4)")
                .bind(org.as_str())
                .bind(email_norm)
                .bind(source)
                .bind(at.millis())
                .execute(&mut *tx)
                .await?;
            Ok(())
        })
    }

    async fn login_failures(
        &self,
        org: &OrgId,
        email_norm: &str,
        since: Timestamp,
    ) -> StoreResult<Vec<(String, Timestamp)>> {
        let rows: Vec<(String, i64)> = query_as(
            "SELECT source, at FROM login_failures
             WHERE org_id = $1 AND email_norm = $2 AND at >= $3 ORDER BY at, id LIMIT 5000",
        )
        .bind(org.as_str())
        .bind(email_norm)
        .bind(since.millis())
        .fetch_all(&self.pool)
        .await
        .map_err(db_err)?;
        Ok(rows
            .into_iter()
            .map(|(s, at)| (s, Timestamp::from_millis(at)))
            .collect())
    }

    async fn insert_auth_code(&self, code: &AuthCode) -> StoreResult<()> {
        write_tx!(self, |tx| {
            query(&format!(
                "INSERT INTO auth_codes ({CODE_COLS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)"
            ))
            .bind(&code.digest[..])
            .bind(code.org.as_str())
            .bind(code.client.as_str())
            .bind(code.user.as_str())
            .bind(&code.redirect_uri)
            .bind(bits(code.scopes))
            .bind(&code.code_challenge)
            .bind(code.created_at.millis())
            .bind(code.expires_at.millis())
            .bind(code.used_at.map(Timestamp::millis))
            .bind(code.chain.as_deref())
            .execute(&mut *tx)
            .await?;
            Ok(())
        })
    }

    async fn find_auth_code(&self, digest: &[u8; 32]) -> StoreResult<Option<AuthCode>> {
        let row = query(&format!(
            "SELECT {CODE_COLS} FROM auth_codes WHERE digest = $1"
        ))
        .bind(&digest[..])
        .fetch_optional(&self.pool)
        .await
        .map_err(db_err)?;
        row.as_ref().map(code_row).transpose().map_err(db_err)
    }

    async fn redeem_auth_code(
        &self,
        digest: &[u8; 32],
        now: Timestamp,
        chain: &RefreshChain,
        token: &RefreshToken,
    ) -> StoreResult<Redeemed> {
        write_tx!(self, |tx| {
            // D26: the conditional update is the whole race; one caller wins.
            let won = query(
                "UPDATE auth_codes SET used_at = $2, chain_id = $3 WHERE digest = $1 AND used_at IS NULL",
            )
            .bind(&digest[..])
            .bind(now.millis())
            .bind(&chain.id)
            .execute(&mut *tx)
            .await?
            .rows_affected();
            if won == 0 {
                let previous: Option<Option<String>> =
                    query_scalar("SELECT chain_id FROM auth_codes WHERE digest = $1")
                        .bind(&digest[..])
                        .fetch_optional(&mut *tx)
                        .await?;
                return Ok(Redeemed::Reused(previous.flatten()));
            }
            auth_state::insert_chain(&mut tx, chain).await?;
            auth_state::insert_token(&mut tx, token).await?;
            Ok(Redeemed::Fresh)
        })
    }

    async fn find_refresh_token(
        &self,
        digest: &[u8; 32],
    ) -> StoreResult<Option<(RefreshToken, RefreshChain)>> {
        let row = query(
            "SELECT t.digest, t.chain_id, t.issued_at, t.expires_at, t.used_at, t.successor_sealed, t.successor_until, t.access_jti,
                    c.id, c.org_id, c.client_id, c.user_id, c.scopes, c.created_at, c.ends_at, c.revoked_at
             FROM refresh_tokens t JOIN refresh_chains c ON c.id = t.chain_id WHERE t.digest = $1",
        )
        .bind(&digest[..])
        .fetch_optional(&self.pool)
        .await
        .map_err(db_err)?;
        row.map(|r| Ok((token_row(&r)?, chain_row(&r, 8)?)))
            .transpose()
            .map_err(db_err)
    }

    async fn rotate_refresh_token(
        &self,
        digest: &[u8; 32],
        client: &ClientId,
        now: Timestamp,
        successor_sealed: &[u8],
        successor_until: Timestamp,
        successor: &RefreshToken,
        access_expiry: Timestamp,
    ) -> StoreResult<Rotated> {
        write_tx!(self, |tx| {
            // The chain's row in share mode: a concurrent revocation of the
            // chain (which updates that row) runs wholly before or after
            // this rotation, never in the middle (D24: a revoked chain never
            // gets a successor).
            let chain: Option<(bool, String)> = query_as(
                "SELECT c.revoked_at IS NULL, c.client_id FROM refresh_tokens t JOIN refresh_chains c ON c.id = t.chain_id
                 WHERE t.digest = $1 FOR SHARE OF c",
            )
            .bind(&digest[..])
            .fetch_optional(&mut *tx)
            .await?;
            // Another client's token is as good as unknown: nothing is read
            // back for it, nothing written.
            let live = match chain {
                Some((live, owner)) if owner == client.as_str() => live,
                _ => return Err(StoreError::NotFound.into()),
            };
            // D24: the conditional update is the whole race: exactly one
            // caller, on any node, sees a row.
            let won: Option<Option<String>> = if live {
                query_scalar(
                    "UPDATE refresh_tokens SET used_at = $2, successor_sealed = $3, successor_until = $4
                     WHERE digest = $1 AND used_at IS NULL
                     RETURNING access_jti",
                )
                .bind(&digest[..])
                .bind(now.millis())
                .bind(successor_sealed)
                .bind(successor_until.millis())
                .fetch_optional(&mut *tx)
                .await?
            } else {
                None
            };
            if let Some(jti) = won {
                auth_state::insert_token(&mut tx, successor).await?;
                // D24: the access token issued with the used refresh token
                // dies in the same transaction (the revocation is its last
                // statement, see `auth_state::insert_revocation`).
                let revoked = match jti {
                    Some(jti) => {
                        let cutoff = now.unix_seconds();
                        let id = auth_state::insert_revocation(
                            &mut tx,
                            RevocationKind::Jti,
                            &jti,
                            cutoff,
                            access_expiry,
                        )
                        .await?;
                        Some(Revocation {
                            id,
                            kind: RevocationKind::Jti,
                            subject: jti,
                            cutoff,
                            expires_at: access_expiry,
                        })
                    }
                    None => None,
                };
                return Ok(Rotated::Fresh(revoked));
            }
            let current = query(&format!(
                "SELECT {TOKEN_COLS} FROM refresh_tokens WHERE digest = $1"
            ))
            .bind(&digest[..])
            .fetch_optional(&mut *tx)
            .await?
            .ok_or(StoreError::NotFound)?;
            Ok(Rotated::AlreadyUsed(token_row(&current)?))
        })
    }

    async fn revoke_chain(
        &self,
        chain: &str,
        now: Timestamp,
        access_expiry: Timestamp,
    ) -> StoreResult<()> {
        write_tx!(self, |tx| auth_state::revoke_chain(
            &mut tx,
            chain,
            now,
            access_expiry
        )
        .await)
    }

    async fn erase_expired_successors(&self, now: Timestamp) -> StoreResult<u64> {
        write_tx!(self, |tx| {
            let n = query(
                "UPDATE refresh_tokens SET successor_sealed = NULL, successor_until = NULL
                 WHERE successor_until IS NOT NULL AND successor_until <= $1",
            )
            .bind(now.millis())
            .execute(&mut *tx)
            .await?
            .rows_affected();
            Ok(n)
        })
    }

    async fn purge_expired(&self, now: Timestamp, batch: u32) -> StoreResult<u64> {
        let purged = write_tx!(self, |tx| auth_state::purge(&mut tx, now, batch).await)?;
        // D28: buckets older than the minute window count for nothing.
        let old = now.millis().div_euclid(RATE_BUCKET_MS) - RATE_MINUTE_BUCKETS;
        let buckets = write_tx!(self, |tx| {
            Ok(query(
                "DELETE FROM rate_buckets WHERE ctid IN (
                    SELECT ctid FROM rate_buckets WHERE bucket <= $1 LIMIT $2)",
            )
            .bind(old)
            .bind(i64::from(batch) * 20)
            .execute(&mut *tx)
            .await?
            .rows_affected())
        })?;
        Ok(purged + buckets)
    }

    async fn claim_job(&self, job: &str, run_key: &str, now: Timestamp) -> StoreResult<bool> {
        write_tx!(self, |tx| {
            let n = query(
                "INSERT INTO job_runs (job, run_key, claimed_at) VALUES ($1, $2, $3)
                 ON CONFLICT (job, run_key) DO NOTHING",
            )
            .bind(job)
            .bind(run_key)
            .bind(now.millis())
            .execute(&mut *tx)
            .await?
            .rows_affected();
            Ok(n == 1)
        })
    }

    fn shares_rate_limits(&self) -> bool {
        true
    }

    async fn count_request(
        &self,
        lineage: &str,
        per_minute: u32,
        per_second: u32,
        now: Timestamp,
    ) -> StoreResult<Option<SharedWindow>> {
        let bucket = now.millis().div_euclid(RATE_BUCKET_MS);
        // One round trip: `gatehouse_count_request` (migration 0003) takes
        // the lineage's advisory lock, reads the windows after it and counts
        // the request when admitted, so no two nodes both take the last place.
        let row = typed(async {
            Ok(query(
                "SELECT admitted, in_minute, in_second, oldest_minute, oldest_second
                 FROM gatehouse_count_request($1, $2, $3, $4, $5, $6)",
            )
            .bind(lineage)
            .bind(bucket)
            .bind(i64::from(per_minute))
            .bind(i64::from(per_second))
            .bind(RATE_MINUTE_BUCKETS)
            .bind(RATE_SECOND_BUCKETS)
            .fetch_one(&self.pool)
            .await?)
        })
        .await
        .map_err(TxError::into_store)?;
        let window = typed(async {
            let admitted: bool = row.try_get(0)?;
            let minute: i64 = row.try_get(1)?;
            let second: i64 = row.try_get(2)?;
            let oldest_minute: Option<i64> = row.try_get(3)?;
            let oldest_second: Option<i64> = row.try_get(4)?;
            let counted = i64::from(admitted);
            let frees = |oldest: Option<i64>, span: i64| {
                oldest
                    .or(admitted.then_some(bucket))
                    .map(|b| (b + span) * RATE_BUCKET_MS)
            };
            Ok(SharedWindow {
                admitted,
                in_minute: (minute + counted).clamp(0, i64::from(u32::MAX)) as u32,
                in_second: (second + counted).clamp(0, i64::from(u32::MAX)) as u32,
                minute_frees_at: frees(oldest_minute, RATE_MINUTE_BUCKETS),
                second_frees_at: frees(oldest_second, RATE_SECOND_BUCKETS),
            })
        })
        .await
        .map_err(TxError::into_store)?;
        Ok(Some(window))
    }

    async fn insert_product(
        &self,
        org: &OrgId,
        p: &NewProduct,
        now: Timestamp,
    ) -> StoreResult<Product> {
        let p = p.clone().into_product(now);
        write_tx!(self, |tx| {
            insert_product_row(&mut tx, org, &p).await?;
            Ok(p.clone())
        })
    }

    async fn get_product(&self, org: &OrgId, id: &ProductId) -> StoreResult<Option<Product>> {
        read!(self, |c| get_product_tx(c, org, id, false).await)
    }

    async fn list_products(
        &self,
        org: &OrgId,
        filter: &ProductFilter,
        page: Page,
    ) -> StoreResult<Listing<Product>> {
        let q = Query::products(filter);
        snapshot_read!(self, |c| lists::page(c, &lists::PRODUCTS, org, &q, page)
            .await)
    }

    async fn list_products_after(
        &self,
        org: &OrgId,
        filter: &ProductFilter,
        after: Option<&ProductId>,
        limit: u32,
    ) -> StoreResult<Option<Vec<Product>>> {
        let q = Query::products(filter);
        let after = after.map(ProductId::as_str);
        read!(self, |c| lists::after(
            c,
            &lists::PRODUCTS,
            org,
            &q,
            after,
            limit
        )
        .await)
    }

    async fn update_product(
        &self,
        org: &OrgId,
        id: &ProductId,
        patch: &ProductPatch,
        now: Timestamp,
    ) -> StoreResult<Product> {
        write_tx!(self, |tx| {
            let current = get_product_tx(&mut tx, org, id, true)
                .await?
                .ok_or(StoreError::NotFound)?;
            let (next, changed) = product::apply_patch(&current, patch, now)?;
            if changed {
                query(
                    "UPDATE products SET name = $1, sku = $2, price = $3, stock = $4, status = $5,
                         words = array_to_tsvector($6::text[]), updated_at = $7
                     WHERE id = $8 AND org_id = $9",
                )
                .bind(next.name.as_str())
                .bind(next.sku.as_str())
                .bind(next.price)
                .bind(next.stock)
                .bind(next.status.as_str())
                .bind(product_words(&next))
                .bind(next.updated_at.millis())
                .bind(id.as_str())
                .bind(org.as_str())
                .execute(&mut *tx)
                .await?;
            }
            Ok(next)
        })
    }

    async fn delete_product(&self, org: &OrgId, id: &ProductId) -> StoreResult<()> {
        write_tx!(self, |tx| {
            let n = query("DELETE FROM products WHERE id = $1 AND org_id = $2")
                .bind(id.as_str())
                .bind(org.as_str())
                .execute(&mut *tx)
                .await?
                .rows_affected();
            if n == 0 {
                return Err(StoreError::NotFound.into());
            }
            Ok(())
        })
    }

    async fn insert_client(&self, org: &OrgId, client: &NewClient) -> StoreResult<Client> {
        write_tx!(self, |tx| {
            let owner = match &client.owner {
                Some(id) => get_user_tx(&mut tx, org, id).await?,
                None => None,
            };
            client::check_owner(client.owner.as_ref(), owner.as_ref())?;
            insert_client_row(&mut tx, org, client).await?;
            Ok(Client {
                id: client.id.clone(),
                org: org.clone(),
                name: client.name.clone(),
                secret_hash: client.secret_hash,
                previous_secret: None,
                scopes: client.scopes,
                redirect_uris: client.redirect_uris.clone(),
                admin_approved: client.admin_approved,
                owner: client.owner.clone(),
                created_at: client.created_at,
            })
        })
    }

    async fn find_client(&self, id: &ClientId) -> StoreResult<Option<Client>> {
        let row = query(&format!("SELECT {CLIENT_COLS} FROM clients WHERE id = $1"))
            .bind(id.as_str())
            .fetch_optional(&self.pool)
            .await
            .map_err(db_err)?;
        row.as_ref().map(client_row).transpose().map_err(db_err)
    }

    async fn approve_admin(&self, org: &OrgId, id: &ClientId) -> StoreResult<Client> {
        write_tx!(self, |tx| {
            let row = query(&format!(
                "UPDATE clients SET admin_approved = true, scopes = scopes | $1
                 WHERE id = $2 AND org_id = $3 RETURNING {CLIENT_COLS}"
            ))
            .bind(bits(ScopeSet::EMPTY.with(Scope::Admin)))
            .bind(id.as_str())
            .bind(org.as_str())
            .fetch_optional(&mut *tx)
            .await?
            .ok_or(StoreError::NotFound)?;
            Ok(client_row(&row)?)
        })
    }

    async fn rotate_client_secret(
        &self,
        org: &OrgId,
        id: &ClientId,
        secret_hash: &[u8; 32],
        previous_until: Option<Timestamp>,
    ) -> StoreResult<Client> {
        write_tx!(self, |tx| {
            // D20: the old secret keeps working until `previous_until`; none: at once.
            let row = query(&format!(
                "UPDATE clients SET
                     previous_secret_hash = CASE WHEN $3::bigint IS NULL THEN NULL ELSE secret_hash END,
                     previous_secret_until = $3::bigint,
                     secret_hash = $4
                 WHERE id = $1 AND org_id = $2 AND secret_hash IS NOT NULL
                 RETURNING {CLIENT_COLS}"
            ))
            .bind(id.as_str())
            .bind(org.as_str())
            .bind(previous_until.map(Timestamp::millis))
            .bind(&secret_hash[..])
            .fetch_optional(&mut *tx)
            .await?
            .ok_or(StoreError::NotFound)?;
            Ok(client_row(&row)?)
        })
    }

    async fn insert_api_key(&self, k: &ApiKey, digest: &[u8; 32]) -> StoreResult<()> {
        write_tx!(self, |tx| {
            query(
                "INSERT INTO api_keys (id, org_id, name, digest, scopes, created_at, revoked_at) VALUES ($1, $2, $3, $4, $5, $6, $7)",
            )
            .bind(k.id.as_str())
            .bind(k.org.as_str())
            .bind(&k.name)
            .bind(&digest[..])
            .bind(bits(k.scopes))
            .bind(k.created_at.millis())
            .bind(k.revoked_at.map(Timestamp::millis))
            .execute(&mut *tx)
            .await?;
            Ok(())
        })
    }

    async fn find_api_key_by_digest(&self, digest: &[u8; 32]) -> StoreResult<Option<ApiKey>> {
        let row = query(&format!(
            "SELECT {API_KEY_COLS} FROM api_keys WHERE digest = $1"
        ))
        .bind(&digest[..])
        .fetch_optional(&self.pool)
        .await
        .map_err(db_err)?;
        row.as_ref().map(api_key_row).transpose().map_err(db_err)
    }

    async fn find_api_key(&self, id: &ApiKeyId) -> StoreResult<Option<ApiKey>> {
        let row = query(&format!(
            "SELECT {API_KEY_COLS} FROM api_keys WHERE id = $1"
        ))
        .bind(id.as_str())
        .fetch_optional(&self.pool)
        .await
        .map_err(db_err)?;
        row.as_ref().map(api_key_row).transpose().map_err(db_err)
    }

    async fn revoke_api_key(
        &self,
        org: &OrgId,
        id: &ApiKeyId,
        at: Timestamp,
    ) -> StoreResult<ApiKey> {
        write_tx!(self, |tx| {
            // Revoking twice keeps the first time.
            let row = query(&format!(
                "UPDATE api_keys SET revoked_at = coalesce(revoked_at, $1)
                 WHERE id = $2 AND org_id = $3 RETURNING {API_KEY_COLS}"
            ))
            .bind(at.millis())
            .bind(id.as_str())
            .bind(org.as_str())
            .fetch_optional(&mut *tx)
            .await?
            .ok_or(StoreError::NotFound)?;
            Ok(api_key_row(&row)?)
        })
    }

    async fn signing_keys(&self) -> StoreResult<Vec<SigningKeyRecord>> {
        let rows = query(
            "SELECT kid, private_key_encrypted, public_key, created_at, activates_at, expires_at
             FROM signing_keys ORDER BY created_at, kid",
        )
        .fetch_all(&self.pool)
        .await
        .map_err(db_err)?;
        rows.iter()
            .map(|r| {
                Ok(SigningKeyRecord {
                    kid: r.try_get(0)?,
                    private_key_encrypted: r.try_get(1)?,
                    public_key: r.try_get(2)?,
                    created_at: Timestamp::from_millis(r.try_get(3)?),
                    activates_at: Timestamp::from_millis(r.try_get(4)?),
                    expires_at: r.try_get::<Option<i64>, _>(5)?.map(Timestamp::from_millis),
                })
            })
            .collect::<Result<Vec<_>, sqlx_core::Error>>()
            .map_err(db_err)
    }

    async fn insert_signing_key(&self, k: &SigningKeyRecord) -> StoreResult<()> {
        write_tx!(self, |tx| {
            query(
                "INSERT INTO signing_keys (kid, private_key_encrypted, public_key, created_at, activates_at, expires_at)
                 VALUES ($1, $2, $3, $4, $5, $6)",
            )
            .bind(&k.kid)
            .bind(&k.private_key_encrypted)
            .bind(&k.public_key)
            .bind(k.created_at.millis())
            .bind(k.activates_at.millis())
            .bind(k.expires_at.map(Timestamp::millis))
            .execute(&mut *tx)
            .await?;
            Ok(())
        })
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
