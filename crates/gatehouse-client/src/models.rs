//! Request and response bodies of the `/v1` and `/v2` operations
//! (interface.md §2, D11–D17). Timestamps are RFC 3339 strings with
//! millisecond precision (D4).

use serde::{Deserialize, Serialize};

macro_rules! wire_enum {
    ($(#[$m:meta])* $name:ident { $($variant:ident => $s:literal,)* }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
        #[non_exhaustive]
        pub enum $name {
            $(
                #[doc = concat!("`", $s, "`")]
                #[serde(rename = $s)]
                $variant,
            )*
        }

        impl $name {
            /// The value as it appears on the wire.
            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $s,)*
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

wire_enum!(
    /// A user's role (D10).
    Role {
        Admin => "admin",
        Editor => "editor",
        Viewer => "viewer",
    }
);

wire_enum!(
    /// A user's status (D11).
    UserStatus {
        Active => "active",
        Inactive => "inactive",
        PendingInvite => "pending_invite",
    }
);

wire_enum!(
    /// A product's status.
    ProductStatus {
        Available => "available",
        OutOfStock => "out_of_stock",
        Discontinued => "discontinued",
    }
);

/// A user of the organization (interface.md §2.1); also the profile record
/// of `GET /v1/me` (D15).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct User {
    /// `usr_…`
    pub id: String,
    /// The e-mail address, unique in the organization.
    pub email: String,
    /// The display name.
    pub name: String,
    /// The role.
    pub role: Role,
    /// The status.
    pub status: UserStatus,
    /// Creation time.
    pub created_at: String,
    /// Time of the last change.
    pub updated_at: String,
}

/// An application the caller allowed to act for them (a remembered
/// consent, `GET /v1/me/applications`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ConsentedApplication {
    /// The application's `client_id` (`app_…`).
    pub id: String,
    /// The application's name.
    pub name: String,
    /// The scopes the caller allowed it.
    pub scopes: Vec<String>,
    /// When the consent was first given.
    pub granted_at: String,
    /// The last authorization that used it.
    pub last_used_at: String,
}

/// A browser session (D57): a sign-in and the applications that got
/// refresh tokens in it, as `GET /v1/me/sessions` and
/// `GET /v1/users/{id}/sessions` list it.
///
/// The `user.signed_in` and `session.revoked` events (D54) carry the same
/// object without `current`; `serde_json::from_value::<Session>` reads their
/// `data.object` with `current` `None`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Session {
    /// `ses_…`: also the `sid` of the session's ID tokens (D49).
    pub id: String,
    /// The sign-in.
    pub created_at: String,
    /// The latest browser use or refresh of a chain begun in it (written
    /// at most once a minute).
    pub last_seen_at: String,
    /// The address of the latest browser use (the sign-in's until then).
    pub ip: Option<String>,
    /// The `User-Agent` of the latest browser use.
    pub user_agent: Option<String>,
    /// How the person signed in (RFC 8176), e.g. `["pwd"]`.
    pub amr: Vec<String>,
    /// The client ids (`app_…`) with live refresh chains begun in it.
    pub applications: Vec<String>,
    /// Whether the calling token acts in this session (its refresh chain
    /// began in it); `None` where it is not told (events).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current: Option<bool>,
}

impl Session {
    /// Whether the list marked this session as the caller's own
    /// (`current: true`).
    pub fn is_current(&self) -> bool {
        self.current == Some(true)
    }
}

/// An item of `GET /v1/me/mfa` (D56): a second factor, or (last) how many
/// recovery codes are left.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
#[non_exhaustive]
pub enum MfaItem {
    /// A TOTP factor or a passkey (never its secret).
    Factor(MfaFactor),
    /// The recovery codes: `type` is `recovery_codes`.
    RecoveryCodes(RecoveryCodes),
}

