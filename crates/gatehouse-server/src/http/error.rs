//! The API's error type and its one mapping to the envelope of D6.
//!
//! Handlers return [`ApiError`]. Its `IntoResponse` leaves the body to the
//! outer middleware (`layers::outer`, at the top of the crate), which knows `public_url` and
//! writes `{"error": {code, message, docs, details}}` — so every error of
//! every route, including axum's own 405s and caught panics, has one shape.

use axum::http::{HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use gatehouse_app::AppError;
pub use gatehouse_app::Resource;
use gatehouse_domain::{DomainError, FieldIssue};
use serde::Serialize;
use utoipa::ToSchema;
use utoipa::openapi::schema::{Array, ArrayBuilder, Object, ObjectBuilder, Type};

use super::schemas::one_of;

macro_rules! codes {
    ($($variant:ident => ($text:literal, $status:expr, $summary:literal)),+ $(,)?) => {
        /// Every error code the API answers with (interface.md §7.3, D6).
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub enum ErrorCode { $($variant),+ }

        impl ErrorCode {
            pub const ALL: &'static [ErrorCode] = &[$(ErrorCode::$variant),+];
            pub fn as_str(self) -> &'static str {
                match self { $(ErrorCode::$variant => $text),+ }
            }
            pub fn status(self) -> StatusCode {
                match self { $(ErrorCode::$variant => $status),+ }
            }
            /// When the code is returned, for the error reference page.
            pub fn summary(self) -> &'static str {
                match self { $(ErrorCode::$variant => $summary),+ }
            }
        }
    };
}

codes! {
    ValidationError => ("VALIDATION_ERROR", StatusCode::BAD_REQUEST,
        "One or more fields or query parameters are invalid, or the body is not valid JSON. `details` lists every problem as {field, issue}."),
    InvalidToken => ("INVALID_TOKEN", StatusCode::UNAUTHORIZED,
        "The bearer token is missing, malformed, unknown, revoked, or fails verification (signature, issuer, audience, algorithm)."),
    TokenExpired => ("TOKEN_EXPIRED", StatusCode::UNAUTHORIZED,
        "The access token is older than 3600 seconds. Use the refresh grant or request a new token."),
    InsufficientScope => ("INSUFFICIENT_SCOPE", StatusCode::FORBIDDEN,
        "The token is valid but lacks the scope the endpoint needs; the WWW-Authenticate header names it."),
    ResourceNotFound => ("RESOURCE_NOT_FOUND", StatusCode::NOT_FOUND,
        "No such resource in your organization, an id of the wrong shape, or an unknown path."),
    DuplicateResource => ("DUPLICATE_RESOURCE", StatusCode::CONFLICT,
        "A unique attribute already exists: a user's e-mail or a product's sku in the organization."),
    MethodNotAllowed => ("METHOD_NOT_ALLOWED", StatusCode::METHOD_NOT_ALLOWED,
        "The path exists but not with this method; the Allow header lists the methods it accepts."),
    ApiVersionSunset => ("API_VERSION_SUNSET", StatusCode::GONE,
        "API v0 was removed on 2026-09-01. The Link header names the v1 equivalent."),
    PayloadTooLarge => ("PAYLOAD_TOO_LARGE", StatusCode::PAYLOAD_TOO_LARGE,
        "The request body is over 64 KiB."),
    UnsupportedMediaType => ("UNSUPPORTED_MEDIA_TYPE", StatusCode::UNSUPPORTED_MEDIA_TYPE,
        "POST and PATCH bodies must be sent with Content-Type: application/json."),
    InvalidStateTransition => ("INVALID_STATE_TRANSITION", StatusCode::UNPROCESSABLE_ENTITY,
        "The state change is not allowed: e.g. activating a user who has not accepted the invitation, or a product status that disagrees with its stock."),
    OwnedResourcesExist => ("OWNED_RESOURCES_EXIST", StatusCode::UNPROCESSABLE_ENTITY,
        "The user still owns client applications. Delete with ?transfer_to=usr_… to hand them to another active user."),
    LastAdmin => ("LAST_ADMIN", StatusCode::UNPROCESSABLE_ENTITY,
        "The change would remove, deactivate or demote the last active admin of the organization."),
    RateLimitExceeded => ("RATE_LIMIT_EXCEEDED", StatusCode::TOO_MANY_REQUESTS,
        "Too many requests for this credential. Wait the number of seconds in Retry-After."),
    InternalError => ("INTERNAL_ERROR", StatusCode::INTERNAL_SERVER_ERROR,
        "An unexpected failure. Retry with exponential back-off (1, 2, 4, 8 s) and report the X-Request-ID."),
    UriTooLong => ("URI_TOO_LONG", StatusCode::URI_TOO_LONG,
        "The request target (path and query) is over 8 KiB."),
    HeadersTooLarge => ("HEADERS_TOO_LARGE", StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
        "The request has more than 100 header fields, or over 64 KiB of them."),
    IdempotencyKeyReused => ("IDEMPOTENCY_KEY_REUSED", StatusCode::UNPROCESSABLE_ENTITY,
        "The Idempotency-Key was already used with a different request (method, path, query or body) by this credential within 24 hours. Use a new key for a new request."),
    IdempotencyKeyInUse => ("IDEMPOTENCY_KEY_IN_USE", StatusCode::CONFLICT,
        "A request with this Idempotency-Key is still running. Retry after Retry-After (1 s) to get its answer."),
    LimitReached => ("LIMIT_REACHED", StatusCode::UNPROCESSABLE_ENTITY,
        "A count limit of the contract is reached, such as 16 webhook endpoints per organization (disabled ones included). Delete one first."),
    UrlNotAllowed => ("URL_NOT_ALLOWED", StatusCode::UNPROCESSABLE_ENTITY,
        "A webhook endpoint's host is, or resolves to, a loopback, private, link-local, shared, multicast, reserved or unspecified address."),
    ServiceUnavailable => ("SERVICE_UNAVAILABLE", StatusCode::SERVICE_UNAVAILABLE,
        "Storage is unreachable, the server is shutting down, or under maintenance. Retry after Retry-After seconds."),
}

