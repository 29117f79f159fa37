//! `/v1/me` (D15): the profile of the user a token was issued for.

use gatehouse_domain::event::Origin;
use gatehouse_domain::user::UserPatch;
use gatehouse_domain::{Name, OrgId, Timestamp, User, UserId};

use crate::App;
use crate::Resource;
use crate::error::{AppResult, OrApp};

impl App {
    pub async fn profile(&self, org: &OrgId, me: &UserId) -> AppResult<User> {
        self.get_user(org, me).await
    }

    /// D15: a user may change only their own name.
    pub async fn update_profile(
        &self,
        org: &OrgId,
        me: &UserId,
        name: Option<Name>,
        origin: &Origin,
    ) -> AppResult<User> {
        let patch = UserPatch {
            name,
            ..Default::default()
        };
        let change = user_store(self)
            .update_user(org, me, &patch, Timestamp::now(), &self.teller(origin))
            .await
            .or_app(Resource::User)?;
        Ok(change.user)
    }
}

/// This area's view of storage: the `UserStore` trait only (issue 25).
fn user_store(app: &App) -> &dyn gatehouse_store::UserStore {
    app.0.store.as_ref()
}