/// A second factor of a person (D56).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct MfaFactor {
    /// `mfa_…`.
    pub id: String,
    /// `totp` or `passkey`.
    pub r#type: String,
    pub name: String,
    pub created_at: String,
    /// The latest sign-in with it; `None` before the first.
    pub last_used_at: Option<String>,
}

/// How many recovery codes a person has left (D56).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct RecoveryCodes {
    /// `recovery_codes`.
    pub r#type: String,
    pub remaining: u32,
}

/// An organization's second-factor policy (D56).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct SecurityPolicy {
    /// `optional`, `required_for_admins` or `required`.
    pub mfa: String,
    /// Days a covered person may skip setting up a second factor, from
    /// their first sign-in under the policy (0–30).
    pub enrollment_grace_days: u32,
    pub updated_at: String,
}

/// The body of `PATCH /v1/organization/security` (D56).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct SecurityPolicyPatch {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mfa: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enrollment_grace_days: Option<u32>,
}

impl SecurityPolicyPatch {
    /// A patch setting `mfa` (`optional`, `required_for_admins`, `required`).
    pub fn mfa(mode: impl Into<String>) -> Self {
        Self {
            mfa: Some(mode.into()),
            enrollment_grace_days: None,
        }
    }

    /// The same patch, setting the grace days too.
    pub fn grace_days(mut self, days: u32) -> Self {
        self.enrollment_grace_days = Some(days);
        self
    }
}

/// A product of the catalog (interface.md §2.2).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Product {
    /// `prod_…`
    pub id: String,
    /// The product name.
    pub name: String,
    /// The stock-keeping unit, unique in the catalog.
    pub sku: String,
    /// Unit price in minor units (cents).
    pub price: u64,
    /// Units available.
    pub stock: u64,
    /// The status.
    pub status: ProductStatus,
    /// Time added to the catalog.
    pub created_at: String,
}

/// The body of `POST /v1/users`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct NewUser {
    /// The e-mail address the invitation goes to.
    pub email: String,
    /// The display name.
    pub name: String,
    /// The role.
    pub role: Role,
}

impl NewUser {
    /// A new user; the server sends the invitation (D11).
    pub fn new(email: impl Into<String>, name: impl Into<String>, role: Role) -> Self {
        Self {
            email: email.into(),
            name: name.into(),
            role,
        }
    }
}

/// The body of `PATCH /v1/users/{id}`: only the fields set change.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct UserPatch {
    /// A new display name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// A new role.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub role: Option<Role>,
    /// `active` or `inactive` (D11 says which transitions are allowed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<UserStatus>,
}

impl UserPatch {
    /// An empty patch.
    pub fn new() -> Self {
        Self::default()
    }
    /// Sets the name.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }
    /// Sets the role.
    pub fn role(mut self, role: Role) -> Self {
        self.role = Some(role);
        self
    }
    /// Sets the status.
    pub fn status(mut self, status: UserStatus) -> Self {
        self.status = Some(status);
        self
    }
}

/// The body of `POST /v1/products` (D16).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct NewProduct {
    /// The product name.
    pub name: String,
    /// The stock-keeping unit.
    pub sku: String,
    /// Unit price in minor units.
    pub price: u64,
    /// Units available.
    pub stock: u64,
    /// Only `discontinued` may be given at creation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<ProductStatus>,
}

impl NewProduct {
    /// A new product.
    pub fn new(name: impl Into<String>, sku: impl Into<String>, price: u64, stock: u64) -> Self {
        Self {
            name: name.into(),
            sku: sku.into(),
            price,
            stock,
            status: None,
        }
    }
    /// Creates it already discontinued.
    pub fn discontinued(mut self) -> Self {
        self.status = Some(ProductStatus::Discontinued);
        self
    }
}

/// The body of `PATCH /v1/products/{id}`: only the fields set change.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct ProductPatch {
    /// A new name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// A new SKU.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sku: Option<String>,
    /// A new price.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub price: Option<u64>,
    /// A new stock count.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stock: Option<u64>,
    /// A new status.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<ProductStatus>,
}

