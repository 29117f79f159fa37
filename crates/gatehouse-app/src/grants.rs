//! The authorization server's use cases as the HTTP layer calls them: the
//! token grants and revocation (D20–D25), the failed-authentication guard
//! (D28), and the sign-in and consent steps of the authorization-code flow
//! (D26, D29). Each delegates to [`AuthService`], which keeps the in-memory
//! state (caches, revocation set, rate limits) of a serving process.

use std::net::IpAddr;

use gatehouse_auth::flows::{AuthorizeError, AuthorizeParams, AuthorizeRequest, LoginError};
use gatehouse_auth::{AuthService, ClientAuth, IssuedTokens, OAuthError};
use gatehouse_domain::{OrgId, ScopeSet, User};
use gatehouse_store::StoreError;

use crate::App;

impl App {
    /// The auth service of a serving process. Only an operator command's
    /// `App` has none, and it serves no requests.
    fn authority(&self) -> &AuthService {
        self.auth()
            .expect("the OAuth use cases run on App::new, which has the auth service")
    }

    /// `grant_type=client_credentials` (D20, D22).
    pub async fn client_credentials(
        &self,
        client: &ClientAuth,
        scope: Option<&str>,
    ) -> Result<IssuedTokens, OAuthError> {
        self.authority().client_credentials(client, scope).await
    }

    /// `grant_type=authorization_code` with PKCE (D26).
    pub async fn authorization_code(
        &self,
        client: &ClientAuth,
        code: Option<&str>,
        redirect_uri: Option<&str>,
        verifier: Option<&str>,
    ) -> Result<IssuedTokens, OAuthError> {
        self.authority()
            .authorization_code(client, code, redirect_uri, verifier)
            .await
    }

    /// `grant_type=refresh_token` (D24).
    pub async fn refresh(
        &self,
        client: &ClientAuth,
        refresh_token: Option<&str>,
        scope: Option<&str>,
    ) -> Result<IssuedTokens, OAuthError> {
        self.authority().refresh(client, refresh_token, scope).await
    }

    /// `POST /oauth/revoke` (D25, RFC 7009).
    pub async fn revoke(
        &self,
        client: &ClientAuth,
        token: &str,
        hint: Option<&str>,
    ) -> Result<(), OAuthError> {
        self.authority().revoke(client, token, hint).await
    }

    /// D28: seconds to wait when `client_id` or `source` failed to
    /// authenticate too often.
    pub fn auth_failures_blocked(&self, client_id: Option<&str>, source: IpAddr) -> Option<u64> {
        self.authority().auth_failures_blocked(client_id, source)
    }

    /// D28: counts a failed client authentication.
    pub fn record_auth_failure(&self, client_id: Option<&str>, source: IpAddr) {
        self.authority().record_auth_failure(client_id, source);
    }

    /// Checks an authorization request (D26).
    pub async fn check_authorize(
        &self,
        params: &AuthorizeParams,
    ) -> Result<AuthorizeRequest, AuthorizeError> {
        self.authority().check_authorize(params).await
    }

    /// The sign-in form (D26).
    pub async fn login(
        &self,
        org: &OrgId,
        email: &str,
        password: &str,
        source: &str,
    ) -> Result<User, LoginError> {
        self.authority().login(org, email, password, source).await
    }

    /// A browser session after sign-in; the cookie's value.
    pub async fn create_session(&self, user: &User, org: &OrgId) -> Result<String, StoreError> {
        self.authority().create_session(user, org).await
    }

    /// The user of a session cookie, if it is live and of `org`.
    pub async fn session_user(
        &self,
        cookie: &str,
        org: &OrgId,
    ) -> Result<Option<User>, StoreError> {
        self.authority().session_user(cookie, org).await
    }

    /// An authorization code for the consented scopes (D26, D29).
    pub async fn issue_code(
        &self,
        req: &AuthorizeRequest,
        user: &User,
        scopes: ScopeSet,
    ) -> Result<String, StoreError> {
        self.authority().issue_code(req, user, scopes).await
    }
}
