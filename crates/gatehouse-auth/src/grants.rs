//! The grants of the token endpoint and client authentication (D20–D22).

use std::sync::Arc;

use aws_lc_rs::rand::SystemRandom;
use gatehouse_domain::{Client, ClientId, Scope, ScopeSet, Timestamp};
use gatehouse_store::{Store, StoreError};

use crate::caller::{API_KEY_PREFIX, Caller, TEST_API_KEY_PREFIX};
use crate::error::{OAuthError, OAuthErrorKind};
use crate::jwt::{self, AccessClaims};
use crate::keys::KeyRing;
use crate::ratelimit::{self, Decision, FailureGuard, Limits, RateLimiter};
use crate::revocation::RevocationSet;
use crate::secrets;
use crate::verifier::TokenVerifier;
use crate::{ACCESS_TOKEN_TTL_SECS, Issuer, TokenError};

/// Client credentials as presented (Basic header or form fields, already
/// decoded by the HTTP layer).
#[derive(Clone, Debug)]
pub struct ClientAuth {
    pub client_id: String,
    pub secret: Option<String>,
}

/// The tokens a grant issued; the HTTP layer writes them as the token
/// response of interface.md §2.4 (always of type `Bearer`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IssuedTokens {
    pub access_token: String,
    /// Seconds until the access token expires.
    pub expires_in: i64,
    pub refresh_token: Option<String>,
    /// The granted scopes, space-separated.
    pub scope: String,
    /// D49: with `openid` granted to a person, the ID token.
    pub id_token: Option<String>,
}

/// Tunables of the authorization server.
#[derive(Clone, Debug)]
pub struct AuthConfig {
    /// D24 `GATEHOUSE_REFRESH_GRACE_SECS`: replays within this window get the
    /// same successor pair; 0 turns it off.
    pub refresh_grace_secs: i64,
    /// D24 `GATEHOUSE_REFRESH_MAX_DAYS`: a chain ends this long after the authorization.
    pub refresh_max_days: i64,
    /// D33: the staging environment, whose API keys are `gk_test_…`.
    pub staging: bool,
}

impl Default for AuthConfig {
    fn default() -> Self {
        Self {
            refresh_grace_secs: 10,
            refresh_max_days: 90,
            staging: false,
        }
    }
}

/// The authorization server: issues and verifies tokens.
pub struct AuthService {
    pub(crate) store: Arc<dyn Store>,
    pub(crate) keys: KeyRing,
    pub(crate) issuer: Issuer,
    verifier: TokenVerifier,
    pub(crate) rng: SystemRandom,
    pub(crate) revocations: RevocationSet,
    pub(crate) config: AuthConfig,
    limiter: RateLimiter,
    failed_by_client: FailureGuard,
    failed_by_source: FailureGuard,
    /// D19 (revised): password-reset requests per source address.
    reset_requests: ratelimit::SlidingCounter,
    /// D28: organizations' limits. A plan is fixed when the organization is
    /// created — no command changes it — so a cached value is never stale.
    org_limits: quick_cache::sync::Cache<gatehouse_domain::OrgId, Limits>,
    /// Client applications read at the token endpoint, each with the store's
    /// [`Store::clients_version`] at the time of the read: used only while
    /// that number is unchanged, so a rotated secret or an approval made by
    /// any process counts on the next request (D40).
    clients: quick_cache::sync::Cache<ClientId, (u64, Arc<Client>)>,
    /// `gatehouse_tokens_issued_total` by grant (D42).
    issued: [std::sync::OnceLock<metrics::Counter>; 3],
    /// D46: requests and 429s per credential and minute, not yet stored.
    usage: crate::usage::UsageCounter,
}

impl AuthService {
    pub fn new(store: Arc<dyn Store>, keys: KeyRing, issuer: Issuer) -> Self {
        Self::with_config(store, keys, issuer, AuthConfig::default())
    }

