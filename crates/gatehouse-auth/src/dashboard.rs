//! The developer dashboard's built-in client (D48): one confidential client
//! of the whole service, in no organization, whose only redirect URI is
//! `{public_url}/dashboard/callback`.
//!
//! It is not a stored client (codes and refresh chains of stored clients
//! reference a row of an organization), so what the authorization server
//! keeps for it is sealed instead, with AES-256-GCM under the master key and
//! a purpose string as associated data:
//!
//! - its authorization codes (two minutes, bound to the PKCE challenge, the
//!   user, the organization and the browser session's `sid`): redeemed only
//!   with that browser session's cookie, and once on any node sharing the
//!   storage (D48 continued, the store's `use_once`);
//! - the choice of organization when an e-mail and password matched
//!   several accounts: kept in an `HttpOnly` cookie of the browser that
//!   signed in (never in the page), used once on any node;
//! - the dashboard's grant, which the dashboard keeps in its session cookie:
//!   the access token and what a refresh needs. A refresh mints a new access
//!   token only while the Gatehouse browser session it began in is live and
//!   the user is active, with the scopes the user's role allows now, so
//!   signing out of Gatehouse (or a deactivation, a demotion) ends it.
//!
//! Its client secret is derived from the master key (HMAC-SHA-256) and never
//! leaves the server. Its scopes are the role's caps (D29) without `admin`
//! and without the OpenID Connect scopes; there is no consent page.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use gatehouse_domain::auth_state::Session;
use gatehouse_domain::{
    ChainId, ClientId, OrgId, Organization, Role, Scope, ScopeSet, Timestamp, User, UserId, random,
};
use serde::{Deserialize, Serialize};

use crate::error::OAuthErrorKind;
use crate::flows::{AuthorizeError, AuthorizeParams};
use crate::grants::AuthService;
use crate::jwt::{self, AccessClaims};

/// The built-in client's id. Stored ids are generated with 128 random bits,
/// so no stored client ever has this one; `resolve_client` never finds it,
/// so no organization lists it and no API call can change it.
pub const DASHBOARD_CLIENT_ID: &str = "app_dashboard";
/// The path of its only redirect URI, under `public_url`.
pub const CALLBACK_PATH: &str = "/dashboard/callback";
/// Its authorization codes live two minutes.
pub const DASHBOARD_CODE_TTL_SECS: i64 = 120;
/// How long a pending choice of organization (several accounts matched) lasts.
pub const PICK_TTL_SECS: i64 = 600;

const CODE_PURPOSE: &[u8] = b"gatehouse dashboard code v1";
const GRANT_PURPOSE: &[u8] = b"gatehouse dashboard grant v1";
const PICK_PURPOSE: &[u8] = b"gatehouse dashboard pick v1";
const SECRET_PURPOSE: &[u8] = b"gatehouse dashboard client secret v1";

/// Whether an authorization request names the built-in client.
pub fn is_dashboard(client_id: Option<&str>) -> bool {
    client_id == Some(DASHBOARD_CLIENT_ID)
}

/// The client id as the access tokens carry it.
pub fn dashboard_client_id() -> ClientId {
    ClientId::from_trusted(DASHBOARD_CLIENT_ID.to_owned())
}

/// What the dashboard may hold for a person of `role`: the role's caps
/// (D29, D46) without `admin` and without the OpenID Connect scopes.
pub fn dashboard_scopes(role: Role) -> ScopeSet {
    ScopeSet::for_role(role)
        .without(Scope::Admin)
        .without_identity()
}

/// A checked authorization request of the built-in client.
#[derive(Clone, Debug)]
pub struct DashboardRequest {
    pub redirect_uri: String,
    pub state: Option<String>,
    pub code_challenge: String,
    pub login_hint: Option<String>,
    /// `prompt=login` (or `max_age=0`): sign in again even with a session.
    pub fresh_login: bool,
}

impl DashboardRequest {
    fn error(&self, error: OAuthErrorKind, description: &str) -> AuthorizeError {
        AuthorizeError::Redirect {
            redirect_uri: self.redirect_uri.clone(),
            error,
            description: description.to_owned(),
            state: self.state.clone(),
        }
    }
}

/// One account the e-mail and password matched.
#[derive(Clone, Debug)]
pub struct Match {
    pub org: Organization,
    pub user: User,
}

