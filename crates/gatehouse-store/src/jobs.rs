//! Scheduled work: claiming a job occurrence once (D44) and the expiry sweeps (D24).

use async_trait::async_trait;
use gatehouse_domain::Timestamp;

use crate::StoreResult;

/// Scheduled work: claiming a job occurrence once (D44) and the expiry sweeps (D24).
///
/// Unscoped: these are maintenance over the whole store, run by the
/// scheduler, never on a tenant's behalf.
#[async_trait]
pub trait JobStore: Send + Sync {
    /// Claims one occurrence of a scheduled job (e.g. the staging reset due
    /// at a given instant, D33): `true` for the first caller only, on any
    /// node sharing the store, so the job runs once (D44).
    async fn claim_job(&self, job: &str, run_key: &str, now: Timestamp) -> StoreResult<bool>;
    /// Erases sealed successor pairs whose grace window has passed (D24).
    async fn erase_expired_successors(&self, now: Timestamp) -> StoreResult<u64>;
    /// Deletes expired codes, tokens, chains, links, sessions, revocations,
    /// login failures and delivered mail, at most `batch` rows per table (D24).
    async fn purge_expired(&self, now: Timestamp, batch: u32) -> StoreResult<u64>;
}
