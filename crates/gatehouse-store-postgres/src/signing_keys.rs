//! PostgreSQL: token signing keys (D23).

use super::*;

#[async_trait]
impl SigningKeyStore for PgStore {
    async fn signing_keys(&self) -> StoreResult<Vec<SigningKeyRecord>> {
        let rows = query(
            "SELECT kid, private_key_encrypted, public_key, created_at, activates_at, expires_at
             FROM signing_keys ORDER BY created_at, kid",
        )
        .fetch_all(&self.pool)
        .await
        .map_err(db_err)?;
        rows.iter()
            .map(|r| {
                Ok(SigningKeyRecord {
                    kid: r.try_get(0)?,
                    private_key_encrypted: r.try_get(1)?,
                    public_key: r.try_get(2)?,
                    created_at: Timestamp::from_millis(r.try_get(3)?),
                    activates_at: Timestamp::from_millis(r.try_get(4)?),
                    expires_at: r.try_get::<Option<i64>, _>(5)?.map(Timestamp::from_millis),
                })
            })
            .collect::<Result<Vec<_>, sqlx_core::Error>>()
            .map_err(db_err)
    }
    async fn insert_signing_key(&self, k: &SigningKeyRecord) -> StoreResult<()> {
        write_tx!(self, |tx| {
            query(
                "INSERT INTO signing_keys (kid, private_key_encrypted, public_key, created_at, activates_at, expires_at)
                 VALUES ($1, $2, $3, $4, $5, $6)",
            )
            .bind(&k.kid)
            .bind(&k.private_key_encrypted)
            .bind(&k.public_key)
            .bind(k.created_at.millis())
            .bind(k.activates_at.millis())
            .bind(k.expires_at.map(Timestamp::millis))
            .execute(&mut *tx)
            .await?;
            Ok(())
        })
    }
}
