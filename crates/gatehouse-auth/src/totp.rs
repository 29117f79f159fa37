//! The second factor's cryptography (D56): TOTP codes (RFC 6238 over RFC
//! 4226's HOTP, HMAC-SHA-1, 6 digits, 30 s) checked against steps T−1 to
//! T+1 with D56's replay rule, the `otpauth://` URI an authenticator app
//! reads, and recovery codes with their keyed digests.
//!
//! HOTP is a few lines over aws-lc-rs's HMAC, which the crate already uses:
//! a TOTP crate would bring a second HMAC stack, and the replay rule (the
//! last accepted step) is ours in any case (`gatehouse_domain::mfa`).

use aws_lc_rs::hmac;
use gatehouse_domain::mfa::{self, TOTP_DIGITS, TOTP_PERIOD_SECS, TOTP_SECRET_BYTES};
use gatehouse_domain::{Timestamp, random};
use subtle::ConstantTimeEq;

/// A new TOTP secret (D56: 160 random bits).
pub fn new_secret() -> [u8; TOTP_SECRET_BYTES] {
    random::bytes::<TOTP_SECRET_BYTES>()
}

/// The secret as an authenticator app is given it: RFC 4648 base32 without
/// padding (160 bits are exactly 32 characters).
pub fn secret_base32(secret: &[u8]) -> String {
    data_encoding::BASE32_NOPAD.encode(secret)
}

/// RFC 4226's HOTP value of `secret` at `counter`, `TOTP_DIGITS` digits.
pub fn hotp(secret: &[u8], counter: u64) -> u32 {
    let key = hmac::Key::new(hmac::HMAC_SHA1_FOR_LEGACY_USE_ONLY, secret);
    let tag = hmac::sign(&key, &counter.to_be_bytes());
    let h = tag.as_ref();
    let offset = usize::from(h[h.len() - 1] & 0x0f);
    let binary = u32::from_be_bytes([
        h[offset] & 0x7f,
        h[offset + 1],
        h[offset + 2],
        h[offset + 3],
    ]);
    binary % 10u32.pow(TOTP_DIGITS)
}

/// The code of `secret` at the time step `step`, as an app shows it.
pub fn code_at_step(secret: &[u8], step: u64) -> String {
    format!(
        "{:0width$}",
        hotp(secret, step),
        width = TOTP_DIGITS as usize
    )
}

/// D56: checks `entered` (spaces ignored) against steps T−1, T and T+1 of
/// `now`, in constant time and without stopping at the first match; the
/// step to record as the last accepted one, or `None` when the code is
/// wrong or replays a step at or before `last_accepted`.
pub fn verify(
    secret: &[u8],
    entered: &str,
    now: Timestamp,
    last_accepted: Option<u64>,
) -> Option<u64> {
    let entered: String = entered.chars().filter(|c| !c.is_whitespace()).collect();
    if entered.len() != TOTP_DIGITS as usize || !entered.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let matched: Vec<u64> = mfa::totp_window(mfa::totp_step(now))
        .into_iter()
        .filter(|&step| {
            bool::from(
                code_at_step(secret, step)
                    .as_bytes()
                    .ct_eq(entered.as_bytes()),
            )
        })
        .collect();
    mfa::accepted_step(&matched, last_accepted)
}

/// The `otpauth://` URI of D56 for an account `email` of the organization
/// `org_name`: issuer "Gatehouse (<organization name>)", percent-encoded
/// (`%20`, `%3A`: an organization's name may hold a colon).
pub fn otpauth_uri(org_name: &str, email: &str, secret: &[u8]) -> String {
    use percent_encoding::{NON_ALPHANUMERIC, utf8_percent_encode};
    let issuer = format!("Gatehouse ({org_name})");
    let enc = |s: &str| utf8_percent_encode(s, NON_ALPHANUMERIC).to_string();
    format!(
        "otpauth://totp/{}:{}?secret={}&issuer={}&algorithm=SHA1&digits={TOTP_DIGITS}&period={TOTP_PERIOD_SECS}",
        enc(&issuer),
        enc(email),
        secret_base32(secret),
        enc(&issuer),
    )
}

/// A new set of recovery codes as shown once (D56: ten of 50 random bits,
/// `XXXXX-XXXXX`).
pub fn new_recovery_codes() -> Vec<String> {
    (0..mfa::RECOVERY_CODES)
        .map(|_| {
            let bits = u64::from_be_bytes(random::bytes::<8>()) >> (64 - mfa::RECOVERY_CODE_BITS);
            mfa::recovery_code(bits)
        })
        .collect()
}

