//! Events (D54): what a committed change tells a client that mirrors the
//! organization. A rule that decides a change also decides its events; they
//! travel as [`crate::effect::Effect::Event`] and are written by each
//! backend's one applier in the change's transaction, so a change and its
//! events commit or roll back together.
//!
//! An event here carries its object already rendered (the JSON its `GET`
//! returns at that commit, `previous_attributes` for an update): rendering
//! is the caller's, through the published shapes, so this crate stays free
//! of the wire format. The `sequence` is not decided here: storage assigns
//! it after commit, in commit order, per organization (D54).

use std::sync::Arc;

use crate::ids::{ApiKeyId, ClientId, EventId, UserId};
use crate::product::Product;
use crate::time::Timestamp;
use crate::user::User;
use crate::webhook::Endpoint;
use crate::{ApiKey, Client, Consent, Organization};

macro_rules! catalog {
    ($($variant:ident => $text:literal,)*) => {
        /// D54's catalog: every type an event can have.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum EventType {
            $($variant,)*
        }

        impl EventType {
            /// Every type, in the catalog's order.
            pub const ALL: &'static [EventType] = &[$(EventType::$variant,)*];

            pub fn as_str(self) -> &'static str {
                match self {
                    $(EventType::$variant => $text,)*
                }
            }

            pub fn parse(s: &str) -> Option<Self> {
                match s {
                    $($text => Some(EventType::$variant),)*
                    _ => None,
                }
            }
        }
    };
}

catalog! {
    UserCreated => "user.created",
    UserUpdated => "user.updated",
    UserDeleted => "user.deleted",
    UserInvited => "user.invited",
    UserPasswordChanged => "user.password_changed",
    UserSignedIn => "user.signed_in",
    SessionRevoked => "session.revoked",
    UserMfaEnrolled => "user.mfa_enrolled",
    UserMfaRemoved => "user.mfa_removed",
    ConsentRevoked => "consent.revoked",
    RefreshTokenReuseDetected => "refresh_token.reuse_detected",
    ProductCreated => "product.created",
    ProductUpdated => "product.updated",
    ProductDeleted => "product.deleted",
    ApplicationCreated => "application.created",
    ApplicationUpdated => "application.updated",
    ApplicationDeleted => "application.deleted",
    ApplicationSecretRotated => "application.secret_rotated",
    ApiKeyCreated => "api_key.created",
    ApiKeyRevoked => "api_key.revoked",
    OrganizationUpdated => "organization.updated",
    OrganizationSecurityUpdated => "organization.security_updated",
    StagingReset => "staging.reset",
    WebhookEndpointCreated => "webhook_endpoint.created",
    WebhookEndpointUpdated => "webhook_endpoint.updated",
    WebhookEndpointDeleted => "webhook_endpoint.deleted",
    WebhookEndpointDisabled => "webhook_endpoint.disabled",
    WebhookEndpointTest => "webhook_endpoint.test",
    AuditCheckpoint => "audit.checkpoint",
}

/// A `type` filter (D54) and, later, a webhook endpoint's `enabled_events`
/// (D55): an exact type, a prefix ending in `.*` (`user.*`), or `*`. A
/// pattern that matches no catalog type is refused, so a typo is an error
/// rather than a filter that silently matches nothing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TypePattern(String);

