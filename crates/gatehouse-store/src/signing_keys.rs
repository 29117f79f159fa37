//! Token signing keys (D23).

use async_trait::async_trait;
use gatehouse_domain::Timestamp;

use crate::StoreResult;

/// A signing key as stored: the private half encrypted under the master key (D23).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SigningKeyRecord {
    pub kid: String,
    /// AES-256-GCM: nonce ‖ ciphertext ‖ tag of the PKCS#8 document.
    pub private_key_encrypted: Vec<u8>,
    /// Uncompressed SEC1 point of the public key.
    pub public_key: Vec<u8>,
    pub created_at: Timestamp,
    /// Tokens are signed with it from this instant on (publish delay).
    pub activates_at: Timestamp,
    /// Not published any more after this instant.
    pub expires_at: Option<Timestamp>,
}

/// Token signing keys (D23).
///
/// Unscoped: one key set signs the tokens of every organization and is
/// published in one JWKS.
#[async_trait]
pub trait SigningKeyStore: Send + Sync {
    async fn signing_keys(&self) -> StoreResult<Vec<SigningKeyRecord>>;
    async fn insert_signing_key(&self, key: &SigningKeyRecord) -> StoreResult<()>;
}
