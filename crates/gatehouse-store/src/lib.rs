//! `gatehouse-store` owns the storage contract of Gatehouse: the [`Store`]
//! trait every backend implements, the [`StoreError`] they return, and the
//! conformance suite both backends must pass (module `conformance`, with the
//! `testing` feature, which only test builds enable).
//!
//! Tenant isolation is part of the types: every method that touches tenant
//! data takes the [`OrgId`] of the caller, and a record of another
//! organization is indistinguishable from a missing one (D2). The only
//! look-ups without an organization are the ones that *establish* it — a
//! client application by its `client_id` when it authenticates — and the
//! global signing keys.
//!
//! This crate must not import a database driver, SQL, HTTP or the auth layer:
//! nothing here may name SQLite or PostgreSQL, so either backend can implement
//! it without changing a caller.

#[cfg(feature = "testing")]
pub mod conformance;
#[cfg(feature = "testing")]
pub mod migrated;
pub mod records;

pub use records::*;

use async_trait::async_trait;
use gatehouse_domain::{
    ApiKey, ApiKeyId, Client, ClientId, DomainError, Email, Listing, NewProduct, NewUser, OrgId,
    Organization, Page, Product, ProductId, ProductPatch, ProductStatus, Role, ScopeSet,
    SearchText, Timestamp, User, UserId, UserPatch, UserStatus, user::UserChange,
};

/// What can go wrong in storage.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// No such record in this organization.
    #[error("not found")]
    NotFound,
    /// A unique attribute already exists; names the field (`email`, `sku`).
    #[error("a record with this {0} already exists")]
    Duplicate(&'static str),
    /// A business rule refused the change.
    #[error(transparent)]
    Rule(#[from] DomainError),
    /// Storage cannot be reached right now (503).
    #[error("storage unavailable: {0}")]
    Unavailable(String),
    /// Anything else (500); the text is for logs, never for clients.
    #[error("storage failure: {0}")]
    Internal(String),
}

pub type StoreResult<T> = Result<T, StoreError>;

/// Filters for the user list (interface.md §4.3, D14).
#[derive(Clone, Debug, Default)]
pub struct UserFilter {
    pub role: Option<Role>,
    pub status: Option<UserStatus>,
    /// Case-insensitive substring of `name` or `email`.
    pub q: Option<SearchText>,
}

/// Filters for the product list (interface.md §4.4, D17).
#[derive(Clone, Debug, Default)]
pub struct ProductFilter {
    pub status: Option<ProductStatus>,
    /// Every word must be a prefix of a word of `name` or `sku`.
    pub q: Option<SearchText>,
}

/// A client application to register.
#[derive(Clone, Debug)]
pub struct NewClient {
    pub id: ClientId,
    pub name: String,
    pub secret_hash: Option<[u8; 32]>,
    pub scopes: ScopeSet,
    pub redirect_uris: Vec<String>,
    pub admin_approved: bool,
    pub owner: Option<UserId>,
    pub created_at: Timestamp,
}

/// A signing key as stored: the private half encrypted under the master key (D23).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SigningKeyRecord {
    pub kid: String,
    /// AES-256-GCM: nonce ‖ ciphertext ‖ tag of the PKCS#8 document.
    pub private_key_encrypted: Vec<u8>,
    /// Uncompressed SEC1 point of the public key.
    pub public_key: Vec<u8>,
    pub created_at: Timestamp,
    /// Tokens are signed with it from this instant on (publish delay).
    pub activates_at: Timestamp,
    /// Not published any more after this instant.
    pub expires_at: Option<Timestamp>,
}

