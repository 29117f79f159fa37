//! Idempotent POSTs (D50): the claim of an `Idempotency-Key` and the
//! response kept for it.

use async_trait::async_trait;
use gatehouse_domain::{OrgId, Timestamp};

use crate::StoreResult;

/// How long an unfinished claim holds its key: a claim older than this
/// belongs to a request whose node died mid-request (a finished or
/// abandoned request always ends its claim), and the next request with the
/// key takes it over. Longer than any request can run (D45's deadlines, the
/// storage timeouts), short enough that a retry after a crash soon runs.
pub const IDEMPOTENCY_LEASE_SECS: i64 = 60;

/// One key of one caller: the organization, the credential lineage (D28's,
/// as the auth layer's `Lineage::shared_key` writes it) and the key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IdempotencyKey {
    pub lineage: String,
    pub key: String,
}

/// A kept response (D50): status, `Location`, `Content-Type` and the body
/// bytes, `sealed` when the body is stored encrypted (it holds a secret).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeptResponse {
    pub status: u16,
    pub location: Option<String>,
    pub content_type: Option<String>,
    pub body: Vec<u8>,
    pub sealed: bool,
}

/// What [`IdempotencyStore::begin_idempotent`] found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Begun {
    /// The caller holds the key now (it was free, expired, or its claim was
    /// stale): run the request, then finish or abandon with this claim.
    Claimed,
    /// Another request with the key and the same digest is still running.
    InProgress,
    /// The key was used with a different request (digest).
    Mismatch,
    /// The key's request ran: this is its response.
    Done(KeptResponse),
}

/// Idempotent POSTs (D50): per (organization, lineage, key), the request's
/// digest and, once it ran, its response, until `expires_at`. Shared by
/// every node of one store (D44): the claim is atomic.
#[async_trait]
pub trait IdempotencyStore: Send + Sync {
    /// Claims `key` for a request with `digest`, atomically: the first
    /// caller gets [`Begun::Claimed`]; while that claim runs (its lease,
    /// [`IDEMPOTENCY_LEASE_SECS`], not over at `now`) others with the same
    /// digest get [`Begun::InProgress`]; once finished, [`Begun::Done`].
    /// A different digest is [`Begun::Mismatch`] while the entry lives. An
    /// entry past `expires_at`, or a claim past its lease, is replaced by
    /// this one (`claim` names it, for finish and abandon; `expires_at` is
    /// when it may be purged).
    async fn begin_idempotent(
        &self,
        org: &OrgId,
        key: &IdempotencyKey,
        digest: &[u8; 32],
        claim: &str,
        now: Timestamp,
        expires_at: Timestamp,
    ) -> StoreResult<Begun>;
    /// Keeps `response` for the key claimed as `claim` until `expires_at`.
    /// `Ok(false)` when the claim is no longer this caller's (taken over).
    async fn finish_idempotent(
        &self,
        org: &OrgId,
        key: &IdempotencyKey,
        claim: &str,
        response: &KeptResponse,
        expires_at: Timestamp,
    ) -> StoreResult<bool>;
    /// Drops the claim `claim` of the key (its response is not kept), so a
    /// retry runs again.
    async fn abandon_idempotent(
        &self,
        org: &OrgId,
        key: &IdempotencyKey,
        claim: &str,
    ) -> StoreResult<()>;
}
