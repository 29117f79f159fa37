//! Grants on behalf of people (D24–D26, D29): the authorization request, login
//! with throttling, sessions, codes with PKCE, refresh chains with the grace
//! window and reuse detection, revocation (D25), and the single-use links of
//! invitations and password resets (D11, D19).

use gatehouse_domain::{
    ChainId, Client, ClientId, Email, Jti, OrgId, RedirectUri, Role, Scope, ScopeSet, Timestamp,
    User, UserId, UserStatus, random,
};
use gatehouse_store::{
    AuthCode, LinkKind, NewLink, OutboundEmail, Redeemed, RefreshChain, RefreshToken,
    RevocationKind, Rotated, Session, StoreError,
};
use serde::{Deserialize, Serialize};

use crate::error::{OAuthError, OAuthErrorKind};
use crate::grants::{AuthService, ClientAuth, IssuedTokens};
use crate::jwt::{self, AccessClaims};
use crate::oidc::{self, Prompt};
use crate::{ACCESS_TOKEN_TTL_SECS, password, pkce, secrets, throttle};

/// Authorization codes live five minutes (D26).
pub const CODE_TTL_SECS: i64 = 300;
/// Refresh tokens slide over 30 days (interface.md §5.4).
pub const REFRESH_TTL_SECS: i64 = 30 * 86400;
/// Browser sessions after login.
pub const SESSION_TTL_SECS: i64 = 12 * 3600;
/// Invitation links live seven days (D11), reset links one hour (D19).
pub const INVITATION_TTL_SECS: i64 = 7 * 86400;
pub const RESET_TTL_SECS: i64 = 3600;

/// The parameters of an authorization request (`GET /oauth/authorize`, and
/// the sign-in and consent forms that carry them on).
#[derive(Clone, Debug, Default)]
pub struct AuthorizeParams {
    pub response_type: Option<String>,
    pub client_id: Option<String>,
    pub redirect_uri: Option<String>,
    pub scope: Option<String>,
    pub state: Option<String>,
    pub code_challenge: Option<String>,
    pub code_challenge_method: Option<String>,
    /// D49: OpenID Connect's parameters.
    pub nonce: Option<String>,
    pub prompt: Option<String>,
    pub max_age: Option<String>,
    pub login_hint: Option<String>,
    pub request_uri: Option<String>,
    pub request: Option<String>,
    /// D45 (continued): the names sent more than once. None of their values
    /// is in the fields above (never the first or the last).
    pub repeated: Vec<String>,
}

impl AuthorizeParams {
    /// D45 (continued), first step: a repeated `client_id` or
    /// `redirect_uri` leaves no redirect URI to trust, so it gets D26's
    /// error page and never a redirect.
    pub(crate) fn refuse_repeated_target(&self) -> Result<(), AuthorizeError> {
        match self
            .repeated
            .iter()
            .find(|n| *n == "client_id" || *n == "redirect_uri")
        {
            Some(name) => Err(AuthorizeError::Page(format!(
                "The application sent {name} more than once."
            ))),
            None => Ok(()),
        }
    }

    /// D45 (continued), once the redirect URI is verified: any other
    /// repeated parameter is `invalid_request` (RFC 6749 §3.1), sent there
    /// by `to_client` (which adds `state` — absent when `state` itself is
    /// the repeated one, since its value was never read).
    pub(crate) fn refuse_repeated(
        &self,
        to_client: impl FnOnce(OAuthErrorKind, &str) -> AuthorizeError,
    ) -> Result<(), AuthorizeError> {
        let Some(name) = self.repeated.first() else {
            return Ok(());
        };
        // The name is the sender's: echoed only when short and plain
        // (RFC 6749 §5.2 limits `error_description`'s characters).
        let plain =
            name.len() <= 64 && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
        let description = if plain {
            format!("{name} is given more than once")
        } else {
            "a parameter is given more than once".to_owned()
        };
        Err(to_client(OAuthErrorKind::InvalidRequest, &description))
    }
}

/// Why an authorization request is refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AuthorizeError {
    /// The client or redirect URI cannot be trusted: an error page, never a redirect (D26).
    Page(String),
    /// Sent back to the client at its redirect URI.
    Redirect {
        redirect_uri: String,
        error: OAuthErrorKind,
        description: String,
        state: Option<String>,
    },
}

