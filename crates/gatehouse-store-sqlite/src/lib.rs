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

mod auth_state;
mod generation;
mod pool;
mod schema;

use std::path::Path;

use async_trait::async_trait;
use gatehouse_domain::{
    ApiKey, ApiKeyId, Client, ClientId, Listing, NewProduct, NewUser, OrgId, Organization, Page,
    Plan, Product, ProductId, ProductPatch, ProductStatus, Role, Scope, ScopeSet, SearchText,
    Timestamp, User, UserId, UserPatch, UserStatus, client, link, product,
    user::{self, UserChange},
    values::{Email, Name, Sku},
};
use gatehouse_store::{
    AuthCode, LinkKind, LinkRecord, NewClient, NewLink, OutboundEmail, OutboxMessage,
    ProductFilter, Redeemed, RefreshChain, RefreshToken, Revocation, RevocationKind, Rotated,
    Session, SigningKeyRecord, Store, StoreError, StoreResult, UserFilter,
};
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
    <[u8; 32]>::try_from(v.as_slice()).map_err(|_| {
        corrupt(
            table,
            column,
            row,
            &format!("holds {} bytes, not 32", v.len()),
        )
    })
}

/// A scope set as stored (its bits), or [`corrupt`] when it holds a bit no
/// scope has.
pub(crate) fn scopes(
    bits: i64,
    (table, column, row): (&str, &str, &str),
) -> rusqlite::Result<ScopeSet> {
    u8::try_from(bits)
        .ok()
        .map(ScopeSet::from_bits)
        .filter(|s| i64::from(s.bits()) == bits)
        .ok_or_else(|| {
            corrupt(
                table,
                column,
                row,
                &format!("holds {bits}, not a set of scopes"),
            )
        })
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

    async fn create_org(&self, org: &Organization) -> StoreResult<()> {
        let org = org.clone();
        self.pool.write(move |tx| insert_org(tx, &org)).await
    }

    async fn get_org(&self, org: &OrgId) -> StoreResult<Option<Organization>> {
        self.pool
            .read(|c| {
                c.prepare_cached("SELECT id, name, plan, per_minute, per_second, created_at FROM organizations WHERE id = ?1")
                    .and_then(|mut s| s.query_row([org.as_str()], org_row).optional())
                    .map_err(db_err)
            })
            .await
    }

    async fn v2_preview(&self, org: &OrgId) -> StoreResult<bool> {
        self.pool
            .read(|c| {
                c.prepare_cached("SELECT v2_preview FROM organizations WHERE id = ?1")
                    .and_then(|mut s| {
                        s.query_row([org.as_str()], |r| r.get::<_, bool>(0))
                            .optional()
                    })
                    .map(|v| v.unwrap_or(false))
                    .map_err(db_err)
            })
            .await
    }

    async fn set_v2_preview(&self, org: &OrgId, enabled: bool) -> StoreResult<()> {
        let org = org.clone();
        self.pool
            .write(move |tx| {
                let n = tx
                    .prepare_cached("UPDATE organizations SET v2_preview = ?1 WHERE id = ?2")
                    .and_then(|mut s| s.execute(params![enabled, org.as_str()]))
                    .map_err(db_err)?;
                if n == 0 {
                    Err(StoreError::NotFound)
                } else {
                    Ok(())
                }
            })
            .await
    }

    async fn reset_to_fixture(
        &self,
        org: Option<&OrgId>,
        fixture: &gatehouse_domain::Fixture,
        now: Timestamp,
    ) -> StoreResult<u64> {
        let (org, fixture) = (org.cloned(), fixture.clone());
        self.pool
            .write(move |tx| {
                let orgs: Vec<String> = match &org {
                    Some(o) => {
                        let exists: bool = tx
                            .query_row(
                                "SELECT EXISTS (SELECT 1 FROM organizations WHERE id = ?1)",
                                [o.as_str()],
                                |r| r.get(0),
                            )
                            .map_err(db_err)?;
                        if !exists {
                            return Err(StoreError::NotFound);
                        }
                        vec![o.as_str().to_owned()]
                    }
                    None => {
                        let mut st = tx
                            .prepare("SELECT id FROM organizations ORDER BY id")
                            .map_err(db_err)?;

                        st.query_map([], |r| r.get::<_, String>(0))
                            .and_then(|rows| rows.collect::<Result<Vec<_>, _>>())
                            .map_err(db_err)?
                    }
                };
                for org in &orgs {
                    reset_org_tx(tx, org, &fixture, now)?;
                }
                Ok(orgs.len() as u64)
            })
            .await
    }

    async fn claim_job(&self, job: &str, run_key: &str, now: Timestamp) -> StoreResult<bool> {
        let (job, run_key) = (job.to_owned(), run_key.to_owned());
        self.pool
            .write(move |tx| {
                let n = tx
                    .prepare_cached(
                        "INSERT INTO job_runs (job, run_key, claimed_at) VALUES (?1, ?2, ?3)
                         ON CONFLICT (job, run_key) DO NOTHING",
                    )
                    .and_then(|mut st| st.execute(params![job, run_key, now.millis()]))
                    .map_err(db_err)?;
                Ok(n == 1)
            })
            .await
    }

    async fn bootstrap(&self, org: &Organization, client: &NewClient) -> StoreResult<bool> {
        let (org, client) = (org.clone(), client.clone());
        self.pool
            .write(move |tx| {
                let any: bool = tx
                    .query_row("SELECT EXISTS (SELECT 1 FROM organizations)", [], |r| {
                        r.get(0)
                    })
                    .map_err(db_err)?;
                if any {
                    return Ok(false);
                }
                insert_org(tx, &org)?;
                insert_client_row(tx, &org.id, &client)?;
                Ok(true)
            })
            .await
    }

    async fn insert_user_with_link(
        &self,
        org: &OrgId,
        u: &NewUser,
        invitation: Option<&NewLink>,
    ) -> StoreResult<User> {
        let (org, u, invitation) = (org.clone(), u.clone(), invitation.cloned());
        self.pool
            .write(move |tx| {
                tx.prepare_cached(
                    "INSERT INTO users (id, org_id, email, email_norm, name, role, status, password_hash, created_at, updated_at)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?9)",
                )
                .and_then(|mut s| {
                    s.execute(params![
                        u.id.as_str(),
                        org.as_str(),
                        u.email.as_str(),
                        u.email.normalized(),
                        u.name.as_str(),
                        u.role.as_str(),
                        u.status.as_str(),
                        u.password_hash,
                        u.created_at.millis(),
                    ])
                })
                .map_err(db_err)?;
                if let Some(link) = &invitation {
                    auth_state::insert_link(tx, LinkKind::Invitation, &org, &u.id, link, u.created_at)?;
                }
                Ok(User {
                    id: u.id,
                    email: u.email,
                    name: u.name,
                    role: u.role,
                    status: u.status,
                    created_at: u.created_at,
                    updated_at: u.created_at,
                    has_password: u.password_hash.is_some(),
                })
            })
            .await
    }

    async fn get_user(&self, org: &OrgId, id: &UserId) -> StoreResult<Option<User>> {
        self.pool.read(|c| get_user_tx(c, org, id)).await
    }

    async fn list_users(
        &self,
        org: &OrgId,
        filter: &UserFilter,
        page: Page,
    ) -> StoreResult<Listing<User>> {
        let (org, filter) = (org.clone(), filter.clone());
        self.pool
            .read_blocking(move |c| list_users_sync(c, &org, &filter, page))
            .await
    }

    async fn list_users_after(
        &self,
        org: &OrgId,
        filter: &UserFilter,
        after: Option<&UserId>,
        limit: u32,
    ) -> StoreResult<Option<Vec<User>>> {
        let (w, after) = (user_where(org, filter), after.map(|a| a.to_string()));
        self.pool
            .read_blocking(move |c| {
                cursor_page(c, "users", USER_COLS, w, after.as_deref(), limit, user_row)
            })
            .await
    }

    async fn update_user(
        &self,
        org: &OrgId,
        id: &UserId,
        patch: &UserPatch,
        now: Timestamp,
    ) -> StoreResult<UserChange> {
        let (org, id, patch) = (org.clone(), id.clone(), patch.clone());
        self.pool
            .write(move |tx| {
                let current = get_user_tx(tx, &org, &id)?.ok_or(StoreError::NotFound)?;
                let change = user::apply_patch(&current, &patch, now)?;
                if !change.changed {
                    return Ok(change);
                }
                let others = user::removes_active_admin(&current, Some(&change.user))
                    .then(|| other_active_admins(tx, &org, &id))
                    .transpose()?;
                user::check_change(&current, &change.user, others)?;
                let u = &change.user;
                tx.prepare_cached(
                    "UPDATE users SET name = ?1, role = ?2, status = ?3, updated_at = ?4 WHERE id = ?5 AND org_id = ?6",
                )
                .and_then(|mut s| {
                    s.execute(params![u.name.as_str(), u.role.as_str(), u.status.as_str(), u.updated_at.millis(), id.as_str(), org.as_str()])
                })
                .map_err(db_err)?;
                if change.revokes_tokens {
                    auth_state::revoke_user(tx, &id, now)?;
                }
                if change.cancels_invitation {
                    auth_state::delete_links(tx, LinkKind::Invitation, &id)?;
                }
                Ok(change)
            })
            .await
    }

    async fn delete_user_at(
        &self,
        org: &OrgId,
        id: &UserId,
        transfer_to: Option<&UserId>,
        now: Timestamp,
    ) -> StoreResult<()> {
        let (org, id, heir) = (org.clone(), id.clone(), transfer_to.cloned());
        self.pool
            .write(move |tx| {
                let current = get_user_tx(tx, &org, &id)?.ok_or(StoreError::NotFound)?;
                let others = user::removes_active_admin(&current, None)
                    .then(|| other_active_admins(tx, &org, &id))
                    .transpose()?;
                let owned: i64 = tx
                    .prepare_cached(
                        "SELECT count(*) FROM clients WHERE org_id = ?1 AND owner_id = ?2",
                    )
                    .and_then(|mut s| s.query_row(params![org.as_str(), id.as_str()], |r| r.get(0)))
                    .map_err(db_err)?;
                let heir_row = match &heir {
                    Some(h) => get_user_tx(tx, &org, h)?,
                    None => None,
                };
                let plan = user::check_delete(
                    &current,
                    others,
                    owned as u64,
                    heir.as_ref(),
                    heir_row.as_ref(),
                )?;
                if let Some(heir) = &plan.transfer_clients_to {
                    tx.prepare_cached(
                        "UPDATE clients SET owner_id = ?1 WHERE org_id = ?2 AND owner_id = ?3",
                    )
                    .and_then(|mut s| s.execute(params![heir.as_str(), org.as_str(), id.as_str()]))
                    .map_err(db_err)?;
                }
                // D13: every session, code and token dies with the user.
                auth_state::revoke_user(tx, &id, now)?;
                tx.prepare_cached("DELETE FROM users WHERE id = ?1 AND org_id = ?2")
                    .and_then(|mut s| s.execute(params![id.as_str(), org.as_str()]))
                    .map_err(db_err)?;
                Ok(())
            })
            .await
    }

    async fn insert_product(
        &self,
        org: &OrgId,
        p: &NewProduct,
        now: Timestamp,
    ) -> StoreResult<Product> {
        let (org, p) = (org.clone(), p.clone().into_product(now));
        self.pool
            .write(move |tx| {
                tx.prepare_cached(
                    "INSERT INTO products (id, org_id, name, sku, price, stock, status, created_at, updated_at)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?8)",
                )
                .and_then(|mut s| {
                    s.execute(params![
                        p.id.as_str(),
                        org.as_str(),
                        p.name.as_str(),
                        p.sku.as_str(),
                        p.price,
                        p.stock,
                        p.status.as_str(),
                        p.created_at.millis()
                    ])
                })
                .map_err(db_err)?;
                Ok(p)
            })
            .await
    }

    async fn get_product(&self, org: &OrgId, id: &ProductId) -> StoreResult<Option<Product>> {
        self.pool.read(|c| get_product_tx(c, org, id)).await
    }

    async fn list_products(
        &self,
        org: &OrgId,
        filter: &ProductFilter,
        page: Page,
    ) -> StoreResult<Listing<Product>> {
        let (org, filter) = (org.clone(), filter.clone());
        self.pool
            .read_blocking(move |c| list_products_sync(c, &org, &filter, page))
            .await
    }

    async fn list_products_after(
        &self,
        org: &OrgId,
        filter: &ProductFilter,
        after: Option<&ProductId>,
        limit: u32,
    ) -> StoreResult<Option<Vec<Product>>> {
        let (w, after) = (product_where(org, filter), after.map(|a| a.to_string()));
        self.pool
            .read_blocking(move |c| {
                cursor_page(
                    c,
                    "products",
                    PRODUCT_COLS,
                    w,
                    after.as_deref(),
                    limit,
                    product_row,
                )
            })
            .await
    }

    async fn update_product(
        &self,
        org: &OrgId,
        id: &ProductId,
        patch: &ProductPatch,
        now: Timestamp,
    ) -> StoreResult<Product> {
        let (org, id, patch) = (org.clone(), id.clone(), patch.clone());
        self.pool
            .write(move |tx| {
                let current = get_product_tx(tx, &org, &id)?.ok_or(StoreError::NotFound)?;
                let (next, changed) = product::apply_patch(&current, &patch, now)?;
                if changed {
                    tx.prepare_cached(
                        "UPDATE products SET name = ?1, sku = ?2, price = ?3, stock = ?4, status = ?5, updated_at = ?6
                         WHERE id = ?7 AND org_id = ?8",
                    )
                    .and_then(|mut s| {
                        s.execute(params![
                            next.name.as_str(),
                            next.sku.as_str(),
                            next.price,
                            next.stock,
                            next.status.as_str(),
                            next.updated_at.millis(),
                            id.as_str(),
                            org.as_str()
                        ])
                    })
                    .map_err(db_err)?;
                }
                Ok(next)
            })
            .await
    }

    async fn delete_product(&self, org: &OrgId, id: &ProductId) -> StoreResult<()> {
        let (org, id) = (org.clone(), id.clone());
        self.pool
            .write(move |tx| {
                let n = tx
                    .prepare_cached("DELETE FROM products WHERE id = ?1 AND org_id = ?2")
                    .and_then(|mut s| s.execute(params![id.as_str(), org.as_str()]))
                    .map_err(db_err)?;
                if n == 0 {
                    Err(StoreError::NotFound)
                } else {
                    Ok(())
                }
            })
            .await
    }

    async fn insert_client(&self, org: &OrgId, client: &NewClient) -> StoreResult<Client> {
        let (org, client) = (org.clone(), client.clone());
        self.pool
            .write(move |tx| {
                let owner = match &client.owner {
                    Some(id) => get_user_tx(tx, &org, id)?,
                    None => None,
                };
                client::check_owner(client.owner.as_ref(), owner.as_ref())?;
                insert_client_row(tx, &org, &client)?;
                Ok(Client {
                    id: client.id,
                    org,
                    name: client.name,
                    secret_hash: client.secret_hash,
                    previous_secret: None,
                    scopes: client.scopes,
                    redirect_uris: client.redirect_uris,
                    admin_approved: client.admin_approved,
                    owner: client.owner,
                    created_at: client.created_at,
                })
            })
            .await
    }

    fn clients_version(&self) -> Option<u64> {
        self.pool.clients_version()
    }

    async fn find_client(&self, id: &ClientId) -> StoreResult<Option<Client>> {
        self.pool
            .read(|c| {
                c.prepare_cached(&format!("SELECT {CLIENT_COLS} FROM clients WHERE id = ?1"))
                    .and_then(|mut s| s.query_row([id.as_str()], client_row).optional())
                    .map_err(db_err)
            })
            .await
    }

    async fn approve_admin(&self, org: &OrgId, id: &ClientId) -> StoreResult<Client> {
        let (org, id) = (org.clone(), id.clone());
        self.pool
            .write(move |tx| {
                let admin = ScopeSet::EMPTY.with(Scope::Admin).bits() as i64;
                let n = tx
                    .prepare_cached("UPDATE clients SET admin_approved = 1, scopes = scopes | ?1 WHERE id = ?2 AND org_id = ?3")
                    .and_then(|mut s| s.execute(params![admin, id.as_str(), org.as_str()]))
                    .map_err(db_err)?;
                if n == 0 {
                    return Err(StoreError::NotFound);
                }
                tx.prepare_cached(&format!("SELECT {CLIENT_COLS} FROM clients WHERE id = ?1"))
                    .and_then(|mut s| s.query_row([id.as_str()], client_row))
                    .map_err(db_err)
            })
            .await
    }

    async fn insert_api_key(&self, k: &ApiKey, digest: &[u8; 32]) -> StoreResult<()> {
        let (k, digest) = (k.clone(), *digest);
        self.pool
            .write(move |tx| {
                tx.prepare_cached(
                    "INSERT INTO api_keys (id, org_id, name, digest, scopes, created_at, revoked_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                )
                .and_then(|mut s| {
                    s.execute(params![
                        k.id.as_str(),
                        k.org.as_str(),
                        k.name,
                        digest.to_vec(),
                        k.scopes.bits() as i64,
                        k.created_at.millis(),
                        k.revoked_at.map(Timestamp::millis)
                    ])
                })
                .map_err(db_err)?;
                Ok(())
            })
            .await
    }

    async fn find_api_key_by_digest(&self, digest: &[u8; 32]) -> StoreResult<Option<ApiKey>> {
        self.pool
            .read(|c| {
                c.prepare_cached(&format!(
                    "SELECT {API_KEY_COLS} FROM api_keys WHERE digest = ?1"
                ))
                .and_then(|mut s| s.query_row([digest.as_slice()], api_key_row).optional())
                .map_err(db_err)
            })
            .await
    }

    async fn find_api_key(&self, id: &ApiKeyId) -> StoreResult<Option<ApiKey>> {
        self.pool
            .read(|c| {
                c.prepare_cached(&format!(
                    "SELECT {API_KEY_COLS} FROM api_keys WHERE id = ?1"
                ))
                .and_then(|mut s| s.query_row([id.as_str()], api_key_row).optional())
                .map_err(db_err)
            })
            .await
    }

    async fn revoke_api_key(
        &self,
        org: &OrgId,
        id: &ApiKeyId,
        at: Timestamp,
    ) -> StoreResult<ApiKey> {
        let (org, id) = (org.clone(), id.clone());
        self.pool
            .write(move |tx| {
                tx.prepare_cached("UPDATE api_keys SET revoked_at = coalesce(revoked_at, ?1) WHERE id = ?2 AND org_id = ?3")
                    .and_then(|mut s| s.execute(params![at.millis(), id.as_str(), org.as_str()]))
                    .map_err(db_err)?;
                tx.prepare_cached(&format!("SELECT {API_KEY_COLS} FROM api_keys WHERE id = ?1 AND org_id = ?2"))
                    .and_then(|mut s| s.query_row(params![id.as_str(), org.as_str()], api_key_row).optional())
                    .map_err(db_err)?
                    .ok_or(StoreError::NotFound)
            })
            .await
    }

    async fn find_user_by_email(
        &self,
        org: &OrgId,
        email: &Email,
    ) -> StoreResult<Option<(User, Option<String>)>> {
        let norm = email.normalized();
        self.pool
            .read(|c| {
                c.prepare_cached(&format!("SELECT {USER_COLS}, password_hash FROM users WHERE org_id = ?1 AND email_norm = ?2"))
                    .and_then(|mut s| {
                        s.query_row(params![org.as_str(), norm], |r| Ok((user_row(r)?, r.get::<_, Option<String>>(8)?)))
                            .optional()
                    })
                    .map_err(db_err)
            })
            .await
    }

    async fn reissue_invitation(
        &self,
        org: &OrgId,
        id: &UserId,
        link: &NewLink,
    ) -> StoreResult<()> {
        let (org, id, link) = (org.clone(), id.clone(), link.clone());
        self.pool
            .write(move |tx| {
                let u = get_user_tx(tx, &org, &id)?.ok_or(StoreError::NotFound)?;
                user::check_reinvite(&u)?;
                auth_state::insert_link(
                    tx,
                    LinkKind::Invitation,
                    &org,
                    &id,
                    &link,
                    Timestamp::now(),
                )
            })
            .await
    }

    async fn find_link(
        &self,
        kind: LinkKind,
        digest: &[u8; 32],
    ) -> StoreResult<Option<LinkRecord>> {
        self.pool
            .read(|c| {
                let row = auth_state::link_row(c, kind, digest)?;
                let Some((org, user, expires_at, used_at)) = row else {
                    return Ok(None);
                };
                let Some(user) = get_user_tx(c, &org, &user)? else {
                    return Ok(None);
                };
                Ok(Some(LinkRecord {
                    kind,
                    org,
                    user,
                    expires_at,
                    used_at,
                }))
            })
            .await
    }

    async fn accept_invitation(
        &self,
        digest: &[u8; 32],
        password_hash: &str,
        now: Timestamp,
    ) -> StoreResult<User> {
        let (digest, hash) = (*digest, password_hash.to_owned());
        self.pool
            .write(move |tx| {
                let (org, u) = link_user(tx, LinkKind::Invitation, &digest, now)?;
                let id = u.id.clone();
                tx.prepare_cached("UPDATE users SET status = 'active', password_hash = ?1, updated_at = ?2 WHERE id = ?3 AND org_id = ?4")
                    .and_then(|mut s| s.execute(params![hash, now.millis().max(u.updated_at.millis()), id.as_str(), org.as_str()]))
                    .map_err(db_err)?;
                auth_state::use_link(tx, &digest, now)?;
                get_user_tx(tx, &org, &id)?.ok_or(StoreError::NotFound)
            })
            .await
    }

    async fn request_password_reset(
        &self,
        org: &OrgId,
        email: &Email,
        link: &NewLink,
    ) -> StoreResult<bool> {
        let (org, norm, link) = (org.clone(), email.normalized(), link.clone());
        self.pool
            .write(move |tx| {
                let id: Option<String> = tx
                    .prepare_cached("SELECT id FROM users WHERE org_id = ?1 AND email_norm = ?2 AND status = 'active'")
                    .and_then(|mut s| s.query_row(params![org.as_str(), norm], |r| r.get(0)).optional())
                    .map_err(db_err)?;
                let Some(id) = id.map(UserId::from_trusted) else { return Ok(false) };
                let now = Timestamp::now();
                // D19 (revised): the rule decides on the sends it reads, in the
                // transaction that records this one.
                let since = now.plus_seconds(-gatehouse_domain::user::RESET_EMAIL_WINDOW_SECS);
                let recent: Vec<Timestamp> = tx
                    .prepare_cached("SELECT requested_at FROM reset_requests WHERE user_id = ?1 AND requested_at > ?2")
                    .and_then(|mut s| {
                        s.query_map(params![id.as_str(), since.millis()], |r| Ok(Timestamp::from_millis(r.get(0)?)))?
                            .collect::<Result<_, _>>()
                    })
                    .map_err(db_err)?;
                if !gatehouse_domain::user::reset_email_allowed(&recent, now) {
                    return Ok(false);
                }
                tx.prepare_cached("INSERT INTO reset_requests (user_id, requested_at) VALUES (?1, ?2)")
                    .and_then(|mut s| s.execute(params![id.as_str(), now.millis()]))
                    .map_err(db_err)?;
                auth_state::insert_link(tx, LinkKind::Reset, &org, &id, &link, now)?;
                Ok(true)
            })
            .await
    }

    async fn reset_password(
        &self,
        digest: &[u8; 32],
        password_hash: &str,
        now: Timestamp,
    ) -> StoreResult<User> {
        let (digest, hash) = (*digest, password_hash.to_owned());
        self.pool
            .write(move |tx| {
                let (org, u) = link_user(tx, LinkKind::Reset, &digest, now)?;
                let id = u.id;
                tx.prepare_cached(
                    "UPDATE users SET password_hash = ?1 WHERE id = ?2 AND org_id = ?3",
                )
                .and_then(|mut s| s.execute(params![hash, id.as_str(), org.as_str()]))
                .map_err(db_err)?;
                auth_state::use_link(tx, &digest, now)?;
                auth_state::delete_links(tx, LinkKind::Reset, &id)?;
                // D19: a reset ends the user's sessions and tokens.
                auth_state::revoke_user(tx, &id, now)?;
                // The user as updated, as a fresh read returns it.
                get_user_tx(tx, &org, &id)?.ok_or(StoreError::NotFound)
            })
            .await
    }

    async fn revocations_since(&self, after: i64, now: Timestamp) -> StoreResult<Vec<Revocation>> {
        self.pool
            .read(|c| {
                let mut s = c
                    .prepare_cached("SELECT id, kind, subject, cutoff, expires_at FROM revocations WHERE id > ?1 AND expires_at > ?2 ORDER BY id LIMIT 10000")
                    .map_err(db_err)?;
                let rows = s
                    .query_map(params![after, now.millis()], |r| {
                        Ok(Revocation {
                            id: r.get(0)?,
                            kind: decode(r, 1, ("revocations", "kind", &r.get::<_, i64>(0)?.to_string()), RevocationKind::parse)?,
                            subject: r.get(2)?,
                            cutoff: r.get(3)?,
                            expires_at: Timestamp::from_millis(r.get(4)?),
                        })
                    })
                    .map_err(db_err)?;
                rows.collect::<rusqlite::Result<Vec<_>>>().map_err(db_err)
            })
            .await
    }

    async fn insert_revocation(
        &self,
        kind: RevocationKind,
        subject: &str,
        cutoff: i64,
        expires_at: Timestamp,
    ) -> StoreResult<i64> {
        let subject = subject.to_owned();
        self.pool
            .write(move |tx| auth_state::insert_revocation(tx, kind, &subject, cutoff, expires_at))
            .await
    }

    async fn claim_outbox(
        &self,
        now: Timestamp,
        limit: u32,
        lease_ms: i64,
    ) -> StoreResult<Vec<OutboxMessage>> {
        self.pool
            .write(move |tx| {
                let mut s = tx
                    .prepare_cached(
                        "UPDATE outbox SET locked_until = ?1 + ?2, attempts = attempts + 1
                         WHERE id IN (SELECT id FROM outbox WHERE sent_at IS NULL AND next_attempt_at <= ?1 AND locked_until <= ?1 ORDER BY next_attempt_at, id LIMIT ?3)
                         RETURNING id, recipient, subject, body, attempts, created_at",
                    )
                    .map_err(db_err)?;
                let rows = s
                    .query_map(params![now.millis(), lease_ms, limit], |r| {
                        Ok(OutboxMessage {
                            id: r.get(0)?,
                            email: OutboundEmail { to: r.get(1)?, subject: r.get(2)?, body: r.get(3)? },
                            attempts: r.get::<_, i64>(4)? as u32,
                            created_at: Timestamp::from_millis(r.get(5)?),
                        })
                    })
                    .map_err(db_err)?;
                let mut v = rows.collect::<rusqlite::Result<Vec<_>>>().map_err(db_err)?;
                v.sort_by_key(|m| m.id);
                Ok(v)
            })
            .await
    }

    async fn outbox_sent(&self, id: i64, now: Timestamp) -> StoreResult<()> {
        self.pool
            .write(move |tx| {
                tx.prepare_cached("UPDATE outbox SET sent_at = ?2, locked_until = 0, last_error = NULL WHERE id = ?1")
                    .and_then(|mut s| s.execute(params![id, now.millis()]))
                    .map_err(db_err)?;
                Ok(())
            })
            .await
    }

    async fn outbox_failed(
        &self,
        id: i64,
        error: &str,
        next_attempt_at: Timestamp,
    ) -> StoreResult<()> {
        let error = error.chars().take(1000).collect::<String>();
        self.pool
            .write(move |tx| {
                tx.prepare_cached("UPDATE outbox SET last_error = ?2, next_attempt_at = ?3, locked_until = 0 WHERE id = ?1")
                    .and_then(|mut s| s.execute(params![id, error, next_attempt_at.millis()]))
                    .map_err(db_err)?;
                Ok(())
            })
            .await
    }

    async fn outbox_backlog(&self) -> StoreResult<u64> {
        self.pool
            .read(|c| count(c, "SELECT count(*) FROM outbox WHERE sent_at IS NULL", &[]))
            .await
    }

    async fn create_session(&self, digest: &[u8; 32], sess: &Session) -> StoreResult<()> {
        let (digest, sess) = (*digest, sess.clone());
        self.pool
            .write(move |tx| {
                tx.prepare_cached("INSERT INTO sessions (digest, org_id, user_id, created_at, expires_at) VALUES (?1, ?2, ?3, ?4, ?5)")
                    .and_then(|mut s| s.execute(params![digest.to_vec(), sess.org.as_str(), sess.user.as_str(), sess.created_at.millis(), sess.expires_at.millis()]))
                    .map_err(db_err)?;
                Ok(())
            })
            .await
    }

    async fn find_session(&self, digest: &[u8; 32]) -> StoreResult<Option<Session>> {
        self.pool
            .read(|c| {
                c.prepare_cached("SELECT org_id, user_id, created_at, expires_at FROM sessions WHERE digest = ?1")
                    .and_then(|mut s| {
                        s.query_row([digest.to_vec()], |r| {
                            Ok(Session {
                                org: OrgId::from_trusted(r.get(0)?),
                                user: UserId::from_trusted(r.get(1)?),
                                created_at: Timestamp::from_millis(r.get(2)?),
                                expires_at: Timestamp::from_millis(r.get(3)?),
                            })
                        })
                        .optional()
                    })
                    .map_err(db_err)
            })
            .await
    }

    async fn delete_session(&self, digest: &[u8; 32]) -> StoreResult<()> {
        let digest = *digest;
        self.pool
            .write(move |tx| {
                tx.prepare_cached("DELETE FROM sessions WHERE digest = ?1")
                    .and_then(|mut s| s.execute([digest.to_vec()]))
                    .map_err(db_err)?;
                Ok(())
            })
            .await
    }

    async fn record_login_failure(
        &self,
        org: &OrgId,
        email_norm: &str,
        source: &str,
        at: Timestamp,
    ) -> StoreResult<()> {
        let (org, email, source) = (org.clone(), email_norm.to_owned(), source.to_owned());
        self.pool
            .write(move |tx| {
                tx.prepare_cached("INSERT INTO login_failures (org_id, email_norm, source, at) VALUES (?1, ?2, ?3, ?4)")
                    .and_then(|mut s| s.execute(params![org.as_str(), email, source, at.millis()]))
                    .map_err(db_err)?;
                Ok(())
            })
            .await
    }

    async fn login_failures(
        &self,
        org: &OrgId,
        email_norm: &str,
        since: Timestamp,
    ) -> StoreResult<Vec<(String, Timestamp)>> {
        self.pool
            .read(|c| {
                let mut s = c
                    .prepare_cached("SELECT source, at FROM login_failures WHERE org_id = ?1 AND email_norm = ?2 AND at >= ?3 ORDER BY at LIMIT 5000")
                    .map_err(db_err)?;
                let rows = s
                    .query_map(params![org.as_str(), email_norm, since.millis()], |r| Ok((r.get(0)?, Timestamp::from_millis(r.get(1)?))))
                    .map_err(db_err)?;
                rows.collect::<rusqlite::Result<Vec<_>>>().map_err(db_err)
            })
            .await
    }

    async fn insert_auth_code(&self, code: &AuthCode) -> StoreResult<()> {
        let code = code.clone();
        self.pool
            .write(move |tx| {
                tx.prepare_cached(&format!("INSERT INTO auth_codes ({}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)", auth_state::CODE_COLS))
                    .and_then(|mut s| {
                        s.execute(params![
                            code.digest.to_vec(),
                            code.org.as_str(),
                            code.client.as_str(),
                            code.user.as_str(),
                            code.redirect_uri,
                            code.scopes.bits() as i64,
                            code.code_challenge,
                            code.created_at.millis(),
                            code.expires_at.millis(),
                            code.used_at.map(Timestamp::millis),
                            code.chain
                        ])
                    })
                    .map_err(db_err)?;
                Ok(())
            })
            .await
    }

    async fn find_auth_code(&self, digest: &[u8; 32]) -> StoreResult<Option<AuthCode>> {
        self.pool
            .read(|c| {
                c.prepare_cached(&format!(
                    "SELECT {} FROM auth_codes WHERE digest = ?1",
                    auth_state::CODE_COLS
                ))
                .and_then(|mut s| {
                    s.query_row([digest.to_vec()], auth_state::code_row)
                        .optional()
                })
                .map_err(db_err)
            })
            .await
    }

    async fn redeem_auth_code(
        &self,
        digest: &[u8; 32],
        now: Timestamp,
        chain: &RefreshChain,
        token: &RefreshToken,
    ) -> StoreResult<Redeemed> {
        let (digest, chain, token) = (*digest, chain.clone(), token.clone());
        self.pool
            .write(move |tx| {
                let won = tx
                    .prepare_cached("UPDATE auth_codes SET used_at = ?2, chain_id = ?3 WHERE digest = ?1 AND used_at IS NULL")
                    .and_then(|mut s| s.execute(params![digest.to_vec(), now.millis(), chain.id]))
                    .map_err(db_err)?;
                if won == 0 {
                    let previous: Option<Option<String>> = tx
                        .prepare_cached("SELECT chain_id FROM auth_codes WHERE digest = ?1")
                        .and_then(|mut s| s.query_row([digest.to_vec()], |r| r.get(0)).optional())
                        .map_err(db_err)?;
                    return Ok(Redeemed::Reused(previous.flatten()));
                }
                auth_state::insert_chain(tx, &chain)?;
                auth_state::insert_token(tx, &token)?;
                Ok(Redeemed::Fresh)
            })
            .await
    }

    async fn find_refresh_token(
        &self,
        digest: &[u8; 32],
    ) -> StoreResult<Option<(RefreshToken, RefreshChain)>> {
        self.pool
            .read(|c| {
                let sql = "SELECT t.digest, t.chain_id, t.issued_at, t.expires_at, t.used_at, t.successor_sealed, t.successor_until, t.access_jti,
                            c.id, c.org_id, c.client_id, c.user_id, c.scopes, c.created_at, c.ends_at, c.revoked_at
                     FROM refresh_tokens t JOIN refresh_chains c ON c.id = t.chain_id WHERE t.digest = ?1";
                c.prepare_cached(sql)
                    .and_then(|mut s| s.query_row([digest.to_vec()], |r| Ok((auth_state::token_row(r)?, auth_state::chain_row(r, 8)?))).optional())
                    .map_err(db_err)
            })
            .await
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
        let (digest, client, sealed, successor) = (
            *digest,
            client.clone(),
            successor_sealed.to_vec(),
            successor.clone(),
        );
        self.pool
            .write(move |tx| {
                // Another client's token is as good as unknown: nothing is
                // read back for it, nothing written.
                let owner: Option<String> = tx
                    .prepare_cached(
                        "SELECT c.client_id FROM refresh_tokens t JOIN refresh_chains c ON c.id = t.chain_id
                         WHERE t.digest = ?1",
                    )
                    .and_then(|mut s| s.query_row([digest.to_vec()], |r| r.get(0)).optional())
                    .map_err(db_err)?;
                if owner.as_deref() != Some(client.as_str()) {
                    return Err(StoreError::NotFound);
                }
                // The conditional update is the whole race: exactly one caller sees a row.
                let won: Option<Option<String>> = tx
                    .prepare_cached(
                        "UPDATE refresh_tokens SET used_at = ?2, successor_sealed = ?3, successor_until = ?4
                         WHERE digest = ?1 AND used_at IS NULL
                           AND EXISTS (SELECT 1 FROM refresh_chains c
                                       WHERE c.id = refresh_tokens.chain_id AND c.revoked_at IS NULL)
                         RETURNING access_jti",
                    )
                    .and_then(|mut s| {
                        s.query_row(params![digest.to_vec(), now.millis(), sealed, successor_until.millis()], |r| r.get(0))
                            .optional()
                    })
                    .map_err(db_err)?;
                if let Some(jti) = won {
                    auth_state::insert_token(tx, &successor)?;
                    // D24: the access token issued with the used refresh token
                    // dies in the same transaction.
                    let revoked = match jti {
                        Some(jti) => {
                            let cutoff = now.unix_seconds();
                            let id = auth_state::insert_revocation(tx, RevocationKind::Jti, &jti, cutoff, access_expiry)?;
                            Some(Revocation { id, kind: RevocationKind::Jti, subject: jti, cutoff, expires_at: access_expiry })
                        }
                        None => None,
                    };
                    return Ok(Rotated::Fresh(revoked));
                }
                let current = tx
                    .prepare_cached(&format!("SELECT {} FROM refresh_tokens WHERE digest = ?1", auth_state::TOKEN_COLS))
                    .and_then(|mut s| s.query_row([digest.to_vec()], auth_state::token_row).optional())
                    .map_err(db_err)?
                    .ok_or(StoreError::NotFound)?;
                Ok(Rotated::AlreadyUsed(current))
            })
            .await
    }

    async fn revoke_chain(
        &self,
        chain: &str,
        now: Timestamp,
        access_expiry: Timestamp,
    ) -> StoreResult<()> {
        let chain = chain.to_owned();
        self.pool
            .write(move |tx| auth_state::revoke_chain(tx, &chain, now, access_expiry))
            .await
    }

    async fn erase_expired_successors(&self, now: Timestamp) -> StoreResult<u64> {
        self.pool
            .write(move |tx| {
                let n = tx
                    .prepare_cached("UPDATE refresh_tokens SET successor_sealed = NULL, successor_until = NULL WHERE successor_until IS NOT NULL AND successor_until <= ?1")
                    .and_then(|mut s| s.execute([now.millis()]))
                    .map_err(db_err)?;
                Ok(n as u64)
            })
            .await
    }

    async fn purge_expired(&self, now: Timestamp, batch: u32) -> StoreResult<u64> {
        self.pool
            .write(move |tx| auth_state::purge(tx, now, batch))
            .await
    }

    async fn rotate_client_secret(
        &self,
        org: &OrgId,
        id: &ClientId,
        secret_hash: &[u8; 32],
        previous_until: Option<Timestamp>,
    ) -> StoreResult<Client> {
        let (org, id, hash) = (org.clone(), id.clone(), *secret_hash);
        self.pool
            .write(move |tx| {
                let n = tx
                    .prepare_cached(
                        "UPDATE clients SET
                            previous_secret_hash = CASE WHEN ?3 IS NULL THEN NULL ELSE secret_hash END,
                            previous_secret_until = ?3,
                            secret_hash = ?4
                         WHERE id = ?1 AND org_id = ?2 AND secret_hash IS NOT NULL",
                    )
                    .and_then(|mut s| s.execute(params![id.as_str(), org.as_str(), previous_until.map(Timestamp::millis), hash.to_vec()]))
                    .map_err(db_err)?;
                if n == 0 {
                    return Err(StoreError::NotFound);
                }
                tx.prepare_cached(&format!("SELECT {CLIENT_COLS} FROM clients WHERE id = ?1"))
                    .and_then(|mut s| s.query_row([id.as_str()], client_row))
                    .map_err(db_err)
            })
            .await
    }

    async fn signing_keys(&self) -> StoreResult<Vec<SigningKeyRecord>> {
        self.pool
            .read(|c| {
                let mut s = c
                    .prepare_cached("SELECT kid, private_key_encrypted, public_key, created_at, activates_at, expires_at FROM signing_keys ORDER BY created_at, kid")
                    .map_err(db_err)?;
                let rows = s
                    .query_map([], |r| {
                        Ok(SigningKeyRecord {
                            kid: r.get(0)?,
                            private_key_encrypted: r.get(1)?,
                            public_key: r.get(2)?,
                            created_at: Timestamp::from_millis(r.get(3)?),
                            activates_at: Timestamp::from_millis(r.get(4)?),
                            expires_at: r.get::<_, Option<i64>>(5)?.map(Timestamp::from_millis),
                        })
                    })
                    .map_err(db_err)?;
                rows.collect::<rusqlite::Result<Vec<_>>>().map_err(db_err)
            })
            .await
    }

    async fn insert_signing_key(&self, k: &SigningKeyRecord) -> StoreResult<()> {
        let k = k.clone();
        self.pool
            .write(move |tx| {
                tx.execute(
                    "INSERT INTO signing_keys (kid, private_key_encrypted, public_key, created_at, activates_at, expires_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                    params![k.kid, k.private_key_encrypted, k.public_key, k.created_at.millis(), k.activates_at.millis(), k.expires_at.map(Timestamp::millis)],
                )
                .map_err(db_err)?;
                Ok(())
            })
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
    use gatehouse_store::{Store, StoreError};
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
