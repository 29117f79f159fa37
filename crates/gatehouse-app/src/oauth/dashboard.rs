//! The developer dashboard's built-in client (D48): sign-in across
//! organizations, the choice of organization and the codes (spent once in
//! storage, bound to the browser session, D48 continued), the grant's
//! refresh and revocation. Sealing, scopes and minting are
//! `gatehouse_auth::dashboard`'s.

use gatehouse_auth::dashboard::*;
use gatehouse_auth::flows::{AuthorizeError, AuthorizeParams, LoginError};
use gatehouse_auth::{OAuthError, OAuthErrorKind, password, pkce, secrets, throttle};
use gatehouse_domain::{Email, OrgId, Timestamp, User, UserId, UserStatus};
use gatehouse_store::{Session, StoreError};

use crate::App;
use crate::oauth::OrOAuth;

impl App {
    /// D48: e-mail and password checked against every organization: the
    /// active accounts whose password matches, each organization's
    /// throttle (D26) applied to its own account. No match records a
    /// failure in every organization where the address has an account.
    ///
    /// This reads each organization in turn (the store has no look-up of
    /// an address across organizations); fine for the number of
    /// organizations a deployment has today.
    ///
    /// D58: a failure is recorded in each organization where the address
    /// has an account (with that account's reason); one that matches no
    /// organization is recorded nowhere.
    pub async fn login_anywhere(
        &self,
        email: &str,
        pw: &str,
        source: &str,
        request: Option<&gatehouse_domain::event::RequestRef>,
    ) -> Result<Vec<Match>, LoginError> {
        use gatehouse_domain::audit::SignInFailure;
        let unavailable = |e: StoreError| LoginError::Unavailable(e.to_string());
        let Ok(email) = Email::parse_for_lookup(email) else {
            return Err(LoginError::Failed);
        };
        let norm = email.normalized();
        let now = Timestamp::now();
        let orgs = org_store(self).list_orgs().await.map_err(unavailable)?;
        let mut found = Vec::new();
        for org in orgs {
            if let Some((user, hash)) = user_store(self)
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
        // Why each organization's account did not sign in (D58).
        let mut reasons: Vec<(OrgId, UserId, SignInFailure)> = Vec::new();
        for (org, user, hash) in &found {
            let failures = grant_store(self)
                .login_failures(&org.id, &norm, throttle::lookback(now))
                .await
                .map_err(unavailable)?;
            if throttle::is_locked(&failures, source, now) {
                reasons.push((org.id.clone(), user.id.clone(), SignInFailure::Throttled));
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
                    reasons.push((
                        org.id.clone(),
                        user.id.clone(),
                        SignInFailure::BadCredentials,
                    ));
                }
            } else {
                reasons.push((org.id.clone(), user.id.clone(), SignInFailure::Inactive));
            }
        }
        let dashboard = dashboard_client_id();
        for (org, user, reason) in &reasons {
            // With a match elsewhere only the wrong passwords are failures.
            if matched.is_empty() || *reason == SignInFailure::BadCredentials {
                self.record_sign_in_failure(
                    org,
                    *reason,
                    Some(user),
                    None,
                    Some(&dashboard),
                    request,
                )
                .await;
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
            grant_store(self)
                .record_login_failure(org, &norm, source, now)
                .await
                .map_err(unavailable)?;
        }
        if matched.is_empty() {
            return Err(LoginError::Failed);
        }
        Ok(matched)
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
        let Some(pick) = self.authority().unseal_pick(sealed) else {
            return Ok(None);
        };
        if pick.exp < Timestamp::now().unix_seconds() {
            return Ok(None);
        }
        let Some((org, user)) = pick.accounts.into_iter().find(|(o, _)| o.as_str() == org) else {
            return Ok(None);
        };
        if !grant_store(self)
            .use_once(
                &secrets::hash_secret(&pick.nonce),
                Timestamp::from_unix_seconds(pick.exp),
            )
            .await?
        {
            return Ok(None);
        }
        Ok(user_store(self)
            .get_user(&org, &user)
            .await?
            .filter(|u| u.status == UserStatus::Active)
            .map(|u| (org, u)))
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
        if !self.authority().is_dashboard_secret(client_secret) {
            return Err(OAuthError::new(
                OAuthErrorKind::InvalidClient,
                "client authentication failed",
            ));
        }
        let bad = || OAuthError::new(OAuthErrorKind::InvalidGrant, "the code is not valid");
        let sealed: SealedCode = self.authority().unseal_code(code).ok_or_else(bad)?;
        let now = Timestamp::now();
        if sealed.exp < now.unix_seconds() || !pkce::verify(verifier, &sealed.challenge) {
            return Err(bad());
        }
        // Bound to the browser session that signed in: the code alone, in
        // another browser, signs nobody in.
        let same = self
            .same_browser_session(session_cookie, &sealed.org, &sealed.user, &sealed.sid)
            .await
            .or_oauth()?;
        let Some(session) = same else {
            return Err(OAuthError::new(
                OAuthErrorKind::InvalidGrant,
                "the code belongs to another browser session",
            ));
        };
        if !grant_store(self)
            .use_once(
                &secrets::hash_secret(&sealed.nonce),
                Timestamp::from_unix_seconds(sealed.exp),
            )
            .await
            .or_oauth()?
        {
            return Err(bad());
        }
        let user = user_store(self)
            .get_user(&sealed.org, &sealed.user)
            .await
            .or_oauth()?
            .filter(|u| u.status == UserStatus::Active)
            .ok_or_else(bad)?;
        Ok(self.authority().mint_dashboard(
            &sealed.org,
            &user,
            sealed.sid,
            (&session.amr, session.auth_time),
            // D57: the grant lasts at most as long as its browser sign-in
            // can; each refresh checks that the sign-in still lasts.
            session
                .created_at
                .plus_seconds(self.session_limits().max_secs)
                .unix_seconds(),
        ))
    }

    /// Whether `cookie` is a live Gatehouse browser session of this person
    /// in this organization with this `sid`: what the dashboard's code and
    /// grant are bound to (D48 continued).
    async fn same_browser_session(
        &self,
        cookie: Option<&str>,
        org: &OrgId,
        user: &UserId,
        sid: &Option<String>,
    ) -> Result<Option<Session>, StoreError> {
        let Some(cookie) = cookie else {
            return Ok(None);
        };
        Ok(self
            .session(cookie)
            .await?
            .filter(|s| &s.org == org && &s.user == user && sid.as_deref() == Some(s.id.as_str())))
    }

    /// A new access token for the grant, while the Gatehouse browser
    /// session it began in (`session_cookie`) is live and of the same user,
    /// and the user is active. The scopes follow the user's role now.
    /// Using the dashboard is a browser use of that session (D57): it is
    /// noted here, at each refresh, so the idle time runs from the latest.
    pub async fn refresh_dashboard(
        &self,
        grant: &DashboardGrant,
        session_cookie: Option<&str>,
        browser: &gatehouse_domain::session::BrowserUse,
    ) -> Result<DashboardGrant, DashboardRefreshError> {
        let same = self
            .same_browser_session(session_cookie, &grant.org, &grant.user, &grant.sid)
            .await
            .map_err(|e| DashboardRefreshError::Unavailable(e.to_string()))?;
        let Some(session) = same else {
            return Err(DashboardRefreshError::Ended);
        };
        let signed = (session.amr.clone(), session.auth_time);
        self.note_browser_use(session, browser)
            .await
            .map_err(|e| DashboardRefreshError::Unavailable(e.to_string()))?;
        let user = user_store(self)
            .get_user(&grant.org, &grant.user)
            .await
            .map_err(|e| DashboardRefreshError::Unavailable(e.to_string()))?
            .filter(|u| u.status == UserStatus::Active)
            .ok_or(DashboardRefreshError::Ended)?;
        Ok(self.authority().mint_dashboard(
            &grant.org,
            &user,
            grant.sid.clone(),
            (&signed.0, signed.1),
            grant.session_expires_at,
        ))
    }

    /// Sign-out: the grant's access token stops working at once.
    pub async fn revoke_dashboard(&self, grant: &DashboardGrant) -> Result<(), OAuthError> {
        let now = Timestamp::now().unix_seconds();
        if let Ok(claims) = gatehouse_auth::jwt::verify(
            &self.authority().keys().current(),
            self.authority().issuer(),
            &grant.access_token,
            now,
        ) {
            self.revoke_jti_now(&claims.jti, Timestamp::from_unix_seconds(claims.exp + 60))
                .await?;
        }
        Ok(())
    }

    /// Checks an authorization request of the built-in client.
    pub fn check_dashboard_authorize(
        &self,
        params: &AuthorizeParams,
    ) -> Result<DashboardRequest, AuthorizeError> {
        self.authority().check_dashboard_authorize(params)
    }

    pub fn seal_pick(&self, matches: &[Match]) -> String {
        self.authority().seal_pick(matches)
    }

    /// The browser session of a cookie, whatever its organization.
    pub async fn any_session_user(
        &self,
        cookie: &str,
        browser: &gatehouse_domain::session::BrowserUse,
    ) -> Result<Option<(User, Session)>, StoreError> {
        let Some(session) = self.session(cookie).await? else {
            return Ok(None);
        };
        let org = session.org.clone();
        self.session_user(cookie, &org, browser).await
    }

    pub fn issue_dashboard_code(
        &self,
        req: &DashboardRequest,
        user: &User,
        org: &OrgId,
        session: &Session,
    ) -> String {
        self.authority()
            .issue_dashboard_code(req, user, org, session)
    }

    pub fn dashboard_secret(&self) -> String {
        self.authority().dashboard_secret()
    }

    pub fn dashboard_redirect_uri(&self) -> String {
        self.authority().dashboard_redirect_uri()
    }

    pub fn seal_grant(&self, grant: &DashboardGrant) -> String {
        self.authority().seal_grant(grant)
    }

    pub fn open_grant(&self, sealed: &str) -> Option<DashboardGrant> {
        self.authority().open_grant(sealed)
    }
}

/// This area's view of storage: the `OrgStore` trait only (issue 25).
fn org_store(app: &App) -> &dyn gatehouse_store::OrgStore {
    app.0.store.as_ref()
}

/// This area's view of storage: the `UserStore` trait only (issue 25).
fn user_store(app: &App) -> &dyn gatehouse_store::UserStore {
    app.0.store.as_ref()
}

/// This area's view of storage: the `GrantStore` trait only (issue 25).
fn grant_store(app: &App) -> &dyn gatehouse_store::GrantStore {
    app.0.store.as_ref()
}
