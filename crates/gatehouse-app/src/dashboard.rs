//! The developer dashboard's built-in client (D48): sign-in across
//! organizations, its codes and its grant. Each delegates to
//! [`AuthService`](gatehouse_auth::AuthService) (`gatehouse_auth::dashboard`).

use gatehouse_auth::OAuthError;
use gatehouse_auth::dashboard::{DashboardGrant, DashboardRefreshError, DashboardRequest, Match};
use gatehouse_auth::flows::{AuthorizeError, AuthorizeParams, LoginError};
use gatehouse_domain::{OrgId, User};
use gatehouse_store::{Session, StoreError};

use crate::App;

impl App {
    fn dashboard_auth(&self) -> &gatehouse_auth::AuthService {
        self.auth()
            .expect("the dashboard runs on App::new, which has the auth service")
    }

    /// Checks an authorization request of the built-in client.
    pub fn check_dashboard_authorize(
        &self,
        params: &AuthorizeParams,
    ) -> Result<DashboardRequest, AuthorizeError> {
        self.dashboard_auth().check_dashboard_authorize(params)
    }

    /// E-mail and password against every organization (D48).
    pub async fn login_anywhere(
        &self,
        email: &str,
        password: &str,
        source: &str,
    ) -> Result<Vec<Match>, LoginError> {
        self.dashboard_auth()
            .login_anywhere(email, password, source)
            .await
    }

    pub fn seal_pick(&self, matches: &[Match]) -> String {
        self.dashboard_auth().seal_pick(matches)
    }

    pub async fn open_pick(
        &self,
        sealed: &str,
        org: &str,
    ) -> Result<Option<(OrgId, User)>, StoreError> {
        self.dashboard_auth().open_pick(sealed, org).await
    }

    /// The browser session of a cookie, whatever its organization.
    pub async fn any_session_user(
        &self,
        cookie: &str,
    ) -> Result<Option<(User, Session)>, StoreError> {
        let Some(session) = self.session(cookie).await? else {
            return Ok(None);
        };
        let org = session.org.clone();
        self.session_user(cookie, &org).await
    }

    pub fn issue_dashboard_code(
        &self,
        req: &DashboardRequest,
        user: &User,
        org: &OrgId,
        session: &Session,
    ) -> String {
        self.dashboard_auth()
            .issue_dashboard_code(req, user, org, session)
    }

    pub fn dashboard_secret(&self) -> String {
        self.dashboard_auth().dashboard_secret()
    }

    pub fn dashboard_redirect_uri(&self) -> String {
        self.dashboard_auth().dashboard_redirect_uri()
    }

    pub async fn dashboard_token(
        &self,
        code: &str,
        verifier: &str,
        client_secret: &str,
        session_cookie: Option<&str>,
    ) -> Result<DashboardGrant, OAuthError> {
        self.dashboard_auth()
            .dashboard_token(code, verifier, client_secret, session_cookie)
            .await
    }

    pub fn seal_grant(&self, grant: &DashboardGrant) -> String {
        self.dashboard_auth().seal_grant(grant)
    }

    pub fn open_grant(&self, sealed: &str) -> Option<DashboardGrant> {
        self.dashboard_auth().open_grant(sealed)
    }

    pub async fn refresh_dashboard(
        &self,
        grant: &DashboardGrant,
        session_cookie: Option<&str>,
    ) -> Result<DashboardGrant, DashboardRefreshError> {
        self.dashboard_auth()
            .refresh_dashboard(grant, session_cookie)
            .await
    }

    pub async fn revoke_dashboard(&self, grant: &DashboardGrant) -> Result<(), OAuthError> {
        self.dashboard_auth().revoke_dashboard(grant).await
    }
}
