//! Token signing keys (D23).

use async_trait::async_trait;

use crate::StoreResult;

pub use gatehouse_domain::auth_state::SigningKeyRecord;

/// Token signing keys (D23).
///
/// Unscoped: one key set signs the tokens of every organization and is
/// published in one JWKS.
#[async_trait]
pub trait SigningKeyStore: Send + Sync {
    async fn signing_keys(&self) -> StoreResult<Vec<SigningKeyRecord>>;
    async fn insert_signing_key(&self, key: &SigningKeyRecord) -> StoreResult<()>;
}
