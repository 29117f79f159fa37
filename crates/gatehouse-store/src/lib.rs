//! `gatehouse-store` owns the storage contract of Gatehouse: the [`Store`]
//! trait every backend implements, the [`StoreError`] they return, and the
//! conformance suite ([`conformance`]) both backends must pass.
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

pub mod conformance;

use async_trait::async_trait;
use gatehouse_domain::{
    ApiKey, ApiKeyId, Client, ClientId, DomainError, Listing, NewProduct, NewUser, OrgId,
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
    /// D41: creates `org` and `client` only if no organization exists yet, atomically.
    /// Returns whether it did.
    async fn bootstrap(&self, org: &Organization, client: &NewClient) -> StoreResult<bool>;

    // --- users ---------------------------------------------------------
    /// Inserts a user; `Duplicate("email")` when the e-mail exists in the organization
    /// (case-insensitively).
    async fn insert_user(&self, org: &OrgId, user: &NewUser) -> StoreResult<User>;
    async fn get_user(&self, org: &OrgId, id: &UserId) -> StoreResult<Option<User>>;
    async fn list_users(
        &self,
        org: &OrgId,
        filter: &UserFilter,
        page: Page,
    ) -> StoreResult<Listing<User>>;
    /// Applies a patch atomically with the D11 and D13 rules (the domain's
    /// `apply_patch`, then the last-admin check, in one transaction).
    async fn update_user(
        &self,
        org: &OrgId,
        id: &UserId,
        patch: &UserPatch,
        now: Timestamp,
    ) -> StoreResult<UserChange>;
    /// Deletes a user (D13): `LastAdmin`, `OwnedResourcesExist` unless
    /// `transfer_to` names another active user of the organization (checked
    /// by the caller for shape; `NotFound`-like problems with the target come
    /// back as `Rule(Validation)`), ownership moved in the same transaction.
    async fn delete_user(
        &self,
        org: &OrgId,
        id: &UserId,
        transfer_to: Option<&UserId>,
    ) -> StoreResult<()>;

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
