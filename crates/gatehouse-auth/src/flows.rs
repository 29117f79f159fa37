//! Grants on behalf of people (D24–D26, D29): the authorization request, login
//! with throttling, sessions, codes with PKCE, refresh chains with the grace
//! window and reuse detection, revocation (D25), and the single-use links of
//! invitations and password resets (D11, D19).

use gatehouse_domain::{Client, RedirectUri, Role, Scope, ScopeSet, Timestamp};

use crate::error::{OAuthError, OAuthErrorKind};
use crate::oidc::{self, Prompt};
use crate::{pkce, secrets};

/// Authorization codes live five minutes (D26).
pub const CODE_TTL_SECS: i64 = 300;
/// Refresh tokens slide over 30 days (interface.md §5.4).
pub const REFRESH_TTL_SECS: i64 = 30 * 86400;
/// Invitation links live seven days (D11), reset links one hour (D19).
pub const INVITATION_TTL_SECS: i64 = 7 * 86400;
pub const RESET_TTL_SECS: i64 = 3600;

/// The parameters of an authorization request (`GET /oauth/authorize`, and
/// the sign-in and consent forms that carry them on).
#[derive(Clone, Debug, Default)]
pub struct AuthorizeParams {
    pub response_type: Option<String>,
    pub client_id: Option<String>,
    pub redirect_uri: Option<String>,
    pub scope: Option<String>,
    pub state: Option<String>,
    pub code_challenge: Option<String>,
    pub code_challenge_method: Option<String>,
    /// D49: OpenID Connect's parameters.
    pub nonce: Option<String>,
    pub prompt: Option<String>,
    pub max_age: Option<String>,
    pub login_hint: Option<String>,
    pub request_uri: Option<String>,
    pub request: Option<String>,
    /// D56: the levels asked for, voluntarily and as an Essential claim.
    pub acr_values: Option<String>,
    pub claims: Option<String>,
    /// D45 (continued): the names sent more than once. None of their values
    /// is in the fields above (never the first or the last).
    pub repeated: Vec<String>,
}

impl AuthorizeParams {
    /// D45 (continued), first step: a repeated `client_id` or
    /// `redirect_uri` leaves no redirect URI to trust, so it gets D26's
    /// error page and never a redirect.
    pub fn refuse_repeated_target(&self) -> Result<(), AuthorizeError> {
        match self
            .repeated
            .iter()
            .find(|n| *n == "client_id" || *n == "redirect_uri")
        {
            Some(name) => Err(AuthorizeError::Page(format!(
                "The application sent {name} more than once."
            ))),
            None => Ok(()),
        }
    }

    /// D45 (continued), once the redirect URI is verified: any other
    /// repeated parameter is `invalid_request` (RFC 6749 §3.1), sent there
    /// by `to_client` (which adds `state` — absent when `state` itself is
    /// the repeated one, since its value was never read).
    pub fn refuse_repeated(
        &self,
        to_client: impl FnOnce(OAuthErrorKind, &str) -> AuthorizeError,
    ) -> Result<(), AuthorizeError> {
        let Some(name) = self.repeated.first() else {
            return Ok(());
        };
        // The name is the sender's: echoed only when short and plain
        // (RFC 6749 §5.2 limits `error_description`'s characters).
        let plain =
            name.len() <= 64 && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
        let description = if plain {
            format!("{name} is given more than once")
        } else {
            "a parameter is given more than once".to_owned()
        };
        Err(to_client(OAuthErrorKind::InvalidRequest, &description))
    }
}

/// Why an authorization request is refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AuthorizeError {
    /// The client or redirect URI cannot be trusted: an error page, never a redirect (D26).
    Page(String),
    /// Sent back to the client at its redirect URI.
    Redirect {
        redirect_uri: String,
        error: OAuthErrorKind,
        description: String,
        state: Option<String>,
    },
}

/// A checked authorization request.
#[derive(Clone, Debug)]
pub struct AuthorizeRequest {
    pub client: Client,
    pub redirect_uri: String,
    /// Known scopes asked for (unknown ones dropped); `None` when `scope` was omitted.
    pub requested: Option<ScopeSet>,
    pub state: Option<String>,
    pub code_challenge: String,
    /// D49: echoed in the ID token.
    pub nonce: Option<String>,
    pub prompt: Prompt,
    pub max_age: Option<i64>,
    /// D49: pre-fills the e-mail on the sign-in page.
    pub login_hint: Option<String>,
    /// D56: the levels asked for.
    pub acr: gatehouse_domain::mfa::AcrRequest,
}

impl AuthorizeRequest {
    /// D26, D29: what was asked (or, if omitted, what the client is registered
    /// for, without `admin`) ∩ the client's scopes ∩ what the role allows;
    /// `admin` only for an approved client.
    pub fn grantable(&self, role: Role) -> ScopeSet {
        let mut asked = match self.requested {
            Some(s) => s,
            // D49: the OpenID Connect scopes only when asked for by name.
            None => self.client.scopes.without(Scope::Admin).without_identity(),
        };
        if !self.client.admin_approved {
            asked = asked.without(Scope::Admin);
        }
        asked
            .intersect(self.client.scopes)
            .intersect(ScopeSet::for_role(role))
    }

