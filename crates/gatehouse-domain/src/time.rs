//! Timestamps (D4): UTC, millisecond precision, RFC 3339 with a `Z` suffix.

use std::fmt;

use serde::{Serialize, Serializer};
use time::OffsetDateTime;

/// A UTC instant with millisecond precision, kept as milliseconds since the Unix epoch.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct Timestamp(i64);

impl Timestamp {
    pub fn now() -> Self {
        let now = OffsetDateTime::now_utc();
        Self((now.unix_timestamp_nanos() / 1_000_000) as i64)
    }
    pub fn from_millis(ms: i64) -> Self {
        Self(ms)
    }
    pub fn from_unix_seconds(s: i64) -> Self {
        Self(s.saturating_mul(1000))
    }
    pub fn millis(self) -> i64 {
        self.0
    }
    pub fn unix_seconds(self) -> i64 {
        self.0.div_euclid(1000)
    }
    pub fn plus_seconds(self, s: i64) -> Self {
        Self(self.0.saturating_add(s.saturating_mul(1000)))
    }
    pub fn plus_millis(self, ms: i64) -> Self {
        Self(self.0.saturating_add(ms))
    }
    /// An RFC 3339 date and time with an offset (`2026-11-22T02:31:42Z`,
    /// `…+01:00`, fractions of a second cut to milliseconds); `None` for
    /// anything else or a time outside years 1970–9999.
    pub fn parse_rfc3339(s: &str) -> Option<Self> {
        let dt = OffsetDateTime::parse(s, &time::format_description::well_known::Rfc3339).ok()?;
        let ms = dt.unix_timestamp_nanos().div_euclid(1_000_000);
        (0..=253_402_300_799_999)
            .contains(&ms)
            .then_some(Self(ms as i64))
    }

    /// `2026-11-22T02:31:42.123Z`.
    pub fn to_rfc3339(self) -> String {
        let dt = OffsetDateTime::from_unix_timestamp_nanos(self.0 as i128 * 1_000_000)
            .unwrap_or(OffsetDateTime::UNIX_EPOCH);
        format!(
            "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z",
            dt.year(),
            dt.month() as u8,
            dt.day(),
            dt.hour(),
            dt.minute(),
            dt.second(),
            dt.millisecond()
        )
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_rfc3339())
    }
}

impl Serialize for Timestamp {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_rfc3339())
    }
}

/// Access-token lifetime (interface.md §5.4).
pub const ACCESS_TOKEN_TTL_SECS: i64 = 3600;

/// How long a revocation of access tokens issued up to `now` must be kept
/// (D24): one token lifetime, plus a minute for clocks that disagree. After
/// it no token the revocation covers can still be valid.
pub fn access_revocation_expiry(now: Timestamp) -> Timestamp {
    now.plus_seconds(ACCESS_TOKEN_TTL_SECS + 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_parses_offsets_and_refuses_the_rest() {
        let t = Timestamp::parse_rfc3339("2026-11-22T02:31:42.123Z").unwrap();
        assert_eq!(t.to_rfc3339(), "2026-11-22T02:31:42.123Z");
        assert_eq!(
            Timestamp::parse_rfc3339("2026-11-22T03:31:42.123+01:00"),
            Some(t)
        );
        for bad in [
            "2026-11-22",
            "yesterday",
            "2026-11-22T02:31:42",
            "1969-12-31T23:59:59Z",
        ] {
            assert_eq!(Timestamp::parse_rfc3339(bad), None, "{bad}");
        }
    }

    #[test]
    fn formats_with_milliseconds_and_z() {
        // 2026-11-22T02:31:42.123Z
        let t = Timestamp::from_millis(1_795_314_702_123);
        assert_eq!(t.to_rfc3339(), "2026-11-22T02:31:42.123Z");
        assert_eq!(
            Timestamp::from_millis(5).to_rfc3339(),
            "1970-01-01T00:00:00.005Z"
        );
    }
}