/// A checked authorization request.
#[derive(Clone, Debug)]
pub struct AuthorizeRequest {
    pub client: Client,
    pub redirect_uri: String,
    /// Known scopes asked for (unknown ones dropped); `None` when `scope` was omitted.
    pub requested: Option<ScopeSet>,
    pub state: Option<String>,
    pub code_challenge: String,
    /// D49: echoed in the ID token.
    pub nonce: Option<String>,
    pub prompt: Prompt,
    pub max_age: Option<i64>,
    /// D49: pre-fills the e-mail on the sign-in page.
    pub login_hint: Option<String>,
}

impl AuthorizeRequest {
    /// D26, D29: what was asked (or, if omitted, what the client is registered
    /// for, without `admin`) ∩ the client's scopes ∩ what the role allows;
    /// `admin` only for an approved client.
    pub fn grantable(&self, role: Role) -> ScopeSet {
        let mut asked = match self.requested {
            Some(s) => s,
            // D49: the OpenID Connect scopes only when asked for by name.
            None => self.client.scopes.without(Scope::Admin).without_identity(),
        };
        if !self.client.admin_approved {
            asked = asked.without(Scope::Admin);
        }
        asked
            .intersect(self.client.scopes)
            .intersect(ScopeSet::for_role(role))
    }

    /// D49 (RFC 8252 §8.6): consent is not remembered for a public client
    /// whose redirect URI is a loopback address: any local program can use
    /// its `client_id`.
    pub fn may_remember_consent(&self) -> bool {
        !(self.client.is_public() && RedirectUri::is_loopback(&self.redirect_uri))
    }

    /// D49: what a person signed in at `auth_time` needs: a fresh sign-in
    /// (`prompt=login`, `max_age`).
    pub fn needs_fresh_login(&self, auth_time: Timestamp) -> bool {
        oidc::needs_fresh_login(self.prompt, self.max_age, auth_time)
    }

    pub fn error(&self, error: OAuthErrorKind, description: &str) -> AuthorizeError {
        AuthorizeError::Redirect {
            redirect_uri: self.redirect_uri.clone(),
            error,
            description: description.to_owned(),
            state: self.state.clone(),
        }
    }
}

/// Why `/oauth/userinfo` refused a token (RFC 6750 §3.1).
#[derive(Debug, thiserror::Error)]
pub enum UserinfoError {
    #[error("the access token is invalid")]
    InvalidToken,
    #[error("the token was not issued to a person with the openid scope")]
    InsufficientScope,
    #[error(transparent)]
    Store(StoreError),
}

/// Why a login failed. Every kind reads the same to the person (D26).
#[derive(Debug, PartialEq, Eq)]
pub enum LoginError {
    Failed,
    Unavailable(String),
}

/// The pair sealed for the grace window (D24).
#[derive(Serialize, Deserialize)]
struct SealedPair {
    access_token: String,
    refresh_token: String,
    scope: String,
    issued_at: i64,
    /// D49: the ID token of the pair, when the chain has `openid`.
    #[serde(default)]
    id_token: Option<String>,
}

fn digest(token: &str) -> [u8; 32] {
    secrets::hash_secret(token)
}

fn invalid_grant(d: &str) -> OAuthError {
    OAuthError::new(OAuthErrorKind::InvalidGrant, d)
}

/// What an authorization request carries besides its client and redirect
/// URI, checked the same way for every client, the dashboard's built-in one
/// included (D26, D48 continued, D49).
pub(crate) struct CheckedRequest {
    pub(crate) code_challenge: String,
    pub(crate) prompt: Prompt,
    pub(crate) max_age: Option<i64>,
    pub(crate) nonce: Option<String>,
}

