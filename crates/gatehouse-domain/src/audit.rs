//! D58: the audit log's entries as rules, without storage or cryptography.
//!
//! An entry is what an organization's admins read at `GET /v1/audit-logs`
//! and in exports. Its JSON is built here, once, in the shape the API
//! returns, and the chain hashes exactly that JSON (without `hash`) in RFC
//! 8785 canonical form: `chain_preimage` gives the bytes SHA-256 runs over
//! (the digest is `gatehouse_auth`'s, since this crate has no
//! cryptography).
//!
//! Secrets cannot be written: `changes` holds only the allow-listed fields
//! of each target type (`changes_allowed`), and `details` only its four
//! named members.
//!
//! Every change that tells an event (D54) records its entry beside it, in
//! the same transaction and with the same actor and request
//! ([`of_event`]): the backends write both where they write events, so no
//! write can tell one without the other.

use serde_json::{Map, Value, json};

use crate::event::{Actor, EventType, NewEvent, RequestRef};
use crate::{AuditId, Timestamp};

/// The two chains of an organization (D58).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Category {
    Admin,
    Security,
}

impl Category {
    pub const ALL: [Category; 2] = [Category::Admin, Category::Security];

    pub fn as_str(self) -> &'static str {
        match self {
            Category::Admin => "admin",
            Category::Security => "security",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Category::ALL.into_iter().find(|c| c.as_str() == s)
    }
}

/// Whether the action happened or was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Success,
    Failure,
}

impl Outcome {
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "success" => Some(Outcome::Success),
            "failure" => Some(Outcome::Failure),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Success => "success",
            Outcome::Failure => "failure",
        }
    }
}

/// D58: why a sign-in failed (`user.sign_in_failed`'s `reason`), which
/// every holder of `audit:read` reads (the page answers the same for all).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SignInFailure {
    BadCredentials,
    UnknownAccount,
    Throttled,
    Inactive,
    MfaFailed,
    MfaThrottled,
    EnrollmentRequired,
    /// A passkey whose counter did not increase (D56).
    SignCount,
}

impl SignInFailure {
    pub fn as_str(self) -> &'static str {
        match self {
            SignInFailure::BadCredentials => "bad_credentials",
            SignInFailure::UnknownAccount => "unknown_account",
            SignInFailure::Throttled => "throttled",
            SignInFailure::Inactive => "inactive",
            SignInFailure::MfaFailed => "mfa_failed",
            SignInFailure::MfaThrottled => "mfa_throttled",
            SignInFailure::EnrollmentRequired => "enrollment_required",
            SignInFailure::SignCount => "sign_count",
        }
    }
}

/// `target.type` (D58).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TargetType {
    User,
    Product,
    Application,
    ApiKey,
    WebhookEndpoint,
    Session,
    Organization,
    Token,
}

impl TargetType {
    pub fn as_str(self) -> &'static str {
        match self {
            TargetType::User => "user",
            TargetType::Product => "product",
            TargetType::Application => "application",
            TargetType::ApiKey => "api_key",
            TargetType::WebhookEndpoint => "webhook_endpoint",
            TargetType::Session => "session",
            TargetType::Organization => "organization",
            TargetType::Token => "token",
        }
    }
}

/// D58's allow-list: the fields whose `from` and `to` an entry may show,
/// per target type. Secrets, hashes and tokens are never among them.
pub fn changes_allowed(target: TargetType) -> &'static [&'static str] {
    match target {
        TargetType::User => &["email", "name", "role", "status"],
        TargetType::Product => &["name", "sku", "price", "stock", "status"],
        TargetType::Application => &[
            "name",
            "scopes",
            "redirect_uris",
            "post_logout_redirect_uris",
            "admin_approved",
            "owner_id",
        ],
        TargetType::ApiKey => &["name", "scopes", "expires_at", "owner_id"],
        TargetType::WebhookEndpoint => {
            &["url", "event_types", "enabled", "description", "owner_id"]
        }
        TargetType::Organization => &["name", "plan", "limits", "mfa", "enrollment_grace_days"],
        TargetType::Session | TargetType::Token => &[],
    }
}

