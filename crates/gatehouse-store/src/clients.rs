//! Client applications (D20, D22, D40).

use async_trait::async_trait;
use gatehouse_domain::{Client, ClientId, OrgId, ScopeSet, Timestamp, UserId};

use crate::StoreResult;

/// A client application to register.
#[derive(Clone, Debug)]
pub struct NewClient {
    pub id: ClientId,
    pub name: String,
    pub secret_hash: Option<[u8; 32]>,
    pub scopes: ScopeSet,
    pub redirect_uris: Vec<String>,
    /// D49: where RP-initiated logout may send the person (matched exactly).
    pub post_logout_redirect_uris: Vec<String>,
    pub admin_approved: bool,
    pub owner: Option<UserId>,
    pub created_at: Timestamp,
}

/// Client applications (D20, D22, D40).
///
/// [`ClientStore::resolve_client`] is the one unscoped method: a client
/// authenticating names only its `client_id`, which establishes the
/// organization. Every change takes the organization.
#[async_trait]
pub trait ClientStore: Send + Sync {
    async fn insert_client(&self, org: &OrgId, client: &NewClient) -> StoreResult<Client>;
    /// The tenant-resolving look-up: a client by its `client_id`, whatever its
    /// organization. Used only to authenticate a client.
    async fn resolve_client(&self, id: &ClientId) -> StoreResult<Option<Client>>;
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
    /// A number that changes after every committed change to any client
    /// application, by any process or node using this store, read without a
    /// storage round trip. The auth layer keeps client records in memory
    /// only while it is unchanged, so no change is ever missed (D40).
    /// `None` (the default) when the backend cannot offer one: callers then
    /// read the record every time.
    fn clients_version(&self) -> Option<u64> {
        None
    }
}
