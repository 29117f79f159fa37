//! SQLite: idempotent POSTs (D50). The single writer makes the claim atomic.

use gatehouse_store::{
    Begun, IDEMPOTENCY_LEASE_SECS, IdempotencyKey, IdempotencyStore, KeptResponse, StoredEntry,
    decide_idempotent,
};

use super::*;

#[async_trait]
impl IdempotencyStore for SqliteStore {
    async fn begin_idempotent(
        &self,
        org: &OrgId,
        key: &IdempotencyKey,
        digest: &[u8; 32],
        claim: &str,
        now: Timestamp,
        expires_at: Timestamp,
    ) -> StoreResult<Begun> {
        let (org, key, digest, claim) = (
            org.as_str().to_owned(),
            key.clone(),
            *digest,
            claim.to_owned(),
        );
        self.pool
            .write(move |tx| {
                let found = tx
                    .prepare_cached(
                        "SELECT digest, lease_until, status, location, content_type, body, sealed, expires_at
                         FROM idempotency_keys WHERE org_id = ?1 AND lineage = ?2 AND idem_key = ?3",
                    )
                    .and_then(|mut st| {
                        st.query_row(params![org, key.lineage, key.key], |r| {
                            Ok(StoredEntry {
                                digest: r.get(0)?,
                                lease_until: r.get(1)?,
                                status: r.get(2)?,
                                location: r.get(3)?,
                                content_type: r.get(4)?,
                                body: r.get(5)?,
                                sealed: r.get(6)?,
                                expires_at: r.get(7)?,
                            })
                        })
                        .optional()
                    })
                    .map_err(db_err)?;
                let now_ms = now.millis();
                if let Some(answer) = decide_idempotent(found, &digest, now_ms)? {
                    return Ok(answer);
                }
                tx.prepare_cached(
                    "INSERT INTO idempotency_keys
                        (org_id, lineage, idem_key, digest, claim, lease_until, sealed, created_at, expires_at)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, 0, ?7, ?8)
                     ON CONFLICT (org_id, lineage, idem_key) DO UPDATE SET
                        digest = excluded.digest, claim = excluded.claim,
                        lease_until = excluded.lease_until, status = NULL, location = NULL,
                        content_type = NULL, body = NULL, sealed = 0,
                        created_at = excluded.created_at, expires_at = excluded.expires_at",
                )
                .and_then(|mut st| {
                    st.execute(params![
                        org,
                        key.lineage,
                        key.key,
                        &digest[..],
                        claim,
                        now.plus_seconds(IDEMPOTENCY_LEASE_SECS).millis(),
                        now_ms,
                        expires_at.millis()
                    ])
                })
                .map_err(db_err)?;
                Ok(Begun::Claimed)
            })
            .await
    }

    async fn finish_idempotent(
        &self,
        org: &OrgId,
        key: &IdempotencyKey,
        claim: &str,
        response: &KeptResponse,
        expires_at: Timestamp,
    ) -> StoreResult<bool> {
        let (org, key, claim, r) = (
            org.as_str().to_owned(),
            key.clone(),
            claim.to_owned(),
            response.clone(),
        );
        self.pool
            .write(move |tx| {
                let n = tx
                    .prepare_cached(
                        "UPDATE idempotency_keys SET lease_until = NULL, status = ?5, location = ?6,
                            content_type = ?7, body = ?8, sealed = ?9, expires_at = ?10
                         WHERE org_id = ?1 AND lineage = ?2 AND idem_key = ?3 AND claim = ?4
                           AND lease_until IS NOT NULL",
                    )
                    .and_then(|mut st| {
                        st.execute(params![
                            org,
                            key.lineage,
                            key.key,
                            claim,
                            i64::from(r.status),
                            r.location,
                            r.content_type,
                            r.body,
                            r.sealed,
                            expires_at.millis()
                        ])
                    })
                    .map_err(db_err)?;
                Ok(n == 1)
            })
            .await
    }

    async fn abandon_idempotent(
        &self,
        org: &OrgId,
        key: &IdempotencyKey,
        claim: &str,
    ) -> StoreResult<()> {
        let (org, key, claim) = (org.as_str().to_owned(), key.clone(), claim.to_owned());
        self.pool
            .write(move |tx| {
                tx.prepare_cached(
                    "DELETE FROM idempotency_keys
                     WHERE org_id = ?1 AND lineage = ?2 AND idem_key = ?3 AND claim = ?4
                       AND lease_until IS NOT NULL",
                )
                .and_then(|mut st| st.execute(params![org, key.lineage, key.key, claim]))
                .map_err(db_err)?;
                Ok(())
            })
            .await
    }
}
