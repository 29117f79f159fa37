//! The token endpoint's client side (D20–D22, D28, D44, D46): client
//! authentication with its cache, client credentials, bearer credentials,
//! the rate limits' shared windows, usage counts, the revocation set and
//! the key ring kept in step with storage.

use std::sync::Arc;

use gatehouse_auth::caller::{API_KEY_PREFIX, Caller, TEST_API_KEY_PREFIX};
use gatehouse_auth::grants::grant_scopes;
use gatehouse_auth::ratelimit::{self, Decision, Limits};
use gatehouse_auth::{
    AccessClaims, ClientAuth, IssuedTokens, OAuthError, OAuthErrorKind, TokenError, secrets,
};
use gatehouse_domain::{Client, ClientId, Timestamp};
use gatehouse_store::StoreError;

use crate::App;
use crate::oauth::OrOAuth;

impl App {
    /// D28: the limits of an organization's plan; `None` when it does not exist.
    pub async fn org_limits(
        &self,
        org: &gatehouse_domain::OrgId,
    ) -> crate::AppResult<Option<Limits>> {
        self.org_limits_in_store(org)
            .await
            .map_err(|e| crate::AppError::store(e, crate::Resource::Organization))
    }

    async fn org_limits_in_store(
        &self,
        org: &gatehouse_domain::OrgId,
    ) -> Result<Option<Limits>, StoreError> {
        // D40: kept in memory only while no process changed an organization
        // (`orgs_version`, taken before the read: a change committed
        // meanwhile moves it on, and the next request reads again).
        let version = org_store(self).orgs_version();
        if let Some(v) = version
            && let Some(l) = self.authority().cached_limits(org, v)
        {
            return Ok(Some(l));
        }
        let Some(o) = org_store(self).get_org(org).await? else {
            return Ok(None);
        };
        let (per_minute, per_second) = o.limits();
        let limits = Limits {
            per_minute,
            per_second,
        };
        if let Some(v) = version {
            self.authority().cache_limits(org.clone(), v, limits);
        }
        Ok(Some(limits))
    }

    /// D28: decides on (and counts) one request of the caller's lineage —
    /// in memory on a single node, in the shared store when the backend
    /// serves several nodes (D44).
    pub async fn rate_check(&self, caller: &Caller, limits: Limits) -> crate::AppResult<Decision> {
        self.rate_check_in_store(caller, limits)
            .await
            .map_err(|e| crate::AppError::store(e, crate::Resource::RateLimit))
    }

    /// D46: counts one API request made with `caller`'s credential
    /// (`rejected`: it was answered 429).
    pub fn record_usage(&self, caller: &Caller, rejected: bool) {
        self.authority().record_usage(caller, rejected);
    }

