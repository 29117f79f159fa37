//! Webhook endpoints (D55): create with the secret once, list, show,
//! change, delete, rotate. The URL's address rules are checked here, at
//! create and update, against what the host resolves to through the
//! process's [`HostLookup`] (the delivery checks again at connect).

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use gatehouse_domain::event::{Origin, TypePattern};
use gatehouse_domain::webhook::{
    self, AllowList, Endpoint, EndpointPatch, EndpointUrl, Host, Ordering, UrlError,
};
use gatehouse_domain::{DomainError, EndpointId, Listing, Manager, OrgId, Page, Timestamp};

use crate::error::{AppError, AppResult, OrApp};
use crate::{App, Resource};

/// How long a look-up at create or update may take before the host counts
/// as not resolving (accepted: its attempts fail with `dns`, D55).
const LOOKUP_TIMEOUT: Duration = Duration::from_secs(5);

/// Resolves a webhook host to its addresses: the system resolver, or the
/// test resolver of `GATEHOUSE_WEBHOOK_DNS` (D55, honoured only with
/// `--test-settings`). An error or no answer is "does not resolve".
#[async_trait]
pub trait HostLookup: Send + Sync {
    async fn lookup(&self, host: &str, port: u16) -> Result<Vec<IpAddr>, String>;
}

/// The system resolver (`getaddrinfo`, through tokio).
pub struct SystemLookup;

#[async_trait]
impl HostLookup for SystemLookup {
    async fn lookup(&self, host: &str, port: u16) -> Result<Vec<IpAddr>, String> {
        tokio::net::lookup_host((host, port))
            .await
            .map(|addrs| addrs.map(|a| a.ip()).collect())
            .map_err(|e| e.to_string())
    }
}

/// The webhook settings the use cases need (D55).
#[derive(Clone)]
pub struct WebhookSettings {
    /// `GATEHOUSE_WEBHOOK_ALLOW_CIDRS`: ranges allowed despite the address
    /// rules, and plain `http` to them.
    pub allow: AllowList,
    pub lookup: Arc<dyn HostLookup>,
    /// The transport of `test` (the worker's own); `None` in an operator
    /// command, which sends nothing.
    pub deliver: Option<Arc<dyn crate::deliveries::Deliver>>,
}

impl Default for WebhookSettings {
    fn default() -> Self {
        Self {
            allow: AllowList::default(),
            lookup: Arc::new(SystemLookup),
            deliver: None,
        }
    }
}

/// A new endpoint, its body parsed (D55; the URL is checked here).
#[derive(Clone, Debug)]
pub struct NewEndpoint {
    pub url: String,
    pub description: String,
    pub enabled_events: Vec<TypePattern>,
    pub ordering: Ordering,
}

/// The associated data a sealed secret is bound to: its endpoint, so a
/// sealed value moved to another row does not open.
fn secret_aad(org: &OrgId, id: &EndpointId) -> Vec<u8> {
    gatehouse_auth::keys::aad::webhook_secret(org.as_str(), id.as_str())
}

impl App {
    /// Sets the webhook settings (D55); before the App is shared.
    pub fn with_webhook_settings(mut self, settings: WebhookSettings) -> Self {
        std::sync::Arc::get_mut(&mut self.0)
            .expect("the webhook settings are set before the App is shared")
            .webhooks = settings;
        self
    }

    /// D55's input and address rules for `raw`: 400 on the `url` field for
    /// the input rules, 422 `URL_NOT_ALLOWED` for an address the rules
    /// refuse, written in the URL or resolved from its host. A host that
    /// does not resolve is accepted.
    async fn checked_url(&self, raw: &str) -> AppResult<EndpointUrl> {
        let allow = &self.0.webhooks.allow;
        let url = EndpointUrl::parse(raw, allow).map_err(url_error)?;
        if let Host::Domain(name) = url.host() {
            let found = tokio::time::timeout(
                LOOKUP_TIMEOUT,
                self.0.webhooks.lookup.lookup(name, url.port()),
            )
            .await;
            if let Ok(Ok(addresses)) = found
                && !addresses.is_empty()
            {
                url.check_resolved(&addresses, allow).map_err(url_error)?;
            } else if !url.is_https() {
                // Plain http needs its addresses in an allowed range; a name
                // that does not resolve proves nothing.
                return Err(AppError::invalid("url", "must be an https URL"));
            }
        }
        Ok(url)
    }