impl TypePattern {
    pub fn parse(raw: &str) -> Result<Self, String> {
        let p = Self(raw.to_owned());
        if EventType::ALL.iter().any(|t| p.matches(*t)) {
            Ok(p)
        } else {
            Err(format!("{raw:?} matches no event type"))
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn matches(&self, t: EventType) -> bool {
        match self.0.strip_suffix('*') {
            Some("") => true,
            Some(prefix) => prefix.ends_with('.') && t.as_str().starts_with(prefix),
            None => self.0 == t.as_str(),
        }
    }

    /// The catalog types this pattern matches.
    pub fn types(&self) -> Vec<EventType> {
        EventType::ALL
            .iter()
            .copied()
            .filter(|t| self.matches(*t))
            .collect()
    }
}

/// Who made a change (D54, shared with D58's audit entries).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Actor {
    /// A person, through a token issued to `client` (the dashboard's is
    /// `app_dashboard`); `client` is `None` where the person acted without
    /// a token, through a single-use link of theirs (accepting an
    /// invitation, resetting a password: docs/events.md).
    User {
        user: UserId,
        client: Option<ClientId>,
    },
    /// An application with its own credentials (client credentials).
    Client(ClientId),
    /// An API key.
    ApiKey(ApiKeyId),
    /// An operator, through the CLI.
    Operator,
    /// Gatehouse itself: expiry, purges, the staging reset.
    System,
}

impl Actor {
    /// `actor.type`.
    pub fn kind(&self) -> &'static str {
        match self {
            Actor::User { .. } => "user",
            Actor::Client(_) => "client",
            Actor::ApiKey(_) => "api_key",
            Actor::Operator => "operator",
            Actor::System => "system",
        }
    }

    /// `actor.id`.
    pub fn id(&self) -> Option<&str> {
        match self {
            Actor::User { user, .. } => Some(user.as_str()),
            Actor::Client(c) => Some(c.as_str()),
            Actor::ApiKey(k) => Some(k.as_str()),
            Actor::Operator | Actor::System => None,
        }
    }

    /// `actor.client_id`.
    pub fn client_id(&self) -> Option<&str> {
        match self {
            Actor::User { client, .. } => client.as_ref().map(|c| c.as_str()),
            Actor::Client(c) => Some(c.as_str()),
            Actor::ApiKey(_) | Actor::Operator | Actor::System => None,
        }
    }
}

/// The request a change came through (D54: `request`): none for the
/// operator and the system.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestRef {
    /// The request's `X-Request-ID` (`req_…`).
    pub id: String,
    /// Its `Idempotency-Key`, when it had one (D50).
    pub idempotency_key: Option<String>,
    /// Where it came from, for the audit log (D58's `source`); events do
    /// not show it, and an event read back from storage has none.
    pub source: Option<Source>,
}

/// D58's `source`: the client's address (the peer's, or the one D28's
/// trusted proxies name) and its `User-Agent`, cut to
/// [`Source::USER_AGENT_MAX`] bytes. For a dashboard action, the browser's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Source {
    pub ip: String,
    pub user_agent: Option<String>,
}

impl Source {
    /// The longest `User-Agent` kept; a longer one is cut at a character
    /// boundary (a header can be far longer, and the log keeps it for years).
    pub const USER_AGENT_MAX: usize = 512;

    pub fn new(ip: std::net::IpAddr, user_agent: Option<&str>) -> Self {
        let user_agent = user_agent.map(|ua| {
            let mut end = ua.len().min(Self::USER_AGENT_MAX);
            while !ua.is_char_boundary(end) {
                end -= 1;
            }
            ua[..end].to_owned()
        });
        Self {
            ip: ip.to_string(),
            user_agent,
        }
    }
}

/// Who made a change and through which request: what every event of the
/// change carries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Origin {
    pub actor: Actor,
    pub request: Option<RequestRef>,
}

impl Origin {
    /// A change made by an operator through the CLI.
    pub fn operator() -> Self {
        Self {
            actor: Actor::Operator,
            request: None,
        }
    }

    /// A change Gatehouse made by itself.
    pub fn system() -> Self {
        Self {
            actor: Actor::System,
            request: None,
        }
    }
}

/// An event as a change decides it, before storage gives it its sequence.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewEvent {
    pub id: EventId,
    pub kind: EventType,
    /// The id of the object `data.object` describes (`object_id`, and the
    /// ordering key of D55's `per_object`).
    pub object_id: String,
    /// The change's time, as written in its transaction (D4).
    pub created_at: Timestamp,
    pub origin: Origin,
    /// `data.object`, rendered: the resource as its `GET` returns it at
    /// this commit (its last state for a deletion). Never a secret.
    pub object: String,
    /// `data.previous_attributes`, rendered (only `*.updated`): the old
    /// values of the fields that changed.
    pub previous: Option<String>,
}

