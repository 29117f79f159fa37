//! `gatehouse mock` (D34): `Prefer: code=NNN` makes an API route answer that
//! error exactly as production would — the same envelope and the same headers
//! (`Retry-After`, `X-RateLimit-*`, `WWW-Authenticate`…) —
//! so client developers can exercise their error handling. Only the mock
//! server honours the header; production ignores it.
//!
//! The preference is applied after authentication and rate limiting, as the
//! real errors are: a request without a valid token is still 401, and the
//! `X-RateLimit-*` headers are the caller's real counters.

use axum::http::{HeaderMap, header};
use gatehouse_auth::ratelimit::RateInfo;
use gatehouse_domain::{FieldIssue, Scope};

use crate::error::{ApiError, ErrorCode};

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
pub fn simulated(code: u16, scope: Scope, rate: Option<&mut RateInfo>) -> ApiError {
    match code {
        400 => ApiError::validation(vec![
            FieldIssue::new("email", "must be a valid e-mail address"),
            FieldIssue::new("role", "must be one of: admin, editor, viewer"),
        ]),
        401 => ApiError::new(ErrorCode::InvalidToken, "the access token is invalid")
            .with_header(header::WWW_AUTHENTICATE, "Bearer error=\"invalid_token\""),
        403 => {
            let needed = scope.as_str();
            ApiError::new(
                ErrorCode::InsufficientScope,
                format!("this endpoint needs the {needed} scope"),
            )
            .with_header(
                header::WWW_AUTHENTICATE,
                &format!("Bearer error=\"insufficient_scope\", scope=\"{needed}\""),
            )
        }
        404 => ApiError::not_found(crate::error::Resource::Any),
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
