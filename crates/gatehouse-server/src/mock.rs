//! `gatehouse mock` (D34): `Prefer: code=NNN` makes an API route answer that
//! error exactly as production would — the same envelope and the same headers
//! (`Retry-After`, `X-RateLimit-*`, `WWW-Authenticate`…) —
//! so client developers can exercise their error handling. Only the mock
//! server honours the header; production ignores it.
//!
//! The preference is applied after authentication and rate limiting, as the
//! real errors are: a request without a valid token is still 401, and the
//! `X-RateLimit-*` headers are the caller's real counters.
//!
//! D53: `/oauth/token`, `/oauth/revoke` and `/oauth/introspect` honour it too,
//! in RFC 6749's body shape (`{"error", "error_description"}`, D21 revised):
//! `Prefer: code=` 400 (`invalid_grant`), 401 (`invalid_client`, with
//! `WWW-Authenticate: Basic`), 429 and 503 (`temporarily_unavailable`, with
//! `Retry-After`), 500 (`server_error`); `Prefer: error=<code>` picks another
//! D21 code (`Prefer: code=400, error=invalid_scope`, or `error=` alone with
//! its own status). There too the preference comes after client
//! authentication (D20), as on `/v1`: wrong credentials are still a real 401
//! counted by D28's guard, a blocked address still gets the real 429, a
//! public client at `/oauth/introspect` the real 401 (D49); only then is the
//! preference read, and a code or error it cannot give is 400
//! `invalid_request` naming the `Prefer` header.

use axum::http::{HeaderMap, header};
use axum::response::{IntoResponse, Response};
use gatehouse_auth::ratelimit::RateInfo;
use gatehouse_auth::{OAuthError, OAuthErrorKind};
use gatehouse_domain::{FieldIssue, Scope};

use crate::api::oauth_wire::{OAuthFailure, too_many_failures};
use crate::http::error::{ApiError, ErrorCode};
use crate::state::{AppState, OAuthRequest, Simulator};

/// The status codes `Prefer: code=` can ask for.
pub const PREFERRED_CODES: &[u16] = &[400, 401, 403, 404, 409, 413, 415, 422, 429, 500, 503];

/// Reads `Prefer: code=NNN` (RFC 7240 syntax: preferences separated by `,`
/// or `;`). `None` when the header asks for no code.
pub fn preferred_code(headers: &HeaderMap) -> Option<Result<u16, ApiError>> {
    for value in headers.get_all(header::HeaderName::from_static("prefer")) {
        let Ok(text) = value.to_str() else { continue };
        for pref in text.split([',', ';']) {
            let Some((name, v)) = pref.split_once('=') else {
                continue;
            };
            if !name.trim().eq_ignore_ascii_case("code") {
                continue;
            }
            let v = v.trim().trim_matches('"');
            return Some(match v.parse::<u16>() {
                Ok(c) if PREFERRED_CODES.contains(&c) => Ok(c),
                _ => Err(ApiError::validation(vec![FieldIssue::new(
                    "Prefer",
                    format!(
                        "code must be one of {}",
                        PREFERRED_CODES
                            .iter()
                            .map(u16::to_string)
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                )])),
            });
        }
    }
    None
}

/// The error production answers with for `code` on a route that needs
/// `scope`; `rate` is the caller's counter (a 429 shows it exhausted).
pub fn simulated(code: u16, scope: Option<Scope>, rate: Option<&mut RateInfo>) -> ApiError {
    match code {
        400 => ApiError::validation(vec![
            FieldIssue::new("email", "must be a valid e-mail address"),
            FieldIssue::new("role", "must be one of: admin, editor, viewer"),
        ]),
        401 => ApiError::new(ErrorCode::InvalidToken, "the access token is invalid")
            .with_header(header::WWW_AUTHENTICATE, "Bearer error=\"invalid_token\""),
        // An endpoint any valid token may call (D46 `/v1/organization`)
        // is refused as the management scope would be.
        403 => crate::api::extract::insufficient_scope(scope.unwrap_or(Scope::ApplicationsRead)),
        404 => ApiError::not_found(crate::http::error::Resource::Any),
        409 => ApiError::new(
            ErrorCode::DuplicateResource,
            "a user with this email already exists",
        ),
        413 => ApiError::new(
            ErrorCode::PayloadTooLarge,
            "the request body is over 65536 bytes",
        ),
        415 => ApiError::new(
            ErrorCode::UnsupportedMediaType,
            "the body must be sent with Content-Type: application/json",
        ),
        422 => ApiError::new(
            ErrorCode::InvalidStateTransition,
            "a user who has not accepted the invitation cannot be activated",
        ),
        429 => {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs());
            let retry_after = match rate {
                Some(info) => {
                    info.remaining = 0;
                    info.reset = info.reset.max(now + 1);
                    // A window is at most a minute long (D28).
                    (info.reset - now).min(60)
                }
                None => 1,
            }
            .max(1);
            ApiError::new(
                ErrorCode::RateLimitExceeded,
                format!("too many requests for this credential; retry after {retry_after} s"),
            )
            .with_header(header::RETRY_AFTER, &retry_after.to_string())
        }
        503 => ApiError::unavailable(5),
        _ => ApiError::internal(),
    }
}

