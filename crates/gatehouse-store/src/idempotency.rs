//! Idempotent POSTs (D50): the claim of an `Idempotency-Key` and the
//! response kept for it.

use async_trait::async_trait;
use gatehouse_domain::{OrgId, Timestamp};

use crate::{StoreError, StoreResult};

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

/// An entry of a key as a backend reads it, for [`decide_idempotent`].
#[derive(Clone, Debug)]
pub struct StoredEntry {
    pub digest: Vec<u8>,
    /// Set while a claim runs (epoch milliseconds).
    pub lease_until: Option<i64>,
    /// Set once the request ran: the kept status.
    pub status: Option<i64>,
    pub location: Option<String>,
    pub content_type: Option<String>,
    pub body: Option<Vec<u8>>,
    pub sealed: bool,
    pub expires_at: i64,
}

/// D50: what a request with `digest` gets from the key's entry at `now_ms`,
/// or `Ok(None)` when it may claim the key (no entry, an expired entry, or
/// a claim whose lease is over: its node died mid-request). Both backends
/// call this inside the transaction that then writes the claim; neither
/// restates it.
pub fn decide_idempotent(
    entry: Option<StoredEntry>,
    digest: &[u8; 32],
    now_ms: i64,
) -> StoreResult<Option<Begun>> {
    let Some(e) = entry.filter(|e| e.expires_at > now_ms) else {
        return Ok(None);
    };
    let same = e.digest[..] == digest[..];
    match (e.lease_until, e.status) {
        // Running: its node is alive while the lease lasts.
        (Some(lease), _) if lease > now_ms => Ok(Some(if same {
            Begun::InProgress
        } else {
            Begun::Mismatch
        })),
        // Stale: taken over, whatever it was asked.
        (Some(_), _) => Ok(None),
        (None, Some(_)) if !same => Ok(Some(Begun::Mismatch)),
        (None, Some(status)) => Ok(Some(Begun::Done(KeptResponse {
            status: u16::try_from(status).map_err(|_| {
                StoreError::Internal(format!("idempotency_keys.status {status} is not a status"))
            })?,
            location: e.location,
            content_type: e.content_type,
            body: e.body.unwrap_or_default(),
            sealed: e.sealed,
        }))),
        (None, None) => Err(StoreError::Internal(
            "idempotency_keys: a row neither running nor finished".into(),
        )),
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(digest: u8, lease: Option<i64>, status: Option<i64>, expires: i64) -> StoredEntry {
        StoredEntry {
            digest: vec![digest; 32],
            lease_until: lease,
            status,
            location: Some("/v1/users/u".into()),
            content_type: None,
            body: Some(b"{}".to_vec()),
            sealed: false,
            expires_at: expires,
        }
    }

    #[test]
    fn d50_decisions() {
        let d = [1u8; 32];
        assert_eq!(decide_idempotent(None, &d, 10).unwrap(), None);
        // Expired entries and stale claims are taken over.
        assert_eq!(
            decide_idempotent(Some(entry(1, None, Some(201), 10)), &d, 10).unwrap(),
            None
        );
        assert_eq!(
            decide_idempotent(Some(entry(2, Some(5), None, 99)), &d, 10).unwrap(),
            None
        );
        // A running claim: in progress for the same request, else a mismatch.
        assert_eq!(
            decide_idempotent(Some(entry(1, Some(11), None, 99)), &d, 10).unwrap(),
            Some(Begun::InProgress)
        );
        assert_eq!(
            decide_idempotent(Some(entry(2, Some(11), None, 99)), &d, 10).unwrap(),
            Some(Begun::Mismatch)
        );
        // Finished: the kept response, or a mismatch for another request.
        let Some(Begun::Done(kept)) =
            decide_idempotent(Some(entry(1, None, Some(201), 99)), &d, 10).unwrap()
        else {
            panic!("a finished entry is replayed");
        };
        assert_eq!(
            (kept.status, kept.location.as_deref()),
            (201, Some("/v1/users/u"))
        );
        assert_eq!(
            decide_idempotent(Some(entry(2, None, Some(201), 99)), &d, 10).unwrap(),
            Some(Begun::Mismatch)
        );
        // Corrupt rows are errors, never a default.
        assert!(decide_idempotent(Some(entry(1, None, None, 99)), &d, 10).is_err());
        assert!(decide_idempotent(Some(entry(1, None, Some(70_000), 99)), &d, 10).is_err());
    }
}