    async fn rate_check_in_store(
        &self,
        caller: &Caller,
        limits: Limits,
    ) -> Result<Decision, StoreError> {
        let key = caller.lineage();
        let now = self.authority().now_ms();
        // One node (SQLite): the in-memory limiter decides, with no
        // allocation or storage call on the request path.
        if !rate_store(self).shares_rate_limits() {
            return Ok(self.authority().limiter().check(&key, limits, now));
        }
        if let Some(retry_after) = self.authority().limiter().suspended(&key, now) {
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
            if let Some(d) = self.authority().limiter().take_leased(&key, now) {
                return Ok(d);
            }
            let (want, returned) = self.authority().limiter().lease_want(&key, limits, now);
            if let Some((granted, w)) = rate_store(self)
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
                return Ok(self
                    .authority()
                    .limiter()
                    .start_lease(&key, limits, granted, &w, now));
            }
        }
        let shared = rate_store(self)
            .count_request(
                &key.shared_key(),
                limits.per_minute.max(1),
                limits.per_second.max(1),
                Timestamp::from_millis(now as i64),
            )
            .await?;
        Ok(match shared {
            Some(w) => self
                .authority()
                .limiter()
                .decide_shared(&key, limits, &w, now),
            // A backend that shares limits but answered nothing: count here.
            None => self.authority().limiter().check(&key, limits, now),
        })
    }

    /// D46: adds this node's pending usage counts to storage (call every
    /// few seconds and at shutdown); kept for the next call on failure.
    pub async fn flush_usage(&self) -> Result<usize, StoreError> {
        let usage = self.authority().usage();
        let counts = usage.take();
        if counts.is_empty() {
            return Ok(0);
        }
        let n = counts.len();
        match usage_store(self).add_usage(&counts).await {
            Ok(()) => Ok(n),
            Err(e) => {
                // Kept for the next flush: no count is lost to an outage.
                usage.put_back(counts);
                Err(e)
            }
        }
    }

    /// Verifies a bearer credential: an API key (D27, by its prefix) or an
    /// access token. Storage trouble while looking up a key is `Err(Err(_))`.
    pub async fn authenticate_bearer(
        &self,
        bearer: &str,
    ) -> Result<Caller, Result<TokenError, crate::AppError>> {
        if bearer.starts_with(API_KEY_PREFIX) || bearer.starts_with(TEST_API_KEY_PREFIX) {
            // D33: a key of the other environment is refused without a look-up.
            if !bearer.starts_with(gatehouse_auth::caller::api_key_prefix(
                self.authority().config().staging,
            )) {
                return Err(Ok(TokenError::Invalid));
            }
            let digest = secrets::hash_secret(bearer);
            return match api_key_store(self).resolve_api_key(&digest).await {
                // D46: a revoked or expired key is refused.
                Ok(Some(k)) if k.is_live(Timestamp::now()) => Ok(Caller::ApiKey(Arc::new(k))),
                Ok(_) => Err(Ok(TokenError::Invalid)),
                Err(e) => Err(Err(crate::AppError::store(e, crate::Resource::Credential))),
            };
        }
        self.authority()
            .verify_access_token(bearer)
            .map(Caller::Token)
            .map_err(Ok)
    }

    /// Authenticates a client (D20). Unknown ids, missing or wrong secrets all
    /// give the same `invalid_client`.
    pub(crate) async fn authenticate_client(
        &self,
        auth: &ClientAuth,
    ) -> Result<Arc<Client>, OAuthError> {
        let Some(id) = ClientId::parse(&auth.client_id) else {
            return Err(OAuthError::invalid_client());
        };
        let client = self.token_client(&id).await.or_oauth()?;
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
    async fn token_client(&self, id: &ClientId) -> Result<Option<Arc<Client>>, StoreError> {
        let Some(version) = client_store(self).clients_version() else {
            return Ok(client_store(self).resolve_client(id).await?.map(Arc::new));
        };
        if let Some(client) = self.authority().cached_client(id, version) {
            return Ok(Some(client));
        }
        // The version is taken before the read: a change committed meanwhile
        // moves it on, and the next request reads again.
        let found = client_store(self).resolve_client(id).await?.map(Arc::new);
        if let Some(c) = &found {
            self.authority()
                .cache_client(id.clone(), version, c.clone());
        }
        Ok(found)
    }

    /// `grant_type=client_credentials` (D20, D22): an access token only.
    /// Its first use in the audit period from `request`'s address is
    /// recorded (D58's `credential.used`).
    pub async fn client_credentials(
        &self,
        auth: &ClientAuth,
        scope: Option<&str>,
        request: &gatehouse_domain::event::RequestRef,
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
        self.authority().count_issued("client_credentials");
        let ip = request.source.as_ref().map_or("", |s| s.ip.as_str());
        let kind = crate::audit::FirstUse::Credential;
        self.note_first_use(&client.org, kind, client.id.as_str(), ip, || {
            gatehouse_domain::audit::credential_used(
                &gatehouse_domain::audit::MachineCredential::Client(client.id.clone()),
                Some(&scopes.to_string()),
                Some(request),
                Timestamp::now(),
            )
        })
        .await;
        Ok(self.authority().token_response(&claims, None))
    }

    /// The JWKS document (D23).
    pub fn jwks(&self) -> Arc<str> {
        self.authority().jwks()
    }

    /// Verifies a bearer access token (D23, D25; cached after the first check).
    pub fn verify_access_token(&self, token: &str) -> Result<Arc<AccessClaims>, TokenError> {
        self.authority().verify_access_token(token)
    }
}

/// This area's view of storage: the `OrgStore` trait only (issue 25).
fn org_store(app: &App) -> &dyn gatehouse_store::OrgStore {
    app.0.store.as_ref()
}

/// This area's view of storage: the `RateStore` trait only (issue 25).
fn rate_store(app: &App) -> &dyn gatehouse_store::RateStore {
    app.0.store.as_ref()
}

/// This area's view of storage: the `UsageStore` trait only (issue 25).
fn usage_store(app: &App) -> &dyn gatehouse_store::UsageStore {
    app.0.store.as_ref()
}

/// This area's view of storage: the `ApiKeyStore` trait only (issue 25).
fn api_key_store(app: &App) -> &dyn gatehouse_store::ApiKeyStore {
    app.0.store.as_ref()
}

/// This area's view of storage: the `ClientStore` trait only (issue 25).
fn client_store(app: &App) -> &dyn gatehouse_store::ClientStore {
    app.0.store.as_ref()
}
