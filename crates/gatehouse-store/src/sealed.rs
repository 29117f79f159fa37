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

#[async_trait]
pub trait SealedStore: Send + Sync {
    /// The rotation under way, if any.
    async fn master_key_rotation(&self) -> StoreResult<Option<MasterKeyRotation>>;
    /// Records `rotation` as the one under way (replacing any before it).
    async fn begin_master_key_rotation(&self, rotation: &MasterKeyRotation) -> StoreResult<()>;
    /// Ends the rotation to `next_id`; nothing when another is recorded.
    async fn end_master_key_rotation(&self, next_id: &str) -> StoreResult<()>;
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
