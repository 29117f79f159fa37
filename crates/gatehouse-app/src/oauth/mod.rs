//! The authorization server's use cases (D20–D29, D46, D48, D49): every
//! OAuth flow that reads or writes storage, in one place with the rest of
//! the application layer. `gatehouse-auth` keeps the mechanisms (JWT, keys,
//! PKCE, passwords, rate limits, the revocation set, throttles, sealing)
//! and knows no storage; each use case here reads what it needs, calls
//! those mechanisms and the domain's rules, and writes the outcome.

mod dashboard;
mod flows;
pub use flows::OperatorRevocation;
mod introspect;
mod tokens;

use gatehouse_auth::{AuthService, OAuthError};
use gatehouse_store::StoreError;

use crate::App;

impl App {
    /// The mechanisms of a serving process. Only an operator command's
    /// `App` has none, and it serves no requests.
    pub(crate) fn authority(&self) -> &AuthService {
        self.auth()
            .expect("the OAuth use cases run on App::new, which has the auth service")
    }
}

/// Storage trouble in an OAuth answer: `temporarily_unavailable` when
/// storage is unreachable, else an internal error (logged, never shown).
pub(crate) trait OrOAuth<T> {
    fn or_oauth(self) -> Result<T, OAuthError>;
}

impl<T> OrOAuth<T> for Result<T, StoreError> {
    fn or_oauth(self) -> Result<T, OAuthError> {
        self.map_err(oauth_store_error)
    }
}

/// See [`OrOAuth`].
pub(crate) fn oauth_store_error(e: StoreError) -> OAuthError {
    match e {
        StoreError::Unavailable(m) => OAuthError::unavailable(m),
        other => OAuthError::internal(other.to_string()),
    }
}
