//! PostgreSQL: API keys (D27, D46).

use gatehouse_domain::event::Teller;

use super::*;

#[async_trait]
impl ApiKeyStore for PgStore {
    async fn insert_api_key(
        &self,
        org: &OrgId,
        k: &ApiKey,
        digest: &[u8; 32],
        tell: &Teller,
    ) -> StoreResult<()> {
        check_org(org, &k.org)?;
        let told = effect::of_key_creation(tell, k);
        write_tx!(self, |tx| {
            query(
                "INSERT INTO api_keys (id, org_id, name, digest, scopes, created_at, revoked_at, prefix, owner_id, expires_at, last_used_at)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
            )
            .bind(k.id.as_str())
            .bind(k.org.as_str())
            .bind(&k.name)
            .bind(&digest[..])
            .bind(bits(k.scopes))
            .bind(k.created_at.millis())
            .bind(k.revoked_at.map(Timestamp::millis))
            .bind(&k.prefix)
            .bind(k.owner.as_ref().map(UserId::as_str))
            .bind(k.expires_at.map(Timestamp::millis))
            .bind(k.last_used_at.map(Timestamp::millis))
            .execute(&mut *tx)
            .await?;
            crate::effects::apply(&mut tx, org, &told, k.created_at, None).await
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
    async fn get_api_key(&self, org: &OrgId, id: &ApiKeyId) -> StoreResult<Option<ApiKey>> {
        let row = query(&format!(
            "SELECT {API_KEY_COLS} FROM api_keys WHERE id = $1 AND org_id = $2"
        ))
        .bind(id.as_str())
        .bind(org.as_str())
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
        tell: &Teller,
    ) -> StoreResult<ApiKey> {
        write_tx!(self, |tx| {
            let before = query(&format!(
                "SELECT {API_KEY_COLS} FROM api_keys WHERE id = $1 AND org_id = $2 FOR UPDATE"
            ))
            .bind(id.as_str())
            .bind(org.as_str())
            .fetch_optional(&mut *tx)
            .await?
            .ok_or(StoreError::NotFound)?;
            let before = api_key_row(&before)?;
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
            let after = api_key_row(&row)?;
            let told = effect::of_key_revocation(tell, &before, &after);
            crate::effects::apply(&mut tx, org, &told, at, None).await?;
            Ok(after)
        })
    }
}

/// D46: cuts the API keys `user` owns as a change to them decides, in the
/// transaction of that change.
pub(crate) async fn cut_owned_keys(
    c: &mut PgConnection,
    org: &OrgId,
    user: &UserId,
    cut: KeyCut,
    now: Timestamp,
) -> TxResult<Vec<ApiKey>> {
    let beyond: i32 = match cut {
        KeyCut::All => -1,
        KeyCut::Beyond(cap) => !bits(cap),
    };
    // The keys as revoked, oldest first: each tells `api_key.revoked` (D54).
    let rows = query(&format!(
        "UPDATE api_keys SET revoked_at = $1
         WHERE org_id = $2 AND owner_id = $3 AND revoked_at IS NULL AND (scopes & $4) <> 0
         RETURNING {API_KEY_COLS}"
    ))
    .bind(now.millis())
    .bind(org.as_str())
    .bind(user.as_str())
    .bind(beyond)
    .fetch_all(&mut *c)
    .await?;
    let mut keys = rows
        .iter()
        .map(api_key_row)
        .collect::<Result<Vec<_>, _>>()?;
    keys.sort_by(|a, b| (a.created_at, a.id.as_str()).cmp(&(b.created_at, b.id.as_str())));
    Ok(keys)
}