impl ProductPatch {
    /// An empty patch.
    pub fn new() -> Self {
        Self::default()
    }
    /// Sets the name.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }
    /// Sets the SKU.
    pub fn sku(mut self, sku: impl Into<String>) -> Self {
        self.sku = Some(sku.into());
        self
    }
    /// Sets the price.
    pub fn price(mut self, price: u64) -> Self {
        self.price = Some(price);
        self
    }
    /// Sets the stock.
    pub fn stock(mut self, stock: u64) -> Self {
        self.stock = Some(stock);
        self
    }
    /// Sets the status.
    pub fn status(mut self, status: ProductStatus) -> Self {
        self.status = Some(status);
        self
    }
}

/// The body of `PATCH /v1/me` (D15).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct ProfilePatch {
    /// A new display name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

impl ProfilePatch {
    /// A patch setting the name.
    pub fn name(name: impl Into<String>) -> Self {
        Self {
            name: Some(name.into()),
        }
    }
}

/// Filters of `GET /v1/users` (and `/v2/users`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct UserFilter {
    /// Only this role.
    pub role: Option<Role>,
    /// Only this status.
    pub status: Option<UserStatus>,
    /// Substring of name or e-mail.
    pub q: Option<String>,
    /// Page size (1–100; the server's default 20 when `None`).
    pub limit: Option<u32>,
}

impl UserFilter {
    /// No filter.
    pub fn new() -> Self {
        Self::default()
    }
    /// Only this role.
    pub fn role(mut self, role: Role) -> Self {
        self.role = Some(role);
        self
    }
    /// Only this status.
    pub fn status(mut self, status: UserStatus) -> Self {
        self.status = Some(status);
        self
    }
    /// Substring search on name and e-mail.
    pub fn q(mut self, q: impl Into<String>) -> Self {
        self.q = Some(q.into());
        self
    }
    /// The page size the stream asks for.
    pub fn limit(mut self, limit: u32) -> Self {
        self.limit = Some(limit);
        self
    }
    pub(crate) fn pairs(&self) -> Vec<(&'static str, String)> {
        let mut v = Vec::new();
        if let Some(r) = self.role {
            v.push(("role", r.as_str().to_owned()));
        }
        if let Some(s) = self.status {
            v.push(("status", s.as_str().to_owned()));
        }
        if let Some(q) = &self.q {
            v.push(("q", q.clone()));
        }
        v
    }
}

/// Filters of `GET /v1/products` (and `/v2/products`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ProductFilter {
    /// Only this status.
    pub status: Option<ProductStatus>,
    /// Word-prefix search on name and SKU (D17).
    pub q: Option<String>,
    /// Page size (1–100; the server's default 20 when `None`).
    pub limit: Option<u32>,
}

impl ProductFilter {
    /// No filter.
    pub fn new() -> Self {
        Self::default()
    }
    /// Only this status.
    pub fn status(mut self, status: ProductStatus) -> Self {
        self.status = Some(status);
        self
    }
    /// Search.
    pub fn q(mut self, q: impl Into<String>) -> Self {
        self.q = Some(q.into());
        self
    }
    /// The page size the stream asks for.
    pub fn limit(mut self, limit: u32) -> Self {
        self.limit = Some(limit);
        self
    }
    pub(crate) fn pairs(&self) -> Vec<(&'static str, String)> {
        let mut v = Vec::new();
        if let Some(s) = self.status {
            v.push(("status", s.as_str().to_owned()));
        }
        if let Some(q) = &self.q {
            v.push(("q", q.clone()));
        }
        v
    }
}

/// One page of an offset-paged `/v1` list.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[non_exhaustive]
pub struct Page<T> {
    /// The records.
    pub data: Vec<T>,
    /// Paging information.
    pub meta: PageMeta,
}

