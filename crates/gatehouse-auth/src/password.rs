//! Human passwords (D19): Argon2id, hashed and checked off the async runtime.

use argon2::Argon2;
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use gatehouse_domain::random;

/// A short list of the most common passwords long enough to pass the length
/// rule (NIST SP 800-63B asks to refuse known-compromised values).
const COMMON: &[&str] = &[
    "123456789012",
    "1234567890123",
    "12345678901234",
    "123456789123",
    "password1234",
    "password12345",
    "password123456",
    "passwordpassword",
    "qwertyuiopasdfgh",
    "qwertyuiop123",
    "qwerty123456",
    "111111111111",
    "000000000000",
    "123123123123",
    "abcdefghijkl",
    "abc123abc123",
    "iloveyou1234",
    "letmein12345",
    "welcome12345",
    "administrator",
    "adminadmin123",
    "changeme1234",
    "trustno1trustno1",
    "football1234",
    "baseball1234",
    "monkey123456",
    "sunshine1234",
    "princess1234",
    "qwertyqwerty",
    "1q2w3e4r5t6y",
    "1qaz2wsx3edc",
    "zaq12wsxcde3",
    "passw0rd1234",
    "p@ssw0rd1234",
    "p@ssword1234",
    "correcthorsebatterystaple",
    "aaaaaaaaaaaa",
    "asdfghjkl123",
    "asdfasdfasdf",
    "987654321098",
];

/// Checks the D19 rules; the error is the issue text for the `password` field.
pub fn check_policy(password: &str, email: &str) -> Result<(), String> {
    let n = password.chars().count();
    if n < 12 {
        return Err("must be at least 12 characters".into());
    }
    if n > 256 {
        return Err("must be at most 256 characters".into());
    }
    let lower = password.to_lowercase();
    if lower == email.trim().to_lowercase() {
        return Err("must not be your e-mail address".into());
    }
    if COMMON.contains(&lower.as_str()) {
        return Err("is too common; choose another".into());
    }
    Ok(())
}

fn hash_sync(password: &str) -> String {
    let salt = SaltString::encode_b64(&random::bytes::<16>()).expect("16 bytes make a valid salt");
    Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .expect("Argon2id with default parameters cannot fail")
        .to_string()
}

fn verify_sync(password: &str, phc: &str) -> bool {
    PasswordHash::new(phc)
        .map(|h| {
            Argon2::default()
                .verify_password(password.as_bytes(), &h)
                .is_ok()
        })
        .unwrap_or(false)
}

/// Hashes with Argon2id on the blocking pool.
pub async fn hash(password: String) -> String {
    tokio::task::spawn_blocking(move || hash_sync(&password))
        .await
        .expect("password hashing task panicked")
}

/// Verifies on the blocking pool.
pub async fn verify(password: String, phc: String) -> bool {
    tokio::task::spawn_blocking(move || verify_sync(&password, &phc))
        .await
        .unwrap_or(false)
}

/// An Argon2id hash of a random password, computed once: checked against when
/// an account does not exist, so that timing does not tell (D26).
pub fn dummy_hash() -> &'static str {
    static DUMMY: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    DUMMY.get_or_init(|| hash_sync(&gatehouse_domain::random::base62(128)))
}

/// Synchronous hashing for command-line use.
pub fn hash_blocking(password: &str) -> String {
    hash_sync(password)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policy_follows_d19() {
        assert!(check_policy("short", "a@b.co").is_err());
        assert!(check_policy(&"x".repeat(257), "a@b.co").is_err());
        assert!(check_policy("Password1234", "a@b.co").is_err());
        assert!(check_policy("ada@example.com", "Ada@Example.com").is_err());
        assert!(check_policy("a long enough passphrase", "a@b.co").is_ok());
    }

    #[test]
    fn hashes_are_argon2id_and_verify() {
        let h = hash_sync("a long enough passphrase");
        assert!(h.starts_with("$argon2id$"));
        assert!(verify_sync("a long enough passphrase", &h));
        assert!(!verify_sync("another long passphrase", &h));
        assert!(!verify_sync("x", "not a hash"));
    }
}
