//! SQLite: what the search index reads (issue 16). The triggers of
//! migration 12 record every change in `search_changes`; SQLite serializes
//! writes, so a change's `seq` is also its commit order and a mark is the
//! highest `seq` seen.

use gatehouse_domain::search::{SearchKind, SearchRow};
use gatehouse_store::{SearchChanges, SearchStore};

use super::*;

fn kind_code(kind: SearchKind) -> i64 {
    match kind {
        SearchKind::Users => 0,
        SearchKind::Products => 1,
    }
}

fn search_row(kind: SearchKind, r: &Row<'_>) -> rusqlite::Result<SearchRow> {
    let head = (r.get(0)?, r.get::<_, String>(1)?);
    let cols: [String; 3] = [r.get(2)?, r.get(3)?, r.get(4)?];
    let second: Option<String> = if kind == SearchKind::Users {
        r.get(5)?
    } else {
        None
    };
    let id = head.1.clone();
    gatehouse_store::indexed_row(
        kind,
        head,
        (&cols[0], &cols[1]),
        [Some(&cols[2]), second.as_deref()],
    )
    .map_err(|(column, text)| corrupt(kind.as_str(), column, &id, &format!("holds {text:?}")))
}

/// The rows of `table` with these ids in the organization, in batches of
/// 100. `+org_id`: the ids are looked up through their unique index; the
/// organization's index would walk all its rows.
fn by_ids<T>(
    c: &Connection,
    (table, cols): (&str, &str),
    org: &OrgId,
    ids: &[String],
    map: fn(&Row<'_>) -> rusqlite::Result<T>,
) -> StoreResult<Vec<T>> {
    let mut out = Vec::with_capacity(ids.len());
    for batch in ids.chunks(100) {
        let mut stmt = c
            .prepare_cached(&format!(
                "SELECT {cols} FROM {table} WHERE +org_id = ? AND id IN ({})",
                placeholders(batch.len())
            ))
            .map_err(db_err)?;
        let params = std::iter::once(org.as_str()).chain(batch.iter().map(String::as_str));
        let rows = stmt
            .query_map(rusqlite::params_from_iter(params), map)
            .map_err(db_err)?;
        for row in rows {
            out.push(row.map_err(db_err)?);
        }
    }
    Ok(out)
}

/// `?, ?, …` for `n` parameters.
fn placeholders(n: usize) -> String {
    vec!["?"; n].join(", ")
}

#[async_trait]
impl SearchStore for SqliteStore {
    async fn search_mark(&self) -> StoreResult<i64> {
        self.pool
            .read(|c| {
                c.prepare_cached("SELECT coalesce(max(seq), 0) FROM search_changes")
                    .and_then(|mut s| s.query_row([], |r| r.get(0)))
                    .map_err(db_err)
            })
            .await
    }

    async fn search_rows(&self, org: &OrgId, kind: SearchKind) -> StoreResult<Vec<SearchRow>> {
        let org = org.clone();
        self.pool
            .read_blocking(move |c| {
                let sql = match kind {
                    SearchKind::Users => {
                        "SELECT created_at, id, name, email, role, status FROM users
                         WHERE org_id = ?1 ORDER BY created_at DESC, id DESC"
                    }
                    SearchKind::Products => {
                        "SELECT created_at, id, name, sku, status FROM products
                         WHERE org_id = ?1 ORDER BY created_at DESC, id DESC"
                    }
                };
                let mut stmt = c.prepare_cached(sql).map_err(db_err)?;
                let rows = stmt
                    .query_map([org.as_str()], |r| search_row(kind, r))
                    .map_err(db_err)?;
                rows.collect::<rusqlite::Result<Vec<_>>>().map_err(db_err)
            })
            .await
    }

    async fn search_changes(
        &self,
        org: &OrgId,
        kind: SearchKind,
        since: i64,
    ) -> StoreResult<SearchChanges> {
        let org = org.clone();
        self.pool
            .read(move |c| {
                let mut stmt = c
                    .prepare_cached(
                        "SELECT seq, created_at, item_id FROM search_changes
                         WHERE org_id = ?1 AND kind = ?2 AND seq > ?3 ORDER BY seq",
                    )
                    .map_err(db_err)?;
                let mut out = SearchChanges {
                    mark: since,
                    changed: Vec::new(),
                };
                let rows = stmt
                    .query_map(params![org.as_str(), kind_code(kind), since], |r| {
                        Ok((
                            r.get::<_, i64>(0)?,
                            r.get::<_, i64>(1)?,
                            r.get::<_, String>(2)?,
                        ))
                    })
                    .map_err(db_err)?;
                for row in rows {
                    let (seq, at, id) = row.map_err(db_err)?;
                    out.mark = out.mark.max(seq);
                    out.changed.push((at, id));
                }
                Ok(out)
            })
            .await
    }

    async fn users_by_ids(&self, org: &OrgId, ids: &[String]) -> StoreResult<Vec<User>> {
        let (org, ids) = (org.clone(), ids.to_vec());
        self.pool
            .read_blocking(move |c| by_ids(c, ("users", USER_COLS), &org, &ids, user_row))
            .await
    }

    async fn products_by_ids(&self, org: &OrgId, ids: &[String]) -> StoreResult<Vec<Product>> {
        let (org, ids) = (org.clone(), ids.to_vec());
        self.pool
            .read_blocking(move |c| by_ids(c, ("products", PRODUCT_COLS), &org, &ids, product_row))
            .await
    }

    async fn prune_search_changes(&self, before: Timestamp) -> StoreResult<u64> {
        let before = before.unix_seconds();
        self.pool
            .write(move |tx| {
                // Through `search_changes_by_at`: the prune holds the one
                // writer for the rows it deletes, not for a scan of the table.
                tx.prepare_cached("DELETE FROM search_changes WHERE at < ?1")
                    .and_then(|mut s| s.execute([before]))
                    .map(|n| n as u64)
                    .map_err(db_err)
            })
            .await
    }
}
