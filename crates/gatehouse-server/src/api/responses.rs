//! The resources as the API shows them (interface.md §2), kept apart from
//! the domain types so that a field added to a domain type is not published
//! by accident. They borrow from the domain value they are made from.

use gatehouse_domain::{Product, ProductStatus, Role, Timestamp, User, UserStatus};
use serde::Serialize;
use utoipa::ToSchema;

use crate::http::schemas;

// interface.md §2.1.
/// A user of the organization.
#[derive(Serialize, ToSchema)]
#[schema(as = User)]
pub struct UserResponse<'a> {
    #[schema(value_type = String, pattern = "^usr_[A-Za-z0-9]+$")]
    pub id: &'a str,
    #[schema(value_type = String)]
    pub email: &'a str,
    #[schema(value_type = String)]
    pub name: &'a str,
    #[schema(schema_with = schemas::role)]
    pub role: Role,
    #[schema(schema_with = schemas::user_status)]
    pub status: UserStatus,
    #[schema(schema_with = schemas::timestamp)]
    pub created_at: Timestamp,
    #[schema(schema_with = schemas::timestamp)]
    pub updated_at: Timestamp,
}

impl<'a> From<&'a User> for UserResponse<'a> {
    fn from(u: &'a User) -> Self {
        Self {
            id: u.id.as_str(),
            email: u.email.as_str(),
            name: u.name.as_str(),
            role: u.role,
            status: u.status,
            created_at: u.created_at,
            updated_at: u.updated_at,
        }
    }
}

// interface.md §2.2; `updated_at` is kept for auditing, not shown.
/// A product of the catalog.
#[derive(Serialize, ToSchema)]
#[schema(as = Product)]
pub struct ProductResponse<'a> {
    #[schema(value_type = String, pattern = "^prod_[A-Za-z0-9]+$")]
    pub id: &'a str,
    #[schema(value_type = String)]
    pub name: &'a str,
    #[schema(value_type = String)]
    pub sku: &'a str,
    #[schema(minimum = 0, maximum = 9007199254740991_i64)]
    pub price: i64,
    #[schema(minimum = 0, maximum = 9007199254740991_i64)]
    pub stock: i64,
    #[schema(schema_with = schemas::product_status)]
    pub status: ProductStatus,
    #[schema(schema_with = schemas::timestamp)]
    pub created_at: Timestamp,
}

impl<'a> From<&'a Product> for ProductResponse<'a> {
    fn from(p: &'a Product) -> Self {
        Self {
            id: p.id.as_str(),
            name: p.name.as_str(),
            sku: p.sku.as_str(),
            price: p.price,
            stock: p.stock,
            status: p.status,
            created_at: p.created_at,
        }
    }
}

// D46.
/// A client application of the organization.
#[derive(Serialize, ToSchema)]
#[schema(as = Application)]
pub struct ApplicationResponse<'a> {
    /// Also its `client_id`.
    #[schema(value_type = String, pattern = "^app_[A-Za-z0-9]+$")]
    pub id: &'a str,
    #[schema(value_type = String)]
    pub name: &'a str,
    #[serde(rename = "type")]
    #[schema(schema_with = schemas::application_type)]
    pub kind: &'static str,
    #[schema(value_type = Vec<String>)]
    pub redirect_uris: &'a [String],
    #[schema(value_type = Vec<String>)]
    pub post_logout_redirect_uris: &'a [String],
    #[schema(schema_with = schemas::scope_list)]
    pub scopes: gatehouse_domain::ScopeSet,
    /// Whether the operator approved `admin` (`gatehouse client approve-admin`).
    pub admin_approved: bool,
    /// The person who registered it, or null (the operator or an
    /// organization-wide credential).
    #[schema(value_type = Option<String>, pattern = "^usr_[A-Za-z0-9]+$")]
    pub owner_id: Option<&'a str>,
    #[schema(schema_with = schemas::timestamp)]
    pub created_at: Timestamp,
    #[schema(schema_with = schemas::timestamp)]
    pub updated_at: Timestamp,
    /// D46 (revised): why it gets no token now, or null. `owner_inactive`:
    /// its owner is deactivated (lifted when they are active again or an
    /// admin moves it); `secret_rotation_required`: it was moved away from
    /// a deactivated or deleted owner and refuses its secret until it is
    /// rotated with no grace.
    #[schema(value_type = Option<String>)]
    pub suspended_reason: Option<&'static str>,
}

