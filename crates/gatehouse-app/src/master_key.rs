//! D23 (continued): rotating the master key.
//!
//! `gatehouse master-key rotate` records the rotation in storage with the
//! next key sealed under the current one and waits until every live server
//! holds it: each looks at start and every housekeeping round (5 s), and
//! records the ids of the keys it holds (`SealedStore::record_key_holder`).
//! Then it re-seals every value held under the master key (D3 revised) with
//! the next key. A server that learned the next key seals with it at once
//! and opens under both, so nothing it reads is ever unreadable while the
//! values move; once every value opens under the next key, the command
//! ends the rotation, and servers forget the older keys at their next
//! round: from then on they need only the new key.
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
/// A holder not seen for this long is taken for gone (they write every 5 s).
const HOLDER_FRESH_SECS: i64 = 15;
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
    #[error(
        "the current master key opens no signing key: give the key the servers use (GATEHOUSE_MASTER_KEY or <data_dir>/master.key)"
    )]
    WrongKey,
    #[error("another master-key rotation began meanwhile; run the rotation again")]
    Concurrent,
    /// A rotation to another key is under way: servers seal with that key.
    #[error(
        "a rotation to master key {0} is under way: run the rotation again with that key's file to complete it first"
    )]
    OtherUnderWay(String),
    #[error(
        "{0} did not report the new key within {1} s; the rotation stays under way: check those servers (they must run this release), then run it again"
    )]
    Lagging(String, u64),
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
    /// Every housekeeping round, and when a sealed value does not open:
    /// learns a rotation's next key, forgets the older keys once no
    /// rotation is under way, and records the keys this process holds.
    pub async fn learn_master_key(&self) {
        let Some(auth) = self.auth() else { return };
        let ring = auth.keys().master();
        let store = sealed_store(self);
        let outcome = async {
            match store.master_key_rotation().await? {
                Some(_) => {
                    learn_rotation(store, ring).await?;
                }
                None => {
                    if ring.keep_newest() {
                        tracing::info!(
                            key_id = %ring.ids()[0],
                            "the master-key rotation ended; the older keys are forgotten"
                        );
                    }
                }
            }
            store
                .record_key_holder(ring.holder(), &ring.ids(), Timestamp::now())
                .await
        }
        .await;
        if let Err(e) = outcome {
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
    /// [`App::end_master_key_rotation`]). `settle` is how long, at most,
    /// the servers get to report the next key before the values move.
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
        } else if let Some(r) = earlier.as_ref().filter(|r| r.next_id != next.id()) {
            // Servers seal with that rotation's key already: finish it first.
            return Err(MasterKeyError::OtherUnderWay(r.next_id.clone()));
        } else {
            // A run to this key stopped before: what it moved opens under
            // the key as well (learned like any server).
            learn_rotation(store, &opening).await?;
            // The key the servers use opens the signing keys.
            if let Some(k) = store
                .sealed_values(SealedKind::SigningKey, None, 1)
                .await?
                .first()
                && aad::of(&k.at)
                    .and_then(|data| opening.decrypt(&k.sealed, &data))
                    .is_none()
            {
                return Err(MasterKeyError::WrongKey);
            }
            opening.learn(next.clone());
            let begun = earlier.is_some()
                || store
                    .begin_master_key_rotation(&MasterKeyRotation {
                        next_id: next.id(),
                        next_sealed: current
                            .encrypt(next.to_text().as_bytes(), &aad::next_master_key(&next.id())),
                        started_at: Timestamp::now(),
                    })
                    .await?;
            if !begun {
                return Err(MasterKeyError::Concurrent);
            }
            tracing::info!(key_id = %next.id(), "master-key rotation begun; waiting for every server to hold the new key");
            wait_for_holders(store, &next.id(), settle).await?;
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

    /// Ends the rotation to `next`: servers forget the older keys at their
    /// next round and need only the new key.
    pub async fn end_master_key_rotation(&self, next: &MasterKey) -> Result<(), MasterKeyError> {
        if !sealed_store(self)
            .end_master_key_rotation(&next.id())
            .await?
        {
            return Err(MasterKeyError::Concurrent);
        }
        tracing::info!(key_id = %next.id(), "master-key rotation complete");
        Ok(())
    }
}

/// Waits (at most `wait`) until every holder seen lately holds `next_id`.
async fn wait_for_holders(
    store: &dyn SealedStore,
    next_id: &str,
    wait: Duration,
) -> Result<(), MasterKeyError> {
    let start = std::time::Instant::now();
    loop {
        let fresh = Timestamp::now().plus_seconds(-HOLDER_FRESH_SECS);
        let lagging: Vec<String> = store
            .key_holders(fresh)
            .await?
            .into_iter()
            .filter(|h| !h.key_ids.iter().any(|id| id == next_id))
            .map(|h| h.holder)
            .collect();
        if lagging.is_empty() {
            return Ok(());
        }
        if start.elapsed() >= wait {
            let names = if lagging.len() == 1 {
                format!("server {}", lagging[0])
            } else {
                format!("{} servers ({})", lagging.len(), lagging.join(", "))
            };
            return Err(MasterKeyError::Lagging(names, wait.as_secs()));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// This area's view of storage: the `SealedStore` trait only (issue 25).
fn sealed_store(app: &App) -> &dyn SealedStore {
    app.0.store.as_ref()
}