/// One changed field.
#[derive(Clone, Debug, PartialEq)]
pub struct Change {
    pub field: &'static str,
    pub from: Value,
    pub to: Value,
}

/// `details`' four allowed members (D58).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Details {
    pub grant_type: Option<String>,
    pub scope: Option<String>,
    pub client_id: Option<String>,
    /// HMAC-SHA256 of a typed address with no account, under the
    /// organization's key (hex); never the address.
    pub identifier_digest: Option<String>,
}

impl Details {
    fn to_json(&self) -> Value {
        let mut m = Map::new();
        for (k, v) in [
            ("grant_type", &self.grant_type),
            ("scope", &self.scope),
            ("client_id", &self.client_id),
            ("identifier_digest", &self.identifier_digest),
        ] {
            if let Some(v) = v {
                m.insert(k.to_owned(), Value::String(v.clone()));
            }
        }
        if m.is_empty() {
            Value::Null
        } else {
            Value::Object(m)
        }
    }
}

/// Why a change list was refused: a field outside the allow-list.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error("`{field}` of a {target} is not an audited field")]
pub struct NotAudited {
    pub target: &'static str,
    pub field: &'static str,
}

// A JSON value is never NaN (serde_json has no NaN), so equality is total.
impl Eq for Change {}

/// An entry before it is sealed (no `sequence`, no `hash` yet).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub id: String,
    pub category: Category,
    pub created_at: Timestamp,
    pub action: String,
    pub outcome: Outcome,
    pub reason: Option<String>,
    /// `None`: `anonymous` (a sign-in that named no account).
    pub actor: Option<Actor>,
    pub source_ip: Option<String>,
    pub source_user_agent: Option<String>,
    pub target: Option<(TargetType, String)>,
    pub request: Option<RequestRef>,
    changes: Vec<Change>,
    pub details: Details,
}

impl Entry {
    /// An entry with no changes and no details.
    pub fn new(
        id: String,
        category: Category,
        created_at: Timestamp,
        action: impl Into<String>,
        outcome: Outcome,
    ) -> Self {
        Self {
            id,
            category,
            created_at,
            action: action.into(),
            outcome,
            reason: None,
            actor: None,
            source_ip: None,
            source_user_agent: None,
            target: None,
            request: None,
            changes: Vec::new(),
            details: Details::default(),
        }
    }

    /// Sets `source` and `request` from the request the action came
    /// through (D58: for a dashboard action, the browser's).
    pub fn through(mut self, request: Option<&RequestRef>) -> Self {
        if let Some(source) = request.and_then(|r| r.source.as_ref()) {
            self.source_ip = Some(source.ip.clone());
            self.source_user_agent = source.user_agent.clone();
        }
        self.request = request.cloned();
        self
    }

    /// Sets `changes`; refused when a field is not on the target's
    /// allow-list (so a secret can never be written by mistake).
    pub fn with_changes(mut self, changes: Vec<Change>) -> Result<Self, NotAudited> {
        let target = self.target.as_ref().map(|(t, _)| *t);
        for c in &changes {
            let allowed = target.is_some_and(|t| changes_allowed(t).contains(&c.field));
            if !allowed {
                return Err(NotAudited {
                    target: target.map_or("target-less entry", TargetType::as_str),
                    field: c.field,
                });
            }
        }
        self.changes = changes;
        Ok(self)
    }

    pub fn changes(&self) -> &[Change] {
        &self.changes
    }

    /// What storage keeps of the entry: its JSON as the API shows it,
    /// without `sequence` and `hash` (given when it is sealed).
    pub fn body(&self) -> String {
        let mut v = self.to_json(0);
        if let Value::Object(m) = &mut v {
            m.remove("sequence");
        }
        v.to_string()
    }

