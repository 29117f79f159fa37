//! Signing keys (D23): ES256 key pairs kept in the database with the private
//! half encrypted (AES-256-GCM) under the master key; the parsed key pair is
//! held in memory so signing never re-parses it.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use aws_lc_rs::aead::{AES_256_GCM, Aad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{
    ECDSA_P256_SHA256_FIXED, ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair,
    UnparsedPublicKey,
};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use gatehouse_domain::auth_state::SigningKeyRecord;
use gatehouse_domain::{Timestamp, random};

use crate::ACCESS_TOKEN_TTL_SECS;

/// The key-encryption key (D23): 32 bytes from `GATEHOUSE_MASTER_KEY` or
/// `<data_dir>/master.key`.
#[derive(Clone)]
pub struct MasterKey([u8; 32]);

impl std::fmt::Debug for MasterKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("MasterKey(…)")
    }
}

impl MasterKey {
    pub fn generate() -> Self {
        Self(random::bytes::<32>())
    }

    /// From its text form: 64 hex digits or base64 (standard or URL-safe) of 32 bytes.
    pub fn parse(text: &str) -> Result<Self, String> {
        let t = text.trim();
        let bytes = if t.len() == 64 && t.bytes().all(|b| b.is_ascii_hexdigit()) {
            (0..32)
                .map(|i| u8::from_str_radix(&t[2 * i..2 * i + 2], 16).unwrap())
                .collect::<Vec<u8>>()
        } else {
            base64::engine::general_purpose::STANDARD
                .decode(t)
                .or_else(|_| B64.decode(t.trim_end_matches('=')))
                .map_err(|_| {
                    "the master key must be 64 hex digits or base64 of 32 bytes".to_string()
                })?
        };
        let arr: [u8; 32] = bytes
            .try_into()
            .map_err(|_| "the master key must be exactly 32 bytes".to_string())?;
        Ok(Self(arr))
    }

    /// The text form written to `master.key` (base64).
    pub fn to_text(&self) -> String {
        base64::engine::general_purpose::STANDARD.encode(self.0)
    }

    fn aead(&self) -> LessSafeKey {
        LessSafeKey::new(UnboundKey::new(&AES_256_GCM, &self.0).expect("32-byte AES-256 key"))
    }

    /// A key for `purpose` derived from the master key (HMAC-SHA-256), so
    /// a derived value never reveals the master key or another purpose's.
    pub fn derive(&self, purpose: &[u8]) -> [u8; 32] {
        let key = aws_lc_rs::hmac::Key::new(aws_lc_rs::hmac::HMAC_SHA256, &self.0);
        let tag = aws_lc_rs::hmac::sign(&key, purpose);
        let mut out = [0u8; 32];
        out.copy_from_slice(tag.as_ref());
        out
    }

    /// The key's public name (D23 continued): 16 hex digits of an HMAC of a
    /// fixed label under the key, which tells nothing of the key itself.
    pub fn id(&self) -> String {
        self.derive(b"gatehouse master key id v1")[..8]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }

    /// nonce ‖ ciphertext ‖ tag.
    pub fn encrypt(&self, plaintext: &[u8], aad: &[u8]) -> Vec<u8> {
        let nonce_bytes = random::bytes::<NONCE_LEN>();
        let mut buf = plaintext.to_vec();
        self.aead()
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce_bytes),
                Aad::from(aad),
                &mut buf,
            )
            .expect("AES-GCM sealing cannot fail for small inputs");
        let mut out = nonce_bytes.to_vec();
        out.extend_from_slice(&buf);
        out
    }

    pub fn decrypt(&self, sealed: &[u8], aad: &[u8]) -> Option<Vec<u8>> {
        if sealed.len() < NONCE_LEN {
            return None;
        }
        let (nonce, rest) = sealed.split_at(NONCE_LEN);
        let mut buf = rest.to_vec();
        let nonce = Nonce::try_assume_unique_for_key(nonce).ok()?;
        let plain = self
            .aead()
            .open_in_place(nonce, Aad::from(aad), &mut buf)
            .ok()?;
        Some(plain.to_vec())
    }
}

/// The master keys a process holds (D23 continued): the newest seals,
/// every one opens. A process starts with one; during a rotation it learns
/// the next (sealed under the current one in storage), seals with it at
/// once and still opens what the current one sealed, so no value is ever
/// unreadable to it while `gatehouse master-key rotate` re-seals them.
#[derive(Clone)]
pub struct MasterKeys {
    keys: Arc<RwLock<Vec<MasterKey>>>,
    /// This process's name among the key holders a rotation waits for.
    holder: Arc<str>,
}