/// `meta` of a `/v1` list (D5).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[non_exhaustive]
pub struct PageMeta {
    /// All matches.
    pub total: u64,
    /// The page size used.
    pub limit: u32,
    /// The offset of this page.
    pub offset: u64,
    /// The request id.
    #[serde(default)]
    pub request_id: Option<String>,
}

/// One page of a cursor-paged `/v2` list (D32).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[non_exhaustive]
pub struct CursorPage<T> {
    /// The records.
    pub data: Vec<T>,
    /// Paging information.
    pub meta: CursorMeta,
}

/// `meta` of a `/v2` list.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[non_exhaustive]
pub struct CursorMeta {
    /// The page size used.
    pub limit: u32,
    /// Pass as `starting_after` for the next page; `None` on the last.
    pub next_cursor: Option<String>,
    /// The request id.
    #[serde(default)]
    pub request_id: Option<String>,
}

/// Records with an id, so that streams can de-duplicate.
pub trait Identified {
    /// The record's id.
    fn id(&self) -> &str;
}

impl Identified for User {
    fn id(&self) -> &str {
        &self.id
    }
}

impl Identified for ConsentedApplication {
    fn id(&self) -> &str {
        &self.id
    }
}

impl Identified for Session {
    fn id(&self) -> &str {
        &self.id
    }
}

impl Identified for Product {
    fn id(&self) -> &str {
        &self.id
    }
}

/// The single envelope (D5).
#[derive(Deserialize)]
pub(crate) struct Single<T> {
    pub(crate) data: T,
}

// ---- the management API (D46) ----

/// A client application of the organization (`GET /v1/applications/{id}`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Application {
    /// `app_…`, also its `client_id`.
    pub id: String,
    /// The display name.
    pub name: String,
    /// `confidential` (with a secret) or `public` (PKCE only).
    #[serde(rename = "type")]
    pub kind: String,
    /// Registered redirect URIs (matched exactly).
    pub redirect_uris: Vec<String>,
    /// Where RP-initiated logout may send people.
    pub post_logout_redirect_uris: Vec<String>,
    /// The scopes it may be granted.
    pub scopes: Vec<String>,
    /// Whether the operator approved `admin`.
    pub admin_approved: bool,
    /// The person who answers for it: whoever registered it (a person, or
    /// the owner of the credential used), or who it was moved to.
    pub owner_id: Option<String>,
    /// Creation time.
    pub created_at: String,
    /// Time of the last change.
    pub updated_at: String,
    /// Why it gets no token now (`owner_inactive`,
    /// `secret_rotation_required`), or `None` (D46 revised). Absent from
    /// older servers' answers.
    #[serde(default)]
    pub suspended_reason: Option<String>,
}

impl Identified for Application {
    fn id(&self) -> &str {
        &self.id
    }
}

/// A newly registered application and, for a confidential one, its secret
/// (shown only in this answer).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct RegisteredApplication {
    /// The application.
    #[serde(flatten)]
    pub application: Application,
    /// The secret; `None` for a public application.
    #[serde(default)]
    pub client_secret: Option<String>,
}

/// An application's new secret (shown only in this answer).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct RotatedSecret {
    /// The application.
    #[serde(flatten)]
    pub application: Application,
    /// The new secret.
    pub client_secret: String,
    /// Until when the previous secret works (`None`: it stopped now).
    pub previous_secret_expires_at: Option<String>,
}

/// The body of `POST /v1/applications`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct NewApplication {
    /// The display name.
    pub name: String,
    /// `confidential` or `public`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Redirect URIs (D20's rules).
    pub redirect_uris: Vec<String>,
    /// Post-logout redirect URIs.
    pub post_logout_redirect_uris: Vec<String>,
    /// The scopes (none the caller lacks).
    pub scopes: Vec<String>,
}

