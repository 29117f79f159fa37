//! The e-mail outbox (D30).

use async_trait::async_trait;
use gatehouse_domain::Timestamp;

use crate::{OutboxMessage, StoreResult};

/// How much of a delivery error is kept with the message (for the log and
/// the operator), in characters.
pub const OUTBOX_ERROR_CHARS: usize = 1000;

/// The delivery error as [`OutboxStore::outbox_failed`] stores it.
pub fn outbox_error_text(error: &str) -> String {
    error.chars().take(OUTBOX_ERROR_CHARS).collect()
}

/// The e-mail outbox (D30). Unscoped: an operational queue the delivery
/// worker drains for every organization; messages are written only together
/// with the tenant change that sends them (an invitation, a reset), by
/// [`crate::UserStore`] and [`crate::LinkStore`] methods that take the
/// organization.
#[async_trait]
pub trait OutboxStore: Send + Sync {
    /// Claims up to `limit` due messages for `lease_ms` (another worker skips them).
    async fn claim_outbox(
        &self,
        now: Timestamp,
        limit: u32,
        lease_ms: i64,
    ) -> StoreResult<Vec<OutboxMessage>>;
    async fn outbox_sent(&self, id: i64, now: Timestamp) -> StoreResult<()>;
    async fn outbox_failed(
        &self,
        id: i64,
        error: &str,
        next_attempt_at: Timestamp,
    ) -> StoreResult<()>;
    /// Messages not yet delivered.
    async fn outbox_backlog(&self) -> StoreResult<u64>;
}
