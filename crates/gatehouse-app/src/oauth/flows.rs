//! Grants on behalf of people (D24–D26, D29, D49): the authorization
//! request, login with throttling, sessions, consent, codes with PKCE,
//! refresh chains with the grace window and reuse detection, revocation
//! (D25), the ID token and userinfo. The mechanisms (PKCE, JWT, sealing,
//! throttles) are `gatehouse_auth`'s; the reads and writes are here.

use gatehouse_auth::flows::*;
use gatehouse_auth::jwt::{self, AccessClaims};
use gatehouse_auth::oidc::{self, Prompt};
use gatehouse_auth::{
    ACCESS_TOKEN_TTL_SECS, ClientAuth, IssuedTokens, OAuthError, OAuthErrorKind, password, pkce,
    throttle,
};
use gatehouse_domain::{
    ChainId, Client, ClientId, Email, Jti, OrgId, RedirectUri, Scope, ScopeSet, Timestamp, User,
    UserId, UserStatus, random,
};
use std::net::IpAddr;

use gatehouse_store::{
    AuthCode, Consent, Redeemed, RefreshChain, RefreshToken, Rotated, Session, StoreError,
};
use serde::{Deserialize, Serialize};

use gatehouse_domain::event::{Actor, Origin, RequestRef, ReuseTrigger};

use crate::App;
use crate::oauth::OrOAuth;

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

