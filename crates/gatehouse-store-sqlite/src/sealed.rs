//! SQLite: the values sealed under the master key and the rotation under
//! way (D23 continued).

use rusqlite::types::Value;

use super::*;
use gatehouse_store::{
    KeyHolder, MasterKeyRotation, SealedAt, SealedKind, SealedStore, SealedValue,
};

/// Each kind's page query (`?1` the last row key of the previous page, `?2`
/// the page size) and its compare-and-set update (`?1` row key, `?2` the
/// old value, `?3` the new).
fn sql(kind: SealedKind) -> (&'static str, &'static str) {
    match kind {
        SealedKind::SigningKey => (
            "SELECT kid, private_key_encrypted FROM signing_keys WHERE kid > ?1 ORDER BY kid LIMIT ?2",
            "UPDATE signing_keys SET private_key_encrypted = ?3 WHERE kid = ?1 AND private_key_encrypted = ?2",
        ),
        SealedKind::SuccessorPair => (
            "SELECT digest, successor_sealed FROM refresh_tokens WHERE successor_sealed IS NOT NULL AND digest > ?1 ORDER BY digest LIMIT ?2",
            "UPDATE refresh_tokens SET successor_sealed = ?3 WHERE digest = ?1 AND successor_sealed = ?2",
        ),
        SealedKind::KeptResponse => (
            "SELECT id, body, org_id, lineage, idem_key FROM idempotency_keys WHERE sealed = 1 AND body IS NOT NULL AND id > ?1 ORDER BY id LIMIT ?2",
            "UPDATE idempotency_keys SET body = ?3 WHERE id = ?1 AND body = ?2 AND sealed = 1",
        ),
        SealedKind::WebhookSecret => (
            "SELECT id, secret, org_id FROM webhook_endpoints WHERE id > ?1 ORDER BY id LIMIT ?2",
            "UPDATE webhook_endpoints SET secret = ?3 WHERE id = ?1 AND secret = ?2",
        ),
        SealedKind::WebhookPreviousSecret => (
            "SELECT id, previous_secret, org_id FROM webhook_endpoints WHERE previous_secret IS NOT NULL AND id > ?1 ORDER BY id LIMIT ?2",
            "UPDATE webhook_endpoints SET previous_secret = ?3 WHERE id = ?1 AND previous_secret = ?2",
        ),
        SealedKind::TotpSeed => (
            "SELECT id, secret, org_id, user_id FROM mfa_factors WHERE secret IS NOT NULL AND id > ?1 ORDER BY id LIMIT ?2",
            "UPDATE mfa_factors SET secret = ?3 WHERE id = ?1 AND secret = ?2",
        ),
        SealedKind::SealedKey => (
            "SELECT name, sealed FROM sealed_keys WHERE name > ?1 ORDER BY name LIMIT ?2",
            "UPDATE sealed_keys SET sealed = ?3 WHERE name = ?1 AND sealed = ?2",
        ),
    }
}

/// The row key of `at`, as its column holds it.
fn row_key(at: &SealedAt) -> Value {
    match at {
        SealedAt::SigningKey { kid } => Value::Text(kid.clone()),
        SealedAt::SuccessorPair { digest } => Value::Blob(digest.clone()),
        SealedAt::KeptResponse { row, .. } => Value::Integer(*row),
        SealedAt::WebhookSecret { endpoint, .. } => Value::Text(endpoint.clone()),
        SealedAt::TotpSeed { factor, .. } => Value::Text(factor.clone()),
        SealedAt::SealedKey { name } => Value::Text(name.clone()),
    }
}

/// The key before every row of `kind`.
fn first_key(kind: SealedKind) -> Value {
    match kind {
        SealedKind::SuccessorPair => Value::Blob(Vec::new()),
        SealedKind::KeptResponse => Value::Integer(i64::MIN),
        _ => Value::Text(String::new()),
    }
}

fn value_of(kind: SealedKind, r: &Row<'_>) -> rusqlite::Result<SealedValue> {
    let text = |i| r.get::<_, String>(i);
    let at = match kind {
        SealedKind::SigningKey => SealedAt::SigningKey { kid: text(0)? },
        SealedKind::SuccessorPair => SealedAt::SuccessorPair { digest: r.get(0)? },
        SealedKind::KeptResponse => SealedAt::KeptResponse {
            row: r.get(0)?,
            org: text(2)?,
            lineage: text(3)?,
            key: text(4)?,
        },
        SealedKind::WebhookSecret | SealedKind::WebhookPreviousSecret => SealedAt::WebhookSecret {
            org: text(2)?,
            endpoint: text(0)?,
            previous: kind == SealedKind::WebhookPreviousSecret,
        },
        SealedKind::TotpSeed => SealedAt::TotpSeed {
            org: text(2)?,
            user: text(3)?,
            factor: text(0)?,
        },
        SealedKind::SealedKey => SealedAt::SealedKey { name: text(0)? },
    };
    Ok(SealedValue {
        at,
        sealed: r.get(1)?,
    })
}

