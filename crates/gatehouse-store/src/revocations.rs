//! Revocation records every node polls (D24, D25, D11, D13, D29).

use async_trait::async_trait;
use gatehouse_domain::Timestamp;

use crate::{NewRevocation, Revocation, StoreResult};

/// Revocation records every node polls (D24, D25, D11, D13, D29).
/// Unscoped: the feed is one list for the whole deployment, read by every
/// node's in-memory set, and a record names only a token, chain or user id
/// that was itself reached through its organization.
#[async_trait]
pub trait RevocationStore: Send + Sync {
    /// Unexpired revocations with an id above `after`, in id order.
    async fn revocations_since(&self, after: i64, now: Timestamp) -> StoreResult<Vec<Revocation>>;
    /// Writes `r`; answers its id (the feed's order).
    async fn insert_revocation(&self, r: &NewRevocation) -> StoreResult<i64>;
}
