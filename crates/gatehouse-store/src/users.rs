//! Users of an organization and the D11/D13 rules applied in their transactions.

use async_trait::async_trait;
use gatehouse_domain::event::Teller;
use gatehouse_domain::{
    Email, Listing, NewUser, OrgId, Page, Role, Timestamp, User, UserId, UserPatch, UserStatus,
    user::UserChange,
};

use crate::{NewLink, StoreResult};

/// The equality filters of the user list (interface.md §4.3, D14). `q` is
/// not here: storage does not search; the application answers `q` from its
/// in-memory index (`gatehouse_app::search`), which reads storage through
/// [`crate::SearchStore`].
#[derive(Clone, Debug, Default)]
pub struct UserFilter {
    pub role: Option<Role>,
    pub status: Option<UserStatus>,
}

/// Users of an organization and the D11/D13 rules applied in their
/// transactions. Every method takes the organization (D2), except
/// [`UserStore::operator_find_user`].
#[async_trait]
pub trait UserStore: Send + Sync {
    /// Inserts a user; `Duplicate("email")` when the e-mail exists in the organization
    /// (case-insensitively).
    /// With `invitation`, the invitation link and its e-mail (outbox) are
    /// written in the same transaction (D11, D30).
    /// Its events (D54) are told by `tell`.
    async fn insert_user_with_link(
        &self,
        org: &OrgId,
        user: &NewUser,
        invitation: Option<&NewLink>,
        tell: &Teller,
    ) -> StoreResult<User>;
    /// [`UserStore::insert_user_with_link`] without an invitation.
    async fn insert_user(&self, org: &OrgId, user: &NewUser, tell: &Teller) -> StoreResult<User> {
        self.insert_user_with_link(org, user, None, tell).await
    }
    async fn get_user(&self, org: &OrgId, id: &UserId) -> StoreResult<Option<User>>;
    /// An operator look-up: a user by id, whatever its organization (D47
    /// `user show USR`, where the id is all the operator gives). Only the
    /// CLI calls it; nothing reachable over HTTP may.
    async fn operator_find_user(&self, id: &UserId) -> StoreResult<Option<User>>;
    async fn list_users(
        &self,
        org: &OrgId,
        filter: &UserFilter,
        page: Page,
    ) -> StoreResult<Listing<User>>;
    /// D32 cursor paging: up to `limit` users after the user `after` in the
    /// list order (`created_at` descending, then `id`). `Ok(None)` when
    /// `after` is not a user of the organization.
    async fn list_users_after(
        &self,
        org: &OrgId,
        filter: &UserFilter,
        after: Option<&UserId>,
        limit: u32,
    ) -> StoreResult<Option<Vec<User>>>;
    /// Applies a patch atomically with the D11 and D13 rules (the domain's
    /// `user::apply_patch`, then `user::check_change`, in one transaction). When the
    /// change revokes tokens (deactivation, demotion) it also writes a `User`
    /// revocation with cut-off `now` and ends the user's sessions, codes and
    /// refresh chains; cancelling an invitation kills its link. The API keys
    /// the user owns are cut as `manage::owned_keys_cut` decides (D46:
    /// deactivation revokes them all, a demotion those carrying a scope the
    /// new role lacks), in the same transaction. D46 (revised): the
    /// applications the user owns are suspended or resumed as
    /// `manage::owner_inactive_after` decides; suspending one also writes a
    /// `Client` revocation at `now` (its earlier access tokens stay refused
    /// for good).
    async fn update_user(
        &self,
        org: &OrgId,
        id: &UserId,
        patch: &UserPatch,
        now: Timestamp,
        tell: &Teller,
    ) -> StoreResult<UserChange>;
    /// Deletes a user as `user::check_delete` decides (D13): `LastAdmin`,
    /// `OwnedResourcesExist` unless `transfer_to` names another active user
    /// of the organization (checked by the caller for shape; `NotFound`-like
    /// problems with the target come back as `Rule(Validation)`), ownership
    /// moved in the same transaction, each application's suspension as
    /// `gatehouse_domain::client::inherited` decides, with a `Client`
    /// revocation at `now` for each one it suspends (D46 revised); the API
    /// keys the user owns are revoked with them (D46).
    async fn delete_user_at(
        &self,
        org: &OrgId,
        id: &UserId,
        transfer_to: Option<&UserId>,
        now: Timestamp,
        tell: &Teller,
    ) -> StoreResult<()>;
    /// A user and their password hash, by e-mail (case-insensitive), for login.
    async fn find_user_by_email(
        &self,
        org: &OrgId,
        email: &Email,
    ) -> StoreResult<Option<(User, Option<String>)>>;
    /// D49: whether the user's address was shown to reach them: an
    /// invitation accepted or a password reset completed. `false` for an
    /// unknown user.
    async fn email_verified(&self, org: &OrgId, id: &UserId) -> StoreResult<bool>;
    /// D19: a new invitation link for a `pending_invite` user, replacing the
    /// previous one (`user::check_reinvite`: `InvalidStateTransition`
    /// otherwise).
    /// It tells `user.invited` (D54).
    async fn reissue_invitation(
        &self,
        org: &OrgId,
        id: &UserId,
        link: &NewLink,
        tell: &Teller,
    ) -> StoreResult<()>;
}
