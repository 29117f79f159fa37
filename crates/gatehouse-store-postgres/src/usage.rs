//! PostgreSQL: usage counts per credential and minute (D46). Each node adds
//! its counts to the same rows, so the counts of several nodes add up.

use super::*;

#[async_trait]
impl UsageStore for PgStore {
    async fn add_usage(&self, counts: &[UsageCount]) -> StoreResult<()> {
        if counts.is_empty() {
            return Ok(());
        }
        // One statement per table, rows in key order so two nodes flushing
        // the same minute lock them in the same order (no deadlock).
        let mut counts = counts.to_vec();
        counts.sort_by(|a, b| {
            (a.credential.as_str(), a.minute).cmp(&(b.credential.as_str(), b.minute))
        });
        let credentials: Vec<&str> = counts.iter().map(|c| c.credential.as_str()).collect();
        let minutes: Vec<i64> = counts.iter().map(|c| c.minute).collect();
        let orgs: Vec<&str> = counts.iter().map(|c| c.org.as_str()).collect();
        let requests: Vec<i64> = counts
            .iter()
            .map(|c| i64::try_from(c.requests).unwrap_or(i64::MAX))
            .collect();
        let rejected: Vec<i64> = counts
            .iter()
            .map(|c| i64::try_from(c.rejected).unwrap_or(i64::MAX))
            .collect();
        let mut keys: Vec<(&str, &str, i64)> = counts
            .iter()
            .filter_map(|c| match &c.credential {
                Credential::ApiKey(k) => Some((k.as_str(), c.org.as_str(), c.minute * 60_000)),
                Credential::Application(_) => None,
            })
            .collect();
        keys.sort();
        let key_ids: Vec<&str> = keys.iter().map(|k| k.0).collect();
        let key_orgs: Vec<&str> = keys.iter().map(|k| k.1).collect();
        let key_used: Vec<i64> = keys.iter().map(|k| k.2).collect();
        write_tx!(self, |tx| {
            query(
                "INSERT INTO usage_minutes (credential, minute, org_id, requests, rejected)
                 SELECT * FROM unnest($1::text[], $2::bigint[], $3::text[], $4::bigint[], $5::bigint[])
                 ON CONFLICT (credential, minute) DO UPDATE
                 SET requests = usage_minutes.requests + excluded.requests,
                     rejected = usage_minutes.rejected + excluded.rejected",
            )
            .bind(&credentials)
            .bind(&minutes)
            .bind(&orgs)
            .bind(&requests)
            .bind(&rejected)
            .execute(&mut *tx)
            .await?;
            if !key_ids.is_empty() {
                query(
                    "UPDATE api_keys k SET last_used_at = greatest(coalesce(k.last_used_at, 0), u.used)
                     FROM unnest($1::text[], $2::text[], $3::bigint[]) AS u(id, org_id, used)
                     WHERE k.id = u.id AND k.org_id = u.org_id",
                )
                .bind(&key_ids)
                .bind(&key_orgs)
                .bind(&key_used)
                .execute(&mut *tx)
                .await?;
            }
            Ok(())
        })
    }

    async fn usage(
        &self,
        org: &OrgId,
        credential: &Credential,
        range: UsageRange,
    ) -> StoreResult<Vec<UsageMinute>> {
        let rows = query(
            "SELECT minute, requests, rejected FROM usage_minutes
             WHERE credential = $1 AND org_id = $2 AND minute >= $3 AND minute < $4 ORDER BY minute",
        )
        .bind(credential.as_str())
        .bind(org.as_str())
        .bind(range.from_minute)
        .bind(range.to_minute)
        .fetch_all(&self.pool)
        .await
        .map_err(db_err)?;
        rows.iter()
            .map(|r| {
                Ok(UsageMinute {
                    minute: r.try_get(0)?,
                    requests: r.try_get::<i64, _>(1)?.max(0) as u64,
                    rejected: r.try_get::<i64, _>(2)?.max(0) as u64,
                })
            })
            .collect::<Result<Vec<_>, sqlx_core::Error>>()
            .map_err(db_err)
    }
}
