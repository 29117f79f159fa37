//! The one error type of the use cases. The server maps it to the envelope
//! of D6 in one place; the CLI turns it into a message.

use gatehouse_domain::DomainError;
use gatehouse_store::StoreError;

use crate::Resource;

/// Why a use case failed. 404 and 409 name the resource they concern, so
/// the answer says "user not found", not "not found".
#[derive(Debug, thiserror::Error)]
pub enum AppError {
    /// No such resource in the caller's organization (D2: another tenant's
    /// record is indistinguishable from a missing one).
    #[error("{0} not found")]
    NotFound(Resource),
    /// A unique attribute already exists (`email`, `sku`).
    #[error("a {what} with this {field} already exists")]
    Duplicate { what: Resource, field: &'static str },
    /// A business rule or a validation refused the request.
    #[error(transparent)]
    Rule(#[from] DomainError),
    /// Storage cannot be reached right now (503); the text is for logs.
    #[error("storage unavailable: {0}")]
    Unavailable(String),
    /// Anything else (500); the text is for logs, never for clients.
    #[error("storage failure: {0}")]
    Internal(String),
}

impl AppError {
    /// A storage error of a use case acting on `what`.
    pub fn store(e: StoreError, what: Resource) -> Self {
        match e {
            StoreError::NotFound => Self::NotFound(what),
            StoreError::Duplicate(field) => Self::Duplicate { what, field },
            StoreError::Rule(d) => Self::Rule(d),
            StoreError::Unavailable(cause) => Self::Unavailable(cause),
            StoreError::Internal(cause) => Self::Internal(cause),
        }
    }

    /// One invalid field (D6's `{field, issue}`).
    pub fn invalid(field: &str, issue: impl Into<String>) -> Self {
        Self::Rule(DomainError::Validation(vec![
            gatehouse_domain::FieldIssue::new(field, issue),
        ]))
    }
}

pub type AppResult<T> = Result<T, AppError>;

/// `.or_app(Resource::User)` on a storage result.
pub(crate) trait OrApp<T> {
    fn or_app(self, what: Resource) -> AppResult<T>;
}

impl<T> OrApp<T> for Result<T, StoreError> {
    fn or_app(self, what: Resource) -> AppResult<T> {
        self.map_err(|e| AppError::store(e, what))
    }
}
