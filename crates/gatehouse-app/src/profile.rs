//! `/v1/me` (D15): the profile of the user a token was issued for.

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
    ) -> AppResult<User> {
        let patch = UserPatch {
            name,
            ..Default::default()
        };
        let change = self
            .store()
            .update_user(org, me, &patch, Timestamp::now())
            .await
            .or_app(Resource::User)?;
        Ok(change.user)
    }
}
