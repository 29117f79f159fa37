//! `gatehouse-store-sqlite` implements the [`Store`] contract on SQLite, the
//! embedded default: one database file in WAL mode with durable commits.
//!
//! Access path (measured, see `docs/storage.md`): rusqlite on a bounded pool.
//! Point reads (a user, a product, a client at the token endpoint) run inline
//! on the calling task — a primary-key read costs a few microseconds, far less
//! than a hop to a worker thread. Lists, searches and every write run on
//! tokio's blocking pool, gated by semaphores (readers: a fixed number of
//! connections; writers: one, as SQLite allows), so no request can grow the
//! thread or connection count without bound.
//!
//! This crate owns SQL for SQLite and its migrations. It must not import the
//! auth layer, HTTP types, or anything of another backend.

mod api_keys;
mod auth_state;
mod clients;
mod generation;
mod grants;
mod jobs;
mod links;
mod orgs;
mod outbox;
mod pool;
mod products;
mod rate;
mod revocations;
mod schema;
mod signing_keys;
mod users;

use std::path::Path;

use async_trait::async_trait;
use gatehouse_domain::ChainId;
use gatehouse_domain::{
    ApiKey, ApiKeyId, Client, ClientId, Listing, NewProduct, NewUser, OrgId, Organization, Page,
    Plan, Product, ProductId, ProductPatch, ProductStatus, Role, Scope, ScopeSet, SearchText,
    Timestamp, User, UserId, UserPatch, UserStatus, client, link, product,
    user::{self, UserChange},
    values::{Email, Name, Sku},
};
use gatehouse_store::prelude::*;
use gatehouse_store::{
    AuthCode, LinkKind, LinkRecord, NewClient, NewLink, OutboundEmail, OutboxMessage,
    ProductFilter, Redeemed, RefreshChain, RefreshToken, Revocation, RevocationKind, Rotated,
    Session, SigningKeyRecord, Store, StoreError, StoreResult, UserFilter,
};
use gatehouse_store::{NewRevocation, check_org};
use rusqlite::{Connection, OptionalExtension, Row, params};

use pool::Pool;

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

/// A stored value no row can hold (an unknown enum text, a digest of the
/// wrong length, an unparsable id) is corrupt storage: the read fails with
/// `StoreError::Internal` (through `db_err`) naming the table, the column and
/// the row, logged here at error level. Never a default value.
pub(crate) fn corrupt(table: &str, column: &str, row: &str, problem: &str) -> rusqlite::Error {
    tracing::error!(table, column, row, problem, "corrupt row in storage");
    rusqlite::Error::UserFunctionError(
        format!("corrupt row: {table}.{column} of row {row:?} {problem}").into(),
    )
}

/// Text column `i` through `parse`, or [`corrupt`].
pub(crate) fn decode<T>(
    r: &Row<'_>,
    i: usize,
    (table, column, row): (&str, &str, &str),
    parse: impl FnOnce(&str) -> Option<T>,
) -> rusqlite::Result<T> {
    let text: String = r.get(i)?;
    parse(&text).ok_or_else(|| corrupt(table, column, row, &format!("holds {text:?}")))
}

/// The row's own id (column `i`) through `parse`, or [`corrupt`].
pub(crate) fn decode_id<T>(
    r: &Row<'_>,
    i: usize,
    table: &str,
    parse: impl FnOnce(&str) -> Option<T>,
) -> rusqlite::Result<T> {
    let text: String = r.get(i)?;
    parse(&text).ok_or_else(|| corrupt(table, "id", &text, "is not a valid id"))
}

/// A SHA-256 digest as stored, or [`corrupt`] when it is not 32 bytes.
pub(crate) fn digest32(
    v: Vec<u8>,
    (table, column, row): (&str, &str, &str),
) -> rusqlite::Result<[u8; 32]> {
    gatehouse_store::decode::digest(&v).map_err(|problem| corrupt(table, column, row, &problem))
}

