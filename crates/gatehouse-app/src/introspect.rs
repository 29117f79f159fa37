//! Token introspection (RFC 7662, D49) and the client authentication the
//! mock's `Prefer` answers come after (D53). Both delegate to
//! [`gatehouse_auth::AuthService`]; the rule (what is active, who may ask)
//! lives in `gatehouse-auth/src/introspect.rs`.

use gatehouse_auth::{AuthService, ClientAuth, Introspection, OAuthError};

use crate::App;

impl App {
    fn introspection_authority(&self) -> &AuthService {
        self.auth()
            .expect("the OAuth use cases run on App::new, which has the auth service")
    }

    /// `POST /oauth/introspect` (D49): `Ok(None)` is `{"active": false}`;
    /// `Err` only for the caller's own failure (client authentication, a
    /// public client) or storage trouble.
    pub async fn introspect(
        &self,
        client: &ClientAuth,
        token: &str,
        hint: Option<&str>,
    ) -> Result<Introspection, OAuthError> {
        self.introspection_authority()
            .introspect(client, token, hint)
            .await
    }

    /// D20 client authentication alone, as the endpoint named does it:
    /// `introspection` also refuses public clients (D49). The mock (D53)
    /// answers a `Prefer` only after it, as production answers its errors.
    pub async fn authenticate_client(
        &self,
        client: &ClientAuth,
        introspection: bool,
    ) -> Result<(), OAuthError> {
        let auth = self.introspection_authority();
        if introspection {
            auth.authenticate_introspector(client).await.map(drop)
        } else {
            auth.authenticate_client(client).await.map(drop)
        }
    }
}