    pub fn with_config(
        store: Arc<dyn Store>,
        keys: KeyRing,
        issuer: Issuer,
        config: AuthConfig,
    ) -> Self {
        Self {
            store,
            keys,
            issuer,
            verifier: TokenVerifier::default(),
            rng: SystemRandom::new(),
            revocations: RevocationSet::default(),
            config,
            limiter: RateLimiter::default(),
            // D28 (revised): failed client authentications, per (client_id,
            // source address) and per source address.
            failed_by_client: FailureGuard::new(10),
            failed_by_source: FailureGuard::new(100),
            reset_requests: ratelimit::SlidingCounter::new(20, 3_600_000),
            org_limits: quick_cache::sync::Cache::new(10_000),
            clients: quick_cache::sync::Cache::new(10_000),
            issued: Default::default(),
            usage: Default::default(),
        }
    }

    pub fn config(&self) -> &AuthConfig {
        &self.config
    }

    /// D28: counts one API request of `caller` against its organization's plan.
    /// D28: the limits of an organization's plan; `None` when it does not exist.
    pub async fn org_limits(
        &self,
        org: &gatehouse_domain::OrgId,
    ) -> Result<Option<Limits>, StoreError> {
        if let Some(l) = self.org_limits.get(org) {
            return Ok(Some(l));
        }
        let Some(o) = self.store.get_org(org).await? else {
            return Ok(None);
        };
        let (per_minute, per_second) = o.limits();
        let limits = Limits {
            per_minute,
            per_second,
        };
        self.org_limits.insert(org.clone(), limits);
        Ok(Some(limits))
    }

    /// D28: decides on (and counts) one request of the caller's lineage —
    /// in memory on a single node, in the shared store when the backend
    /// serves several nodes (D44).
    pub async fn rate_check(
        &self,
        caller: &Caller,
        limits: Limits,
    ) -> Result<Decision, StoreError> {
        let key = caller.lineage();
        let now = now_ms();
        // One node (SQLite): the in-memory limiter decides, with no
        // allocation or storage call on the request path.
        if !self.store.shares_rate_limits() {
            return Ok(self.limiter.check(&key, limits, now));
        }
        if let Some(retry_after) = self.limiter.suspended(&key, now) {
            let info = ratelimit::RateInfo {
                limit: limits.per_minute.max(1),
                remaining: 0,
                reset: now.div_ceil(1000) + retry_after,
            };
            return Ok(Decision::Limited { info, retry_after });
        }
        if limits.per_second > ratelimit::LEASE_ABOVE_PER_SECOND {
            // D28 (revised): a busy credential is admitted from this node's
            // lease of its window; the store is asked once per lease.
            if let Some(d) = self.limiter.take_leased(&key, now) {
                return Ok(d);
            }
            let (want, returned) = self.limiter.lease_want(&key, limits, now);
            if let Some((granted, w)) = self
                .store
                .lease_requests(
                    &key.shared_key(),
                    limits.per_minute.max(1),
                    limits.per_second.max(1),
                    want,
                    returned.map(|(at, n)| (Timestamp::from_millis(at as i64), n)),
                    Timestamp::from_millis(now as i64),
                )
                .await?
            {
                return Ok(self.limiter.start_lease(&key, limits, granted, &w, now));
            }
        }
        let shared = self
            .store
            .count_request(
                &key.shared_key(),
                limits.per_minute.max(1),
                limits.per_second.max(1),
                Timestamp::from_millis(now as i64),
            )
            .await?;
        Ok(match shared {
            Some(w) => self.limiter.decide_shared(&key, limits, &w, now),
            // A backend that shares limits but answered nothing: count here.
            None => self.limiter.check(&key, limits, now),
        })
    }

    /// D28 (revised): `Some(retry_after)` while failed client
    /// authentications from `source` are over their limit, for this client
    /// id from this address or for this address altogether.
    pub fn auth_failures_blocked(
        &self,
        client_id: Option<&str>,
        source: std::net::IpAddr,
    ) -> Option<u64> {
        let now = now_ms();
        // No key is blocked anywhere (the usual case): no key is built.
        if !self.failed_by_client.any_blocked(now) && !self.failed_by_source.any_blocked(now) {
            return None;
        }
        let addr = source.to_string();
        let by_client = client_id.and_then(|c| {
            self.failed_by_client
                .blocked(&ratelimit::client_source_key(c, &addr), now)
        });
        let by_source = self
            .failed_by_source
            .blocked(&ratelimit::source_key(&addr), now);
        by_client.max(by_source)
    }

