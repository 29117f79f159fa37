//! PostgreSQL: scheduled work: claiming a job occurrence once (D44) and the expiry sweeps (D24).

use super::*;

#[async_trait]
impl JobStore for PgStore {
    async fn claim_job(&self, job: &str, run_key: &str, now: Timestamp) -> StoreResult<bool> {
        write_tx!(self, |tx| {
            let n = query(
                "INSERT INTO job_runs (job, run_key, claimed_at) VALUES ($1, $2, $3)
                 ON CONFLICT (job, run_key) DO NOTHING",
            )
            .bind(job)
            .bind(run_key)
            .bind(now.millis())
            .execute(&mut *tx)
            .await?
            .rows_affected();
            Ok(n == 1)
        })
    }
    async fn erase_expired_successors(&self, now: Timestamp) -> StoreResult<u64> {
        write_tx!(self, |tx| {
            let n = query(
                "UPDATE refresh_tokens SET successor_sealed = NULL, successor_until = NULL
                 WHERE successor_until IS NOT NULL AND successor_until <= $1",
            )
            .bind(now.millis())
            .execute(&mut *tx)
            .await?
            .rows_affected();
            Ok(n)
        })
    }
    async fn purge_expired(&self, now: Timestamp, batch: u32) -> StoreResult<u64> {
        let purged = write_tx!(self, |tx| auth_state::purge(&mut tx, now, batch).await)?;
        // D28: buckets older than the minute window count for nothing.
        let old = now.millis().div_euclid(RATE_BUCKET_MS) - RATE_MINUTE_BUCKETS;
        let buckets = write_tx!(self, |tx| {
            Ok(query(
                "DELETE FROM rate_buckets WHERE ctid IN (
                    SELECT ctid FROM rate_buckets WHERE bucket <= $1 LIMIT $2)",
            )
            .bind(old)
            .bind(i64::from(batch) * 20)
            .execute(&mut *tx)
            .await?
            .rows_affected())
        })?;
        Ok(purged + buckets)
    }
}