impl NewEvent {
    pub fn new(
        kind: EventType,
        object_id: &str,
        created_at: Timestamp,
        origin: &Origin,
        object: String,
    ) -> Self {
        Self {
            id: EventId::generate_at(created_at),
            kind,
            object_id: object_id.to_owned(),
            created_at,
            origin: origin.clone(),
            object,
            previous: None,
        }
    }

    pub fn with_previous(mut self, previous: String) -> Self {
        self.previous = Some(previous);
        self
    }
}

/// Which events a list returns (D54's filters); every field narrows.
/// What was used again when a refresh chain was revoked for reuse (D54's
/// `refresh_token.reuse_detected`, `data.object.trigger`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReuseTrigger {
    /// A refresh token used after its grace window (D24).
    RefreshToken,
    /// An authorization code used a second time (D26).
    AuthorizationCode,
}

impl ReuseTrigger {
    pub fn as_str(self) -> &'static str {
        match self {
            ReuseTrigger::RefreshToken => "refresh_token",
            ReuseTrigger::AuthorizationCode => "authorization_code",
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EventFilter {
    /// Any of these types (a `type` filter's patterns, expanded); `None`
    /// for every type. An empty list matches nothing.
    pub types: Option<Vec<EventType>>,
    pub object_id: Option<String>,
    /// `created_at` at or after.
    pub from: Option<Timestamp>,
    /// `created_at` before.
    pub to: Option<Timestamp>,
    /// `sequence` below (the `/v2` cursor, D32 continued: the events older
    /// than the page's last).
    pub before_sequence: Option<i64>,
}

/// An event as stored: [`NewEvent`] with its organization's `sequence`
/// (assigned after commit; events without one are not shown, D54).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    pub sequence: i64,
    pub event: NewEvent,
}

/// How the resources are shown: each as its `GET` returns it, compact
/// JSON. The server implements it with its published shapes (so a field
/// added to a domain type is not published by accident in an event either);
/// the rules here only call it.
pub trait Publish: Send + Sync {
    fn product(&self, p: &Product) -> String;
    fn user(&self, u: &User) -> String;
    /// An application as `GET /v1/applications/{id}` returns it (no secret).
    fn application(&self, c: &Client) -> String;
    /// An API key record as `GET /v1/api-keys/{id}` returns it (no key).
    fn api_key(&self, k: &ApiKey) -> String;
    /// The organization as `GET /v1/organization` returns it.
    fn organization(&self, o: &Organization) -> String;
    /// `consent` of `user` to `client` as `GET /v1/me/applications` shows
    /// it, plus `user_id` (D54's `consent.revoked`).
    fn consent(&self, user: &UserId, consent: &Consent, client: &Client) -> String;
    /// A webhook endpoint as `GET /v1/webhook-endpoints/{id}` returns it
    /// (no secret, D55).
    fn webhook_endpoint(&self, e: &Endpoint) -> String;
    /// A browser session as `GET /v1/users/{id}/sessions` shows it,
    /// without `current` (D54's `user.signed_in`, `session.revoked`).
    fn session(&self, s: &crate::session::Session) -> String;
    /// A factor of `user` as `GET /v1/me/mfa` shows it, plus `user_id`
    /// (D54's `user.mfa_enrolled`, `user.mfa_removed`).
    fn factor(&self, user: &UserId, f: &crate::mfa::Factor) -> String;
    /// The policy as `GET /v1/organization/security` returns it (D56).
    fn security(&self, p: &crate::mfa::SecurityPolicy) -> String;
    /// An event of `org` as `GET /v1/events/{id}` returns it, compact: a
    /// webhook delivery's body (D55), the same bytes on every attempt.
    fn event(&self, org: &crate::OrgId, e: &Event) -> String;
}

/// What a change needs to tell its events: who made it and how its objects
/// are shown. Cheap to clone.
#[derive(Clone)]
pub struct Teller {
    pub origin: Origin,
    pub publish: Arc<dyn Publish>,
}

impl std::fmt::Debug for Teller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Teller")
            .field("origin", &self.origin)
            .finish_non_exhaustive()
    }
}

