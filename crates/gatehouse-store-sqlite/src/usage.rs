//! SQLite: usage counts per credential and minute (D46).

use super::*;

#[async_trait]
impl UsageStore for SqliteStore {
    async fn add_usage(&self, counts: &[UsageCount]) -> StoreResult<()> {
        if counts.is_empty() {
            return Ok(());
        }
        let counts = counts.to_vec();
        self.pool
            .write(move |tx| {
                let mut add = tx
                    .prepare_cached(
                        "INSERT INTO usage_minutes (credential, minute, org_id, requests, rejected) VALUES (?1, ?2, ?3, ?4, ?5)
                         ON CONFLICT (credential, minute) DO UPDATE SET requests = requests + excluded.requests, rejected = rejected + excluded.rejected",
                    )
                    .map_err(db_err)?;
                let mut used = tx
                    .prepare_cached(
                        "UPDATE api_keys SET last_used_at = max(coalesce(last_used_at, 0), ?1) WHERE id = ?2 AND org_id = ?3",
                    )
                    .map_err(db_err)?;
                for c in &counts {
                    add.execute(params![
                        c.credential.as_str(),
                        c.minute,
                        c.org.as_str(),
                        i64::try_from(c.requests).unwrap_or(i64::MAX),
                        i64::try_from(c.rejected).unwrap_or(i64::MAX)
                    ])
                    .map_err(db_err)?;
                    if let Credential::ApiKey(k) = &c.credential {
                        used.execute(params![c.minute * 60_000, k.as_str(), c.org.as_str()])
                            .map_err(db_err)?;
                    }
                }
                Ok(())
            })
            .await
    }

    async fn usage(
        &self,
        org: &OrgId,
        credential: &Credential,
        range: UsageRange,
    ) -> StoreResult<Vec<UsageMinute>> {
        let (org, credential) = (org.clone(), credential.as_str().to_owned());
        self.pool
            .read(move |c| {
                c.prepare_cached(
                    "SELECT minute, requests, rejected FROM usage_minutes
                     WHERE credential = ?1 AND org_id = ?2 AND minute >= ?3 AND minute < ?4 ORDER BY minute",
                )
                .and_then(|mut s| {
                    s.query_map(
                        params![credential, org.as_str(), range.from_minute, range.to_minute],
                        |r| {
                            Ok(UsageMinute {
                                minute: r.get(0)?,
                                requests: r.get::<_, i64>(1)?.max(0) as u64,
                                rejected: r.get::<_, i64>(2)?.max(0) as u64,
                            })
                        },
                    )?
                    .collect::<rusqlite::Result<Vec<_>>>()
                })
                .map_err(db_err)
            })
            .await
    }
}