    /// The entry as the API returns it once sealed with `sequence`,
    /// without `hash`: what the chain hashes.
    pub fn to_json(&self, sequence: u64) -> Value {
        let actor = match &self.actor {
            Some(a) => json!({"type": a.kind(), "id": a.id(), "client_id": a.client_id()}),
            None => json!({"type": "anonymous", "id": null, "client_id": null}),
        };
        let changes = if self.changes.is_empty() {
            Value::Null
        } else {
            let mut m = Map::new();
            for c in &self.changes {
                m.insert(c.field.to_owned(), json!({"from": c.from, "to": c.to}));
            }
            Value::Object(m)
        };
        json!({
            "id": self.id,
            "category": self.category.as_str(),
            "sequence": sequence,
            "created_at": self.created_at.to_rfc3339(),
            "action": self.action,
            "outcome": self.outcome.as_str(),
            "reason": self.reason,
            "actor": actor,
            "source": {"ip": self.source_ip, "user_agent": self.source_user_agent},
            "target": self.target.as_ref().map(|(t, id)| json!({"type": t.as_str(), "id": id})),
            "request": self.request.as_ref().map(|r| json!({"id": r.id, "idempotency_key": r.idempotency_key})),
            "changes": changes,
            "details": self.details.to_json(),
        })
    }
}

/// The security actions among the events (D58: category `security`
/// however they arise); every other event's entry is `admin`.
pub fn category_of(kind: EventType) -> Category {
    use EventType as T;
    match kind {
        T::UserSignedIn
        | T::SessionRevoked
        | T::UserMfaEnrolled
        | T::UserMfaRemoved
        | T::UserPasswordChanged
        | T::ConsentRevoked
        | T::RefreshTokenReuseDetected => Category::Security,
        _ => Category::Admin,
    }
}

/// D58's `action` for an event: its type, except the test event a
/// `POST /v1/webhook-endpoints/{id}/test` sends, recorded as the POST
/// (`webhook_endpoint.tested`).
pub fn action_of(kind: EventType) -> &'static str {
    match kind {
        EventType::WebhookEndpointTest => "webhook_endpoint.tested",
        k => k.as_str(),
    }
}

/// The entry that records the change `e` tells (D58), in its transaction:
/// same actor, request and time; the target its object; `changes` the
/// allow-listed fields that changed (all of them, from null, for a
/// creation; to null for a deletion), never anything else of the object.
/// `None` for `audit.checkpoint`: the log's own checkpoints are not
/// entries of it (each would call for the next).
pub fn of_event(e: &NewEvent) -> Option<Entry> {
    if e.kind == EventType::AuditCheckpoint {
        return None;
    }
    use EventType as T;
    let object: Value = serde_json::from_str(&e.object).unwrap_or(Value::Null);
    let field = |name: &str| object.get(name).and_then(Value::as_str).map(str::to_owned);
    let target_type = match e.kind {
        T::SessionRevoked => TargetType::Session,
        T::ProductCreated | T::ProductUpdated | T::ProductDeleted => TargetType::Product,
        T::ApplicationCreated
        | T::ApplicationUpdated
        | T::ApplicationDeleted
        | T::ApplicationSecretRotated => TargetType::Application,
        T::ApiKeyCreated | T::ApiKeyRevoked => TargetType::ApiKey,
        T::OrganizationUpdated
        | T::OrganizationSecurityUpdated
        | T::StagingReset
        | T::AuditCheckpoint => TargetType::Organization,
        T::WebhookEndpointCreated
        | T::WebhookEndpointUpdated
        | T::WebhookEndpointDeleted
        | T::WebhookEndpointDisabled
        | T::WebhookEndpointTest => TargetType::WebhookEndpoint,
        T::UserCreated
        | T::UserUpdated
        | T::UserDeleted
        | T::UserInvited
        | T::UserPasswordChanged
        | T::UserSignedIn
        | T::UserMfaEnrolled
        | T::UserMfaRemoved
        | T::ConsentRevoked
        | T::RefreshTokenReuseDetected => TargetType::User,
    };
    let target_id = match e.kind {
        // The session itself; its object names it.
        T::SessionRevoked => field("id").unwrap_or_else(|| e.object_id.clone()),
        _ => e.object_id.clone(),
    };
    let entry = Entry::new(
        AuditId::generate_at(e.created_at).into_string(),
        category_of(e.kind),
        e.created_at,
        action_of(e.kind),
        Outcome::Success,
    );
    let mut entry = entry.through(e.origin.request.as_ref());
    entry.actor = Some(e.origin.actor.clone());
    entry.target = Some((target_type, target_id));
    if matches!(
        e.kind,
        T::ConsentRevoked | T::RefreshTokenReuseDetected | T::UserSignedIn
    ) {
        entry.details.client_id = field("client_id");
    }
    let allowed = changes_allowed(target_type);
    let previous: Option<Value> = e
        .previous
        .as_deref()
        .and_then(|p| serde_json::from_str(p).ok());
    let created = e.kind.as_str().ends_with(".created");
    let deleted = e.kind.as_str().ends_with(".deleted");
    let mut changes = Vec::new();
    for name in allowed {
        let now = object.get(*name).cloned().unwrap_or(Value::Null);
        let change = match &previous {
            Some(Value::Object(old)) => old.get(*name).map(|from| Change {
                field: name,
                from: from.clone(),
                to: now,
            }),
            _ if created && !now.is_null() => Some(Change {
                field: name,
                from: Value::Null,
                to: now,
            }),
            _ if deleted && !now.is_null() => Some(Change {
                field: name,
                from: now,
                to: Value::Null,
            }),
            _ => None,
        };
        changes.extend(change);
    }
    // Every field is from the target's own allow-list.
    entry.changes = changes;
    Some(entry)
}

