//! PostgreSQL: aPI keys (D27).

use super::*;

#[async_trait]
impl ApiKeyStore for PgStore {
    async fn insert_api_key(&self, org: &OrgId, k: &ApiKey, digest: &[u8; 32]) -> StoreResult<()> {
        check_org(org, &k.org)?;
        write_tx!(self, |tx| {
            query(
                "INSERT INTO api_keys (id, org_id, name, digest, scopes, created_at, revoked_at) VALUES ($1, $2, $3, $4, $5, $6, $7)",
            )
            .bind(k.id.as_str())
            .bind(k.org.as_str())
            .bind(&k.name)
            .bind(&digest[..])
            .bind(bits(k.scopes))
            .bind(k.created_at.millis())
            .bind(k.revoked_at.map(Timestamp::millis))
            .execute(&mut *tx)
            .await?;
            Ok(())
        })
    }
    async fn resolve_api_key(&self, digest: &[u8; 32]) -> StoreResult<Option<ApiKey>> {
        let row = query(&format!(
            "SELECT {API_KEY_COLS} FROM api_keys WHERE digest = $1"
        ))
        .bind(&digest[..])
        .fetch_optional(&self.pool)
        .await
        .map_err(db_err)?;
        row.as_ref().map(api_key_row).transpose().map_err(db_err)
    }
    async fn operator_find_api_key(&self, id: &ApiKeyId) -> StoreResult<Option<ApiKey>> {
        let row = query(&format!(
            "SELECT {API_KEY_COLS} FROM api_keys WHERE id = $1"
        ))
        .bind(id.as_str())
        .fetch_optional(&self.pool)
        .await
        .map_err(db_err)?;
        row.as_ref().map(api_key_row).transpose().map_err(db_err)
    }
    async fn list_api_keys(&self, org: &OrgId) -> StoreResult<Vec<ApiKey>> {
        let rows = query(&format!(
            "SELECT {API_KEY_COLS} FROM api_keys WHERE org_id = $1 ORDER BY created_at, id"
        ))
        .bind(org.as_str())
        .fetch_all(&self.pool)
        .await
        .map_err(db_err)?;
        rows.iter()
            .map(api_key_row)
            .collect::<Result<Vec<_>, _>>()
            .map_err(db_err)
    }
    async fn revoke_api_key(
        &self,
        org: &OrgId,
        id: &ApiKeyId,
        at: Timestamp,
    ) -> StoreResult<ApiKey> {
        write_tx!(self, |tx| {
            // Revoking twice keeps the first time.
            let row = query(&format!(
                "UPDATE api_keys SET revoked_at = coalesce(revoked_at, $1)
                 WHERE id = $2 AND org_id = $3 RETURNING {API_KEY_COLS}"
            ))
            .bind(at.millis())
            .bind(id.as_str())
            .bind(org.as_str())
            .fetch_optional(&mut *tx)
            .await?
            .ok_or(StoreError::NotFound)?;
            Ok(api_key_row(&row)?)
        })
    }
}