impl Teller {
    pub fn new(origin: Origin, publish: Arc<dyn Publish>) -> Self {
        Self { origin, publish }
    }

    /// This teller, for a change the person `user` made through a
    /// single-use link sent to them (an invitation, a reset): the actor is
    /// that person, without a client (no token was used); the request
    /// stays.
    pub fn by_link(&self, user: &UserId) -> Teller {
        Teller {
            origin: Origin {
                actor: Actor::User {
                    user: user.clone(),
                    client: None,
                },
                request: self.origin.request.clone(),
            },
            publish: Arc::clone(&self.publish),
        }
    }

    /// A `*.updated` event: the object as it is, with the old values of
    /// what changed (D54).
    fn updated(
        &self,
        kind: EventType,
        object_id: &str,
        at: Timestamp,
        old: &str,
        new: String,
    ) -> NewEvent {
        let previous = previous_attributes(old, &new);
        self.event(kind, object_id, at, new).with_previous(previous)
    }

    fn event(&self, kind: EventType, object_id: &str, at: Timestamp, object: String) -> NewEvent {
        NewEvent::new(kind, object_id, at, &self.origin, object)
    }

    /// `user.created` (D54: then `user.invited` when it is sent one).
    pub fn user_created(&self, u: &User) -> NewEvent {
        let object = self.publish.user(u);
        self.event(EventType::UserCreated, u.id.as_str(), u.created_at, object)
    }

    /// `user.invited`: an invitation sent or re-sent at `at`.
    pub fn user_invited(&self, u: &User, at: Timestamp) -> NewEvent {
        let object = self.publish.user(u);
        self.event(EventType::UserInvited, u.id.as_str(), at, object)
    }

    /// `product.created`.
    pub fn product_created(&self, p: &Product) -> NewEvent {
        let object = self.publish.product(p);
        self.event(
            EventType::ProductCreated,
            p.id.as_str(),
            p.created_at,
            object,
        )
    }

    /// `product.updated` (D18's automatic status change included), at the
    /// change's `updated_at`.
    pub fn product_updated(&self, before: &Product, after: &Product) -> NewEvent {
        let (old, new) = (self.publish.product(before), self.publish.product(after));
        self.updated(
            EventType::ProductUpdated,
            after.id.as_str(),
            after.updated_at,
            &old,
            new,
        )
    }

    /// `product.deleted`, with the product's last state.
    pub fn product_deleted(&self, last: &Product, at: Timestamp) -> NewEvent {
        let object = self.publish.product(last);
        self.event(EventType::ProductDeleted, last.id.as_str(), at, object)
    }

    /// `user.updated` (role, status, name; D54), `previous_attributes` the
    /// old values of what changed.
    pub fn user_updated(&self, before: &User, after: &User) -> NewEvent {
        let (old, new) = (self.publish.user(before), self.publish.user(after));
        self.updated(
            EventType::UserUpdated,
            after.id.as_str(),
            after.updated_at,
            &old,
            new,
        )
    }

    /// `user.deleted`, with the user's last state.
    pub fn user_deleted(&self, last: &User, at: Timestamp) -> NewEvent {
        let object = self.publish.user(last);
        self.event(EventType::UserDeleted, last.id.as_str(), at, object)
    }

    /// `user.password_changed` (D19 continued), the user as they are.
    pub fn user_password_changed(&self, u: &User, at: Timestamp) -> NewEvent {
        let object = self.publish.user(u);
        self.event(EventType::UserPasswordChanged, u.id.as_str(), at, object)
    }

    /// `user.signed_in` (D54, D57): the session just begun; the actor is
    /// the person, through `client`, the application signed in to.
    pub fn user_signed_in(&self, s: &crate::session::Session, client: &ClientId) -> NewEvent {
        let origin = Origin {
            actor: Actor::User {
                user: s.user.clone(),
                client: Some(client.clone()),
            },
            request: self.origin.request.clone(),
        };
        let object = self.publish.session(s);
        NewEvent::new(
            EventType::UserSignedIn,
            s.user.as_str(),
            s.created_at,
            &origin,
            object,
        )
    }