    /// Records a failed client authentication from `source`.
    pub fn record_auth_failure(&self, client_id: Option<&str>, source: std::net::IpAddr) {
        let now = now_ms();
        let addr = source.to_string();
        if let Some(c) = client_id {
            self.failed_by_client
                .record(&ratelimit::client_source_key(c, &addr), now);
        }
        self.failed_by_source
            .record(&ratelimit::source_key(&addr), now);
    }

    /// D19 (revised): counts a password-reset request from `source`; at
    /// most 20 per address per hour, then `Err(retry_after)`.
    pub fn admit_reset_request(&self, source: std::net::IpAddr) -> Result<(), u64> {
        self.reset_requests
            .admit(&ratelimit::source_key(&source.to_string()), now_ms())
    }

    /// D46: counts one API request made with `caller`'s credential
    /// (`rejected`: it was answered 429).
    pub fn record_usage(&self, caller: &Caller, rejected: bool) {
        self.usage.record(caller, rejected, now_ms());
    }

    /// D46: adds this node's pending usage counts to storage (call every
    /// few seconds and at shutdown); kept for the next call on failure.
    pub async fn flush_usage(&self) -> Result<usize, StoreError> {
        self.usage.flush(self.store.as_ref()).await
    }

    /// Forgets idle rate-limit state (call periodically; keeps memory bounded).
    pub fn evict_idle_limits(&self) {
        let now = now_ms();
        self.limiter.evict_idle(now);
        self.failed_by_client.evict_idle(now);
        self.failed_by_source.evict_idle(now);
        self.reset_requests.evict_idle(now);
    }

    /// The in-memory revocation set.
    pub fn revocations(&self) -> &RevocationSet {
        &self.revocations
    }

    /// Pulls revocations written by other processes (call periodically).
    pub async fn sync_revocations(&self) -> Result<usize, StoreError> {
        self.revocations.sync(self.store.as_ref()).await
    }

    /// Notes in memory that a user's tokens up to `now` are revoked (the store
    /// wrote the record in the same transaction as the change).
    pub fn note_user_revoked(&self, user: &gatehouse_domain::UserId, now: Timestamp) {
        self.revocations
            .apply(&[gatehouse_store::NewRevocation::user(user, now).stored(0)]);
    }

    /// Notes in memory that every access token issued to `client` up to
    /// `now` is revoked; the store wrote the record with the change (D46, D47).
    pub fn note_client_revoked(&self, client: &gatehouse_domain::ClientId, now: Timestamp) {
        self.revocations
            .apply(&[gatehouse_store::NewRevocation::client(client, now).stored(0)]);
    }

    pub fn issuer(&self) -> &Issuer {
        &self.issuer
    }

    pub fn keys(&self) -> &KeyRing {
        &self.keys
    }

    /// The JWKS document (D23).
    pub fn jwks(&self) -> Arc<str> {
        self.keys.current().jwks.clone()
    }

    /// Verifies a bearer access token (cached after the first check).
    pub fn verify_access_token(&self, token: &str) -> Result<Arc<AccessClaims>, TokenError> {
        let claims = self.verifier.verify(&self.keys, &self.issuer, token)?;
        if self.revocations.is_revoked(&claims) {
            return Err(TokenError::Invalid);
        }
        Ok(claims)
    }

    /// Verifies a bearer credential: an API key (D27, by its prefix) or an
    /// access token. Storage trouble while looking up a key is `Err(Err(_))`.
    pub async fn authenticate_bearer(
        &self,
        bearer: &str,
    ) -> Result<Caller, Result<TokenError, StoreError>> {
        if bearer.starts_with(API_KEY_PREFIX) || bearer.starts_with(TEST_API_KEY_PREFIX) {
            // D33: a key of the other environment is refused without a look-up.
            if !bearer.starts_with(crate::caller::api_key_prefix(self.config.staging)) {
                return Err(Ok(TokenError::Invalid));
            }
            let digest = secrets::hash_secret(bearer);
            return match self.store.resolve_api_key(&digest).await {
                // D46: a revoked or expired key is refused.
                Ok(Some(k)) if k.is_live(Timestamp::now()) => Ok(Caller::ApiKey(Arc::new(k))),
                Ok(_) => Err(Ok(TokenError::Invalid)),
                Err(e) => Err(Err(e)),
            };
        }
        self.verify_access_token(bearer)
            .map(Caller::Token)
            .map_err(Ok)
    }