impl std::fmt::Debug for MasterKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("MasterKeys").field(&self.ids()).finish()
    }
}

impl MasterKeys {
    pub fn new(key: MasterKey) -> Self {
        Self {
            keys: Arc::new(RwLock::new(vec![key])),
            holder: random::token("mkh_", 96).into(),
        }
    }

    fn keys(&self) -> std::sync::RwLockReadGuard<'_, Vec<MasterKey>> {
        self.keys.read().unwrap_or_else(|e| e.into_inner())
    }

    /// A random name of this holder of keys (one per process).
    pub fn holder(&self) -> &str {
        &self.holder
    }

    /// Forgets every key but the newest (a rotation ended: what the older
    /// keys sealed has been re-sealed); whether any was forgotten.
    pub fn keep_newest(&self) -> bool {
        let mut keys = self.keys.write().unwrap_or_else(|e| e.into_inner());
        let had = keys.len();
        keys.truncate(1);
        had > 1
    }

    /// Sealed under the newest key.
    pub fn encrypt(&self, plaintext: &[u8], aad: &[u8]) -> Vec<u8> {
        self.keys()[0].encrypt(plaintext, aad)
    }

    /// Opened under whichever key sealed it.
    pub fn decrypt(&self, sealed: &[u8], aad: &[u8]) -> Option<Vec<u8>> {
        self.keys().iter().find_map(|k| k.decrypt(sealed, aad))
    }

    /// A key for `purpose` derived from the newest key.
    pub fn derive(&self, purpose: &[u8]) -> [u8; 32] {
        self.keys()[0].derive(purpose)
    }

    /// The keys for `purpose` derived from every key held, newest first (a
    /// value derived a moment before the process learned a key still
    /// checks).
    pub fn derived(&self, purpose: &[u8]) -> Vec<[u8; 32]> {
        self.keys().iter().map(|k| k.derive(purpose)).collect()
    }

    /// The ids of the keys held, newest first.
    pub fn ids(&self) -> Vec<String> {
        self.keys().iter().map(MasterKey::id).collect()
    }

    pub fn knows(&self, id: &str) -> bool {
        self.keys().iter().any(|k| k.id() == id)
    }

    /// Seals with `next` from now on, and opens with it besides the keys
    /// held; nothing when it is held already.
    pub fn learn(&self, next: MasterKey) {
        let mut keys = self.keys.write().unwrap_or_else(|e| e.into_inner());
        if !keys.iter().any(|k| k.0 == next.0) {
            keys.insert(0, next);
        }
    }
}

/// The associated data of each value sealed under the master key (D3
/// revised, D23 continued): the one place each is named, for the code that
/// seals and opens it and for the rotation that re-seals it.
pub mod aad {
    use gatehouse_domain::sealed::SealedAt;

    pub fn signing_key(kid: &str) -> Vec<u8> {
        format!("gatehouse-signing-key:{kid}").into_bytes()
    }

    /// D24: a successor pair is bound to the digest of the refresh token it
    /// answers.
    pub fn successor_pair(digest: &[u8]) -> Vec<u8> {
        digest.to_vec()
    }

    pub fn kept_response(org: &str, lineage: &str, key: &str) -> Vec<u8> {
        format!("idempotency\0{org}\0{lineage}\0{key}").into_bytes()
    }

    pub fn webhook_secret(org: &str, endpoint: &str) -> Vec<u8> {
        format!("gatehouse webhook secret {org} {endpoint}").into_bytes()
    }

    pub fn totp_seed(org: &str, user: &str, factor: &str) -> Vec<u8> {
        format!("totp\0{org}\0{user}\0{factor}").into_bytes()
    }

    /// The name the recovery-code key is stored under, and its data.
    pub const RECOVERY_KEY_NAME: &str = "recovery_codes";
    pub const RECOVERY_KEY: &[u8] = b"gatehouse recovery-code key v1";

    /// The name the audit log's identifier key (D58) is stored under, and
    /// its data.
    pub const AUDIT_IDENTIFIER_KEY_NAME: &str = "audit_identifiers";
    pub const AUDIT_IDENTIFIER_KEY: &[u8] = b"gatehouse audit identifier key v1";

    /// A rotation's next key, sealed under the current one.
    pub fn next_master_key(next_id: &str) -> Vec<u8> {
        format!("gatehouse master key rotation {next_id}").into_bytes()
    }

