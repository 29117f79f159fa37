//! The error codes of the reference: the OAuth and OpenID Connect ones,
//! and which of the API's codes each documented answer stands for.

use crate::http::error::ErrorCode;

use super::CodeLink;

/// The RFC 6749 / RFC 6750 / RFC 7662 / OpenID Connect error codes, with
/// the statuses they come with (303: in the redirect back to the client)
/// and what each means here.
pub const OAUTH_ERRORS: &[(&str, &[u16], &str)] = &[
    (
        "invalid_request",
        &[400, 303],
        "The request is missing a parameter, repeats one, has an unsupported value (e.g. `code_challenge_method=plain`), sends two `Authorization` headers, or authenticates the client twice (HTTP Basic and a form `client_secret`). At `/oauth/authorize`, also `prompt=none` together with another value. Fix the request; retrying it unchanged does not help.",
    ),
    (
        "invalid_client",
        &[401],
        "Client authentication failed: unknown `client_id`, wrong secret, no credentials from a confidential client, or a public client at `/oauth/introspect`. Comes with `WWW-Authenticate: Basic`. Check the credentials (a rotated secret stops working after its grace period).",
    ),
    (
        "invalid_grant",
        &[400],
        "The authorization code, refresh token or PKCE `code_verifier` is invalid, expired, already used, issued to another client, or the `redirect_uri` differs from the authorization request's. A refresh token presented again after the grace window revokes its whole chain. Start the flow again.",
    ),
    (
        "unauthorized_client",
        &[400, 303],
        "This client may not use this grant: e.g. a public client asking for `client_credentials`.",
    ),
    (
        "unsupported_grant_type",
        &[400],
        "`grant_type` is not one of `client_credentials`, `authorization_code`, `refresh_token`.",
    ),
    (
        "invalid_scope",
        &[400, 303],
        "A scope is unknown or not registered for the client (token endpoint), `openid`, `profile` or `email` with `client_credentials`, or — at `/oauth/authorize` — nothing is left to grant after dropping what the client or the person's role may not have.",
    ),
    (
        "unsupported_response_type",
        &[303],
        "`response_type` is not `code` (the only flow offered).",
    ),
    (
        "access_denied",
        &[303],
        "The person chose Deny on the consent page. The redirect carries your `state`.",
    ),
    (
        "login_required",
        &[303],
        "`prompt=none` was asked for, and nobody is signed in (or `max_age` has passed). Send the person through the flow without `prompt=none`.",
    ),
    (
        "consent_required",
        &[303],
        "`prompt=none` was asked for, and the person has not consented to these scopes for this client (always the case for public clients with loopback redirect URIs). Ask again without `prompt=none`.",
    ),
    (
        "unmet_authentication_requirements",
        &[303],
        "The request's `claims` asked for an Essential `acr` the person cannot reach (no second factor for `urn:gatehouse:acr:mfa`, no passkey for `phr`). The redirect carries your `state`. Ask without the Essential `acr`, or have the person add a second factor on their account page first.",
    ),
    (
        "request_uri_not_supported",
        &[303],
        "The authorization request used `request_uri`; Gatehouse does not support request objects (`request_uri_parameter_supported: false`).",
    ),
    (
        "temporarily_unavailable",
        &[429, 503, 303],
        "Too many failed client authentications from your address (429), or the server is overloaded or in maintenance (503). Wait the seconds of `Retry-After`, then retry.",
    ),
    (
        "server_error",
        &[500, 303],
        "An unexpected failure. Retry with back-off (1, 2, 4, 8 s) and report the `X-Request-ID`.",
    ),
    (
        "invalid_token",
        &[401],
        "Userinfo (RFC 6750): the access token is missing, malformed, expired or revoked. Comes in `WWW-Authenticate: Bearer error=\"invalid_token\"`. Get a new token (refresh).",
    ),
    (
        "insufficient_scope",
        &[403],
        "Userinfo (RFC 6750): the access token was not granted `openid`. Comes in `WWW-Authenticate: Bearer error=\"insufficient_scope\"`. Ask for `openid` at `/oauth/authorize`.",
    ),
];

/// The OAuth error codes each OAuth endpoint answers with.
pub(super) fn oauth_codes_of(path: &str) -> &'static [&'static str] {
    match path {
        "/oauth/token" => &[
            "invalid_request",
            "invalid_client",
            "invalid_grant",
            "unauthorized_client",
            "unsupported_grant_type",
            "invalid_scope",
            "temporarily_unavailable",
            "server_error",
        ],
        "/oauth/revoke" | "/oauth/introspect" => &[
            "invalid_request",
            "invalid_client",
            "temporarily_unavailable",
            "server_error",
        ],
        "/oauth/authorize" => &[
            "invalid_request",
            "unauthorized_client",
            "unsupported_response_type",
            "invalid_scope",
            "access_denied",
            "login_required",
            "consent_required",
            "unmet_authentication_requirements",
            "request_uri_not_supported",
            "temporarily_unavailable",
            "server_error",
        ],
        "/oauth/userinfo" => &["invalid_request", "invalid_token", "insufficient_scope"],
        _ => &[],
    }
}

pub(super) fn error_href(code: &str) -> String {
    format!("/docs/errors#{code}")
}

pub(super) fn link(code: &str) -> CodeLink {
    CodeLink {
        code: code.to_owned(),
        href: error_href(code),
    }
}

/// The API error codes a response of `status` described as `description`
/// stands for: the status's codes, narrowed by the description where a
/// status has several.
pub(super) fn api_codes(status: u16, description: &str) -> Vec<&'static str> {
    let d = description.to_ascii_lowercase();
    let all: Vec<ErrorCode> = ErrorCode::ALL
        .iter()
        .copied()
        .filter(|c| c.status().as_u16() == status)
        .collect();
    if all.len() <= 1 {
        return all.iter().map(|c| c.as_str()).collect();
    }
    let named = |c: &ErrorCode| d.contains(&c.as_str().to_ascii_lowercase());
    let fits = |c: &ErrorCode| match c {
        ErrorCode::DuplicateResource => d.contains("exists"),
        ErrorCode::InvalidStateTransition => {
            d.contains("state") || d.contains("status") || d.contains("pending")
        }
        ErrorCode::OwnedResourcesExist => d.contains("owned"),
        ErrorCode::LastAdmin => d.contains("last admin"),
        ErrorCode::LimitReached => d.contains("limit"),
        ErrorCode::UrlNotAllowed => d.contains("address"),
        ErrorCode::InvalidToken | ErrorCode::TokenExpired => true,
        _ => false,
    };
    let picked: Vec<&'static str> = all
        .iter()
        .filter(|c| named(c) || fits(c))
        .map(|c| c.as_str())
        .collect();
    if picked.is_empty() {
        all.iter().map(|c| c.as_str()).collect()
    } else {
        picked
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_follow_the_description() {
        assert_eq!(api_codes(404, "No such user"), ["RESOURCE_NOT_FOUND"]);
        assert_eq!(
            api_codes(409, "The sku exists; or IDEMPOTENCY_KEY_IN_USE: …"),
            ["DUPLICATE_RESOURCE", "IDEMPOTENCY_KEY_IN_USE"]
        );
        assert_eq!(
            api_codes(422, "Owned client applications or last admin"),
            ["OWNED_RESOURCES_EXIST", "LAST_ADMIN"]
        );
        assert_eq!(api_codes(401, "x"), ["INVALID_TOKEN", "TOKEN_EXPIRED"]);
    }
}
