//! PostgreSQL: idempotent POSTs (D50), claimed atomically across nodes
//! (D44): an insert that does nothing on conflict, then the row locked
//! `FOR UPDATE` and decided on.

use gatehouse_store::{
    Begun, IDEMPOTENCY_LEASE_SECS, IdempotencyKey, IdempotencyStore, KeptResponse, StoredEntry,
    decide_idempotent,
};

use super::*;

#[async_trait]
impl IdempotencyStore for PgStore {
    async fn begin_idempotent(
        &self,
        org: &OrgId,
        key: &IdempotencyKey,
        digest: &[u8; 32],
        claim: &str,
        now: Timestamp,
        expires_at: Timestamp,
    ) -> StoreResult<Begun> {
        let now_ms = now.millis();
        let lease = now.plus_seconds(IDEMPOTENCY_LEASE_SECS).millis();
        write_tx!(self, |tx| {
            // A row abandoned between the insert and the read is gone: insert again.
            for _ in 0..3 {
                let inserted = query(
                    "INSERT INTO idempotency_keys
                        (org_id, lineage, idem_key, digest, claim, lease_until, sealed, created_at, expires_at)
                     VALUES ($1, $2, $3, $4, $5, $6, false, $7, $8)
                     ON CONFLICT (org_id, lineage, idem_key) DO NOTHING",
                )
                .bind(org.as_str())
                .bind(&key.lineage)
                .bind(&key.key)
                .bind(&digest[..])
                .bind(claim)
                .bind(lease)
                .bind(now_ms)
                .bind(expires_at.millis())
                .execute(&mut *tx)
                .await?
                .rows_affected();
                if inserted == 1 {
                    return Ok(Begun::Claimed);
                }
                #[allow(clippy::type_complexity)]
                let found: Option<(
                    Vec<u8>,
                    Option<i64>,
                    Option<i32>,
                    Option<String>,
                    Option<String>,
                    Option<Vec<u8>>,
                    bool,
                    i64,
                )> = query_as(
                    "SELECT digest, lease_until, status, location, content_type, body, sealed, expires_at
                     FROM idempotency_keys WHERE org_id = $1 AND lineage = $2 AND idem_key = $3
                     FOR UPDATE",
                )
                .bind(org.as_str())
                .bind(&key.lineage)
                .bind(&key.key)
                .fetch_optional(&mut *tx)
                .await?;
                let Some((
                    digest_found,
                    lease_until,
                    status,
                    location,
                    content_type,
                    body,
                    sealed,
                    kept_until,
                )) = found
                else {
                    continue;
                };
                let entry = StoredEntry {
                    digest: digest_found,
                    lease_until,
                    status: status.map(i64::from),
                    location,
                    content_type,
                    body,
                    sealed,
                    expires_at: kept_until,
                };
                if let Some(answer) = decide_idempotent(Some(entry), digest, now_ms)? {
                    return Ok(answer);
                }
                query(
                    "UPDATE idempotency_keys SET digest = $4, claim = $5, lease_until = $6,
                        status = NULL, location = NULL, content_type = NULL, body = NULL,
                        sealed = false, created_at = $7, expires_at = $8
                     WHERE org_id = $1 AND lineage = $2 AND idem_key = $3",
                )
                .bind(org.as_str())
                .bind(&key.lineage)
                .bind(&key.key)
                .bind(&digest[..])
                .bind(claim)
                .bind(lease)
                .bind(now_ms)
                .bind(expires_at.millis())
                .execute(&mut *tx)
                .await?;
                return Ok(Begun::Claimed);
            }
            Err(StoreError::Unavailable("idempotency key contended".into()).into())
        })
    }

    async fn finish_idempotent(
        &self,
        org: &OrgId,
        key: &IdempotencyKey,
        claim: &str,
        response: &KeptResponse,
        expires_at: Timestamp,
    ) -> StoreResult<bool> {
        write_tx!(self, |tx| {
            let n = query(
                "UPDATE idempotency_keys SET lease_until = NULL, status = $5, location = $6,
                    content_type = $7, body = $8, sealed = $9, expires_at = $10
                 WHERE org_id = $1 AND lineage = $2 AND idem_key = $3 AND claim = $4
                   AND lease_until IS NOT NULL",
            )
            .bind(org.as_str())
            .bind(&key.lineage)
            .bind(&key.key)
            .bind(claim)
            .bind(i32::from(response.status))
            .bind(response.location.as_deref())
            .bind(response.content_type.as_deref())
            .bind(&response.body[..])
            .bind(response.sealed)
            .bind(expires_at.millis())
            .execute(&mut *tx)
            .await?
            .rows_affected();
            Ok(n == 1)
        })
    }

    async fn abandon_idempotent(
        &self,
        org: &OrgId,
        key: &IdempotencyKey,
        claim: &str,
    ) -> StoreResult<()> {
        write_tx!(self, |tx| {
            query(
                "DELETE FROM idempotency_keys
                 WHERE org_id = $1 AND lineage = $2 AND idem_key = $3 AND claim = $4
                   AND lease_until IS NOT NULL",
            )
            .bind(org.as_str())
            .bind(&key.lineage)
            .bind(&key.key)
            .bind(claim)
            .execute(&mut *tx)
            .await?;
            Ok(())
        })
    }
}
