//! SQLite: token signing keys (D23).

use super::*;

#[async_trait]
impl SigningKeyStore for SqliteStore {
    async fn signing_keys(&self) -> StoreResult<Vec<SigningKeyRecord>> {
        self.pool
            .read(|c| {
                let mut s = c
                    .prepare_cached("SELECT kid, private_key_encrypted, public_key, created_at, activates_at, expires_at FROM signing_keys ORDER BY created_at, kid")
                    .map_err(db_err)?;
                let rows = s
                    .query_map([], |r| {
                        Ok(SigningKeyRecord {
                            kid: r.get(0)?,
                            private_key_encrypted: r.get(1)?,
                            public_key: r.get(2)?,
                            created_at: Timestamp::from_millis(r.get(3)?),
                            activates_at: Timestamp::from_millis(r.get(4)?),
                            expires_at: r.get::<_, Option<i64>>(5)?.map(Timestamp::from_millis),
                        })
                    })
                    .map_err(db_err)?;
                rows.collect::<rusqlite::Result<Vec<_>>>().map_err(db_err)
            })
            .await
    }
    async fn insert_signing_key(&self, k: &SigningKeyRecord) -> StoreResult<()> {
        let k = k.clone();
        self.pool
            .write(move |tx| {
                tx.execute(
                    "INSERT INTO signing_keys (kid, private_key_encrypted, public_key, created_at, activates_at, expires_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                    params![k.kid, k.private_key_encrypted, k.public_key, k.created_at.millis(), k.activates_at.millis(), k.expires_at.map(Timestamp::millis)],
                )
                .map_err(db_err)?;
                Ok(())
            })
            .await
    }
}
