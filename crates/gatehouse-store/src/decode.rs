//! Strict decoding of stored values both backends share: a value no record
//! can hold is a problem to report (as a corrupt row, `StoreError::Internal`),
//! never a default. Each function answers the decoded value or the problem's
//! description for the backend's corrupt-row error.

use gatehouse_domain::{ChainId, ScopeSet};

use crate::{StoreError, StoreResult};

/// A SHA-256 digest as stored; a length other than 32 bytes is corrupt.
pub fn digest(v: &[u8]) -> Result<[u8; 32], String> {
    <[u8; 32]>::try_from(v).map_err(|_| format!("holds {} bytes, not 32", v.len()))
}

/// A scope set as stored (its bits); a bit no scope has is corrupt.
pub fn scopes(bits: i64) -> Result<ScopeSet, String> {
    u16::try_from(bits)
        .ok()
        .map(ScopeSet::from_bits)
        .filter(|s| i64::from(s.bits()) == bits)
        .ok_or_else(|| format!("holds {bits}, not a set of scopes"))
}

/// A text column through `parse` (an id's or a token id's own parser); text
/// it refuses is corrupt.
pub fn text<T>(text: &str, parse: impl FnOnce(&str) -> Option<T>) -> Result<T, String> {
    parse(text).ok_or_else(|| format!("holds {text:?}"))
}

/// A nullable text column through `parse`: NULL is `None`, text `parse`
/// refuses is corrupt.
pub fn optional<T>(
    value: Option<&str>,
    parse: impl FnOnce(&str) -> Option<T>,
) -> Result<Option<T>, String> {
    value.map(|v| text(v, parse)).transpose()
}

/// Refresh-chain ids as stored; one no chain can have is a corrupt row.
pub fn chain_ids(ids: &[String]) -> StoreResult<Vec<ChainId>> {
    ids.iter()
        .map(|t| {
            text(t, ChainId::parse)
                .map_err(|p| StoreError::Internal(format!("refresh_chains.id {p}")))
        })
        .collect()
}
