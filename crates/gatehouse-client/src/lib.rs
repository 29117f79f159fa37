//! The Rust client library of Gatehouse, the user and product management
//! service (decision D51).
//!
//! * **Credentials** ([`Credentials`]): client credentials, a refresh token
//!   from the authorization-code flow (rotated on every refresh, the newest
//!   handed back to you), or an API key.
//! * **Tokens** are fetched, cached and refreshed by the client before they
//!   expire, and once more after a 401 `INVALID_TOKEN`/`TOKEN_EXPIRED`; one
//!   refresh is in flight however many tasks share the [`Client`].
//! * **Typed operations** for every `/v1` route ([`OPERATIONS`] lists them),
//!   with list **streams** that page by themselves.
//! * **Typed errors** ([`Error`], [`ErrorCode`]) with the request id.
//! * **Retries** ([`RetryPolicy`]): 500, 503 and connection failures after
//!   1, 2, 4 and 8 s with jitter, then the error; 429 and 409
//!   `IDEMPOTENCY_KEY_IN_USE` waited out per `Retry-After` up to a cap;
//!   every POST carries an `Idempotency-Key` that stays the same across its
//!   retries, so a retried create never creates twice (D50). Each retry is
//!   a `tracing` event naming the request id.
//!
//! # Example
//!
//! ```no_run
//! use futures_util::TryStreamExt;
//! use gatehouse_client::{Client, Credentials, NewProduct, ProductFilter};
//!
//! # async fn f() -> gatehouse_client::Result<()> {
//! let client = Client::builder("https://localhost:8443")
//!     .root_certificate_file("data/tls/cert.pem")?
//!     .credentials(Credentials::client_credentials(
//!         "app_123",
//!         "secret",
//!         ["products:read", "products:write"],
//!     ))
//!     .build()?;
//!
//! let shirt = client
//!     .create_product(&NewProduct::new("Blue Shirt", "SHIRT-BLUE-M", 2500, 10))
//!     .await?;
//! let all: Vec<_> = client.list_products(ProductFilter::new()).try_collect().await?;
//! assert!(all.iter().any(|p| p.id == shirt.id));
//! # Ok(()) }
//! ```
//!
//! # Signing a person in
//!
//! ```no_run
//! use gatehouse_client::{AuthorizationRequest, Client};
//!
//! # async fn f(code_from_redirect: &str) -> gatehouse_client::Result<()> {
//! let base = "https://localhost:8443";
//! let req = AuthorizationRequest::new(base, "app_123", "http://127.0.0.1:8765/callback", [
//!     "profile:read",
//! ])?;
//! println!("open {}", req.url);
//! // … the redirect brings `code` (check its `state` against `req.state`) …
//! let client = Client::builder(base)
//!     .credentials(req.credentials("app_123", Some("secret"), code_from_redirect))
//!     .on_refresh_token(|rt| println!("store {rt} for next time"))
//!     .build()?;
//! let me = client.get_profile().await?;
//! println!("hello {}", me.name);
//! # Ok(()) }
//! ```

mod auth;
mod client;
mod error;
mod models;
mod ops;
mod retry;
pub mod webhooks;

pub use auth::{AuthorizationRequest, Credentials};
pub use client::{Client, ClientBuilder, IDEMPOTENCY_KEY, REQUEST_ID};
pub use error::{Error, ErrorCode, ErrorDetail, Result};
pub use models::{
    ApiKey, Application, ApplicationPatch, CreatedApiKey, Limits, NewApiKey, NewApplication,
    Organization, RegisteredApplication, RotatedSecret, UsageBucket,
};
pub use models::{AuditCheckpoint, AuditEntry, AuditFilter, AuditSource, AuditTarget};
pub use models::{
    ConsentedApplication, CursorMeta, CursorPage, Identified, NewProduct, NewUser, Page, PageMeta,
    Product, ProductFilter, ProductPatch, ProductStatus, ProfilePatch, Role, Session, User,
    UserFilter, UserPatch, UserStatus,
};
pub use models::{Event, EventActor, EventData, EventFilter, EventRequest};
pub use models::{MfaFactor, MfaItem, RecoveryCodes, SecurityPolicy, SecurityPolicyPatch};
pub use models::{
    NewWebhookEndpoint, WebhookAttempt, WebhookEndpoint, WebhookEndpointPatch,
    WebhookEndpointWithSecret,
};
pub use ops::{ListStream, OPERATIONS, Operation};
pub use retry::{RetryDelay, RetryPolicy, RetryReason, SleepFuture};

/// The README's example compiles (`cargo test --doc`).
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