/// D26, D49: the checks after the redirect URI is trusted, whose failures
/// go to it through `to_client`: no request object, `response_type=code`,
/// PKCE with S256, `prompt`, `max_age` and `nonce` readable.
pub(crate) fn check_after_target(
    p: &AuthorizeParams,
    to_client: impl Fn(OAuthErrorKind, &str) -> AuthorizeError,
) -> Result<CheckedRequest, AuthorizeError> {
    // D49: request objects by value or by reference are not supported.
    if p.request_uri.is_some() {
        return Err(to_client(
            OAuthErrorKind::RequestUriNotSupported,
            "request_uri is not supported",
        ));
    }
    if p.request.is_some() {
        return Err(to_client(
            OAuthErrorKind::RequestNotSupported,
            "request objects are not supported",
        ));
    }
    match p.response_type.as_deref() {
        Some("code") => {}
        None => {
            return Err(to_client(
                OAuthErrorKind::InvalidRequest,
                "response_type is required",
            ));
        }
        Some(_) => {
            return Err(to_client(
                OAuthErrorKind::UnsupportedResponseType,
                "only response_type=code is supported",
            ));
        }
    }
    if p.code_challenge_method.as_deref() != Some("S256") {
        return Err(to_client(
            OAuthErrorKind::InvalidRequest,
            "PKCE with code_challenge_method=S256 is required",
        ));
    }
    let code_challenge = match p.code_challenge.as_deref() {
        Some(c) if pkce::valid_challenge(c) => c.to_owned(),
        _ => {
            return Err(to_client(
                OAuthErrorKind::InvalidRequest,
                "code_challenge must be the base64url SHA-256 of the verifier",
            ));
        }
    };
    let prompt = Prompt::parse(p.prompt.as_deref())
        .map_err(|m| to_client(OAuthErrorKind::InvalidRequest, m))?;
    let max_age = oidc::parse_max_age(p.max_age.as_deref())
        .map_err(|m| to_client(OAuthErrorKind::InvalidRequest, m))?;
    let nonce = match p.nonce.as_deref() {
        Some(n) if n.len() > 512 => {
            return Err(to_client(
                OAuthErrorKind::InvalidRequest,
                "nonce must be at most 512 characters",
            ));
        }
        n => n.map(str::to_owned),
    };
    Ok(CheckedRequest {
        code_challenge,
        prompt,
        max_age,
        nonce,
    })
}

impl AuthService {
    /// D26: checks client and redirect URI first (failures are pages), then the rest
    /// (failures go to the redirect URI).
    pub async fn check_authorize(
        &self,
        p: &AuthorizeParams,
    ) -> Result<AuthorizeRequest, AuthorizeError> {
        let page = |m: &str| AuthorizeError::Page(m.to_owned());
        p.refuse_repeated_target()?;
        let client_id = p
            .client_id
            .as_deref()
            .and_then(ClientId::parse)
            .ok_or_else(|| page("The application is unknown."))?;
        let client = match self.store.resolve_client(&client_id).await {
            Ok(Some(c)) => c,
            Ok(None) => return Err(page("The application is unknown.")),
            Err(e) => {
                tracing::error!(cause = %e, "authorize: client look-up failed");
                return Err(page(
                    "The service is temporarily unavailable. Try again in a moment.",
                ));
            }
        };
        let presented = p
            .redirect_uri
            .as_deref()
            .ok_or_else(|| page("The application sent no redirect_uri."))?;
        let registered = client
            .redirect_uris
            .iter()
            .filter_map(|u| RedirectUri::parse(u).ok())
            .any(|u| u.matches(presented));
        if !registered {
            return Err(page(
                "The redirect_uri is not registered for this application.",
            ));
        }
        let mut req = AuthorizeRequest {
            redirect_uri: presented.to_owned(),
            requested: p
                .scope
                .as_deref()
                .map(|s| s.split(' ').filter_map(Scope::parse).collect()),
            state: p.state.clone(),
            code_challenge: String::new(),
            nonce: None,
            prompt: Prompt::default(),
            max_age: None,
            login_hint: p.login_hint.clone(),
            client,
        };
        p.refuse_repeated(|e, d| req.error(e, d))?;
        // D46 (revised): a suspended application signs nobody in; its
        // redirect URI is verified, so it is told there.
        if req.client.suspended_reason().is_some() {
            return Err(req.error(
                OAuthErrorKind::UnauthorizedClient,
                crate::error::APPLICATION_SUSPENDED,
            ));
        }
        let checked = check_after_target(p, |e, d| req.error(e, d))?;
        req.code_challenge = checked.code_challenge;
        req.prompt = checked.prompt;
        req.max_age = checked.max_age;
        req.nonce = checked.nonce;
        Ok(req)
    }