    /// The data of the value stored at `at`; `None` for a sealed key whose
    /// name no release seals.
    pub fn of(at: &SealedAt) -> Option<Vec<u8>> {
        Some(match at {
            SealedAt::SigningKey { kid } => signing_key(kid),
            SealedAt::SuccessorPair { digest } => successor_pair(digest),
            SealedAt::KeptResponse {
                org, lineage, key, ..
            } => kept_response(org, lineage, key),
            SealedAt::WebhookSecret { org, endpoint, .. } => webhook_secret(org, endpoint),
            SealedAt::TotpSeed { org, user, factor } => totp_seed(org, user, factor),
            SealedAt::SealedKey { name } if name == RECOVERY_KEY_NAME => RECOVERY_KEY.to_vec(),
            SealedAt::SealedKey { name } if name == AUDIT_IDENTIFIER_KEY_NAME => {
                AUDIT_IDENTIFIER_KEY.to_vec()
            }
            SealedAt::SealedKey { .. } => return None,
        })
    }
}

/// A loaded signing key.
pub struct SigningKey {
    pub kid: String,
    pair: EcdsaKeyPair,
    /// base64url of the JOSE header, computed once.
    pub(crate) header_b64: String,
}

impl SigningKey {
    pub(crate) fn sign(&self, rng: &SystemRandom, msg: &[u8]) -> Vec<u8> {
        self.pair
            .sign(rng, msg)
            .expect("ECDSA P-256 signing cannot fail")
            .as_ref()
            .to_vec()
    }
}

/// What the key ring holds at one moment.
pub struct KeySet {
    pub signing: Arc<SigningKey>,
    pub(crate) verifying: HashMap<String, UnparsedPublicKey<Vec<u8>>>,
    /// The JWKS document, serialized once.
    pub jwks: Arc<str>,
    /// When this set next needs rebuilding (a pending key activates, an old one expires).
    next_change: Option<Timestamp>,
}

/// All signing keys: the one that signs, all that verify, the JWKS.
pub struct KeyRing {
    master: MasterKeys,
    current: RwLock<Arc<KeySet>>,
}

#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    /// Storage could not be read or written (the application layer's words).
    #[error("{0}")]
    Store(String),
    #[error(
        "signing key {0} cannot be decrypted: is GATEHOUSE_MASTER_KEY the key this database was created with?"
    )]
    Decrypt(String),
    #[error("signing key {0} is corrupt")]
    Corrupt(String),
}

fn kid_aad(kid: &str) -> Vec<u8> {
    aad::signing_key(kid)
}

impl KeyRing {
    /// The ring of the stored `records`. When none signs yet, the
    /// application layer first stores [`KeyRing::first_key`].
    pub fn from_records(
        master: MasterKeys,
        records: &[SigningKeyRecord],
    ) -> Result<Self, KeyError> {
        let set = build(&master, records, Timestamp::now())?;
        Ok(Self {
            master,
            current: RwLock::new(Arc::new(set)),
        })
    }

    /// The first key when none of `records` signs yet (it signs at once:
    /// nobody can have cached a JWKS without it yet); `None` otherwise.
    pub fn first_key(
        master: &MasterKeys,
        records: &[SigningKeyRecord],
    ) -> Option<SigningKeyRecord> {
        let now = Timestamp::now();
        (!records.iter().any(|r| r.activates_at <= now)).then(|| new_record(master, now, now))
    }

    /// A new key, published now, that signs after `publish_delay_secs`
    /// (D23), for the application layer to store.
    pub fn rotation(master: &MasterKeys, publish_delay_secs: i64) -> SigningKeyRecord {
        let now = Timestamp::now();
        new_record(master, now, now.plus_seconds(publish_delay_secs))
    }

    /// The keys in force now; rebuilds when a pending key has activated or an old one expired.
    pub fn current(&self) -> Arc<KeySet> {
        self.current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Rebuilds from the keys as storage holds them now (another process
    /// may have rotated them).
    pub fn replace(&self, records: &[SigningKeyRecord]) -> Result<(), KeyError> {
        let set = build(&self.master, records, Timestamp::now())?;
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(set);
        Ok(())
    }

    /// The key-encryption key (also seals D24's successor pairs).
    pub fn master(&self) -> &MasterKeys {
        &self.master
    }

    /// Whether the set in memory is due for a rebuild.
    pub fn stale(&self, now: Timestamp) -> bool {
        self.current().next_change.is_some_and(|t| t <= now)
    }
}

/// A key set of one fresh key, for other modules' unit tests.
#[cfg(test)]
pub(crate) fn test_key_set() -> KeySet {
    let m = MasterKeys::new(MasterKey::generate());
    let t0 = Timestamp::from_millis(1_000_000_000);
    let rec = new_record(&m, t0, t0);
    build(&m, &[rec], t0.plus_seconds(1)).expect("a fresh key builds")
}

fn new_record(master: &MasterKeys, now: Timestamp, activates_at: Timestamp) -> SigningKeyRecord {
    let rng = SystemRandom::new();
    let doc = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng)
        .expect("P-256 key generation cannot fail");
    let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, doc.as_ref())
        .expect("a freshly generated key parses");
    let kid = random::token("", 96);
    SigningKeyRecord {
        private_key_encrypted: master.encrypt(doc.as_ref(), &kid_aad(&kid)),
        public_key: pair.public_key().as_ref().to_vec(),
        kid,
        created_at: now,
        activates_at,
        expires_at: None,
    }
}

