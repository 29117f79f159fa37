//! What the OAuth endpoints read and write on the wire: the token response
//! (interface.md §2.4), the token and revocation forms, the authorization
//! request's parameters, and the error answers (RFC 6749 §5.2, and the 429
//! of D28). The auth service deals in plain values
//! ([`IssuedTokens`], [`AuthorizeParams`]); the names and shapes here are
//! the protocol's.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use gatehouse_auth::flows::AuthorizeParams;
use gatehouse_auth::{IssuedTokens, OAuthError, OAuthErrorKind};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::http::form::Form;
use crate::http::respond::no_store;

// interface.md §2.4.
/// Issued tokens (RFC 6749 §5.1).
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct TokenResponse {
    pub access_token: String,
    #[schema(schema_with = crate::http::schemas::bearer)]
    pub token_type: &'static str,
    pub expires_in: i64,
    /// Absent for client credentials; never `null`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = String)]
    pub refresh_token: Option<String>,
    pub scope: String,
    /// D49: with `openid` granted to a person, the ID token (ES256).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = String)]
    pub id_token: Option<String>,
}

impl From<IssuedTokens> for TokenResponse {
    fn from(t: IssuedTokens) -> Self {
        Self {
            access_token: t.access_token,
            token_type: "Bearer",
            expires_in: t.expires_in,
            refresh_token: t.refresh_token,
            scope: t.scope,
            id_token: t.id_token,
        }
    }
}

/// An error answer of the token and revocation endpoints (RFC 6749 §5.2).
#[derive(Clone, Debug, Serialize, ToSchema)]
#[schema(as = OAuthError)]
pub struct OAuthErrorBody {
    #[schema(value_type = String)]
    pub error: &'static str,
    pub error_description: String,
}

// D20: HTTP Basic or the form's client_id and client_secret, never both.
/// A token request (RFC 6749 §4.1.3, §4.4.2, §6). The client authenticates
/// with HTTP Basic or with `client_id` and `client_secret`.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[schema(as = TokenRequest)]
pub struct TokenForm {
    #[serde(default)]
    #[schema(schema_with = crate::http::schemas::grant_type, required = true)]
    pub grant_type: Option<String>,
    #[serde(default)]
    #[schema(value_type = String)]
    pub client_id: Option<String>,
    #[serde(default)]
    #[schema(value_type = String)]
    pub client_secret: Option<String>,
    #[serde(default)]
    #[schema(value_type = String)]
    pub scope: Option<String>,
    #[serde(default)]
    #[schema(value_type = String)]
    pub code: Option<String>,
    #[serde(default)]
    #[schema(value_type = String)]
    pub redirect_uri: Option<String>,
    #[serde(default)]
    #[schema(value_type = String)]
    pub code_verifier: Option<String>,
    #[serde(default)]
    #[schema(value_type = String)]
    pub refresh_token: Option<String>,
}

/// The grant a token form asks for (D20–D24).
pub enum TokenRequest<'a> {
    ClientCredentials {
        scope: Option<&'a str>,
    },
    AuthorizationCode {
        code: Option<&'a str>,
        redirect_uri: Option<&'a str>,
        code_verifier: Option<&'a str>,
    },
    RefreshToken {
        refresh_token: Option<&'a str>,
        scope: Option<&'a str>,
    },
    /// A `grant_type` this server does not support.
    Unsupported(&'a str),
}

impl<'a> TokenRequest<'a> {
    /// The grant of a token form; `None` without `grant_type`. Parameters a
    /// grant does not use are ignored (RFC 6749 §3.2).
    pub fn of(form: &'a TokenForm) -> Option<Self> {
        Some(match form.grant_type.as_deref()? {
            "client_credentials" => Self::ClientCredentials {
                scope: form.scope.as_deref(),
            },
            "authorization_code" => Self::AuthorizationCode {
                code: form.code.as_deref(),
                redirect_uri: form.redirect_uri.as_deref(),
                code_verifier: form.code_verifier.as_deref(),
            },
            "refresh_token" => Self::RefreshToken {
                refresh_token: form.refresh_token.as_deref(),
                scope: form.scope.as_deref(),
            },
            other => Self::Unsupported(other),
        })
    }
}

/// A revocation request (RFC 7009 §2.1); the client authenticates as at
/// the token endpoint.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[schema(as = RevokeRequest)]
pub struct RevokeForm {
    #[serde(default)]
    #[schema(value_type = String, required = true)]
    pub token: Option<String>,
    #[serde(default)]
    #[schema(schema_with = crate::http::schemas::token_type_hint)]
    pub token_type_hint: Option<String>,
    #[serde(default)]
    #[schema(value_type = String)]
    pub client_id: Option<String>,
    #[serde(default)]
    #[schema(value_type = String)]
    pub client_secret: Option<String>,
}

/// The parameters of an authorization request (RFC 6749 §4.1.1, RFC 7636
/// §4.3, OpenID Connect Core §3.1.2.1 (D49)): the query of `GET
/// /oauth/authorize` or the form of `POST /oauth/authorize`, carried on as
/// hidden fields of the sign-in and consent forms. Anything else sent is
/// ignored, as RFC 6749 §3.1 asks — unless it is sent twice (D45 continued).
#[derive(Clone, Debug, Default)]
pub struct AuthorizeParameters {
    pairs: Vec<(String, String)>,
    /// Names sent more than once (of any parameter, known or not): the
    /// request is refused (D45 continued), and none of their values is kept.
    repeated: Vec<String>,
}