impl ErrorCode {
    /// The code of a use case's error: the one mapping of D6, used by the
    /// API's answers and by the CLI's `--json` errors (D47).
    pub fn of(e: &AppError) -> Self {
        match e {
            AppError::NotFound(_) => ErrorCode::ResourceNotFound,
            AppError::Duplicate { .. } => ErrorCode::DuplicateResource,
            AppError::Rule(d) => ErrorCode::of_rule(d),
            AppError::Unavailable(_) => ErrorCode::ServiceUnavailable,
            AppError::Internal(_) => ErrorCode::InternalError,
        }
    }

    /// The code of a business rule's refusal.
    pub fn of_rule(e: &DomainError) -> Self {
        match e {
            DomainError::Validation(_) => ErrorCode::ValidationError,
            DomainError::InvalidStateTransition(_) => ErrorCode::InvalidStateTransition,
            DomainError::OwnedResourcesExist(_) => ErrorCode::OwnedResourcesExist,
            DomainError::LastAdmin => ErrorCode::LastAdmin,
            // D46: a scope the change needs and the caller lacks.
            DomainError::MissingScope(_) => ErrorCode::InsufficientScope,
            DomainError::LimitReached(_) => ErrorCode::LimitReached,
            DomainError::UrlNotAllowed(_) => ErrorCode::UrlNotAllowed,
        }
    }
}

/// An error answer of the API.
#[derive(Clone, Debug)]
pub struct ApiError {
    pub code: ErrorCode,
    pub message: String,
    pub details: Vec<FieldIssue>,
    pub headers: Vec<(HeaderName, HeaderValue)>,
}

