//! Signing keys (D23): the key ring loaded from storage, kept in step with
//! it, and rotated. The keys' cryptography is `gatehouse_auth::keys`'.

use gatehouse_auth::keys::KeyError;
use gatehouse_auth::{KeyRing, MasterKey, MasterKeys, OAuthError};
use gatehouse_domain::Timestamp;
use gatehouse_store::{SigningKeyRecord, StoreError};

use crate::App;
use crate::Resource;
use crate::error::{AppError, AppResult};

fn key_store_error(e: StoreError) -> KeyError {
    KeyError::Store(e.to_string())
}

/// Loads the key ring of a serving process, storing the first key if none
/// signs yet (D23). A master-key rotation under way is learned first (D23
/// continued), so a process started during one opens what it re-sealed.
pub async fn load_key_ring(
    store: &dyn gatehouse_store::Store,
    master: MasterKey,
) -> Result<KeyRing, KeyError> {
    let master = MasterKeys::new(master);
    crate::master_key::learn_rotation(store, &master)
        .await
        .map_err(|e| KeyError::Store(e.to_string()))?;
    let mut records = store.signing_keys().await.map_err(key_store_error)?;
    if let Some(first) = KeyRing::first_key(&master, &records) {
        store
            .insert_signing_key(&first)
            .await
            .map_err(key_store_error)?;
        records = store.signing_keys().await.map_err(key_store_error)?;
    }
    KeyRing::from_records(master, &records)
}

impl App {
    /// A new key, published now, signing after `publish_delay_secs` (D23).
    pub async fn rotate_signing_key(
        &self,
        master: &MasterKeys,
        publish_delay_secs: u64,
    ) -> AppResult<SigningKeyRecord> {
        // D23: a key is published first and signs later; a year is as long
        // as any verifier needs to see it first.
        let delay = publish_delay_secs.min(365 * 86_400) as i64;
        let rec = KeyRing::rotation(master, delay);
        signing_key_store(self)
            .insert_signing_key(&rec)
            .await
            .map_err(|e| AppError::store(e, Resource::SigningKey))?;
        Ok(rec)
    }

    /// Every signing key's record, for `gatehouse keys list` (which shows
    /// only public parts: kid, times, and the schedule's state).
    pub async fn signing_key_records(&self) -> AppResult<Vec<SigningKeyRecord>> {
        signing_key_store(self)
            .signing_keys()
            .await
            .map_err(|e| AppError::store(e, Resource::SigningKey))
    }

    /// Reloads the key ring now: a `gatehouse keys rotate` run by another
    /// process is published on the next JWKS request (D23, D40: no stale
    /// cache).
    pub async fn reload_keys(&self) -> Result<(), KeyError> {
        let records = signing_key_store(self)
            .signing_keys()
            .await
            .map_err(key_store_error)?;
        self.authority().keys().replace(&records)
    }

    /// Re-reads signing keys when one is due to activate or retire.
    pub async fn refresh_keys_if_due(&self) -> Result<(), OAuthError> {
        if self.authority().keys().stale(Timestamp::now()) {
            self.reload_keys()
                .await
                .map_err(|e| OAuthError::internal(e.to_string()))?;
        }
        Ok(())
    }
}

/// This area's view of storage: the `SigningKeyStore` trait only (issue 25).
fn signing_key_store(app: &App) -> &dyn gatehouse_store::SigningKeyStore {
    app.0.store.as_ref()
}
