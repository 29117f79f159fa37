//! SQLite: revocation records every node polls (D24, D25, D11, D13, D29).

use super::*;

#[async_trait]
impl RevocationStore for SqliteStore {
    async fn revocations_since(&self, after: i64, now: Timestamp) -> StoreResult<Vec<Revocation>> {
        self.pool
            .read(|c| {
                let mut s = c
                    .prepare_cached("SELECT id, kind, subject, cutoff, expires_at, scopes FROM revocations WHERE id > ?1 AND expires_at > ?2 ORDER BY id LIMIT 10000")
                    .map_err(db_err)?;
                let rows = s
                    .query_map(params![after, now.millis()], |r| {
                        let id = r.get::<_, i64>(0)?.to_string();
                        Ok(Revocation {
                            id: r.get(0)?,
                            kind: decode(r, 1, ("revocations", "kind", &id), RevocationKind::parse)?,
                            subject: r.get(2)?,
                            cutoff: r.get(3)?,
                            expires_at: Timestamp::from_millis(r.get(4)?),
                            scopes: r
                                .get::<_, Option<i64>>(5)?
                                .map(|bits| scopes(bits, ("revocations", "scopes", &id)))
                                .transpose()?,
                        })
                    })
                    .map_err(db_err)?;
                rows.collect::<rusqlite::Result<Vec<_>>>().map_err(db_err)
            })
            .await
    }
    async fn insert_revocation(&self, r: &NewRevocation) -> StoreResult<i64> {
        let r = r.clone();
        self.pool
            .write(move |tx| auth_state::insert_revocation(tx, &r))
            .await
    }
}