/// The storage contract. Every backend implements all of it.
#[async_trait]
pub trait Store: Send + Sync + 'static {
    /// Cheap reachability check for `/readyz` (D42).
    async fn ping(&self) -> StoreResult<()>;

    // --- organizations -------------------------------------------------
    async fn create_org(&self, org: &Organization) -> StoreResult<()>;
    async fn get_org(&self, org: &OrgId) -> StoreResult<Option<Organization>>;
    /// D32: whether the organization has the `/v2/` preview.
    async fn v2_preview(&self, org: &OrgId) -> StoreResult<bool>;
    async fn set_v2_preview(&self, org: &OrgId, enabled: bool) -> StoreResult<()>;
    /// D33 (staging): in ONE transaction, replaces every user and product of
    /// `org` — or of every organization when `org` is `None` — with a fresh
    /// copy of `fixture` (new ids, `created_at` one second apart, newest
    /// first). Organizations, client applications (whose removed owner is
    /// cleared) and API keys stay; every session, code and token of a removed
    /// user dies with it (a user revocation is recorded, D13). No reader sees
    /// a half-reset dataset. Returns the number of organizations reset.
    async fn reset_to_fixture(
        &self,
        org: Option<&OrgId>,
        fixture: &gatehouse_domain::Fixture,
        now: Timestamp,
    ) -> StoreResult<u64>;

    /// D28 across nodes (D44): decides on one request of `lineage` and
    /// counts it when admitted — fewer than `per_minute` admissions in the
    /// preceding 60 s and fewer than `per_second` in the preceding second —
    /// atomically for every node that shares this store. `Ok(None)` from a
    /// backend that serves one node (SQLite): the in-memory limiter counts.
    /// Whether this backend counts rate limits for several nodes
    /// ([`Store::count_request`]); `false` skips that call on the request
    /// path of a single-node backend.
    fn shares_rate_limits(&self) -> bool {
        false
    }

    /// A number that changes after every committed change to any client
    /// application, by any process or node using this store, read without a
    /// storage round trip. The auth layer keeps client records in memory
    /// only while it is unchanged, so no change is ever missed (D40).
    /// `None` (the default) when the backend cannot offer one: callers then
    /// read the record every time.
    fn clients_version(&self) -> Option<u64> {
        None
    }

    async fn count_request(
        &self,
        lineage: &str,
        per_minute: u32,
        per_second: u32,
        now: Timestamp,
    ) -> StoreResult<Option<SharedWindow>> {
        let _ = (lineage, per_minute, per_second, now);
        Ok(None)
    }

    /// Claims one occurrence of a scheduled job (e.g. the staging reset due
    /// at a given instant, D33): `true` for the first caller only, on any
    /// node sharing the store, so the job runs once (D44).
    async fn claim_job(&self, job: &str, run_key: &str, now: Timestamp) -> StoreResult<bool>;

    /// D41: creates `org` and `client` only if no organization exists yet, atomically.
    /// Returns whether it did.
    async fn bootstrap(&self, org: &Organization, client: &NewClient) -> StoreResult<bool>;

    // --- users ---------------------------------------------------------
    /// Inserts a user; `Duplicate("email")` when the e-mail exists in the organization
    /// (case-insensitively).
    /// With `invitation`, the invitation link and its e-mail (outbox) are
    /// written in the same transaction (D11, D30).
    async fn insert_user_with_link(
        &self,
        org: &OrgId,
        user: &NewUser,
        invitation: Option<&NewLink>,
    ) -> StoreResult<User>;

    /// [`Store::insert_user_with_link`] without an invitation.
    async fn insert_user(&self, org: &OrgId, user: &NewUser) -> StoreResult<User> {
        self.insert_user_with_link(org, user, None).await
    }
    async fn get_user(&self, org: &OrgId, id: &UserId) -> StoreResult<Option<User>>;
    async fn list_users(
        &self,
        org: &OrgId,
        filter: &UserFilter,
        page: Page,
    ) -> StoreResult<Listing<User>>;
    /// Applies a patch atomically with the D11 and D13 rules (the domain's
    /// `user::apply_patch`, then `user::check_change`, in one transaction). When the
    /// change revokes tokens (deactivation, demotion) it also writes a `User`
    /// revocation with cut-off `now` and ends the user's sessions, codes and
    /// refresh chains; cancelling an invitation kills its link.
    async fn update_user(
        &self,
        org: &OrgId,
        id: &UserId,
        patch: &UserPatch,
        now: Timestamp,
    ) -> StoreResult<UserChange>;
    /// Deletes a user as `user::check_delete` decides (D13): `LastAdmin`,
    /// `OwnedResourcesExist` unless `transfer_to` names another active user
    /// of the organization (checked by the caller for shape; `NotFound`-like
    /// problems with the target come back as `Rule(Validation)`), ownership
    /// moved in the same transaction.
    async fn delete_user_at(
        &self,
        org: &OrgId,
        id: &UserId,
        transfer_to: Option<&UserId>,
        now: Timestamp,
    ) -> StoreResult<()>;

    /// [`Store::delete_user_at`] now.
    async fn delete_user(
        &self,
        org: &OrgId,
        id: &UserId,
        transfer_to: Option<&UserId>,
    ) -> StoreResult<()> {
        self.delete_user_at(org, id, transfer_to, Timestamp::now())
            .await
    }
    /// A user and their password hash, by e-mail (case-insensitive), for login.
    async fn find_user_by_email(
        &self,
        org: &OrgId,
        email: &Email,
    ) -> StoreResult<Option<(User, Option<String>)>>;
    /// D19: a new invitation link for a `pending_invite` user, replacing the
    /// previous one (`user::check_reinvite`: `InvalidStateTransition`
    /// otherwise).
    async fn reissue_invitation(&self, org: &OrgId, id: &UserId, link: &NewLink)
    -> StoreResult<()>;

    // --- single-use links (D11, D19) -------------------------------------
    /// The tenant-resolving look-up of a link by the digest of its token.
    async fn find_link(&self, kind: LinkKind, digest: &[u8; 32])
    -> StoreResult<Option<LinkRecord>>;
    /// Accepts an invitation: the user gets the password and becomes active;
    /// the link is used up. `NotFound` for an unknown, used or expired link.
    async fn accept_invitation(
        &self,
        digest: &[u8; 32],
        password_hash: &str,
        now: Timestamp,
    ) -> StoreResult<User>;
    /// D19: queues a reset link for an active user with that e-mail; `false`
    /// (and nothing written) when there is none, or when the account was
    /// sent a reset e-mail too recently (D19 revised,
    /// [`gatehouse_domain::user::reset_email_allowed`]).
    async fn request_password_reset(
        &self,
        org: &OrgId,
        email: &Email,
        link: &NewLink,
    ) -> StoreResult<bool>;
    /// Sets a new password through a reset link, uses it up, and revokes the
    /// user's sessions and tokens (a `User` revocation at `now`).
    async fn reset_password(
        &self,
        digest: &[u8; 32],
        password_hash: &str,
        now: Timestamp,
    ) -> StoreResult<User>;

    // --- revocations (D24, D25, D11, D13, D29) ----------------------------
    /// Unexpired revocations with an id above `after`, in id order.
    async fn revocations_since(&self, after: i64, now: Timestamp) -> StoreResult<Vec<Revocation>>;
    async fn insert_revocation(
        &self,
        kind: RevocationKind,
        subject: &str,
        cutoff: i64,
        expires_at: Timestamp,
    ) -> StoreResult<i64>;

    // --- e-mail outbox (D30) --------------------------------------------
    /// Claims up to `limit` due messages for `lease_ms` (another worker skips them).
    async fn claim_outbox(
        &self,
        now: Timestamp,
        limit: u32,
        lease_ms: i64,
    ) -> StoreResult<Vec<OutboxMessage>>;
    async fn outbox_sent(&self, id: i64, now: Timestamp) -> StoreResult<()>;
    async fn outbox_failed(
        &self,
        id: i64,
        error: &str,
        next_attempt_at: Timestamp,
    ) -> StoreResult<()>;
    /// Messages not yet delivered.
    async fn outbox_backlog(&self) -> StoreResult<u64>;

    // --- sessions and login throttling (D26) -----------------------------
    async fn create_session(&self, digest: &[u8; 32], session: &Session) -> StoreResult<()>;
    async fn find_session(&self, digest: &[u8; 32]) -> StoreResult<Option<Session>>;
    async fn delete_session(&self, digest: &[u8; 32]) -> StoreResult<()>;
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

    // --- authorization codes and refresh chains (D24, D26) ----------------
    async fn insert_auth_code(&self, code: &AuthCode) -> StoreResult<()>;
    /// The tenant-resolving look-up of a code by digest.
    async fn find_auth_code(&self, digest: &[u8; 32]) -> StoreResult<Option<AuthCode>>;
    /// Marks the code used and writes `chain` with its first refresh `token`,
    /// atomically; if the code was used already, nothing is written.
    async fn redeem_auth_code(
        &self,
        digest: &[u8; 32],
        now: Timestamp,
        chain: &RefreshChain,
        token: &RefreshToken,
    ) -> StoreResult<Redeemed>;
    /// A refresh token and its chain, by digest.
    async fn find_refresh_token(
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
    async fn rotate_refresh_token(
        &self,
        digest: &[u8; 32],
        client: &ClientId,
        now: Timestamp,
        successor_sealed: &[u8],
        successor_until: Timestamp,
        successor: &RefreshToken,
        access_expiry: Timestamp,
    ) -> StoreResult<Rotated>;
    /// Revokes a chain: marks it revoked and writes a `Chain` revocation so its
    /// access tokens die too. Idempotent.
    async fn revoke_chain(
        &self,
        chain: &str,
        now: Timestamp,
        access_expiry: Timestamp,
    ) -> StoreResult<()>;
    /// Erases sealed successor pairs whose grace window has passed (D24).
    async fn erase_expired_successors(&self, now: Timestamp) -> StoreResult<u64>;
    /// Deletes expired codes, tokens, chains, links, sessions, revocations,
    /// login failures and delivered mail, at most `batch` rows per table (D24).
    async fn purge_expired(&self, now: Timestamp, batch: u32) -> StoreResult<u64>;

    /// D32 cursor paging: up to `limit` users after the user `after` in the
    /// list order (`created_at` descending, then `id`). `Ok(None)` when
    /// `after` is not a user of the organization.
    async fn list_users_after(
        &self,
        org: &OrgId,
        filter: &UserFilter,
        after: Option<&UserId>,
        limit: u32,
    ) -> StoreResult<Option<Vec<User>>>;

    // --- products ------------------------------------------------------
    async fn insert_product(
        &self,
        org: &OrgId,
        product: &NewProduct,
        now: Timestamp,
    ) -> StoreResult<Product>;
    async fn get_product(&self, org: &OrgId, id: &ProductId) -> StoreResult<Option<Product>>;
    async fn list_products(
        &self,
        org: &OrgId,
        filter: &ProductFilter,
        page: Page,
    ) -> StoreResult<Listing<Product>>;
    /// D32 cursor paging for products, like [`Store::list_users_after`].
    async fn list_products_after(
        &self,
        org: &OrgId,
        filter: &ProductFilter,
        after: Option<&ProductId>,
        limit: u32,
    ) -> StoreResult<Option<Vec<Product>>>;
    async fn update_product(
        &self,
        org: &OrgId,
        id: &ProductId,
        patch: &ProductPatch,
        now: Timestamp,
    ) -> StoreResult<Product>;
    async fn delete_product(&self, org: &OrgId, id: &ProductId) -> StoreResult<()>;

    // --- client applications -------------------------------------------
    async fn insert_client(&self, org: &OrgId, client: &NewClient) -> StoreResult<Client>;
    /// The tenant-resolving look-up: a client by its `client_id`, whatever its
    /// organization. Used only to authenticate a client.
    async fn find_client(&self, id: &ClientId) -> StoreResult<Option<Client>>;
    /// Allows the `admin` scope for a client (D22), adding it to its scopes.
    async fn approve_admin(&self, org: &OrgId, id: &ClientId) -> StoreResult<Client>;
    /// D20 rotate-secret: a new secret digest; the old one keeps working until
    /// `previous_until` (none: at once).
    async fn rotate_client_secret(
        &self,
        org: &OrgId,
        id: &ClientId,
        secret_hash: &[u8; 32],
        previous_until: Option<Timestamp>,
    ) -> StoreResult<Client>;

    // --- API keys (D27) -------------------------------------------------
    /// Stores a key record with the SHA-256 digest of the key.
    async fn insert_api_key(&self, key: &ApiKey, digest: &[u8; 32]) -> StoreResult<()>;
    /// The tenant-resolving look-up: a key record by the digest of the key
    /// presented as a bearer credential.
    async fn find_api_key_by_digest(&self, digest: &[u8; 32]) -> StoreResult<Option<ApiKey>>;
    /// A key record by id, whatever its organization (operator commands).
    async fn find_api_key(&self, id: &ApiKeyId) -> StoreResult<Option<ApiKey>>;
    /// Revokes a key; revoking twice keeps the first time.
    async fn revoke_api_key(
        &self,
        org: &OrgId,
        id: &ApiKeyId,
        at: Timestamp,
    ) -> StoreResult<ApiKey>;

    // --- signing keys (global, not tenant data) -------------------------
    async fn signing_keys(&self) -> StoreResult<Vec<SigningKeyRecord>>;
    async fn insert_signing_key(&self, key: &SigningKeyRecord) -> StoreResult<()>;
}
