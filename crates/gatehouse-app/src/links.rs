//! Links sent by e-mail: accepting an invitation (D11) and resetting a
//! forgotten password (D19).

use std::net::IpAddr;
use std::time::Duration;

use gatehouse_auth::{AuthService, password};
use gatehouse_domain::event::{Actor, Origin, RequestRef};
use gatehouse_domain::{
    ClientId, DomainError, Email, OrgId, Timestamp, User, UserId, UserStatus, link,
};
use gatehouse_store::{LinkKind, NewLink};

use crate::App;
use crate::Resource;
use crate::error::{AppError, AppResult, OrApp};

impl App {
    /// The user an invitation link is for, while it can still be used (the
    /// user must still be pending).
    pub async fn invitation_user(&self, token: &str) -> AppResult<Option<User>> {
        self.usable(LinkKind::Invitation, token).await
    }

    /// The user a reset link is for, while it can still be used.
    pub async fn reset_user(&self, token: &str) -> AppResult<Option<User>> {
        self.usable(LinkKind::Reset, token).await
    }

    async fn usable(&self, kind: LinkKind, token: &str) -> AppResult<Option<User>> {
        let rec = link_store(self)
            .resolve_link(kind, &AuthService::link_digest(token))
            .await
            .or_app(Resource::Link)?;
        let now = Timestamp::now();
        Ok(rec
            .filter(|r| link::usable(kind, r.used_at, r.expires_at, r.user.status, now))
            .map(|r| r.user))
    }

    /// D11: the password is set and the user active; `NotFound(Resource::Link)`
    /// when the link was used, expired or replaced meanwhile.
    /// `request` is the page request that sent the password (D54: the
    /// events of the change name it).
    pub async fn accept_invitation(
        &self,
        token: &str,
        password: String,
        request: RequestRef,
    ) -> AppResult<User> {
        let hash = password::hash(password).await;
        link_store(self)
            .accept_invitation(
                &AuthService::link_digest(token),
                &hash,
                Timestamp::now(),
                &self.link_teller(request),
            )
            .await
            .or_app(Resource::Link)
    }

    /// D19: the new password is set and every session and token of the
    /// user ends.
    pub async fn reset_password(
        &self,
        token: &str,
        password: String,
        request: RequestRef,
    ) -> AppResult<User> {
        let hash = password::hash(password).await;
        let now = Timestamp::now();
        let user = link_store(self)
            .reset_password(
                &AuthService::link_digest(token),
                &hash,
                now,
                &self.link_teller(request),
            )
            .await
            .or_app(Resource::Link)?;
        self.note_user_revoked(&user.id, now);
        Ok(user)
    }

    /// D19 (revised): a password reset asked for from `source` for
    /// `asked` (the client whose page was used, and the address typed; `None`
    /// when either is malformed). At most 20 requests per source address an
    /// hour, whatever they ask about: past that, `Err(retry_after)` in
    /// seconds. Otherwise returns at once; the look-up runs on its own task
    /// (after `delay`, tests only), so the answer's timing cannot tell
    /// whether the address has an account. A reset e-mail is queued when the
    /// address is an active account of the client's organization and the
    /// per-account limits allow one. Needs a Tokio runtime.
    pub fn request_password_reset(
        &self,
        source: IpAddr,
        asked: Option<(ClientId, Email)>,
        delay: Duration,
        request: Option<gatehouse_domain::event::RequestRef>,
    ) -> Result<(), u64> {
        // The per-address count lives with the other throttles, in the
        // serving process's auth service (an operator `App` serves no page).
        if let Some(auth) = self.auth() {
            auth.admit_reset_request(source)?;
        }
        if let Some((client_id, email)) = asked {
            let app = self.clone();
            tokio::spawn(async move {
                if !delay.is_zero() {
                    tokio::time::sleep(delay).await;
                }
                app.queue_reset(&client_id, &email, request.as_ref()).await;
            });
        }
        Ok(())
    }

