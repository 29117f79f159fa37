//! SQLite: the audit log (D58). Entries are written with the change they
//! record; SQLite's one writer commits in the order it writes, so an entry
//! is sealed in its own INSERT when the binary gave the store the chain
//! seal, and otherwise written unsealed and sealed by the sealer in `rowid`
//! order. The triggers of migration 23 allow no other UPDATE than the seal
//! and no DELETE but the purge's.

use gatehouse_domain::audit::{Category, Entry};
use gatehouse_store::{
    AUDIT_COLS, AuditFilter, AuditRow, AuditStore, CHECKPOINT_COLS, ChainHead, CheckpointRecord,
    EventParam, Seal, SealedEntry, Unsealed, audit_where, decode_audit, decode_checkpoint,
};
use rusqlite::types::Value;

use super::*;
use crate::lists::count;
use crate::pool::WriteTx;
use crate::rows::corrupt;

/// Writes one entry inside the caller's transaction: sealed at once when
/// the store seals at insert ([`crate::SqliteStore::sealing_audit_at_insert`])
/// and its chain has nothing unsealed, else unsealed, for the sealer.
pub(crate) fn insert_audit(c: &WriteTx<'_, '_>, org: &OrgId, row: &AuditRow) -> StoreResult<()> {
    let (sequence, hash) = match c.chain_seal() {
        Some(seal) => match seal_now(c, org, row, seal)? {
            Some((sequence, hash)) => (Some(sequence), Some(hash)),
            None => (None, None),
        },
        None => (None, None),
    };
    c.prepare_cached(
        "INSERT INTO audit_entries (id, org_id, category, created_at, action, outcome,
                                    actor_type, actor_id, target_type, target_id, source_ip, body,
                                    sequence, hash)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)",
    )
    .and_then(|mut s| {
        s.execute(params![
            row.id,
            org.as_str(),
            row.category,
            row.created_at,
            row.action,
            row.outcome,
            row.actor_type,
            row.actor_id,
            row.target_type,
            row.target_id,
            row.source_ip,
            row.body,
            sequence,
            hash,
        ])
    })
    .map_err(db_err)?;
    if sequence == Some(1) {
        // The chain's first entry: the sealer makes its first checkpoint
        // (D58), and any checkpoint of the chain clears this.
        c.prepare_cached(
            "INSERT INTO audit_awaiting_checkpoint (org_id, category) VALUES (?1, ?2)
             ON CONFLICT DO NOTHING",
        )
        .and_then(|mut s| s.execute(params![org.as_str(), row.category]))
        .map_err(db_err)?;
    }
    Ok(())
}

/// The `sequence` and `hash` of `row` as the next entry of its chain, or
/// `None` while the chain has unsealed entries (the sealer seals them in
/// their order, and this one after them).
fn seal_now(
    c: &Connection,
    org: &OrgId,
    row: &AuditRow,
    seal: gatehouse_store::ChainSeal,
) -> StoreResult<Option<(i64, String)>> {
    let behind: bool = c
        .prepare_cached(
            "SELECT EXISTS (SELECT 1 FROM audit_entries INDEXED BY audit_unsealed
                            WHERE org_id = ?1 AND category = ?2 AND sequence IS NULL)",
        )
        .and_then(|mut s| s.query_row(params![org.as_str(), row.category], |r| r.get(0)))
        .map_err(db_err)?;
    if behind {
        return Ok(None);
    }
    let head = chain_head(c, org, row.category)?;
    let (sequence, prev) = match &head {
        Some(h) => (h.sequence as i64 + 1, h.hash.as_str()),
        None => (1, gatehouse_domain::audit::GENESIS),
    };
    let hash = seal(prev, &row.body, sequence as u64).map_err(|e| {
        StoreError::Internal(format!("audit entry {} cannot be sealed: {e}", row.id))
    })?;
    Ok(Some((sequence, hash)))
}