    fn master_key(&self) -> AppResult<&gatehouse_auth::MasterKeys> {
        self.auth()
            .map(|a| a.keys().master())
            .ok_or_else(|| AppError::Internal("webhook secrets without the serving state".into()))
    }

    /// `POST /v1/webhook-endpoints`: the endpoint and its secret, shown
    /// only now. The caller's owner owns it (D55, D46 revised).
    pub async fn create_endpoint(
        &self,
        m: &Manager,
        org: &OrgId,
        new: NewEndpoint,
        origin: &Origin,
    ) -> AppResult<(Endpoint, String)> {
        let url = self.checked_url(&new.url).await?;
        let e = Endpoint::new(
            &url,
            new.description,
            new.enabled_events,
            new.ordering,
            m.owner().cloned(),
            Timestamp::now(),
        );
        let secret = gatehouse_auth::webhooks::new_secret();
        let sealed = self
            .master_key()?
            .encrypt(secret.as_bytes(), &secret_aad(org, &e.id));
        webhook_store(self)
            .insert_endpoint(org, &e, &sealed, &self.teller(origin))
            .await
            .or_app(Resource::WebhookEndpoint)?;
        Ok((e, secret))
    }

    /// The organization's endpoints, newest first (D14 continued).
    pub async fn list_endpoints(&self, org: &OrgId, page: Page) -> AppResult<Listing<Endpoint>> {
        webhook_store(self)
            .list_endpoints(org, page)
            .await
            .or_app(Resource::WebhookEndpoint)
    }

    pub async fn get_endpoint(&self, org: &OrgId, id: &EndpointId) -> AppResult<Endpoint> {
        webhook_store(self)
            .get_endpoint(org, id)
            .await
            .or_app(Resource::WebhookEndpoint)?
            .ok_or(AppError::NotFound(Resource::WebhookEndpoint))
    }

    /// `PATCH`: a new URL is checked as at create; enabling makes the
    /// caller's owner the owner (D55).
    pub async fn update_endpoint(
        &self,
        m: &Manager,
        org: &OrgId,
        id: &EndpointId,
        mut patch: EndpointPatch,
        origin: &Origin,
    ) -> AppResult<Endpoint> {
        // 404 before the URL's look-up.
        self.get_endpoint(org, id).await?;
        if let Some(raw) = &patch.url {
            patch.url = Some(self.checked_url(raw).await?.as_str().to_owned());
        }
        webhook_store(self)
            .update_endpoint(
                org,
                id,
                &patch,
                m.owner(),
                Timestamp::now(),
                &self.teller(origin),
            )
            .await
            .or_app(Resource::WebhookEndpoint)
    }

    pub async fn delete_endpoint(
        &self,
        org: &OrgId,
        id: &EndpointId,
        origin: &Origin,
    ) -> AppResult<()> {
        webhook_store(self)
            .delete_endpoint(org, id, Timestamp::now(), &self.teller(origin))
            .await
            .or_app(Resource::WebhookEndpoint)
    }

    /// `POST …/{id}/secret`: a new secret (shown only now); the previous
    /// one keeps signing for `grace_secs` (D55).
    pub async fn rotate_endpoint_secret(
        &self,
        org: &OrgId,
        id: &EndpointId,
        grace_secs: u32,
        origin: &Origin,
    ) -> AppResult<(Endpoint, String)> {
        let secret = gatehouse_auth::webhooks::new_secret();
        let sealed = self
            .master_key()?
            .encrypt(secret.as_bytes(), &secret_aad(org, id));
        let now = Timestamp::now();
        let e = webhook_store(self)
            .rotate_endpoint_secret(
                org,
                id,
                &sealed,
                now.plus_seconds(i64::from(grace_secs)),
                now,
                &self.teller(origin),
            )
            .await
            .or_app(Resource::WebhookEndpoint)?;
        Ok((e, secret))
    }

