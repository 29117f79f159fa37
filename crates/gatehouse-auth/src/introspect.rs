//! Token introspection (RFC 7662, D49): what a confidential client may learn
//! about a token. The caller authenticates as at the token endpoint (D20);
//! the answer is an [`ActiveToken`] or nothing (`{"active": false}`), and
//! looking never changes anything: a refresh token is read, never used up
//! or replayed (D24), and no counter but D28's failure guard moves.

use std::sync::Arc;

use gatehouse_domain::{Client, ClientId, OrgId, ScopeSet, Timestamp, UserStatus};

use crate::caller::Caller;
use crate::error::{OAuthError, OAuthErrorKind};
use crate::grants::{AuthService, ClientAuth};
use crate::secrets;

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
}

/// The answer: `None` is `{"active": false}`.
pub type Introspection = Option<ActiveToken>;

/// Refresh tokens carry this prefix (D3), as revocation reads them too.
const REFRESH_PREFIX: &str = "rt_";

impl AuthService {
    /// D49: authenticates a client allowed to introspect — a confidential
    /// one; a public client is `invalid_client` like a wrong secret (D20).
    pub async fn authenticate_introspector(
        &self,
        auth: &ClientAuth,
    ) -> Result<Arc<Client>, OAuthError> {
        let client = self.authenticate_client(auth).await?;
        if client.is_public() {
            return Err(OAuthError::new(
                OAuthErrorKind::InvalidClient,
                "public clients cannot introspect tokens",
            ));
        }
        Ok(client)
    }

    /// `POST /oauth/introspect` (RFC 7662, D49): an access token or API key
    /// of the caller's organization, or a refresh token issued to the caller
    /// itself. `hint` (`token_type_hint`) is only a hint: a token is known
    /// by its form, so a wrong hint changes nothing. Anything else —
    /// malformed, forged, expired, revoked, unknown, another organization's
    /// or (refresh tokens) another client's — is `Ok(None)`.
    pub async fn introspect(
        &self,
        auth: &ClientAuth,
        token: &str,
        _hint: Option<&str>,
    ) -> Result<Introspection, OAuthError> {
        let client = self.authenticate_introspector(auth).await?;
        if token.starts_with(REFRESH_PREFIX) {
            return self.introspect_refresh(&client, token).await;
        }
        let caller = match self.authenticate_bearer(token).await {
            Ok(c) => c,
            Err(Ok(_)) => return Ok(None),
            Err(Err(e)) => return Err(e.into()),
        };
        let active = match caller {
            Caller::Token(c) => ActiveToken {
                scopes: c.scopes,
                client_id: Some(c.client_id.clone()),
                sub: c
                    .user
                    .as_ref()
                    .map_or_else(|| c.client_id.to_string(), ToString::to_string),
                exp: Some(c.exp),
                iat: c.iat,
                iss: self.issuer.iss.clone(),
                aud: self.issuer.aud.clone(),
                token_use: TokenUse::AccessToken,
                org: c.org.clone(),
            },
            Caller::ApiKey(k) => ActiveToken {
                scopes: k.scopes,
                client_id: None,
                sub: k.id.to_string(),
                // D27: keys have no expiry here (D49 allows `exp` absent).
                exp: None,
                iat: k.created_at.unix_seconds(),
                iss: self.issuer.iss.clone(),
                aud: self.issuer.aud.clone(),
                token_use: TokenUse::ApiKey,
                org: k.org.clone(),
            },
        };
        // D2, D49: another organization's token is as good as unknown.
        Ok((active.org == client.org).then_some(active))
    }

    /// D49: a refresh token, read only (`resolve_refresh_token` writes
    /// nothing): live, unused, unexpired, its chain not revoked, issued to
    /// the caller, its user still active.
    async fn introspect_refresh(
        &self,
        client: &Client,
        token: &str,
    ) -> Result<Introspection, OAuthError> {
        let digest = secrets::hash_secret(token);
        let Some((tok, chain)) = self.store.resolve_refresh_token(&digest).await? else {
            return Ok(None);
        };
        let now = Timestamp::now();
        if chain.client != client.id
            || chain.org != client.org
            || chain.revoked_at.is_some()
            || tok.used_at.is_some()
            || tok.expires_at <= now
            || chain.ends_at <= now
        {
            return Ok(None);
        }
        match self.store.get_user(&chain.org, &chain.user).await? {
            Some(u) if u.status == UserStatus::Active => {}
            _ => return Ok(None),
        }
        Ok(Some(ActiveToken {
            scopes: chain.scopes,
            client_id: Some(chain.client.clone()),
            sub: chain.user.to_string(),
            exp: Some(tok.expires_at.unix_seconds()),
            iat: tok.issued_at.unix_seconds(),
            iss: self.issuer.iss.clone(),
            aud: self.issuer.aud.clone(),
            token_use: TokenUse::RefreshToken,
            org: chain.org.clone(),
        }))
    }
}
