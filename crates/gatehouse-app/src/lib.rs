//! `gatehouse-app` owns Gatehouse's use cases: users (with the invitation
//! e-mail and the revocations their changes cause), the profile, products,
//! the links sent by e-mail, client registration and rotation, API keys,
//! organizations, signing keys and the staging dataset.
//!
//! HTTP handlers and CLI commands call [`App`] and nothing else: neither
//! names the store. A use case does the storage call(s) and the side effects
//! that belong with them — the link and its e-mail, keeping the in-memory
//! revocation set in step — so no caller can forget one.
//!
//! Every use case on tenant data takes the caller's [`OrgId`] (D2). This
//! crate must not import HTTP types (axum, http, hyper) or name a backend.

pub mod api_keys;
pub mod audit;
pub mod bootstrap;
pub mod clients;
pub mod deliveries;
pub mod error;
pub mod events;
pub mod idempotency;
mod jobs;
pub mod keys;
pub mod links;
pub mod manage;
pub mod master_key;
pub mod mfa;
pub mod oauth;
pub mod orgs;
pub mod outbox;
pub mod passkeys;
pub mod products;
pub mod profile;
pub mod resource;
pub mod search;
pub mod sessions;
pub mod staging;
pub mod users;
pub mod webhooks;

use std::sync::Arc;

use gatehouse_auth::AuthService;
use gatehouse_domain::OrgId;
use gatehouse_domain::event::{Origin, Publish, Teller};
use gatehouse_store::Store;

use crate::error::OrApp;

pub use error::{AppError, AppResult};
pub use gatehouse_store::{AttemptFilter, AttemptStatus, Consent, Credential, Session};
pub use resource::Resource;
/// The list filters of interface.md §4.3/§4.4, as the handlers build them.
pub use search::{ProductFilter, UserFilter};

/// The use cases, over one store. Cheap to clone.
#[derive(Clone)]
pub struct App(Arc<Inner>);

struct Inner {
    store: Arc<dyn Store>,
    /// `None` in an operator command: a short-lived process has no
    /// revocation set or caches of its own; serving nodes pick its writes up
    /// from storage (D25, D44).
    auth: Option<Arc<AuthService>>,
    /// `https://host[:port]` without a trailing slash (D1), for the links.
    public_url: String,
    /// D50: how long a kept response to an `Idempotency-Key` lives.
    idempotency_retention_secs: i64,
    /// Issue 16: the in-memory search indexes of this process.
    search: search::SearchIndexes,
    /// D54: how events show the resources (the server's published shapes).
    publish: Arc<dyn Publish>,
    /// D54 (D40 continued): how long events are kept.
    event_retention_secs: i64,
    /// Organizations' names, for the e-mails of links (an invitation reads
    /// one at every `POST /v1/users`) and the pages, each with the store's
    /// `orgs_version` when it was read: used only while that is unchanged
    /// (`gatehouse org rename` shows on the next request, D40).
    org_names: std::sync::Mutex<std::collections::HashMap<OrgId, (u64, Arc<str>)>>,
    /// D55: the allow-list and resolver the endpoint URLs are checked with.
    webhooks: webhooks::WebhookSettings,
    /// D57: how long a browser sign-in lasts.
    session_limits: gatehouse_domain::session::SessionLimits,
    /// D56 (D40 continued): the length of one day of
    /// `enrollment_grace_days` (`GATEHOUSE_MFA_GRACE_DAY`).
    mfa_grace_day_secs: i64,
    /// D56: the recovery-code key, once read (it never changes; a master-key
    /// rotation re-encrypts it, D23 continued).
    recovery_key: std::sync::OnceLock<[u8; 32]>,
    /// D58: the audit log's identifier key, once read (like the
    /// recovery-code key).
    audit_key: std::sync::OnceLock<[u8; 32]>,
    /// D58 (D40 continued): retention, checkpoint interval and period.
    audit: audit::AuditSettings,
    /// D58: the checkpoint interval this process last went through.
    audit_round: std::sync::atomic::AtomicI64,
    /// D58: the first uses this process knows were recorded, per
    /// [`audit::FirstUse`].
    first_uses: [audit::FirstUses; 2],
    /// D58: held by the audit purge running in this process, so that a
    /// second one (the housekeeping round beside a caller's) waits for it
    /// instead of doubling its share of the storage.
    audit_purge: tokio::sync::Mutex<()>,
}

/// Names kept at most in [`Inner::org_names`]; past it the map starts over.
const ORG_NAMES_KEPT: usize = 10_000;

impl App {
    /// The use cases of a serving process: `auth` holds the in-memory state
    /// (revocation set, caches) they keep in step with storage.
    /// `publish` shows the resources in events (D54) as the API does.
    pub fn new(
        store: Arc<dyn Store>,
        auth: Arc<AuthService>,
        public_url: &str,
        publish: Arc<dyn Publish>,
    ) -> Self {
        Self(Arc::new(Inner {
            store,
            auth: Some(auth),
            public_url: public_url.trim_end_matches('/').to_owned(),
            idempotency_retention_secs: idempotency::DEFAULT_RETENTION_SECS,
            search: search::SearchIndexes::new(),
            publish,
            event_retention_secs: events::DEFAULT_RETENTION_SECS,
            org_names: Default::default(),
            webhooks: Default::default(),
            session_limits: Default::default(),
            mfa_grace_day_secs: gatehouse_domain::mfa::GRACE_DAY_SECS,
            recovery_key: Default::default(),
            audit_key: Default::default(),
            audit: Default::default(),
            audit_round: Default::default(),
            first_uses: Default::default(),
            audit_purge: Default::default(),
        }))
    }

