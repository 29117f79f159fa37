//! The list queries of users and products: filters, offset and cursor pages
//! (D14, D17, D32).

use super::*;

/// An FTS5 phrase holding `text` literally.
pub(crate) fn fts_phrase(text: &str) -> String {
    format!("\"{}\"", text.replace('"', "\"\""))
}

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

/// One pass for a search: the page and the total of all matches, through
/// `count(*) OVER ()` (the matches are found once, not once for the page and
/// again for the count). An empty page past the end still needs a count.
pub(crate) fn search_page<T>(
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

/// D9, D14: `q` as a literal, case-insensitive substring of name or e-mail.
pub(crate) fn and_user_search(w: &mut Where, q: &SearchText) {
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
pub(crate) fn user_where(org: &OrgId, f: &UserFilter) -> Where {
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
pub(crate) fn product_where(org: &OrgId, f: &ProductFilter) -> Where {
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

pub(crate) fn list_users_sync(
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

pub(crate) fn list_products_sync(
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