impl<'a> From<&'a gatehouse_domain::Client> for ApplicationResponse<'a> {
    fn from(c: &'a gatehouse_domain::Client) -> Self {
        Self {
            id: c.id.as_str(),
            name: &c.name,
            kind: gatehouse_app::manage::ApplicationType::of(c).as_str(),
            redirect_uris: &c.redirect_uris,
            post_logout_redirect_uris: &c.post_logout_redirect_uris,
            scopes: c.scopes,
            admin_approved: c.admin_approved,
            owner_id: c.owner.as_ref().map(|u| u.as_str()),
            created_at: c.created_at,
            updated_at: c.updated_at,
            suspended_reason: c.suspended_reason().map(|r| r.as_str()),
        }
    }
}

// D46.
/// A newly registered application with its secret, shown only in this
/// answer (confidential applications; a public one has none).
#[derive(Serialize, ToSchema)]
#[schema(as = NewApplicationSecret)]
pub struct RegisteredApplication<'a> {
    #[serde(flatten)]
    pub application: ApplicationResponse<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>)]
    pub client_secret: Option<&'a str>,
}

// D46, D20.
/// An application's new secret, shown only in this answer, and until when
/// the previous one keeps working (null: it stopped now).
#[derive(Serialize, ToSchema)]
#[schema(as = RotatedApplicationSecret)]
pub struct RotatedSecretResponse<'a> {
    #[serde(flatten)]
    pub application: ApplicationResponse<'a>,
    #[schema(value_type = String)]
    pub client_secret: &'a str,
    #[schema(value_type = Option<String>, format = DateTime)]
    pub previous_secret_expires_at: Option<Timestamp>,
}

// D46.
/// An API key of the organization (never the key itself, after creation).
#[derive(Serialize, ToSchema)]
#[schema(as = ApiKey)]
pub struct ApiKeyResponse<'a> {
    #[schema(value_type = String, pattern = "^key_[A-Za-z0-9]+$")]
    pub id: &'a str,
    #[schema(value_type = String)]
    pub name: &'a str,
    #[schema(schema_with = schemas::key_scope_list)]
    pub scopes: gatehouse_domain::ScopeSet,
    /// The key's first 12 characters, to recognise it by ("" for keys made
    /// before this was recorded).
    #[schema(value_type = String)]
    pub prefix: &'a str,
    #[schema(value_type = Option<String>, pattern = "^usr_[A-Za-z0-9]+$")]
    pub owner_id: Option<&'a str>,
    #[schema(value_type = Option<String>, format = DateTime)]
    pub expires_at: Option<Timestamp>,
    #[schema(schema_with = schemas::timestamp)]
    pub created_at: Timestamp,
    /// The minute of its last use (up to a few seconds behind).
    #[schema(value_type = Option<String>, format = DateTime)]
    pub last_used_at: Option<Timestamp>,
    #[schema(value_type = Option<String>, format = DateTime)]
    pub revoked_at: Option<Timestamp>,
}

impl<'a> From<&'a gatehouse_domain::ApiKey> for ApiKeyResponse<'a> {
    fn from(k: &'a gatehouse_domain::ApiKey) -> Self {
        Self {
            id: k.id.as_str(),
            name: &k.name,
            scopes: k.scopes,
            prefix: &k.prefix,
            owner_id: k.owner.as_ref().map(|u| u.as_str()),
            expires_at: k.expires_at,
            created_at: k.created_at,
            last_used_at: k.last_used_at,
            revoked_at: k.revoked_at,
        }
    }
}

// D46.
/// A new API key, shown only in this answer.
#[derive(Serialize, ToSchema)]
#[schema(as = NewApiKeySecret)]
pub struct CreatedApiKey<'a> {
    #[serde(flatten)]
    pub api_key: ApiKeyResponse<'a>,
    #[schema(value_type = String)]
    pub key: &'a str,
}

