//! Browser sessions (D49, D57): the sign-in's session and its cookie, its
//! browser use, and the explicit ends (the `/v1` endpoints, sign-out,
//! logout) that revoke the chains begun in it on every node.
//!
//! The rules (when the browser sign-in ends, when a use is written, what a
//! selection reaches) are `gatehouse_domain::session`'s; storage applies an
//! end in one transaction with its `session.revoked` events; this layer
//! pulls the revocations it wrote into this node's memory at once (other
//! nodes within a second, D44).

use gatehouse_auth::flows::digest;
use gatehouse_domain::effect;
use gatehouse_domain::event::{Origin, RequestRef};
use gatehouse_domain::session::{BrowserUse, SessionLimits, SessionSelect};
use gatehouse_domain::{
    ChainId, ClientId, Listing, OrgId, Page, SessionId, Timestamp, User, UserId, UserStatus, random,
};
use gatehouse_store::{Session, StoreError};

use crate::error::{AppError, AppResult, OrApp};
use crate::{App, Resource};

/// A person's sessions as `GET /v1/me/sessions` shows them: a page, and
/// which of them is the caller's (`current`).
pub struct MySessions {
    pub listing: Listing<Session>,
    pub current: Option<SessionId>,
}

impl App {
    /// D57 (D40 continued): `GATEHOUSE_SESSION_IDLE` and `_MAX`.
    pub fn with_session_limits(mut self, limits: SessionLimits) -> Self {
        std::sync::Arc::get_mut(&mut self.0)
            .expect("settings are applied before the App is shared")
            .session_limits = limits;
        self
    }

    pub fn session_limits(&self) -> SessionLimits {
        self.0.session_limits
    }

    /// A sign-in by password to `client` in the browser `browser`: a new
    /// session (whose `created_at` is the `auth_time`, D49) and the value
    /// of its cookie, stored with `user.signed_in` (D54).
    pub async fn create_session(
        &self,
        user: &User,
        org: &OrgId,
        client: &ClientId,
        browser: &BrowserUse,
        request: Option<RequestRef>,
    ) -> Result<(String, Session), StoreError> {
        self.create_session_with(user, org, client, browser, request, &[])
            .await
    }

    /// [`App::create_session`] after a second step (D56): the session's
    /// `amr` is `amr` (a password's when empty).
    pub async fn create_session_with(
        &self,
        user: &User,
        org: &OrgId,
        client: &ClientId,
        browser: &BrowserUse,
        request: Option<RequestRef>,
        amr: &[String],
    ) -> Result<(String, Session), StoreError> {
        let token = random::token("", 256);
        let mut session = Session::signed_in(
            org,
            &user.id,
            browser,
            &self.0.session_limits,
            Timestamp::now(),
        );
        if !amr.is_empty() {
            session.amr = amr.to_vec();
        }
        let origin = Origin {
            actor: gatehouse_domain::event::Actor::User {
                user: user.id.clone(),
                client: Some(client.clone()),
            },
            request,
        };
        let effects = effect::of_sign_in(&self.teller(&origin), &session, client);
        session_store(self)
            .create_session(org, &digest(&token), &session, &effects)
            .await?;
        Ok((token, session))
    }

    /// The session of a cookie, whatever its organization, while its
    /// browser sign-in lasts (D57).
    pub async fn session(&self, cookie: &str) -> Result<Option<Session>, StoreError> {
        let now = Timestamp::now();
        Ok(session_store(self)
            .resolve_session(&digest(cookie))
            .await?
            .filter(|s| s.browser_live(now)))
    }

    /// The active user of a session cookie in `org`, with the session. A
    /// use by `browser` is written as D57 says (at most once a minute,
    /// sooner when the address or agent changed), which also extends the
    /// browser sign-in's idle time.
    pub async fn session_user(
        &self,
        cookie: &str,
        org: &OrgId,
        browser: &BrowserUse,
    ) -> Result<Option<(User, Session)>, StoreError> {
        let Some(mut sess) = self.session(cookie).await? else {
            return Ok(None);
        };
        if &sess.org != org {
            return Ok(None);
        }
        let Some(user) = user_store(self)
            .get_user(org, &sess.user)
            .await?
            .filter(|u| u.status == UserStatus::Active)
        else {
            return Ok(None);
        };
        sess = self.note_browser_use(sess, browser).await?;
        Ok(Some((user, sess)))
    }

