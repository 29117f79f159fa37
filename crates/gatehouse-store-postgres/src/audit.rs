//! PostgreSQL: the audit log (D58). Entries are written unsealed with the
//! change they record, each with a ticket from the events' ticket sequence
//! (migration 27), drawn after the transaction has its id (the change's
//! events are written first; a lone entry uses the events' one-time
//! filter). The events' sequencer's high-water mark
//! (`event_progress.done_ticket`) is then also the entries' one: every
//! ticket at or below it belongs to a finished transaction, so the sealer
//! seals the entries up to it in ticket order, which no later commit can
//! precede. The triggers of migration 27 allow no other UPDATE than the
//! seal and no DELETE but the purge's.

use gatehouse_domain::audit::{Category, Entry};
use gatehouse_store::{
    AUDIT_COLS, AuditFilter, AuditRow, AuditStore, CHECKPOINT_COLS, ChainHead, CheckpointRecord,
    EventParam, Seal, SealedEntry, Unsealed, audit_where, decode_audit, decode_checkpoint,
};
use sqlx_postgres::{PgArguments, PgRow, Postgres};

use super::*;
use crate::rows::{RowResult, corrupt};
use crate::{TxResult, snapshot_read, typed, write_tx};

/// One entry, unsealed, in the caller's transaction. The one-time filter
/// makes sure the transaction has its id before the ticket is drawn, as
/// the events' insert does (`events::INSERT_ONE`).
const INSERT: &str = "INSERT INTO audit_entries (id, org_id, category, created_at, action,
         outcome, actor_type, actor_id, target_type, target_id, source_ip, body)
     SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12
     FROM (SELECT pg_current_xact_id() AS xid) AS xid_first
     WHERE xid_first.xid IS NOT NULL";

/// [`INSERT`] for several rows in one statement, in the order given
/// (`ORDER BY ord`: the `ticket` default is evaluated above the sort).
const INSERT_MANY: &str = "INSERT INTO audit_entries (id, org_id, category, created_at, action,
         outcome, actor_type, actor_id, target_type, target_id, source_ip, body)
     SELECT id, $1, category, created_at, action, outcome, actor_type, actor_id, target_type,
            target_id, source_ip, body
     FROM (SELECT pg_current_xact_id() AS xid) AS xid_first,
          unnest($2::text[], $3::text[], $4::bigint[], $5::text[], $6::text[], $7::text[],
                 $8::text[], $9::text[], $10::text[], $11::text[], $12::text[])
          WITH ORDINALITY
          AS a(id, category, created_at, action, outcome, actor_type, actor_id, target_type,
               target_id, source_ip, body, ord)
     WHERE xid_first.xid IS NOT NULL
     ORDER BY ord";

/// Entries, unsealed, in the caller's transaction: one statement however
/// many (a change's cascade of events records one entry each).
pub(crate) async fn insert_audits(
    c: &mut PgConnection,
    org: &OrgId,
    rows: &[AuditRow],
) -> TxResult<()> {
    match rows {
        [] => Ok(()),
        [one] => insert_audit(c, org, one).await,
        many => {
            let col = |f: fn(&AuditRow) -> Option<String>| many.iter().map(f).collect::<Vec<_>>();
            query(INSERT_MANY)
                .bind(org.as_str())
                .bind(col(|r| Some(r.id.clone())))
                .bind(col(|r| Some(r.category.to_owned())))
                .bind(many.iter().map(|r| r.created_at).collect::<Vec<_>>())
                .bind(col(|r| Some(r.action.clone())))
                .bind(col(|r| Some(r.outcome.to_owned())))
                .bind(col(|r| Some(r.actor_type.to_owned())))
                .bind(col(|r| r.actor_id.clone()))
                .bind(col(|r| r.target_type.map(str::to_owned)))
                .bind(col(|r| r.target_id.clone()))
                .bind(col(|r| r.source_ip.clone()))
                .bind(col(|r| Some(r.body.clone())))
                .execute(&mut *c)
                .await?;
            Ok(())
        }
    }
}

