//! PKCE (RFC 7636), `S256` only (D26).

use aws_lc_rs::digest::{SHA256, digest};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use subtle::ConstantTimeEq;

/// RFC 7636 §4.1: 43–128 characters of `A-Z a-z 0-9 - . _ ~`.
fn well_formed(s: &str) -> bool {
    (43..=128).contains(&s.len())
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~'))
}

/// A `code_challenge` is base64url of a SHA-256 digest: 43 characters.
pub fn valid_challenge(challenge: &str) -> bool {
    challenge.len() == 43 && B64.decode(challenge).is_ok_and(|d| d.len() == 32)
}

/// Whether `verifier` matches `challenge` under S256.
pub fn verify(verifier: &str, challenge: &str) -> bool {
    if !well_formed(verifier) {
        return false;
    }
    let computed = B64.encode(digest(&SHA256, verifier.as_bytes()));
    computed.as_bytes().ct_eq(challenge.as_bytes()).into()
}

/// The S256 challenge of a verifier (for clients and tests).
pub fn challenge_for(verifier: &str) -> String {
    B64.encode(digest(&SHA256, verifier.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc7636_appendix_b_example() {
        let verifier = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk";
        assert_eq!(
            challenge_for(verifier),
            "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
        );
        assert!(verify(
            verifier,
            "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
        ));
        assert!(valid_challenge(
            "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
        ));
        assert!(!verify(
            "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXX",
            "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
        ));
        assert!(!verify("short", &challenge_for("short")));
        assert!(!valid_challenge("plain-text-challenge"));
    }
}
