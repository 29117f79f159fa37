//! Records of the authorization server's state that its mechanisms read
//! (the revocation set, the key ring, the rate limiter, the usage counter,
//! the sign-in pages): plain data, loaded and stored by `gatehouse-store`,
//! which re-exports them, and handed to `gatehouse-auth` by the
//! application layer, so the mechanisms need no storage of their own.

use crate::{ApiKeyId, ClientId, OrgId, ScopeSet, Timestamp};

/// What a revocation record covers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RevocationKind {
    /// Every token of a user issued at or before `cutoff` (D11, D13, D29).
    User,
    /// One access token, by `jti` (D25).
    Jti,
    /// Every access token of a refresh chain, by the chain id (`sid`) (D24, D25).
    Chain,
    /// Every access token issued to a client application at or before
    /// `cutoff`, for itself or for a user (D46, D47: the application deleted
    /// or suspended, D46 revised); with `scopes`, only those of them that
    /// carry one of these scopes (D46 revised: a scope removed from the
    /// application). A node that does not know `scopes` revokes them all:
    /// too much, never too little.
    Client,
}

impl RevocationKind {
    pub fn as_str(self) -> &'static str {
        match self {
            RevocationKind::User => "user",
            RevocationKind::Jti => "jti",
            RevocationKind::Chain => "chain",
            RevocationKind::Client => "client",
        }
    }
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "user" => Some(RevocationKind::User),
            "jti" => Some(RevocationKind::Jti),
            "chain" => Some(RevocationKind::Chain),
            "client" => Some(RevocationKind::Client),
            _ => None,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Revocation {
    /// Increasing; servers poll for ids above the last they saw.
    pub id: i64,
    pub kind: RevocationKind,
    pub subject: String,
    /// Unix seconds: tokens issued at or before it are revoked.
    pub cutoff: i64,
    /// After this no token it covers can still be valid; then it is purged.
    pub expires_at: Timestamp,
    /// `Client` only: the revocation covers only tokens carrying one of
    /// these scopes (`None`: every token of the client).
    pub scopes: Option<ScopeSet>,
}

/// A browser session (D57), defined with its rules in [`crate::session`].
pub use crate::session::Session;

/// D28 across nodes (D44): one credential lineage's sliding windows as the
/// shared store counted them, after deciding on one request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SharedWindow {
    /// Whether the request was admitted (and counted).
    pub admitted: bool,
    /// Admissions in the preceding 60 s, this one included when admitted.
    pub in_minute: u32,
    /// Admissions in the preceding second, this one included when admitted.
    pub in_second: u32,
    /// When the oldest admission of the minute window leaves it (Unix ms).
    pub minute_frees_at: Option<i64>,
    /// When the oldest admission of the one-second window leaves it (Unix ms).
    pub second_frees_at: Option<i64>,
}

/// A signing key as stored: the private half encrypted under the master key (D23).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SigningKeyRecord {
    pub kid: String,
    /// AES-256-GCM: nonce ‖ ciphertext ‖ tag of the PKCS#8 document.
    pub private_key_encrypted: Vec<u8>,
    /// Uncompressed SEC1 point of the public key.
    pub public_key: Vec<u8>,
    pub created_at: Timestamp,
    /// Tokens are signed with it from this instant on (publish delay).
    pub activates_at: Timestamp,
    /// Not published any more after this instant.
    pub expires_at: Option<Timestamp>,
}

/// The credential a request was made with, as usage counts it (D46): an
/// application (any access token issued to it) or an API key.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Credential {
    Application(ClientId),
    ApiKey(ApiKeyId),
}

impl Credential {
    /// The id the counts are stored under.
    pub fn as_str(&self) -> &str {
        match self {
            Credential::Application(c) => c.as_str(),
            Credential::ApiKey(k) => k.as_str(),
        }
    }
}

/// One node's counts for one credential in one UTC minute.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UsageCount {
    pub org: OrgId,
    pub credential: Credential,
    /// Unix minutes.
    pub minute: i64,
    pub requests: u64,
    pub rejected: u64,
}
