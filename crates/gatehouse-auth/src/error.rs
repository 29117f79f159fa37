//! Errors of the authorization layer.

/// The RFC 6749 §5.2 error codes (D21).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OAuthErrorKind {
    InvalidRequest,
    InvalidClient,
    InvalidGrant,
    UnauthorizedClient,
    UnsupportedGrantType,
    InvalidScope,
    /// Authorization endpoint only (RFC 6749 §4.1.2.1).
    UnsupportedResponseType,
    /// Authorization endpoint only: the person chose Deny.
    AccessDenied,
    /// D49 `prompt=none`: nobody is signed in (or the sign-in is too old).
    LoginRequired,
    /// D49 `prompt=none`: the consent page would have to be shown.
    ConsentRequired,
    /// D49: `request_uri` is not supported.
    RequestUriNotSupported,
    /// D49: request objects (`request`) are not supported.
    RequestNotSupported,
    /// D56: an Essential `acr` that cannot be met (OpenID Connect Core
    /// Error Code unmet_authentication_requirements 1.0).
    UnmetAuthenticationRequirements,
    /// Storage failed: the server answers 500/503, never an OAuth code.
    Unavailable,
    Internal,
}

impl OAuthErrorKind {
    pub fn as_str(self) -> &'static str {
        match self {
            OAuthErrorKind::InvalidRequest => "invalid_request",
            OAuthErrorKind::InvalidClient => "invalid_client",
            OAuthErrorKind::InvalidGrant => "invalid_grant",
            OAuthErrorKind::UnauthorizedClient => "unauthorized_client",
            OAuthErrorKind::UnsupportedGrantType => "unsupported_grant_type",
            OAuthErrorKind::InvalidScope => "invalid_scope",
            OAuthErrorKind::UnsupportedResponseType => "unsupported_response_type",
            OAuthErrorKind::AccessDenied => "access_denied",
            OAuthErrorKind::LoginRequired => "login_required",
            OAuthErrorKind::ConsentRequired => "consent_required",
            OAuthErrorKind::RequestUriNotSupported => "request_uri_not_supported",
            OAuthErrorKind::RequestNotSupported => "request_not_supported",
            OAuthErrorKind::UnmetAuthenticationRequirements => "unmet_authentication_requirements",
            OAuthErrorKind::Unavailable => "temporarily_unavailable",
            OAuthErrorKind::Internal => "server_error",
        }
    }
}

/// D46 (revised): the `error_description` of a suspended application's
/// `invalid_client`.
pub const APPLICATION_SUSPENDED: &str = "application suspended";

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}: {description}", kind.as_str())]
pub struct OAuthError {
    pub kind: OAuthErrorKind,
    pub description: String,
}

impl OAuthError {
    pub fn new(kind: OAuthErrorKind, description: impl Into<String>) -> Self {
        Self {
            kind,
            description: description.into(),
        }
    }
    pub fn invalid_request(d: impl Into<String>) -> Self {
        Self::new(OAuthErrorKind::InvalidRequest, d)
    }
    pub fn invalid_client() -> Self {
        Self::new(
            OAuthErrorKind::InvalidClient,
            "client authentication failed",
        )
    }
    /// D46 (revised): the client authenticated, but its application is
    /// suspended (its owner deactivated, or a rotation owed after a move).
    pub fn application_suspended() -> Self {
        Self::new(OAuthErrorKind::InvalidClient, APPLICATION_SUSPENDED)
    }
    /// Whether this is [`OAuthError::application_suspended`]: the client
    /// proved its secret, so it is no failed authentication (D28).
    pub fn is_suspension(&self) -> bool {
        self.kind == OAuthErrorKind::InvalidClient && self.description == APPLICATION_SUSPENDED
    }
    /// Storage is unavailable: `temporarily_unavailable`, try again.
    pub fn unavailable(cause: impl Into<String>) -> Self {
        Self::new(OAuthErrorKind::Unavailable, cause)
    }

    /// Something that cannot be the caller's fault (logged, never shown).
    pub fn internal(cause: impl Into<String>) -> Self {
        Self::new(OAuthErrorKind::Internal, cause)
    }

    pub fn invalid_scope(d: impl Into<String>) -> Self {
        Self::new(OAuthErrorKind::InvalidScope, d)
    }
}

/// Why a bearer token was refused (D6, D23).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    /// Malformed, unknown, forged, revoked, wrong `iss`/`aud`/algorithm.
    #[error("the access token is invalid")]
    Invalid,
    /// Signature fine, `exp` passed.
    #[error("the access token has expired")]
    Expired,
}