/// What a `/v1` write names (D58): the action it records, refused or not,
/// and its target.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WriteRoute {
    pub action: &'static str,
    pub target: Option<TargetType>,
    /// Whether a success tells an event (whose entry records it); a POST
    /// that changes no catalog resource records its own success.
    pub tells_event: bool,
}

/// The `/v1` writes by method and route template (paths relative to
/// `/v1`), with the action each records (D58: the D54 event type of the
/// change it made or would have made to the resource the request named;
/// `<resource>.<verb>` for a POST that changes none). `None`: not a write
/// the audit log records.
pub fn write_route(method: &str, route: &str) -> Option<WriteRoute> {
    use TargetType as T;
    let route = route.strip_prefix("/v1").unwrap_or(route);
    let w = |action, target| {
        Some(WriteRoute {
            action,
            target,
            tells_event: true,
        })
    };
    let call = |action, target| {
        Some(WriteRoute {
            action,
            target,
            tells_event: false,
        })
    };
    match (method, route) {
        ("POST", "/users") => w("user.created", Some(T::User)),
        ("PATCH", "/users/{user_id}") => w("user.updated", Some(T::User)),
        ("DELETE", "/users/{user_id}") => w("user.deleted", Some(T::User)),
        ("POST", "/users/{user_id}/invitation") => w("user.invited", Some(T::User)),
        ("DELETE", "/users/{user_id}/mfa") => w("user.mfa_removed", Some(T::User)),
        ("DELETE", "/users/{user_id}/sessions") => w("session.revoked", Some(T::User)),
        ("DELETE", "/users/{user_id}/sessions/{session_id}") => {
            w("session.revoked", Some(T::Session))
        }
        ("PATCH", "/me") => w("user.updated", Some(T::User)),
        ("POST", "/me/sessions/revoke-others") => w("session.revoked", Some(T::User)),
        ("DELETE", "/me/sessions/{session_id}") => w("session.revoked", Some(T::Session)),
        ("DELETE", "/me/applications/{app_id}") => w("consent.revoked", Some(T::Application)),
        ("PATCH", "/organization/security") => {
            w("organization.security_updated", Some(T::Organization))
        }
        ("POST", "/products") => w("product.created", Some(T::Product)),
        ("PATCH", "/products/{product_id}") => w("product.updated", Some(T::Product)),
        ("DELETE", "/products/{product_id}") => w("product.deleted", Some(T::Product)),
        ("POST", "/applications") => w("application.created", Some(T::Application)),
        ("PATCH", "/applications/{app_id}") => w("application.updated", Some(T::Application)),
        ("DELETE", "/applications/{app_id}") => w("application.deleted", Some(T::Application)),
        ("POST", "/applications/{app_id}/secret") => {
            w("application.secret_rotated", Some(T::Application))
        }
        ("POST", "/api-keys") => w("api_key.created", Some(T::ApiKey)),
        ("DELETE", "/api-keys/{key_id}") => w("api_key.revoked", Some(T::ApiKey)),
        ("POST", "/webhook-endpoints") => w("webhook_endpoint.created", Some(T::WebhookEndpoint)),
        ("PATCH", "/webhook-endpoints/{endpoint_id}") => {
            w("webhook_endpoint.updated", Some(T::WebhookEndpoint))
        }
        ("DELETE", "/webhook-endpoints/{endpoint_id}") => {
            w("webhook_endpoint.deleted", Some(T::WebhookEndpoint))
        }
        ("POST", "/webhook-endpoints/{endpoint_id}/secret") => {
            w("webhook_endpoint.updated", Some(T::WebhookEndpoint))
        }
        ("POST", "/webhook-endpoints/{endpoint_id}/test") => {
            call("webhook_endpoint.tested", Some(T::WebhookEndpoint))
        }
        ("POST", "/webhook-endpoints/{endpoint_id}/replay") => {
            call("webhook_endpoint.replayed", Some(T::WebhookEndpoint))
        }
        ("POST", "/events/{event_id}/redeliver") => call("event.redelivered", None),
        _ => None,
    }
}

