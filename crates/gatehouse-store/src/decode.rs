//! Strict decoding of stored values both backends share: a value no record
//! can hold is a problem to report (as a corrupt row, `StoreError::Internal`),
//! never a default. Each function answers the decoded value or the problem's
//! description for the backend's corrupt-row error.

use gatehouse_domain::ScopeSet;

/// A SHA-256 digest as stored; a length other than 32 bytes is corrupt.
pub fn digest(v: &[u8]) -> Result<[u8; 32], String> {
    <[u8; 32]>::try_from(v).map_err(|_| format!("holds {} bytes, not 32", v.len()))
}

/// A scope set as stored (its bits); a bit no scope has is corrupt.
pub fn scopes(bits: i64) -> Result<ScopeSet, String> {
    u8::try_from(bits)
        .ok()
        .map(ScopeSet::from_bits)
        .filter(|s| i64::from(s.bits()) == bits)
        .ok_or_else(|| format!("holds {bits}, not a set of scopes"))
}
