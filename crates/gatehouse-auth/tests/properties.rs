//! Property tests of PKCE (RFC 7636, D26), the one parser of untrusted input
//! in this crate: arbitrary verifiers and challenges never panic, and every
//! well-formed verifier verifies against its own S256 challenge only.

use gatehouse_auth::pkce;
use proptest::prelude::*;

proptest! {
    #[test]
    fn arbitrary_input_never_panics(verifier in any::<String>(), challenge in any::<String>()) {
        let _ = pkce::valid_challenge(&challenge);
        let _ = pkce::verify(&verifier, &challenge);
    }

    #[test]
    fn a_well_formed_verifier_round_trips(verifier in "[A-Za-z0-9._~-]{43,128}") {
        let challenge = pkce::challenge_for(&verifier);
        prop_assert!(pkce::valid_challenge(&challenge));
        prop_assert!(pkce::verify(&verifier, &challenge));
    }

    #[test]
    fn another_verifier_does_not_verify(
        verifier in "[A-Za-z0-9._~-]{43,128}",
        other in "[A-Za-z0-9._~-]{43,128}",
    ) {
        prop_assume!(verifier != other);
        prop_assert!(!pkce::verify(&other, &pkce::challenge_for(&verifier)));
    }

    #[test]
    fn a_malformed_verifier_never_verifies(verifier in "[A-Za-z0-9._~-]{0,42}|[A-Za-z0-9._~-]{129,160}|.*[^A-Za-z0-9._~-].*") {
        // Even against its own challenge: RFC 7636 §4.1's alphabet and length.
        prop_assert!(!pkce::verify(&verifier, &pkce::challenge_for(&verifier)));
    }
}