    /// D26: e-mail and password within the client's organization, throttled.
    pub async fn login(
        &self,
        org: &OrgId,
        email: &str,
        pw: &str,
        source: &str,
    ) -> Result<User, LoginError> {
        let unavailable = |e: StoreError| LoginError::Unavailable(e.to_string());
        // Shape rules only: an account whose address the mailer refuses
        // (D8 revised) may have been created with a password by the CLI.
        let Ok(email) = Email::parse_for_lookup(email) else {
            return Err(LoginError::Failed);
        };
        let norm = email.normalized();
        let now = Timestamp::now();
        let failures = self
            .store
            .login_failures(org, &norm, throttle::lookback(now))
            .await
            .map_err(unavailable)?;
        if throttle::is_locked(&failures, source, now) {
            return Err(LoginError::Failed);
        }
        let found = self
            .store
            .find_user_by_email(org, &email)
            .await
            .map_err(unavailable)?;
        let ok = match found {
            Some((user, Some(hash))) if user.status == UserStatus::Active => {
                password::verify(pw.to_owned(), hash).await.then_some(user)
            }
            _ => {
                // The same work as a real check, so timing tells nothing.
                password::verify(pw.to_owned(), password::dummy_hash().to_owned()).await;
                None
            }
        };
        match ok {
            Some(user) => Ok(user),
            None => {
                self.store
                    .record_login_failure(org, &norm, source, now)
                    .await
                    .map_err(unavailable)?;
                Err(LoginError::Failed)
            }
        }
    }

    /// A new browser session: the cookie value and the session (whose
    /// `created_at` is the sign-in's `auth_time`, D49).
    pub async fn create_session(
        &self,
        user: &User,
        org: &OrgId,
    ) -> Result<(String, Session), StoreError> {
        let token = random::token("", 256);
        let now = Timestamp::now();
        let sess = Session {
            org: org.clone(),
            user: user.id.clone(),
            created_at: now,
            expires_at: now.plus_seconds(SESSION_TTL_SECS),
            sid: Some(random::token("", 128)),
        };
        self.store
            .create_session(org, &digest(&token), &sess)
            .await?;
        Ok((token, sess))
    }

    /// The session of a cookie, whatever its organization, while it lasts.
    pub async fn session(&self, cookie: &str) -> Result<Option<Session>, StoreError> {
        Ok(self
            .store
            .resolve_session(&digest(cookie))
            .await?
            .filter(|s| s.expires_at > Timestamp::now()))
    }

    /// The active user of a session cookie in `org`, with the session.
    pub async fn session_user(
        &self,
        cookie: &str,
        org: &OrgId,
    ) -> Result<Option<(User, Session)>, StoreError> {
        let Some(sess) = self.session(cookie).await? else {
            return Ok(None);
        };
        if &sess.org != org {
            return Ok(None);
        }
        Ok(self
            .store
            .get_user(org, &sess.user)
            .await?
            .filter(|u| u.status == UserStatus::Active)
            .map(|u| (u, sess)))
    }

    pub async fn end_session(&self, cookie: &str) -> Result<(), StoreError> {
        self.store.delete_session(&digest(cookie)).await
    }

    /// D49 logout: ends the session of `cookie` and revokes the refresh
    /// chains begun in it. Nothing happens for an unknown cookie.
    pub async fn logout(&self, cookie: &str) -> Result<(), OAuthError> {
        let Some(sess) = self.store.resolve_session(&digest(cookie)).await? else {
            return Ok(());
        };
        // The chains first, the session last: if a revocation fails, the
        // session is still there, so signing out again finishes the job.
        if let Some(sid) = &sess.sid {
            let chains = self
                .store
                .live_chains(
                    &sess.org,
                    &gatehouse_store::ChainFilter::Session(sid.clone()),
                )
                .await?;
            for chain in chains {
                self.revoke_chain_now(&sess.org, &chain).await?;
            }
        }
        self.store.delete_session(&digest(cookie)).await?;
        Ok(())
    }

    /// D49: forgets the consent `user` gave `client` and revokes the
    /// refresh chains (and so the access tokens) the person holds for it.
    /// `false` when there was neither a consent nor a live chain.
    pub async fn forget_consent(
        &self,
        org: &OrgId,
        user: &UserId,
        client: &ClientId,
    ) -> Result<bool, OAuthError> {
        let forgot = self.store.forget_consent(org, user, client).await?;
        let chains = self
            .store
            .live_chains(
                org,
                &gatehouse_store::ChainFilter::UserClient(user.clone(), client.clone()),
            )
            .await?;
        let any = forgot || !chains.is_empty();
        for chain in chains {
            self.revoke_chain_now(org, &chain).await?;
        }
        Ok(any)
    }