/// A scope set as stored (its bits), or [`corrupt`] when it holds a bit no
/// scope has.
pub(crate) fn scopes(
    bits: i64,
    (table, column, row): (&str, &str, &str),
) -> rusqlite::Result<ScopeSet> {
    gatehouse_store::decode::scopes(bits).map_err(|problem| corrupt(table, column, row, &problem))
}

const USER_COLS: &str =
    "id, email, name, role, status, password_hash IS NOT NULL, created_at, updated_at";

fn user_row(r: &Row<'_>) -> rusqlite::Result<User> {
    let id = decode_id(r, 0, "users", UserId::parse)?;
    let at = |column| ("users", column, id.as_str());
    Ok(User {
        email: Email::from_trusted(r.get(1)?),
        name: Name::from_trusted(r.get(2)?),
        role: decode(r, 3, at("role"), |t| Role::parse(t).ok())?,
        status: decode(r, 4, at("status"), |t| UserStatus::parse(t).ok())?,
        has_password: r.get(5)?,
        created_at: Timestamp::from_millis(r.get(6)?),
        updated_at: Timestamp::from_millis(r.get(7)?),
        id,
    })
}

const PRODUCT_COLS: &str = "id, name, sku, price, stock, status, created_at, updated_at";

fn product_row(r: &Row<'_>) -> rusqlite::Result<Product> {
    let id = decode_id(r, 0, "products", ProductId::parse)?;
    Ok(Product {
        name: Name::from_trusted(r.get(1)?),
        sku: Sku::from_trusted(r.get(2)?),
        price: r.get(3)?,
        stock: r.get(4)?,
        status: decode(r, 5, ("products", "status", id.as_str()), |t| {
            ProductStatus::parse(t).ok()
        })?,
        created_at: Timestamp::from_millis(r.get(6)?),
        updated_at: Timestamp::from_millis(r.get(7)?),
        id,
    })
}

const API_KEY_COLS: &str = "id, org_id, name, scopes, created_at, revoked_at";

fn api_key_row(r: &Row<'_>) -> rusqlite::Result<ApiKey> {
    let id = decode_id(r, 0, "api_keys", ApiKeyId::parse)?;
    Ok(ApiKey {
        org: OrgId::from_trusted(r.get(1)?),
        name: r.get(2)?,
        scopes: scopes(r.get(3)?, ("api_keys", "scopes", id.as_str()))?,
        created_at: Timestamp::from_millis(r.get(4)?),
        revoked_at: r.get::<_, Option<i64>>(5)?.map(Timestamp::from_millis),
        id,
    })
}

const CLIENT_COLS: &str = "id, org_id, name, secret_hash, previous_secret_hash, previous_secret_until, scopes, redirect_uris, admin_approved, owner_id, created_at";

fn client_row(r: &Row<'_>) -> rusqlite::Result<Client> {
    let id = decode_id(r, 0, "clients", ClientId::parse)?;
    // A secret digest of the wrong length must not read as "no secret" (a
    // public client).
    let hash = |i: usize, column: &str| -> rusqlite::Result<Option<[u8; 32]>> {
        r.get::<_, Option<Vec<u8>>>(i)?
            .map(|v| digest32(v, ("clients", column, id.as_str())))
            .transpose()
    };
    let prev = hash(4, "previous_secret_hash")?;
    let prev_until: Option<i64> = r.get(5)?;
    let uris: String = r.get(7)?;
    Ok(Client {
        org: OrgId::from_trusted(r.get(1)?),
        name: r.get(2)?,
        secret_hash: hash(3, "secret_hash")?,
        previous_secret: prev.zip(prev_until.map(Timestamp::from_millis)),
        scopes: scopes(r.get(6)?, ("clients", "scopes", id.as_str()))?,
        redirect_uris: uris
            .lines()
            .filter(|l| !l.is_empty())
            .map(str::to_owned)
            .collect(),
        admin_approved: r.get(8)?,
        owner: r.get::<_, Option<String>>(9)?.map(UserId::from_trusted),
        created_at: Timestamp::from_millis(r.get(10)?),
        id,
    })
}

