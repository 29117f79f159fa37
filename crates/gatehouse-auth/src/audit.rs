//! D58: the audit chain's digest and its checkpoints, signed with the
//! current D23 key. Work in progress (branch `audit`, issue 31).
//!
//! A checkpoint is a compact JWS (ES256, `kid`, header `typ:
//! "gatehouse-audit-checkpoint+jws"`) over `{"org", "category",
//! "sequence", "hash", "signed_at"}`. It has no `iss`, `aud` or `exp`, and
//! its `typ` differs from both token types, so no token check accepts it
//! (`jwt::verify` requires `iss`/`aud`/`exp`).

use aws_lc_rs::digest::{SHA256, digest};
use aws_lc_rs::rand::SystemRandom;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use gatehouse_domain::audit::{ChainError, chain_preimage, sealed_json};
use serde::{Deserialize, Serialize};

use crate::keys::KeySet;

/// The checkpoint's JOSE `typ`.
pub const CHECKPOINT_TYP: &str = "gatehouse-audit-checkpoint+jws";

/// An entry's `hash` (D58): lowercase hex of SHA-256 over `prev` and the
/// RFC 8785 form of the entry as the API shows it, without `hash`.
pub fn chain_hash(prev: &str, entry: &serde_json::Value) -> Result<String, ChainError> {
    let pre = chain_preimage(prev, entry)?;
    Ok(hex(digest(&SHA256, &pre).as_ref()))
}

/// D58: the `hash` of a stored entry (`body`, the entry's JSON without
/// `sequence` and `hash`) sealed as `sequence` after `prev`. The one
/// sealing rule: the sealer after commit and a store sealing at insert
/// (`gatehouse_store::ChainSeal`) both use it.
pub fn seal_entry(prev: &str, body: &str, sequence: u64) -> Result<String, ChainError> {
    chain_hash(prev, &sealed_json(body, sequence)?)
}

fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(DIGITS[usize::from(b >> 4)] as char);
        s.push(DIGITS[usize::from(b & 15)] as char);
    }
    s
}

/// D58's `details.identifier_digest` of a sign-in that named no account:
/// HMAC-SHA256 of the normalized address under the organization's key,
/// itself HMAC-SHA256 of the organization's id under the deployment's
/// identifier key (stored sealed under the master key). Lowercase hex. The
/// same address gives the same digest within one organization and an
/// unrelated one in another; the address cannot be read back.
pub fn identifier_digest(deployment_key: &[u8; 32], org: &str, normalized: &str) -> String {
    use aws_lc_rs::hmac;
    let org_key = hmac::sign(
        &hmac::Key::new(hmac::HMAC_SHA256, deployment_key),
        format!("gatehouse audit identifiers\0{org}").as_bytes(),
    );
    let tag = hmac::sign(
        &hmac::Key::new(hmac::HMAC_SHA256, org_key.as_ref()),
        normalized.as_bytes(),
    );
    hex(tag.as_ref())
}

/// What a checkpoint says: the chain of `org`'s `category` holds
/// `sequence` with `hash`, at `signed_at` (Unix seconds).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checkpoint {
    pub org: String,
    pub category: String,
    pub sequence: u64,
    pub hash: String,
    pub signed_at: i64,
}

#[derive(Serialize)]
struct HeaderOut<'a> {
    alg: &'static str,
    kid: &'a str,
    typ: &'static str,
}

#[derive(Deserialize)]
struct HeaderIn {
    alg: String,
    kid: String,
    typ: String,
}

/// Signs `checkpoint` with the ring's current key: the compact JWS.
pub fn sign_checkpoint(keys: &KeySet, rng: &SystemRandom, checkpoint: &Checkpoint) -> String {
    let key = &keys.signing;
    let header = serde_json::to_vec(&HeaderOut {
        alg: "ES256",
        kid: &key.kid,
        typ: CHECKPOINT_TYP,
    })
    .expect("the header serializes");
    let payload = serde_json::to_vec(checkpoint).expect("the checkpoint serializes");
    let mut jws = B64.encode(header);
    jws.push('.');
    B64.encode_string(payload, &mut jws);
    let sig = key.sign(rng, jws.as_bytes());
    jws.push('.');
    B64.encode_string(sig, &mut jws);
    jws
}

/// Why a checkpoint did not verify.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum CheckpointError {
    #[error("not a checkpoint JWS")]
    Malformed,
    #[error("signed by no key of the ring")]
    UnknownKey,
    #[error("the signature does not verify")]
    BadSignature,
}

/// Verifies a checkpoint with the keys of `keys` (by `kid`): its header
/// (ES256, the checkpoint `typ`) and signature; its payload.
pub fn verify_checkpoint(keys: &KeySet, jws: &str) -> Result<Checkpoint, CheckpointError> {
    verify_with(jws, |kid, signed, sig| {
        keys.verifying
            .get(kid)
            .ok_or(CheckpointError::UnknownKey)?
            .verify(signed, sig)
            .map_err(|_| CheckpointError::BadSignature)
    })
}

/// Verifies a checkpoint with a JWKS document (`/.well-known/audit-keys.json`,
/// D58): the key named by the header's `kid`, an EC P-256 JWK.
pub fn verify_checkpoint_with_jwks(
    jwks: &serde_json::Value,
    jws: &str,
) -> Result<Checkpoint, CheckpointError> {
    use aws_lc_rs::signature::{ECDSA_P256_SHA256_FIXED, UnparsedPublicKey};
    verify_with(jws, |kid, signed, sig| {
        let jwk = jwks["keys"]
            .as_array()
            .and_then(|keys| keys.iter().find(|k| k["kid"] == kid))
            .ok_or(CheckpointError::UnknownKey)?;
        let coordinate = |name: &str| {
            jwk[name]
                .as_str()
                .and_then(|v| B64.decode(v).ok())
                .filter(|b| b.len() == 32)
                .ok_or(CheckpointError::UnknownKey)
        };
        if jwk["kty"] != "EC" || jwk["crv"] != "P-256" {
            return Err(CheckpointError::UnknownKey);
        }
        let mut point = vec![4u8];
        point.extend(coordinate("x")?);
        point.extend(coordinate("y")?);
        UnparsedPublicKey::new(&ECDSA_P256_SHA256_FIXED, point)
            .verify(signed, sig)
            .map_err(|_| CheckpointError::BadSignature)
    })
}