impl NewApplication {
    /// A confidential application (it gets a secret) with these scopes.
    pub fn confidential(name: impl Into<String>, scopes: &[&str]) -> Self {
        Self {
            name: name.into(),
            kind: "confidential".into(),
            redirect_uris: Vec::new(),
            post_logout_redirect_uris: Vec::new(),
            scopes: scopes.iter().map(|s| s.to_string()).collect(),
        }
    }
    /// A public application (no secret; needs a redirect URI).
    pub fn public(
        name: impl Into<String>,
        redirect_uri: impl Into<String>,
        scopes: &[&str],
    ) -> Self {
        Self {
            kind: "public".into(),
            redirect_uris: vec![redirect_uri.into()],
            ..Self::confidential(name, scopes)
        }
    }
    /// Adds a redirect URI.
    pub fn redirect_uri(mut self, uri: impl Into<String>) -> Self {
        self.redirect_uris.push(uri.into());
        self
    }
}

/// The body of `PATCH /v1/applications/{id}`: only the fields set change.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct ApplicationPatch {
    /// A new name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// New redirect URIs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub redirect_uris: Option<Vec<String>>,
    /// New post-logout redirect URIs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub post_logout_redirect_uris: Option<Vec<String>>,
    /// New scopes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scopes: Option<Vec<String>>,
    /// A new owner, an active user of the organization (admins and
    /// organization-wide credentials only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub owner_id: Option<String>,
}

impl ApplicationPatch {
    /// An empty patch.
    pub fn new() -> Self {
        Self::default()
    }
    /// Sets the name.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }
    /// Sets the redirect URIs.
    pub fn redirect_uris(mut self, uris: &[&str]) -> Self {
        self.redirect_uris = Some(uris.iter().map(|s| s.to_string()).collect());
        self
    }
    /// Sets the scopes.
    pub fn scopes(mut self, scopes: &[&str]) -> Self {
        self.scopes = Some(scopes.iter().map(|s| s.to_string()).collect());
        self
    }
    /// Moves the application to another owner (`usr_…`).
    pub fn owner_id(mut self, owner: impl Into<String>) -> Self {
        self.owner_id = Some(owner.into());
        self
    }
}

/// An API key's record (never the key itself after creation).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ApiKey {
    /// `key_…`
    pub id: String,
    /// The display name.
    pub name: String,
    /// The scopes.
    pub scopes: Vec<String>,
    /// The key's first 12 characters.
    pub prefix: String,
    /// The person who created it, if a person did.
    pub owner_id: Option<String>,
    /// When it stops working, if ever.
    pub expires_at: Option<String>,
    /// Creation time.
    pub created_at: String,
    /// The minute of its last use.
    pub last_used_at: Option<String>,
    /// When it was revoked.
    pub revoked_at: Option<String>,
}

impl Identified for ApiKey {
    fn id(&self) -> &str {
        &self.id
    }
}

/// A new API key and the key itself (shown only in this answer).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct CreatedApiKey {
    /// The record.
    #[serde(flatten)]
    pub api_key: ApiKey,
    /// The key (`gk_live_…`).
    pub key: String,
}

/// The body of `POST /v1/api-keys`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct NewApiKey {
    /// The display name.
    pub name: String,
    /// The scopes (none the caller lacks).
    pub scopes: Vec<String>,
    /// When it stops working (RFC 3339), if ever.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<String>,
}

impl NewApiKey {
    /// A key with these scopes that does not expire.
    pub fn new(name: impl Into<String>, scopes: &[&str]) -> Self {
        Self {
            name: name.into(),
            scopes: scopes.iter().map(|s| s.to_string()).collect(),
            expires_at: None,
        }
    }
    /// Sets the expiry (RFC 3339).
    pub fn expires_at(mut self, at: impl Into<String>) -> Self {
        self.expires_at = Some(at.into());
        self
    }
}

