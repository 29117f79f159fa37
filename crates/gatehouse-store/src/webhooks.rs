//! Webhook endpoints (D55).

use async_trait::async_trait;
use gatehouse_domain::event::Teller;
use gatehouse_domain::webhook::{Attempt, AttemptError, Endpoint, EndpointPatch, Next, Trigger};
use gatehouse_domain::{AttemptId, EndpointId, EventId, Listing, OrgId, Page, Timestamp, UserId};

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
    /// An operator look-up (`gatehouse webhook show WE`, D47 continued): an
    /// endpoint by id, whatever its organization, with that organization.
    /// Only the CLI calls it; nothing reachable over HTTP may.
    async fn operator_find_endpoint(
        &self,
        id: &EndpointId,
    ) -> StoreResult<Option<(OrgId, Endpoint)>>;
    /// The endpoint's sealed secrets, to sign with.
    async fn endpoint_secrets(
        &self,
        org: &OrgId,
        id: &EndpointId,
    ) -> StoreResult<Option<SealedSecrets>>;
}

/// A delivery leased to one process for one attempt (D55, D44): no other
/// process attempts it until the lease ends or is given back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Claimed {
    pub delivery: i64,
    pub org: OrgId,
    pub endpoint: EndpointId,
    pub url: String,
    /// The queued attempt this one fills in.
    pub attempt_id: AttemptId,
    /// Its number (1 for the first).
    pub attempt: u32,
    pub trigger: Trigger,
    pub event: EventId,
}

/// What finishing an attempt did beyond the log (D55).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Finished {
    /// The endpoint, as the attempt disabled it (`gone` or `failing`).
    pub disabled: Option<Endpoint>,
    /// The endpoint whose admins are owed a "deliveries failing" e-mail.
    pub mail_failing: Option<Endpoint>,
}

/// What an attempt got (D55's attempt fields).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Made {
    pub started_at: Timestamp,
    pub duration_ms: i64,
    pub response_status: Option<u16>,
    pub error: Option<AttemptError>,
    pub excerpt: String,
}

/// The delivery log's filters (D55): every field narrows.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AttemptFilter {
    pub event: Option<EventId>,
    /// `pending`, `succeeded` or `failed`.
    pub status: Option<AttemptStatus>,
    /// Made (or, queued, due) at or after.
    pub from: Option<Timestamp>,
    /// Made (or due) before.
    pub to: Option<Timestamp>,
}

/// An attempt's `status` as a filter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AttemptStatus {
    Pending,
    Succeeded,
    Failed,
}

impl AttemptStatus {
    pub fn parse(raw: &str) -> Option<Self> {
        match raw {
            "pending" => Some(Self::Pending),
            "succeeded" => Some(Self::Succeeded),
            "failed" => Some(Self::Failed),
            _ => None,
        }
    }
}

