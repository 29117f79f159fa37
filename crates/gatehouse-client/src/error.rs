//! Typed errors: the API's error envelope (interface.md §7.1, D6), the OAuth
//! errors of the token endpoint, and transport failures.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The result type of every client operation.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything a client operation can fail with.
///
/// Match on [`Error::Api`] and its [`ErrorCode`] (never on the message,
/// which may change):
///
/// ```no_run
/// # async fn f(client: gatehouse_client::Client) {
/// use gatehouse_client::{Error, ErrorCode, NewUser, Role};
///
/// let new = NewUser::new("ada@example.com", "Ada Lovelace", Role::Editor);
/// match client.create_user(&new).await {
///     Ok(user) => println!("created {}", user.id),
///     Err(Error::Api { code: ErrorCode::DuplicateResource, .. }) => println!("already there"),
///     Err(Error::Api { code: ErrorCode::ValidationError, details, .. }) => {
///         for d in details {
///             println!("{}: {}", d.field, d.issue);
///         }
///     }
///     Err(e) => eprintln!("failed: {e} (request {:?})", e.request_id()),
/// }
/// # }
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The API answered with its error envelope.
    #[error("{status} {code}: {message}{}", fmt_request_id(.request_id))]
    Api {
        /// The HTTP status.
        status: u16,
        /// The machine-readable code (`error.code`).
        code: ErrorCode,
        /// The human-readable message (`error.message`); may change.
        message: String,
        /// The offending fields of a `VALIDATION_ERROR`; empty otherwise.
        details: Vec<ErrorDetail>,
        /// The `X-Request-ID` of the response, for support and logs.
        request_id: Option<String>,
        /// `Retry-After` when the answer carried one (429, 503, 409
        /// `IDEMPOTENCY_KEY_IN_USE`); set on a 429 whose wait exceeded the
        /// configured cap, see [`RetryPolicy::max_retry_after`](crate::RetryPolicy::max_retry_after).
        retry_after: Option<Duration>,
    },
    /// The token endpoint refused (RFC 6749 §5.2: `invalid_grant`,
    /// `invalid_client`, …).
    #[error("token endpoint: {status} {error}{}{}", .description.as_deref().map(|d| format!(": {d}")).unwrap_or_default(), fmt_request_id(.request_id))]
    OAuth {
        /// The HTTP status.
        status: u16,
        /// The OAuth error code (`error`).
        error: String,
        /// `error_description`, when given.
        description: Option<String>,
        /// The `X-Request-ID` of the response.
        request_id: Option<String>,
    },
    /// No usable answer: connection refused or reset, TLS failure, timeout
    /// (after the retries of [`RetryPolicy`](crate::RetryPolicy)).
    #[error("transport error: {source}{}", fmt_request_id(.request_id))]
    Transport {
        /// The underlying failure.
        #[source]
        source: reqwest::Error,
        /// The `X-Request-ID` the client sent with the failed attempt.
        request_id: Option<String>,
    },
    /// An answer that is neither success nor a known error shape, or a
    /// success body that does not decode.
    #[error("unexpected response {status}: {message}{}", fmt_request_id(.request_id))]
    UnexpectedResponse {
        /// The HTTP status.
        status: u16,
        /// What was wrong, with the start of the body.
        message: String,
        /// The `X-Request-ID` of the response.
        request_id: Option<String>,
    },
    /// The client was configured wrongly (bad base URL, unreadable
    /// certificate, missing credentials).
    #[error("configuration: {0}")]
    Config(String),
}

fn fmt_request_id(id: &Option<String>) -> String {
    id.as_deref()
        .map(|id| format!(" (request {id})"))
        .unwrap_or_default()
}

impl Error {
    /// The request id of the failed request, when known.
    pub fn request_id(&self) -> Option<&str> {
        match self {
            Error::Api { request_id, .. }
            | Error::OAuth { request_id, .. }
            | Error::Transport { request_id, .. }
            | Error::UnexpectedResponse { request_id, .. } => request_id.as_deref(),
            Error::Config(_) => None,
        }
    }

    /// The API error code, for [`Error::Api`].
    pub fn code(&self) -> Option<&ErrorCode> {
        match self {
            Error::Api { code, .. } => Some(code),
            _ => None,
        }
    }