    /// D49 (RFC 8252 §8.6): consent is not remembered for a public client
    /// whose redirect URI is a loopback address: any local program can use
    /// its `client_id`.
    pub fn may_remember_consent(&self) -> bool {
        !(self.client.is_public() && RedirectUri::is_loopback(&self.redirect_uri))
    }

    /// D49: what a person signed in at `auth_time` needs: a fresh sign-in
    /// (`prompt=login`, `max_age`).
    pub fn needs_fresh_login(&self, auth_time: Timestamp) -> bool {
        oidc::needs_fresh_login(self.prompt, self.max_age, auth_time)
    }

    pub fn error(&self, error: OAuthErrorKind, description: &str) -> AuthorizeError {
        AuthorizeError::Redirect {
            redirect_uri: self.redirect_uri.clone(),
            error,
            description: description.to_owned(),
            state: self.state.clone(),
        }
    }
}

/// Why `/oauth/userinfo` refused a token (RFC 6750 §3.1).
#[derive(Debug, thiserror::Error)]
pub enum UserinfoError {
    #[error("the access token is invalid")]
    InvalidToken,
    #[error("the token was not issued to a person with the openid scope")]
    InsufficientScope,
    /// Storage could not be read (the application layer's words).
    #[error("{0}")]
    Unavailable(String),
}

/// Why a login failed. Every kind reads the same to the person (D26).
#[derive(Debug, PartialEq, Eq)]
pub enum LoginError {
    Failed,
    Unavailable(String),
}

/// The digest under which a secret token (code, refresh token, session
/// cookie, link) is stored.
pub fn digest(token: &str) -> [u8; 32] {
    secrets::hash_secret(token)
}

/// `invalid_grant` with a description.
pub fn invalid_grant(d: &str) -> OAuthError {
    OAuthError::new(OAuthErrorKind::InvalidGrant, d)
}

/// What an authorization request carries besides its client and redirect
/// URI, checked the same way for every client, the dashboard's built-in one
/// included (D26, D48 continued, D49).
pub struct CheckedRequest {
    pub code_challenge: String,
    pub prompt: Prompt,
    pub max_age: Option<i64>,
    pub nonce: Option<String>,
    pub acr: gatehouse_domain::mfa::AcrRequest,
}

/// D26, D49: the checks after the redirect URI is trusted, whose failures
/// go to it through `to_client`: no request object, `response_type=code`,
/// PKCE with S256, `prompt`, `max_age` and `nonce` readable.
pub fn check_after_target(
    p: &AuthorizeParams,
    to_client: impl Fn(OAuthErrorKind, &str) -> AuthorizeError,
) -> Result<CheckedRequest, AuthorizeError> {
    // D49: request objects by value or by reference are not supported.
    if p.request_uri.is_some() {
        return Err(to_client(
            OAuthErrorKind::RequestUriNotSupported,
            "request_uri is not supported",
        ));
    }
    if p.request.is_some() {
        return Err(to_client(
            OAuthErrorKind::RequestNotSupported,
            "request objects are not supported",
        ));
    }
    match p.response_type.as_deref() {
        Some("code") => {}
        None => {
            return Err(to_client(
                OAuthErrorKind::InvalidRequest,
                "response_type is required",
            ));
        }
        Some(_) => {
            return Err(to_client(
                OAuthErrorKind::UnsupportedResponseType,
                "only response_type=code is supported",
            ));
        }
    }
    if p.code_challenge_method.as_deref() != Some("S256") {
        return Err(to_client(
            OAuthErrorKind::InvalidRequest,
            "PKCE with code_challenge_method=S256 is required",
        ));
    }
    let code_challenge = match p.code_challenge.as_deref() {
        Some(c) if pkce::valid_challenge(c) => c.to_owned(),
        _ => {
            return Err(to_client(
                OAuthErrorKind::InvalidRequest,
                "code_challenge must be the base64url SHA-256 of the verifier",
            ));
        }
    };
    let prompt = Prompt::parse(p.prompt.as_deref())
        .map_err(|m| to_client(OAuthErrorKind::InvalidRequest, m))?;
    let max_age = oidc::parse_max_age(p.max_age.as_deref())
        .map_err(|m| to_client(OAuthErrorKind::InvalidRequest, m))?;
    let nonce = match p.nonce.as_deref() {
        Some(n) if n.len() > 512 => {
            return Err(to_client(
                OAuthErrorKind::InvalidRequest,
                "nonce must be at most 512 characters",
            ));
        }
        n => n.map(str::to_owned),
    };
    let acr = oidc::parse_acr_request(p.acr_values.as_deref(), p.claims.as_deref())
        .map_err(|m| to_client(OAuthErrorKind::InvalidRequest, m))?;
    Ok(CheckedRequest {
        code_challenge,
        prompt,
        max_age,
        nonce,
        acr,
    })
}