impl App {
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
        let client = match client_store(self).resolve_client(&client_id).await {
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
            acr: Default::default(),
        };
        p.refuse_repeated(|e, d| req.error(e, d))?;
        // D46 (revised): a suspended application signs nobody in; its
        // redirect URI is verified, so it is told there.
        if req.client.suspended_reason().is_some() {
            return Err(req.error(
                OAuthErrorKind::UnauthorizedClient,
                gatehouse_auth::error::APPLICATION_SUSPENDED,
            ));
        }
        let checked = check_after_target(p, |e, d| req.error(e, d))?;
        req.code_challenge = checked.code_challenge;
        req.prompt = checked.prompt;
        req.max_age = checked.max_age;
        req.nonce = checked.nonce;
        req.acr = checked.acr;
        Ok(req)
    }

    /// D26: e-mail and password within the client's organization, throttled.
    /// A failure is recorded in the audit log with its reason (D58), as
    /// made through `request` to `client`.
    pub async fn login(
        &self,
        org: &OrgId,
        email: &str,
        pw: &str,
        source: &str,
        client: Option<&ClientId>,
        request: Option<&gatehouse_domain::event::RequestRef>,
    ) -> Result<User, LoginError> {
        use gatehouse_domain::audit::SignInFailure as Why;
        let unavailable = |e: StoreError| LoginError::Unavailable(e.to_string());
        // Shape rules only: an account whose address the mailer refuses
        // (D8 revised) may have been created with a password by the CLI.
        let Ok(email) = Email::parse_for_lookup(email) else {
            // Not an address at all: no account, and nothing worth a digest.
            self.record_sign_in_failure(org, Why::UnknownAccount, None, None, client, request)
                .await;
            return Err(LoginError::Failed);
        };
        let norm = email.normalized();
        let now = Timestamp::now();
        let failures = grant_store(self)
            .login_failures(org, &norm, throttle::lookback(now))
            .await
            .map_err(unavailable)?;
        let found = user_store(self)
            .find_user_by_email(org, &email)
            .await
            .map_err(unavailable)?;
        let known = found.as_ref().map(|(u, _)| u.id.clone());
        let unknown = known.is_none().then_some(norm.as_str());
        if throttle::is_locked(&failures, source, now) {
            self.record_sign_in_failure(
                org,
                Why::Throttled,
                known.as_ref(),
                unknown,
                client,
                request,
            )
            .await;
            return Err(LoginError::Failed);
        }
        let (ok, why) = match found {
            Some((user, Some(hash))) if user.status == UserStatus::Active => {
                let ok = password::verify(pw.to_owned(), hash).await.then_some(user);
                (ok, Why::BadCredentials)
            }
            other => {
                // The same work as a real check, so timing tells nothing.
                password::verify(pw.to_owned(), password::dummy_hash().to_owned()).await;
                let why = match other {
                    None => Why::UnknownAccount,
                    Some((u, _)) if u.status != UserStatus::Active => Why::Inactive,
                    // An account without a password (invited, not yet
                    // accepted; or passkeys only): the password is wrong.
                    Some(_) => Why::BadCredentials,
                };
                (None, why)
            }
        };
        match ok {
            Some(user) => Ok(user),
            None => {
                grant_store(self)
                    .record_login_failure(org, &norm, source, now)
                    .await
                    .map_err(unavailable)?;
                self.record_sign_in_failure(org, why, known.as_ref(), unknown, client, request)
                    .await;
                Err(LoginError::Failed)
            }
        }
    }

    /// D49: forgets the consent `user` gave `client` and revokes the
    /// refresh chains (and so the access tokens) the person holds for it.
    /// `false` when there was neither a consent nor a live chain.
    pub async fn forget_consent(
        &self,
        org: &OrgId,
        user: &UserId,
        client: &ClientId,
        origin: &Origin,
    ) -> Result<bool, OAuthError> {
        let forgot = grant_store(self)
            .forget_consent(org, user, client, &self.teller(origin))
            .await
            .or_oauth()?;
        let chains = grant_store(self)
            .live_chains(
                org,
                &gatehouse_store::ChainFilter::UserClient(user.clone(), client.clone()),
            )
            .await
            .or_oauth()?;
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
        let remembered = grant_store(self)
            .consent(&req.client.org, &user.id, &req.client.id)
            .await?
            .map(|c| c.scopes);
        let covers = oidc::consent_covers(req.prompt, remembered, granted);
        if covers {
            grant_store(self)
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
    /// for a public client on a loopback redirect URI). D58: the consent is
    /// recorded (`consent.granted`, with the client and the scope), also
    /// when it is not remembered.
    pub async fn remember_consent(
        &self,
        req: &AuthorizeRequest,
        user: &User,
        granted: ScopeSet,
        request: &RequestRef,
    ) -> Result<(), StoreError> {
        let now = Timestamp::now();
        let mut given = gatehouse_domain::audit::security(
            "consent.granted",
            Some(gatehouse_domain::event::Actor::User {
                user: user.id.clone(),
                client: Some(req.client.id.clone()),
            }),
            Some((
                gatehouse_domain::audit::TargetType::User,
                user.id.as_str().to_owned(),
            )),
            Some(request),
            now,
        );
        given.details.client_id = Some(req.client.id.as_str().to_owned());
        given.details.scope = Some(granted.to_string());
        audit_store(self)
            .record_audit(&req.client.org, &given)
            .await?;
        if !req.may_remember_consent() {
            return Ok(());
        }
        grant_store(self)
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
        grant_store(self)
            .insert_auth_code(
                &req.client.org,
                &AuthCode {
                    // D56: how the session signed in; `acr` the highest
                    // requested level met, else the level achieved.
                    authn: Some({
                        let achieved = gatehouse_domain::mfa::Authn::achieved(&session.amr);
                        gatehouse_domain::mfa::Authn {
                            acr: req.acr.returned(achieved.acr),
                            ..achieved
                        }
                    }),
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
                    // D56: the latest authentication (a step-up moves it).
                    auth_time: Some(session.auth_time),
                    sid: Some(session.id.as_str().to_owned()),
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
            user_store(self)
                .email_verified(&chain.org, &user.id)
                .await
                .or_oauth()?
        } else {
            false
        };
        let subject = oidc::Subject {
            user,
            email_verified,
        };
        let claims = oidc::id_claims(
            self.authority().issuer(),
            &subject,
            &oidc::IdTokenInput {
                client: &chain.client,
                auth_time: chain.auth_time.unwrap_or(chain.created_at),
                nonce,
                sid: chain.sid.as_deref(),
                access_token: &response.access_token,
                scopes,
                authn: chain.authn.as_ref(),
            },
        );
        Ok(Some(oidc::sign(
            &self.authority().keys().current(),
            self.authority().rng(),
            &claims,
        )))
    }

    /// D49 `/oauth/userinfo`: `sub` and the claims of the token's scopes,
    /// for an access token issued to a person with `openid`.
    pub async fn userinfo(&self, token: &str) -> Result<oidc::UserInfo, UserinfoError> {
        let claims = self
            .authority()
            .verify_access_token(token)
            .map_err(|_| UserinfoError::InvalidToken)?;
        let Some(user_id) = &claims.user else {
            return Err(UserinfoError::InsufficientScope);
        };
        if !claims.scopes.contains(Scope::OpenId) {
            return Err(UserinfoError::InsufficientScope);
        }
        let user = match user_store(self).get_user(&claims.org, user_id).await {
            Ok(Some(u)) if u.status == UserStatus::Active => u,
            Ok(_) => return Err(UserinfoError::InvalidToken),
            Err(e) => return Err(UserinfoError::Unavailable(e.to_string())),
        };
        let email_verified = if claims.scopes.contains(Scope::Email) {
            user_store(self)
                .email_verified(&claims.org, user_id)
                .await
                .map_err(|e| UserinfoError::Unavailable(e.to_string()))?
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
        let Some(h) = oidc::verify_hint(
            &self.authority().keys().current(),
            self.authority().issuer(),
            hint,
        ) else {
            return Ok(None);
        };
        Ok(client_store(self)
            .resolve_client(&h.client)
            .await?
            .map(|c| (h, c)))
    }

    async fn active_user(&self, org: &OrgId, id: &UserId) -> Result<User, OAuthError> {
        match user_store(self).get_user(org, id).await.or_oauth()? {
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
        self.end_chain(org, chain, None).await
    }

    /// [`App::revoke_chain_now`] because `trigger` was used again (D24,
    /// D26): the chain's revocation tells `refresh_token.reuse_detected`
    /// (D54), with `client` presenting it as the actor.
    async fn revoke_reused_chain_now(
        &self,
        org: &OrgId,
        chain: &ChainId,
        trigger: ReuseTrigger,
        client: &ClientId,
        request: Option<&RequestRef>,
    ) -> Result<(), OAuthError> {
        let origin = Origin {
            actor: Actor::Client(client.clone()),
            request: request.cloned(),
        };
        let tell = self.teller(&origin);
        self.end_chain(org, chain, Some((trigger, &tell))).await
    }

    /// Revokes `chain` in storage (telling its reuse, when it is one) and
    /// on this node at once.
    async fn end_chain(
        &self,
        org: &OrgId,
        chain: &ChainId,
        reuse: Option<(ReuseTrigger, &gatehouse_domain::event::Teller)>,
    ) -> Result<(), OAuthError> {
        metrics::counter!("gatehouse_revocations_total", "kind" => "chain").increment(1);
        let now = Timestamp::now();
        let until = gatehouse_auth::access_revocation_expiry(now);
        let ended = match reuse {
            None => grant_store(self).revoke_chain(org, chain, now, until).await,
            Some((trigger, tell)) => {
                grant_store(self)
                    .revoke_reused_chain(org, chain, now, until, trigger, tell)
                    .await
            }
        };
        match ended {
            // A chain purged after its end has nothing left to revoke.
            Ok(()) | Err(StoreError::NotFound) => {}
            Err(e) => return Err(super::oauth_store_error(e)),
        }
        self.authority()
            .revocations()
            .apply(&[gatehouse_store::NewRevocation::chain(chain, now, until).stored(0)]);
        Ok(())
    }

    pub(crate) async fn revoke_jti_now(
        &self,
        jti: &Jti,
        expires_at: Timestamp,
    ) -> Result<(), OAuthError> {
        metrics::counter!("gatehouse_revocations_total", "kind" => "access_token").increment(1);
        let r = gatehouse_store::NewRevocation::jti(jti, Timestamp::now(), expires_at);
        revocation_store(self)
            .insert_revocation(&r)
            .await
            .or_oauth()?;
        self.authority().revocations().apply(&[r.stored(0)]);
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
        request: Option<&RequestRef>,
    ) -> Result<IssuedTokens, OAuthError> {
        let client = self.authenticate_client(auth).await?;
        let code = code.ok_or_else(|| OAuthError::invalid_request("code is required"))?;
        let redirect_uri =
            redirect_uri.ok_or_else(|| OAuthError::invalid_request("redirect_uri is required"))?;
        let verifier = verifier
            .ok_or_else(|| OAuthError::invalid_request("code_verifier is required (PKCE)"))?;
        let d = digest(code);
        let rec = grant_store(self)
            .resolve_auth_code(&d)
            .await
            .or_oauth()?
            .ok_or_else(|| invalid_grant("the code is invalid"))?;
        if rec.client != client.id {
            return Err(invalid_grant("the code was issued to another client"));
        }
        if rec.used_at.is_some() {
            // D26: a second use revokes what the first issued.
            if let Some(chain) = &rec.chain {
                let trigger = ReuseTrigger::AuthorizationCode;
                self.revoke_reused_chain_now(&rec.org, chain, trigger, &client.id, request)
                    .await?;
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
            // D56: the chain keeps the sign-in's `amr`, `acr`, `auth_time`.
            authn: rec.authn.clone(),
            id: ChainId::generate(),
            org: rec.org.clone(),
            client: client.id.clone(),
            user: user.id.clone(),
            scopes,
            created_at: now,
            ends_at: now.plus_seconds(self.authority().config().refresh_max_days * 86400),
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
        .in_chain(&chain.id)
        .signed_in(chain.authn.as_ref(), chain.auth_time);
        let (refresh, token_rec) = self.new_refresh(&chain, now, &claims.jti);
        // D58: the issuance is recorded in the redemption's transaction.
        let issued = gatehouse_domain::audit::token_issued(
            &user.id,
            &client.id,
            claims.jti.as_str(),
            "authorization_code",
            &scopes.to_string(),
            request,
            now,
        );
        match grant_store(self)
            .redeem_auth_code_recorded(&d, now, &chain, &token_rec, Some(&issued))
            .await
            .or_oauth()?
        {
            Redeemed::Fresh => {
                self.authority().count_issued("authorization_code");
                let mut response = self.authority().token_response(&claims, Some(refresh));
                response.id_token = self
                    .id_token(&user, &chain, rec.nonce.as_deref(), &claims, &response)
                    .await?;
                Ok(response)
            }
            Redeemed::Reused(first) => {
                if let Some(chain) = first {
                    let trigger = ReuseTrigger::AuthorizationCode;
                    self.revoke_reused_chain_now(&rec.org, &chain, trigger, &client.id, request)
                        .await?;
                }
                Err(invalid_grant("the code was already used"))
            }
            Redeemed::SessionEnded => Err(invalid_grant(
                "the browser session the code was issued in has ended",
            )),
        }
    }

    /// `grant_type=refresh_token` (D24).
    pub async fn refresh(
        &self,
        auth: &ClientAuth,
        refresh_token: Option<&str>,
        scope: Option<&str>,
        request: Option<&RequestRef>,
    ) -> Result<IssuedTokens, OAuthError> {
        let client = self.authenticate_client(auth).await?;
        let presented = refresh_token
            .ok_or_else(|| OAuthError::invalid_request("refresh_token is required"))?;
        let d = digest(presented);
        let (tok, chain) = grant_store(self)
            .resolve_refresh_token(&d)
            .await
            .or_oauth()?
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
                .in_chain(&chain.id)
                .signed_in(chain.authn.as_ref(), chain.auth_time);
                let (refresh, next) = self.new_refresh(&chain, now, &claims.jti);
                let mut response = self
                    .authority()
                    .token_response(&claims, Some(refresh.clone()));
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
                let sealed = self
                    .authority()
                    .keys()
                    .master()
                    .encrypt(&sealed, &gatehouse_auth::keys::aad::successor_pair(&d));
                let until = now.plus_seconds(self.authority().config().refresh_grace_secs.max(0));
                // D24: the previous access token of the chain dies with the
                // refresh, in the rotation's own transaction.
                let access_expiry = gatehouse_auth::access_revocation_expiry(now);
                // D58: the issuance is recorded in the rotation's transaction.
                let issued = gatehouse_domain::audit::token_issued(
                    &user.id,
                    &client.id,
                    claims.jti.as_str(),
                    "refresh_token",
                    &scopes.to_string(),
                    request,
                    now,
                );
                match grant_store(self)
                    .rotate_refresh_token_recorded(
                        &d,
                        &client.id,
                        now,
                        &sealed,
                        until,
                        &next,
                        access_expiry,
                        Some((&chain.org, &issued)),
                    )
                    .await
                {
                    Ok(Rotated::Fresh(revoked)) => {
                        self.authority().count_issued("refresh_token");
                        if let Some(r) = revoked {
                            metrics::counter!("gatehouse_revocations_total", "kind" => "access_token")
                                .increment(1);
                            // This node enforces it at once; others poll it.
                            self.authority().revocations().apply(&[r]);
                        }
                        return Ok(response);
                    }
                    Ok(Rotated::AlreadyUsed(current)) => current,
                    // Gone since it was read (purged, its user deleted).
                    Err(StoreError::NotFound) => {
                        return Err(invalid_grant("the refresh token is invalid"));
                    }
                    Err(e) => return Err(super::oauth_store_error(e)),
                }
            }
        };
        // Used before: the grace window answers with the very same pair (D24) …
        if self.authority().config().refresh_grace_secs > 0
            && let (Some(sealed), Some(until)) = (&stored.successor_sealed, stored.successor_until)
            && until > now
        {
            // A kept pair that does not open (a master key this process
            // does not hold yet, D23 continued) is a fault of this node,
            // never the client's reuse: the chain is left alone.
            let data = gatehouse_auth::keys::aad::successor_pair(&d);
            let mut opened = self.authority().keys().master().decrypt(sealed, &data);
            if opened.is_none() {
                self.learn_master_key().await;
                opened = self.authority().keys().master().decrypt(sealed, &data);
            }
            let pair = opened
                .and_then(|p| serde_json::from_slice::<SealedPair>(&p).ok())
                .ok_or_else(|| {
                    OAuthError::internal(
                        "a kept successor pair does not open under the master keys held",
                    )
                })?;
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
        let trigger = ReuseTrigger::RefreshToken;
        self.revoke_reused_chain_now(&chain.org, &chain.id, trigger, &client.id, request)
            .await?;
        Err(invalid_grant(
            "the refresh token was already used; the session has been revoked",
        ))
    }

    /// `POST /oauth/revoke` (D25, RFC 7009): `Ok` for anything but bad client credentials.
    /// D58: what it revoked is recorded (`token.revoked`, by the client;
    /// the access token's `jti`, or, for a refresh token, no id).
    pub async fn revoke(
        &self,
        auth: &ClientAuth,
        token: &str,
        _hint: Option<&str>,
        request: &RequestRef,
    ) -> Result<(), OAuthError> {
        let client = self.authenticate_client(auth).await?;
        let revoked = |target: Option<String>| {
            let mut e = gatehouse_domain::audit::security(
                "token.revoked",
                Some(Actor::Client(client.id.clone())),
                target.map(|t| (gatehouse_domain::audit::TargetType::Token, t)),
                Some(request),
                Timestamp::now(),
            );
            e.details.client_id = Some(client.id.as_str().to_owned());
            e
        };
        if token.starts_with("rt_") {
            if let Some((_, chain)) = grant_store(self)
                .resolve_refresh_token(&digest(token))
                .await
                .or_oauth()?
                && chain.client == client.id
            {
                self.revoke_chain_now(&chain.org, &chain.id).await?;
                self.record_revocation(&chain.org, &revoked(None)).await;
            }
            return Ok(());
        }
        let now = Timestamp::now().unix_seconds();
        let Ok(claims) = jwt::verify(
            &self.authority().keys().current(),
            self.authority().issuer(),
            token,
            now,
        ) else {
            // Malformed, forged, expired or unknown: nothing to do (still 200).
            return Ok(());
        };
        if claims.client_id != client.id {
            return Ok(());
        }
        self.revoke_jti_now(&claims.jti, Timestamp::from_unix_seconds(claims.exp + 60))
            .await?;
        self.record_revocation(&claims.org, &revoked(Some(claims.jti.as_str().to_owned())))
            .await;
        Ok(())
    }

    /// `gatehouse token revoke` (issue 32): what D25's endpoint does for a
    /// client's own token, done by the operator for any organization's: a
    /// refresh token ends its whole chain, an access token is revoked by its
    /// `jti`, an API key is revoked (the `apikey revoke` use case). Anything
    /// else (malformed, forged, expired, unknown, already revoked) revokes
    /// nothing, which the answer says. D58: recorded as `token.revoked` by
    /// the operator, as the endpoint records a client's.
    pub async fn operator_revoke(&self, token: &str) -> Result<OperatorRevocation, OAuthError> {
        let revoked = |target: Option<String>| {
            gatehouse_domain::audit::security(
                "token.revoked",
                Some(Actor::Operator),
                target.map(|t| (gatehouse_domain::audit::TargetType::Token, t)),
                None,
                Timestamp::now(),
            )
        };
        if token.starts_with("rt_") {
            return match grant_store(self)
                .resolve_refresh_token(&digest(token))
                .await
                .or_oauth()?
            {
                Some((_, chain)) if chain.revoked_at.is_none() => {
                    self.revoke_chain_now(&chain.org, &chain.id).await?;
                    self.record_revocation(&chain.org, &revoked(None)).await;
                    Ok(OperatorRevocation::RefreshChain { org: chain.org })
                }
                _ => Ok(OperatorRevocation::Nothing),
            };
        }
        match self.authenticate_bearer(token).await {
            Ok(gatehouse_auth::caller::Caller::Token(c)) => {
                self.revoke_jti_now(&c.jti, Timestamp::from_unix_seconds(c.exp + 60))
                    .await?;
                self.record_revocation(&c.org, &revoked(Some(c.jti.as_str().to_owned())))
                    .await;
                Ok(OperatorRevocation::AccessToken {
                    org: c.org.clone(),
                    jti: c.jti.as_str().to_owned(),
                })
            }
            Ok(gatehouse_auth::caller::Caller::ApiKey(k)) => {
                let key = self
                    .revoke_api_key(&k.id)
                    .await
                    .map_err(|e| OAuthError::internal(e.to_string()))?;
                Ok(OperatorRevocation::ApiKey {
                    org: key.org,
                    id: key.id,
                })
            }
            Err(Ok(_)) => Ok(OperatorRevocation::Nothing),
            Err(Err(crate::AppError::Unavailable(m))) => Err(OAuthError::unavailable(m)),
            Err(Err(e)) => Err(OAuthError::internal(e.to_string())),
        }
    }

    /// Records a revocation's entry (its own transaction, after it); a
    /// failure is logged (the token is revoked either way).
    async fn record_revocation(&self, org: &OrgId, entry: &gatehouse_domain::audit::Entry) {
        if let Err(e) = audit_store(self).record_audit(org, entry).await {
            tracing::error!(error = %e, "recording a revocation failed");
        }
    }

    /// D28: seconds to wait when `client_id` or `source` failed to
    /// authenticate too often.
    pub fn auth_failures_blocked(&self, client_id: Option<&str>, source: IpAddr) -> Option<u64> {
        self.authority().auth_failures_blocked(client_id, source)
    }

    /// D28: counts a failed client authentication.
    pub fn record_auth_failure(&self, client_id: Option<&str>, source: IpAddr) {
        self.authority().record_auth_failure(client_id, source);
    }

    /// A client by its `client_id` (logout's `client_id` parameter, D49).
    pub async fn resolve_client(&self, id: &ClientId) -> Result<Option<Client>, StoreError> {
        client_store(self).resolve_client(id).await
    }

    /// D49 `GET /v1/me/applications`: the consents a person gave, each with
    /// its application (consents of applications since deleted are gone
    /// with them).
    pub async fn my_applications(
        &self,
        org: &OrgId,
        user: &UserId,
    ) -> crate::AppResult<Vec<(Consent, Client)>> {
        use crate::error::OrApp;
        let consents = grant_store(self)
            .list_consents(org, user)
            .await
            .or_app(crate::Resource::Client)?;
        let mut out = Vec::with_capacity(consents.len());
        for c in consents {
            if let Some(client) = client_store(self)
                .resolve_client(&c.client)
                .await
                .or_app(crate::Resource::Client)?
                && &client.org == org
            {
                out.push((c, client));
            }
        }
        Ok(out)
    }

    /// D49 `DELETE /v1/me/applications/{id}`: forgets the consent and
    /// revokes the person's refresh chains and tokens for the application.
    /// `false` when there was nothing to forget.
    pub async fn forget_my_application(
        &self,
        org: &OrgId,
        user: &UserId,
        client: &ClientId,
        origin: &Origin,
    ) -> Result<bool, OAuthError> {
        self.forget_consent(org, user, client, origin).await
    }
}

/// This area's view of storage: the `ClientStore` trait only (issue 25).
fn client_store(app: &App) -> &dyn gatehouse_store::ClientStore {
    app.0.store.as_ref()
}

/// This area's view of storage: the `GrantStore` trait only (issue 25).
fn grant_store(app: &App) -> &dyn gatehouse_store::GrantStore {
    app.0.store.as_ref()
}

/// This area's view of storage: the `UserStore` trait only (issue 25).
fn user_store(app: &App) -> &dyn gatehouse_store::UserStore {
    app.0.store.as_ref()
}

/// This area's view of storage: the `RevocationStore` trait only (issue 25).
fn revocation_store(app: &App) -> &dyn gatehouse_store::RevocationStore {
    app.0.store.as_ref()
}

/// This area's view of storage: the `AuditStore` trait only (issue 25).
fn audit_store(app: &App) -> &dyn gatehouse_store::AuditStore {
    app.0.store.as_ref()
}

/// What `gatehouse token revoke` revoked (issue 32).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OperatorRevocation {
    /// A refresh token's whole chain (D24, D25).
    RefreshChain { org: OrgId },
    /// An access token, by its `jti`.
    AccessToken { org: OrgId, jti: String },
    /// An API key (D27).
    ApiKey {
        org: OrgId,
        id: gatehouse_domain::ApiKeyId,
    },
    /// Nothing live: malformed, forged, expired, unknown or already revoked.
    Nothing,
}