    /// `session.revoked` at `at` (D54, D57): a session ended explicitly,
    /// as it was.
    pub fn session_revoked(&self, s: &crate::session::Session, at: Timestamp) -> NewEvent {
        let object = self.publish.session(s);
        self.event(EventType::SessionRevoked, s.user.as_str(), at, object)
    }

    /// `user.mfa_enrolled` (D56): `f` of `user`, at its creation.
    pub fn user_mfa_enrolled(&self, user: &UserId, f: &crate::mfa::Factor) -> NewEvent {
        let object = self.publish.factor(user, f);
        self.event(
            EventType::UserMfaEnrolled,
            user.as_str(),
            f.created_at,
            object,
        )
    }

    /// `user.mfa_removed` (D56): `f` of `user`, as it was, at `at`.
    pub fn user_mfa_removed(
        &self,
        user: &UserId,
        f: &crate::mfa::Factor,
        at: Timestamp,
    ) -> NewEvent {
        let object = self.publish.factor(user, f);
        self.event(EventType::UserMfaRemoved, user.as_str(), at, object)
    }

    /// `organization.security_updated` (D56): the policy as it is now;
    /// `previous_attributes` what changed.
    pub fn organization_security_updated(
        &self,
        org: &crate::OrgId,
        before: &crate::mfa::SecurityPolicy,
        after: &crate::mfa::SecurityPolicy,
    ) -> NewEvent {
        let (old, new) = (self.publish.security(before), self.publish.security(after));
        self.updated(
            EventType::OrganizationSecurityUpdated,
            org.as_str(),
            after.updated_at,
            &old,
            new,
        )
    }

    /// `application.created`.
    pub fn application_created(&self, c: &Client) -> NewEvent {
        let object = self.publish.application(c);
        self.event(
            EventType::ApplicationCreated,
            c.id.as_str(),
            c.created_at,
            object,
        )
    }

    /// `application.updated` at `at`; `None` when the published
    /// application is the same before and after (nothing a client sees
    /// changed, so nothing is told).
    pub fn application_updated(
        &self,
        before: &Client,
        after: &Client,
        at: Timestamp,
    ) -> Option<NewEvent> {
        let (old, new) = (
            self.publish.application(before),
            self.publish.application(after),
        );
        // Nothing shown changed (say, a suspension that stays): nothing told.
        (old != new).then(|| {
            self.updated(
                EventType::ApplicationUpdated,
                after.id.as_str(),
                at,
                &old,
                new,
            )
        })
    }

    /// `application.deleted`, with the application's last state.
    pub fn application_deleted(&self, last: &Client, at: Timestamp) -> NewEvent {
        let object = self.publish.application(last);
        self.event(EventType::ApplicationDeleted, last.id.as_str(), at, object)
    }

    /// `application.secret_rotated`, the application after the rotation
    /// (never the secret).
    pub fn application_secret_rotated(&self, c: &Client, at: Timestamp) -> NewEvent {
        let object = self.publish.application(c);
        self.event(
            EventType::ApplicationSecretRotated,
            c.id.as_str(),
            at,
            object,
        )
    }

    /// `api_key.created` (the record, never the key).
    pub fn api_key_created(&self, k: &ApiKey) -> NewEvent {
        let object = self.publish.api_key(k);
        self.event(
            EventType::ApiKeyCreated,
            k.id.as_str(),
            k.created_at,
            object,
        )
    }

    /// `api_key.revoked` at `at`, the record as revoked.
    pub fn api_key_revoked(&self, k: &ApiKey, at: Timestamp) -> NewEvent {
        let object = self.publish.api_key(k);
        self.event(EventType::ApiKeyRevoked, k.id.as_str(), at, object)
    }

