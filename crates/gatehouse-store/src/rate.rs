//! Rate windows shared by the nodes of one store (D28, D44).

use async_trait::async_trait;
use gatehouse_domain::Timestamp;

use crate::{SharedWindow, StoreResult};

/// Rate windows shared by the nodes of one store (D28, D44). Unscoped: a
/// window belongs to a credential lineage (a client or key), not to tenant
/// data, and nothing in it is readable through the API.
#[async_trait]
pub trait RateStore: Send + Sync {
    /// Whether this backend counts rate limits for several nodes
    /// ([`RateStore::count_request`]); `false` skips that call on the request
    /// path of a single-node backend.
    fn shares_rate_limits(&self) -> bool {
        false
    }
    /// D28 across nodes (D44): decides on one request of `lineage` and
    /// counts it when admitted — fewer than `per_minute` admissions in the
    /// preceding 60 s and fewer than `per_second` in the preceding second —
    /// atomically for every node that shares this store. `Ok(None)` from a
    /// backend that serves one node (SQLite): the in-memory limiter counts.
    async fn count_request(
        &self,
        lineage: &str,
        per_minute: u32,
        per_second: u32,
        now: Timestamp,
    ) -> StoreResult<Option<SharedWindow>> {
        let _ = (lineage, per_minute, per_second, now);
        Ok(None)
    }
    /// D28 (revised) across nodes for a plan above 50 per second: counts up
    /// to `want` admissions of `lineage` at once, as many as the windows
    /// have room for, for this node to admit by itself during the current
    /// 100 ms bucket (so a busy credential costs a store call per lease, not
    /// per request). `granted` may be 0 (the window is full). `returned`:
    /// admissions of an earlier lease (counted at that instant) this node
    /// never gave, taken off the windows first. `Ok(None)` from a backend
    /// that serves one node.
    async fn lease_requests(
        &self,
        lineage: &str,
        per_minute: u32,
        per_second: u32,
        want: u32,
        returned: Option<(Timestamp, u32)>,
        now: Timestamp,
    ) -> StoreResult<Option<(u32, SharedWindow)>> {
        let _ = (lineage, per_minute, per_second, want, returned, now);
        Ok(None)
    }
}
