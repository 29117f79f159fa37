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
    search_page_from(c, table, &[], cols, w, page, map)
}

/// [`search_page`] over `from` (a table, or a join whose first parameters
/// are `from_params`).
fn search_page_from<T>(
    c: &Connection,
    from: &str,
    from_params: &[rusqlite::types::Value],
    cols: &str,
    w: &Where,
    page: Page,
    map: fn(&Row<'_>) -> rusqlite::Result<T>,
) -> StoreResult<Listing<T>> {
    let sql = format!(
        "SELECT {cols}, count(*) OVER () FROM {from} WHERE {} ORDER BY created_at DESC, id DESC LIMIT {} OFFSET {}",
        w.sql,
        page.limit,
        page.offset.min(i64::MAX as u64)
    );
    let params: Vec<_> = from_params.iter().chain(w.params.iter()).collect();
    let n = cols.split(',').count();
    let mut stmt = c.prepare_cached(&sql).map_err(db_err)?;
    let mut total = None;
    let rows = stmt
        .query_map(rusqlite::params_from_iter(params.iter()), |r| {
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
        None => {
            let mut stmt = c
                .prepare_cached(&format!("SELECT count(*) FROM {from} WHERE {}", w.sql))
                .map_err(db_err)?;
            stmt.query_row(rusqlite::params_from_iter(params.iter()), |r| {
                r.get::<_, i64>(0)
            })
            .map(|n| n.max(0) as u64)
            .map_err(db_err)?
        }
    };
    Ok(Listing { items, total })
}

/// Above this many rows under the equality filters (the organization, role,
/// status: known in O(1) from the counters), a full-text search is driven
/// by the full-text index: its matches are read from `*_fts`, each joined
/// to its row by `seq` and filtered, and only the matches are sorted into
/// list order. At or below it, the filtered rows are walked in list order
/// through their index and each is checked against the full-text matches
/// (what SQLite chooses by itself for `seq IN (SELECT rowid FROM …_fts …)`),
/// which is cheaper when the organization or the filter is small, however
/// many rows of other organizations match. Both plans return the same rows.
pub(crate) const FTS_DRIVES_ABOVE: u64 = 20_000;

/// A search page driven by the full-text index (see [`FTS_DRIVES_ABOVE`]):
/// `CROSS JOIN` keeps the index's matches as the outer loop.
#[allow(clippy::too_many_arguments)]
fn fts_driven_page<T>(
    c: &Connection,
    table: &str,
    fts: &str,
    query: String,
    cols: &str,
    w: &Where,
    page: Page,
    map: fn(&Row<'_>) -> rusqlite::Result<T>,
) -> StoreResult<Listing<T>> {
    let from = format!(
        "(SELECT rowid AS fts_seq FROM {fts} WHERE {fts} MATCH ?) AS fts_hits CROSS JOIN {table} ON {table}.seq = fts_hits.fts_seq"
    );
    search_page_from(c, &from, &[query.into()], cols, w, page, map)
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
    list_users_with(c, org, f, page, FTS_DRIVES_ABOVE)
}

/// [`list_users_sync`] with the plan's threshold as a parameter (the tests
/// run both plans on the same rows).
fn list_users_with(
    c: &Connection,
    org: &OrgId,
    f: &UserFilter,
    page: Page,
    fts_drives_above: u64,
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
    if !q.matches_nothing() && q.as_str().chars().count() >= 3 {
        let rows = count(
            c,
            &format!(
                "SELECT coalesce(sum(n), 0) FROM user_counts WHERE {}",
                w.sql
            ),
            &w.params,
        )?;
        if rows > fts_drives_above {
            let query = fts_phrase(q.as_str());
            return fts_driven_page(
                c,
                "users",
                "users_fts",
                query,
                USER_COLS,
                &w,
                page,
                user_row,
            );
        }
    }
    and_user_search(&mut w, q);
    search_page(c, "users", USER_COLS, &w, page, user_row)
}

pub(crate) fn list_products_sync(
    c: &Connection,
    org: &OrgId,
    f: &ProductFilter,
    page: Page,
) -> StoreResult<Listing<Product>> {
    list_products_with(c, org, f, page, FTS_DRIVES_ABOVE)
}

/// [`list_products_sync`] with the plan's threshold as a parameter.
fn list_products_with(
    c: &Connection,
    org: &OrgId,
    f: &ProductFilter,
    page: Page,
    fts_drives_above: u64,
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
    let rows = count(
        c,
        &format!(
            "SELECT coalesce(sum(n), 0) FROM product_counts WHERE {}",
            w.sql
        ),
        &w.params,
    )?;
    if rows > fts_drives_above {
        return fts_driven_page(
            c,
            "products",
            "products_fts",
            query,
            PRODUCT_COLS,
            &w,
            page,
            product_row,
        );
    }
    w.and(
        "seq IN (SELECT rowid FROM products_fts WHERE products_fts MATCH ?)",
        [query.into()],
    );
    search_page(c, "products", PRODUCT_COLS, &w, page, product_row)
}

#[cfg(test)]
mod tests {
    use gatehouse_domain::{Organization, Plan, Timestamp};
    use gatehouse_store::prelude::*;

    use super::*;
    use crate::SqliteStore;

    /// Both plans of a full-text search (walk the list index and probe the
    /// matches, or read the matches and sort them) return the same pages and
    /// totals: other organizations' matches excluded, filters applied, ties
    /// of `created_at` and `seq` orders unlike the list order included.
    #[tokio::test]
    async fn both_search_plans_return_the_same_pages() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("gatehouse.db");
        let orgs: Vec<Organization> = (0..2)
            .map(|_| Organization {
                id: OrgId::generate(),
                name: "Acme".into(),
                plan: Plan::Free,
                per_minute: None,
                per_second: None,
                created_at: Timestamp::now(),
            })
            .collect();
        {
            let store = SqliteStore::open(&db).unwrap();
            for o in &orgs {
                store.create_org(o).await.unwrap();
            }
        }
        let c = Connection::open(&db).unwrap();
        let names = [
            "Grace Hopper",
            "Ada Lovelace",
            "Hop Along",
            "Ana 100% \"x\"",
            "Ed_ward",
        ];
        let roles = ["admin", "editor", "viewer"];
        let statuses = ["active", "inactive", "pending_invite"];
        for i in 0..400i64 {
            let org = orgs[(i % 5 == 0) as usize].id.as_str();
            let email = format!("u.{i}@{}.example", ["hop", "mail", "ada"][(i % 3) as usize]);
            // `created_at` goes down and repeats while `seq` goes up.
            let at = 10_000 - (i / 3) * ((i % 2) * 2 - 1);
            c.execute(
                "INSERT INTO users (id, org_id, email, email_norm, name, role, status, created_at, updated_at)
                 VALUES (?1, ?2, ?3, ?3, ?4, ?5, ?6, ?7, ?7)",
                params![
                    format!("usr_{:x}", (i * 7919) % 1000),
                    org,
                    email,
                    names[(i % 5) as usize],
                    roles[(i % 3) as usize],
                    statuses[(i / 3 % 3) as usize],
                    at
                ],
            )
            .unwrap();
            c.execute(
                "INSERT INTO products (id, org_id, name, sku, price, stock, status, created_at, updated_at)
                 VALUES (?1, ?2, ?3, ?4, 1, ?5, ?6, ?7, ?7)",
                params![
                    format!("prod_{:x}", (i * 7919) % 1000),
                    org,
                    format!("{} Shirt", ["Blue", "Red", "Blueish"][(i % 3) as usize]),
                    format!("SKU-{i}"),
                    i % 4,
                    if i % 4 == 0 { "out_of_stock" } else { "available" },
                    at
                ],
            )
            .unwrap();
        }
        let pages = [(20, 0), (7, 5), (100, 60), (5, 1000)];
        for org in &orgs {
            for q in [
                "hop", "ada", "100%", "\"x\"", "d_w", "zzz", ".12@", "ho\u{1}p",
            ] {
                for role in [None, Some(Role::Admin)] {
                    for status in [None, Some(UserStatus::Inactive)] {
                        let f = UserFilter {
                            role,
                            status,
                            q: SearchText::parse(q).unwrap(),
                        };
                        for (limit, offset) in pages {
                            let page = Page { limit, offset };
                            let walk = list_users_with(&c, &org.id, &f, page, u64::MAX).unwrap();
                            let fts = list_users_with(&c, &org.id, &f, page, 0).unwrap();
                            let ids = |l: &Listing<User>| {
                                l.items.iter().map(|u| u.id.to_string()).collect::<Vec<_>>()
                            };
                            assert_eq!(ids(&walk), ids(&fts), "{q} {role:?} {status:?} {page:?}");
                            assert_eq!(walk.total, fts.total, "{q} {role:?} {status:?}");
                        }
                    }
                }
            }
            for q in ["blue", "blue sh", "sku 1", "re", "zzz"] {
                for status in [None, Some(ProductStatus::OutOfStock)] {
                    let f = ProductFilter {
                        status,
                        q: SearchText::parse(q).unwrap(),
                    };
                    for (limit, offset) in pages {
                        let page = Page { limit, offset };
                        let walk = list_products_with(&c, &org.id, &f, page, u64::MAX).unwrap();
                        let fts = list_products_with(&c, &org.id, &f, page, 0).unwrap();
                        let ids = |l: &Listing<Product>| {
                            l.items.iter().map(|p| p.id.to_string()).collect::<Vec<_>>()
                        };
                        assert_eq!(ids(&walk), ids(&fts), "{q} {status:?} {page:?}");
                        assert_eq!(walk.total, fts.total, "{q} {status:?}");
                        if offset == 0 && q == "blue" && status.is_none() {
                            assert!(walk.total > 0);
                        }
                    }
                }
            }
        }
    }
}