    /// The HTTP status, when there was an answer.
    pub fn status(&self) -> Option<u16> {
        match self {
            Error::Api { status, .. }
            | Error::OAuth { status, .. }
            | Error::UnexpectedResponse { status, .. } => Some(*status),
            _ => None,
        }
    }
}

/// One item of a `VALIDATION_ERROR`'s `details`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorDetail {
    /// The field (or header, or `body`) at fault.
    pub field: String,
    /// What is wrong with it.
    pub issue: String,
}

macro_rules! codes {
    ($($variant:ident => $s:literal,)*) => {
        /// The `code` of the error envelope (interface.md §7.3, D6, D45, D50).
        ///
        /// Codes this version of the library does not know arrive as
        /// [`ErrorCode::Other`].
        #[derive(Debug, Clone, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub enum ErrorCode {
            $(
                #[doc = concat!("`", $s, "`")]
                $variant,
            )*
            /// A code this library does not know.
            Other(String),
        }

        impl ErrorCode {
            /// The code as it appears on the wire.
            pub fn as_str(&self) -> &str {
                match self {
                    $(ErrorCode::$variant => $s,)*
                    ErrorCode::Other(s) => s,
                }
            }
        }

        impl From<&str> for ErrorCode {
            fn from(s: &str) -> Self {
                match s {
                    $($s => ErrorCode::$variant,)*
                    other => ErrorCode::Other(other.to_owned()),
                }
            }
        }
    };
}

codes! {
    ValidationError => "VALIDATION_ERROR",
    InvalidToken => "INVALID_TOKEN",
    TokenExpired => "TOKEN_EXPIRED",
    InsufficientScope => "INSUFFICIENT_SCOPE",
    ResourceNotFound => "RESOURCE_NOT_FOUND",
    DuplicateResource => "DUPLICATE_RESOURCE",
    MethodNotAllowed => "METHOD_NOT_ALLOWED",
    ApiVersionSunset => "API_VERSION_SUNSET",
    PayloadTooLarge => "PAYLOAD_TOO_LARGE",
    UnsupportedMediaType => "UNSUPPORTED_MEDIA_TYPE",
    InvalidStateTransition => "INVALID_STATE_TRANSITION",
    OwnedResourcesExist => "OWNED_RESOURCES_EXIST",
    LastAdmin => "LAST_ADMIN",
    RateLimitExceeded => "RATE_LIMIT_EXCEEDED",
    InternalError => "INTERNAL_ERROR",
    UriTooLong => "URI_TOO_LONG",
    HeadersTooLarge => "HEADERS_TOO_LARGE",
    ServiceUnavailable => "SERVICE_UNAVAILABLE",
    IdempotencyKeyReused => "IDEMPOTENCY_KEY_REUSED",
    IdempotencyKeyInUse => "IDEMPOTENCY_KEY_IN_USE",
    LimitReached => "LIMIT_REACHED",
    UrlNotAllowed => "URL_NOT_ALLOWED",
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for ErrorCode {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for ErrorCode {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Ok(ErrorCode::from(s.as_str()))
    }
}

/// The error envelope on the wire.
#[derive(Deserialize)]
pub(crate) struct Envelope {
    pub(crate) error: EnvelopeBody,
}

#[derive(Deserialize)]
pub(crate) struct EnvelopeBody {
    pub(crate) code: ErrorCode,
    #[serde(default)]
    pub(crate) message: String,
    #[serde(default)]
    pub(crate) details: Vec<ErrorDetail>,
}

/// An RFC 6749 §5.2 error body.
#[derive(Deserialize)]
pub(crate) struct OAuthBody {
    pub(crate) error: String,
    pub(crate) error_description: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip() {
        for s in ["IDEMPOTENCY_KEY_IN_USE", "INVALID_TOKEN", "SOMETHING_NEW"] {
            assert_eq!(ErrorCode::from(s).as_str(), s);
        }
        assert_eq!(ErrorCode::from("LAST_ADMIN"), ErrorCode::LastAdmin);
        assert_eq!(
            ErrorCode::from("X"),
            ErrorCode::Other("X".into()),
            "unknown codes are kept"
        );
    }
}