// D57.
/// A browser session: a sign-in and the applications that got refresh
/// tokens in it.
#[derive(Serialize, ToSchema)]
#[schema(as = Session)]
pub struct SessionResponse<'a> {
    /// `ses_…`: also the `sid` of the session's ID tokens (D49).
    #[schema(value_type = String, pattern = "^ses_[A-Za-z0-9]+$")]
    pub id: &'a str,
    /// The sign-in.
    #[schema(schema_with = schemas::timestamp)]
    pub created_at: Timestamp,
    /// The latest browser use or refresh of a chain begun in it (written
    /// at most once a minute).
    #[schema(schema_with = schemas::timestamp)]
    pub last_seen_at: Timestamp,
    /// The address of the latest browser use (the sign-in's until then).
    #[schema(value_type = Option<String>, required = true)]
    pub ip: Option<&'a str>,
    /// The `User-Agent` of the latest browser use.
    #[schema(value_type = Option<String>, required = true)]
    pub user_agent: Option<&'a str>,
    /// How the person signed in (RFC 8176): `pwd` for a password.
    #[schema(value_type = Vec<String>)]
    pub amr: &'a [String],
    /// The client ids with live refresh chains begun in the session.
    #[schema(value_type = Vec<String>)]
    pub applications: Vec<&'a str>,
    /// Whether the calling token acts in this session (its refresh chain
    /// began in it). Absent in events (D54).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = bool)]
    pub current: Option<bool>,
}

impl<'a> SessionResponse<'a> {
    /// The session with `current` as the list tells it (`None`: shown
    /// without `current`, as events show it).
    pub fn of(s: &'a gatehouse_domain::session::Session, current: Option<bool>) -> Self {
        Self {
            id: s.id.as_str(),
            created_at: s.created_at,
            last_seen_at: s.last_seen_at,
            ip: s.ip.as_deref(),
            user_agent: s.user_agent.as_deref(),
            amr: &s.amr,
            applications: s.applications.iter().map(|c| c.as_str()).collect(),
            current,
        }
    }
}

// D56.
/// A second factor of a person (never its secret).
#[derive(Serialize, ToSchema)]
#[schema(as = MfaFactor)]
pub struct FactorResponse<'a> {
    #[schema(value_type = String, pattern = "^mfa_[A-Za-z0-9]+$")]
    pub id: &'a str,
    /// `totp` or `passkey`.
    #[schema(value_type = String)]
    pub r#type: &'static str,
    #[schema(value_type = String)]
    pub name: &'a str,
    #[schema(schema_with = schemas::timestamp)]
    pub created_at: Timestamp,
    /// The latest sign-in with it; null before the first.
    #[schema(value_type = Option<String>, format = DateTime, required = true)]
    pub last_used_at: Option<Timestamp>,
}

impl<'a> From<&'a gatehouse_domain::mfa::Factor> for FactorResponse<'a> {
    fn from(f: &'a gatehouse_domain::mfa::Factor) -> Self {
        Self {
            id: f.id.as_str(),
            r#type: f.kind.as_str(),
            name: &f.name,
            created_at: f.created_at,
            last_used_at: f.last_used_at,
        }
    }
}

/// D56: the recovery codes, the last item of a person's factors.
#[derive(Serialize, ToSchema)]
#[schema(as = MfaRecoveryCodes)]
pub struct RecoveryCodesResponse {
    /// `recovery_codes`.
    #[schema(value_type = String)]
    pub r#type: &'static str,
    /// Unused codes left (the account page warns at 3 or fewer).
    pub remaining: u32,
}

/// D56: an item of `GET /v1/me/mfa`: a factor, or (last) the recovery codes.
#[derive(Serialize, ToSchema)]
#[serde(untagged)]
#[schema(as = MfaItem)]
pub enum MfaItem<'a> {
    Factor(FactorResponse<'a>),
    RecoveryCodes(RecoveryCodesResponse),
}