/// The delivery queue and its log (D55). A delivery is one event for one
/// endpoint; it lives while attempts remain, each attempt one row of the
/// log (the next one queued as `pending`). Operational methods (fan-out,
/// claims) span organizations, as the outbox does; the log's reads take
/// the organization.
#[async_trait]
pub trait DeliveryStore: Send + Sync {
    /// Gives each sequenced event not yet fanned out a delivery to every
    /// enabled endpoint of its organization that wants it and existed when
    /// it happened (at most `limit` events per organization per call), in
    /// sequence order; each delivery's first attempt is queued due at
    /// `now`. Several processes may call it at once: each event is fanned
    /// out once. Answers how many deliveries it made.
    async fn fan_out(&self, now: Timestamp, limit: u32) -> StoreResult<u64>;
    /// Leases up to `limit` due deliveries to `node` until `lease_until`,
    /// never more than `max_in_flight` leased at once per endpoint across
    /// every process, and, for a `per_object` endpoint, never one while an
    /// earlier delivery of the same object to it is pending (D44, D55).
    async fn claim_deliveries(
        &self,
        node: &str,
        now: Timestamp,
        lease_until: Timestamp,
        max_in_flight: u32,
        limit: u32,
    ) -> StoreResult<Vec<Claimed>>;
    /// Records the attempt `claimed` made and what follows it (`next`),
    /// while `node` still holds the lease (else nothing: the delivery was
    /// cancelled or taken over). A retry queues the next attempt; `Gone`
    /// disables the endpoint (`gone`), cancels its pending deliveries and
    /// tells `webhook_endpoint.disabled` through `tell`. A failure also
    /// disables it (`failing`) once `webhook::failing_too_long` says so
    /// under `disable_after`; an exhausted schedule asks for a "deliveries
    /// failing" e-mail when `webhook::failing_mail_due` allows one (the
    /// time is recorded here, so one process sends it).
    async fn finish_attempt(
        &self,
        node: &str,
        claimed: &Claimed,
        made: &Made,
        next: Next,
        disable_after: std::time::Duration,
        tell: &Teller,
    ) -> StoreResult<Finished>;
    /// Queues an e-mail (D30) to each active admin of `org`; how many.
    async fn mail_admins(
        &self,
        org: &OrgId,
        subject: &str,
        body: &str,
        now: Timestamp,
    ) -> StoreResult<u64>;
    /// Gives back leases `node` holds without an attempt counted (an
    /// attempt cut short by shutdown, D43 continued): due again at once.
    async fn release_deliveries(&self, node: &str, deliveries: &[i64]) -> StoreResult<()>;
    /// Gives back, at a delivery worker's start, the leases no running
    /// process can hold: due again at once, uncounted, instead of when they
    /// run out. A backend one serving process owns (SQLite, D44) gives back
    /// every lease (they were left by a process killed mid-attempt); one
    /// that nodes share (PostgreSQL) none, since another node may be making
    /// the attempt. Answers how many.
    async fn release_orphaned_leases(&self) -> StoreResult<u64>;
    /// The endpoint's attempts (D55), newest first: by the time made, a
    /// queued one by when it is due.
    async fn list_attempts(
        &self,
        org: &OrgId,
        endpoint: &EndpointId,
        filter: &AttemptFilter,
        page: Page,
    ) -> StoreResult<Listing<Attempt>>;
    /// Deliveries pending in the whole service (`webhook_queue_depth`).
    async fn queue_depth(&self) -> StoreResult<u64>;
    /// Whether any organization has ever had a webhook endpoint (the
    /// worker idles until one has).
    async fn has_webhooks(&self) -> StoreResult<bool>;
    /// Logs an attempt made outside the queue (`test`, D55).
    async fn insert_attempt(&self, org: &OrgId, attempt: &Attempt) -> StoreResult<()>;
    /// Queues `event` (sequenced, of `org`) for `endpoint` with `trigger`,
    /// due at `now` (`redeliver`, D55); the queued attempt. `NotFound` for
    /// an event that is not (or not yet) listed.
    async fn queue_delivery(
        &self,
        org: &OrgId,
        endpoint: &EndpointId,
        event: &EventId,
        trigger: Trigger,
        now: Timestamp,
    ) -> StoreResult<Attempt>;
    /// D55 `replay`: queues a fresh schedule (`replay`) for each sequenced
    /// event of `org` created in [`since`, `until`) whose type `patterns`
    /// match, oldest first, at most `limit`; with `only_failed`, only those
    /// whose latest attempt to the endpoint failed or that have none.
    /// Answers how many it queued.
    #[allow(clippy::too_many_arguments)]
    async fn replay(
        &self,
        org: &OrgId,
        endpoint: &EndpointId,
        patterns: &[gatehouse_domain::event::TypePattern],
        since: Timestamp,
        until: Timestamp,
        only_failed: bool,
        now: Timestamp,
        limit: u32,
    ) -> StoreResult<u64>;
}
