//! Signing keys (D23).

use gatehouse_auth::{KeyRing, MasterKey, keys::KeyError};
use gatehouse_store::SigningKeyRecord;

use crate::App;
use crate::error::{AppError, AppResult};

impl App {
    /// A new key, published now, signing after `publish_delay_secs` (D23).
    pub async fn rotate_signing_key(
        &self,
        master: &MasterKey,
        publish_delay_secs: i64,
    ) -> AppResult<SigningKeyRecord> {
        KeyRing::rotate(self.store(), master, publish_delay_secs)
            .await
            .map_err(|e| match e {
                KeyError::Store(e) => AppError::store(e, "signing key"),
                other => AppError::Internal(other.to_string()),
            })
    }
}
