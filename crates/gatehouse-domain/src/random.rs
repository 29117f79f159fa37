//! Random identifiers and secrets (D3): base62 text of operating-system randomness.

const ALPHABET: &[u8; 62] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// `n` bytes from the operating system's CSPRNG.
pub fn bytes<const N: usize>() -> [u8; N] {
    let mut buf = [0u8; N];
    getrandom::fill(&mut buf).expect("the operating system's random number generator failed");
    buf
}

/// Base62 text carrying at least `bits` random bits.
pub fn base62(bits: usize) -> String {
    base62_with(bits, |buf| *buf = bytes::<32>())
}

/// [`base62`] with the random bytes from `fill`, a CSPRNG of the caller's
/// choosing (the auth layer uses its crypto library's user-space generator
/// for token ids, saving a system call per token).
pub fn base62_with(bits: usize, mut fill: impl FnMut(&mut [u8; 32])) -> String {
    // log2(62) ≈ 5.954 bits per character.
    let chars = (bits as f64 / 5.954).ceil() as usize;
    let mut out = String::with_capacity(chars);
    let mut buf = [0u8; 32];
    // Rejection sampling keeps every character uniform.
    while out.len() < chars {
        fill(&mut buf);
        for b in buf {
            let v = b & 0x3f;
            if (v as usize) < ALPHABET.len() {
                out.push(ALPHABET[v as usize] as char);
                if out.len() == chars {
                    break;
                }
            }
        }
    }
    out
}

/// `prefix` followed by base62 text of at least `bits` random bits.
pub fn token(prefix: &str, bits: usize) -> String {
    let mut s = String::from(prefix);
    s.push_str(&base62(bits));
    s
}

pub fn is_base62(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base62_has_the_length_for_its_bits_and_differs_each_time() {
        let a = base62(128);
        let b = base62(128);
        assert_eq!(a.len(), 22);
        assert!(is_base62(&a));
        assert_ne!(a, b);
        assert_eq!(base62(256).len(), 43);
    }
}