/// Where a signing key stands (D23), as [`schedule`] reads the records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyState {
    /// Published, signing from its `activates_at` (publish before sign).
    Upcoming,
    /// The newest active key: it signs every token now.
    Signing,
    /// Replaced, still published until every token it signed has expired.
    Retiring,
    /// No longer published.
    Retired,
}

impl KeyState {
    pub fn as_str(self) -> &'static str {
        match self {
            KeyState::Upcoming => "upcoming",
            KeyState::Signing => "signing",
            KeyState::Retiring => "retiring",
            KeyState::Retired => "retired",
        }
    }
}

/// One key's place in the schedule.
#[derive(Clone, Copy, Debug)]
pub struct ScheduledKey<'a> {
    pub record: &'a SigningKeyRecord,
    pub state: KeyState,
    /// When it stops being published: one token lifetime (and a minute)
    /// after its successor took over, or its own expiry, whichever is first.
    pub retire_at: Option<Timestamp>,
}

impl ScheduledKey<'_> {
    /// In the JWKS at `now`.
    pub fn published(&self, now: Timestamp) -> bool {
        match self.state {
            KeyState::Upcoming => true,
            _ => self.retire_at.is_none_or(|t| t > now),
        }
    }
}

/// The signing keys' schedule at `now` (D23), the one rule the key ring
/// signs and publishes by and `gatehouse keys list` shows: the newest active
/// key signs; a key stays published until every token it could have signed
/// has expired (one token lifetime after its successor took over); keys that
/// will sign later are published already. Active keys oldest first, then
/// the upcoming ones.
pub fn schedule(records: &[SigningKeyRecord], now: Timestamp) -> Vec<ScheduledKey<'_>> {
    let mut active: Vec<&SigningKeyRecord> =
        records.iter().filter(|r| r.activates_at <= now).collect();
    active.sort_by_key(|r| (r.activates_at, r.created_at));
    let last = active.len().checked_sub(1);
    let mut out = Vec::with_capacity(records.len());
    for (i, r) in active.iter().enumerate() {
        let retire_at = active
            .get(i + 1)
            .map(|succ| succ.activates_at.plus_seconds(ACCESS_TOKEN_TTL_SECS + 60));
        let retire_at = match (retire_at, r.expires_at) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let state = if Some(i) == last {
            KeyState::Signing
        } else if retire_at.is_some_and(|t| t <= now) {
            KeyState::Retired
        } else {
            KeyState::Retiring
        };
        out.push(ScheduledKey {
            record: r,
            state,
            retire_at,
        });
    }
    let mut upcoming: Vec<&SigningKeyRecord> =
        records.iter().filter(|r| r.activates_at > now).collect();
    upcoming.sort_by_key(|r| (r.activates_at, r.created_at));
    out.extend(upcoming.into_iter().map(|r| ScheduledKey {
        record: r,
        state: KeyState::Upcoming,
        retire_at: r.expires_at,
    }));
    out
}