impl AuthorizeParameters {
    /// The names carried on, in the order the hidden fields are written.
    const NAMES: [&'static str; 15] = [
        "response_type",
        "client_id",
        "redirect_uri",
        "scope",
        "state",
        "code_challenge",
        "code_challenge_method",
        "nonce",
        "prompt",
        "max_age",
        "login_hint",
        "request_uri",
        "request",
        // D56: the levels asked for.
        "acr_values",
        "claims",
    ];

    /// From a query string (read like a form, repeated names reported);
    /// unknown names are dropped.
    pub fn from_query(query: &str) -> Self {
        Self::from_form(&Form::parse_reporting(query.as_bytes()).unwrap_or_default())
    }

    /// The parameters a form carries on (values as sent, empty or not), and
    /// the names it repeats.
    pub fn from_form(form: &Form) -> Self {
        Self {
            pairs: Self::NAMES
                .iter()
                .filter_map(|k| form.value(k).map(|v| ((*k).to_owned(), v.to_owned())))
                .collect(),
            repeated: form.repeated().to_vec(),
        }
    }

    fn get(&self, name: &str) -> Option<String> {
        self.pairs
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    }

    /// The same request with `prompt` replaced (the consent page's "not
    /// you?" asks for a fresh sign-in, D49).
    pub fn with_prompt(&self, prompt: &str) -> Self {
        let mut pairs: Vec<_> = self
            .pairs
            .iter()
            .filter(|(k, _)| k != "prompt")
            .cloned()
            .collect();
        pairs.push(("prompt".into(), prompt.into()));
        Self {
            pairs,
            repeated: self.repeated.clone(),
        }
    }

    /// The request as a query string for a link back to it.
    pub fn query(&self) -> String {
        serde_urlencoded::to_string(&self.pairs).unwrap_or_default()
    }

    /// The parameters as hidden form fields.
    pub fn hidden(&self) -> Vec<(&'static str, String)> {
        Self::NAMES
            .iter()
            .filter_map(|k| self.get(k).map(|v| (*k, v)))
            .collect()
    }

    /// What the auth service checks.
    pub fn to_params(&self) -> AuthorizeParams {
        AuthorizeParams {
            response_type: self.get("response_type"),
            client_id: self.get("client_id"),
            redirect_uri: self.get("redirect_uri"),
            scope: self.get("scope"),
            state: self.get("state"),
            code_challenge: self.get("code_challenge"),
            code_challenge_method: self.get("code_challenge_method"),
            nonce: self.get("nonce"),
            prompt: self.get("prompt"),
            max_age: self.get("max_age"),
            login_hint: self.get("login_hint"),
            request_uri: self.get("request_uri"),
            request: self.get("request"),
            acr_values: self.get("acr_values"),
            claims: self.get("claims"),
            repeated: self.repeated.clone(),
        }
    }
}

/// An RFC 6749 §5.2 error answer.
pub struct OAuthFailure(pub OAuthError);

impl IntoResponse for OAuthFailure {
    fn into_response(self) -> Response {
        let e = self.0;
        let status = match e.kind {
            OAuthErrorKind::InvalidClient => StatusCode::UNAUTHORIZED,
            OAuthErrorKind::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
            OAuthErrorKind::Internal => StatusCode::INTERNAL_SERVER_ERROR,
            _ => StatusCode::BAD_REQUEST,
        };
        let description = match e.kind {
            OAuthErrorKind::Unavailable | OAuthErrorKind::Internal => {
                tracing::error!(cause = %e.description, "token endpoint failure");
                "the server could not complete the request; retry later".to_owned()
            }
            _ => e.description,
        };
        let body = OAuthErrorBody {
            error: e.kind.as_str(),
            error_description: description,
        };
        let mut res = (status, axum::Json(body)).into_response();
        let h = res.headers_mut();
        no_store(h);
        match e.kind {
            OAuthErrorKind::InvalidClient => {
                h.insert(
                    header::WWW_AUTHENTICATE,
                    HeaderValue::from_static("Basic realm=\"gatehouse\""),
                );
            }
            OAuthErrorKind::Unavailable => {
                h.insert(header::RETRY_AFTER, HeaderValue::from_static("5"));
            }
            _ => {}
        }
        res
    }
}

/// D28 (revised): 429 `temporarily_unavailable` after too many failed
/// client authentications (`slow_down` belongs to the device flow).
pub(crate) fn too_many_failures(retry_after: u64) -> Response {
    let body = OAuthErrorBody {
        error: OAuthErrorKind::Unavailable.as_str(),
        error_description: format!(
            "too many failed client authentications; retry after {retry_after} s"
        ),
    };
    let mut res = (StatusCode::TOO_MANY_REQUESTS, axum::Json(body)).into_response();
    no_store(res.headers_mut());
    if let Ok(v) = HeaderValue::from_str(&retry_after.to_string()) {
        res.headers_mut().insert(header::RETRY_AFTER, v);
    }
    res
}
