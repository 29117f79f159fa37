//! Browser sessions (D49, D57): the single-sign-on cookie's record, what a
//! person and an admin list and end.

use async_trait::async_trait;
use gatehouse_domain::effect::Effect;
use gatehouse_domain::event::Teller;
use gatehouse_domain::session::SessionSelect;
use gatehouse_domain::{ChainId, OrgId, Page, SessionId, Timestamp, UserId};

use crate::{Session, StoreResult};

/// Browser sessions (D57).
///
/// A session is *listed* while its browser sign-in lasts (`expires_at`
/// after now) or a refresh chain begun in it is live (not revoked, not
/// past its end, a refresh token of it not expired): the same condition in
/// every read and in the purge, which keeps such a row.
///
/// The methods keyed by the cookie's digest (`resolve_session`) take no
/// organization: holding the secret establishes the tenant. Everything
/// else takes it (D2).
#[async_trait]
pub trait SessionStore: Send + Sync {
    /// Stores a session of `org` under the digest of its cookie with the
    /// sign-in's `effects` (D54's `user.signed_in`), in one transaction; a
    /// session naming another organization is refused
    /// ([`crate::check_org`]).
    async fn create_session(
        &self,
        org: &OrgId,
        digest: &[u8; 32],
        session: &Session,
        effects: &[Effect],
    ) -> StoreResult<()>;
    /// The tenant-resolving look-up of a session by the digest of its
    /// cookie, whether or not its browser sign-in still lasts
    /// (`applications` left empty).
    async fn resolve_session(&self, digest: &[u8; 32]) -> StoreResult<Option<Session>>;
    /// Writes a browser use decided by `Session::browser_use`: the
    /// session's `last_seen_at`, `expires_at`, `ip` and `user_agent` as
    /// `seen` has them. A session ended meanwhile is not brought back.
    async fn record_browser_use(&self, org: &OrgId, seen: &Session) -> StoreResult<()>;
    /// `user`'s listed sessions at `now`, newest first (`created_at`
    /// descending, then `id`, D14 continued), a page of them, with the
    /// exact number listed.
    async fn list_sessions(
        &self,
        org: &OrgId,
        user: &UserId,
        page: Page,
        now: Timestamp,
    ) -> StoreResult<(Vec<Session>, u64)>;
    /// Ends, in one transaction, the listed sessions of `user` that
    /// `select` reaches (`effect::Effect::EndSessions`): the chains begun
    /// in them are revoked, their access tokens with them, and each tells
    /// `session.revoked` through `tell`. The sessions as they were, oldest
    /// first; none when `select` reached none (a stranger's id included).
    async fn end_sessions(
        &self,
        org: &OrgId,
        user: &UserId,
        select: &SessionSelect,
        now: Timestamp,
        tell: &Teller,
    ) -> StoreResult<Vec<Session>> {
        self.end_sessions_with(org, user, select, now, tell, &[])
            .await
    }
    /// [`SessionStore::end_sessions`] that also writes `also` (e.g. a
    /// sign-out's audit entry, D58) in the same transaction, when a
    /// session ended.
    async fn end_sessions_with(
        &self,
        org: &OrgId,
        user: &UserId,
        select: &SessionSelect,
        now: Timestamp,
        tell: &Teller,
        also: &[gatehouse_domain::effect::Effect],
    ) -> StoreResult<Vec<Session>>;
    /// The session `chain` was begun in (D57's `current`), if any.
    async fn session_of_chain(
        &self,
        org: &OrgId,
        chain: &ChainId,
    ) -> StoreResult<Option<SessionId>>;
}