    async fn queue_reset(
        &self,
        client_id: &ClientId,
        email: &Email,
        request: Option<&gatehouse_domain::event::RequestRef>,
    ) {
        let client = match client_store(self).resolve_client(client_id).await {
            Ok(Some(c)) => c,
            Ok(None) => return,
            Err(e) => {
                tracing::error!(cause = %e, "reset request: reading the client failed");
                return;
            }
        };
        let link = self.reset_link(email);
        if let Err(e) = link_store(self)
            .request_password_reset(&client.org, email, &link, request)
            .await
        {
            tracing::error!(cause = %e, "queuing a reset link failed");
        }
    }
}

impl App {
    /// D19's reset link and its e-mail.
    fn reset_link(&self, email: &Email) -> NewLink {
        let base = self.public_url();
        let (_, link) = new_link(
            LinkKind::Reset,
            email.as_str(),
            "Reset your Gatehouse password".into(),
            |token| {
                format!(
                    "Someone asked to reset the password of this account.\n\nChoose a new password here (the link works once, for one hour):\n\n{base}/password/reset/{token}\n\nIf it was not you, ignore this message: your password stays as it is.\n"
                )
            },
        );
        link
    }

    /// Issue 32 (`gatehouse user reset-password`): D19's reset e-mail, sent
    /// at an operator's word to an active user of `org`, under the same
    /// limits as one asked for on the sign-in page (D19 revised: one per 5
    /// minutes, 5 an hour, per account).
    pub async fn operator_reset_password(&self, org: &OrgId, id: &UserId) -> AppResult<User> {
        let user = self.get_user(org, id).await?;
        if user.status != UserStatus::Active {
            return Err(DomainError::InvalidStateTransition(format!(
                "only an active user can reset a password; this one is {}",
                user.status.as_str()
            ))
            .into());
        }
        let link = self.reset_link(&user.email);
        let sent = link_store(self)
            .request_password_reset(org, &user.email, &link, None)
            .await
            .or_app(Resource::User)?;
        if !sent {
            return Err(DomainError::InvalidStateTransition(
                "a reset e-mail went to this account less than 5 minutes ago (or 5 in the last hour); try later".into(),
            )
            .into());
        }
        Ok(user)
    }
}

impl AppError {
    /// A link that was used, expired or replaced.
    pub fn is_dead_link(&self) -> bool {
        matches!(self, AppError::NotFound(Resource::Link))
    }
}

/// A new single-use link: (token for the URL, the record to store with its
/// e-mail), living as D11 (invitations) or D19 (resets) says.
pub(crate) fn new_link(
    kind: LinkKind,
    to: &str,
    subject: String,
    body: impl FnOnce(&str) -> String,
) -> (String, NewLink) {
    use gatehouse_auth::flows::{INVITATION_TTL_SECS, RESET_TTL_SECS};
    let token = gatehouse_domain::random::token("", 256);
    let ttl = match kind {
        LinkKind::Invitation => INVITATION_TTL_SECS,
        LinkKind::Reset => RESET_TTL_SECS,
    };
    let link = NewLink {
        digest: AuthService::link_digest(&token),
        expires_at: Timestamp::now().plus_seconds(ttl),
        email: gatehouse_store::OutboundEmail {
            to: to.to_owned(),
            subject,
            body: body(&token),
        },
    };
    (token, link)
}

impl App {
    /// The teller of a change made through a single-use link in the page
    /// request `request` (D54): the storage tells it as done by the person
    /// the link was sent to ([`Teller::by_link`], who is known only once the
    /// link is read in the change's transaction), naming the request.
    ///
    /// [`Teller::by_link`]: gatehouse_domain::event::Teller::by_link
    fn link_teller(&self, request: RequestRef) -> gatehouse_domain::event::Teller {
        self.teller(&Origin {
            actor: Actor::System,
            request: Some(request),
        })
    }
}

/// This area's view of storage: the `LinkStore` trait only (issue 25).
fn link_store(app: &App) -> &dyn gatehouse_store::LinkStore {
    app.0.store.as_ref()
}

/// This area's view of storage: the `ClientStore` trait only (issue 25).
fn client_store(app: &App) -> &dyn gatehouse_store::ClientStore {
    app.0.store.as_ref()
}
