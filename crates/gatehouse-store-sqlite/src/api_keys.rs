//! SQLite: API keys (D27, D46).

use gatehouse_domain::event::Teller;

use super::*;

#[async_trait]
impl ApiKeyStore for SqliteStore {
    async fn insert_api_key(
        &self,
        org: &OrgId,
        k: &ApiKey,
        digest: &[u8; 32],
        tell: &Teller,
    ) -> StoreResult<()> {
        check_org(org, &k.org)?;
        let told = effect::of_key_creation(tell, k);
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
                crate::effects::apply(tx, &k.org, &told, k.created_at, None)
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
        tell: &Teller,
    ) -> StoreResult<ApiKey> {
        let (org, id, tell) = (org.clone(), id.clone(), tell.clone());
        self.pool
            .write(move |tx| {
                let read = |tx: &Connection| {
                    tx.prepare_cached(&format!("SELECT {API_KEY_COLS} FROM api_keys WHERE id = ?1 AND org_id = ?2"))
                        .and_then(|mut s| s.query_row(params![id.as_str(), org.as_str()], api_key_row).optional())
                        .map_err(db_err)?
                        .ok_or(StoreError::NotFound)
                };
                let before = read(tx)?;
                tx.prepare_cached("UPDATE api_keys SET revoked_at = coalesce(revoked_at, ?1) WHERE id = ?2 AND org_id = ?3")
                    .and_then(|mut s| s.execute(params![at.millis(), id.as_str(), org.as_str()]))
                    .map_err(db_err)?;
                let after = read(tx)?;
                let told = effect::of_key_revocation(&tell, &before, &after);
                crate::effects::apply(tx, &org, &told, at, None)?;
                Ok(after)
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
) -> StoreResult<Vec<ApiKey>> {
    let beyond = match cut {
        KeyCut::All => -1i64,
        KeyCut::Beyond(cap) => !i64::from(cap.bits()),
    };
    // The keys as revoked, oldest first: each tells `api_key.revoked` (D54).
    let mut keys = c
        .prepare_cached(&format!(
            "UPDATE api_keys SET revoked_at = ?1 WHERE org_id = ?2 AND owner_id = ?3 AND revoked_at IS NULL AND (scopes & ?4) != 0
             RETURNING {API_KEY_COLS}"
        ))
        .and_then(|mut s| {
            s.query_map(params![now.millis(), org.as_str(), user.as_str(), beyond], api_key_row)?
                .collect::<rusqlite::Result<Vec<_>>>()
        })
        .map_err(db_err)?;
    keys.sort_by(|a, b| (a.created_at, a.id.as_str()).cmp(&(b.created_at, b.id.as_str())));
    Ok(keys)
}