/// The caller's organization (`GET /v1/organization`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Organization {
    /// `org_…`
    pub id: String,
    /// The name.
    pub name: String,
    /// `free`, `pro` or `enterprise`.
    pub plan: String,
    /// Requests allowed per credential.
    pub limits: Limits,
    /// Creation time.
    pub created_at: String,
}

/// Requests allowed per credential (D28).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Limits {
    /// Per minute.
    pub per_minute: u32,
    /// Per second.
    pub per_second: u32,
}

/// One UTC minute of a credential's usage.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct UsageBucket {
    /// The minute's start.
    pub start: String,
    /// Requests made with the credential, 429s included.
    pub requests: u64,
    /// The 429s among them.
    pub rejected: u64,
}

/// An event (D54): a committed change of the organization.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Event {
    /// `evt_…`
    pub id: String,
    /// The catalog type, e.g. `product.updated`.
    #[serde(rename = "type")]
    pub kind: String,
    /// When the change was written (RFC 3339).
    pub created_at: String,
    /// `org_…`
    pub org: String,
    /// 1, 2, 3 … per organization, without gaps, in commit order.
    pub sequence: i64,
    /// The release that rendered the event.
    pub api_version: String,
    /// The object and, on updates, the old values of the changed fields.
    pub data: EventData,
    /// Who made the change.
    pub actor: EventActor,
    /// The request the change came through; `None` for the operator and
    /// the system.
    pub request: Option<EventRequest>,
}

/// `data` of an [`Event`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct EventData {
    /// The resource as its `GET` showed it at that commit.
    pub object: serde_json::Value,
    /// On `*.updated`: the old values of the fields that changed.
    #[serde(default)]
    pub previous_attributes: Option<serde_json::Value>,
}

/// `actor` of an [`Event`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct EventActor {
    /// `user`, `client`, `api_key`, `operator` or `system`.
    #[serde(rename = "type")]
    pub kind: String,
    pub id: Option<String>,
    pub client_id: Option<String>,
}

/// `request` of an [`Event`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct EventRequest {
    /// `req_…`: the `meta.request_id` of the answer that made the change.
    pub id: String,
    pub idempotency_key: Option<String>,
}

/// Filters of `GET /v1/events`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct EventFilter {
    /// Any of these types or patterns (`product.*`).
    pub types: Vec<String>,
    /// Only events about this object.
    pub object_id: Option<String>,
    /// Page size (1–100; the server's default 20 when `None`).
    pub limit: Option<u32>,
}

impl EventFilter {
    /// No filter.
    pub fn new() -> Self {
        Self::default()
    }
    /// One more type or pattern.
    pub fn kind(mut self, pattern: impl Into<String>) -> Self {
        self.types.push(pattern.into());
        self
    }
    /// Only events about this object.
    pub fn object_id(mut self, id: impl Into<String>) -> Self {
        self.object_id = Some(id.into());
        self
    }
    /// The page size.
    pub fn limit(mut self, limit: u32) -> Self {
        self.limit = Some(limit);
        self
    }
    pub(crate) fn pairs(&self) -> Vec<(&'static str, String)> {
        let mut v: Vec<(&'static str, String)> =
            self.types.iter().map(|t| ("type", t.clone())).collect();
        if let Some(o) = &self.object_id {
            v.push(("object_id", o.clone()));
        }
        v
    }
}

/// An entry of the audit log (D58), exactly as the server hashed it into
/// its chain (`hash` over the previous entry's `hash` and this entry's RFC
/// 8785 form without `hash`). `changes` and `details` stay JSON: their
/// members depend on the target.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct AuditEntry {
    /// `adt_…`
    pub id: String,
    /// `admin` or `security`: each is its own chain.
    pub category: String,
    /// 1, 2, 3 … per chain, without gaps, in commit order.
    pub sequence: u64,
    /// RFC 3339.
    pub created_at: String,
    /// The D54 event type of the change, or a security action.
    pub action: String,
    /// `success` or `failure`.
    pub outcome: String,
    pub reason: Option<String>,
    /// Who acted (`anonymous` for a sign-in that named no account).
    pub actor: EventActor,
    pub source: AuditSource,
    pub target: Option<AuditTarget>,
    pub request: Option<EventRequest>,
    pub changes: Option<serde_json::Value>,
    pub details: Option<serde_json::Value>,
    /// 64 lowercase hex characters.
    pub hash: String,
}

