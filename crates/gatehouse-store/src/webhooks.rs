//! Webhook endpoints (D55).

use async_trait::async_trait;
use gatehouse_domain::event::Teller;
use gatehouse_domain::webhook::{Endpoint, EndpointPatch};
use gatehouse_domain::{EndpointId, Listing, OrgId, Page, Timestamp, UserId};

use crate::StoreResult;

/// An endpoint's signing secrets as stored: sealed under the master key
/// (D3 revised), opened only by the application to sign. During a
/// rotation's grace the previous one signs too, until `previous_until`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SealedSecrets {
    pub current: Vec<u8>,
    pub previous: Option<(Vec<u8>, Timestamp)>,
}

/// Webhook endpoints of an organization (D55). Every method takes the
/// organization (D2); another organization's endpoint is `NotFound`.
#[async_trait]
pub trait WebhookStore: Send + Sync {
    /// Inserts `endpoint` with its sealed secret and its event (D54). At
    /// most `gatehouse_domain::webhook::MAX_ENDPOINTS` per organization,
    /// disabled ones included, counted in the transaction: one more is
    /// `Rule(LimitReached)`, also under concurrent creation.
    async fn insert_endpoint(
        &self,
        org: &OrgId,
        endpoint: &Endpoint,
        sealed_secret: &[u8],
        tell: &Teller,
    ) -> StoreResult<()>;
    async fn get_endpoint(&self, org: &OrgId, id: &EndpointId) -> StoreResult<Option<Endpoint>>;
    /// D14 (continued): newest first by `created_at`, then `id`.
    async fn list_endpoints(&self, org: &OrgId, page: Page) -> StoreResult<Listing<Endpoint>>;
    /// Applies `patch` as `gatehouse_domain::webhook::patched` decides, on
    /// the endpoint as read in the transaction, `by` being the caller's
    /// owner (who becomes the owner when it enables the endpoint). A patch
    /// that changes nothing writes and tells nothing (D54).
    async fn update_endpoint(
        &self,
        org: &OrgId,
        id: &EndpointId,
        patch: &EndpointPatch,
        by: Option<&UserId>,
        now: Timestamp,
        tell: &Teller,
    ) -> StoreResult<Endpoint>;
    /// Deletes the endpoint with its event, which carries its last state.
    async fn delete_endpoint(
        &self,
        org: &OrgId,
        id: &EndpointId,
        now: Timestamp,
        tell: &Teller,
    ) -> StoreResult<()>;
    /// D55 rotation: `sealed_secret` becomes the signing secret; the one it
    /// replaces keeps signing until `previous_until` (an older previous one
    /// is dropped). The endpoint's `updated_at` moves to `now` and it tells
    /// `webhook_endpoint.updated`.
    async fn rotate_endpoint_secret(
        &self,
        org: &OrgId,
        id: &EndpointId,
        sealed_secret: &[u8],
        previous_until: Timestamp,
        now: Timestamp,
        tell: &Teller,
    ) -> StoreResult<Endpoint>;
    /// The endpoint's sealed secrets, to sign with.
    async fn endpoint_secrets(
        &self,
        org: &OrgId,
        id: &EndpointId,
    ) -> StoreResult<Option<SealedSecrets>>;
}
