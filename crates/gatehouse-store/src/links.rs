//! Single-use links (D11, D19): invitations and password resets.

use async_trait::async_trait;
use gatehouse_domain::event::Teller;
use gatehouse_domain::{Email, OrgId, Timestamp, User};

use crate::{LinkKind, LinkRecord, NewLink, StoreResult};

/// Single-use links (D11, D19): invitations and password resets.
///
/// A link's token is the credential: [`LinkStore::resolve_link`],
/// `accept_invitation` and `reset_password` find the link by its digest and
/// take the organization from it (they run on pages a signed-out user
/// reaches with only the link). Requesting a reset names the organization.
#[async_trait]
pub trait LinkStore: Send + Sync {
    /// The tenant-resolving look-up of a link by the digest of its token.
    async fn resolve_link(
        &self,
        kind: LinkKind,
        digest: &[u8; 32],
    ) -> StoreResult<Option<LinkRecord>>;
    /// Accepts an invitation: the user gets the password and becomes active;
    /// the link is used up. `NotFound` for an unknown, used or expired link.
    async fn accept_invitation(
        &self,
        digest: &[u8; 32],
        password_hash: &str,
        now: Timestamp,
        tell: &Teller,
    ) -> StoreResult<User>;
    /// D19: queues a reset link for an active user with that e-mail; `false`
    /// (and nothing written) when there is none, or when the account was
    /// sent a reset e-mail too recently (D19 revised,
    /// [`gatehouse_domain::user::reset_email_allowed`]).
    async fn request_password_reset(
        &self,
        org: &OrgId,
        email: &Email,
        link: &NewLink,
        request: Option<&gatehouse_domain::event::RequestRef>,
    ) -> StoreResult<bool>;
    /// Sets a new password through a reset link, uses it up, and revokes the
    /// user's sessions and tokens (a `User` revocation at `now`).
    async fn reset_password(
        &self,
        digest: &[u8; 32],
        password_hash: &str,
        now: Timestamp,
        tell: &Teller,
    ) -> StoreResult<User>;
    /// D19 (continued): an active user of `org` who proved their current
    /// password sets a new one in the session `kept`; their other sessions
    /// end, `mail` is queued and `user.password_changed` told
    /// (`effect::of_password_change`), in one transaction. `NotFound` for a
    /// user who is not (or no longer) active in `org`.
    #[allow(clippy::too_many_arguments)]
    async fn change_password(
        &self,
        org: &OrgId,
        user: &gatehouse_domain::UserId,
        password_hash: &str,
        kept: &gatehouse_domain::SessionId,
        mail: &gatehouse_domain::link::OutboundEmail,
        now: Timestamp,
        tell: &Teller,
    ) -> StoreResult<User>;
}
