//! What the OAuth endpoints read and write on the wire: the token response
//! (interface.md §2.4), the token and revocation forms, the authorization
//! request's parameters. The auth service deals in plain values
//! ([`IssuedTokens`], [`AuthorizeParams`]); the names and shapes here are
//! the protocol's.

use gatehouse_auth::IssuedTokens;
use gatehouse_auth::flows::AuthorizeParams;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::form::Form;

// interface.md §2.4.
/// Issued tokens (RFC 6749 §5.1).
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct TokenResponse {
    pub access_token: String,
    #[schema(schema_with = crate::openapi::schemas::bearer)]
    pub token_type: &'static str,
    pub expires_in: i64,
    /// Absent for client credentials; never `null`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = String)]
    pub refresh_token: Option<String>,
    pub scope: String,
}

impl From<IssuedTokens> for TokenResponse {
    fn from(t: IssuedTokens) -> Self {
        Self {
            access_token: t.access_token,
            token_type: "Bearer",
            expires_in: t.expires_in,
            refresh_token: t.refresh_token,
            scope: t.scope,
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
    #[schema(schema_with = crate::openapi::schemas::grant_type, required = true)]
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
    #[schema(schema_with = crate::openapi::schemas::token_type_hint)]
    pub token_type_hint: Option<String>,
    #[serde(default)]
    #[schema(value_type = String)]
    pub client_id: Option<String>,
    #[serde(default)]
    #[schema(value_type = String)]
    pub client_secret: Option<String>,
}

/// The parameters of an authorization request (RFC 6749 §4.1.1, RFC 7636
/// §4.3): the query of `GET /oauth/authorize`, carried on as hidden fields
/// of the sign-in and consent forms.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct AuthorizeParameters {
    pub response_type: Option<String>,
    pub client_id: Option<String>,
    pub redirect_uri: Option<String>,
    pub scope: Option<String>,
    pub state: Option<String>,
    pub code_challenge: Option<String>,
    pub code_challenge_method: Option<String>,
}

impl AuthorizeParameters {
    /// The names, in the order the hidden fields are written.
    const NAMES: [&'static str; 7] = [
        "response_type",
        "client_id",
        "redirect_uri",
        "scope",
        "state",
        "code_challenge",
        "code_challenge_method",
    ];

    /// The parameters a form carries on (values as sent, empty or not).
    pub fn from_form(form: &Form) -> Self {
        let get = |k: &str| form.value(k).map(str::to_owned);
        Self {
            response_type: get("response_type"),
            client_id: get("client_id"),
            redirect_uri: get("redirect_uri"),
            scope: get("scope"),
            state: get("state"),
            code_challenge: get("code_challenge"),
            code_challenge_method: get("code_challenge_method"),
        }
    }

    /// The parameters as hidden form fields.
    pub fn hidden(&self) -> Vec<(&'static str, String)> {
        let values = [
            &self.response_type,
            &self.client_id,
            &self.redirect_uri,
            &self.scope,
            &self.state,
            &self.code_challenge,
            &self.code_challenge_method,
        ];
        Self::NAMES
            .iter()
            .zip(values)
            .filter_map(|(k, v)| v.clone().map(|v| (*k, v)))
            .collect()
    }

    /// What the auth service checks.
    pub fn to_params(&self) -> AuthorizeParams {
        AuthorizeParams {
            response_type: self.response_type.clone(),
            client_id: self.client_id.clone(),
            redirect_uri: self.redirect_uri.clone(),
            scope: self.scope.clone(),
            state: self.state.clone(),
            code_challenge: self.code_challenge.clone(),
            code_challenge_method: self.code_challenge_method.clone(),
        }
    }
}
