//! Token introspection (RFC 7662, D49): what a confidential client may learn
//! about a token. The caller authenticates as at the token endpoint (D20);
//! the answer is an [`ActiveToken`] or nothing (`{"active": false}`), and
//! looking never changes anything: a refresh token is read, never used up
//! or replayed (D24), and no counter but D28's failure guard moves.

use gatehouse_domain::{ClientId, OrgId, ScopeSet};

/// What kind of credential an active token is (`token_use`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TokenUse {
    AccessToken,
    RefreshToken,
    ApiKey,
}

impl TokenUse {
    pub fn as_str(self) -> &'static str {
        match self {
            TokenUse::AccessToken => "access_token",
            TokenUse::RefreshToken => "refresh_token",
            TokenUse::ApiKey => "api_key",
        }
    }
}

/// An active token as RFC 7662 §2.2 describes it (D49).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ActiveToken {
    pub scopes: ScopeSet,
    /// The client the token was issued to; `None` for an API key.
    pub client_id: Option<ClientId>,
    /// The user, or the client for client credentials, or the key's id.
    pub sub: String,
    /// Unix seconds; `None` for an API key without an expiry.
    pub exp: Option<i64>,
    pub iat: i64,
    pub iss: String,
    pub aud: String,
    pub token_use: TokenUse,
    pub org: OrgId,
    /// D56: how the person signed in, for a person's token of a chain begun
    /// since D56.
    pub authn: Option<gatehouse_domain::mfa::Authn>,
    /// D56: when the person last authenticated (Unix seconds).
    pub auth_time: Option<i64>,
}

/// The answer: `None` is `{"active": false}`.
pub type Introspection = Option<ActiveToken>;

/// Refresh tokens carry this prefix (D3), as revocation reads them too.
pub const REFRESH_PREFIX: &str = "rt_";