    /// D49: whether the consent page can be skipped for `granted`; marks
    /// the remembered consent used when it can.
    pub async fn remembered_consent_covers(
        &self,
        req: &AuthorizeRequest,
        user: &User,
        granted: ScopeSet,
    ) -> Result<bool, StoreError> {
        // `prompt=consent` and `admin` are `consent_covers`'s to refuse.
        if !req.may_remember_consent() {
            return Ok(false);
        }
        let remembered = self
            .store
            .consent(&req.client.org, &user.id, &req.client.id)
            .await?
            .map(|c| c.scopes);
        let covers = oidc::consent_covers(req.prompt, remembered, granted);
        if covers {
            self.store
                .remember_consent(
                    &req.client.org,
                    &user.id,
                    &req.client.id,
                    ScopeSet::EMPTY,
                    Timestamp::now(),
                )
                .await?;
        }
        Ok(covers)
    }

    /// D49: remembers what the person just allowed (never `admin`, never
    /// for a public client on a loopback redirect URI).
    pub async fn remember_consent(
        &self,
        req: &AuthorizeRequest,
        user: &User,
        granted: ScopeSet,
    ) -> Result<(), StoreError> {
        if !req.may_remember_consent() {
            return Ok(());
        }
        self.store
            .remember_consent(
                &req.client.org,
                &user.id,
                &req.client.id,
                granted.without(Scope::Admin),
                Timestamp::now(),
            )
            .await
    }

    /// A single-use code for the approved request (D26).
    pub async fn issue_code(
        &self,
        req: &AuthorizeRequest,
        user: &User,
        session: &Session,
        scopes: ScopeSet,
    ) -> Result<String, StoreError> {
        let code = random::token("ac_", 256);
        let now = Timestamp::now();
        self.store
            .insert_auth_code(
                &req.client.org,
                &AuthCode {
                    digest: digest(&code),
                    org: req.client.org.clone(),
                    client: req.client.id.clone(),
                    user: user.id.clone(),
                    redirect_uri: req.redirect_uri.clone(),
                    scopes,
                    code_challenge: req.code_challenge.clone(),
                    created_at: now,
                    expires_at: now.plus_seconds(CODE_TTL_SECS),
                    used_at: None,
                    chain: None,
                    nonce: req.nonce.clone(),
                    auth_time: Some(session.created_at),
                    sid: session.sid.clone(),
                },
            )
            .await?;
        Ok(code)
    }

    /// D49: the ID token for a response of `chain` whose granted `scopes`
    /// (those of `claims`, the access token it goes with) include `openid`;
    /// `None` otherwise.
    async fn id_token(
        &self,
        user: &User,
        chain: &RefreshChain,
        nonce: Option<&str>,
        claims: &AccessClaims,
        response: &IssuedTokens,
    ) -> Result<Option<String>, OAuthError> {
        let scopes = claims.scopes;
        if !scopes.contains(Scope::OpenId) {
            return Ok(None);
        }
        let email_verified = if scopes.contains(Scope::Email) {
            self.store.email_verified(&chain.org, &user.id).await?
        } else {
            false
        };
        let subject = oidc::Subject {
            user,
            email_verified,
        };
        let claims = oidc::id_claims(
            &self.issuer,
            &subject,
            &oidc::IdTokenInput {
                client: &chain.client,
                auth_time: chain.auth_time.unwrap_or(chain.created_at),
                nonce,
                sid: chain.sid.as_deref(),
                access_token: &response.access_token,
                scopes,
            },
        );
        Ok(Some(oidc::sign(&self.keys.current(), &self.rng, &claims)))
    }

    /// D49 `/oauth/userinfo`: `sub` and the claims of the token's scopes,
    /// for an access token issued to a person with `openid`.
    pub async fn userinfo(&self, token: &str) -> Result<oidc::UserInfo, UserinfoError> {
        let claims = self
            .verify_access_token(token)
            .map_err(|_| UserinfoError::InvalidToken)?;
        let Some(user_id) = &claims.user else {
            return Err(UserinfoError::InsufficientScope);
        };
        if !claims.scopes.contains(Scope::OpenId) {
            return Err(UserinfoError::InsufficientScope);
        }
        let user = match self.store.get_user(&claims.org, user_id).await {
            Ok(Some(u)) if u.status == UserStatus::Active => u,
            Ok(_) => return Err(UserinfoError::InvalidToken),
            Err(e) => return Err(UserinfoError::Store(e)),
        };
        let email_verified = if claims.scopes.contains(Scope::Email) {
            self.store
                .email_verified(&claims.org, user_id)
                .await
                .map_err(UserinfoError::Store)?
        } else {
            false
        };
        Ok(oidc::UserInfo {
            sub: user.id.as_str().to_owned(),
            claims: oidc::ScopeClaims::of(
                &oidc::Subject {
                    user: &user,
                    email_verified,
                },
                claims.scopes,
            ),
        })
    }