/// The JWS checks both verifications share; `check(kid, signed, sig)`
/// verifies the signature.
fn verify_with(
    jws: &str,
    check: impl FnOnce(&str, &[u8], &[u8]) -> Result<(), CheckpointError>,
) -> Result<Checkpoint, CheckpointError> {
    use CheckpointError::*;
    let mut parts = jws.split('.');
    let (Some(h), Some(p), Some(s), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(Malformed);
    };
    let header: HeaderIn = B64
        .decode(h)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .ok_or(Malformed)?;
    if header.alg != "ES256" || header.typ != CHECKPOINT_TYP {
        return Err(Malformed);
    }
    let sig = B64.decode(s).map_err(|_| Malformed)?;
    check(&header.kid, &jws.as_bytes()[..h.len() + 1 + p.len()], &sig)?;
    let payload = B64.decode(p).map_err(|_| Malformed)?;
    serde_json::from_slice(&payload).map_err(|_| Malformed)
}

#[cfg(test)]
mod digest_tests {
    use super::identifier_digest;

    #[test]
    fn d58_identifier_digests_are_per_organization_and_hide_the_address() {
        let key = [7u8; 32];
        let a = identifier_digest(&key, "org_a", "ada@example.com");
        assert_eq!(a, identifier_digest(&key, "org_a", "ada@example.com"));
        assert_ne!(a, identifier_digest(&key, "org_b", "ada@example.com"));
        assert_ne!(a, identifier_digest(&key, "org_a", "bob@example.com"));
        assert_ne!(a, identifier_digest(&[8u8; 32], "org_a", "ada@example.com"));
        assert_eq!(a.len(), 64);
        assert!(!a.contains("ada"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gatehouse_domain::audit::GENESIS;
    use serde_json::json;

    #[test]
    fn d58_the_hash_is_sha256_of_prev_and_the_canonical_entry() {
        let entry = json!({"b": 2, "a": "x"});
        let h = chain_hash(GENESIS, &entry).unwrap();
        let mut pre = GENESIS.as_bytes().to_vec();
        pre.extend_from_slice(br#"{"a":"x","b":2}"#);
        assert_eq!(h, hex(digest(&SHA256, &pre).as_ref()));
        assert_eq!(h.len(), 64);
        assert!(
            h.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        );
        // The next entry chains on this one's hash.
        let next = chain_hash(&h, &entry).unwrap();
        assert_ne!(next, h);
        // SHA-256("") is a known value: the digest is the standard one.
        assert_eq!(
            hex(digest(&SHA256, b"").as_ref()),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }

    #[test]
    fn d58_a_checkpoint_verifies_with_its_key_and_nothing_else() {
        let keys = crate::keys::test_key_set();
        let other = crate::keys::test_key_set();
        let cp = Checkpoint {
            org: "org_1".into(),
            category: "admin".into(),
            sequence: 42,
            hash: "ab".repeat(32),
            signed_at: 1_700_000_000,
        };
        let jws = sign_checkpoint(&keys, &SystemRandom::new(), &cp);
        assert_eq!(verify_checkpoint(&keys, &jws), Ok(cp.clone()));
        let header: serde_json::Value =
            serde_json::from_slice(&B64.decode(jws.split('.').next().unwrap()).unwrap()).unwrap();
        assert_eq!(header["typ"], CHECKPOINT_TYP);
        assert_eq!(header["kid"], keys.signing.kid.as_str());
        assert_eq!(
            verify_checkpoint(&other, &jws),
            Err(CheckpointError::UnknownKey)
        );
        // A changed payload does not verify.
        let mut parts: Vec<String> = jws.split('.').map(str::to_owned).collect();
        let forged = Checkpoint { sequence: 41, ..cp };
        parts[1] = B64.encode(serde_json::to_vec(&forged).unwrap());
        assert_eq!(
            verify_checkpoint(&keys, &parts.join(".")),
            Err(CheckpointError::BadSignature)
        );
        assert_eq!(
            verify_checkpoint(&keys, "a.b"),
            Err(CheckpointError::Malformed)
        );
        // The same with the published JWKS (what `gatehouse audit verify
        // --checkpoints` and outside verifiers use).
        let jwks: serde_json::Value = serde_json::from_str(&keys.jwks).unwrap();
        assert_eq!(
            verify_checkpoint_with_jwks(&jwks, &jws).map(|c| c.sequence),
            Ok(42)
        );
        let others: serde_json::Value = serde_json::from_str(&other.jwks).unwrap();
        assert_eq!(
            verify_checkpoint_with_jwks(&others, &jws),
            Err(CheckpointError::UnknownKey)
        );
        assert_eq!(
            verify_checkpoint_with_jwks(&jwks, &parts.join(".")),
            Err(CheckpointError::BadSignature)
        );
        // D58: never accepted as a token (no `iss`, `aud` or `exp`).
        let issuer = crate::Issuer::new("https://auth.example.com");
        assert!(crate::jwt::verify(&keys, &issuer, &jws, 1_700_000_000).is_err());
    }
}