    /// `consent.revoked` at `at`: the consent `user` gave `client`, as it
    /// was.
    pub fn consent_revoked(
        &self,
        user: &UserId,
        consent: &Consent,
        client: &Client,
        at: Timestamp,
    ) -> NewEvent {
        let object = self.publish.consent(user, consent, client);
        self.event(EventType::ConsentRevoked, user.as_str(), at, object)
    }

    /// `refresh_token.reuse_detected` at `at` (D24, D26): the chain of
    /// `user` with `client` (begun in the browser session `sid`, if any)
    /// was revoked because `trigger` was used again.
    pub fn reuse_detected(
        &self,
        user: &UserId,
        client: &ClientId,
        sid: Option<&str>,
        trigger: ReuseTrigger,
        at: Timestamp,
    ) -> NewEvent {
        let object = serde_json::json!({
            "user_id": user.as_str(),
            "client_id": client.as_str(),
            "sid": sid,
            "trigger": trigger.as_str(),
        })
        .to_string();
        self.event(
            EventType::RefreshTokenReuseDetected,
            user.as_str(),
            at,
            object,
        )
    }

    /// `webhook_endpoint.created` (D55; never the secret).
    pub fn webhook_endpoint_created(&self, e: &Endpoint) -> NewEvent {
        let object = self.publish.webhook_endpoint(e);
        self.event(
            EventType::WebhookEndpointCreated,
            e.id.as_str(),
            e.created_at,
            object,
        )
    }

    /// `webhook_endpoint.updated` at the endpoint's `updated_at`, with the
    /// old values of what changed (D54). A change that leaves the endpoint
    /// `disabled` by the caller (`manual`) is `updated`, not `disabled`:
    /// `webhook_endpoint.disabled` is the service's (D55).
    pub fn webhook_endpoint_updated(&self, before: &Endpoint, after: &Endpoint) -> NewEvent {
        let (old, new) = (
            self.publish.webhook_endpoint(before),
            self.publish.webhook_endpoint(after),
        );
        self.updated(
            EventType::WebhookEndpointUpdated,
            after.id.as_str(),
            after.updated_at,
            &old,
            new,
        )
    }

    /// `webhook_endpoint.deleted`, with the endpoint's last state.
    pub fn webhook_endpoint_deleted(&self, last: &Endpoint, at: Timestamp) -> NewEvent {
        let object = self.publish.webhook_endpoint(last);
        self.event(
            EventType::WebhookEndpointDeleted,
            last.id.as_str(),
            at,
            object,
        )
    }

    /// `webhook_endpoint.disabled` (D55): the service disabled the endpoint
    /// (`owner_removed`, `gone`, `failing`); the endpoint as disabled.
    pub fn webhook_endpoint_disabled(&self, e: &Endpoint) -> NewEvent {
        let object = self.publish.webhook_endpoint(e);
        self.event(
            EventType::WebhookEndpointDisabled,
            e.id.as_str(),
            e.updated_at,
            object,
        )
    }

    /// `webhook_endpoint.test` (D55): never stored in `/v1/events`, never
    /// sequenced; sent only to the endpoint under test.
    pub fn webhook_endpoint_test(&self, e: &Endpoint, at: Timestamp) -> NewEvent {
        let object = self.publish.webhook_endpoint(e);
        self.event(EventType::WebhookEndpointTest, e.id.as_str(), at, object)
    }

    /// `audit.checkpoint` (D58): a chain's signed checkpoint, as
    /// `GET /v1/audit-logs/checkpoints` lists it; the object is the
    /// organization's, told by Gatehouse.
    pub fn audit_checkpoint(
        &self,
        org: &crate::OrgId,
        category: &str,
        sequence: u64,
        hash: &str,
        signed_at: Timestamp,
        jws: &str,
    ) -> NewEvent {
        let object = serde_json::json!({
            "org": org.as_str(),
            "category": category,
            "sequence": sequence,
            "hash": hash,
            "signed_at": signed_at.to_rfc3339(),
            "jws": jws,
        })
        .to_string();
        self.event(EventType::AuditCheckpoint, org.as_str(), signed_at, object)
    }