    /// D49 logout: a verified `id_token_hint` whose `aud` is a client that
    /// exists (its organization's), with that client.
    pub async fn logout_hint(
        &self,
        hint: &str,
    ) -> Result<Option<(oidc::Hint, Client)>, StoreError> {
        let Some(h) = oidc::verify_hint(&self.keys.current(), &self.issuer, hint) else {
            return Ok(None);
        };
        Ok(self.store.resolve_client(&h.client).await?.map(|c| (h, c)))
    }

    async fn active_user(&self, org: &OrgId, id: &UserId) -> Result<User, OAuthError> {
        match self.store.get_user(org, id).await? {
            Some(u) if u.status == UserStatus::Active => Ok(u),
            _ => Err(invalid_grant("the user is no longer active")),
        }
    }

    fn new_refresh(
        &self,
        chain: &RefreshChain,
        now: Timestamp,
        access_jti: &Jti,
    ) -> (String, RefreshToken) {
        let token = random::token("rt_", 256);
        let rec = RefreshToken {
            digest: digest(&token),
            chain: chain.id.clone(),
            issued_at: now,
            expires_at: now.plus_seconds(REFRESH_TTL_SECS).min(chain.ends_at),
            used_at: None,
            successor_sealed: None,
            successor_until: None,
            access_jti: Some(access_jti.clone()),
        };
        (token, rec)
    }

    async fn revoke_chain_now(&self, org: &OrgId, chain: &ChainId) -> Result<(), OAuthError> {
        metrics::counter!("gatehouse_revocations_total", "kind" => "chain").increment(1);
        let now = Timestamp::now();
        let until = crate::access_revocation_expiry(now);
        match self.store.revoke_chain(org, chain, now, until).await {
            // A chain purged after its end has nothing left to revoke.
            Ok(()) | Err(StoreError::NotFound) => {}
            Err(e) => return Err(e.into()),
        }
        self.revocations
            .apply(&[gatehouse_store::NewRevocation::chain(chain, now, until).stored(0)]);
        Ok(())
    }

    pub(crate) async fn revoke_jti_now(
        &self,
        jti: &Jti,
        expires_at: Timestamp,
    ) -> Result<(), OAuthError> {
        metrics::counter!("gatehouse_revocations_total", "kind" => "access_token").increment(1);
        let now = Timestamp::now();
        let jti = jti.as_str();
        self.store
            .insert_revocation(RevocationKind::Jti, jti, now.unix_seconds(), expires_at)
            .await?;
        self.revocations.apply(&[gatehouse_store::Revocation {
            id: 0,
            kind: RevocationKind::Jti,
            subject: jti.to_owned(),
            cutoff: now.unix_seconds(),
            expires_at,
            scopes: None,
        }]);
        Ok(())
    }