fn build(
    master: &MasterKeys,
    records: &[SigningKeyRecord],
    now: Timestamp,
) -> Result<KeySet, KeyError> {
    let keys = schedule(records, now);
    let signer = keys
        .iter()
        .find(|k| k.state == KeyState::Signing)
        .map(|k| k.record)
        .ok_or_else(|| KeyError::Corrupt("no active key".into()))?;
    let mut next_change = None;
    let mut published = Vec::new();
    for k in &keys {
        // The moments the set changes next: an upcoming key starts signing,
        // a published one retires.
        let at = match k.state {
            KeyState::Upcoming => Some(k.record.activates_at),
            _ => k.retire_at.filter(|t| *t > now),
        };
        if let Some(t) = at {
            next_change = Some(next_change.map_or(t, |n: Timestamp| n.min(t)));
        }
        if k.published(now) {
            published.push(k.record);
        }
    }

    let der = master
        .decrypt(&signer.private_key_encrypted, &kid_aad(&signer.kid))
        .ok_or_else(|| KeyError::Decrypt(signer.kid.clone()))?;
    let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &der)
        .map_err(|_| KeyError::Corrupt(signer.kid.clone()))?;
    let header = serde_json::json!({"alg": "ES256", "typ": "at+jwt", "kid": signer.kid});
    let signing = Arc::new(SigningKey {
        kid: signer.kid.clone(),
        pair,
        header_b64: B64.encode(header.to_string()),
    });

    let mut verifying = HashMap::new();
    let mut jwks = Vec::new();
    for r in &published {
        if r.public_key.len() != 65 || r.public_key[0] != 4 {
            return Err(KeyError::Corrupt(r.kid.clone()));
        }
        verifying.insert(
            r.kid.clone(),
            UnparsedPublicKey::new(&ECDSA_P256_SHA256_FIXED, r.public_key.clone()),
        );
        jwks.push(serde_json::json!({
            "kty": "EC",
            "crv": "P-256",
            "x": B64.encode(&r.public_key[1..33]),
            "y": B64.encode(&r.public_key[33..65]),
            "kid": r.kid,
            "use": "sig",
            "alg": "ES256",
        }));
    }
    let jwks = serde_json::json!({ "keys": jwks }).to_string();
    Ok(KeySet {
        signing,
        verifying,
        jwks: jwks.into(),
        next_change,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn master_key_round_trips_and_authenticates() {
        let m = MasterKey::generate();
        let again = MasterKey::parse(&m.to_text()).unwrap();
        let sealed = m.encrypt(b"secret", b"aad");
        assert_eq!(again.decrypt(&sealed, b"aad").unwrap(), b"secret");
        assert!(again.decrypt(&sealed, b"other aad").is_none());
        assert!(MasterKey::generate().decrypt(&sealed, b"aad").is_none());
        assert!(MasterKey::parse(&"ab".repeat(32)).is_ok());
        assert!(MasterKey::parse("short").is_err());
    }

    #[test]
    fn a_ring_seals_with_the_key_it_learned_and_opens_with_both() {
        let old = MasterKey::generate();
        let next = MasterKey::generate();
        let ring = MasterKeys::new(old.clone());
        let before = ring.encrypt(b"before", b"aad");
        assert!(old.decrypt(&before, b"aad").is_some());
        ring.learn(next.clone());
        ring.learn(next.clone());
        assert_eq!(ring.ids(), vec![next.id(), old.id()]);
        let after = ring.encrypt(b"after", b"aad");
        assert!(old.decrypt(&after, b"aad").is_none());
        assert_eq!(next.decrypt(&after, b"aad").unwrap(), b"after");
        assert_eq!(ring.decrypt(&before, b"aad").unwrap(), b"before");
        assert_eq!(ring.derive(b"p"), next.derive(b"p"));
        assert!(ring.derived(b"p").contains(&old.derive(b"p")));
        // The rotation ended: the old key opens nothing any more.
        assert!(ring.keep_newest());
        assert!(!ring.keep_newest());
        assert_eq!(ring.ids(), vec![next.id()]);
        assert!(ring.decrypt(&before, b"aad").is_none());
        assert_ne!(old.id(), next.id());
        assert_eq!(old.id().len(), 16);
    }

    #[test]
    fn newest_active_key_signs_and_pending_keys_are_published() {
        let m = MasterKeys::new(MasterKey::generate());
        let t0 = Timestamp::from_millis(1_000_000_000);
        let old = new_record(&m, t0, t0);
        let cur = new_record(&m, t0.plus_seconds(10), t0.plus_seconds(10));
        let pending = new_record(&m, t0.plus_seconds(20), t0.plus_seconds(20 + 3600));
        let now = t0.plus_seconds(30);
        let set = build(&m, &[old.clone(), cur.clone(), pending.clone()], now).unwrap();
        assert_eq!(set.signing.kid, cur.kid);
        for k in [&old, &cur, &pending] {
            assert!(set.verifying.contains_key(&k.kid), "{} published", k.kid);
            assert!(set.jwks.contains(&k.kid));
        }
        // Long after the successor took over, the old key is gone.
        let later = t0.plus_seconds(10 + 3600 + 61);
        let set = build(&m, &[old.clone(), cur.clone(), pending.clone()], later).unwrap();
        assert!(!set.verifying.contains_key(&old.kid));
        assert!(set.verifying.contains_key(&cur.kid));
    }
}