/// A code of the built-in client, as sealed.
#[derive(Serialize, Deserialize)]
pub struct SealedCode {
    pub org: OrgId,
    pub user: UserId,
    pub challenge: String,
    pub sid: Option<String>,
    pub exp: i64,
    pub nonce: String,
}

/// A pending choice of organization, as sealed.
#[derive(Serialize, Deserialize)]
pub struct SealedPick {
    pub accounts: Vec<(OrgId, UserId)>,
    pub exp: i64,
    /// What makes the choice usable once (D48 continued).
    pub nonce: String,
}

/// The dashboard's grant: its access token and what refreshing it needs.
/// Kept sealed in the dashboard's session cookie.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct DashboardGrant {
    pub org: OrgId,
    pub user: UserId,
    /// The Gatehouse browser session the person signed in with.
    pub sid: Option<String>,
    pub access_token: String,
    /// When the access token expires (Unix seconds).
    pub expires_at: i64,
    /// The access token's scopes, space-separated.
    pub scope: String,
    /// When the dashboard's session ends, whatever happens (Unix seconds).
    pub session_expires_at: i64,
}

impl DashboardGrant {
    /// The access token's scopes.
    pub fn scopes(&self) -> ScopeSet {
        ScopeSet::parse(&self.scope).unwrap_or(ScopeSet::EMPTY)
    }

    /// Whether the access token is (nearly) expired.
    pub fn needs_refresh(&self, now: Timestamp) -> bool {
        self.expires_at - 60 <= now.unix_seconds()
    }
}

/// Why the dashboard's grant cannot be refreshed: the person signs in again.
#[derive(Debug, thiserror::Error)]
pub enum DashboardRefreshError {
    #[error("the dashboard session ended")]
    Ended,
    /// Storage could not be read (the application layer's words).
    #[error("{0}")]
    Unavailable(String),
}

impl AuthService {
    pub(crate) fn seal(&self, purpose: &[u8], value: &impl Serialize) -> String {
        let plain = serde_json::to_vec(value).expect("serializable");
        B64.encode(self.keys.master().encrypt(&plain, purpose))
    }

    /// A sealed choice of organization, when it is ours (not checked for
    /// expiry or use: the application layer does).
    pub fn unseal_pick(&self, sealed: &str) -> Option<SealedPick> {
        self.unseal(PICK_PURPOSE, sealed)
    }

    /// A sealed code of the built-in client, when it is ours.
    pub fn unseal_code(&self, code: &str) -> Option<SealedCode> {
        self.unseal(CODE_PURPOSE, code)
    }

    pub(crate) fn unseal<T: for<'de> Deserialize<'de>>(
        &self,
        purpose: &[u8],
        text: &str,
    ) -> Option<T> {
        if text.len() > 8192 {
            return None;
        }
        let sealed = B64.decode(text).ok()?;
        let plain = self.keys.master().decrypt(&sealed, purpose)?;
        serde_json::from_slice(&plain).ok()
    }

    /// The built-in client's secret, derived from the master key: the same
    /// on every node, never stored, never shown.
    pub fn dashboard_secret(&self) -> String {
        B64.encode(self.keys.master().derive(SECRET_PURPOSE))
    }

    /// Whether `presented` is the built-in client's secret under any master
    /// key held (D23 continued: one derived just before this process
    /// learned a rotation's next key still checks), in constant time.
    pub fn is_dashboard_secret(&self, presented: &str) -> bool {
        use subtle::ConstantTimeEq;
        self.keys
            .master()
            .derived(SECRET_PURPOSE)
            .iter()
            .fold(subtle::Choice::from(0), |found, k| {
                found | B64.encode(k).as_bytes().ct_eq(presented.as_bytes())
            })
            .into()
    }

    /// The built-in client's redirect URI.
    pub fn dashboard_redirect_uri(&self) -> String {
        format!("{}{CALLBACK_PATH}", self.issuer.iss)
    }