    /// `grant_type=authorization_code` (D26): code, same `redirect_uri`, the
    /// PKCE verifier; the client authenticates unless public.
    pub async fn authorization_code(
        &self,
        auth: &ClientAuth,
        code: Option<&str>,
        redirect_uri: Option<&str>,
        verifier: Option<&str>,
    ) -> Result<IssuedTokens, OAuthError> {
        let client = self.authenticate_client(auth).await?;
        let code = code.ok_or_else(|| OAuthError::invalid_request("code is required"))?;
        let redirect_uri =
            redirect_uri.ok_or_else(|| OAuthError::invalid_request("redirect_uri is required"))?;
        let verifier = verifier
            .ok_or_else(|| OAuthError::invalid_request("code_verifier is required (PKCE)"))?;
        let d = digest(code);
        let rec = self
            .store
            .resolve_auth_code(&d)
            .await?
            .ok_or_else(|| invalid_grant("the code is invalid"))?;
        if rec.client != client.id {
            return Err(invalid_grant("the code was issued to another client"));
        }
        if rec.used_at.is_some() {
            // D26: a second use revokes what the first issued.
            if let Some(chain) = &rec.chain {
                self.revoke_chain_now(&rec.org, chain).await?;
            }
            return Err(invalid_grant("the code was already used"));
        }
        let now = Timestamp::now();
        if rec.expires_at <= now {
            return Err(invalid_grant("the code has expired"));
        }
        if rec.redirect_uri != redirect_uri {
            return Err(invalid_grant(
                "redirect_uri differs from the authorization request",
            ));
        }
        if !pkce::verify(verifier, &rec.code_challenge) {
            return Err(invalid_grant(
                "code_verifier does not match the code_challenge",
            ));
        }
        let user = self.active_user(&rec.org, &rec.user).await?;
        let scopes = rec.scopes.intersect(ScopeSet::for_role(user.role));
        let chain = RefreshChain {
            id: ChainId::generate(),
            org: rec.org.clone(),
            client: client.id.clone(),
            user: user.id.clone(),
            scopes,
            created_at: now,
            ends_at: now.plus_seconds(self.config.refresh_max_days * 86400),
            revoked_at: None,
            auth_time: rec.auth_time,
            sid: rec.sid.clone(),
        };
        let claims = AccessClaims::issue(
            rec.org.clone(),
            client.id.clone(),
            Some(user.id.clone()),
            scopes,
        )
        .in_chain(&chain.id);
        let (refresh, token_rec) = self.new_refresh(&chain, now, &claims.jti);
        match self
            .store
            .redeem_auth_code(&d, now, &chain, &token_rec)
            .await?
        {
            Redeemed::Fresh => {
                self.count_issued("authorization_code");
                let mut response = self.token_response(&claims, Some(refresh));
                response.id_token = self
                    .id_token(&user, &chain, rec.nonce.as_deref(), &claims, &response)
                    .await?;
                Ok(response)
            }
            Redeemed::Reused(first) => {
                if let Some(chain) = first {
                    self.revoke_chain_now(&rec.org, &chain).await?;
                }
                Err(invalid_grant("the code was already used"))
            }
        }
    }

