//! `gatehouse-domain` owns the vocabulary of Gatehouse: identifiers, validated
//! value types (`Email`, `Name`, `Role`, `Scope`, `Sku`, …), the state machines
//! of users (D11) and products (D18), paging, and the domain errors.
//!
//! Everything here is pure: no I/O, no storage, no HTTP. Values are parsed once
//! at the edge ("parse, don't validate") and then travel through the other
//! layers as these types. This crate must not import any other Gatehouse crate,
//! nor tokio, axum, sqlx, rusqlite or any transport or storage library.

pub mod audit;
pub mod auth_state;
pub mod client;
pub mod effect;
pub mod error;
pub mod event;
pub mod fixtures;
pub mod ids;
pub mod link;
pub mod manage;
pub mod mfa;
pub mod page;
pub mod product;
pub mod random;
pub mod scope;
pub mod sealed;
pub mod search;
pub mod session;
pub mod time;
pub mod user;
pub mod values;
pub mod webhook;

pub use error::{DomainError, FieldIssue};
pub use fixtures::{Fixture, FixtureUser};
pub use ids::{
    ApiKeyId, AttemptId, AuditId, ChainId, ClientId, EndpointId, EventId, Jti, MfaId, OrgId,
    ProductId, RequestId, SessionId, UserId,
};
pub use link::LinkKind;
pub use manage::{KeyCut, Manager, Reach, UsageRange};
pub use page::{Listing, Page};
pub use product::{NewProduct, Product, ProductPatch, ProductStatus};
pub use scope::{Scope, ScopeSet};
pub use time::{ACCESS_TOKEN_TTL_SECS, Timestamp, access_revocation_expiry};
pub use user::{NewUser, Role, User, UserPatch, UserStatus};
pub use values::{Email, Name, RedirectUri, SearchText, Sku};

/// The release reported in `meta.version` (D5).
pub const API_VERSION: &str = "1.2.0";

/// The organization's plan (D28).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Plan {
    Free,
    Pro,
    Enterprise,
}

impl Plan {
    pub fn as_str(self) -> &'static str {
        match self {
            Plan::Free => "free",
            Plan::Pro => "pro",
            Plan::Enterprise => "enterprise",
        }
    }
    pub fn parse(s: &str) -> Result<Self, String> {
        match s {
            "free" => Ok(Plan::Free),
            "pro" => Ok(Plan::Pro),
            "enterprise" => Ok(Plan::Enterprise),
            _ => Err("must be one of: free, pro, enterprise".into()),
        }
    }
}

/// An organization: the tenant every other record belongs to (D2).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Organization {
    pub id: OrgId,
    pub name: String,
    pub plan: Plan,
    /// Enterprise limits (D28); `None` means the plan's defaults.
    pub per_minute: Option<u32>,
    pub per_second: Option<u32>,
    pub created_at: Timestamp,
}

/// D28, D40: an organization's plan and limits from what was asked: custom
/// limits are an enterprise plan's (with them and no plan, the plan is
/// enterprise; with another plan, refused), each at least 1; no plan and no
/// limits is `free`. Other plans keep no custom limits.
pub fn decide_plan(
    plan: Option<Plan>,
    per_minute: Option<u32>,
    per_second: Option<u32>,
) -> Result<(Plan, Option<u32>, Option<u32>), DomainError> {
    let custom = per_minute.is_some() || per_second.is_some();
    let plan = match plan {
        Some(p) => p,
        None if custom => Plan::Enterprise,
        None => Plan::Free,
    };
    let mut issues = Vec::new();
    if custom && plan != Plan::Enterprise {
        issues.push(FieldIssue::new(
            "plan",
            "must be enterprise when custom limits are given (they are an enterprise plan's)",
        ));
    }
    for (field, limit) in [("per_minute", per_minute), ("per_second", per_second)] {
        if limit == Some(0) {
            issues.push(FieldIssue::new(field, "must be at least 1"));
        }
    }
    if issues.is_empty() {
        Ok((plan, per_minute, per_second))
    } else {
        Err(DomainError::Validation(issues))
    }
}

impl Organization {
    /// The rate limits in force: (per minute, per second) (D28).
    pub fn limits(&self) -> (u32, u32) {
        match self.plan {
            Plan::Free => (60, 10),
            Plan::Pro => (600, 50),
            Plan::Enterprise => (
                self.per_minute.unwrap_or(600),
                self.per_second.unwrap_or(50),
            ),
        }
    }
}

/// A registered OAuth client application (D20). `id` is the `client_id`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Client {
    pub id: ClientId,
    pub org: OrgId,
    pub name: String,
    /// SHA-256 digest of the current secret; `None` for public clients.
    pub secret_hash: Option<[u8; 32]>,
    /// Digest of the previous secret and when it stops working (D20 rotate-secret).
    pub previous_secret: Option<([u8; 32], Timestamp)>,
    pub scopes: ScopeSet,
    pub redirect_uris: Vec<String>,
    /// D49: where RP-initiated logout may send the person (matched exactly).
    pub post_logout_redirect_uris: Vec<String>,
    pub admin_approved: bool,
    pub owner: Option<UserId>,
    pub created_at: Timestamp,
    /// D46: the last change of its settings or secret.
    pub updated_at: Timestamp,
    /// D46 (revised): what keeps it from getting tokens, if anything.
    pub suspension: client::Suspension,
}

impl Client {
    pub fn is_public(&self) -> bool {
        self.secret_hash.is_none()
    }

    /// D46 (revised): why it may not get tokens now (`None`: it may).
    pub fn suspended_reason(&self) -> Option<client::SuspendedReason> {
        self.suspension.reason()
    }
}

/// A remembered consent (D49): what a person let an application have.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Consent {
    pub client: ClientId,
    pub scopes: ScopeSet,
    pub created_at: Timestamp,
    /// The last authorization that used or granted it.
    pub last_used_at: Timestamp,
}

/// A static API key record (D27). The key itself is stored only as a digest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiKey {
    pub id: ApiKeyId,
    pub org: OrgId,
    pub name: String,
    pub scopes: ScopeSet,
    /// D46: the key's first 12 characters, to recognise it by.
    pub prefix: String,
    /// D46: the user who created it (none: the operator or an
    /// organization-wide credential); it dies with them.
    pub owner: Option<UserId>,
    /// D46: after this the key is refused (none: it does not expire).
    pub expires_at: Option<Timestamp>,
    pub created_at: Timestamp,
    /// D46: the last minute the key was used in, as the usage counts
    /// record it (at most a few seconds behind).
    pub last_used_at: Option<Timestamp>,
    pub revoked_at: Option<Timestamp>,
}

impl ApiKey {
    /// D46: the part of a key shown to recognise it by.
    pub const PREFIX_LEN: usize = 12;

    /// Whether the key is accepted at `now`: not revoked, not expired.
    pub fn is_live(&self, now: Timestamp) -> bool {
        self.revoked_at.is_none() && self.expires_at.is_none_or(|e| now < e)
    }
}