impl ApiError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            details: Vec::new(),
            headers: Vec::new(),
        }
    }

    pub fn with_header(mut self, name: HeaderName, value: &str) -> Self {
        if let Ok(v) = HeaderValue::from_str(value) {
            self.headers.push((name, v));
        }
        self
    }

    pub fn validation(details: Vec<FieldIssue>) -> Self {
        let message = match details.as_slice() {
            [one] => format!("{} {}", one.field, one.issue),
            many => format!("{} fields are invalid", many.len()),
        };
        Self {
            details,
            ..Self::new(ErrorCode::ValidationError, message)
        }
    }

    pub fn not_found(what: Resource) -> Self {
        Self::new(ErrorCode::ResourceNotFound, format!("{what} not found"))
    }

    pub fn internal() -> Self {
        Self::new(
            ErrorCode::InternalError,
            "an unexpected error occurred; retry with back-off and report the X-Request-ID",
        )
    }

    pub fn unavailable(retry_after_secs: u32) -> Self {
        Self::new(
            ErrorCode::ServiceUnavailable,
            "the service is temporarily unavailable; retry later",
        )
        .with_header(header::RETRY_AFTER, &retry_after_secs.to_string())
    }
}

/// The one mapping of the use cases' errors (D6); 500 and 503 causes are
/// logged, never shown.
impl From<AppError> for ApiError {
    fn from(e: AppError) -> Self {
        let code = ErrorCode::of(&e);
        match e {
            AppError::NotFound(what) => Self::not_found(what),
            AppError::Duplicate { what, field } => {
                Self::new(code, format!("a {what} with this {field} already exists"))
            }
            AppError::Rule(d) => d.into(),
            AppError::Unavailable(cause) => {
                tracing::error!(%cause, "storage unavailable");
                Self::unavailable(5)
            }
            AppError::Internal(cause) => {
                tracing::error!(%cause, "storage failure");
                Self::internal()
            }
        }
    }
}

impl From<DomainError> for ApiError {
    fn from(e: DomainError) -> Self {
        let code = ErrorCode::of_rule(&e);
        match e {
            DomainError::Validation(d) => Self::validation(d),
            DomainError::InvalidStateTransition(m)
            | DomainError::MissingScope(m)
            | DomainError::LimitReached(m)
            | DomainError::UrlNotAllowed(m) => Self::new(code, m),
            e @ (DomainError::OwnedResourcesExist(_) | DomainError::LastAdmin) => {
                Self::new(code, e.to_string())
            }
        }
    }
}

/// Carried from `into_response` to the middleware that writes the body.
#[derive(Clone, Debug)]
pub(crate) struct PendingError(pub ApiError);

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut res = self.code.status().into_response();
        for (k, v) in &self.headers {
            res.headers_mut().append(k.clone(), v.clone());
        }
        res.extensions_mut().insert(PendingError(self));
        res
    }
}

// D6: one envelope for every error of every route.
/// Every error answer of the API.
#[derive(Serialize, ToSchema)]
#[schema(as = Error)]
pub struct ErrorEnvelope<'a> {
    #[schema(inline)]
    pub error: ErrorBody<'a>,
}

/// What went wrong: the code, every problem of the request (`details`),
/// the reference page's entry for the code and a message for people.
// The fields are declared in alphabetical order: the order of the keys in
// every answer, which clients may have pinned byte for byte.
#[derive(Serialize, ToSchema)]
pub struct ErrorBody<'a> {
    #[schema(schema_with = error_code)]
    pub code: &'static str,
    #[schema(schema_with = details)]
    pub details: &'a [FieldIssue],
    #[schema(value_type = String, format = "uri")]
    pub docs: String,
    #[schema(value_type = String)]
    pub message: &'a str,
}

/// interface.md §7.3.
fn error_code() -> Object {
    let codes: Vec<&str> = ErrorCode::ALL.iter().map(|c| c.as_str()).collect();
    one_of(&codes)
}

/// D6: every problem of the request, `{field, issue}`.
fn details() -> Array {
    let issue = ObjectBuilder::new()
        .property("field", ObjectBuilder::new().schema_type(Type::String))
        .required("field")
        .property("issue", ObjectBuilder::new().schema_type(Type::String))
        .required("issue");
    ArrayBuilder::new().items(issue).build()
}

/// The envelope body (D6); `docs` points at the error reference page.
pub(crate) fn envelope(e: &ApiError, public_url: &str) -> Vec<u8> {
    let code = e.code.as_str();
    serde_json::to_vec(&ErrorEnvelope {
        error: ErrorBody {
            code,
            details: &e.details,
            docs: format!("{public_url}/docs/errors#{code}"),
            message: &e.message,
        },
    })
    .expect("the envelope serializes")
}
