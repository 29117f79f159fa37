//! Signing keys (D23).

use gatehouse_auth::{KeyRing, MasterKey, keys::KeyError};
use gatehouse_store::SigningKeyRecord;

use crate::App;
use crate::Resource;
use crate::error::{AppError, AppResult};

impl App {
    /// A new key, published now, signing after `publish_delay_secs` (D23).
    pub async fn rotate_signing_key(
        &self,
        master: &MasterKey,
        publish_delay_secs: u64,
    ) -> AppResult<SigningKeyRecord> {
        // D23: a key is published first and signs later; a year is as long
        // as any verifier needs to see it first.
        let delay = publish_delay_secs.min(365 * 86_400) as i64;
        KeyRing::rotate(self.store(), master, delay)
            .await
            .map_err(|e| match e {
                KeyError::Store(e) => AppError::store(e, Resource::SigningKey),
                other => AppError::Internal(other.to_string()),
            })
    }
}
