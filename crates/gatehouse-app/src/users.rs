//! Users (interface.md §4.3, D10–D14): the invitation and its e-mail on
//! creation, the revocations deactivation, demotion and deletion cause.

use gatehouse_auth::password;
use gatehouse_domain::user::UserPatch;
use gatehouse_domain::{
    Email, Listing, Name, NewUser, OrgId, Page, Role, Timestamp, User, UserId, UserStatus,
};
use gatehouse_store::{LinkKind, NewLink};

use gatehouse_domain::event::Origin;

use crate::Resource;
use crate::error::{AppError, AppResult, OrApp};
use crate::{App, UserFilter};

impl App {
    pub async fn list_users(
        &self,
        org: &OrgId,
        filter: &UserFilter,
        page: Page,
    ) -> AppResult<Listing<User>> {
        // Issue 16: `q` and deep pages through the search index.
        if Self::searches(filter.q.is_some(), page) {
            return self.search_page::<User>(org, filter, page).await;
        }
        user_store(self)
            .list_users(org, &filter.equality(), page)
            .await
            .or_app(Resource::User)
    }

    /// D32: up to `limit` users after `after`; `None` when `after` is not in the list.
    pub async fn list_users_after(
        &self,
        org: &OrgId,
        filter: &UserFilter,
        after: Option<&UserId>,
        limit: u32,
    ) -> AppResult<Option<Vec<User>>> {
        if filter.q.is_some() {
            return self.search_after::<User>(org, filter, after, limit).await;
        }
        user_store(self)
            .list_users_after(org, &filter.equality(), after, limit)
            .await
            .or_app(Resource::User)
    }

    /// An operator's look-up of a user by id alone (D47 `user show`): the id
    /// establishes the organization. Never reachable over HTTP.
    pub async fn operator_user(&self, id: &UserId) -> AppResult<User> {
        user_store(self)
            .operator_find_user(id)
            .await
            .or_app(Resource::User)?
            .ok_or(AppError::NotFound(Resource::User))
    }

    /// An operator's look-up (the CLI's `user … USR` commands): the
    /// organization that holds the user, so the command then goes through
    /// the same organization-scoped use case as the API. Never reachable
    /// over HTTP.
    pub async fn org_of_user(&self, id: &UserId) -> AppResult<OrgId> {
        for org in self.list_orgs().await? {
            match self.get_user(&org.id, id).await {
                Ok(_) => return Ok(org.id),
                Err(AppError::NotFound(_)) => {}
                Err(e) => return Err(e),
            }
        }
        Err(AppError::NotFound(Resource::User))
    }

    pub async fn get_user(&self, org: &OrgId, id: &UserId) -> AppResult<User> {
        user_store(self)
            .get_user(org, id)
            .await
            .or_app(Resource::User)?
            .ok_or(AppError::NotFound(Resource::User))
    }

    /// D11: a new user waits for the invitation to be accepted; D30: the
    /// invitation e-mail is queued in the same transaction as the user.
    pub async fn invite_user(
        &self,
        org: &OrgId,
        email: Email,
        name: Name,
        role: Role,
        origin: &Origin,
    ) -> AppResult<User> {
        let link = self.invitation(org, &email, &name, role).await?;
        let new = NewUser::invited(email, name, role, Timestamp::now());
        user_store(self)
            .insert_user_with_link(org, &new, Some(&link), &self.teller(origin))
            .await
            .or_app(Resource::User)
    }

    /// An active user with a password, created by an operator (D40).
    pub async fn create_active_user(
        &self,
        org: &OrgId,
        email: Email,
        name: Name,
        role: Role,
        password: String,
    ) -> AppResult<User> {
        password::check_policy(&password, email.as_str())
            .map_err(|e| AppError::invalid("password", e))?;
        let hash = password::hash(password).await;
        let new = NewUser {
            id: UserId::generate(),
            email,
            name,
            role,
            status: UserStatus::Active,
            password_hash: Some(hash),
            created_at: Timestamp::now(),
        };
        // D54: made by the operator, through the CLI.
        user_store(self)
            .insert_user(org, &new, &self.teller(&Origin::operator()))
            .await
            .or_app(Resource::User)
    }

    pub async fn update_user(
        &self,
        org: &OrgId,
        id: &UserId,
        patch: &UserPatch,
        origin: &Origin,
    ) -> AppResult<User> {
        let now = Timestamp::now();
        let change = user_store(self)
            .update_user(org, id, patch, now, &self.teller(origin))
            .await
            .or_app(Resource::User)?;
        if change.revokes_tokens {
            // D11, D29: the next request with the user's tokens is refused.
            self.note_user_revoked(id, now);
        }
        if change.changed && (patch.status.is_some() || patch.role.is_some()) {
            // D46 (revised): a deactivation suspended the applications the
            // person owns and revoked their tokens, a demotion narrowed
            // them (exactly the tokens carrying a removed scope), in the
            // same transaction; the revocations hold here from the next
            // request.
            self.sync_revocations().await?;
        }
        Ok(change.user)
    }

    pub async fn delete_user(
        &self,
        org: &OrgId,
        id: &UserId,
        transfer_to: Option<&UserId>,
        origin: &Origin,
    ) -> AppResult<()> {
        let now = Timestamp::now();
        user_store(self)
            .delete_user_at(org, id, transfer_to, now, &self.teller(origin))
            .await
            .or_app(Resource::User)?;
        // D13: every token of the user stops working at once.
        self.note_user_revoked(id, now);
        if transfer_to.is_some() {
            // D46 (revised): the applications handed on were suspended
            // until their secrets are rotated, their tokens revoked.
            self.sync_revocations().await?;
        }
        Ok(())
    }

    /// D19: a new invitation link replaces the old one.
    pub async fn reinvite_user(
        &self,
        org: &OrgId,
        id: &UserId,
        origin: &Origin,
    ) -> AppResult<User> {
        let user = self.get_user(org, id).await?;
        let link = self
            .invitation(org, &user.email, &user.name, user.role)
            .await?;
        user_store(self)
            .reissue_invitation(org, id, &link, &self.teller(origin))
            .await
            .or_app(Resource::User)?;
        Ok(user)
    }

    /// The invitation link and its e-mail (D11, D30).
    async fn invitation(
        &self,
        org: &OrgId,
        email: &Email,
        name: &Name,
        role: Role,
    ) -> AppResult<NewLink> {
        let org_name = self.org_name(org).await?;
        let base = self.public_url();
        let (_, link) = crate::links::new_link(
            LinkKind::Invitation,
            email.as_str(),
            format!("You are invited to {org_name}"),
            |token| {
                format!(
                    "Hello {name},\n\nYou have been invited to join {org_name} as {role}.\nChoose your password here to activate your account:\n\n{base}/invite/{token}\n\nThe link works once and expires in 7 days.\n",
                    role = role.as_str()
                )
            },
        );
        Ok(link)
    }
}

/// This area's view of storage: the `UserStore` trait only (issue 25).
fn user_store(app: &App) -> &dyn gatehouse_store::UserStore {
    app.0.store.as_ref()
}