    /// `organization.updated` (issue 32: `gatehouse org rename`, `org
    /// plan`): the organization as it is now; `previous_attributes` what
    /// changed.
    pub fn organization_updated(
        &self,
        before: &Organization,
        after: &Organization,
        at: Timestamp,
    ) -> NewEvent {
        let (old, new) = (
            self.publish.organization(before),
            self.publish.organization(after),
        );
        self.updated(
            EventType::OrganizationUpdated,
            after.id.as_str(),
            at,
            &old,
            new,
        )
    }

    /// `staging.reset` (D33 continued): the organization after the reset,
    /// one event that tells mirrors to resynchronize.
    pub fn staging_reset(&self, o: &Organization, at: Timestamp) -> NewEvent {
        let object = self.publish.organization(o);
        self.event(EventType::StagingReset, o.id.as_str(), at, object)
    }
}

/// D54's `previous_attributes`: of two renderings of one object, the old
/// values of the fields whose values differ, as a JSON object.
pub fn previous_attributes(old: &str, new: &str) -> String {
    use serde_json::{Map, Value};
    let parse = |s: &str| match serde_json::from_str::<Value>(s) {
        Ok(Value::Object(m)) => m,
        _ => Map::new(),
    };
    let (old, new) = (parse(old), parse(new));
    let changed: Map<String, Value> = old
        .into_iter()
        .filter(|(k, v)| new.get(k) != Some(v))
        .collect();
    Value::Object(changed).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn d54_every_type_parses_back_and_has_an_object_prefix() {
        for t in EventType::ALL {
            assert_eq!(EventType::parse(t.as_str()), Some(*t));
            assert!(t.as_str().contains('.'), "{}", t.as_str());
        }
        assert_eq!(EventType::parse("user.exploded"), None);
    }

    #[test]
    fn d54_patterns_match_exactly_a_prefix_or_everything() {
        let all = TypePattern::parse("*").unwrap();
        assert_eq!(all.types().len(), EventType::ALL.len());
        let users = TypePattern::parse("user.*").unwrap();
        assert!(users.matches(EventType::UserCreated));
        assert!(users.matches(EventType::UserPasswordChanged));
        assert!(!users.matches(EventType::ProductCreated));
        let one = TypePattern::parse("product.updated").unwrap();
        assert_eq!(one.types(), vec![EventType::ProductUpdated]);
        // A pattern that matches nothing is an error, not an empty filter.
        assert!(TypePattern::parse("usr.*").is_err());
        assert!(TypePattern::parse("user*").is_err());
        assert!(TypePattern::parse("user.").is_err());
        assert!(TypePattern::parse("").is_err());
    }

    #[test]
    fn d54_previous_attributes_hold_the_old_values_of_changed_fields_only() {
        let old = r#"{"id":"prod_1","name":"A","price":100,"stock":0,"status":"out_of_stock"}"#;
        let new = r#"{"id":"prod_1","name":"A","price":100,"stock":5,"status":"available"}"#;
        let prev: serde_json::Value = serde_json::from_str(&previous_attributes(old, new)).unwrap();
        assert_eq!(
            prev,
            serde_json::json!({"stock": 0, "status": "out_of_stock"})
        );
        assert_eq!(previous_attributes(new, new), "{}");
    }

    #[test]
    fn d54_actor_shapes() {
        let u = UserId::generate();
        let c = ClientId::generate();
        let a = Actor::User {
            user: u.clone(),
            client: Some(c.clone()),
        };
        assert_eq!(
            (a.kind(), a.id(), a.client_id()),
            ("user", Some(u.as_str()), Some(c.as_str()))
        );
        let a = Actor::Client(c.clone());
        assert_eq!(
            (a.kind(), a.id(), a.client_id()),
            ("client", Some(c.as_str()), Some(c.as_str()))
        );
        let k = ApiKeyId::generate();
        let a = Actor::ApiKey(k.clone());
        assert_eq!(
            (a.kind(), a.id(), a.client_id()),
            ("api_key", Some(k.as_str()), None)
        );
        assert_eq!(Actor::Operator.id(), None);
        assert_eq!(Actor::System.client_id(), None);
    }
}