    /// Re-reads signing keys when one is due to activate or retire, or on demand.
    /// Reloads the key ring now: a `gatehouse keys rotate` run by another
    /// process is published on the next JWKS request (D23, D40: no stale cache).
    pub async fn reload_keys(&self) -> Result<(), crate::keys::KeyError> {
        self.keys.refresh(self.store.as_ref()).await
    }

    pub async fn refresh_keys_if_due(&self) -> Result<(), OAuthError> {
        if self.keys.stale(Timestamp::now()) {
            self.keys
                .refresh(self.store.as_ref())
                .await
                .map_err(|e| OAuthError::new(OAuthErrorKind::Internal, e.to_string()))?;
        }
        Ok(())
    }

    /// Authenticates a client (D20). Unknown ids, missing or wrong secrets all
    /// give the same `invalid_client`.
    pub async fn authenticate_client(&self, auth: &ClientAuth) -> Result<Arc<Client>, OAuthError> {
        let Some(id) = ClientId::parse(&auth.client_id) else {
            return Err(OAuthError::invalid_client());
        };
        let client = self.find_client(&id).await?;
        let Some(client) = client else {
            // Spend the same work as a real check.
            let _ = secrets::verify_secret(auth.secret.as_deref().unwrap_or(""), &[0; 32]);
            return Err(OAuthError::invalid_client());
        };
        let authenticated = match (&client.secret_hash, auth.secret.as_deref()) {
            // A public client identifies itself by id alone.
            (None, None) => true,
            (None, Some(_)) | (Some(_), None) => false,
            (Some(current), Some(given)) => {
                let now = Timestamp::now();
                let ok_current = secrets::verify_secret(given, current);
                let ok_previous = client
                    .previous_secret
                    .as_ref()
                    .is_some_and(|(h, until)| *until > now && secrets::verify_secret(given, h));
                ok_current || ok_previous
            }
        };
        if !authenticated {
            return Err(OAuthError::invalid_client());
        }
        // D46 (revised): a suspended application gets no token, and is
        // told why only once it has proved who it is.
        if client.suspended_reason().is_some() {
            return Err(OAuthError::application_suspended());
        }
        Ok(client)
    }

    /// A client application, from memory while the store says no client has
    /// changed since it was read (see [`Store::clients_version`]).
    async fn find_client(&self, id: &ClientId) -> Result<Option<Arc<Client>>, StoreError> {
        let Some(version) = self.store.clients_version() else {
            return Ok(self.store.resolve_client(id).await?.map(Arc::new));
        };
        if let Some((seen, client)) = self.clients.get(id)
            && seen == version
        {
            return Ok(Some(client));
        }
        // The version is taken before the read: a change committed meanwhile
        // moves it on, and the next request reads again.
        let found = self.store.resolve_client(id).await?.map(Arc::new);
        if let Some(c) = &found {
            self.clients.insert(id.clone(), (version, c.clone()));
        }
        Ok(found)
    }

    /// `grant_type=client_credentials` (D20, D22): an access token only.
    pub async fn client_credentials(
        &self,
        auth: &ClientAuth,
        scope: Option<&str>,
    ) -> Result<IssuedTokens, OAuthError> {
        let client = self.authenticate_client(auth).await?;
        if client.is_public() {
            return Err(OAuthError::new(
                OAuthErrorKind::UnauthorizedClient,
                "public clients may use only the authorization-code grant",
            ));
        }
        let scopes = grant_scopes(&client, scope)?;
        self.refresh_keys_if_due().await?;
        let claims = AccessClaims::issue(client.org.clone(), client.id.clone(), None, scopes);
        self.count_issued("client_credentials");
        Ok(self.token_response(&claims, None))
    }

