//! D23 (continued): rotating the master key.
//!
//! `gatehouse master-key rotate` records the rotation in storage with the
//! next key sealed under the current one, waits while every server learns
//! it (they look at every housekeeping round, every 5 s, and at start),
//! then re-seals every value held under the master key (D3 revised) with
//! the next key. A server that learned the next key seals with it at once
//! and opens under both, so nothing it reads is ever unreadable while the
//! values move; once every value opens under the next key, the command
//! ends the rotation and servers need only the new key.
//!
//! Each value is replaced only over the very bytes that were read (a
//! compare-and-set), so a value a server wrote meanwhile is never
//! overwritten with an older plaintext; the pass runs again until every
//! value opens under the next key.

use std::collections::BTreeMap;
use std::time::Duration;

use gatehouse_auth::keys::aad;
use gatehouse_auth::{MasterKey, MasterKeys};
use gatehouse_domain::Timestamp;
use gatehouse_store::{MasterKeyRotation, SealedKind, SealedStore, StoreError};

use crate::App;

/// Values read per page.
const PAGE: u32 = 200;
/// Passes before the rotation gives up on values that keep changing.
const MAX_PASSES: usize = 5;

/// Why a rotation stopped.
#[derive(Debug, thiserror::Error)]
pub enum MasterKeyError {
    #[error("the new key is the master key in use already (key id {0})")]
    SameKey(String),
    /// Values that open under none of the keys; the rotation stays under
    /// way (servers keep opening under both keys) until they are dealt with.
    #[error(
        "{0}: these values open under neither the current nor the new master key; the rotation stays under way (servers keep both keys) until it is run again"
    )]
    Unreadable(String),
    #[error("values kept changing while they were re-sealed ({0} passes); run the rotation again")]
    Unsettled(usize),
    #[error("{0}")]
    Store(#[from] StoreError),
}

/// What a rotation did.
#[derive(Debug, Default)]
pub struct Rotated {
    /// The new key's id.
    pub key_id: String,
    /// Values re-sealed, per kind.
    pub resealed: BTreeMap<&'static str, u64>,
    /// Values found under the new key already (sealed by a server that had
    /// learned it, or by an earlier run).
    pub already: u64,
}

/// Learns the next key of a rotation under way, when `ring` opens it; the
/// id learned, if any. A server calls it at start and every housekeeping
/// round.
pub async fn learn_rotation(
    store: &dyn SealedStore,
    ring: &MasterKeys,
) -> Result<Option<String>, StoreError> {
    let Some(r) = store.master_key_rotation().await? else {
        return Ok(None);
    };
    if ring.knows(&r.next_id) {
        return Ok(None);
    }
    let next = ring
        .decrypt(&r.next_sealed, &aad::next_master_key(&r.next_id))
        .and_then(|text| String::from_utf8(text).ok())
        .and_then(|text| MasterKey::parse(&text).ok())
        .filter(|k| k.id() == r.next_id);
    match next {
        Some(k) => {
            ring.learn(k);
            tracing::info!(
                key_id = %r.next_id,
                "learned the next master key of a rotation under way; sealing with it from now on"
            );
            Ok(Some(r.next_id))
        }
        None => {
            tracing::warn!(
                key_id = %r.next_id,
                "a master-key rotation is under way, but its next key does not open under this process's master key"
            );
            Ok(None)
        }
    }
}

impl App {
    /// Learns a rotation's next key (every housekeeping round).
    pub async fn learn_master_key(&self) {
        if let Some(auth) = self.auth()
            && let Err(e) = learn_rotation(sealed_store(self), auth.keys().master()).await
        {
            tracing::warn!(error = %e, "reading the master-key rotation failed");
        }
    }

    /// The master keys of an operator command: `current`, and a rotation's
    /// next key when one is under way (a key it stores is sealed with it).
    pub async fn operator_master_keys(&self, current: MasterKey) -> Result<MasterKeys, StoreError> {
        let ring = MasterKeys::new(current);
        learn_rotation(sealed_store(self), &ring).await?;
        Ok(ring)
    }