    /// The keys that sign for the endpoint at `now`: its secret's, then the
    /// previous one's while its grace lasts (D55). A sealed secret that does
    /// not open (another master key) is an internal error, never skipped.
    pub async fn endpoint_signing_keys(
        &self,
        org: &OrgId,
        id: &EndpointId,
        now: Timestamp,
    ) -> AppResult<Vec<Vec<u8>>> {
        let sealed = webhook_store(self)
            .endpoint_secrets(org, id)
            .await
            .or_app(Resource::WebhookEndpoint)?
            .ok_or(AppError::NotFound(Resource::WebhookEndpoint))?;
        let master = self.master_key()?;
        let aad = secret_aad(org, id);
        let open = |bytes: &[u8]| -> AppResult<Vec<u8>> {
            master
                .decrypt(bytes, &aad)
                .and_then(|plain| String::from_utf8(plain).ok())
                .and_then(|s| gatehouse_auth::webhooks::secret_key(&s))
                .ok_or_else(|| {
                    AppError::Internal(format!(
                        "the signing secret of webhook endpoint {id} does not open under the master key"
                    ))
                })
        };
        let mut keys = vec![open(&sealed.current)?];
        if let Some((previous, until)) = &sealed.previous
            && now < *until
        {
            keys.push(open(previous)?);
        }
        Ok(keys)
    }
}

/// The URL itself is never echoed: it may carry a credential of the
/// receiver's.
impl App {
    /// `GET …/{id}/attempts` (D55): the endpoint's delivery log.
    pub async fn list_attempts(
        &self,
        org: &OrgId,
        id: &EndpointId,
        filter: &gatehouse_store::AttemptFilter,
        page: Page,
    ) -> AppResult<Listing<webhook::Attempt>> {
        self.get_endpoint(org, id).await?;
        let store: &dyn gatehouse_store::DeliveryStore = self.0.store.as_ref();
        store
            .list_attempts(org, id, filter, page)
            .await
            .or_app(Resource::WebhookEndpoint)
    }
}

/// D55 `replay`: events queued per call at most; a larger range is
/// replayed by calling again from where the last queued one was created.
pub const REPLAY_MAX: u32 = 10_000;

impl App {
    /// `POST …/{id}/test` (D55): a `webhook_endpoint.test` event, never
    /// sequenced nor listed, sent at once to this endpoint only (also when
    /// it is disabled); the attempt, logged with `trigger: manual`.
    pub async fn test_endpoint(
        &self,
        org: &OrgId,
        id: &EndpointId,
        origin: &Origin,
    ) -> AppResult<webhook::Attempt> {
        let e = self.get_endpoint(org, id).await?;
        let deliver = self
            .0
            .webhooks
            .deliver
            .clone()
            .ok_or_else(|| AppError::Internal("webhook test without a transport".into()))?;
        let now = Timestamp::now();
        let event = gatehouse_domain::event::Event {
            sequence: 0,
            event: self.teller(origin).webhook_endpoint_test(&e, now),
        };
        let body = self.0.publish.event(org, &event).into_bytes();
        let keys = self.endpoint_signing_keys(org, id, now).await?;
        let keys: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
        let timestamp = now.unix_seconds();
        let reply = deliver
            .deliver(&crate::deliveries::Outgoing {
                url: e.url.clone(),
                id: event.event.id.to_string(),
                timestamp,
                signature: gatehouse_auth::webhooks::signature_header(
                    &keys,
                    event.event.id.as_str(),
                    timestamp,
                    &body,
                ),
                body,
            })
            .await;
        let attempt = webhook::Attempt {
            id: gatehouse_domain::AttemptId::generate(),
            endpoint: id.clone(),
            event: event.event.id.clone(),
            attempt: 1,
            trigger: webhook::Trigger::Manual,
            started_at: Some(now),
            duration_ms: Some(i64::try_from(reply.duration.as_millis()).unwrap_or(i64::MAX)),
            response_status: reply.status,
            error: reply.error,
            response_excerpt: Some(reply.excerpt),
            next_attempt_at: None,
        };
        let store: &dyn gatehouse_store::DeliveryStore = self.0.store.as_ref();
        store
            .insert_attempt(org, &attempt)
            .await
            .or_app(Resource::WebhookEndpoint)?;
        Ok(attempt)
    }

    /// `POST /v1/events/{id}/redeliver` (D55): queues the event for the
    /// endpoint (`trigger: manual`); the queued attempt. A disabled
    /// endpoint gets nothing (422).
    pub async fn redeliver(
        &self,
        org: &OrgId,
        event: &gatehouse_domain::EventId,
        endpoint: &EndpointId,
    ) -> AppResult<webhook::Attempt> {
        let e = self.get_endpoint(org, endpoint).await?;
        self.get_event(org, event).await?;
        refuse_disabled(&e)?;
        let store: &dyn gatehouse_store::DeliveryStore = self.0.store.as_ref();
        store
            .queue_delivery(
                org,
                endpoint,
                event,
                webhook::Trigger::Manual,
                Timestamp::now(),
            )
            .await
            .or_app(Resource::Event)
    }