pub(crate) async fn insert_audit(
    c: &mut PgConnection,
    org: &OrgId,
    row: &AuditRow,
) -> TxResult<()> {
    query(INSERT)
        .bind(&row.id)
        .bind(org.as_str())
        .bind(row.category)
        .bind(row.created_at)
        .bind(&row.action)
        .bind(row.outcome)
        .bind(row.actor_type)
        .bind(row.actor_id.as_deref())
        .bind(row.target_type)
        .bind(row.target_id.as_deref())
        .bind(row.source_ip.as_deref())
        .bind(&row.body)
        .execute(&mut *c)
        .await?;
    Ok(())
}

fn sealed_row(r: &PgRow) -> RowResult<SealedEntry> {
    let category: String = r.try_get(0)?;
    let sequence: Option<i64> = r.try_get(1)?;
    let hash: Option<String> = r.try_get(2)?;
    let body: String = r.try_get(3)?;
    decode_audit(&category, sequence, hash, body).map_err(|column| {
        corrupt(
            "audit_entries",
            column,
            &sequence.unwrap_or_default().to_string(),
            "cannot be read",
        )
    })
}

fn bound<'q>(
    sql: &'q str,
    params: &'q [EventParam],
) -> sqlx_core::query::Query<'q, Postgres, PgArguments> {
    params.iter().fold(query(sql), |q, p| match p {
        EventParam::Text(t) => q.bind(t.as_str()),
        EventParam::Int(i) => q.bind(*i),
    })
}

async fn listing(
    c: &mut PgConnection,
    w: &str,
    params: &[EventParam],
    order_and_page: &str,
) -> TxResult<Listing<SealedEntry>> {
    let count_sql = format!("SELECT count(*) FROM audit_entries WHERE {w}");
    let total: i64 = bound(&count_sql, params)
        .fetch_one(&mut *c)
        .await?
        .try_get(0)?;
    let sql = format!("SELECT {AUDIT_COLS} FROM audit_entries WHERE {w} {order_and_page}");
    let rows = bound(&sql, params).fetch_all(&mut *c).await?;
    Ok(Listing {
        items: rows.iter().map(sealed_row).collect::<RowResult<Vec<_>>>()?,
        total: total.max(0) as u64,
    })
}

/// A sequence as PostgreSQL's `bigint` (no chain comes near the limit).
fn clamp(sequence: u64) -> i64 {
    sequence.min(i64::MAX as u64) as i64
}

fn checkpoint_row(r: &PgRow) -> RowResult<CheckpointRecord> {
    let sequence: i64 = r.try_get(1)?;
    decode_checkpoint(
        &r.try_get::<String, _>(0)?,
        sequence,
        r.try_get(2)?,
        r.try_get(3)?,
        r.try_get(4)?,
        r.try_get(5)?,
    )
    .map_err(|column| {
        corrupt(
            "audit_checkpoints",
            column,
            &sequence.to_string(),
            "cannot be read",
        )
    })
}