/// The items of `GET /v1/me/mfa` for `factors`, in D56's order.
pub fn mfa_items(factors: &gatehouse_domain::mfa::Factors) -> Vec<MfaItem<'_>> {
    let mut items: Vec<MfaItem<'_>> = factors
        .listed()
        .into_iter()
        .map(|f| MfaItem::Factor(f.into()))
        .collect();
    if let Some(remaining) = factors.recovery_remaining {
        items.push(MfaItem::RecoveryCodes(RecoveryCodesResponse {
            r#type: "recovery_codes",
            remaining,
        }));
    }
    items
}

/// D56: the organization's second-factor policy.
#[derive(Serialize, ToSchema)]
#[schema(as = SecurityPolicy)]
pub struct SecurityResponse {
    /// `optional`, `required_for_admins` or `required`.
    #[schema(value_type = String)]
    pub mfa: &'static str,
    /// Days a covered person may skip setting up a second factor, from
    /// their first sign-in under the policy.
    pub enrollment_grace_days: u32,
    #[schema(schema_with = schemas::timestamp)]
    pub updated_at: Timestamp,
}

impl From<&gatehouse_domain::mfa::SecurityPolicy> for SecurityResponse {
    fn from(p: &gatehouse_domain::mfa::SecurityPolicy) -> Self {
        Self {
            mfa: p.mfa.as_str(),
            enrollment_grace_days: p.enrollment_grace_days,
            updated_at: p.updated_at,
        }
    }
}

// D55.
/// A webhook endpoint (never its secret, after creation).
#[derive(Serialize, ToSchema)]
#[schema(as = WebhookEndpoint)]
pub struct WebhookEndpointResponse<'a> {
    #[schema(value_type = String, pattern = "^we_[A-Za-z0-9]+$")]
    pub id: &'a str,
    #[schema(value_type = String)]
    pub url: &'a str,
    #[schema(value_type = String, max_length = 500)]
    pub description: &'a str,
    #[schema(schema_with = schemas::event_patterns)]
    pub enabled_events: Vec<&'a str>,
    #[schema(schema_with = schemas::endpoint_ordering)]
    pub ordering: &'static str,
    #[schema(schema_with = schemas::endpoint_status)]
    pub status: &'static str,
    #[schema(schema_with = schemas::disabled_reason, required = true)]
    pub disabled_reason: Option<&'static str>,
    #[schema(value_type = Option<String>, pattern = "^usr_[A-Za-z0-9]+$", required = true)]
    pub owner_id: Option<&'a str>,
    #[schema(schema_with = schemas::timestamp)]
    pub created_at: Timestamp,
    #[schema(schema_with = schemas::timestamp)]
    pub updated_at: Timestamp,
}

impl<'a> From<&'a gatehouse_domain::webhook::Endpoint> for WebhookEndpointResponse<'a> {
    fn from(e: &'a gatehouse_domain::webhook::Endpoint) -> Self {
        Self {
            id: e.id.as_str(),
            url: &e.url,
            description: &e.description,
            enabled_events: e.enabled_events.iter().map(|p| p.as_str()).collect(),
            ordering: e.ordering.as_str(),
            status: e.status(),
            disabled_reason: e.disabled.map(|r| r.as_str()),
            owner_id: e.owner.as_ref().map(|u| u.as_str()),
            created_at: e.created_at,
            updated_at: e.updated_at,
        }
    }
}