/// The last sealed entry of `org`'s `category` chain: the head the sealer
/// continues from and the one an insert seals after.
fn chain_head(c: &Connection, org: &OrgId, category: &str) -> StoreResult<Option<ChainHead>> {
    c.prepare_cached(
        "SELECT sequence, hash FROM audit_entries INDEXED BY audit_chain
         WHERE org_id = ?1 AND category = ?2 AND sequence IS NOT NULL
         ORDER BY sequence DESC LIMIT 1",
    )
    .and_then(|mut s| {
        s.query_row(params![org.as_str(), category], |r| {
            Ok(ChainHead {
                sequence: r.get::<_, i64>(0)?.max(0) as u64,
                hash: r.get(1)?,
            })
        })
        .optional()
    })
    .map_err(db_err)
}

fn values(params: Vec<EventParam>) -> Vec<Value> {
    params
        .into_iter()
        .map(|p| match p {
            EventParam::Text(t) => Value::Text(t),
            EventParam::Int(i) => Value::Integer(i),
        })
        .collect()
}

fn sealed_row(r: &Row<'_>) -> rusqlite::Result<SealedEntry> {
    let category: String = r.get(0)?;
    let sequence: Option<i64> = r.get(1)?;
    let hash: Option<String> = r.get(2)?;
    let body: String = r.get(3)?;
    decode_audit(&category, sequence, hash, body).map_err(|column| {
        corrupt(
            "audit_entries",
            column,
            &sequence.unwrap_or_default().to_string(),
            "cannot be read",
        )
    })
}

fn select(c: &Connection, sql: &str, params: &[Value]) -> StoreResult<Vec<SealedEntry>> {
    let mut stmt = c.prepare_cached(sql).map_err(db_err)?;
    let rows = stmt
        .query_map(rusqlite::params_from_iter(params.iter()), sealed_row)
        .map_err(db_err)?;
    rows.collect::<rusqlite::Result<Vec<_>>>().map_err(db_err)
}

/// A sequence as SQLite's signed integer (no chain comes near the limit).
fn clamp(sequence: u64) -> i64 {
    sequence.min(i64::MAX as u64) as i64
}

fn checkpoint_row(r: &Row<'_>) -> rusqlite::Result<CheckpointRecord> {
    checkpoint_row_at(r, 0)
}