/// D53: the status codes `Prefer: code=` can ask of the OAuth endpoints.
pub const OAUTH_PREFERRED_CODES: &[u16] = &[400, 401, 429, 500, 503];

/// D21 (revised): the codes `Prefer: error=` can ask of the OAuth endpoints.
pub const OAUTH_PREFERRED_ERRORS: &[OAuthErrorKind] = &[
    OAuthErrorKind::InvalidRequest,
    OAuthErrorKind::InvalidClient,
    OAuthErrorKind::InvalidGrant,
    OAuthErrorKind::UnauthorizedClient,
    OAuthErrorKind::UnsupportedGrantType,
    OAuthErrorKind::InvalidScope,
    OAuthErrorKind::Unavailable,
    OAuthErrorKind::Internal,
];

/// What `Prefer` asks an OAuth endpoint for: a status and its D21 code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OAuthPreference {
    pub status: u16,
    pub kind: OAuthErrorKind,
}

/// The status production answers `kind` with at the OAuth endpoints (D21).
fn natural_status(kind: OAuthErrorKind) -> u16 {
    match kind {
        OAuthErrorKind::InvalidClient => 401,
        OAuthErrorKind::Unavailable => 503,
        OAuthErrorKind::Internal => 500,
        _ => 400,
    }
}

/// Whether production ever answers `kind` with `status` (D21 revised).
fn goes_with(status: u16, kind: OAuthErrorKind) -> bool {
    match status {
        429 => kind == OAuthErrorKind::Unavailable,
        s => natural_status(kind) == s,
    }
}

fn bad_prefer(message: String) -> OAuthError {
    OAuthError::invalid_request(format!("Prefer header: {message}"))
}

/// Reads `Prefer: code=NNN` and `Prefer: error=<code>` for an OAuth
/// endpoint (D53); `None` when the header asks for neither.
pub fn preferred_oauth(headers: &HeaderMap) -> Option<Result<OAuthPreference, OAuthError>> {
    let (mut code, mut error) = (None, None);
    for value in headers.get_all(header::HeaderName::from_static("prefer")) {
        let Ok(text) = value.to_str() else { continue };
        for pref in text.split([',', ';']) {
            let Some((name, v)) = pref.split_once('=') else {
                continue;
            };
            let v = v.trim().trim_matches('"').to_owned();
            match name.trim().to_ascii_lowercase().as_str() {
                "code" if code.is_none() => code = Some(v),
                "error" if error.is_none() => error = Some(v),
                _ => {}
            }
        }
    }
    if code.is_none() && error.is_none() {
        return None;
    }
    Some(oauth_preference_of(code.as_deref(), error.as_deref()))
}