    /// Writes a browser use of `sess` when D57 says it is due (at most once
    /// a minute; the address and agent when they changed); the session as
    /// it is afterwards.
    pub(crate) async fn note_browser_use(
        &self,
        sess: Session,
        browser: &BrowserUse,
    ) -> Result<Session, StoreError> {
        match sess.browser_use(browser, &self.0.session_limits, Timestamp::now()) {
            Some(seen) => {
                session_store(self)
                    .record_browser_use(&seen.org, &seen)
                    .await?;
                Ok(seen)
            }
            None => Ok(sess),
        }
    }

    /// D49, D57: sign-out and `/oauth/logout` end the session of `cookie`
    /// explicitly: the chains begun in it and their access tokens are
    /// revoked, `session.revoked` told (the person, through `client` when
    /// the request named one, in `request`). Nothing happens for an
    /// unknown cookie.
    pub async fn logout(
        &self,
        cookie: &str,
        request: Option<RequestRef>,
        client: Option<ClientId>,
    ) -> AppResult<()> {
        let Some(sess) = session_store(self)
            .resolve_session(&digest(cookie))
            .await
            .or_app(Resource::Storage)?
        else {
            return Ok(());
        };
        let origin = Origin {
            actor: gatehouse_domain::event::Actor::User {
                user: sess.user.clone(),
                client,
            },
            request,
        };
        // D58: `user.signed_out`, in the ending's transaction.
        let now = Timestamp::now();
        let signed_out = gatehouse_domain::audit::security(
            "user.signed_out",
            Some(origin.actor.clone()),
            Some((
                gatehouse_domain::audit::TargetType::Session,
                sess.id.as_str().to_owned(),
            )),
            origin.request.as_ref(),
            now,
        );
        let ended = session_store(self)
            .end_sessions_with(
                &sess.org,
                &sess.user,
                &SessionSelect::One(sess.id.clone()),
                now,
                &self.teller(&origin),
                &[gatehouse_domain::effect::Effect::Audit(Box::new(
                    signed_out,
                ))],
            )
            .await
            .or_app(Resource::Session)?;
        if !ended.is_empty() {
            self.sync_revocations().await?;
        }
        Ok(())
    }

    /// The session the caller's token acts in (D57's `current`): the one
    /// its refresh chain was begun in, or, for the dashboard's tokens, the
    /// browser session they carry.
    pub async fn current_session(
        &self,
        org: &OrgId,
        chain: Option<&ChainId>,
    ) -> AppResult<Option<SessionId>> {
        let Some(chain) = chain else {
            return Ok(None);
        };
        if let Some(id) = SessionId::parse(chain.as_str()) {
            return Ok(Some(id));
        }
        session_store(self)
            .session_of_chain(org, chain)
            .await
            .or_app(Resource::Storage)
    }

    /// `GET /v1/me/sessions` (D57).
    pub async fn my_sessions(
        &self,
        org: &OrgId,
        me: &UserId,
        chain: Option<&ChainId>,
        page: Page,
    ) -> AppResult<MySessions> {
        let (items, total) = session_store(self)
            .list_sessions(org, me, page, Timestamp::now())
            .await
            .or_app(Resource::Session)?;
        Ok(MySessions {
            listing: Listing { items, total },
            current: self.current_session(org, chain).await?,
        })
    }

    /// `DELETE /v1/me/sessions/{ses_id}` and the admin's
    /// `DELETE /v1/users/{id}/sessions/{ses_id}` (D57): 404 when it is not a
    /// listed session of that person.
    pub async fn end_session(
        &self,
        org: &OrgId,
        user: &UserId,
        id: &SessionId,
        origin: &Origin,
    ) -> AppResult<()> {
        let ended = self
            .end_sessions(org, user, SessionSelect::One(id.clone()), origin)
            .await?;
        if ended.is_empty() {
            return Err(AppError::NotFound(Resource::Session));
        }
        Ok(())
    }

    /// `POST /v1/me/sessions/revoke-others` (D57): every session of the
    /// person but the one the caller's token acts in; how many ended.
    pub async fn revoke_other_sessions(
        &self,
        org: &OrgId,
        me: &UserId,
        chain: Option<&ChainId>,
        origin: &Origin,
    ) -> AppResult<u64> {
        let select = match self.current_session(org, chain).await? {
            Some(current) => SessionSelect::AllBut(current),
            None => SessionSelect::All,
        };
        let ended = self.end_sessions(org, me, select, origin).await?;
        Ok(ended.len() as u64)
    }