/// The keyed digest a recovery code is stored as (D3 revised:
/// HMAC-SHA256 under the recovery-code key), of its canonical form;
/// `None` when `entered` cannot be a code.
pub fn recovery_digest(key: &[u8; 32], entered: &str) -> Option<[u8; 32]> {
    let canonical = mfa::canonical_recovery_code(entered)?;
    let key = hmac::Key::new(hmac::HMAC_SHA256, key);
    let tag = hmac::sign(&key, canonical.as_bytes());
    let mut out = [0u8; 32];
    out.copy_from_slice(tag.as_ref());
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const RFC_SECRET: &[u8] = b"12345678901234567890";

    #[test]
    fn hotp_matches_rfc_4226_appendix_d() {
        let want = [
            755224, 287082, 359152, 969429, 338314, 254676, 287922, 162583, 399871, 520489,
        ];
        for (counter, value) in want.iter().enumerate() {
            assert_eq!(
                hotp(RFC_SECRET, counter as u64),
                *value,
                "counter {counter}"
            );
        }
    }

    #[test]
    fn totp_matches_rfc_6238_appendix_b_in_six_digits() {
        // RFC 6238's SHA-1 vectors are 8 digits; D56's codes are their
        // last six.
        for (t, eight) in [
            (59_i64, "94287082"),
            (1_111_111_109, "07081804"),
            (1_111_111_111, "14050471"),
            (1_234_567_890, "89005924"),
            (2_000_000_000, "69279037"),
        ] {
            let step = mfa::totp_step(Timestamp::from_unix_seconds(t));
            assert_eq!(code_at_step(RFC_SECRET, step), eight[2..], "T = {t}");
        }
    }

    #[test]
    fn codes_of_the_neighbouring_steps_count_once_each() {
        let secret = new_secret();
        let now = Timestamp::from_unix_seconds(1_700_000_010);
        let t = mfa::totp_step(now);
        let previous = code_at_step(&secret, t - 1);
        assert_eq!(verify(&secret, &previous, now, None), Some(t - 1));
        let current = code_at_step(&secret, t);
        assert_eq!(verify(&secret, &current, now, Some(t - 1)), Some(t));
        assert_eq!(verify(&secret, &current, now, Some(t)), None, "a replay");
        assert_eq!(verify(&secret, &previous, now, Some(t)), None, "older");
        let next = code_at_step(&secret, t + 1);
        assert_eq!(
            verify(
                &secret,
                &format!("{} {}", &next[..3], &next[3..]),
                now,
                Some(t)
            ),
            Some(t + 1),
            "spaces are ignored"
        );
        let far = code_at_step(&secret, t + 2);
        if far != next && far != current && far != previous {
            assert_eq!(verify(&secret, &far, now, None), None, "two steps ahead");
        }
        assert_eq!(verify(&secret, "12345", now, None), None);
        assert_eq!(verify(&secret, "12345a", now, None), None);
    }

    #[test]
    fn the_uri_names_the_issuer_and_the_base32_secret() {
        let uri = otpauth_uri("Acme: R&D", "ada@example.com", RFC_SECRET);
        assert_eq!(
            uri,
            "otpauth://totp/Gatehouse%20%28Acme%3A%20R%26D%29:ada%40example%2Ecom?secret=GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ&issuer=Gatehouse%20%28Acme%3A%20R%26D%29&algorithm=SHA1&digits=6&period=30"
        );
        assert_eq!(secret_base32(&new_secret()).len(), 32);
    }

    #[test]
    fn recovery_codes_are_ten_distinct_and_their_digests_are_keyed() {
        let codes = new_recovery_codes();
        assert_eq!(codes.len(), 10);
        let mut unique = codes.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), 10);
        let key = [7u8; 32];
        let d = recovery_digest(&key, &codes[0]).unwrap();
        assert_eq!(
            recovery_digest(&key, &codes[0].to_lowercase().replace('-', " ")),
            Some(d),
            "entered loosely, the same digest"
        );
        assert_ne!(recovery_digest(&[8u8; 32], &codes[0]), Some(d), "keyed");
        assert_eq!(recovery_digest(&key, "not a code"), None);
    }
}
