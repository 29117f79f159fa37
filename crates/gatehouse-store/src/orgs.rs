//! Organizations: creating, reading, the `/v2/` preview flag, first-start bootstrap and the staging reset.

use async_trait::async_trait;
use gatehouse_domain::{OrgId, Organization, Timestamp};

use crate::{NewClient, StoreResult};

/// Organizations: creating, reading, the `/v2/` preview flag, first-start bootstrap and the staging reset.
///
/// An organization is the tenant itself: its methods take its id. The two
/// exceptions run before or across tenants — `bootstrap` (first start, no
/// organization yet) and `reset_to_fixture` with `None` (the staging reset
/// of every organization, D33).
#[async_trait]
pub trait OrgStore: Send + Sync {
    async fn create_org(&self, org: &Organization) -> StoreResult<()>;
    async fn get_org(&self, org: &OrgId) -> StoreResult<Option<Organization>>;
    /// Every organization, oldest first. An operator listing (D47 `org
    /// list`): nothing reachable over HTTP may call it.
    async fn list_orgs(&self) -> StoreResult<Vec<Organization>>;
    /// D32: whether the organization has the `/v2/` preview.
    async fn v2_preview(&self, org: &OrgId) -> StoreResult<bool>;
    async fn set_v2_preview(&self, org: &OrgId, enabled: bool) -> StoreResult<()>;
    /// Issue 32 (`org rename`, `org plan`): applies a change's effects
    /// ([`gatehouse_domain::effect::of_org_change`]: the organization's row
    /// and `organization.updated`) in one transaction. `NotFound` when the
    /// organization does not exist.
    async fn write_org(
        &self,
        org: &OrgId,
        effects: &[gatehouse_domain::effect::Effect],
        now: Timestamp,
        tell: &gatehouse_domain::event::Teller,
    ) -> StoreResult<()>;
    /// A number that changes after every committed change to any
    /// organization, by any process or node using this store, read without
    /// a storage round trip (as [`crate::ClientStore::clients_version`]):
    /// the application keeps organizations' names and limits in memory only
    /// while it is unchanged (D40). `None` (the default) when the backend
    /// cannot offer one: callers then read the organization every time.
    fn orgs_version(&self) -> Option<u64> {
        None
    }
    /// D41: creates `org` and `client` only if no organization exists yet, atomically.
    /// Returns whether it did.
    async fn bootstrap(&self, org: &Organization, client: &NewClient) -> StoreResult<bool>;
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
        tell: Option<&gatehouse_domain::event::Teller>,
    ) -> StoreResult<u64>;
}
