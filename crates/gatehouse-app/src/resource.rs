//! The kinds of resource a use case acts on, named in 404 and 409 answers
//! ("user not found", "a product with this sku already exists").

use std::fmt;

/// A resource a use case or the HTTP edge can fail to find.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Resource {
    /// A path that names nothing the caller can tell apart (D6).
    Any,
    User,
    Product,
    Client,
    /// A client application as the management API names it (D46).
    Application,
    ApiKey,
    Organization,
    Link,
    Job,
    Storage,
    SigningKey,
    Credential,
    RateLimit,
    IdempotencyKey,
    /// An event (D54).
    Event,
    /// A webhook endpoint (D55).
    WebhookEndpoint,
    /// A browser session (D57).
    Session,
}

impl Resource {
    pub fn as_str(self) -> &'static str {
        match self {
            Resource::Any => "resource",
            Resource::User => "user",
            Resource::Product => "product",
            Resource::Event => "event",
            Resource::WebhookEndpoint => "webhook endpoint",
            Resource::Session => "session",
            Resource::Client => "client",
            Resource::Application => "application",
            Resource::ApiKey => "API key",
            Resource::Organization => "organization",
            Resource::Link => "link",
            Resource::Job => "job",
            Resource::Storage => "storage",
            Resource::SigningKey => "signing key",
            Resource::Credential => "credential",
            Resource::RateLimit => "rate limit",
            Resource::IdempotencyKey => "idempotency key",
        }
    }
}

impl fmt::Display for Resource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