    /// D48: an authorization request of the built-in client: its one
    /// redirect URI (exactly), `response_type=code`, PKCE with S256.
    pub fn check_dashboard_authorize(
        &self,
        p: &AuthorizeParams,
    ) -> Result<DashboardRequest, AuthorizeError> {
        p.refuse_repeated_target()?;
        let expected = self.dashboard_redirect_uri();
        if p.redirect_uri.as_deref() != Some(expected.as_str()) {
            return Err(AuthorizeError::Page(
                "The redirect_uri is not registered for this application.".into(),
            ));
        }
        let mut req = DashboardRequest {
            redirect_uri: expected,
            state: p.state.clone(),
            code_challenge: String::new(),
            login_hint: p.login_hint.clone(),
            fresh_login: false,
        };
        p.refuse_repeated(|e, d| req.error(e, d))?;
        // D48 (continued): the same checks as every client's request.
        let checked = crate::flows::check_after_target(p, |e, d| req.error(e, d))?;
        req.code_challenge = checked.code_challenge;
        let (prompt, max_age) = (checked.prompt, checked.max_age);
        req.fresh_login = prompt.login || max_age == Some(0);
        Ok(req)
    }

    /// A sealed choice between several matched accounts, for the cookie of
    /// the browser asked to pick one (never the page: D48 continued).
    pub fn seal_pick(&self, matches: &[Match]) -> String {
        self.seal(
            PICK_PURPOSE,
            &SealedPick {
                accounts: matches
                    .iter()
                    .map(|m| (m.org.id.clone(), m.user.id.clone()))
                    .collect(),
                exp: Timestamp::now().unix_seconds() + PICK_TTL_SECS,
                nonce: random::base62(128),
            },
        )
    }

    /// A code for the built-in client (no consent page, D48).
    pub fn issue_dashboard_code(
        &self,
        req: &DashboardRequest,
        user: &User,
        org: &OrgId,
        session: &Session,
    ) -> String {
        self.seal(
            CODE_PURPOSE,
            &SealedCode {
                org: org.clone(),
                user: user.id.clone(),
                challenge: req.code_challenge.clone(),
                sid: Some(session.id.as_str().to_owned()),
                exp: Timestamp::now().unix_seconds() + DASHBOARD_CODE_TTL_SECS,
                nonce: random::base62(128),
            },
        )
    }

    /// The grant's access token for `user` now (D48).
    pub fn mint_dashboard(
        &self,
        org: &OrgId,
        user: &User,
        sid: Option<String>,
        signed_in: (&[String], Timestamp),
        session_expires_at: i64,
    ) -> DashboardGrant {
        let scopes = dashboard_scopes(user.role);
        let mut claims = AccessClaims::issue(
            org.clone(),
            dashboard_client_id(),
            Some(user.id.clone()),
            scopes,
        );
        // D57: the dashboard's tokens carry their browser session where a
        // chain's tokens carry the chain, so ending the session (a `Chain`
        // revocation under the session's id) ends them on every node, and
        // `GET /v1/me/sessions` knows the session they act in.
        claims.chain = sid.clone().map(ChainId::from_trusted);
        // D56: the browser session's `amr`, `acr` and `auth_time` (a
        // step-up raises them for the next token).
        let authn = gatehouse_domain::mfa::Authn::achieved(signed_in.0);
        let claims = claims.signed_in(Some(&authn), Some(signed_in.1));
        let access_token = jwt::sign(&self.keys.current(), &self.issuer, &self.rng, &claims);
        DashboardGrant {
            org: org.clone(),
            user: user.id.clone(),
            sid,
            access_token,
            expires_at: claims.exp.min(session_expires_at),
            scope: scopes.to_string(),
            session_expires_at,
        }
    }

    /// The grant sealed for the dashboard's cookie.
    pub fn seal_grant(&self, grant: &DashboardGrant) -> String {
        self.seal(GRANT_PURPOSE, grant)
    }

    /// The grant of a dashboard cookie, when it is ours and its session has
    /// not ended.
    pub fn open_grant(&self, sealed: &str) -> Option<DashboardGrant> {
        self.unseal::<DashboardGrant>(GRANT_PURPOSE, sealed)
            .filter(|g| g.session_expires_at > Timestamp::now().unix_seconds())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dashboard_scopes_never_include_admin_or_identity() {
        for role in [Role::Viewer, Role::Editor, Role::Admin] {
            let s = dashboard_scopes(role);
            assert!(!s.contains(Scope::Admin));
            assert!(!s.contains(Scope::OpenId));
            assert!(s.contains(Scope::UsersRead));
        }
        assert!(dashboard_scopes(Role::Admin).contains(Scope::UsersWrite));
        assert!(!dashboard_scopes(Role::Editor).contains(Scope::UsersWrite));
    }
}