fn org_row(r: &Row<'_>) -> rusqlite::Result<Organization> {
    let id = decode_id(r, 0, "organizations", OrgId::parse)?;
    Ok(Organization {
        name: r.get(1)?,
        plan: decode(r, 2, ("organizations", "plan", id.as_str()), |t| {
            Plan::parse(t).ok()
        })?,
        per_minute: r.get(3)?,
        per_second: r.get(4)?,
        created_at: Timestamp::from_millis(r.get(5)?),
        id,
    })
}

fn insert_org(c: &Connection, o: &Organization) -> StoreResult<()> {
    c.prepare_cached(
        "INSERT INTO organizations (id, name, plan, per_minute, per_second, created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )
    .and_then(|mut s| {
        s.execute(params![o.id.as_str(), o.name, o.plan.as_str(), o.per_minute, o.per_second, o.created_at.millis()])
    })
    .map_err(db_err)?;
    Ok(())
}

fn insert_client_row(c: &Connection, org: &OrgId, n: &NewClient) -> StoreResult<()> {
    c.prepare_cached(
        "INSERT INTO clients (id, org_id, name, secret_hash, scopes, redirect_uris, admin_approved, owner_id, created_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
    )
    .and_then(|mut s| {
        s.execute(params![
            n.id.as_str(),
            org.as_str(),
            n.name,
            n.secret_hash.map(|h| h.to_vec()),
            n.scopes.bits() as i64,
            n.redirect_uris.join("\n"),
            n.admin_approved,
            n.owner.as_ref().map(|u| u.as_str().to_owned()),
            n.created_at.millis(),
        ])
    })
    .map_err(|e| match db_err(e) {
        StoreError::Internal(m) if m.contains("FOREIGN KEY") => StoreError::Rule(client::unknown_owner()),
        other => other,
    })?;
    Ok(())
}

/// The organization and user of a link of `kind` that may be used at `now`
/// (`link::usable`, D11, D19); used, expired, replaced and unknown links, and
/// links whose user is not in the state they are for, are `NotFound`.
fn link_user(
    c: &Connection,
    kind: LinkKind,
    digest: &[u8; 32],
    now: Timestamp,
) -> StoreResult<(OrgId, User)> {
    let (org, id, expires_at, used_at) =
        auth_state::link_row(c, kind, digest)?.ok_or(StoreError::NotFound)?;
    let u = get_user_tx(c, &org, &id)?.ok_or(StoreError::NotFound)?;
    if !link::usable(kind, used_at, expires_at, u.status, now) {
        return Err(StoreError::NotFound);
    }
    Ok((org, u))
}

fn get_user_tx(c: &Connection, org: &OrgId, id: &UserId) -> StoreResult<Option<User>> {
    c.prepare_cached(&format!(
        "SELECT {USER_COLS} FROM users WHERE id = ?1 AND org_id = ?2"
    ))
    .and_then(|mut s| {
        s.query_row(params![id.as_str(), org.as_str()], user_row)
            .optional()
    })
    .map_err(db_err)
}

/// D13: the organization's active admins besides `id`, counted for
/// `user::check_change` / `user::check_delete` when the change takes an
/// active admin away (`user::removes_active_admin`). The single writer makes
/// the count and the write it guards atomic.
fn other_active_admins(c: &Connection, org: &OrgId, id: &UserId) -> StoreResult<u64> {
    c.prepare_cached(
        "SELECT count(*) FROM users WHERE org_id = ?1 AND role = 'admin' AND status = 'active' AND id <> ?2",
    )
    .and_then(|mut s| s.query_row(params![org.as_str(), id.as_str()], |r| r.get::<_, i64>(0)))
    .map(|n| n as u64)
    .map_err(db_err)
}

fn get_product_tx(c: &Connection, org: &OrgId, id: &ProductId) -> StoreResult<Option<Product>> {
    c.prepare_cached(&format!(
        "SELECT {PRODUCT_COLS} FROM products WHERE id = ?1 AND org_id = ?2"
    ))
    .and_then(|mut s| {
        s.query_row(params![id.as_str(), org.as_str()], product_row)
            .optional()
    })
    .map_err(db_err)
}

/// An FTS5 phrase holding `text` literally.
fn fts_phrase(text: &str) -> String {
    format!("\"{}\"", text.replace('"', "\"\""))
}

/// A dynamic `WHERE` with its parameters.
struct Where {
    sql: String,
    params: Vec<rusqlite::types::Value>,
}

impl Where {
    fn new(org: &OrgId) -> Self {
        Self {
            sql: "org_id = ?".into(),
            params: vec![org.as_str().to_owned().into()],
        }
    }
    fn and(&mut self, clause: &str, values: impl IntoIterator<Item = rusqlite::types::Value>) {
        self.sql.push_str(" AND ");
        self.sql.push_str(clause);
        self.params.extend(values);
    }
}

fn run_list<T>(
    c: &Connection,
    table: &str,
    cols: &str,
    w: &Where,
    page: Page,
    map: fn(&Row<'_>) -> rusqlite::Result<T>,
) -> StoreResult<Vec<T>> {
    let sql = format!(
        "SELECT {cols} FROM {table} WHERE {} ORDER BY created_at DESC, id DESC LIMIT {} OFFSET {}",
        w.sql,
        page.limit,
        page.offset.min(i64::MAX as u64)
    );
    let mut stmt = c.prepare_cached(&sql).map_err(db_err)?;
    let rows = stmt
        .query_map(rusqlite::params_from_iter(w.params.iter()), map)
        .map_err(db_err)?;
    rows.collect::<rusqlite::Result<Vec<T>>>().map_err(db_err)
}

/// One pass for a search: the page and the total of all matches, through
/// `count(*) OVER ()` (the matches are found once, not once for the page and
/// again for the count). An empty page past the end still needs a count.
fn search_page<T>(
    c: &Connection,
    table: &str,
    cols: &str,
    w: &Where,
    page: Page,
    map: fn(&Row<'_>) -> rusqlite::Result<T>,
) -> StoreResult<Listing<T>> {
    let sql = format!(
        "SELECT {cols}, count(*) OVER () FROM {table} WHERE {} ORDER BY created_at DESC, id DESC LIMIT {} OFFSET {}",
        w.sql,
        page.limit,
        page.offset.min(i64::MAX as u64)
    );
    let n = cols.split(',').count();
    let mut stmt = c.prepare_cached(&sql).map_err(db_err)?;
    let mut total = None;
    let rows = stmt
        .query_map(rusqlite::params_from_iter(w.params.iter()), |r| {
            Ok((map(r)?, r.get::<_, i64>(n)?))
        })
        .map_err(db_err)?;
    let mut items = Vec::new();
    for row in rows {
        let (item, t) = row.map_err(db_err)?;
        total = Some(t.max(0) as u64);
        items.push(item);
    }
    let total = match total {
        Some(t) => t,
        None if page.offset == 0 => 0,
        None => count(
            c,
            &format!("SELECT count(*) FROM {table} WHERE {}", w.sql),
            &w.params,
        )?,
    };
    Ok(Listing { items, total })
}

fn count(c: &Connection, sql: &str, params: &[rusqlite::types::Value]) -> StoreResult<u64> {
    let mut stmt = c.prepare_cached(sql).map_err(db_err)?;
    stmt.query_row(rusqlite::params_from_iter(params.iter()), |r| {
        r.get::<_, i64>(0)
    })
    .map(|n| n.max(0) as u64)
    .map_err(db_err)
}

/// D9, D14: `q` as a literal, case-insensitive substring of name or e-mail.
fn and_user_search(w: &mut Where, q: &SearchText) {
    let text = q.as_str();
    if q.matches_nothing() {
        // D6 (continued).
        w.and("0", []);
    } else if text.chars().count() >= 3 {
        // Trigram index: a quoted phrase is a literal substring.
        w.and(
            "seq IN (SELECT rowid FROM users_fts WHERE users_fts MATCH ?)",
            [fts_phrase(text).into()],
        );
    } else {
        // Too short for trigrams: scan this organization's rows.
        let lowered = text.to_lowercase();
        w.and(
            "(instr(unicode_lower(name), ?) > 0 OR instr(unicode_lower(email), ?) > 0)",
            [lowered.clone().into(), lowered.into()],
        );
    }
}

/// The `WHERE` of a user list (filters and search), without paging.
fn user_where(org: &OrgId, f: &UserFilter) -> Where {
    let mut w = Where::new(org);
    if let Some(role) = f.role {
        w.and("role = ?", [role.as_str().to_owned().into()]);
    }
    if let Some(status) = f.status {
        w.and("status = ?", [status.as_str().to_owned().into()]);
    }
    if let Some(q) = &f.q {
        and_user_search(&mut w, q);
    }
    w
}

/// The `WHERE` of a product list (filters and search), without paging.
fn product_where(org: &OrgId, f: &ProductFilter) -> Where {
    let mut w = Where::new(org);
    if let Some(status) = f.status {
        w.and("status = ?", [status.as_str().to_owned().into()]);
    }
    if f.q.as_ref().is_some_and(SearchText::matches_nothing) {
        // D6 (continued).
        w.and("0", []);
        return w;
    }
    let words = f.q.as_ref().map(|q| q.words()).unwrap_or_default();
    if !words.is_empty() {
        let query = words
            .iter()
            .map(|word| format!("{}*", fts_phrase(word)))
            .collect::<Vec<_>>()
            .join(" AND ");
        w.and(
            "seq IN (SELECT rowid FROM products_fts WHERE products_fts MATCH ?)",
            [query.into()],
        );
    }
    w
}

/// A page after a cursor row: rows strictly after (`created_at`, `id`) of `after`.
fn cursor_page<T>(
    c: &Connection,
    table: &str,
    cols: &str,
    mut w: Where,
    after: Option<&str>,
    limit: u32,
    map: fn(&Row<'_>) -> rusqlite::Result<T>,
) -> StoreResult<Option<Vec<T>>> {
    if let Some(id) = after {
        let at: Option<i64> = c
            .prepare_cached(&format!(
                "SELECT created_at FROM {table} WHERE id = ?1 AND org_id = ?2"
            ))
            .and_then(|mut s| {
                s.query_row(params![id, w.params[0].clone()], |r| r.get(0))
                    .optional()
            })
            .map_err(db_err)?;
        let Some(at) = at else { return Ok(None) };
        w.and(
            "(created_at < ? OR (created_at = ? AND id < ?))",
            [at.into(), at.into(), id.to_owned().into()],
        );
    }
    let sql = format!(
        "SELECT {cols} FROM {table} WHERE {} ORDER BY created_at DESC, id DESC LIMIT {limit}",
        w.sql
    );
    let mut stmt = c.prepare_cached(&sql).map_err(db_err)?;
    let rows = stmt
        .query_map(rusqlite::params_from_iter(w.params.iter()), map)
        .map_err(db_err)?;
    rows.collect::<rusqlite::Result<Vec<T>>>()
        .map(Some)
        .map_err(db_err)
}

fn list_users_sync(
    c: &Connection,
    org: &OrgId,
    f: &UserFilter,
    page: Page,
) -> StoreResult<Listing<User>> {
    let mut w = Where::new(org);
    if let Some(role) = f.role {
        w.and("role = ?", [role.as_str().to_owned().into()]);
    }
    if let Some(status) = f.status {
        w.and("status = ?", [status.as_str().to_owned().into()]);
    }
    let Some(q) = &f.q else {
        // Exact totals from the counters the triggers keep (D14).
        let total = count(
            c,
            &format!(
                "SELECT coalesce(sum(n), 0) FROM user_counts WHERE {}",
                w.sql
            ),
            &w.params,
        )?;
        let items = if page.offset >= total {
            Vec::new()
        } else {
            run_list(c, "users", USER_COLS, &w, page, user_row)?
        };
        return Ok(Listing { items, total });
    };
    and_user_search(&mut w, q);
    search_page(c, "users", USER_COLS, &w, page, user_row)
}

fn list_products_sync(
    c: &Connection,
    org: &OrgId,
    f: &ProductFilter,
    page: Page,
) -> StoreResult<Listing<Product>> {
    let mut w = Where::new(org);
    if let Some(status) = f.status {
        w.and("status = ?", [status.as_str().to_owned().into()]);
    }
    if f.q.as_ref().is_some_and(SearchText::matches_nothing) {
        // D6 (continued).
        w.and("0", []);
        return search_page(c, "products", PRODUCT_COLS, &w, page, product_row);
    }
    let words = f.q.as_ref().map(|q| q.words()).unwrap_or_default();
    if words.is_empty() {
        let total = count(
            c,
            &format!(
                "SELECT coalesce(sum(n), 0) FROM product_counts WHERE {}",
                w.sql
            ),
            &w.params,
        )?;
        let items = if page.offset >= total {
            Vec::new()
        } else {
            run_list(c, "products", PRODUCT_COLS, &w, page, product_row)?
        };
        return Ok(Listing { items, total });
    }
    // D17: every query word is a prefix of some word of name or sku.
    let query = words
        .iter()
        .map(|word| format!("{}*", fts_phrase(word)))
        .collect::<Vec<_>>()
        .join(" AND ");
    w.and(
        "seq IN (SELECT rowid FROM products_fts WHERE products_fts MATCH ?)",
        [query.into()],
    );
    search_page(c, "products", PRODUCT_COLS, &w, page, product_row)
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
}

/// D33: one organization's users and products replaced by the fixture, inside
/// the caller's transaction.
fn reset_org_tx(
    tx: &Connection,
    org: &str,
    fixture: &gatehouse_domain::Fixture,
    now: Timestamp,
) -> StoreResult<()> {
    let users: Vec<String> = tx
        .prepare_cached("SELECT id FROM users WHERE org_id = ?1")
        .and_then(|mut st| {
            st.query_map([org], |r| r.get::<_, String>(0))?
                .collect::<Result<Vec<_>, _>>()
        })
        .map_err(db_err)?;
    for id in &users {
        // D13: every session, code and token of a removed user dies.
        auth_state::revoke_user(tx, &UserId::from_trusted(id.clone()), now)?;
    }
    // Client applications stay; an owner who disappears is cleared (D33).
    tx.prepare_cached(
        "UPDATE clients SET owner_id = NULL WHERE org_id = ?1 AND owner_id IS NOT NULL",
    )
    .and_then(|mut st| st.execute([org]))
    .map_err(db_err)?;
    for sql in [
        "DELETE FROM users WHERE org_id = ?1",
        "DELETE FROM products WHERE org_id = ?1",
    ] {
        tx.prepare_cached(sql)
            .and_then(|mut st| st.execute([org]))
            .map_err(db_err)?;
    }
    for (i, f) in fixture.users.iter().enumerate() {
        tx.prepare_cached(
            "INSERT INTO users (id, org_id, email, email_norm, name, role, status, password_hash, created_at, updated_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, NULL, ?8, ?8)",
        )
        .and_then(|mut st| {
            st.execute(params![
                UserId::generate().as_str(),
                org,
                f.email.as_str(),
                f.email.normalized(),
                f.name.as_str(),
                f.role.as_str(),
                f.status.as_str(),
                // Newest first: the first fixture user gets the latest time.
                now.plus_seconds(-(i as i64)).millis(),
            ])
        })
        .map_err(db_err)?;
    }
    for (i, p) in fixture.products.iter().enumerate() {
        let p = p.clone().into_product(now.plus_seconds(-(i as i64)));
        tx.prepare_cached(
            "INSERT INTO products (id, org_id, name, sku, price, stock, status, created_at, updated_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?8)",
        )
        .and_then(|mut st| {
            st.execute(params![
                p.id.as_str(),
                org,
                p.name.as_str(),
                p.sku.as_str(),
                p.price,
                p.stock,
                p.status.as_str(),
                p.created_at.millis(),
            ])
        })
        .map_err(db_err)?;
    }
    Ok(())
}

#[cfg(test)]
mod email_rekeying {
    use gatehouse_domain::{Email, Name, NewUser, OrgId, Organization, Plan, Role, Timestamp};
    use gatehouse_domain::{UserId, UserStatus};
    use gatehouse_store::StoreError;
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
        let org = Organization {
            id: OrgId::generate(),
            name: "Acme".into(),
            plan: Plan::Free,
            per_minute: None,
            per_second: None,
            created_at: Timestamp::now(),
        };
        {
            let store = SqliteStore::open(&db).unwrap();
            store.create_org(&org).await.unwrap();
        }
        // Rows as the old code wrote them: the e-mail as given (NFD, upper
        // case), the key plain lower case.
        let planted = [
            ("usr_rekey1", "STRASSE@x.com", 1),
            ("usr_rekey2", "Stra\u{df}e@x.com", 2),
            ("usr_rekey3", "JOSE\u{301}@b.example.com", 3),
            ("usr_rekey4", "ana@B\u{dc}CHER.example", 4),
        ];
        {
            let c = rusqlite::Connection::open(&db).unwrap();
            for (id, email, at) in planted {
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
        // ASCII: the old key was already right.
        assert_eq!(key_of(&db, "usr_rekey1"), "strasse@x.com");
        // `Straße` is now the same address as the earlier `STRASSE`: both
        // rows stay, the later keeps its old key.
        assert_eq!(key_of(&db, "usr_rekey2"), "stra\u{df}e@x.com");
        assert_eq!(key_of(&db, "usr_rekey3"), "jos\u{e9}@b.example.com");
        assert_eq!(key_of(&db, "usr_rekey4"), "ana@xn--bcher-kva.example");

        // Look-ups find the re-keyed rows by any form of the address …
        for (email, id) in [
            ("jos\u{e9}@b.example.com", "usr_rekey3"),
            ("Jose\u{301}@B.EXAMPLE.COM", "usr_rekey3"),
            ("ANA@b\u{fc}cher.example", "usr_rekey4"),
            ("ana@xn--bcher-kva.example", "usr_rekey4"),
            ("stra\u{df}e@x.com", "usr_rekey1"),
        ] {
            let (u, _) = store
                .find_user_by_email(&org.id, &Email::parse(email).unwrap())
                .await
                .unwrap()
                .unwrap_or_else(|| panic!("{email} not found"));
            assert_eq!(u.id.as_str(), id, "{email}");
        }
        // … and a new user with one of them is a duplicate.
        for email in ["jos\u{e9}@b.example.com", "Ana@xn--bcher-kva.example"] {
            let new = NewUser {
                id: UserId::generate(),
                email: Email::parse(email).unwrap(),
                name: Name::parse("Dup").unwrap(),
                role: Role::Viewer,
                status: UserStatus::PendingInvite,
                password_hash: None,
                created_at: Timestamp::now(),
            };
            match store.insert_user(&org.id, &new).await {
                Err(StoreError::Duplicate("email")) => {}
                other => panic!("{email}: {other:?}"),
            }
        }
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
