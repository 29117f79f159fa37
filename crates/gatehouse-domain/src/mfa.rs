//! The second factor's rules (D56) that need no cryptography: TOTP's time
//! steps and its replay rule, and recovery codes' shape (Crockford base32,
//! `XXXXX-XXXXX`) and how an entered code is read. Computing a code (HMAC)
//! is `gatehouse_auth::totp`'s; storing factors is storage's.

use crate::time::Timestamp;

/// RFC 6238 as D56 fixes it: 30-second steps, 6 digits (SHA-1).
pub const TOTP_PERIOD_SECS: i64 = 30;
pub const TOTP_DIGITS: u32 = 6;
/// D56: a TOTP secret has 160 bits.
pub const TOTP_SECRET_BYTES: usize = 20;

/// D56: ten recovery codes of 50 random bits each.
pub const RECOVERY_CODES: usize = 10;
pub const RECOVERY_CODE_BITS: u32 = 50;
/// D56: the account page warns when this many codes or fewer remain.
pub const RECOVERY_CODES_LOW: usize = 3;

/// The TOTP time step of `at` (RFC 6238: Unix time ÷ 30 s).
pub fn totp_step(at: Timestamp) -> u64 {
    u64::try_from(at.unix_seconds().div_euclid(TOTP_PERIOD_SECS)).unwrap_or(0)
}

/// The steps a code is checked against at step `t` (D56: T−1, T and T+1),
/// oldest first.
pub fn totp_window(t: u64) -> [u64; 3] {
    [t.saturating_sub(1), t, t + 1]
}

/// D56's replay rule: of the steps whose code matched, the one a sign-in
/// may accept — the newest, and only if it is after the last step accepted
/// for this factor (a code of a step at or before it is refused). `None`:
/// refused.
pub fn accepted_step(matched: &[u64], last_accepted: Option<u64>) -> Option<u64> {
    let newest = matched.iter().copied().max()?;
    match last_accepted {
        Some(last) if newest <= last => None,
        _ => Some(newest),
    }
}

/// Crockford's base32 alphabet (no I, L, O, U).
const CROCKFORD: &[u8; 32] = b"0123456789ABCDEFGHJKMNPQRSTVWXYZ";

/// A recovery code as shown once (D56): the low 50 bits of `bits` as ten
/// Crockford digits, `XXXXX-XXXXX`.
pub fn recovery_code(bits: u64) -> String {
    let mut digits = [0u8; 10];
    for (i, d) in digits.iter_mut().enumerate() {
        let shift = 5 * (9 - i);
        *d = CROCKFORD[((bits >> shift) & 0x1f) as usize];
    }
    let text: String = digits.iter().map(|&b| b as char).collect();
    format!("{}-{}", &text[..5], &text[5..])
}

/// A recovery code as entered, in the form its digest is taken of (the ten
/// digits, upper case, no hyphen): D56's entry ignores case, spaces and the
/// hyphen; Crockford's readings of `I`/`L` as 1 and `O` as 0 are accepted
/// too. `None` when it cannot be a code.
pub fn canonical_recovery_code(entered: &str) -> Option<String> {
    let mut out = String::with_capacity(10);
    for c in entered.chars() {
        let c = match c.to_ascii_uppercase() {
            ' ' | '-' | '\t' => continue,
            'I' | 'L' => '1',
            'O' => '0',
            c => c,
        };
        if !c.is_ascii() || !CROCKFORD.contains(&(c as u8)) {
            return None;
        }
        out.push(c);
        if out.len() > 10 {
            return None;
        }
    }
    (out.len() == 10).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_are_thirty_seconds_and_the_window_is_one_either_side() {
        assert_eq!(totp_step(Timestamp::from_unix_seconds(59)), 1);
        assert_eq!(totp_step(Timestamp::from_unix_seconds(60)), 2);
        assert_eq!(totp_window(10), [9, 10, 11]);
        assert_eq!(totp_window(0), [0, 0, 1]);
    }

    #[test]
    fn a_code_of_a_step_at_or_before_the_last_accepted_is_refused() {
        assert_eq!(accepted_step(&[10], None), Some(10));
        assert_eq!(accepted_step(&[9, 11], Some(8)), Some(11));
        assert_eq!(accepted_step(&[10], Some(10)), None, "a replay");
        assert_eq!(accepted_step(&[9], Some(10)), None, "an older code");
        assert_eq!(accepted_step(&[], None), None);
    }

    #[test]
    fn recovery_codes_are_ten_crockford_digits_read_forgivingly() {
        assert_eq!(recovery_code(0), "00000-00000");
        assert_eq!(recovery_code((1 << 50) - 1), "ZZZZZ-ZZZZZ");
        let shown = recovery_code(0x0003_1234_5678_9abc & ((1 << 50) - 1));
        assert_eq!(shown.len(), 11);
        let canon = canonical_recovery_code(&shown).unwrap();
        assert_eq!(canon, shown.replace('-', ""));
        assert_eq!(
            canonical_recovery_code(&format!(" {} ", shown.to_lowercase())),
            Some(canon.clone())
        );
        assert_eq!(
            canonical_recovery_code("0I1L0-O0000"),
            Some("01110 00000".replace(' ', ""))
        );
        assert_eq!(canonical_recovery_code("ABCDE-FGHJ"), None, "nine digits");
        assert_eq!(canonical_recovery_code("ABCDE-FGHJKM"), None, "eleven");
        assert_eq!(
            canonical_recovery_code("ABCDE-FGHJU"),
            None,
            "U is not a digit"
        );
        assert_eq!(canonical_recovery_code("ABCDÉ-FGHJK"), None);
    }
}
