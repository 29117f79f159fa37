//! Paging (interface.md §4.2, D14): `limit` default 20, clamped to 100; `offset` default 0.

use crate::error::FieldIssue;

pub const DEFAULT_LIMIT: u32 = 20;
pub const MAX_LIMIT: u32 = 100;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Page {
    pub limit: u32,
    pub offset: u64,
}

impl Default for Page {
    fn default() -> Self {
        Self {
            limit: DEFAULT_LIMIT,
            offset: 0,
        }
    }
}

impl Page {
    /// From the raw query values; every problem becomes one issue (D6).
    pub fn parse(limit: Option<&str>, offset: Option<&str>) -> Result<Self, Vec<FieldIssue>> {
        let mut issues = Vec::new();
        let mut page = Page::default();
        if let Some(raw) = limit {
            match raw.parse::<i64>() {
                Ok(n) if n >= 1 => page.limit = n.min(MAX_LIMIT as i64) as u32,
                Ok(_) => issues.push(FieldIssue::new("limit", "must be at least 1")),
                Err(_) if raw.bytes().all(|b| b.is_ascii_digit()) && !raw.is_empty() => {
                    // A huge positive number is still "above 100": clamp (interface.md §4.2).
                    page.limit = MAX_LIMIT
                }
                Err(_) => issues.push(FieldIssue::new("limit", "must be an integer")),
            }
        }
        if let Some(raw) = offset {
            match raw.parse::<i64>() {
                Ok(n) if n >= 0 => page.offset = n as u64,
                Ok(_) => issues.push(FieldIssue::new("offset", "must be 0 or more")),
                Err(_) => issues.push(FieldIssue::new(
                    "offset",
                    "must be an integer from 0 to 9223372036854775807",
                )),
            }
        }
        if issues.is_empty() {
            Ok(page)
        } else {
            Err(issues)
        }
    }
}

/// One page of a list, with the count of all matches.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Listing<T> {
    pub items: Vec<T>,
    pub total: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_clamp() {
        assert_eq!(
            Page::parse(None, None).unwrap(),
            Page {
                limit: 20,
                offset: 0
            }
        );
        assert_eq!(
            Page::parse(Some("500"), Some("3")).unwrap(),
            Page {
                limit: 100,
                offset: 3
            }
        );
        assert_eq!(
            Page::parse(Some("99999999999999999999"), None)
                .unwrap()
                .limit,
            100
        );
    }

    #[test]
    fn bad_values_are_all_reported() {
        let e = Page::parse(Some("abc"), Some("-1")).unwrap_err();
        assert_eq!(e.len(), 2);
        assert!(Page::parse(Some("0"), None).is_err());
    }
}