/// A signed checkpoint of one audit chain (D58): the chain held `sequence`
/// with `hash` when it was signed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct AuditCheckpoint {
    pub org: String,
    /// `admin` or `security`.
    pub category: String,
    pub sequence: u64,
    /// 64 lowercase hex characters.
    pub hash: String,
    /// RFC 3339.
    pub signed_at: String,
    /// The compact JWS (ES256) of `{org, category, sequence, hash,
    /// signed_at}`.
    pub jws: String,
}

/// `source` of an [`AuditEntry`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct AuditSource {
    pub ip: Option<String>,
    pub user_agent: Option<String>,
}

/// `target` of an [`AuditEntry`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct AuditTarget {
    #[serde(rename = "type")]
    pub kind: String,
    pub id: String,
}

/// The audit log's filters (D58).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct AuditFilter {
    /// `admin` or `security`.
    pub category: Option<String>,
    /// An actor's id, or `operator`, `system`, `anonymous`.
    pub actor: Option<String>,
    /// An action prefix (`user.` or `user.updated`).
    pub action: Option<String>,
    /// A target's id.
    pub target: Option<String>,
    /// `success` or `failure`.
    pub outcome: Option<String>,
    /// A source address.
    pub ip: Option<String>,
    /// Page size (1–100; the server's default 20 when `None`).
    pub limit: Option<u32>,
}

impl AuditFilter {
    /// No filter.
    pub fn new() -> Self {
        Self::default()
    }
    pub fn category(mut self, c: impl Into<String>) -> Self {
        self.category = Some(c.into());
        self
    }
    pub fn actor(mut self, a: impl Into<String>) -> Self {
        self.actor = Some(a.into());
        self
    }
    pub fn action(mut self, prefix: impl Into<String>) -> Self {
        self.action = Some(prefix.into());
        self
    }
    pub fn target(mut self, id: impl Into<String>) -> Self {
        self.target = Some(id.into());
        self
    }
    pub fn outcome(mut self, o: impl Into<String>) -> Self {
        self.outcome = Some(o.into());
        self
    }
    pub fn ip(mut self, ip: impl Into<String>) -> Self {
        self.ip = Some(ip.into());
        self
    }
    pub fn limit(mut self, limit: u32) -> Self {
        self.limit = Some(limit);
        self
    }
    pub(crate) fn pairs(&self) -> Vec<(&'static str, String)> {
        [
            ("category", &self.category),
            ("actor", &self.actor),
            ("action", &self.action),
            ("target", &self.target),
            ("outcome", &self.outcome),
            ("ip", &self.ip),
        ]
        .into_iter()
        .filter_map(|(k, v)| v.clone().map(|v| (k, v)))
        .collect()
    }
}

/// A webhook endpoint (D55); never its secret after creation.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[non_exhaustive]
pub struct WebhookEndpoint {
    /// `we_…`
    pub id: String,
    /// Where deliveries are sent.
    pub url: String,
    /// Free text (at most 500 characters).
    pub description: String,
    /// The event types it receives: types, `prefix.*` patterns or `*`.
    pub enabled_events: Vec<String>,
    /// `none` or `per_object`.
    pub ordering: String,
    /// `enabled` or `disabled`.
    pub status: String,
    /// `manual`, `gone`, `failing` or `owner_removed` while disabled.
    pub disabled_reason: Option<String>,
    /// The user it answers to.
    pub owner_id: Option<String>,
    /// Creation time.
    pub created_at: String,
    /// Last change.
    pub updated_at: String,
}