#[async_trait]
impl AuditStore for PgStore {
    async fn record_audit(&self, org: &OrgId, entry: &Entry) -> StoreResult<()> {
        let row = AuditRow::of(entry);
        write_tx!(self, |tx| insert_audit(&mut tx, org, &row).await)
    }
    async fn unsealed_audit(&self, limit: u32) -> StoreResult<Vec<Unsealed>> {
        let rows: Vec<(String, String, String, String)> = query_as(
            "SELECT org_id, category, id, body FROM audit_entries
             WHERE sequence IS NULL AND ticket <= (SELECT done_ticket FROM event_progress)
             ORDER BY ticket LIMIT $1",
        )
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await
        .map_err(db_err)?;
        rows.into_iter()
            .map(|(org, category, id, body)| {
                let category = Category::parse(&category).ok_or_else(|| {
                    StoreError::Internal(format!("audit entry {id} has category {category:?}"))
                })?;
                Ok(Unsealed {
                    org: OrgId::from_trusted(org),
                    category,
                    id,
                    body,
                })
            })
            .collect()
    }
    async fn audit_chain_head(
        &self,
        org: &OrgId,
        category: Category,
    ) -> StoreResult<Option<ChainHead>> {
        let row: Option<(i64, String)> = query_as(
            "SELECT sequence, hash FROM audit_entries
             WHERE org_id = $1 AND category = $2 AND sequence IS NOT NULL
             ORDER BY sequence DESC LIMIT 1",
        )
        .bind(org.as_str())
        .bind(category.as_str())
        .fetch_optional(&self.pool)
        .await
        .map_err(db_err)?;
        Ok(row.map(|(sequence, hash)| ChainHead {
            sequence: sequence.max(0) as u64,
            hash,
        }))
    }
    async fn seal_audit(&self, seals: &[Seal]) -> StoreResult<()> {
        if seals.is_empty() {
            return Ok(());
        }
        let (mut ids, mut orgs, mut categories, mut sequences, mut hashes) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for s in seals {
            ids.push(s.id.as_str());
            orgs.push(s.org.as_str());
            categories.push(s.category.as_str());
            sequences.push(s.sequence.min(i64::MAX as u64) as i64);
            hashes.push(s.hash.as_str());
        }
        let expected = seals.len() as u64;
        write_tx!(self, |tx| {
            let n = query(
                "UPDATE audit_entries SET sequence = v.s, hash = v.h
                 FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::text[])
                      AS v(id, org, cat, s, h)
                 WHERE audit_entries.id = v.id AND audit_entries.org_id = v.org
                   AND audit_entries.category = v.cat AND audit_entries.sequence IS NULL",
            )
            .bind(&ids)
            .bind(&orgs)
            .bind(&categories)
            .bind(&sequences)
            .bind(&hashes)
            .execute(&mut *tx)
            .await?
            .rows_affected();
            if n != expected {
                return Err(TxError::Store(StoreError::Internal(format!(
                    "{} of {expected} audit entries were sealed already",
                    expected - n
                ))));
            }
            Ok(())
        })
    }
    async fn list_audit(
        &self,
        org: &OrgId,
        filter: &AuditFilter,
        page: Page,
    ) -> StoreResult<Listing<SealedEntry>> {
        let (w, params) = audit_where(org, filter, |n| format!("${n}"));
        let tail = format!(
            "ORDER BY created_at DESC, id DESC LIMIT {} OFFSET {}",
            page.limit,
            page.offset.min(i64::MAX as u64)
        );
        snapshot_read!(self, |c| listing(c, &w, &params, &tail).await)
    }
    async fn audit_after(
        &self,
        org: &OrgId,
        category: Category,
        filter: &AuditFilter,
        after: u64,
        limit: u32,
    ) -> StoreResult<Listing<SealedEntry>> {
        let filter = AuditFilter {
            category: Some(category),
            ..filter.clone()
        };
        let (w, mut params) = audit_where(org, &filter, |n| format!("${n}"));
        params.push(EventParam::Int(after.min(i64::MAX as u64) as i64));
        let w = format!("{w} AND sequence > ${}", params.len());
        let tail = format!("ORDER BY sequence LIMIT {limit}");
        snapshot_read!(self, |c| listing(c, &w, &params, &tail).await)
    }
    async fn audit_chain_page(
        &self,
        org: &OrgId,
        category: Category,
        filter: &AuditFilter,
        after: u64,
        limit: u32,
    ) -> StoreResult<Vec<SealedEntry>> {
        let filter = AuditFilter {
            category: Some(category),
            ..filter.clone()
        };
        let (w, mut params) = audit_where(org, &filter, |n| format!("${n}"));
        params.push(EventParam::Int(after.min(i64::MAX as u64) as i64));
        let sql = format!(
            "SELECT {AUDIT_COLS} FROM audit_entries WHERE {w} AND sequence > ${} ORDER BY sequence LIMIT {limit}",
            params.len()
        );
        let rows = bound(&sql, &params)
            .fetch_all(&self.pool)
            .await
            .map_err(db_err)?;
        rows.iter()
            .map(sealed_row)
            .collect::<RowResult<Vec<_>>>()
            .map_err(db_err)
    }
    async fn insert_checkpoint(
        &self,
        org: &OrgId,
        checkpoint: &CheckpointRecord,
        jwk: &str,
        event: &gatehouse_domain::event::NewEvent,
    ) -> StoreResult<bool> {
        let cp = checkpoint;
        write_tx!(self, |tx| {
            let n = query(
                "INSERT INTO audit_checkpoints (org_id, category, sequence, hash, kid, jws, signed_at)
                 VALUES ($1, $2, $3, $4, $5, $6, $7)
                 ON CONFLICT (org_id, category, sequence) DO NOTHING",
            )
            .bind(org.as_str())
            .bind(cp.category.as_str())
            .bind(cp.sequence.min(i64::MAX as u64) as i64)
            .bind(&cp.hash)
            .bind(&cp.kid)
            .bind(&cp.jws)
            .bind(cp.signed_at.millis())
            .execute(&mut *tx)
            .await?
            .rows_affected();
            if n == 0 {
                return Ok(false);
            }
            query("INSERT INTO audit_keys (kid, jwk) VALUES ($1, $2) ON CONFLICT (kid) DO NOTHING")
                .bind(&cp.kid)
                .bind(jwk)
                .execute(&mut *tx)
                .await?;
            crate::events::insert_events(&mut tx, org, &[std::borrow::Cow::Borrowed(event)])
                .await?;
            Ok(true)
        })
    }
    async fn checkpointed_chains(&self) -> StoreResult<Vec<(OrgId, CheckpointRecord)>> {
        let rows = query(&format!(
            "SELECT DISTINCT ON (org_id, category) {CHECKPOINT_COLS}, org_id
             FROM audit_checkpoints ORDER BY org_id, category, sequence DESC"
        ))
        .fetch_all(&self.pool)
        .await
        .map_err(db_err)?;
        rows.iter()
            .map(|r| {
                let cp = checkpoint_row(r).map_err(db_err)?;
                let org: String = r.try_get(6).map_err(db_err)?;
                let org = OrgId::parse(&org)
                    .ok_or_else(|| StoreError::Internal(format!("corrupt org id {org:?}")))?;
                Ok((org, cp))
            })
            .collect()
    }
    async fn checkpoint_at_or_below(
        &self,
        org: &OrgId,
        category: Category,
        sequence: u64,
    ) -> StoreResult<Option<CheckpointRecord>> {
        let row = query(&format!(
            "SELECT {CHECKPOINT_COLS} FROM audit_checkpoints
             WHERE org_id = $1 AND category = $2 AND sequence <= $3
             ORDER BY sequence DESC LIMIT 1"
        ))
        .bind(org.as_str())
        .bind(category.as_str())
        .bind(clamp(sequence))
        .fetch_optional(&self.pool)
        .await
        .map_err(db_err)?;
        row.map(|r| checkpoint_row(&r)).transpose().map_err(db_err)
    }
    async fn oldest_audit(&self, org: &OrgId, category: Category) -> StoreResult<Option<u64>> {
        let v: Option<i64> = query_scalar(
            "SELECT min(sequence) FROM audit_entries
             WHERE org_id = $1 AND category = $2 AND sequence IS NOT NULL",
        )
        .bind(org.as_str())
        .bind(category.as_str())
        .fetch_one(&self.pool)
        .await
        .map_err(db_err)?;
        Ok(v.map(|v| v.max(0) as u64))
    }
    async fn first_audit_since(
        &self,
        org: &OrgId,
        category: Category,
        cut: Timestamp,
    ) -> StoreResult<Option<u64>> {
        let v: Option<i64> = query_scalar(
            "SELECT sequence FROM audit_entries
             WHERE org_id = $1 AND category = $2 AND sequence IS NOT NULL AND created_at >= $3
             ORDER BY sequence LIMIT 1",
        )
        .bind(org.as_str())
        .bind(category.as_str())
        .bind(cut.millis())
        .fetch_optional(&self.pool)
        .await
        .map_err(db_err)?;
        Ok(v.map(|v| v.max(0) as u64))
    }
    async fn purge_audit(
        &self,
        org: &OrgId,
        category: Category,
        through: u64,
        limit: u32,
    ) -> StoreResult<u64> {
        write_tx!(self, |tx| {
            // The marker the trigger asks for, for this transaction only.
            query("SELECT set_config('gatehouse.audit_purge', 'on', true)")
                .execute(&mut *tx)
                .await?;
            let n = query(
                "DELETE FROM audit_entries WHERE id IN (
                     SELECT id FROM audit_entries
                     WHERE org_id = $1 AND category = $2
                       AND sequence IS NOT NULL AND sequence <= $3
                     ORDER BY sequence LIMIT $4)",
            )
            .bind(org.as_str())
            .bind(category.as_str())
            .bind(clamp(through))
            .bind(i64::from(limit))
            .execute(&mut *tx)
            .await?
            .rows_affected();
            Ok(n)
        })
    }
    async fn purge_checkpoints(
        &self,
        org: &OrgId,
        category: Category,
        below: u64,
    ) -> StoreResult<u64> {
        let n = query(
            "DELETE FROM audit_checkpoints WHERE org_id = $1 AND category = $2 AND sequence < $3",
        )
        .bind(org.as_str())
        .bind(category.as_str())
        .bind(clamp(below))
        .execute(&self.pool)
        .await
        .map_err(db_err)?
        .rows_affected();
        Ok(n)
    }
    async fn record_first_use(
        &self,
        org: &OrgId,
        credential: &str,
        period: i64,
        source: &str,
        entry: &Entry,
    ) -> StoreResult<bool> {
        let row = AuditRow::of(entry);
        write_tx!(self, |tx| {
            let n = query(
                "INSERT INTO audit_first_uses (org_id, credential, period, source)
                 VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING",
            )
            .bind(org.as_str())
            .bind(credential)
            .bind(period)
            .bind(source)
            .execute(&mut *tx)
            .await?
            .rows_affected();
            if n == 0 {
                return Ok(false);
            }
            insert_audit(&mut tx, org, &row).await?;
            Ok(true)
        })
    }
    async fn purge_first_uses(&self, period: i64) -> StoreResult<u64> {
        let n = query("DELETE FROM audit_first_uses WHERE period < $1")
            .bind(period)
            .execute(&self.pool)
            .await
            .map_err(db_err)?
            .rows_affected();
        Ok(n)
    }
    async fn list_checkpoints(
        &self,
        org: &OrgId,
        category: Option<Category>,
        page: Page,
    ) -> StoreResult<Listing<CheckpointRecord>> {
        let cat = category.map(Category::as_str);
        let total: i64 = query_scalar(
            "SELECT count(*) FROM audit_checkpoints
             WHERE org_id = $1 AND ($2::text IS NULL OR category = $2)",
        )
        .bind(org.as_str())
        .bind(cat)
        .fetch_one(&self.pool)
        .await
        .map_err(db_err)?;
        let rows = query(&format!(
            "SELECT {CHECKPOINT_COLS} FROM audit_checkpoints
             WHERE org_id = $1 AND ($2::text IS NULL OR category = $2)
             ORDER BY signed_at DESC, sequence DESC LIMIT {} OFFSET {}",
            page.limit,
            page.offset.min(i64::MAX as u64)
        ))
        .bind(org.as_str())
        .bind(cat)
        .fetch_all(&self.pool)
        .await
        .map_err(db_err)?;
        Ok(Listing {
            items: rows
                .iter()
                .map(checkpoint_row)
                .collect::<RowResult<Vec<_>>>()
                .map_err(db_err)?,
            total: total.max(0) as u64,
        })
    }
    async fn audit_jwks(&self) -> StoreResult<Vec<String>> {
        query_scalar(
            "SELECT jwk FROM audit_keys
             WHERE kid IN (SELECT kid FROM audit_checkpoints) ORDER BY kid",
        )
        .fetch_all(&self.pool)
        .await
        .map_err(db_err)
    }
}
