//! D23 (continued): the values sealed under the master key, read and
//! re-sealed by `gatehouse master-key rotate`, and the rotation under way.
//!
//! Unscoped, like the signing keys: one master key seals every
//! organization's values, and only the operator's rotation walks them all.

use async_trait::async_trait;
use gatehouse_domain::Timestamp;

use crate::StoreResult;

pub use gatehouse_domain::sealed::{SealedAt, SealedKind, SealedValue};

/// A master-key rotation under way: the next key's id, and the next key
/// sealed under the current one (so every server holding the current key
/// learns the next).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MasterKeyRotation {
    pub next_id: String,
    pub next_sealed: Vec<u8>,
    pub started_at: Timestamp,
}

/// A serving process and the master keys it holds, as it last said.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyHolder {
    pub holder: String,
    pub key_ids: Vec<String>,
    pub seen_at: Timestamp,
}

#[async_trait]
pub trait SealedStore: Send + Sync {
    /// The rotation under way, if any.
    async fn master_key_rotation(&self) -> StoreResult<Option<MasterKeyRotation>>;
    /// Records `rotation` as the one under way, when none is; false when
    /// one is (another run got there first).
    async fn begin_master_key_rotation(&self, rotation: &MasterKeyRotation) -> StoreResult<bool>;
    /// Ends the rotation to `next_id`; false when it is not the one under
    /// way.
    async fn end_master_key_rotation(&self, next_id: &str) -> StoreResult<bool>;
    /// Records that serving process `holder` holds the keys `key_ids` at
    /// `now`, and forgets holders not seen for a day.
    async fn record_key_holder(
        &self,
        holder: &str,
        key_ids: &[String],
        now: Timestamp,
    ) -> StoreResult<()>;
    /// The holders seen at or after `since`.
    async fn key_holders(&self, since: Timestamp) -> StoreResult<Vec<KeyHolder>>;
    /// Up to `limit` values of `kind`, in storage order, after `after` (a
    /// value of the same kind from the previous page).
    async fn sealed_values(
        &self,
        kind: SealedKind,
        after: Option<&SealedAt>,
        limit: u32,
    ) -> StoreResult<Vec<SealedValue>>;
    /// Replaces the value at `at` by `new` when it still holds `old`; false
    /// when it changed or went meanwhile (a server wrote it again).
    async fn reseal(&self, at: &SealedAt, old: &[u8], new: &[u8]) -> StoreResult<bool>;
}