fn oauth_preference_of(
    code: Option<&str>,
    error: Option<&str>,
) -> Result<OAuthPreference, OAuthError> {
    let status = code
        .map(|c| match c.parse::<u16>() {
            Ok(n) if OAUTH_PREFERRED_CODES.contains(&n) => Ok(n),
            _ => Err(bad_prefer(format!(
                "code must be one of {} here",
                OAUTH_PREFERRED_CODES
                    .iter()
                    .map(u16::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            ))),
        })
        .transpose()?;
    let kind = error
        .map(|e| {
            OAUTH_PREFERRED_ERRORS
                .iter()
                .copied()
                .find(|k| k.as_str() == e)
                .ok_or_else(|| {
                    bad_prefer(format!(
                        "error must be one of {}",
                        OAUTH_PREFERRED_ERRORS
                            .iter()
                            .map(|k| k.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ))
                })
        })
        .transpose()?;
    let (status, kind) = match (status, kind) {
        (Some(s), Some(k)) if goes_with(s, k) => (s, k),
        (Some(s), Some(k)) => {
            return Err(bad_prefer(format!(
                "error={} is never answered with {s}",
                k.as_str()
            )));
        }
        (Some(s), None) => (
            s,
            match s {
                400 => OAuthErrorKind::InvalidGrant,
                401 => OAuthErrorKind::InvalidClient,
                500 => OAuthErrorKind::Internal,
                _ => OAuthErrorKind::Unavailable,
            },
        ),
        (None, Some(k)) => (natural_status(k), k),
        (None, None) => unreachable!("the caller saw a code or an error"),
    };
    Ok(OAuthPreference { status, kind })
}

/// What production would say for `kind` (the description of a real case).
fn oauth_description(kind: OAuthErrorKind) -> &'static str {
    match kind {
        OAuthErrorKind::InvalidRequest => "grant_type is required",
        OAuthErrorKind::InvalidClient => "client authentication failed",
        OAuthErrorKind::InvalidGrant => "the refresh token is invalid",
        OAuthErrorKind::UnauthorizedClient => {
            "public clients may use only the authorization-code grant"
        }
        OAuthErrorKind::UnsupportedGrantType => "grant_type password is not supported",
        OAuthErrorKind::InvalidScope => "unknown scope: everything",
        _ => "simulated by the mock's Prefer header (D53)",
    }
}

/// The answer production gives for `pref`, headers included.
pub fn simulated_oauth(pref: OAuthPreference) -> Response {
    if pref.status == 429 {
        // D28 (revised): the failure guard's answer.
        return too_many_failures(5);
    }
    OAuthFailure(OAuthError::new(pref.kind, oauth_description(pref.kind))).into_response()
}

/// The mock's [`Simulator`]: plugged into [`AppState`] when `config.mock`
/// is on (D34, D53).
pub struct Mock;

#[async_trait::async_trait]
impl Simulator for Mock {
    fn v1_error(
        &self,
        headers: &HeaderMap,
        scope: Option<Scope>,
        rate: Option<&mut RateInfo>,
    ) -> Option<ApiError> {
        Some(match preferred_code(headers)? {
            Ok(code) => simulated(code, scope, rate),
            Err(e) => e,
        })
    }

    /// D53: the answer an OAuth endpoint gives for `Prefer`, after the
    /// client authentication the endpoint does; `None` without a
    /// preference: the endpoint goes on.
    async fn oauth_answer(&self, st: &AppState, r: OAuthRequest<'_>) -> Option<Response> {
        let pref = preferred_oauth(r.headers)?;
        let checked = match r.auth {
            Ok(a) => st.app.check_client_authentication(a, r.introspection).await,
            Err(e) => Err(e.clone()),
        };
        if let Err(e) = checked {
            if e.kind == OAuthErrorKind::InvalidClient {
                st.app.record_auth_failure(r.presented, r.source);
            }
            return Some(OAuthFailure(e).into_response());
        }
        Some(match pref {
            Ok(p) => simulated_oauth(p),
            Err(e) => OAuthFailure(e).into_response(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pref(code: Option<&str>, error: Option<&str>) -> Result<(u16, &'static str), String> {
        oauth_preference_of(code, error)
            .map(|p| (p.status, p.kind.as_str()))
            .map_err(|e| e.description)
    }

    #[test]
    fn d53_codes_alone_pick_the_documented_error() {
        assert_eq!(pref(Some("400"), None), Ok((400, "invalid_grant")));
        assert_eq!(pref(Some("401"), None), Ok((401, "invalid_client")));
        assert_eq!(
            pref(Some("429"), None),
            Ok((429, "temporarily_unavailable"))
        );
        assert_eq!(
            pref(Some("503"), None),
            Ok((503, "temporarily_unavailable"))
        );
        assert_eq!(pref(Some("500"), None), Ok((500, "server_error")));
    }

    #[test]
    fn d53_error_picks_another_d21_code_with_its_status() {
        assert_eq!(
            pref(Some("400"), Some("invalid_scope")),
            Ok((400, "invalid_scope"))
        );
        assert_eq!(
            pref(None, Some("unsupported_grant_type")),
            Ok((400, "unsupported_grant_type"))
        );
        assert_eq!(
            pref(None, Some("invalid_client")),
            Ok((401, "invalid_client"))
        );
        assert_eq!(
            pref(Some("429"), Some("temporarily_unavailable")),
            Ok((429, "temporarily_unavailable"))
        );
        assert_eq!(pref(None, Some("server_error")), Ok((500, "server_error")));
    }

    #[test]
    fn d53_unknown_or_mismatched_preferences_name_the_header() {
        for (c, e) in [
            (Some("404"), None),
            (Some("abc"), None),
            (None, Some("access_denied")),
            (None, Some("nonsense")),
            (Some("401"), Some("invalid_grant")),
            (Some("500"), Some("temporarily_unavailable")),
        ] {
            let d = pref(c, e).expect_err("refused");
            assert!(d.contains("Prefer"), "{d}");
        }
    }
}
