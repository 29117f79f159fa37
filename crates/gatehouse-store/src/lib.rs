//! `gatehouse-store` owns the storage contract of Gatehouse: the [`Store`]
//! trait every backend implements, the [`StoreError`] they return, and the
//! conformance suite both backends must pass (module `conformance`, with the
//! `testing` feature, which only test builds enable).
//!
//! The contract is one trait per aggregate, each in its own module
//! ([`OrgStore`], [`UserStore`], [`LinkStore`], [`ProductStore`],
//! [`ClientStore`], [`ApiKeyStore`], [`GrantStore`], [`RevocationStore`],
//! [`OutboxStore`], [`RateStore`], [`JobStore`], [`SigningKeyStore`],
//! [`IdempotencyStore`], [`UsageStore`], [`SearchStore`], [`EventStore`],
//! [`WebhookStore`], [`SealedStore`]);
//! [`Store`] is all of them together, the one object callers hold.
//!
//! Tenant isolation is part of the types: every method that touches tenant
//! data takes the [`OrgId`] of the caller, and a record of another
//! organization is indistinguishable from a missing one (D2). The methods
//! without an organization are of three kinds, each trait saying which:
//! the look-ups that *establish* the tenant from a secret or public id
//! (named `resolve_*`: a link, code, refresh token, session or API key by
//! the digest of its secret, a client by its `client_id`) and the changes
//! keyed by such a secret; operational state that belongs to no tenant (the
//! e-mail outbox, revocation feed, rate windows, jobs, global signing keys, the values sealed under the
//! master key);
//! and one operator look-up ([`ApiKeyStore::operator_find_api_key`]).
//!
//! This crate must not import a database driver, SQL, HTTP or the auth layer:
//! nothing here may name SQLite or PostgreSQL, so either backend can implement
//! it without changing a caller.

mod api_keys;
mod audit;
mod clients;
#[cfg(feature = "testing")]
pub mod conformance;
pub mod decode;
mod events;
mod grants;
mod idempotency;
mod jobs;
mod links;
mod mfa;
#[cfg(feature = "testing")]
pub mod migrated;
mod orgs;
mod outbox;
mod products;
mod rate;
pub mod records;
pub mod rekey;
mod revocations;
mod sealed;
mod search;
mod sessions;
mod signing_keys;
mod usage;
mod users;
mod webhooks;

pub use api_keys::*;
pub use audit::*;
pub use clients::*;
pub use events::*;
pub use grants::*;
pub use idempotency::*;
pub use jobs::*;
pub use links::*;
pub use mfa::*;
pub use orgs::*;
pub use outbox::*;
pub use products::*;
pub use rate::*;
pub use records::*;
pub use revocations::*;
pub use sealed::*;
pub use search::*;
pub use sessions::*;
pub use signing_keys::*;
pub use usage::*;
pub use users::*;
pub use webhooks::*;

/// The traits a caller needs in scope to call a concrete backend's methods.
pub mod prelude {
    pub use crate::{
        ApiKeyStore, AuditStore, ClientStore, DeliveryStore, EventStore, GrantStore,
        IdempotencyStore, JobStore, LinkStore, OrgStore, OutboxStore, ProductStore, RateStore,
        RevocationStore, SealedStore, SearchStore, SessionStore, SigningKeyStore, Store,
        UsageStore, UserStore, WebhookStore,
    };
}

use async_trait::async_trait;
use gatehouse_domain::{DomainError, OrgId};

/// What can go wrong in storage.
#[derive(Clone, Debug, thiserror::Error)]
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

/// The check of a write that takes both an organization and a record naming
/// one (`insert_api_key`, `insert_auth_code`, `create_session`): a record
/// of another organization is a caller's bug, refused before any SQL runs
/// (D2), so no backend writes it under the wrong tenant.
pub fn check_org(org: &OrgId, record_org: &OrgId) -> StoreResult<()> {
    if org == record_org {
        Ok(())
    } else {
        Err(StoreError::Internal(format!(
            "a record of organization {record_org} written through {org}"
        )))
    }
}

/// The storage contract: every aggregate's trait, implemented by every
/// backend. Callers hold one `Arc<dyn Store>`, through which every
/// aggregate's methods are callable as they are; code holding a concrete
/// backend (its own tests) brings the traits in scope with
/// `use gatehouse_store::prelude::*`.
#[async_trait]
pub trait Store:
    OrgStore
    + UserStore
    + LinkStore
    + ProductStore
    + ClientStore
    + ApiKeyStore
    + GrantStore
    + SessionStore
    + MfaStore
    + RevocationStore
    + OutboxStore
    + RateStore
    + JobStore
    + SigningKeyStore
    + SealedStore
    + IdempotencyStore
    + UsageStore
    + SearchStore
    + EventStore
    + WebhookStore
    + DeliveryStore
    + AuditStore
    + Send
    + Sync
    + 'static
{
    /// Cheap reachability check for `/readyz` (D42).
    async fn ping(&self) -> StoreResult<()>;
}
