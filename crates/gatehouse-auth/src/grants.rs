//! The grants of the token endpoint and client authentication (D20–D22).

use std::sync::Arc;

use aws_lc_rs::rand::SystemRandom;
use gatehouse_domain::{Client, ClientId, Scope, ScopeSet, Timestamp};

use crate::caller::Caller;
use crate::error::OAuthError;
use crate::jwt::{self, AccessClaims};
use crate::keys::KeyRing;
use crate::ratelimit::{self, FailureGuard, Limits, RateLimiter};
use crate::revocation::RevocationSet;
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
    /// D56 (D53 continued): the passkeys' relying party when it is not the
    /// issuer: the mock's `http://localhost:<port>`, since the mock is
    /// reached at an IP address and WebAuthn needs a domain name.
    pub passkey_url: Option<String>,
}

impl Default for AuthConfig {
    fn default() -> Self {
        Self {
            refresh_grace_secs: 10,
            refresh_max_days: 90,
            staging: false,
            passkey_url: None,
        }
    }
}

/// The authorization server: issues and verifies tokens.
pub struct AuthService {
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
    /// D28: organizations' limits, each with the store's `orgs_version` at
    /// the time of the read: used only while that number is unchanged, so
    /// a plan changed by any process (`gatehouse org plan`) counts on the
    /// next request (D40).
    org_limits: quick_cache::sync::Cache<gatehouse_domain::OrgId, (u64, Limits)>,
    /// Client applications read at the token endpoint, each with the store's
    /// [`Store::clients_version`] at the time of the read: used only while
    /// that number is unchanged, so a rotated secret or an approval made by
    /// any process counts on the next request (D40).
    clients: quick_cache::sync::Cache<ClientId, (u64, Arc<Client>)>,
    /// `gatehouse_tokens_issued_total` by grant (D42).
    issued: [std::sync::OnceLock<metrics::Counter>; 3],
    /// D46: requests and 429s per credential and minute, not yet stored.
    usage: crate::usage::UsageCounter,
    /// D56: the WebAuthn relying party of `public_url`, or why passkeys are
    /// not offered there.
    passkeys: Result<crate::passkeys::Passkeys, String>,
}

impl AuthService {
    pub fn new(keys: KeyRing, issuer: Issuer) -> Self {
        Self::with_config(keys, issuer, AuthConfig::default())
    }

    pub fn with_config(keys: KeyRing, issuer: Issuer, config: AuthConfig) -> Self {
        let passkeys =
            crate::passkeys::Passkeys::new(config.passkey_url.as_deref().unwrap_or(&issuer.iss));
        Self {
            passkeys,
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

    /// D56: the passkey ceremonies, or why passkeys are not offered (the
    /// start log says it once).
    pub fn passkeys(&self) -> Result<&crate::passkeys::Passkeys, &str> {
        self.passkeys.as_ref().map_err(String::as_str)
    }

    /// The digest under which a link token is stored (D11, D19).
    pub fn link_digest(token: &str) -> [u8; 32] {
        crate::flows::digest(token)
    }

    /// The random source tokens are made with.
    pub fn rng(&self) -> &SystemRandom {
        &self.rng
    }

    /// D28: the in-memory rate limiter (the application layer consults
    /// the shared store when several nodes share the limits).
    pub fn limiter(&self) -> &RateLimiter {
        &self.limiter
    }

    /// D46: this node's usage counts not yet stored.
    pub fn usage(&self) -> &crate::usage::UsageCounter {
        &self.usage
    }

    /// D28: an organization's limits as read at `version` of the
    /// organizations (the store's `orgs_version`): used only while that
    /// number is unchanged.
    pub fn cached_limits(&self, org: &gatehouse_domain::OrgId, version: u64) -> Option<Limits> {
        self.org_limits
            .get(org)
            .and_then(|(seen, l)| (seen == version).then_some(l))
    }

    pub fn cache_limits(&self, org: gatehouse_domain::OrgId, version: u64, limits: Limits) {
        self.org_limits.insert(org, (version, limits));
    }

    /// A client application read at `version` of the clients (see the
    /// store's `clients_version`): used only while that number is unchanged.
    pub fn cached_client(&self, id: &ClientId, version: u64) -> Option<Arc<Client>> {
        self.clients
            .get(id)
            .and_then(|(seen, c)| (seen == version).then_some(c))
    }

    pub fn cache_client(&self, id: ClientId, version: u64, client: Arc<Client>) {
        self.clients.insert(id, (version, client));
    }

    /// The current time in Unix milliseconds, as the limiter counts it.
    pub fn now_ms(&self) -> u64 {
        now_ms()
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

    /// Counts issued tokens by grant (D42).
    pub fn count_issued(&self, grant: &'static str) {
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

    pub fn token_response(
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
    use crate::error::OAuthErrorKind;
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
