//! Prefixed, unguessable identifiers (D3): `<prefix>_<base62>` with 128 random bits.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::random;

/// The fixed client of `gatehouse mock` (D34); no other environment has a
/// client by this id, because stored ids are always generated.
pub const MOCK_CLIENT_ID: &str = "mock_client";

/// Random bits in a generated identifier (D3 asks for at least 80).
pub const ID_BITS: usize = 128;

macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident, $prefix:literal) => {
        $(#[$doc])*
        #[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(String);

        impl $name {
            pub const PREFIX: &'static str = $prefix;

            /// A fresh identifier.
            pub fn generate() -> Self {
                Self(random::token(concat!($prefix, "_"), ID_BITS))
            }

            /// Parses an identifier of this type; `None` when the shape or prefix is wrong.
            pub fn parse(s: &str) -> Option<Self> {
                // D34: the mock's fixed client keeps its documented name.
                if $prefix == "app" && s == MOCK_CLIENT_ID {
                    return Some(Self(s.to_owned()));
                }
                let rest = s.strip_prefix(concat!($prefix, "_"))?;
                (rest.len() <= 64 && random::is_base62(rest)).then(|| Self(s.to_owned()))
            }

            /// Wraps a value read back from storage, which was validated when written.
            pub fn from_trusted(s: String) -> Self {
                Self(s)
            }

            pub fn as_str(&self) -> &str {
                &self.0
            }

            pub fn into_string(self) -> String {
                self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }
    };
}

id_type!(/// An organization (`org_`).
    OrgId, "org");
id_type!(/// A user (`usr_`).
    UserId, "usr");
id_type!(/// A product (`prod_`).
    ProductId, "prod");
id_type!(/// A client application; also its `client_id` (`app_`).
    ClientId, "app");
id_type!(/// An API key record (`key_`).
    ApiKeyId, "key");
id_type!(/// An event (`evt_`, D3 revised, D54).
    EventId, "evt");
id_type!(/// A webhook endpoint (`we_`, D3 revised, D55).
    EndpointId, "we");
id_type!(/// A webhook attempt (`wa_`, D3 revised, D55): one made, or the next
    /// one queued.
    AttemptId, "wa");
id_type!(/// A browser session (`ses_`, D3 revised, D57): also the `sid` of its
    /// ID tokens (D49), and the chains begun in it carry it.
    SessionId, "ses");
id_type!(/// A second factor, TOTP or passkey (`mfa_`, D3 revised, D56).
    MfaId, "mfa");
id_type!(/// An audit entry (`adt_`, D58).
    AuditId, "adt");

/// An id that sorts by time: `prefix`, eight base62 characters of the
/// creation's Unix milliseconds, then 96 random bits (D3 asks for at least
/// 80). Still unguessable, and new ids land at the end of an index instead
/// of on a random page of it, which keeps the writes small.
fn time_sorted(prefix: &str, at: crate::time::Timestamp) -> String {
    const DIGITS: usize = 8;
    let mut ms = u64::try_from(at.millis()).unwrap_or(0);
    let mut head = [b'0'; DIGITS];
    for d in head.iter_mut().rev() {
        *d = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"[(ms % 62) as usize];
        ms /= 62;
    }
    let mut s = String::with_capacity(prefix.len() + DIGITS + 17);
    s.push_str(prefix);
    s.push_str(std::str::from_utf8(&head).expect("base62 is ASCII"));
    s.push_str(&random::base62(96));
    s
}

impl AuditId {
    /// An audit entry's id, sorting by time like an event's.
    pub fn generate_at(at: crate::time::Timestamp) -> Self {
        Self(time_sorted("adt_", at))
    }
}

impl EventId {
    /// An event id that sorts by time ([`time_sorted`]): the write an event
    /// adds to every change stays at the end of its index.
    pub fn generate_at(at: crate::time::Timestamp) -> Self {
        Self(time_sorted("evt_", at))
    }
}

macro_rules! token_id_type {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(String);

        impl $name {
            /// A fresh identifier: 128 random bits in base62, no prefix (it
            /// travels inside a signed token, where a prefix would say nothing).
            pub fn generate() -> Self {
                Self(random::base62(ID_BITS))
            }

            /// [`Self::generate`] with the random bytes from `fill`, a CSPRNG
            /// of the caller's choosing ([`random::base62_with`]).
            pub fn generate_with(fill: impl FnMut(&mut [u8; 32])) -> Self {
                Self(random::base62_with(ID_BITS, fill))
            }

            /// Parses an identifier of this type; `None` unless it is 1 to 64
            /// base62 characters.
            pub fn parse(s: &str) -> Option<Self> {
                (!s.is_empty() && s.len() <= 64 && random::is_base62(s)).then(|| Self(s.to_owned()))
            }

            /// Wraps a value read back from storage, which was validated when written.
            pub fn from_trusted(s: String) -> Self {
                Self(s)
            }

            pub fn as_str(&self) -> &str {
                &self.0
            }

            pub fn into_string(self) -> String {
                self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }
    };
}

token_id_type!(/// A refresh-token chain: everything descended from one authorization;
    /// the `sid` claim of its access tokens (D24, D25).
    ChainId);
token_id_type!(/// The id of one access token, its `jti` claim (D25).
    Jti);

/// A request id as reported in `meta.request_id`: `req_` + 32 hex digits (D7).
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct RequestId(String);

impl RequestId {
    /// From the 16 bytes of a UUID.
    pub fn from_uuid_bytes(bytes: &[u8; 16]) -> Self {
        let mut s = String::with_capacity(36);
        s.push_str("req_");
        for b in bytes {
            s.push(char::from_digit((b >> 4) as u32, 16).unwrap());
            s.push(char::from_digit((b & 0xf) as u32, 16).unwrap());
        }
        Self(s)
    }
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn d3_event_ids_sort_by_time_and_keep_their_random_part() {
        use crate::time::Timestamp;
        let a = EventId::generate_at(Timestamp::from_millis(1_795_000_000_000));
        let b = EventId::generate_at(Timestamp::from_millis(1_795_000_000_001));
        let c = EventId::generate_at(Timestamp::from_millis(1_795_000_000_001));
        assert!(a.as_str() < b.as_str() && a.as_str() < c.as_str());
        assert_ne!(b, c, "the random part tells two ids of one instant apart");
        assert_eq!(EventId::parse(a.as_str()), Some(a.clone()));
        assert!(a.as_str().len() >= 4 + 8 + 17, "{a}");
    }

    #[test]
    fn ids_carry_their_prefix_and_parse_back() {
        let id = UserId::generate();
        assert!(id.as_str().starts_with("usr_"));
        assert_eq!(UserId::parse(id.as_str()), Some(id.clone()));
        assert_ne!(UserId::generate(), id);
    }

    #[test]
    fn wrong_prefix_or_shape_is_refused() {
        assert!(UserId::parse("prod_abc").is_none());
        assert!(UserId::parse("usr_").is_none());
        assert!(UserId::parse("usr_ab-c").is_none());
        assert!(UserId::parse("usrabc").is_none());
        assert!(ProductId::parse("prod_abc").is_some());
    }

    #[test]
    fn chain_ids_and_jtis_are_base62_without_prefix() {
        let c = ChainId::generate();
        assert_eq!(ChainId::parse(c.as_str()), Some(c.clone()));
        assert!(Jti::parse(Jti::generate().as_str()).is_some());
        assert!(Jti::parse("").is_none());
        assert!(ChainId::parse("a-b").is_none());
        assert!(ChainId::parse(&"a".repeat(65)).is_none());
    }

    #[test]
    fn request_id_is_req_and_32_hex_digits() {
        let r = RequestId::from_uuid_bytes(&[0xab; 16]);
        assert_eq!(r.as_str(), format!("req_{}", "ab".repeat(16)));
    }
}