    /// `POST …/{id}/replay` (D55): a fresh schedule for each event in
    /// [`since`, `until`) the endpoint's current `enabled_events` match
    /// (with `only_failed`, those whose latest attempt failed or that have
    /// none), at most [`REPLAY_MAX`]; how many were queued. A `since`
    /// older than the event retention is 400.
    pub async fn replay(
        &self,
        org: &OrgId,
        id: &EndpointId,
        since: Timestamp,
        until: Option<Timestamp>,
        only_failed: bool,
    ) -> AppResult<u64> {
        let e = self.get_endpoint(org, id).await?;
        let now = Timestamp::now();
        if since < now.plus_seconds(-self.event_retention_secs()) {
            return Err(AppError::invalid(
                "since",
                "is older than the event retention: those events are gone",
            ));
        }
        let until = until.unwrap_or(now);
        if until <= since {
            return Err(AppError::invalid("until", "must be after since"));
        }
        refuse_disabled(&e)?;
        let store: &dyn gatehouse_store::DeliveryStore = self.0.store.as_ref();
        store
            .replay(
                org,
                id,
                &e.enabled_events,
                since,
                until,
                only_failed,
                now,
                REPLAY_MAX,
            )
            .await
            .or_app(Resource::WebhookEndpoint)
    }
}

impl App {
    /// `gatehouse webhook list --org ORG` (D47 continued): every endpoint,
    /// newest first.
    pub async fn operator_list_endpoints(&self, org: &OrgId) -> AppResult<Vec<Endpoint>> {
        self.existing_org(org).await?;
        let mut all = Vec::new();
        let mut page = Page {
            limit: 100,
            offset: 0,
        };
        loop {
            let l = self.list_endpoints(org, page).await?;
            let n = l.items.len();
            all.extend(l.items);
            if n < page.limit as usize {
                return Ok(all);
            }
            page.offset += n as u64;
        }
    }

    /// `gatehouse webhook show WE` (D47 continued): the endpoint (found by
    /// its id alone, the operator's look-up), its organization and its
    /// latest attempts.
    pub async fn operator_show_endpoint(
        &self,
        id: &EndpointId,
    ) -> AppResult<(OrgId, Endpoint, Listing<webhook::Attempt>)> {
        let (org, e) = webhook_store(self)
            .operator_find_endpoint(id)
            .await
            .or_app(Resource::WebhookEndpoint)?
            .ok_or(AppError::NotFound(Resource::WebhookEndpoint))?;
        let attempts = self
            .list_attempts(
                &org,
                id,
                &gatehouse_store::AttemptFilter::default(),
                Page::default(),
            )
            .await?;
        Ok((org, e, attempts))
    }
}

/// D55: nothing is queued for a disabled endpoint.
fn refuse_disabled(e: &Endpoint) -> AppResult<()> {
    match e.disabled {
        None => Ok(()),
        Some(reason) => Err(AppError::Rule(DomainError::InvalidStateTransition(
            format!(
                "the endpoint is disabled ({}); enable it first",
                reason.as_str()
            ),
        ))),
    }
}

fn url_error(e: UrlError) -> AppError {
    match e {
        UrlError::Invalid(issue) => AppError::invalid("url", issue),
        UrlError::NotAllowed(_) => AppError::Rule(DomainError::UrlNotAllowed(e.to_string())),
    }
}

/// This area's view of storage: the `WebhookStore` trait only (issue 25).
fn webhook_store(app: &App) -> &dyn gatehouse_store::WebhookStore {
    app.0.store.as_ref()
}

/// D55: an `enabled_events` default.
pub fn every_event() -> Vec<TypePattern> {
    vec![TypePattern::parse("*").expect("* matches every type")]
}

/// D55's `grace_seconds` default and cap.
pub fn check_grace(secs: i64) -> Result<u32, String> {
    u32::try_from(secs)
        .ok()
        .filter(|s| *s <= webhook::MAX_GRACE_SECS)
        .ok_or_else(|| format!("must be an integer from 0 to {}", webhook::MAX_GRACE_SECS))
}