/// The id a route's path names for its target: the value of the route's
/// last `{…}` segment (`/users/{user_id}/sessions/{session_id}` names the
/// session), or `None`.
pub fn target_id_of(route: &str, path: &str) -> Option<String> {
    let route = route.strip_prefix("/v1").unwrap_or(route);
    let path = path.strip_prefix("/v1").unwrap_or(path);
    route
        .split('/')
        .zip(path.split('/'))
        .filter(|(r, _)| r.starts_with('{') && r.ends_with('}'))
        .map(|(_, p)| p.to_owned())
        .last()
}

/// The entry of a `/v1` write that was refused with `reason` (a D6 code,
/// D58: in its own transaction after the refusal), or of a POST that
/// changes no catalog resource (`reason` `None`: a success).
pub fn of_write(
    route: &WriteRoute,
    target_id: Option<String>,
    reason: Option<&str>,
    origin: &crate::event::Origin,
    at: Timestamp,
) -> Entry {
    let outcome = if reason.is_some() {
        Outcome::Failure
    } else {
        Outcome::Success
    };
    let e = Entry::new(
        AuditId::generate_at(at).into_string(),
        Category::Admin,
        at,
        route.action,
        outcome,
    );
    let mut e = e.through(origin.request.as_ref());
    e.reason = reason.map(str::to_owned);
    e.actor = Some(origin.actor.clone());
    e.target = match (route.target, target_id) {
        (Some(t), Some(id)) => Some((t, id)),
        _ => None,
    };
    e
}

/// The entry of an export (D58: `audit_log.exported`, admin, itself
/// audited).
pub fn of_export(origin: &crate::event::Origin, at: Timestamp) -> Entry {
    let route = WriteRoute {
        action: "audit_log.exported",
        target: None,
        tells_event: false,
    };
    of_write(&route, None, None, origin, at)
}

/// D58: a failed sign-in (`user.sign_in_failed`, security), by whoever
/// typed (`anonymous`), about `user` when the address named an account of
/// the organization, or with `identifier_digest` (never the address) when
/// it named none; `client` the application signed in to.
pub fn sign_in_failed(
    reason: SignInFailure,
    user: Option<&crate::UserId>,
    identifier_digest: Option<String>,
    client: Option<&crate::ClientId>,
    request: Option<&RequestRef>,
    at: Timestamp,
) -> Entry {
    let mut e = Entry::new(
        AuditId::generate_at(at).into_string(),
        Category::Security,
        at,
        "user.sign_in_failed",
        Outcome::Failure,
    )
    .through(request);
    e.reason = Some(reason.as_str().to_owned());
    e.target = user.map(|u| (TargetType::User, u.as_str().to_owned()));
    e.details.identifier_digest = identifier_digest;
    e.details.client_id = client.map(|c| c.as_str().to_owned());
    e
}

/// D58: a password-reset e-mail was sent for `user` (security), at the
/// request of whoever asked (`anonymous`: the form needs no sign-in).
pub fn reset_requested(user: &crate::UserId, request: Option<&RequestRef>, at: Timestamp) -> Entry {
    security(
        "user.password_reset_requested",
        None,
        Some((TargetType::User, user.as_str().to_owned())),
        request,
        at,
    )
}

