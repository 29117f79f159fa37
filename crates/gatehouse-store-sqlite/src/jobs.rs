//! SQLite: scheduled work: claiming a job occurrence once (D44) and the expiry sweeps (D24).

use super::*;

#[async_trait]
impl JobStore for SqliteStore {
    async fn claim_job(&self, job: &str, run_key: &str, now: Timestamp) -> StoreResult<bool> {
        let (job, run_key) = (job.to_owned(), run_key.to_owned());
        self.pool
            .write(move |tx| {
                let n = tx
                    .prepare_cached(
                        "INSERT INTO job_runs (job, run_key, claimed_at) VALUES (?1, ?2, ?3)
                         ON CONFLICT (job, run_key) DO NOTHING",
                    )
                    .and_then(|mut st| st.execute(params![job, run_key, now.millis()]))
                    .map_err(db_err)?;
                Ok(n == 1)
            })
            .await
    }
    async fn erase_expired_successors(&self, now: Timestamp) -> StoreResult<u64> {
        self.pool
            .write(move |tx| {
                let n = tx
                    .prepare_cached("UPDATE refresh_tokens SET successor_sealed = NULL, successor_until = NULL WHERE successor_until IS NOT NULL AND successor_until <= ?1")
                    .and_then(|mut s| s.execute([now.millis()]))
                    .map_err(db_err)?;
                Ok(n as u64)
            })
            .await
    }
    async fn purge_expired(&self, now: Timestamp, batch: u32) -> StoreResult<u64> {
        self.pool
            .write(move |tx| auth_state::purge(tx, now, batch))
            .await
    }
}