impl Identified for WebhookEndpoint {
    fn id(&self) -> &str {
        &self.id
    }
}

/// A webhook endpoint with its signing secret, in the answers that show
/// it (creation and rotation) only.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[non_exhaustive]
pub struct WebhookEndpointWithSecret {
    /// The endpoint.
    #[serde(flatten)]
    pub endpoint: WebhookEndpoint,
    /// `whsec_…`: give it to [`crate::webhooks::verify`].
    pub secret: String,
}

/// The body of `POST /v1/webhook-endpoints`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct NewWebhookEndpoint {
    /// `https` (plain `http` only to a range the operator allowed).
    pub url: String,
    /// Free text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The event types to receive (default every one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enabled_events: Option<Vec<String>>,
    /// `none` (default) or `per_object`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ordering: Option<String>,
}

impl NewWebhookEndpoint {
    /// An endpoint at `url` receiving every event.
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            description: None,
            enabled_events: None,
            ordering: None,
        }
    }
    /// Sets the description.
    pub fn description(mut self, d: impl Into<String>) -> Self {
        self.description = Some(d.into());
        self
    }
    /// Sets the event types to receive.
    pub fn enabled_events(mut self, patterns: &[&str]) -> Self {
        self.enabled_events = Some(patterns.iter().map(|s| s.to_string()).collect());
        self
    }
    /// At most one undelivered event per object at a time.
    pub fn per_object(mut self) -> Self {
        self.ordering = Some("per_object".into());
        self
    }
}

/// The body of `PATCH /v1/webhook-endpoints/{id}`: only the fields set change.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct WebhookEndpointPatch {
    /// A new URL.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// A new description.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// New event types.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enabled_events: Option<Vec<String>>,
    /// `none` or `per_object`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ordering: Option<String>,
    /// `enabled` (you become the owner) or `disabled`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
}

impl WebhookEndpointPatch {
    /// An empty patch.
    pub fn new() -> Self {
        Self::default()
    }
    /// Sets the URL.
    pub fn url(mut self, url: impl Into<String>) -> Self {
        self.url = Some(url.into());
        self
    }
    /// Sets the description.
    pub fn description(mut self, d: impl Into<String>) -> Self {
        self.description = Some(d.into());
        self
    }
    /// Sets the event types to receive.
    pub fn enabled_events(mut self, patterns: &[&str]) -> Self {
        self.enabled_events = Some(patterns.iter().map(|s| s.to_string()).collect());
        self
    }
    /// Enables (`true`) or disables (`false`) the endpoint.
    pub fn enabled(mut self, on: bool) -> Self {
        self.status = Some(if on { "enabled" } else { "disabled" }.into());
        self
    }
}

/// One attempt of a webhook delivery (D55): made, or the next one queued.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[non_exhaustive]
pub struct WebhookAttempt {
    /// `wa_…`
    pub id: String,
    /// The event delivered (`evt_…`).
    pub event: String,
    /// 1 for the first.
    pub attempt: u32,
    /// `scheduled`, `manual` or `replay`.
    pub trigger: String,
    /// `pending`, `succeeded` or `failed`.
    pub status: String,
    /// When it was made (none while queued).
    pub started_at: Option<String>,
    /// How long it took.
    pub duration_ms: Option<i64>,
    /// The answer's status.
    pub response_status: Option<u16>,
    /// `timeout`, `connect`, `tls`, `dns`, `blocked_address`, `redirect`
    /// or `cancelled`.
    pub error: Option<String>,
    /// At most 4 KiB of the answer.
    pub response_excerpt: Option<String>,
    /// When the next attempt is due (or, queued, this one).
    pub next_attempt_at: Option<String>,
}

impl Identified for WebhookAttempt {
    fn id(&self) -> &str {
        &self.id
    }
}
