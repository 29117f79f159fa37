//! API keys (D27).

use async_trait::async_trait;
use gatehouse_domain::event::Teller;
use gatehouse_domain::{ApiKey, ApiKeyId, OrgId, Timestamp};

use crate::StoreResult;

/// API keys (D27). Every method takes the organization except the two
/// look-ups that establish it: [`ApiKeyStore::resolve_api_key`] (a bearer
/// credential names no organization; its digest does) and
/// [`ApiKeyStore::operator_find_api_key`] (an operator on the machine names a key by
/// id alone; see there).
#[async_trait]
pub trait ApiKeyStore: Send + Sync {
    /// Stores a key record of `org` with the SHA-256 digest of the key; a
    /// record naming another organization is refused ([`crate::check_org`]).
    async fn insert_api_key(
        &self,
        org: &OrgId,
        key: &ApiKey,
        digest: &[u8; 32],
        tell: &Teller,
    ) -> StoreResult<()>;
    /// The tenant-resolving look-up: a key record by the digest of the key
    /// presented as a bearer credential.
    async fn resolve_api_key(&self, digest: &[u8; 32]) -> StoreResult<Option<ApiKey>>;
    /// An operator look-up: a key record by id, whatever its organization.
    /// Only the CLI, run by whoever holds the machine and the database,
    /// calls it (`gatehouse api-key revoke <id>`): a key id is all an
    /// operator is given, and it is the operator, not a tenant, who asks.
    /// Nothing reachable over HTTP may call it.
    async fn operator_find_api_key(&self, id: &ApiKeyId) -> StoreResult<Option<ApiKey>>;
    /// A key record of `org` by id (D46); `None` for another organization's.
    async fn get_api_key(&self, org: &OrgId, id: &ApiKeyId) -> StoreResult<Option<ApiKey>>;
    /// Every key record of `org` (revoked ones too), oldest first.
    async fn list_api_keys(&self, org: &OrgId) -> StoreResult<Vec<ApiKey>>;
    /// Revokes a key; revoking twice keeps the first time.
    async fn revoke_api_key(
        &self,
        org: &OrgId,
        id: &ApiKeyId,
        at: Timestamp,
        tell: &Teller,
    ) -> StoreResult<ApiKey>;
}
