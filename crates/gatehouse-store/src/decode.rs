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

/// A webhook endpoint's `enabled_events` as stored: the patterns separated
/// by single spaces (a pattern holds none), each one a catalog pattern.
pub fn patterns(text: &str) -> Result<Vec<gatehouse_domain::event::TypePattern>, String> {
    let parsed: Result<Vec<_>, _> = text
        .split(' ')
        .map(gatehouse_domain::event::TypePattern::parse)
        .collect();
    match parsed {
        Ok(p) if !p.is_empty() => Ok(p),
        _ => Err(format!("holds {text:?}, not a list of event type patterns")),
    }
}

/// The stored form [`patterns`] reads.
pub fn patterns_text(p: &[gatehouse_domain::event::TypePattern]) -> String {
    p.iter()
        .map(gatehouse_domain::event::TypePattern::as_str)
        .collect::<Vec<_>>()
        .join(" ")
}
