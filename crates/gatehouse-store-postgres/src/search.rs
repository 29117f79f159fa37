//! PostgreSQL: what the search index reads (issue 16). The trigger of
//! migration 12 records every change with its transaction's id; a mark is
//! the oldest transaction still running when the reader looked, so a change
//! committed later (by a transaction that was running, or began after) is
//! at or above it and is read next time.

use gatehouse_domain::search::{SearchKind, SearchRow};
use gatehouse_store::{SearchChanges, SearchStore};

use super::*;
use crate::rows::{PRODUCT_COLS, RowResult, corrupt, product_row, user_row};

fn kind_code(kind: SearchKind) -> i16 {
    match kind {
        SearchKind::Users => 0,
        SearchKind::Products => 1,
    }
}

const MARK: &str = "pg_snapshot_xmin(pg_current_snapshot())::text::bigint";

fn search_row(kind: SearchKind, r: &sqlx_postgres::PgRow) -> RowResult<SearchRow> {
    let id: String = r.try_get(1)?;
    let codes: [Option<&str>; 2] = [
        r.try_get(4)?,
        match kind {
            SearchKind::Users => r.try_get(5)?,
            SearchKind::Products => None,
        },
    ];
    gatehouse_store::indexed_row(
        kind,
        (r.try_get(0)?, id.clone()),
        (r.try_get(2)?, r.try_get(3)?),
        codes,
    )
    .map_err(|(column, text)| corrupt(kind.as_str(), column, &id, &format!("holds {text:?}")))
}

#[async_trait]
impl SearchStore for PgStore {
    async fn search_mark(&self) -> StoreResult<i64> {
        query_scalar(&format!("SELECT {MARK}"))
            .fetch_one(&self.pool)
            .await
            .map_err(db_err)
    }

    async fn search_rows(&self, org: &OrgId, kind: SearchKind) -> StoreResult<Vec<SearchRow>> {
        let sql = match kind {
            SearchKind::Users => {
                "SELECT created_at, id, name, email, role, status FROM users
                 WHERE org_id = $1 ORDER BY created_at DESC, id DESC"
            }
            SearchKind::Products => {
                "SELECT created_at, id, name, sku, status FROM products
                 WHERE org_id = $1 ORDER BY created_at DESC, id DESC"
            }
        };
        let rows = query(sql)
            .bind(org.as_str())
            .fetch_all(&self.pool)
            .await
            .map_err(db_err)?;
        rows.iter()
            .map(|r| search_row(kind, r))
            .collect::<Result<Vec<_>, _>>()
            .map_err(db_err)
    }

    async fn search_changes(
        &self,
        org: &OrgId,
        kind: SearchKind,
        since: i64,
    ) -> StoreResult<SearchChanges> {
        // One statement, one snapshot: the mark and the changes it covers.
        let rows = query(&format!(
            "SELECT {MARK}, c.created_at, c.item_id
             FROM (SELECT 1) AS one
             LEFT JOIN search_changes c
               ON c.org_id = $1 AND c.kind = $2 AND c.xid >= $3::text::xid8"
        ))
        .bind(org.as_str())
        .bind(kind_code(kind))
        .bind(since.to_string())
        .fetch_all(&self.pool)
        .await
        .map_err(db_err)?;
        let mut out = SearchChanges {
            mark: since,
            changed: Vec::with_capacity(rows.len()),
        };
        for r in &rows {
            out.mark = r.try_get(0).map_err(db_err)?;
            let at: Option<i64> = r.try_get(1).map_err(db_err)?;
            let id: Option<String> = r.try_get(2).map_err(db_err)?;
            if let (Some(at), Some(id)) = (at, id) {
                out.changed.push((at, id));
            }
        }
        Ok(out)
    }

    async fn users_by_ids(&self, org: &OrgId, ids: &[String]) -> StoreResult<Vec<User>> {
        self.by_ids(("users", USER_COLS), org, ids, user_row).await
    }

    async fn products_by_ids(&self, org: &OrgId, ids: &[String]) -> StoreResult<Vec<Product>> {
        self.by_ids(("products", PRODUCT_COLS), org, ids, product_row)
            .await
    }

    async fn prune_search_changes(&self, before: Timestamp) -> StoreResult<u64> {
        query("DELETE FROM search_changes WHERE at < to_timestamp($1::double precision / 1000)")
            .bind(before.millis())
            .execute(&self.pool)
            .await
            .map(|r| r.rows_affected())
            .map_err(db_err)
    }
}

impl PgStore {
    /// The rows of `table` with these ids in the organization.
    async fn by_ids<T>(
        &self,
        (table, cols): (&str, &str),
        org: &OrgId,
        ids: &[String],
        map: fn(&sqlx_postgres::PgRow) -> RowResult<T>,
    ) -> StoreResult<Vec<T>> {
        let rows = query(&format!(
            "SELECT {cols} FROM {table} WHERE org_id = $1 AND id = ANY($2)"
        ))
        .bind(org.as_str())
        .bind(ids)
        .fetch_all(&self.pool)
        .await
        .map_err(db_err)?;
        rows.iter()
            .map(map)
            .collect::<RowResult<Vec<_>>>()
            .map_err(db_err)
    }
}