    /// `grant_type=refresh_token` (D24).
    pub async fn refresh(
        &self,
        auth: &ClientAuth,
        refresh_token: Option<&str>,
        scope: Option<&str>,
    ) -> Result<IssuedTokens, OAuthError> {
        let client = self.authenticate_client(auth).await?;
        let presented = refresh_token
            .ok_or_else(|| OAuthError::invalid_request("refresh_token is required"))?;
        let d = digest(presented);
        let (tok, chain) = self
            .store
            .resolve_refresh_token(&d)
            .await?
            .ok_or_else(|| invalid_grant("the refresh token is invalid"))?;
        if chain.client != client.id {
            return Err(invalid_grant(
                "the refresh token was issued to another client",
            ));
        }
        if chain.revoked_at.is_some() {
            return Err(invalid_grant("the refresh token was revoked"));
        }
        let now = Timestamp::now();
        let narrowed = match scope.map(str::trim).filter(|s| !s.is_empty()) {
            None => chain.scopes,
            Some(s) => {
                let set = ScopeSet::parse(s)
                    .map_err(|w| OAuthError::invalid_scope(format!("unknown scope: {w}")))?;
                if !set.is_subset(chain.scopes) {
                    return Err(OAuthError::invalid_scope(
                        "a refresh cannot widen the granted scopes",
                    ));
                }
                set
            }
        };
        let stored = match tok.used_at {
            Some(_) => tok,
            None => {
                if tok.expires_at <= now || chain.ends_at <= now {
                    return Err(invalid_grant("the refresh token has expired"));
                }
                let user = self.active_user(&chain.org, &chain.user).await?;
                let scopes = narrowed.intersect(ScopeSet::for_role(user.role));
                let claims = AccessClaims::issue(
                    chain.org.clone(),
                    client.id.clone(),
                    Some(user.id.clone()),
                    scopes,
                )
                .in_chain(&chain.id);
                let (refresh, next) = self.new_refresh(&chain, now, &claims.jti);
                let mut response = self.token_response(&claims, Some(refresh.clone()));
                // D49: a refresh of a chain with `openid` gets a new ID
                // token: same `sub` and `auth_time`, no `nonce`.
                response.id_token = self
                    .id_token(&user, &chain, None, &claims, &response)
                    .await?;
                let sealed = serde_json::to_vec(&SealedPair {
                    access_token: response.access_token.clone(),
                    refresh_token: refresh,
                    scope: response.scope.clone(),
                    issued_at: now.millis(),
                    id_token: response.id_token.clone(),
                })
                .expect("pair serializes");
                let sealed = self.keys.master().encrypt(&sealed, &d);
                let until = now.plus_seconds(self.config.refresh_grace_secs.max(0));
                // D24: the previous access token of the chain dies with the
                // refresh, in the rotation's own transaction.
                let access_expiry = crate::access_revocation_expiry(now);
                match self
                    .store
                    .rotate_refresh_token(&d, &client.id, now, &sealed, until, &next, access_expiry)
                    .await
                {
                    Ok(Rotated::Fresh(revoked)) => {
                        self.count_issued("refresh_token");
                        if let Some(r) = revoked {
                            metrics::counter!("gatehouse_revocations_total", "kind" => "access_token")
                                .increment(1);
                            // This node enforces it at once; others poll it.
                            self.revocations.apply(&[r]);
                        }
                        return Ok(response);
                    }
                    Ok(Rotated::AlreadyUsed(current)) => current,
                    // Gone since it was read (purged, its user deleted).
                    Err(StoreError::NotFound) => {
                        return Err(invalid_grant("the refresh token is invalid"));
                    }
                    Err(e) => return Err(e.into()),
                }
            }
        };
        // Used before: the grace window answers with the very same pair (D24) …
        if self.config.refresh_grace_secs > 0
            && let (Some(sealed), Some(until)) = (&stored.successor_sealed, stored.successor_until)
            && until > now
            && let Some(pair) = self
                .keys
                .master()
                .decrypt(sealed, &d)
                .and_then(|p| serde_json::from_slice::<SealedPair>(&p).ok())
        {
            let elapsed = (now.millis() - pair.issued_at).max(0) / 1000;
            return Ok(IssuedTokens {
                access_token: pair.access_token,
                expires_in: (ACCESS_TOKEN_TTL_SECS - elapsed).max(1),
                refresh_token: Some(pair.refresh_token),
                scope: pair.scope,
                // D49: a grace replay answers with the same ID token.
                id_token: pair.id_token,
            });
        }
        // … after it, a replay is reuse: the whole chain is revoked (RFC 9700).
        self.revoke_chain_now(&chain.org, &chain.id).await?;
        Err(invalid_grant(
            "the refresh token was already used; the session has been revoked",
        ))
    }

    /// `POST /oauth/revoke` (D25, RFC 7009): `Ok` for anything but bad client credentials.
    pub async fn revoke(
        &self,
        auth: &ClientAuth,
        token: &str,
        _hint: Option<&str>,
    ) -> Result<(), OAuthError> {
        let client = self.authenticate_client(auth).await?;
        if token.starts_with("rt_") {
            if let Some((_, chain)) = self.store.resolve_refresh_token(&digest(token)).await?
                && chain.client == client.id
            {
                self.revoke_chain_now(&chain.org, &chain.id).await?;
            }
            return Ok(());
        }
        let now = Timestamp::now().unix_seconds();
        let Ok(claims) = jwt::verify(&self.keys.current(), &self.issuer, token, now) else {
            // Malformed, forged, expired or unknown: nothing to do (still 200).
            return Ok(());
        };
        if claims.client_id != client.id {
            return Ok(());
        }
        self.revoke_jti_now(&claims.jti, Timestamp::from_unix_seconds(claims.exp + 60))
            .await
    }

    /// A new single-use link: (token for the URL, the record to store with its e-mail).
    pub fn new_link(
        kind: LinkKind,
        to: &str,
        subject: String,
        body: impl FnOnce(&str) -> String,
    ) -> (String, NewLink) {
        let token = random::token("", 256);
        let ttl = match kind {
            LinkKind::Invitation => INVITATION_TTL_SECS,
            LinkKind::Reset => RESET_TTL_SECS,
        };
        let link = NewLink {
            digest: digest(&token),
            expires_at: Timestamp::now().plus_seconds(ttl),
            email: OutboundEmail {
                to: to.to_owned(),
                subject,
                body: body(&token),
            },
        };
        (token, link)
    }

    /// The digest under which a link token is stored.
    pub fn link_digest(token: &str) -> [u8; 32] {
        digest(token)
    }
}
