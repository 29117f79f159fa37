//! SQLite: API keys (D27, D46).

use super::*;

#[async_trait]
impl ApiKeyStore for SqliteStore {
    async fn insert_api_key(&self, org: &OrgId, k: &ApiKey, digest: &[u8; 32]) -> StoreResult<()> {
        check_org(org, &k.org)?;
        let (k, digest) = (k.clone(), *digest);
        self.pool
            .write(move |tx| {
                tx.prepare_cached(
                    "INSERT INTO api_keys (id, org_id, name, digest, scopes, created_at, revoked_at, prefix, owner_id, expires_at, last_used_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
                )
                .and_then(|mut s| {
                    s.execute(params![
                        k.id.as_str(),
                        k.org.as_str(),
                        k.name,
                        digest.to_vec(),
                        k.scopes.bits() as i64,
                        k.created_at.millis(),
                        k.revoked_at.map(Timestamp::millis),
                        k.prefix,
                        k.owner.as_ref().map(UserId::as_str),
                        k.expires_at.map(Timestamp::millis),
                        k.last_used_at.map(Timestamp::millis)
                    ])
                })
                .map_err(db_err)?;
                Ok(())
            })
            .await
    }
    async fn resolve_api_key(&self, digest: &[u8; 32]) -> StoreResult<Option<ApiKey>> {
        self.pool
            .read(|c| {
                c.prepare_cached(&format!(
                    "SELECT {API_KEY_COLS} FROM api_keys WHERE digest = ?1"
                ))
                .and_then(|mut s| s.query_row([digest.as_slice()], api_key_row).optional())
                .map_err(db_err)
            })
            .await
    }
    async fn operator_find_api_key(&self, id: &ApiKeyId) -> StoreResult<Option<ApiKey>> {
        self.pool
            .read(|c| {
                c.prepare_cached(&format!(
                    "SELECT {API_KEY_COLS} FROM api_keys WHERE id = ?1"
                ))
                .and_then(|mut s| s.query_row([id.as_str()], api_key_row).optional())
                .map_err(db_err)
            })
            .await
    }
    async fn get_api_key(&self, org: &OrgId, id: &ApiKeyId) -> StoreResult<Option<ApiKey>> {
        self.pool
            .read(|c| {
                c.prepare_cached(&format!(
                    "SELECT {API_KEY_COLS} FROM api_keys WHERE id = ?1 AND org_id = ?2"
                ))
                .and_then(|mut s| {
                    s.query_row(params![id.as_str(), org.as_str()], api_key_row)
                        .optional()
                })
                .map_err(db_err)
            })
            .await
    }
    async fn list_api_keys(&self, org: &OrgId) -> StoreResult<Vec<ApiKey>> {
        let org = org.clone();
        self.pool
            .read(move |c| {
                c.prepare_cached(&format!(
                    "SELECT {API_KEY_COLS} FROM api_keys WHERE org_id = ?1 ORDER BY created_at, id"
                ))
                .and_then(|mut s| {
                    s.query_map([org.as_str()], api_key_row)?
                        .collect::<rusqlite::Result<Vec<_>>>()
                })
                .map_err(db_err)
            })
            .await
    }
    async fn revoke_api_key(
        &self,
        org: &OrgId,
        id: &ApiKeyId,
        at: Timestamp,
    ) -> StoreResult<ApiKey> {
        let (org, id) = (org.clone(), id.clone());
        self.pool
            .write(move |tx| {
                tx.prepare_cached("UPDATE api_keys SET revoked_at = coalesce(revoked_at, ?1) WHERE id = ?2 AND org_id = ?3")
                    .and_then(|mut s| s.execute(params![at.millis(), id.as_str(), org.as_str()]))
                    .map_err(db_err)?;
                tx.prepare_cached(&format!("SELECT {API_KEY_COLS} FROM api_keys WHERE id = ?1 AND org_id = ?2"))
                    .and_then(|mut s| s.query_row(params![id.as_str(), org.as_str()], api_key_row).optional())
                    .map_err(db_err)?
                    .ok_or(StoreError::NotFound)
            })
            .await
    }
}

/// D46: cuts the API keys `user` owns as a change to them decides, in the
/// transaction of that change.
pub(crate) fn cut_owned_keys(
    c: &Connection,
    org: &OrgId,
    user: &UserId,
    cut: KeyCut,
    now: Timestamp,
) -> StoreResult<()> {
    let beyond = match cut {
        KeyCut::All => -1i64,
        KeyCut::Beyond(cap) => !i64::from(cap.bits()),
    };
    c.prepare_cached(
        "UPDATE api_keys SET revoked_at = ?1 WHERE org_id = ?2 AND owner_id = ?3 AND revoked_at IS NULL AND (scopes & ?4) != 0",
    )
    .and_then(|mut s| s.execute(params![now.millis(), org.as_str(), user.as_str(), beyond]))
    .map_err(db_err)?;
    Ok(())
}
