//! Domain errors: the business rules a request can break.

use serde::Serialize;

/// One problem with one field of a request (D6 `details` item).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FieldIssue {
    pub field: String,
    pub issue: String,
}

impl FieldIssue {
    pub fn new(field: impl Into<String>, issue: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            issue: issue.into(),
        }
    }
}

/// A business rule was broken (422, D6) or the input was invalid (400).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DomainError {
    #[error("invalid input")]
    Validation(Vec<FieldIssue>),
    /// D11, D18: a state change the rules forbid.
    #[error("{0}")]
    InvalidStateTransition(String),
    /// D13: the user still owns client applications.
    #[error("the user still owns {0} client application(s); pass ?transfer_to=usr_… to move them")]
    OwnedResourcesExist(u64),
    /// D13: removing, deactivating or demoting the last active admin.
    #[error("this would leave the organization without an active admin")]
    LastAdmin,
    /// D46: the caller lacks a scope the change needs (403
    /// `INSUFFICIENT_SCOPE`); the text says which and why.
    #[error("{0}")]
    MissingScope(String),
    /// D6 (continued): a count limit of the contract reached, such as
    /// D55's 16 webhook endpoints per organization (422 `LIMIT_REACHED`).
    #[error("{0}")]
    LimitReached(String),
    /// D55's address rules (422 `URL_NOT_ALLOWED`).
    #[error("{0}")]
    UrlNotAllowed(String),
}