/// A security action's entry (D58: category `security`, `success`) by
/// `actor` (`None`: anonymous) on `target`, made through `request`.
pub fn security(
    action: &'static str,
    actor: Option<Actor>,
    target: Option<(TargetType, String)>,
    request: Option<&RequestRef>,
    at: Timestamp,
) -> Entry {
    let mut e = Entry::new(
        AuditId::generate_at(at).into_string(),
        Category::Security,
        at,
        action,
        Outcome::Success,
    )
    .through(request);
    e.actor = actor;
    e.target = target;
    e
}

/// D58: `token.issued` for a person's token (`authorization_code` or
/// `refresh_token`): the person through `client` as actor, the access
/// token's `jti` as target (an id, not the token), the grant and scope.
pub fn token_issued(
    user: &crate::UserId,
    client: &crate::ClientId,
    jti: &str,
    grant_type: &'static str,
    scope: &str,
    request: Option<&RequestRef>,
    at: Timestamp,
) -> Entry {
    let mut e = security(
        "token.issued",
        Some(Actor::User {
            user: user.clone(),
            client: Some(client.clone()),
        }),
        Some((TargetType::Token, jti.to_owned())),
        request,
        at,
    );
    e.details.grant_type = Some(grant_type.to_owned());
    e.details.scope = Some(scope.to_owned());
    e.details.client_id = Some(client.as_str().to_owned());
    e
}

/// What a machine credential's first use in a period names (D58's
/// `credential.used`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum MachineCredential {
    /// An application's client credentials (a token was issued).
    Client(crate::ClientId),
    /// An API key (a request was made with it).
    ApiKey(crate::ApiKeyId),
}

impl MachineCredential {
    /// The credential's id.
    pub fn id(&self) -> &str {
        match self {
            MachineCredential::Client(c) => c.as_str(),
            MachineCredential::ApiKey(k) => k.as_str(),
        }
    }
}

/// D58: `credential.used`, the first use of a machine credential in a
/// period (or the first from a new address in it): the credential is both
/// actor and target; for client credentials, `details` the grant and scope.
pub fn credential_used(
    credential: &MachineCredential,
    scope: Option<&str>,
    request: Option<&RequestRef>,
    at: Timestamp,
) -> Entry {
    let (actor, target) = match credential {
        MachineCredential::Client(c) => (
            Actor::Client(c.clone()),
            (TargetType::Application, c.as_str().to_owned()),
        ),
        MachineCredential::ApiKey(k) => (
            Actor::ApiKey(k.clone()),
            (TargetType::ApiKey, k.as_str().to_owned()),
        ),
    };
    let mut e = security("credential.used", Some(actor), Some(target), request, at);
    if let MachineCredential::Client(c) = credential {
        e.details.grant_type = Some("client_credentials".to_owned());
        e.details.client_id = Some(c.as_str().to_owned());
        e.details.scope = scope.map(str::to_owned);
    }
    e
}

/// D58: `token.introspected` by `caller` (a client): the token's `jti` as
/// target when it was active, and the client it was issued to in
/// `details.client_id`.
pub fn introspected(
    caller: &crate::ClientId,
    jti: Option<&str>,
    token_client: Option<&str>,
    request: Option<&RequestRef>,
    at: Timestamp,
) -> Entry {
    let mut e = security(
        "token.introspected",
        Some(Actor::Client(caller.clone())),
        jti.map(|j| (TargetType::Token, j.to_owned())),
        request,
        at,
    );
    e.details.client_id = token_client.map(str::to_owned);
    e
}

/// A stored entry's JSON with its `sequence`: what the chain hashes.
pub fn sealed_json(body: &str, sequence: u64) -> Result<Value, ChainError> {
    let mut v: Value = serde_json::from_str(body).map_err(|_| ChainError::NotCanonical)?;
    match &mut v {
        Value::Object(m) => {
            m.insert("sequence".to_owned(), Value::from(sequence));
        }
        _ => return Err(ChainError::NotCanonical),
    }
    Ok(v)
}

