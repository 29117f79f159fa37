//! What the authorization server grants: login throttling (D26), authorization codes and refresh chains (D24, D26).

use async_trait::async_trait;
use gatehouse_domain::event::{ReuseTrigger, Teller};
use gatehouse_domain::{ChainId, ClientId, OrgId, ScopeSet, Timestamp, UserId};

use crate::{AuthCode, Consent, Redeemed, RefreshChain, RefreshToken, Rotated, StoreResult};

/// What the authorization server grants: login throttling (D26), authorization codes and refresh chains (D24, D26).
///
/// Writes and reads of tenant data take the organization (D2): a code,
/// chain or session of another organization is never written, read or
/// revoked through it. The `resolve_*` look-ups and the methods keyed by a
/// secret's digest (`redeem_auth_code`, `rotate_refresh_token`) take no
/// organization: holding the secret is what
/// establishes the tenant, and the record they return names it.
#[async_trait]
pub trait GrantStore: Send + Sync {
    /// Spends a one-time value, by the digest of its secret, until
    /// `expires_at`: `true` the first time on any node sharing the storage,
    /// `false` every later time (D48 continued: the dashboard's choice of
    /// organization and its codes). Rows past `expires_at` go with
    /// `purge_expired`; nothing is kept for a value that is never spent.
    async fn use_once(&self, digest: &[u8; 32], expires_at: Timestamp) -> StoreResult<bool>;
    async fn record_login_failure(
        &self,
        org: &OrgId,
        email_norm: &str,
        source: &str,
        at: Timestamp,
    ) -> StoreResult<()>;
    /// Failures for one account since `since`: (source, when), oldest first.
    async fn login_failures(
        &self,
        org: &OrgId,
        email_norm: &str,
        since: Timestamp,
    ) -> StoreResult<Vec<(String, Timestamp)>>;
    /// Stores a code of `org`; a code naming another organization is refused
    /// ([`crate::check_org`]).
    async fn insert_auth_code(&self, org: &OrgId, code: &AuthCode) -> StoreResult<()>;
    /// The tenant-resolving look-up of a code by digest.
    async fn resolve_auth_code(&self, digest: &[u8; 32]) -> StoreResult<Option<AuthCode>>;
    /// Marks the code used and writes `chain` with its first refresh `token`,
    /// atomically; if the code was used already, nothing is written. D57: a
    /// chain begun in a browser session (`chain.sid`) is written only while
    /// the session's row exists, and holds it against an end running at the
    /// same time (which then sees the chain and revokes it), so no chain
    /// outlives an explicit end of its session.
    async fn redeem_auth_code(
        &self,
        digest: &[u8; 32],
        now: Timestamp,
        chain: &RefreshChain,
        token: &RefreshToken,
    ) -> StoreResult<Redeemed> {
        self.redeem_auth_code_recorded(digest, now, chain, token, None)
            .await
    }
    /// [`GrantStore::redeem_auth_code`] that also records `audit` (D58's
    /// `token.issued`, of the chain's organization) in the same
    /// transaction when the code is redeemed.
    async fn redeem_auth_code_recorded(
        &self,
        digest: &[u8; 32],
        now: Timestamp,
        chain: &RefreshChain,
        token: &RefreshToken,
        audit: Option<&gatehouse_domain::audit::Entry>,
    ) -> StoreResult<Redeemed>;
    /// The tenant-resolving look-up of a refresh token and its chain, by digest.
    async fn resolve_refresh_token(
        &self,
        digest: &[u8; 32],
    ) -> StoreResult<Option<(RefreshToken, RefreshChain)>>;
    /// Marks `digest` used with its sealed successor pair and writes the
    /// successor token, atomically (a conditional update: only one caller
    /// ever wins). Slides nothing else: the successor carries its own expiry.
    ///
    /// D24 ("a refresh makes the previous access token of the chain
    /// invalid"): the same transaction writes a `Jti` revocation of the
    /// access token issued with `digest` (cut-off `now`, expiring at
    /// `access_expiry`), returned in [`Rotated::Fresh`] for the caller's
    /// in-memory set. A token of another client's chain is `NotFound`; a
    /// token of a revoked chain is not rotated ([`Rotated::AlreadyUsed`] with
    /// its stored state). In both cases nothing is written.
    #[allow(clippy::too_many_arguments)]
    #[allow(clippy::too_many_arguments)]
    async fn rotate_refresh_token(
        &self,
        digest: &[u8; 32],
        client: &ClientId,
        now: Timestamp,
        successor_sealed: &[u8],
        successor_until: Timestamp,
        successor: &RefreshToken,
        access_expiry: Timestamp,
    ) -> StoreResult<Rotated> {
        self.rotate_refresh_token_recorded(
            digest,
            client,
            now,
            successor_sealed,
            successor_until,
            successor,
            access_expiry,
            None,
        )
        .await
    }
    /// [`GrantStore::rotate_refresh_token`] that also records `audit`
    /// (D58's `token.issued`, of organization `org`) in the same
    /// transaction when the rotation wins.
    #[allow(clippy::too_many_arguments)]
    async fn rotate_refresh_token_recorded(
        &self,
        digest: &[u8; 32],
        client: &ClientId,
        now: Timestamp,
        successor_sealed: &[u8],
        successor_until: Timestamp,
        successor: &RefreshToken,
        access_expiry: Timestamp,
        audit: Option<(&OrgId, &gatehouse_domain::audit::Entry)>,
    ) -> StoreResult<Rotated>;
    /// Revokes a chain: marks it revoked and writes a `Chain` revocation so its
    /// access tokens die too. Idempotent.
    /// `NotFound` (nothing written) for a chain of another organization.
    async fn revoke_chain(
        &self,
        org: &OrgId,
        chain: &ChainId,
        now: Timestamp,
        access_expiry: Timestamp,
    ) -> StoreResult<()>;
    /// [`GrantStore::revoke_chain`] for a reuse `trigger` (D24's refresh
    /// token used after its grace, D26's code used twice): when the chain
    /// was live, the same transaction tells `refresh_token.reuse_detected`
    /// (D54). Revoking an already revoked chain tells nothing.
    async fn revoke_reused_chain(
        &self,
        org: &OrgId,
        chain: &ChainId,
        now: Timestamp,
        access_expiry: Timestamp,
        trigger: ReuseTrigger,
        tell: &Teller,
    ) -> StoreResult<()>;
    /// The chains not yet revoked that `filter` names (D49: logout ends
    /// those begun in its session; forgetting a consent those of the
    /// person and the application).
    async fn live_chains(&self, org: &OrgId, filter: &ChainFilter) -> StoreResult<Vec<ChainId>>;
    /// D49: the consent `user` gave `client`, if remembered.
    async fn consent(
        &self,
        org: &OrgId,
        user: &UserId,
        client: &ClientId,
    ) -> StoreResult<Option<Consent>>;
    /// D49: remembers `scopes` for (`user`, `client`), added to those
    /// remembered before, and marks the consent used at `now`.
    async fn remember_consent(
        &self,
        org: &OrgId,
        user: &UserId,
        client: &ClientId,
        scopes: ScopeSet,
        now: Timestamp,
    ) -> StoreResult<()>;
    /// D49: every consent `user` gave, most recently used first.
    async fn list_consents(&self, org: &OrgId, user: &UserId) -> StoreResult<Vec<Consent>>;
    /// D49: forgets a consent; `false` when none was remembered.
    async fn forget_consent(
        &self,
        org: &OrgId,
        user: &UserId,
        client: &ClientId,
        tell: &Teller,
    ) -> StoreResult<bool>;
}

/// Which refresh chains [`GrantStore::live_chains`] returns.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ChainFilter {
    /// Those begun in the browser session with this `sid`.
    Session(String),
    /// Those of a person with one application.
    UserClient(UserId, ClientId),
}
