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
use gatehouse_domain::{
    ClientId, Email, OrgId, Organization, Role, Scope, ScopeSet, Timestamp, User, UserId,
    UserStatus, random,
};
use gatehouse_store::{Session, StoreError};
use serde::{Deserialize, Serialize};
use subtle::ConstantTimeEq;

use crate::error::{OAuthError, OAuthErrorKind};
use crate::flows::{AuthorizeError, AuthorizeParams, LoginError};
use crate::grants::AuthService;
use crate::jwt::{self, AccessClaims};
use crate::{password, pkce, secrets, throttle};

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

#[derive(Serialize, Deserialize)]
struct SealedCode {
    org: OrgId,
    user: UserId,
    challenge: String,
    sid: Option<String>,
    exp: i64,
    nonce: String,
}

#[derive(Serialize, Deserialize)]
struct SealedPick {
    accounts: Vec<(OrgId, UserId)>,
    exp: i64,
    /// What makes the choice usable once (D48 continued).
    nonce: String,
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
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl AuthService {
    fn seal(&self, purpose: &[u8], value: &impl Serialize) -> String {
        let plain = serde_json::to_vec(value).expect("serializable");
        B64.encode(self.keys.master().encrypt(&plain, purpose))
    }

    fn unseal<T: for<'de> Deserialize<'de>>(&self, purpose: &[u8], text: &str) -> Option<T> {
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

    /// D48: e-mail and password checked against every organization: the
    /// active accounts whose password matches, each organization's
    /// throttle (D26) applied to its own account. No match records a
    /// failure in every organization where the address has an account.
    ///
    /// This reads each organization in turn (the store has no look-up of
    /// an address across organizations); fine for the number of
    /// organizations a deployment has today.
    pub async fn login_anywhere(
        &self,
        email: &str,
        pw: &str,
        source: &str,
    ) -> Result<Vec<Match>, LoginError> {
        let unavailable = |e: StoreError| LoginError::Unavailable(e.to_string());
        let Ok(email) = Email::parse_for_lookup(email) else {
            return Err(LoginError::Failed);
        };
        let norm = email.normalized();
        let now = Timestamp::now();
        let orgs = self.store.list_orgs().await.map_err(unavailable)?;
        let mut found = Vec::new();
        for org in orgs {
            if let Some((user, hash)) = self
                .store
                .find_user_by_email(&org.id, &email)
                .await
                .map_err(unavailable)?
            {
                found.push((org, user, hash));
            }
        }
        let mut matched = Vec::new();
        // D26: every account whose password did not match counts a failure,
        // even when another organization's account matched, so knowing one
        // account's password buys no unthrottled guesses at another's.
        let mut missed = Vec::new();
        let mut checked = false;
        for (org, user, hash) in &found {
            let failures = self
                .store
                .login_failures(&org.id, &norm, throttle::lookback(now))
                .await
                .map_err(unavailable)?;
            if throttle::is_locked(&failures, source, now) {
                continue;
            }
            if let (UserStatus::Active, Some(hash)) = (user.status, hash) {
                checked = true;
                if password::verify(pw.to_owned(), hash.clone()).await {
                    matched.push(Match {
                        org: org.clone(),
                        user: user.clone(),
                    });
                } else {
                    missed.push(org.id.clone());
                }
            }
        }
        if !checked {
            // The same work as a real check, so timing tells little.
            password::verify(pw.to_owned(), password::dummy_hash().to_owned()).await;
        }
        let failed: Vec<&OrgId> = if matched.is_empty() {
            found.iter().map(|(org, _, _)| &org.id).collect()
        } else {
            missed.iter().collect()
        };
        for org in failed {
            self.store
                .record_login_failure(org, &norm, source, now)
                .await
                .map_err(unavailable)?;
        }
        if matched.is_empty() {
            return Err(LoginError::Failed);
        }
        Ok(matched)
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

    /// The account picked from a sealed choice: `None` when the choice is
    /// forged, expired, used before (on any node), or `org` is not among
    /// it, or the user is no longer active. A choice is spent by its first
    /// use, whatever follows (D48 continued).
    pub async fn open_pick(
        &self,
        sealed: &str,
        org: &str,
    ) -> Result<Option<(OrgId, User)>, StoreError> {
        let Some(pick) = self.unseal::<SealedPick>(PICK_PURPOSE, sealed) else {
            return Ok(None);
        };
        if pick.exp < Timestamp::now().unix_seconds() {
            return Ok(None);
        }
        let Some((org, user)) = pick.accounts.into_iter().find(|(o, _)| o.as_str() == org) else {
            return Ok(None);
        };
        if !self
            .store
            .use_once(
                &secrets::hash_secret(&pick.nonce),
                Timestamp::from_unix_seconds(pick.exp),
            )
            .await?
        {
            return Ok(None);
        }
        Ok(self
            .store
            .get_user(&org, &user)
            .await?
            .filter(|u| u.status == UserStatus::Active)
            .map(|u| (org, u)))
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
                sid: session.sid.clone(),
                exp: Timestamp::now().unix_seconds() + DASHBOARD_CODE_TTL_SECS,
                nonce: random::base62(128),
            },
        )
    }

    /// The built-in client redeems a code: its secret, the PKCE verifier,
    /// the cookie of the browser session the code was issued in
    /// (`session_cookie`: live, same user, organization and `sid`), a live
    /// code used once on any node (D48 continued). The grant's access
    /// token acts for the user with [`dashboard_scopes`] of the user's role
    /// now.
    pub async fn dashboard_token(
        &self,
        code: &str,
        verifier: &str,
        client_secret: &str,
        session_cookie: Option<&str>,
    ) -> Result<DashboardGrant, OAuthError> {
        let ok: bool = self
            .dashboard_secret()
            .as_bytes()
            .ct_eq(client_secret.as_bytes())
            .into();
        if !ok {
            return Err(OAuthError::new(
                OAuthErrorKind::InvalidClient,
                "client authentication failed",
            ));
        }
        let bad = || OAuthError::new(OAuthErrorKind::InvalidGrant, "the code is not valid");
        let sealed: SealedCode = self.unseal(CODE_PURPOSE, code).ok_or_else(bad)?;
        let now = Timestamp::now();
        if sealed.exp < now.unix_seconds() || !pkce::verify(verifier, &sealed.challenge) {
            return Err(bad());
        }
        // Bound to the browser session that signed in: the code alone, in
        // another browser, signs nobody in.
        let session = match session_cookie {
            Some(cookie) => self.session(cookie).await?,
            None => None,
        };
        let same = session
            .is_some_and(|s| s.org == sealed.org && s.user == sealed.user && s.sid == sealed.sid);
        if !same {
            return Err(OAuthError::new(
                OAuthErrorKind::InvalidGrant,
                "the code belongs to another browser session",
            ));
        }
        if !self
            .store
            .use_once(
                &secrets::hash_secret(&sealed.nonce),
                Timestamp::from_unix_seconds(sealed.exp),
            )
            .await?
        {
            return Err(bad());
        }
        let user = self
            .store
            .get_user(&sealed.org, &sealed.user)
            .await?
            .filter(|u| u.status == UserStatus::Active)
            .ok_or_else(bad)?;
        Ok(self.mint_dashboard(
            &sealed.org,
            &user,
            sealed.sid,
            now.unix_seconds() + crate::flows::SESSION_TTL_SECS,
        ))
    }

    fn mint_dashboard(
        &self,
        org: &OrgId,
        user: &User,
        sid: Option<String>,
        session_expires_at: i64,
    ) -> DashboardGrant {
        let scopes = dashboard_scopes(user.role);
        let claims = AccessClaims::issue(
            org.clone(),
            dashboard_client_id(),
            Some(user.id.clone()),
            scopes,
        );
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

    /// A new access token for the grant, while the Gatehouse browser
    /// session it began in (`session_cookie`) is live and of the same user,
    /// and the user is active. The scopes follow the user's role now.
    pub async fn refresh_dashboard(
        &self,
        grant: &DashboardGrant,
        session_cookie: Option<&str>,
    ) -> Result<DashboardGrant, DashboardRefreshError> {
        let cookie = session_cookie.ok_or(DashboardRefreshError::Ended)?;
        let session = self
            .session(cookie)
            .await?
            .ok_or(DashboardRefreshError::Ended)?;
        if session.org != grant.org || session.user != grant.user || session.sid != grant.sid {
            return Err(DashboardRefreshError::Ended);
        }
        let user = self
            .store
            .get_user(&grant.org, &grant.user)
            .await?
            .filter(|u| u.status == UserStatus::Active)
            .ok_or(DashboardRefreshError::Ended)?;
        Ok(self.mint_dashboard(
            &grant.org,
            &user,
            grant.sid.clone(),
            grant.session_expires_at,
        ))
    }

    /// Sign-out: the grant's access token stops working at once.
    pub async fn revoke_dashboard(&self, grant: &DashboardGrant) -> Result<(), OAuthError> {
        let now = Timestamp::now().unix_seconds();
        if let Ok(claims) =
            jwt::verify(&self.keys.current(), &self.issuer, &grant.access_token, now)
        {
            self.revoke_jti_now(&claims.jti, Timestamp::from_unix_seconds(claims.exp + 60))
                .await?;
        }
        Ok(())
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