    /// Counts issued tokens by grant (D42).
    pub(crate) fn count_issued(&self, grant: &'static str) {
        // The handle is registered once per grant, on first use (after the
        // binary installed its recorder), not looked up per token.
        let slot = match grant {
            "client_credentials" => &self.issued[0],
            "authorization_code" => &self.issued[1],
            _ => &self.issued[2],
        };
        slot.get_or_init(|| metrics::counter!("gatehouse_tokens_issued_total", "grant" => grant))
            .increment(1);
    }

    pub(crate) fn token_response(
        &self,
        claims: &AccessClaims,
        refresh_token: Option<String>,
    ) -> IssuedTokens {
        let access_token = jwt::sign(&self.keys.current(), &self.issuer, &self.rng, claims);
        IssuedTokens {
            access_token,
            expires_in: ACCESS_TOKEN_TTL_SECS,
            refresh_token,
            scope: claims.scopes.to_string(),
            id_token: None,
        }
    }
}

/// D22: the scopes a client-credentials request yields.
pub fn grant_scopes(client: &Client, requested: Option<&str>) -> Result<ScopeSet, OAuthError> {
    let requested = requested.map(str::trim).filter(|s| !s.is_empty());
    let Some(requested) = requested else {
        // Omitted: everything registered except `admin`, which must be asked
        // for by name, and the OpenID Connect scopes, which need a person (D49).
        let s = client.scopes.without(Scope::Admin).without_identity();
        if s.is_empty() {
            return Err(OAuthError::invalid_scope(
                "the client is registered for no scope that can be granted without asking",
            ));
        }
        return Ok(s);
    };
    let set = ScopeSet::parse(requested)
        .map_err(|w| OAuthError::invalid_scope(format!("unknown scope: {w}")))?;
    if let Some(s) = set.iter().find(|s| s.is_identity()) {
        // D49: `openid`, `profile` and `email` are granted only at /oauth/authorize.
        return Err(OAuthError::invalid_scope(format!(
            "{} is granted only to a person at /oauth/authorize",
            s.as_str()
        )));
    }
    if set.contains(Scope::Admin) && !client.admin_approved {
        return Err(OAuthError::invalid_scope(
            "the admin scope needs an operator's approval for this client",
        ));
    }
    if !set.is_subset(client.scopes) {
        let missing: ScopeSet = set.iter().filter(|s| !client.scopes.contains(*s)).collect();
        return Err(OAuthError::invalid_scope(format!(
            "the client is not registered for: {missing}"
        )));
    }
    Ok(set)
}

fn now_ms() -> u64 {
    Timestamp::now().millis().max(0) as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use gatehouse_domain::{OrgId, Timestamp};

    fn client(scopes: &str, admin_approved: bool) -> Client {
        Client {
            id: ClientId::generate(),
            org: OrgId::generate(),
            name: "c".into(),
            secret_hash: Some([0; 32]),
            previous_secret: None,
            scopes: ScopeSet::parse(scopes).unwrap(),
            redirect_uris: vec![],
            admin_approved,
            owner: None,
            created_at: Timestamp::now(),
            updated_at: Timestamp::now(),
            post_logout_redirect_uris: vec![],
            suspension: Default::default(),
        }
    }

    #[test]
    fn omitted_scope_means_registered_without_admin() {
        let c = client("users:read admin", true);
        assert_eq!(grant_scopes(&c, None).unwrap().to_string(), "users:read");
        assert_eq!(
            grant_scopes(&c, Some("  ")).unwrap().to_string(),
            "users:read"
        );
        assert_eq!(
            grant_scopes(&c, Some("admin")).unwrap().to_string(),
            "admin"
        );
    }

    #[test]
    fn unregistered_unknown_or_unapproved_scopes_are_invalid_scope() {
        let c = client("users:read admin", false);
        for s in ["users:write", "bogus", "admin", "users:read admin"] {
            assert_eq!(
                grant_scopes(&c, Some(s)).unwrap_err().kind,
                OAuthErrorKind::InvalidScope,
                "{s}"
            );
        }
    }
}