/// A checkpoint from [`CHECKPOINT_COLS`] starting at column `at`.
fn checkpoint_row_at(r: &Row<'_>, at: usize) -> rusqlite::Result<CheckpointRecord> {
    let sequence: i64 = r.get(at + 1)?;
    decode_checkpoint(
        &r.get::<_, String>(at)?,
        sequence,
        r.get(at + 2)?,
        r.get(at + 3)?,
        r.get(at + 4)?,
        r.get(at + 5)?,
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
impl AuditStore for SqliteStore {
    async fn record_audit(&self, org: &OrgId, entry: &Entry) -> StoreResult<()> {
        let org = org.clone();
        let row = AuditRow::of(entry);
        self.pool
            .write(move |tx| insert_audit(tx, &org, &row))
            .await
    }
    async fn unsealed_audit(&self, limit: u32) -> StoreResult<Vec<Unsealed>> {
        // Inline, on the caller's reader: the sealer asks every half second,
        // mostly to find nothing, and a blocking-pool thread kept alive for
        // it would hold a reader connection of its own (2 MiB of page cache
        // on an idle server).
        self.pool
            .read(move |c| {
                let mut stmt = c
                    .prepare_cached(
                        "SELECT org_id, category, id, body FROM audit_entries
                         WHERE sequence IS NULL ORDER BY rowid LIMIT ?1",
                    )
                    .map_err(db_err)?;
                let rows = stmt
                    .query_map(params![i64::from(limit)], |r| {
                        let org: String = r.get(0)?;
                        let category: String = r.get(1)?;
                        let id: String = r.get(2)?;
                        let category = Category::parse(&category).ok_or_else(|| {
                            corrupt("audit_entries", "category", &id, "is no category")
                        })?;
                        Ok(Unsealed {
                            org: OrgId::from_trusted(org),
                            category,
                            id,
                            body: r.get(3)?,
                        })
                    })
                    .map_err(db_err)?;
                rows.collect::<rusqlite::Result<Vec<_>>>().map_err(db_err)
            })
            .await
    }
    async fn audit_chain_head(
        &self,
        org: &OrgId,
        category: Category,
    ) -> StoreResult<Option<ChainHead>> {
        let org = org.clone();
        self.pool
            .read(move |c| chain_head(c, &org, category.as_str()))
            .await
    }
    async fn chains_awaiting_checkpoint(&self) -> StoreResult<Vec<(OrgId, Category)>> {
        self.pool
            .read(move |c| {
                let mut stmt = c
                    .prepare_cached(
                        "SELECT org_id, category FROM audit_awaiting_checkpoint a
                         WHERE NOT EXISTS (SELECT 1 FROM audit_checkpoints k
                                           WHERE k.org_id = a.org_id AND k.category = a.category)",
                    )
                    .map_err(db_err)?;
                let rows = stmt
                    .query_map([], |r| {
                        let org: String = r.get(0)?;
                        let category: String = r.get(1)?;
                        let category = Category::parse(&category).ok_or_else(|| {
                            corrupt(
                                "audit_awaiting_checkpoint",
                                "category",
                                &org,
                                "is no category",
                            )
                        })?;
                        Ok((OrgId::from_trusted(org), category))
                    })
                    .map_err(db_err)?;
                rows.collect::<rusqlite::Result<Vec<_>>>().map_err(db_err)
            })
            .await
    }
    async fn seal_audit(&self, seals: &[Seal]) -> StoreResult<()> {
        if seals.is_empty() {
            return Ok(());
        }
        let seals = seals.to_vec();
        self.pool
            .write(move |tx| {
                let mut stmt = tx
                    .prepare_cached(
                        "UPDATE audit_entries SET sequence = ?1, hash = ?2
                         WHERE id = ?3 AND org_id = ?4 AND category = ?5 AND sequence IS NULL",
                    )
                    .map_err(db_err)?;
                for s in &seals {
                    let n = stmt
                        .execute(params![
                            s.sequence as i64,
                            s.hash,
                            s.id,
                            s.org.as_str(),
                            s.category.as_str()
                        ])
                        .map_err(db_err)?;
                    if n != 1 {
                        return Err(StoreError::Internal(format!(
                            "audit entry {} was sealed already",
                            s.id
                        )));
                    }
                }
                Ok(())
            })
            .await
    }
    async fn list_audit(
        &self,
        org: &OrgId,
        filter: &AuditFilter,
        page: Page,
    ) -> StoreResult<Listing<SealedEntry>> {
        let (w, params) = audit_where(org, filter, |n| format!("?{n}"));
        let params = values(params);
        self.pool
            .read_blocking(move |c| {
                let total = count(
                    c,
                    &format!("SELECT count(*) FROM audit_entries WHERE {w}"),
                    &params,
                )?;
                let sql = format!(
                    "SELECT {AUDIT_COLS} FROM audit_entries WHERE {w}
                     ORDER BY created_at DESC, id DESC LIMIT {} OFFSET {}",
                    page.limit,
                    page.offset.min(i64::MAX as u64)
                );
                Ok(Listing {
                    items: select(c, &sql, &params)?,
                    total,
                })
            })
            .await
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
        let (w, mut params) = audit_where(org, &filter, |n| format!("?{n}"));
        params.push(EventParam::Int(after.min(i64::MAX as u64) as i64));
        let w = format!("{w} AND sequence > ?{}", params.len());
        let params = values(params);
        self.pool
            .read_blocking(move |c| {
                let total = count(
                    c,
                    &format!("SELECT count(*) FROM audit_entries WHERE {w}"),
                    &params,
                )?;
                let sql = format!(
                    "SELECT {AUDIT_COLS} FROM audit_entries WHERE {w} ORDER BY sequence LIMIT {limit}"
                );
                Ok(Listing {
                    items: select(c, &sql, &params)?,
                    total,
                })
            })
            .await
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
        let (w, mut params) = audit_where(org, &filter, |n| format!("?{n}"));
        params.push(EventParam::Int(after.min(i64::MAX as u64) as i64));
        let sql = format!(
            "SELECT {AUDIT_COLS} FROM audit_entries WHERE {w} AND sequence > ?{} ORDER BY sequence LIMIT {limit}",
            params.len()
        );
        let params = values(params);
        self.pool
            .read_blocking(move |c| select(c, &sql, &params))
            .await
    }
    async fn insert_checkpoint(
        &self,
        org: &OrgId,
        checkpoint: &CheckpointRecord,
        jwk: &str,
        event: &gatehouse_domain::event::NewEvent,
    ) -> StoreResult<bool> {
        let (org, cp, event) = (org.clone(), checkpoint.clone(), event.clone());
        let jwk = jwk.to_owned();
        self.pool
            .write(move |tx| {
                let n = tx
                    .prepare_cached(
                        "INSERT INTO audit_checkpoints (org_id, category, sequence, hash, kid, jws, signed_at)
                         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
                         ON CONFLICT (org_id, category, sequence) DO NOTHING",
                    )
                    .and_then(|mut s| {
                        s.execute(params![
                            org.as_str(),
                            cp.category.as_str(),
                            cp.sequence.min(i64::MAX as u64) as i64,
                            cp.hash,
                            cp.kid,
                            cp.jws,
                            cp.signed_at.millis()
                        ])
                    })
                    .map_err(db_err)?;
                if n == 0 {
                    return Ok(false);
                }
                tx.prepare_cached(
                    "INSERT INTO audit_keys (kid, jwk) VALUES (?1, ?2) ON CONFLICT (kid) DO NOTHING",
                )
                .and_then(|mut s| s.execute(params![cp.kid, jwk]))
                .map_err(db_err)?;
                crate::events::insert_events(tx, &org, &[std::borrow::Cow::Owned(event)])?;
                tx.prepare_cached(
                    "DELETE FROM audit_awaiting_checkpoint WHERE org_id = ?1 AND category = ?2",
                )
                .and_then(|mut s| s.execute(params![org.as_str(), cp.category.as_str()]))
                .map_err(db_err)?;
                Ok(true)
            })
            .await
    }
    async fn list_checkpoints(
        &self,
        org: &OrgId,
        category: Option<Category>,
        page: Page,
    ) -> StoreResult<Listing<CheckpointRecord>> {
        let org = org.clone();
        let cat = category.map(|c| c.as_str().to_owned());
        self.pool
            .read_blocking(move |c| {
                let w = "org_id = ?1 AND (?2 IS NULL OR category = ?2)";
                let params: [Value; 2] = [
                    Value::Text(org.as_str().to_owned()),
                    cat.map_or(Value::Null, Value::Text),
                ];
                let total = count(
                    c,
                    &format!("SELECT count(*) FROM audit_checkpoints WHERE {w}"),
                    &params,
                )?;
                let sql = format!(
                    "SELECT {CHECKPOINT_COLS} FROM audit_checkpoints WHERE {w}
                     ORDER BY signed_at DESC, sequence DESC LIMIT {} OFFSET {}",
                    page.limit,
                    page.offset.min(i64::MAX as u64)
                );
                let mut stmt = c.prepare_cached(&sql).map_err(db_err)?;
                let items = stmt
                    .query_map(rusqlite::params_from_iter(params.iter()), checkpoint_row)
                    .map_err(db_err)?
                    .collect::<rusqlite::Result<Vec<_>>>()
                    .map_err(db_err)?;
                Ok(Listing { items, total })
            })
            .await
    }
    async fn checkpointed_chains(&self) -> StoreResult<Vec<(OrgId, CheckpointRecord)>> {
        self.pool
            .read_blocking(|c| {
                let mut stmt = c
                    .prepare_cached(&format!(
                        "SELECT org_id, {CHECKPOINT_COLS} FROM audit_checkpoints AS k
                         WHERE sequence = (SELECT max(sequence) FROM audit_checkpoints
                                           WHERE org_id = k.org_id AND category = k.category)
                         ORDER BY org_id, category"
                    ))
                    .map_err(db_err)?;
                let rows = stmt
                    .query_map([], |r| {
                        let org: String = r.get(0)?;
                        let cp = checkpoint_row_at(r, 1)?;
                        Ok((org, cp))
                    })
                    .map_err(db_err)?
                    .collect::<rusqlite::Result<Vec<_>>>()
                    .map_err(db_err)?;
                rows.into_iter()
                    .map(|(org, cp)| {
                        OrgId::parse(&org)
                            .map(|o| (o, cp))
                            .ok_or_else(|| StoreError::Internal(format!("corrupt org id {org:?}")))
                    })
                    .collect()
            })
            .await
    }
    async fn checkpoint_at_or_below(
        &self,
        org: &OrgId,
        category: Category,
        sequence: u64,
    ) -> StoreResult<Option<CheckpointRecord>> {
        let org = org.clone();
        self.pool
            .read(move |c| {
                c.prepare_cached(&format!(
                    "SELECT {CHECKPOINT_COLS} FROM audit_checkpoints
                     WHERE org_id = ?1 AND category = ?2 AND sequence <= ?3
                     ORDER BY sequence DESC LIMIT 1"
                ))
                .and_then(|mut s| {
                    s.query_row(
                        params![org.as_str(), category.as_str(), clamp(sequence)],
                        checkpoint_row,
                    )
                    .optional()
                })
                .map_err(db_err)
            })
            .await
    }
    async fn oldest_audit(&self, org: &OrgId, category: Category) -> StoreResult<Option<u64>> {
        let org = org.clone();
        self.pool
            .read(move |c| {
                c.prepare_cached(
                    "SELECT min(sequence) FROM audit_entries
                     WHERE org_id = ?1 AND category = ?2 AND sequence IS NOT NULL",
                )
                .and_then(|mut s| {
                    s.query_row(params![org.as_str(), category.as_str()], |r| {
                        r.get::<_, Option<i64>>(0)
                    })
                })
                .map(|v| v.map(|v| v.max(0) as u64))
                .map_err(db_err)
            })
            .await
    }
    async fn first_audit_since(
        &self,
        org: &OrgId,
        category: Category,
        cut: Timestamp,
    ) -> StoreResult<Option<u64>> {
        let org = org.clone();
        self.pool
            .read_blocking(move |c| {
                c.prepare_cached(
                    "SELECT sequence FROM audit_entries INDEXED BY audit_chain
                     WHERE org_id = ?1 AND category = ?2 AND sequence IS NOT NULL
                       AND created_at >= ?3
                     ORDER BY sequence LIMIT 1",
                )
                .and_then(|mut s| {
                    s.query_row(
                        params![org.as_str(), category.as_str(), cut.millis()],
                        |r| r.get::<_, i64>(0),
                    )
                    .optional()
                })
                .map(|v| v.map(|v| v.max(0) as u64))
                .map_err(db_err)
            })
            .await
    }
    async fn purge_audit(
        &self,
        org: &OrgId,
        category: Category,
        through: u64,
        limit: u32,
    ) -> StoreResult<u64> {
        let org = org.clone();
        self.pool
            .write(move |tx| {
                // The marker the DELETE trigger asks for, for this
                // transaction only.
                tx.execute("INSERT INTO audit_purge (running) VALUES (1)", [])
                    .map_err(db_err)?;
                let n = tx
                    .prepare_cached(
                        "DELETE FROM audit_entries WHERE rowid IN (
                             SELECT rowid FROM audit_entries INDEXED BY audit_chain
                             WHERE org_id = ?1 AND category = ?2
                               AND sequence IS NOT NULL AND sequence <= ?3
                             ORDER BY sequence LIMIT ?4)",
                    )
                    .and_then(|mut s| {
                        s.execute(params![
                            org.as_str(),
                            category.as_str(),
                            clamp(through),
                            i64::from(limit)
                        ])
                    })
                    .map_err(db_err)?;
                tx.execute("DELETE FROM audit_purge", []).map_err(db_err)?;
                Ok(n as u64)
            })
            .await
    }
    async fn purge_checkpoints(
        &self,
        org: &OrgId,
        category: Category,
        below: u64,
    ) -> StoreResult<u64> {
        let org = org.clone();
        self.pool
            .write(move |tx| {
                tx.prepare_cached(
                    "DELETE FROM audit_checkpoints
                     WHERE org_id = ?1 AND category = ?2 AND sequence < ?3",
                )
                .and_then(|mut s| s.execute(params![org.as_str(), category.as_str(), clamp(below)]))
                .map(|n| n as u64)
                .map_err(db_err)
            })
            .await
    }
    async fn record_first_use(
        &self,
        org: &OrgId,
        credential: &str,
        period: i64,
        source: &str,
        entry: &Entry,
    ) -> StoreResult<bool> {
        let (org, credential, source) = (org.clone(), credential.to_owned(), source.to_owned());
        let row = AuditRow::of(entry);
        self.pool
            .write(move |tx| {
                let n = tx
                    .prepare_cached(
                        "INSERT INTO audit_first_uses (org_id, credential, period, source)
                         VALUES (?1, ?2, ?3, ?4) ON CONFLICT DO NOTHING",
                    )
                    .and_then(|mut s| s.execute(params![org.as_str(), credential, period, source]))
                    .map_err(db_err)?;
                if n == 0 {
                    return Ok(false);
                }
                insert_audit(tx, &org, &row)?;
                Ok(true)
            })
            .await
    }
    async fn purge_first_uses(&self, period: i64) -> StoreResult<u64> {
        self.pool
            .write(move |tx| {
                tx.prepare_cached("DELETE FROM audit_first_uses WHERE period < ?1")
                    .and_then(|mut s| s.execute([period]))
                    .map(|n| n as u64)
                    .map_err(db_err)
            })
            .await
    }
    async fn audit_jwks(&self) -> StoreResult<Vec<String>> {
        self.pool
            .read(|c| {
                c.prepare_cached(
                    "SELECT jwk FROM audit_keys
                     WHERE kid IN (SELECT kid FROM audit_checkpoints) ORDER BY kid",
                )
                .and_then(|mut s| s.query_map([], |r| r.get(0))?.collect())
                .map_err(db_err)
            })
            .await
    }
}

#[cfg(test)]
mod sealing_at_insert {
    //! D58 on SQLite: an entry sealed in its own INSERT continues its chain
    //! exactly as the sealer would, waits behind entries left unsealed, and
    //! puts its chain on the list for a first checkpoint.
    use super::*;
    use gatehouse_domain::audit::{ChainError, GENESIS, token_issued};
    use gatehouse_domain::event::{EventType, NewEvent, Origin};
    use gatehouse_domain::{ClientId, Timestamp, UserId};

    /// A stand-in for `gatehouse_auth::audit::seal_entry` (tested there)
    /// whose result shows what it was given.
    fn seal(prev: &str, body: &str, sequence: u64) -> Result<String, ChainError> {
        Ok(format!("{prev}>{sequence}:{}", body.len()))
    }

    fn entry() -> Entry {
        token_issued(
            &UserId::generate(),
            &ClientId::generate(),
            "jti",
            "refresh_token",
            "openid",
            None,
            Timestamp::now(),
        )
    }

    /// `(sequence, hash, body)` of every entry, in write order.
    async fn rows(store: &SqliteStore) -> Vec<(Option<i64>, Option<String>, String)> {
        store
            .pool
            .read(|c| {
                let mut s = c
                    .prepare("SELECT sequence, hash, body FROM audit_entries ORDER BY rowid")
                    .map_err(db_err)?;
                let rows = s
                    .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
                    .map_err(db_err)?;
                rows.collect::<rusqlite::Result<Vec<_>>>().map_err(db_err)
            })
            .await
            .unwrap()
    }

    #[tokio::test]
    async fn d58_entries_are_sealed_as_written_and_continue_their_chain() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        let store = SqliteStore::open(&path)
            .unwrap()
            .sealing_audit_at_insert(seal);
        let org = OrgId::generate();
        for _ in 0..3 {
            store.record_audit(&org, &entry()).await.unwrap();
        }
        let written = rows(&store).await;
        let mut prev = GENESIS.to_owned();
        for (i, (sequence, hash, body)) in written.iter().enumerate() {
            let n = i as u64 + 1;
            assert_eq!(*sequence, Some(n as i64));
            let expected = seal(&prev, body, n).unwrap();
            assert_eq!(hash.as_deref(), Some(expected.as_str()));
            prev = expected;
        }
        assert!(store.unsealed_audit(10).await.unwrap().is_empty());
        // Another organization's chain starts at 1 of its own.
        let other = OrgId::generate();
        store.record_audit(&other, &entry()).await.unwrap();
        let head = store
            .audit_chain_head(&other, Category::Security)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(head.sequence, 1);
        assert!(head.hash.starts_with(&format!("{GENESIS}>1:")));
    }

    #[tokio::test]
    async fn d58_an_entry_waits_behind_unsealed_ones_of_its_chain() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        let org = OrgId::generate();
        // A process without the seal (an older binary) leaves one unsealed.
        let plain = SqliteStore::open(&path).unwrap();
        plain.record_audit(&org, &entry()).await.unwrap();
        let sealing = SqliteStore::open(&path)
            .unwrap()
            .sealing_audit_at_insert(seal);
        sealing.record_audit(&org, &entry()).await.unwrap();
        let written = rows(&sealing).await;
        assert!(written.iter().all(|(s, h, _)| s.is_none() && h.is_none()));
        assert!(
            sealing
                .chains_awaiting_checkpoint()
                .await
                .unwrap()
                .is_empty(),
            "no entry was sealed at insert"
        );
        // The sealer seals both in their order; then inserts seal again.
        let unsealed = sealing.unsealed_audit(10).await.unwrap();
        assert_eq!(unsealed.len(), 2);
        let mut prev = GENESIS.to_owned();
        let mut seals = Vec::new();
        for (i, u) in unsealed.into_iter().enumerate() {
            let hash = seal(&prev, &u.body, i as u64 + 1).unwrap();
            seals.push(Seal {
                org: u.org,
                category: u.category,
                id: u.id,
                sequence: i as u64 + 1,
                hash: hash.clone(),
            });
            prev = hash;
        }
        sealing.seal_audit(&seals).await.unwrap();
        sealing.record_audit(&org, &entry()).await.unwrap();
        let written = rows(&sealing).await;
        let (sequence, hash, body) = written.last().unwrap();
        assert_eq!(*sequence, Some(3));
        assert_eq!(
            hash.as_deref(),
            Some(seal(&prev, body, 3).unwrap().as_str())
        );
    }

    #[tokio::test]
    async fn d58_a_chain_sealed_at_insert_awaits_its_first_checkpoint() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(&dir.path().join("db"))
            .unwrap()
            .sealing_audit_at_insert(seal);
        let org = OrgId::generate();
        store.record_audit(&org, &entry()).await.unwrap();
        store.record_audit(&org, &entry()).await.unwrap();
        assert_eq!(
            store.chains_awaiting_checkpoint().await.unwrap(),
            vec![(org.clone(), Category::Security)]
        );
        let head = store
            .audit_chain_head(&org, Category::Security)
            .await
            .unwrap()
            .unwrap();
        let now = Timestamp::now();
        let event = NewEvent::new(
            EventType::AuditCheckpoint,
            org.as_str(),
            now,
            &Origin::system(),
            "{}".into(),
        );
        let checkpoint = CheckpointRecord {
            category: Category::Security,
            sequence: head.sequence,
            hash: head.hash,
            kid: "kid".into(),
            jws: "a.b.c".into(),
            signed_at: now,
        };
        assert!(
            store
                .insert_checkpoint(&org, &checkpoint, "{}", &event)
                .await
                .unwrap()
        );
        assert!(store.chains_awaiting_checkpoint().await.unwrap().is_empty());
    }
}