    /// Re-seals every value under `next` (the rotation's work; the caller
    /// then keeps the new key where servers read it and calls
    /// [`App::end_master_key_rotation`]). `settle` is how long servers get
    /// to learn the next key before the values move.
    pub async fn rotate_master_key(
        &self,
        current: &MasterKey,
        next: &MasterKey,
        settle: Duration,
    ) -> Result<Rotated, MasterKeyError> {
        let store = sealed_store(self);
        let opening = MasterKeys::new(current.clone());
        let earlier = store.master_key_rotation().await?;
        if next.id() == current.id() {
            // An earlier run re-sealed everything and kept the new key, but
            // stopped before it ended the rotation: check, then end it.
            if earlier.is_none_or(|r| r.next_id != current.id()) {
                return Err(MasterKeyError::SameKey(current.id()));
            }
        } else {
            // A rotation begun before, to another key, may have sealed
            // values under its key: open those as well.
            learn_rotation(store, &opening).await?;
            opening.learn(next.clone());
            store
                .begin_master_key_rotation(&MasterKeyRotation {
                    next_id: next.id(),
                    next_sealed: current
                        .encrypt(next.to_text().as_bytes(), &aad::next_master_key(&next.id())),
                    started_at: Timestamp::now(),
                })
                .await?;
            tracing::info!(key_id = %next.id(), wait_secs = settle.as_secs(), "master-key rotation begun; servers learn the new key");
            tokio::time::sleep(settle).await;
        }
        let mut done = Rotated {
            key_id: next.id(),
            ..Rotated::default()
        };
        for pass in 0..MAX_PASSES {
            let mut moved = 0u64;
            let mut changed = 0u64;
            let mut unreadable: BTreeMap<&'static str, u64> = BTreeMap::new();
            for kind in SealedKind::ALL {
                let mut after = None;
                loop {
                    let page = store.sealed_values(kind, after.as_ref(), PAGE).await?;
                    for v in &page {
                        let Some(data) = aad::of(&v.at) else {
                            *unreadable.entry(kind.as_str()).or_default() += 1;
                            continue;
                        };
                        if next.decrypt(&v.sealed, &data).is_some() {
                            if pass == 0 {
                                done.already += 1;
                            }
                            continue;
                        }
                        let Some(plain) = opening.decrypt(&v.sealed, &data) else {
                            *unreadable.entry(kind.as_str()).or_default() += 1;
                            continue;
                        };
                        if store
                            .reseal(&v.at, &v.sealed, &next.encrypt(&plain, &data))
                            .await?
                        {
                            *done.resealed.entry(kind.as_str()).or_default() += 1;
                            moved += 1;
                        } else {
                            changed += 1;
                        }
                    }
                    if page.len() < PAGE as usize {
                        break;
                    }
                    after = page.last().map(|v| v.at.clone());
                }
            }
            if !unreadable.is_empty() {
                let list = unreadable
                    .iter()
                    .map(|(k, n)| format!("{n} {k}"))
                    .collect::<Vec<_>>()
                    .join(", ");
                return Err(MasterKeyError::Unreadable(list));
            }
            // A pass that moved nothing and met no change found every value
            // under the next key.
            if moved == 0 && changed == 0 {
                return Ok(done);
            }
        }
        Err(MasterKeyError::Unsettled(MAX_PASSES))
    }

    /// Ends the rotation to `next`: servers need only the new key now.
    pub async fn end_master_key_rotation(&self, next: &MasterKey) -> Result<(), MasterKeyError> {
        sealed_store(self)
            .end_master_key_rotation(&next.id())
            .await?;
        tracing::info!(key_id = %next.id(), "master-key rotation complete");
        Ok(())
    }
}

/// This area's view of storage: the `SealedStore` trait only (issue 25).
fn sealed_store(app: &App) -> &dyn SealedStore {
    app.0.store.as_ref()
}