    /// The use cases of an operator command (D40). The links its e-mails
    /// carry (a password reset, issue 32) start with the public URL given
    /// by [`App::with_public_url`], the server's own setting.
    pub fn operator(store: Arc<dyn Store>, publish: Arc<dyn Publish>) -> Self {
        Self(Arc::new(Inner {
            store,
            auth: None,
            public_url: String::new(),
            idempotency_retention_secs: idempotency::DEFAULT_RETENTION_SECS,
            search: search::SearchIndexes::new(),
            publish,
            event_retention_secs: events::DEFAULT_RETENTION_SECS,
            org_names: Default::default(),
            webhooks: Default::default(),
            session_limits: Default::default(),
            mfa_grace_day_secs: gatehouse_domain::mfa::GRACE_DAY_SECS,
            recovery_key: Default::default(),
            audit_key: Default::default(),
            audit: Default::default(),
            audit_round: Default::default(),
            first_uses: Default::default(),
            audit_purge: Default::default(),
        }))
    }

    /// Sets the public URL (D1) the links in e-mails start with; before the
    /// App is shared.
    pub fn with_public_url(mut self, public_url: &str) -> Self {
        Arc::get_mut(&mut self.0)
            .expect("the public URL is set before the App is shared")
            .public_url = public_url.trim_end_matches('/').to_owned();
        self
    }

    /// What a change made by `origin` needs to tell its events (D54).
    pub fn teller(&self, origin: &Origin) -> Teller {
        Teller::new(origin.clone(), self.0.publish.clone())
    }

    /// The authorization server (grants, tokens, rate limits), for the
    /// OAuth endpoints and the extractors; `None` in an operator command.
    pub fn auth(&self) -> Option<&Arc<AuthService>> {
        self.0.auth.as_ref()
    }

    pub fn public_url(&self) -> &str {
        &self.0.public_url
    }

    /// Notes in memory that `user`'s tokens up to `now` are revoked; the
    /// store wrote the record with the change (D11, D13, D19, D29).
    fn note_user_revoked(&self, user: &gatehouse_domain::UserId, now: gatehouse_domain::Timestamp) {
        if let Some(auth) = &self.0.auth {
            auth.revocations()
                .apply(&[gatehouse_store::NewRevocation::user(user, now).stored(0)]);
        }
    }

    /// Notes in memory that `client`'s access tokens up to `now` are revoked;
    /// the store wrote the record with the change (D46, D47).
    fn note_client_revoked(
        &self,
        client: &gatehouse_domain::ClientId,
        now: gatehouse_domain::Timestamp,
    ) {
        if let Some(auth) = &self.0.auth {
            auth.revocations()
                .apply(&[gatehouse_store::NewRevocation::client(client, now).stored(0)]);
        }
    }

    /// Pulls the revocations written since this node last looked into its
    /// in-memory set, so the next request sees what a change just wrote in
    /// its transaction, whatever it wrote (D46 revised).
    /// Also the periodic pull of what other processes wrote (D25, D44).
    pub async fn sync_revocations(&self) -> AppResult<usize> {
        let Some(auth) = &self.0.auth else {
            return Ok(0);
        };
        let now = gatehouse_domain::Timestamp::now();
        let revs = self
            .0
            .store
            .revocations_since(auth.revocations().last_seen(), now)
            .await
            .or_app(Resource::Storage)?;
        Ok(auth.revocations().absorb(&revs, now))
    }

    /// `/readyz` (D42): storage answers.
    pub async fn ready(&self) -> AppResult<()> {
        self.0.store.ping().await.or_app(Resource::Storage)
    }

    /// The organization's name for e-mails and the sign-in pages (D49), or a neutral phrase.
    /// Kept in memory only while no process changed an organization
    /// (`OrgStore::orgs_version`, D40: `gatehouse org rename` shows on the
    /// next request).
    pub async fn org_name(&self, org: &OrgId) -> AppResult<String> {
        let names = || self.0.org_names.lock().unwrap_or_else(|e| e.into_inner());
        let version = self.0.store.orgs_version();
        if let Some(v) = version
            && let Some((seen, name)) = names().get(org)
            && *seen == v
        {
            return Ok(name.to_string());
        }
        let Some(o) = self
            .0
            .store
            .get_org(org)
            .await
            .or_app(Resource::Organization)?
        else {
            return Ok("your organization".into());
        };
        let mut kept = names();
        if kept.len() >= ORG_NAMES_KEPT {
            kept.clear();
        }
        if let Some(v) = version {
            kept.insert(org.clone(), (v, Arc::from(o.name.as_str())));
        }
        Ok(o.name)
    }
}