#[async_trait]
impl SealedStore for SqliteStore {
    async fn master_key_rotation(&self) -> StoreResult<Option<MasterKeyRotation>> {
        self.pool
            .read(|c| {
                c.prepare_cached(
                    "SELECT next_id, next_sealed, started_at FROM master_key_rotation WHERE id = 1",
                )
                .and_then(|mut s| {
                    s.query_row([], |r| {
                        Ok(MasterKeyRotation {
                            next_id: r.get(0)?,
                            next_sealed: r.get(1)?,
                            started_at: Timestamp::from_millis(r.get(2)?),
                        })
                    })
                    .optional()
                })
                .map_err(db_err)
            })
            .await
    }

    async fn begin_master_key_rotation(&self, rotation: &MasterKeyRotation) -> StoreResult<bool> {
        let r = rotation.clone();
        self.pool
            .write(move |tx| {
                tx.execute(
                    "INSERT INTO master_key_rotation (id, next_id, next_sealed, started_at) VALUES (1, ?1, ?2, ?3)
                     ON CONFLICT (id) DO NOTHING",
                    params![r.next_id, r.next_sealed, r.started_at.millis()],
                )
                .map(|n| n == 1)
                .map_err(db_err)
            })
            .await
    }

    async fn end_master_key_rotation(&self, next_id: &str) -> StoreResult<bool> {
        let next_id = next_id.to_owned();
        self.pool
            .write(move |tx| {
                tx.execute(
                    "DELETE FROM master_key_rotation WHERE id = 1 AND next_id = ?1",
                    [next_id],
                )
                .map(|n| n == 1)
                .map_err(db_err)
            })
            .await
    }

    async fn record_key_holder(
        &self,
        holder: &str,
        key_ids: &[String],
        now: Timestamp,
    ) -> StoreResult<()> {
        let (holder, ids) = (holder.to_owned(), key_ids.join(" "));
        let now = now.millis();
        self.pool
            .write(move |tx| {
                tx.prepare_cached(
                    "INSERT INTO master_key_holders (holder, key_ids, seen_at) VALUES (?1, ?2, ?3)
                     ON CONFLICT (holder) DO UPDATE SET key_ids = excluded.key_ids, seen_at = excluded.seen_at",
                )
                .and_then(|mut s| s.execute(params![holder, ids, now]))
                .map_err(db_err)?;
                tx.prepare_cached("DELETE FROM master_key_holders WHERE seen_at < ?1")
                    .and_then(|mut s| s.execute([now - 86_400_000]))
                    .map_err(db_err)?;
                Ok(())
            })
            .await
    }

    async fn key_holders(&self, since: Timestamp) -> StoreResult<Vec<KeyHolder>> {
        self.pool
            .read(move |c| {
                let mut s = c
                    .prepare_cached(
                        "SELECT holder, key_ids, seen_at FROM master_key_holders WHERE seen_at >= ?1 ORDER BY holder",
                    )
                    .map_err(db_err)?;
                let rows = s
                    .query_map([since.millis()], |r| {
                        Ok(KeyHolder {
                            holder: r.get(0)?,
                            key_ids: r
                                .get::<_, String>(1)?
                                .split_whitespace()
                                .map(str::to_owned)
                                .collect(),
                            seen_at: Timestamp::from_millis(r.get(2)?),
                        })
                    })
                    .map_err(db_err)?;
                rows.collect::<rusqlite::Result<Vec<_>>>().map_err(db_err)
            })
            .await
    }

    async fn sealed_values(
        &self,
        kind: SealedKind,
        after: Option<&SealedAt>,
        limit: u32,
    ) -> StoreResult<Vec<SealedValue>> {
        let after = after.map_or_else(|| first_key(kind), row_key);
        self.pool
            .read(move |c| {
                let mut s = c.prepare_cached(sql(kind).0).map_err(db_err)?;
                let rows = s
                    .query_map(params![after, i64::from(limit)], |r| value_of(kind, r))
                    .map_err(db_err)?;
                rows.collect::<rusqlite::Result<Vec<_>>>().map_err(db_err)
            })
            .await
    }

    async fn reseal(&self, at: &SealedAt, old: &[u8], new: &[u8]) -> StoreResult<bool> {
        let (update, key) = (sql(at.kind()).1, row_key(at));
        let (old, new) = (old.to_vec(), new.to_vec());
        self.pool
            .write(move |tx| {
                tx.prepare_cached(update)
                    .and_then(|mut s| s.execute(params![key, old, new]))
                    .map(|n| n == 1)
                    .map_err(db_err)
            })
            .await
    }
}
