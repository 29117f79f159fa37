//! The list queries of users and products: equality filters, offset and
//! cursor pages (D14, D32). Storage does not search: `q` is answered by the
//! application's in-memory index (`gatehouse_app::search`).

use super::*;

/// A dynamic `WHERE` with its parameters.
pub(crate) struct Where {
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

pub(crate) fn run_list<T>(
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

pub(crate) fn count(
    c: &Connection,
    sql: &str,
    params: &[rusqlite::types::Value],
) -> StoreResult<u64> {
    let mut stmt = c.prepare_cached(sql).map_err(db_err)?;
    stmt.query_row(rusqlite::params_from_iter(params.iter()), |r| {
        r.get::<_, i64>(0)
    })
    .map(|n| n.max(0) as u64)
    .map_err(db_err)
}

/// The `WHERE` of a user list (its equality filters), without paging.
pub(crate) fn user_where(org: &OrgId, f: &UserFilter) -> Where {
    let mut w = Where::new(org);
    if let Some(role) = f.role {
        w.and("role = ?", [role.as_str().to_owned().into()]);
    }
    if let Some(status) = f.status {
        w.and("status = ?", [status.as_str().to_owned().into()]);
    }
    w
}

/// The `WHERE` of a product list (its equality filter), without paging.
pub(crate) fn product_where(org: &OrgId, f: &ProductFilter) -> Where {
    let mut w = Where::new(org);
    if let Some(status) = f.status {
        w.and("status = ?", [status.as_str().to_owned().into()]);
    }
    w
}

/// A page after a cursor row: rows strictly after (`created_at`, `id`) of `after`.
pub(crate) fn cursor_page<T>(
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

/// One page of a list and its exact total, from the counters the triggers
/// keep (D14): O(1), not a count of a million rows.
fn counted_page<T>(
    c: &Connection,
    (table, counts, cols): (&str, &str, &str),
    w: &Where,
    page: Page,
    map: fn(&Row<'_>) -> rusqlite::Result<T>,
) -> StoreResult<Listing<T>> {
    let total = count(
        c,
        &format!("SELECT coalesce(sum(n), 0) FROM {counts} WHERE {}", w.sql),
        &w.params,
    )?;
    let items = if page.offset >= total {
        Vec::new()
    } else {
        run_list(c, table, cols, w, page, map)?
    };
    Ok(Listing { items, total })
}

pub(crate) fn list_users_sync(
    c: &Connection,
    org: &OrgId,
    f: &UserFilter,
    page: Page,
) -> StoreResult<Listing<User>> {
    counted_page(
        c,
        ("users", "user_counts", USER_COLS),
        &user_where(org, f),
        page,
        user_row,
    )
}

pub(crate) fn list_products_sync(
    c: &Connection,
    org: &OrgId,
    f: &ProductFilter,
    page: Page,
) -> StoreResult<Listing<Product>> {
    counted_page(
        c,
        ("products", "product_counts", PRODUCT_COLS),
        &product_where(org, f),
        page,
        product_row,
    )
}
