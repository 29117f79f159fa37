//! `gatehouse-auth` owns the authorization server's mechanisms: the scopes
//! a grant yields (D22), signing keys and the JWKS (D23), access-token
//! signing and verification with a bounded cache, PKCE, secret and password
//! hashing, the revocation set, rate limits and throttles (D25, D26, D28),
//! the checks of an authorization request, OpenID Connect's claims (D49)
//! and the dashboard client's sealing (D48).
//!
//! It speaks in domain types and returns [`OAuthError`] / [`TokenError`]; it
//! must not import HTTP types (axum, http, hyper) nor storage: the flows
//! that read and write storage are `gatehouse-app`'s (`oauth`), which hands
//! these mechanisms the records they need (`gatehouse_domain::auth_state`).

pub mod audit;
pub mod caller;
pub mod dashboard;
pub mod error;
pub mod flows;
pub mod grants;
pub mod introspect;
pub mod jwt;
pub mod keys;
pub mod oidc;
pub mod passkeys;
pub mod password;
pub mod pkce;
pub mod ratelimit;
pub mod revocation;
pub mod second_step;
pub mod secrets;
pub mod throttle;
pub mod totp;
pub mod usage;
pub mod verifier;
pub mod webhooks;

/// The random source keys and signatures are made with (re-exported for the
/// callers that sign outside a serving process: `gatehouse audit checkpoint`).
pub use aws_lc_rs::rand::SystemRandom;
pub use caller::{Caller, Lineage};
pub use error::{OAuthError, OAuthErrorKind, TokenError};
pub use grants::{AuthConfig, AuthService, ClientAuth, IssuedTokens};
pub use introspect::{ActiveToken, Introspection, TokenUse};
pub use jwt::AccessClaims;
pub use keys::{KeyRing, MasterKey, MasterKeys};
pub use verifier::TokenVerifier;

/// The token lifetime and what a revocation of it must outlive live in the
/// domain, where storage's revocation rules read them too.
pub use gatehouse_domain::{ACCESS_TOKEN_TTL_SECS, access_revocation_expiry};

/// Where tokens are valid: `iss` and `aud` (D23).
#[derive(Clone, Debug)]
pub struct Issuer {
    /// `public_url`, e.g. `https://localhost:8443`.
    pub iss: String,
    /// `{public_url}/v1`.
    pub aud: String,
}

impl Issuer {
    pub fn new(public_url: &str) -> Self {
        let iss = public_url.trim_end_matches('/').to_owned();
        Self {
            aud: format!("{iss}/v1"),
            iss,
        }
    }
}
