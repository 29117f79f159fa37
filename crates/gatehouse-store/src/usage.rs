//! Usage counts per credential and minute (D46).

use async_trait::async_trait;
use gatehouse_domain::{OrgId, UsageRange};

use crate::StoreResult;

pub use gatehouse_domain::auth_state::{Credential, UsageCount};

/// One minute of a credential's usage, as stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UsageMinute {
    /// Unix minutes.
    pub minute: i64,
    pub requests: u64,
    pub rejected: u64,
}

/// Usage counts (D46), added to by every node.
#[async_trait]
pub trait UsageStore: Send + Sync {
    /// Adds one node's counts to the stored ones (several nodes add up), in
    /// one transaction, and moves the `last_used_at` of the API keys among
    /// them forward to the minute counted. Each count names its
    /// organization; a count naming a credential of another organization
    /// is stored under its own organization and so is never read by
    /// another tenant.
    async fn add_usage(&self, counts: &[UsageCount]) -> StoreResult<()>;
    /// The stored minutes of `credential` of `org` within `range`, oldest
    /// first; minutes with no request are absent.
    async fn usage(
        &self,
        org: &OrgId,
        credential: &Credential,
        range: UsageRange,
    ) -> StoreResult<Vec<UsageMinute>>;
}