    /// `GET /v1/users/{id}/sessions` (D57): 404 for a person outside the
    /// organization.
    pub async fn user_sessions(
        &self,
        org: &OrgId,
        user: &UserId,
        page: Page,
    ) -> AppResult<Listing<Session>> {
        self.get_user(org, user).await?;
        let (items, total) = session_store(self)
            .list_sessions(org, user, page, Timestamp::now())
            .await
            .or_app(Resource::Session)?;
        Ok(Listing { items, total })
    }

    /// `DELETE /v1/users/{id}/sessions` (D57): every session of the person.
    pub async fn end_all_sessions(
        &self,
        org: &OrgId,
        user: &UserId,
        origin: &Origin,
    ) -> AppResult<u64> {
        self.get_user(org, user).await?;
        let ended = self
            .end_sessions(org, user, SessionSelect::All, origin)
            .await?;
        Ok(ended.len() as u64)
    }

    /// Ends the sessions `select` reaches in one transaction and brings
    /// the revocations it wrote into this node's memory at once.
    pub(crate) async fn end_sessions(
        &self,
        org: &OrgId,
        user: &UserId,
        select: SessionSelect,
        origin: &Origin,
    ) -> AppResult<Vec<Session>> {
        let ended = session_store(self)
            .end_sessions(org, user, &select, Timestamp::now(), &self.teller(origin))
            .await
            .or_app(Resource::Session)?;
        if !ended.is_empty() {
            self.sync_revocations().await?;
        }
        Ok(ended)
    }
}

/// Why a password change was refused (D19 continued), by the field to show
/// it next to.
#[derive(Debug)]
pub enum PasswordChangeError {
    /// The current password is wrong, or sign-in is paused for the account
    /// after too many failures (D26): the same answer for both.
    Current,
    /// The new password breaks D19's rules (the rule in words).
    Rule(String),
    /// The two new passwords differ.
    Mismatch,
    /// The person cannot change it (no longer active), or storage failed.
    Failed(AppError),
}

impl App {
    /// D19 (continued): a signed-in person changes their password in the
    /// session `kept`: the current one (checked like a sign-in, D26's
    /// throttle included), the new one twice under D19's rules. Their other
    /// sessions end, they are e-mailed, `user.password_changed` is told.
    #[allow(clippy::too_many_arguments)]
    pub async fn change_password(
        &self,
        org: &OrgId,
        user: &User,
        kept: &SessionId,
        current: &str,
        new: &str,
        again: &str,
        source: &str,
        request: Option<RequestRef>,
    ) -> Result<User, PasswordChangeError> {
        match self
            .login(
                org,
                user.email.as_str(),
                current,
                source,
                None,
                request.as_ref(),
            )
            .await
        {
            Ok(u) if u.id == user.id => {}
            Ok(_) | Err(gatehouse_auth::flows::LoginError::Failed) => {
                return Err(PasswordChangeError::Current);
            }
            Err(gatehouse_auth::flows::LoginError::Unavailable(e)) => {
                return Err(PasswordChangeError::Failed(AppError::Unavailable(e)));
            }
        }
        gatehouse_auth::password::check_policy(new, user.email.as_str())
            .map_err(PasswordChangeError::Rule)?;
        if new != again {
            return Err(PasswordChangeError::Mismatch);
        }
        let hash = gatehouse_auth::password::hash(new.to_owned()).await;
        let mail = gatehouse_domain::link::OutboundEmail {
            to: user.email.as_str().to_owned(),
            subject: "Your Gatehouse password was changed".into(),
            body: format!(
                "The password of this account was changed, and every other browser where it was signed in was signed out.\n\nIf it was not you, reset your password at once from the sign-in page ({}) and tell your organization's admins.\n",
                self.public_url()
            ),
        };
        let origin = Origin {
            actor: gatehouse_domain::event::Actor::User {
                user: user.id.clone(),
                client: Some(gatehouse_auth::dashboard::dashboard_client_id()),
            },
            request,
        };
        let after = user_links(self)
            .change_password(
                org,
                &user.id,
                &hash,
                kept,
                &mail,
                Timestamp::now(),
                &self.teller(&origin),
            )
            .await
            .or_app(Resource::User)
            .map_err(PasswordChangeError::Failed)?;
        self.sync_revocations()
            .await
            .map_err(PasswordChangeError::Failed)?;
        Ok(after)
    }
}

fn user_links(app: &App) -> &dyn gatehouse_store::LinkStore {
    app.0.store.as_ref()
}

/// This area's view of storage (issue 25).
fn session_store(app: &App) -> &dyn gatehouse_store::SessionStore {
    app.0.store.as_ref()
}

fn user_store(app: &App) -> &dyn gatehouse_store::UserStore {
    app.0.store.as_ref()
}
