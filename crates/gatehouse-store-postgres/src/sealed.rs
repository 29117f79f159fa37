//! PostgreSQL: the values sealed under the master key and the rotation
//! under way (D23 continued).

use sqlx_core::query::Query;
use sqlx_postgres::{PgArguments, Postgres};

use super::*;
use gatehouse_store::{
    KeyHolder, MasterKeyRotation, SealedAt, SealedKind, SealedStore, SealedValue,
};

/// Each kind's page query (`$1` the last row key of the previous page, `$2`
/// the page size) and its compare-and-set update (`$1` row key, `$2` the
/// old value, `$3` the new).
fn sql(kind: SealedKind) -> (&'static str, &'static str) {
    match kind {
        SealedKind::SigningKey => (
            "SELECT kid, private_key_encrypted FROM signing_keys WHERE kid > $1 ORDER BY kid LIMIT $2",
            "UPDATE signing_keys SET private_key_encrypted = $3 WHERE kid = $1 AND private_key_encrypted = $2",
        ),
        SealedKind::SuccessorPair => (
            "SELECT digest, successor_sealed FROM refresh_tokens WHERE successor_sealed IS NOT NULL AND digest > $1 ORDER BY digest LIMIT $2",
            "UPDATE refresh_tokens SET successor_sealed = $3 WHERE digest = $1 AND successor_sealed = $2",
        ),
        SealedKind::KeptResponse => (
            "SELECT id, body, org_id, lineage, idem_key FROM idempotency_keys WHERE sealed AND body IS NOT NULL AND id > $1 ORDER BY id LIMIT $2",
            "UPDATE idempotency_keys SET body = $3 WHERE id = $1 AND body = $2 AND sealed",
        ),
        SealedKind::WebhookSecret => (
            "SELECT id, secret, org_id FROM webhook_endpoints WHERE id > $1 ORDER BY id LIMIT $2",
            "UPDATE webhook_endpoints SET secret = $3 WHERE id = $1 AND secret = $2",
        ),
        SealedKind::WebhookPreviousSecret => (
            "SELECT id, previous_secret, org_id FROM webhook_endpoints WHERE previous_secret IS NOT NULL AND id > $1 ORDER BY id LIMIT $2",
            "UPDATE webhook_endpoints SET previous_secret = $3 WHERE id = $1 AND previous_secret = $2",
        ),
        SealedKind::TotpSeed => (
            "SELECT id, secret, org_id, user_id FROM mfa_factors WHERE secret IS NOT NULL AND id > $1 ORDER BY id LIMIT $2",
            "UPDATE mfa_factors SET secret = $3 WHERE id = $1 AND secret = $2",
        ),
        SealedKind::SealedKey => (
            "SELECT name, sealed FROM sealed_keys WHERE name > $1 ORDER BY name LIMIT $2",
            "UPDATE sealed_keys SET sealed = $3 WHERE name = $1 AND sealed = $2",
        ),
    }
}

/// Binds the row key of `at` (or, with none, the key before every row of
/// `kind`) as its column's type.
fn bind_key<'q>(
    q: Query<'q, Postgres, PgArguments>,
    kind: SealedKind,
    at: Option<&SealedAt>,
) -> Query<'q, Postgres, PgArguments> {
    match at {
        Some(SealedAt::SigningKey { kid }) => q.bind(kid.clone()),
        Some(SealedAt::SuccessorPair { digest }) => q.bind(digest.clone()),
        Some(SealedAt::KeptResponse { row, .. }) => q.bind(*row),
        Some(SealedAt::WebhookSecret { endpoint, .. }) => q.bind(endpoint.clone()),
        Some(SealedAt::TotpSeed { factor, .. }) => q.bind(factor.clone()),
        Some(SealedAt::SealedKey { name }) => q.bind(name.clone()),
        None => match kind {
            SealedKind::SuccessorPair => q.bind(Vec::<u8>::new()),
            SealedKind::KeptResponse => q.bind(i64::MIN),
            _ => q.bind(String::new()),
        },
    }
}

fn value_of(kind: SealedKind, r: &sqlx_postgres::PgRow) -> Result<SealedValue, sqlx_core::Error> {
    let text = |i: usize| r.try_get::<String, _>(i);
    let at = match kind {
        SealedKind::SigningKey => SealedAt::SigningKey { kid: text(0)? },
        SealedKind::SuccessorPair => SealedAt::SuccessorPair {
            digest: r.try_get(0)?,
        },
        SealedKind::KeptResponse => SealedAt::KeptResponse {
            row: r.try_get(0)?,
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
        sealed: r.try_get(1)?,
    })
}

