//! PostgreSQL: revocation records every node polls (D24, D25, D11, D13, D29).

use super::*;

#[async_trait]
impl RevocationStore for PgStore {
    async fn revocations_since(&self, after: i64, now: Timestamp) -> StoreResult<Vec<Revocation>> {
        let rows = query(
            "SELECT id, kind, subject, cutoff, expires_at, scopes FROM revocations
             WHERE id > $1 AND expires_at > $2 ORDER BY id LIMIT 10000",
        )
        .bind(after)
        .bind(now.millis())
        .fetch_all(&self.pool)
        .await
        .map_err(db_err)?;
        rows.iter()
            .map(|r| {
                let id = r.try_get::<i64, _>(0)?.to_string();
                Ok(Revocation {
                    id: r.try_get(0)?,
                    kind: rows::decode(r, 1, ("revocations", "kind", &id), RevocationKind::parse)?,
                    subject: r.try_get(2)?,
                    cutoff: r.try_get(3)?,
                    expires_at: Timestamp::from_millis(r.try_get(4)?),
                    scopes: r
                        .try_get::<Option<i32>, _>(5)?
                        .map(|bits| rows::scopes(bits, ("revocations", "scopes", &id)))
                        .transpose()?,
                })
            })
            .collect::<Result<Vec<_>, sqlx_core::Error>>()
            .map_err(db_err)
    }
    async fn insert_revocation(&self, r: &NewRevocation) -> StoreResult<i64> {
        let r = r.clone();
        write_tx!(self, |tx| auth_state::insert_revocation(&mut tx, &r).await)
    }
}