// D55.
/// One attempt of a webhook delivery: made, or the next one queued.
#[derive(Serialize, ToSchema)]
#[schema(as = WebhookAttempt)]
pub struct WebhookAttemptResponse<'a> {
    #[schema(value_type = String, pattern = "^wa_[A-Za-z0-9]+$")]
    pub id: &'a str,
    /// The event delivered (`evt_…`).
    #[schema(value_type = String, pattern = "^evt_[A-Za-z0-9]+$")]
    pub event: &'a str,
    /// 1 for the first.
    pub attempt: u32,
    /// `scheduled`, `manual` (test, redeliver) or `replay`.
    #[schema(value_type = String)]
    pub trigger: &'static str,
    /// `pending` (queued), `succeeded` (a 2xx) or `failed`.
    #[schema(value_type = String)]
    pub status: &'static str,
    #[schema(value_type = Option<String>, format = DateTime, required = true)]
    pub started_at: Option<Timestamp>,
    #[schema(required = true)]
    pub duration_ms: Option<i64>,
    #[schema(required = true)]
    pub response_status: Option<u16>,
    /// `timeout`, `connect`, `tls`, `dns`, `blocked_address`, `redirect`
    /// or `cancelled`.
    #[schema(value_type = Option<String>, required = true)]
    pub error: Option<&'static str>,
    /// At most 4 KiB of the answer.
    #[schema(value_type = Option<String>, required = true)]
    pub response_excerpt: Option<&'a str>,
    #[schema(value_type = Option<String>, format = DateTime, required = true)]
    pub next_attempt_at: Option<Timestamp>,
}

impl<'a> From<&'a gatehouse_domain::webhook::Attempt> for WebhookAttemptResponse<'a> {
    fn from(a: &'a gatehouse_domain::webhook::Attempt) -> Self {
        Self {
            id: a.id.as_str(),
            event: a.event.as_str(),
            attempt: a.attempt,
            trigger: a.trigger.as_str(),
            status: a.status(),
            started_at: a.started_at,
            duration_ms: a.duration_ms,
            response_status: a.response_status,
            error: a.error.map(|e| e.as_str()),
            response_excerpt: a.response_excerpt.as_deref(),
            next_attempt_at: a.next_attempt_at,
        }
    }
}

// D55.
/// A webhook endpoint with its signing secret, shown only in this answer.
#[derive(Serialize, ToSchema)]
#[schema(as = WebhookEndpointWithSecret)]
pub struct WebhookEndpointWithSecret<'a> {
    #[serde(flatten)]
    pub endpoint: WebhookEndpointResponse<'a>,
    /// `whsec_` and the standard base64 of 32 random bytes: the key of the
    /// Standard Webhooks signature.
    #[schema(value_type = String, pattern = "^whsec_[A-Za-z0-9+/]+=*$")]
    pub secret: &'a str,
}

// D46.
/// The caller's organization: its plan and rate limits (D28).
#[derive(Serialize, ToSchema)]
#[schema(as = Organization)]
pub struct OrganizationResponse<'a> {
    #[schema(value_type = String, pattern = "^org_[A-Za-z0-9]+$")]
    pub id: &'a str,
    #[schema(value_type = String)]
    pub name: &'a str,
    #[schema(schema_with = schemas::plan)]
    pub plan: &'static str,
    pub limits: Limits,
    #[schema(schema_with = schemas::timestamp)]
    pub created_at: Timestamp,
}

/// Requests allowed per credential (D28).
#[derive(Serialize, ToSchema)]
pub struct Limits {
    pub per_minute: u32,
    pub per_second: u32,
}

impl<'a> From<&'a gatehouse_domain::Organization> for OrganizationResponse<'a> {
    fn from(o: &'a gatehouse_domain::Organization) -> Self {
        let (per_minute, per_second) = o.limits();
        Self {
            id: o.id.as_str(),
            name: &o.name,
            plan: o.plan.as_str(),
            limits: Limits {
                per_minute,
                per_second,
            },
            created_at: o.created_at,
        }
    }
}

// D46.
/// One UTC minute of a credential's usage.
#[derive(Serialize, ToSchema)]
#[schema(as = UsageBucket)]
pub struct UsageBucketResponse {
    /// The minute's start (`…:00.000Z`).
    #[schema(schema_with = schemas::timestamp)]
    pub start: Timestamp,
    /// Every API request made with the credential in the minute, 429s included.
    pub requests: u64,
    /// The 429s among them.
    pub rejected: u64,
}

impl From<&gatehouse_app::manage::UsageBucket> for UsageBucketResponse {
    fn from(b: &gatehouse_app::manage::UsageBucket) -> Self {
        Self {
            start: b.start,
            requests: b.requests,
            rejected: b.rejected,
        }
    }
}
