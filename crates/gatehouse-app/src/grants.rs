//! The authorization server's use cases as the HTTP layer calls them: the
//! token grants and revocation (D20–D25), the failed-authentication guard
//! (D28), and the sign-in and consent steps of the authorization-code flow
//! (D26, D29). Each delegates to [`AuthService`], which keeps the in-memory
//! state (caches, revocation set, rate limits) of a serving process.

use std::net::IpAddr;

use gatehouse_auth::flows::{
    AuthorizeError, AuthorizeParams, AuthorizeRequest, LoginError, UserinfoError,
};
use gatehouse_auth::oidc::{Hint, UserInfo};
use gatehouse_auth::{AuthService, ClientAuth, IssuedTokens, OAuthError};
use gatehouse_domain::{Client, ClientId, OrgId, ScopeSet, User, UserId};
use gatehouse_store::{Consent, Session, StoreError};

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

    /// A browser session after sign-in: the cookie's value and the session.
    pub async fn create_session(
        &self,
        user: &User,
        org: &OrgId,
    ) -> Result<(String, Session), StoreError> {
        self.authority().create_session(user, org).await
    }

    /// The user of a session cookie, if it is live and of `org`, with the session.
    pub async fn session_user(
        &self,
        cookie: &str,
        org: &OrgId,
    ) -> Result<Option<(User, Session)>, StoreError> {
        self.authority().session_user(cookie, org).await
    }

    /// An authorization code for the consented scopes (D26, D29), bound to
    /// the session it was issued in (D49).
    pub async fn issue_code(
        &self,
        req: &AuthorizeRequest,
        user: &User,
        session: &Session,
        scopes: ScopeSet,
    ) -> Result<String, StoreError> {
        self.authority()
            .issue_code(req, user, session, scopes)
            .await
    }

    /// D49: whether a remembered consent skips the consent page.
    pub async fn remembered_consent_covers(
        &self,
        req: &AuthorizeRequest,
        user: &User,
        granted: ScopeSet,
    ) -> Result<bool, StoreError> {
        self.authority()
            .remembered_consent_covers(req, user, granted)
            .await
    }

    /// D49: remembers the consent just given.
    pub async fn remember_consent(
        &self,
        req: &AuthorizeRequest,
        user: &User,
        granted: ScopeSet,
    ) -> Result<(), StoreError> {
        self.authority().remember_consent(req, user, granted).await
    }

    /// D49 `/oauth/userinfo`.
    pub async fn userinfo(&self, token: &str) -> Result<UserInfo, UserinfoError> {
        self.authority().userinfo(token).await
    }

    /// D49 logout: the verified `id_token_hint` and its client.
    pub async fn logout_hint(&self, hint: &str) -> Result<Option<(Hint, Client)>, StoreError> {
        self.authority().logout_hint(hint).await
    }

    /// A client by its `client_id` (logout's `client_id` parameter, D49).
    pub async fn resolve_client(&self, id: &ClientId) -> Result<Option<Client>, StoreError> {
        self.store().resolve_client(id).await
    }

    /// The live session of a cookie, whatever its organization (D49 logout).
    pub async fn session(&self, cookie: &str) -> Result<Option<Session>, StoreError> {
        self.authority().session(cookie).await
    }

    /// D49 logout: ends the session and the chains begun in it.
    pub async fn logout(&self, cookie: &str) -> Result<(), OAuthError> {
        self.authority().logout(cookie).await
    }

    /// D49 `GET /v1/me/applications`: the consents a person gave, each with
    /// its application (consents of applications since deleted are gone
    /// with them).
    pub async fn my_applications(
        &self,
        org: &OrgId,
        user: &UserId,
    ) -> crate::AppResult<Vec<(Consent, Client)>> {
        use crate::error::OrApp;
        let consents = self
            .store()
            .list_consents(org, user)
            .await
            .or_app(crate::Resource::Client)?;
        let mut out = Vec::with_capacity(consents.len());
        for c in consents {
            if let Some(client) = self
                .store()
                .resolve_client(&c.client)
                .await
                .or_app(crate::Resource::Client)?
                && &client.org == org
            {
                out.push((c, client));
            }
        }
        Ok(out)
    }

    /// D49 `DELETE /v1/me/applications/{id}`: forgets the consent and
    /// revokes the person's refresh chains and tokens for the application.
    /// `false` when there was nothing to forget.
    pub async fn forget_my_application(
        &self,
        org: &OrgId,
        user: &UserId,
        client: &ClientId,
    ) -> Result<bool, OAuthError> {
        self.authority().forget_consent(org, user, client).await
    }
}