/// The `prev` of a chain's first entry: 64 ASCII zeros.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// D58: the bytes an entry's `hash` is the SHA-256 of: `prev` (the
/// previous entry's `hash` in the same chain, 64 lowercase hex characters,
/// or [`GENESIS`]) followed by the RFC 8785 canonical JSON of `entry` (as
/// the API returns it, without `hash`).
pub fn chain_preimage(prev: &str, entry: &Value) -> Result<Vec<u8>, ChainError> {
    if prev.len() != 64
        || !prev
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    {
        return Err(ChainError::BadPrev);
    }
    if entry.get("hash").is_some() {
        return Err(ChainError::HashIncluded);
    }
    let jcs = serde_json_canonicalizer::to_vec(entry).map_err(|_| ChainError::NotCanonical)?;
    let mut out = Vec::with_capacity(64 + jcs.len());
    out.extend_from_slice(prev.as_bytes());
    out.extend_from_slice(&jcs);
    Ok(out)
}

#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum ChainError {
    #[error("`prev` is not 64 lowercase hex characters")]
    BadPrev,
    #[error("the entry still carries its `hash`")]
    HashIncluded,
    #[error("the entry has no RFC 8785 form (a number out of range)")]
    NotCanonical,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry() -> Entry {
        let mut e = Entry::new(
            "adt_1".into(),
            Category::Admin,
            Timestamp::from_millis(1_700_000_000_000),
            "user.updated",
            Outcome::Success,
        );
        e.actor = Some(Actor::Operator);
        e.target = Some((TargetType::User, "usr_1".into()));
        e
    }

    #[test]
    fn d58_changes_outside_the_allow_list_are_refused() {
        let refused = entry().with_changes(vec![Change {
            field: "password_hash",
            from: Value::Null,
            to: json!("x"),
        }]);
        assert_eq!(
            refused.unwrap_err(),
            NotAudited {
                target: "user",
                field: "password_hash"
            }
        );
        let ok = entry()
            .with_changes(vec![Change {
                field: "role",
                from: json!("editor"),
                to: json!("admin"),
            }])
            .unwrap();
        assert_eq!(
            ok.to_json(7)["changes"],
            json!({"role": {"from": "editor", "to": "admin"}})
        );
        for t in [
            TargetType::User,
            TargetType::Product,
            TargetType::Application,
            TargetType::ApiKey,
            TargetType::WebhookEndpoint,
            TargetType::Organization,
        ] {
            for f in changes_allowed(t) {
                assert!(
                    !f.contains("secret") && !f.contains("password") && !f.contains("token"),
                    "{f} of {}",
                    t.as_str()
                );
            }
        }
    }

    #[test]
    fn d58_the_entry_shows_every_member_and_anonymous_actors() {
        let mut e = entry();
        e.actor = None;
        e.details.identifier_digest = Some("ab".repeat(32));
        let v = e.to_json(1);
        for k in [
            "id",
            "category",
            "sequence",
            "created_at",
            "action",
            "outcome",
            "reason",
            "actor",
            "source",
            "target",
            "request",
            "changes",
            "details",
        ] {
            assert!(v.get(k).is_some(), "{k}");
        }
        assert!(v.get("hash").is_none());
        assert_eq!(v["actor"]["type"], "anonymous");
        assert_eq!(v["details"], json!({"identifier_digest": "ab".repeat(32)}));
    }

    #[test]
    fn d58_the_preimage_is_prev_then_rfc8785() {
        // RFC 8785 sorts members by their UTF-16 code units and writes
        // numbers in their shortest ECMAScript form.
        let v = json!({"b": 1.0, "a": [1e21, "\u{20ac}"], "é": true});
        let got = chain_preimage(GENESIS, &v).unwrap();
        let mut want = GENESIS.as_bytes().to_vec();
        want.extend_from_slice("{\"a\":[1e+21,\"€\"],\"b\":1,\"é\":true}".as_bytes());
        assert_eq!(got, want);
        assert_eq!(chain_preimage("x", &v), Err(ChainError::BadPrev));
        assert_eq!(
            chain_preimage(&"A".repeat(64), &v),
            Err(ChainError::BadPrev),
            "lowercase hex only"
        );
        assert_eq!(
            chain_preimage(GENESIS, &json!({"hash": "x"})),
            Err(ChainError::HashIncluded)
        );
    }
}
