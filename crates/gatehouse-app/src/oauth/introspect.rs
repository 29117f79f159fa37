//! Token introspection (RFC 7662, D49): what a confidential client may
//! learn about a token. Looking never changes a token: a refresh token is
//! read, never used up or replayed (D24), and no counter but D28's failure
//! guard moves. The audit log records introspection (D58): the first per
//! calling client per period and per new address, and every look at a
//! token of another client or organization.

use std::sync::Arc;

use gatehouse_auth::caller::Caller;
use gatehouse_auth::introspect::{ActiveToken, Introspection, REFRESH_PREFIX, TokenUse};
use gatehouse_auth::{ClientAuth, OAuthError, OAuthErrorKind, secrets};
use gatehouse_domain::{Client, Timestamp, UserStatus};

use crate::App;
use crate::oauth::OrOAuth;

impl App {
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
        request: &gatehouse_domain::event::RequestRef,
    ) -> Result<Introspection, OAuthError> {
        let client = self.authenticate_introspector(auth).await?;
        let (answer, whose) = if token.starts_with(REFRESH_PREFIX) {
            self.introspect_refresh(&client, token).await?
        } else {
            self.introspect_bearer(&client, token).await?
        };
        self.record_introspection(&client, whose, request).await;
        Ok(answer)
    }

    /// D58: `token.introspected`, every time for a token of another client
    /// or organization (the caller's organization records it; another
    /// organization's token is not named), else the first per period and
    /// new address.
    async fn record_introspection(
        &self,
        client: &Client,
        whose: Whose,
        request: &gatehouse_domain::event::RequestRef,
    ) {
        let now = Timestamp::now();
        let entry = |jti: Option<&str>, owner: Option<&str>| {
            gatehouse_domain::audit::introspected(&client.id, jti, owner, Some(request), now)
        };
        let foreign = match &whose {
            Whose::OtherOrganization => Some(entry(None, None)),
            Whose::OtherClient { target, owner } => {
                Some(entry(target.as_deref(), owner.as_deref()))
            }
            Whose::Caller { .. } | Whose::Unknown => None,
        };
        if let Some(e) = foreign {
            if let Err(err) = self.record_audit(&client.org, &e).await {
                tracing::error!(error = %err, "recording an introspection failed");
            }
            return;
        }
        let ip = request.source.as_ref().map_or("", |s| s.ip.as_str());
        let kind = crate::audit::FirstUse::Introspection;
        self.note_first_use(&client.org, kind, client.id.as_str(), ip, || match &whose {
            Whose::Caller { target } => entry(target.as_deref(), Some(client.id.as_str())),
            _ => entry(None, None),
        })
        .await;
    }

    /// An access token or API key: active only in the caller's
    /// organization.
    async fn introspect_bearer(
        &self,
        client: &Client,
        token: &str,
    ) -> Result<(Introspection, Whose), OAuthError> {
        let caller = match self.authenticate_bearer(token).await {
            Ok(c) => c,
            Err(Ok(_)) => return Ok((None, Whose::Unknown)),
            Err(Err(crate::AppError::Unavailable(m))) => return Err(OAuthError::unavailable(m)),
            Err(Err(e)) => return Err(OAuthError::internal(e.to_string())),
        };
        let whose = match &caller {
            Caller::Token(c) if c.org != client.org => Whose::OtherOrganization,
            Caller::ApiKey(k) if k.org != client.org => Whose::OtherOrganization,
            Caller::Token(c) if c.client_id == client.id => Whose::Caller {
                target: Some(c.jti.as_str().to_owned()),
            },
            Caller::Token(c) => Whose::OtherClient {
                target: Some(c.jti.as_str().to_owned()),
                owner: Some(c.client_id.as_str().to_owned()),
            },
            // An API key is no client's: always another's.
            Caller::ApiKey(_) => Whose::OtherClient {
                target: None,
                owner: None,
            },
        };
        let active = self.active_of(caller);
        // D2, D49: another organization's token is as good as unknown.
        Ok(((active.org == client.org).then_some(active), whose))
    }

    /// `gatehouse token introspect` (issue 32): D49's answer for any
    /// organization's token, as the operator sees it (no calling client,
    /// so no client or organization restricts it). Looking changes
    /// nothing and, unlike a client's look (D58), is not recorded: the
    /// operator already reads the database.
    pub async fn operator_introspect(&self, token: &str) -> Result<Introspection, OAuthError> {
        if token.starts_with(REFRESH_PREFIX) {
            let digest = secrets::hash_secret(token);
            return match grant_store(self)
                .resolve_refresh_token(&digest)
                .await
                .or_oauth()?
            {
                Some((tok, chain)) => self.refresh_answer(None, tok, chain).await,
                None => Ok(None),
            };
        }
        match self.authenticate_bearer(token).await {
            Ok(caller) => Ok(Some(self.active_of(caller))),
            Err(Ok(_)) => Ok(None),
            Err(Err(crate::AppError::Unavailable(m))) => Err(OAuthError::unavailable(m)),
            Err(Err(e)) => Err(OAuthError::internal(e.to_string())),
        }
    }

    /// D49's answer for a live access token or API key.
    fn active_of(&self, caller: Caller) -> ActiveToken {
        match caller {
            Caller::Token(c) => ActiveToken {
                scopes: c.scopes,
                client_id: Some(c.client_id.clone()),
                sub: c
                    .user
                    .as_ref()
                    .map_or_else(|| c.client_id.to_string(), ToString::to_string),
                exp: Some(c.exp),
                iat: c.iat,
                iss: self.authority().issuer().iss.clone(),
                aud: self.authority().issuer().aud.clone(),
                token_use: TokenUse::AccessToken,
                org: c.org.clone(),
                authn: c.authn.clone(),
                auth_time: c.auth_time,
            },
            Caller::ApiKey(k) => ActiveToken {
                scopes: k.scopes,
                client_id: None,
                sub: k.id.to_string(),
                // D27: keys have no expiry here (D49 allows `exp` absent).
                exp: None,
                iat: k.created_at.unix_seconds(),
                iss: self.authority().issuer().iss.clone(),
                aud: self.authority().issuer().aud.clone(),
                token_use: TokenUse::ApiKey,
                org: k.org.clone(),
                authn: None,
                auth_time: None,
            },
        }
    }

    /// D49: a refresh token, read only (`resolve_refresh_token` writes
    /// nothing): live, unused, unexpired, its chain not revoked, issued to
    /// the caller, its user still active.
    async fn introspect_refresh(
        &self,
        client: &Client,
        token: &str,
    ) -> Result<(Introspection, Whose), OAuthError> {
        let digest = secrets::hash_secret(token);
        let Some((tok, chain)) = grant_store(self)
            .resolve_refresh_token(&digest)
            .await
            .or_oauth()?
        else {
            return Ok((None, Whose::Unknown));
        };
        let whose = if chain.org != client.org {
            Whose::OtherOrganization
        } else if chain.client != client.id {
            Whose::OtherClient {
                target: None,
                owner: Some(chain.client.as_str().to_owned()),
            }
        } else {
            Whose::Caller { target: None }
        };
        let answer = self.refresh_answer(Some(client), tok, chain).await?;
        Ok((answer, whose))
    }

    /// D49's refresh-token answer, once found: active only for the calling
    /// client, if any (the operator's look has none).
    async fn refresh_answer(
        &self,
        client: Option<&Client>,
        tok: gatehouse_store::RefreshToken,
        chain: gatehouse_store::RefreshChain,
    ) -> Result<Introspection, OAuthError> {
        let now = Timestamp::now();
        if client.is_some_and(|c| chain.client != c.id || chain.org != c.org)
            || chain.revoked_at.is_some()
            || tok.used_at.is_some()
            || tok.expires_at <= now
            || chain.ends_at <= now
        {
            return Ok(None);
        }
        match user_store(self)
            .get_user(&chain.org, &chain.user)
            .await
            .or_oauth()?
        {
            Some(u) if u.status == UserStatus::Active => {}
            _ => return Ok(None),
        }
        Ok(Some(ActiveToken {
            scopes: chain.scopes,
            client_id: Some(chain.client.clone()),
            sub: chain.user.to_string(),
            exp: Some(tok.expires_at.unix_seconds()),
            iat: tok.issued_at.unix_seconds(),
            iss: self.authority().issuer().iss.clone(),
            aud: self.authority().issuer().aud.clone(),
            token_use: TokenUse::RefreshToken,
            org: chain.org.clone(),
            // As the chain's access tokens carry it (D49's, kept for
            // chains begun before D56 too).
            auth_time: chain.auth_time.map(Timestamp::unix_seconds),
            authn: chain.authn.clone(),
        }))
    }

    /// D20 client authentication alone, as the endpoint named does it:
    /// `introspection` also refuses public clients (D49). The mock (D53)
    /// answers a `Prefer` only after it, as production answers its errors.
    pub async fn check_client_authentication(
        &self,
        client: &ClientAuth,
        introspection: bool,
    ) -> Result<(), OAuthError> {
        if introspection {
            self.authenticate_introspector(client).await.map(drop)
        } else {
            self.authenticate_client(client).await.map(drop)
        }
    }
}

/// This area's view of storage: the `GrantStore` trait only (issue 25).
fn grant_store(app: &App) -> &dyn gatehouse_store::GrantStore {
    app.0.store.as_ref()
}

/// This area's view of storage: the `UserStore` trait only (issue 25).
fn user_store(app: &App) -> &dyn gatehouse_store::UserStore {
    app.0.store.as_ref()
}

/// Whose token an introspection looked at (D58).
enum Whose {
    /// Not a live token anyone holds (malformed, forged, unknown).
    Unknown,
    /// The caller's own: the access token's `jti` when there is one.
    Caller { target: Option<String> },
    /// Another client's of the caller's organization (or an API key): the
    /// `jti` and the client it was issued to, when known.
    OtherClient {
        target: Option<String>,
        owner: Option<String>,
    },
    /// Another organization's: nothing of it is written down.
    OtherOrganization,
}
