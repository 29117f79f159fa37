//! Machine-generated secrets (D3, D20): client secrets and API keys carry 256
//! random bits, are stored as SHA-256 digests and compared in constant time.

use aws_lc_rs::digest::{SHA256, digest};
use gatehouse_domain::random;
use subtle::ConstantTimeEq;

/// Random bits in every generated secret.
pub const SECRET_BITS: usize = 256;

/// A new client secret (shown once).
pub fn new_client_secret() -> String {
    random::token("gcs_", SECRET_BITS)
}

/// A new API key (D27): `gk_live_` — or `gk_test_` in staging (D33) — and
/// 256 random bits (shown once).
pub fn new_api_key(staging: bool) -> String {
    random::token(crate::caller::api_key_prefix(staging), SECRET_BITS)
}

/// SHA-256 digest of a secret, the only form that is stored.
pub fn hash_secret(secret: &str) -> [u8; 32] {
    let d = digest(&SHA256, secret.as_bytes());
    let mut out = [0u8; 32];
    out.copy_from_slice(d.as_ref());
    out
}

/// SHA-256 over `parts`, each preceded by its length (8 bytes, big-endian),
/// so no two different lists of parts share a digest (D50's request digest).
pub fn digest_parts(parts: &[&[u8]]) -> [u8; 32] {
    let mut ctx = aws_lc_rs::digest::Context::new(&SHA256);
    for p in parts {
        ctx.update(&(p.len() as u64).to_be_bytes());
        ctx.update(p);
    }
    let mut out = [0u8; 32];
    out.copy_from_slice(ctx.finish().as_ref());
    out
}

/// Whether `secret` hashes to `expected`, in constant time.
pub fn verify_secret(secret: &str, expected: &[u8; 32]) -> bool {
    hash_secret(secret).ct_eq(expected).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_verify_only_against_their_own_digest() {
        let s = new_client_secret();
        assert!(s.len() >= 4 + 43);
        let h = hash_secret(&s);
        assert!(verify_secret(&s, &h));
        assert!(!verify_secret(&new_client_secret(), &h));
        assert!(!verify_secret("", &h));
    }
}