#[async_trait]
impl SealedStore for PgStore {
    async fn master_key_rotation(&self) -> StoreResult<Option<MasterKeyRotation>> {
        let row =
            query("SELECT next_id, next_sealed, started_at FROM master_key_rotation WHERE id = 1")
                .fetch_optional(&self.pool)
                .await
                .map_err(db_err)?;
        row.map(|r| {
            Ok(MasterKeyRotation {
                next_id: r.try_get(0)?,
                next_sealed: r.try_get(1)?,
                started_at: Timestamp::from_millis(r.try_get(2)?),
            })
        })
        .transpose()
        .map_err(db_err)
    }

    async fn begin_master_key_rotation(&self, rotation: &MasterKeyRotation) -> StoreResult<bool> {
        write_tx!(self, |tx| {
            let done = query(
                "INSERT INTO master_key_rotation (id, next_id, next_sealed, started_at) VALUES (1, $1, $2, $3)
                 ON CONFLICT (id) DO NOTHING",
            )
            .bind(&rotation.next_id)
            .bind(&rotation.next_sealed)
            .bind(rotation.started_at.millis())
            .execute(&mut *tx)
            .await?;
            Ok(done.rows_affected() == 1)
        })
    }

    async fn end_master_key_rotation(&self, next_id: &str) -> StoreResult<bool> {
        write_tx!(self, |tx| {
            let done = query("DELETE FROM master_key_rotation WHERE id = 1 AND next_id = $1")
                .bind(next_id)
                .execute(&mut *tx)
                .await?;
            Ok(done.rows_affected() == 1)
        })
    }

    async fn record_key_holder(
        &self,
        holder: &str,
        key_ids: &[String],
        now: Timestamp,
    ) -> StoreResult<()> {
        let ids = key_ids.join(" ");
        write_tx!(self, |tx| {
            query(
                "INSERT INTO master_key_holders (holder, key_ids, seen_at) VALUES ($1, $2, $3)
                 ON CONFLICT (holder) DO UPDATE SET key_ids = excluded.key_ids, seen_at = excluded.seen_at",
            )
            .bind(holder)
            .bind(&ids)
            .bind(now.millis())
            .execute(&mut *tx)
            .await?;
            query("DELETE FROM master_key_holders WHERE seen_at < $1")
                .bind(now.millis() - 86_400_000)
                .execute(&mut *tx)
                .await?;
            Ok(())
        })
    }

    async fn key_holders(&self, since: Timestamp) -> StoreResult<Vec<KeyHolder>> {
        let rows = query(
            "SELECT holder, key_ids, seen_at FROM master_key_holders WHERE seen_at >= $1 ORDER BY holder",
        )
        .bind(since.millis())
        .fetch_all(&self.pool)
        .await
        .map_err(db_err)?;
        rows.iter()
            .map(|r| {
                Ok(KeyHolder {
                    holder: r.try_get(0)?,
                    key_ids: r
                        .try_get::<String, _>(1)?
                        .split_whitespace()
                        .map(str::to_owned)
                        .collect(),
                    seen_at: Timestamp::from_millis(r.try_get(2)?),
                })
            })
            .collect::<Result<Vec<_>, sqlx_core::Error>>()
            .map_err(db_err)
    }

    async fn sealed_values(
        &self,
        kind: SealedKind,
        after: Option<&SealedAt>,
        limit: u32,
    ) -> StoreResult<Vec<SealedValue>> {
        let rows = bind_key(query(sql(kind).0), kind, after)
            .bind(i64::from(limit))
            .fetch_all(&self.pool)
            .await
            .map_err(db_err)?;
        rows.iter()
            .map(|r| value_of(kind, r))
            .collect::<Result<Vec<_>, _>>()
            .map_err(db_err)
    }

    async fn reseal(&self, at: &SealedAt, old: &[u8], new: &[u8]) -> StoreResult<bool> {
        let kind = at.kind();
        write_tx!(self, |tx| {
            let done = bind_key(query(sql(kind).1), kind, Some(at))
                .bind(old)
                .bind(new)
                .execute(&mut *tx)
                .await?;
            Ok(done.rows_affected() == 1)
        })
    }
}
