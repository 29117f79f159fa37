//! Organizations (D28's plans, D32's v2 preview, D33's staging fixture).

use gatehouse_domain::event::Origin;
use gatehouse_domain::{Fixture, Name, OrgId, Organization, Plan, Timestamp};

use crate::App;
use crate::Resource;
use crate::error::{AppError, AppResult, OrApp};

/// An organization to create (D40 `org create`).
#[derive(Clone, Debug)]
pub struct NewOrg {
    pub name: Name,
    /// `None`: enterprise when limits are given, else free.
    pub plan: Option<Plan>,
    pub per_minute: Option<u32>,
    pub per_second: Option<u32>,
}

impl App {
    /// The organization, or `NotFound(Resource::Organization)`.
    pub async fn existing_org(&self, org: &OrgId) -> AppResult<Organization> {
        org_store(self)
            .get_org(org)
            .await
            .or_app(Resource::Organization)?
            .ok_or(AppError::NotFound(Resource::Organization))
    }

    /// Every organization, oldest first (an operator listing, D47).
    pub async fn list_orgs(&self) -> AppResult<Vec<Organization>> {
        org_store(self)
            .list_orgs()
            .await
            .or_app(Resource::Organization)
    }

    /// The start banner's hint (issue 32): the organization, when there is
    /// exactly one and no active admin can sign in to it yet (a fresh
    /// install). With several organizations the operator has gone past
    /// first steps, and the hint would have to guess which one.
    pub async fn awaiting_first_admin(&self) -> AppResult<Option<OrgId>> {
        let orgs = self.list_orgs().await?;
        let [org] = orgs.as_slice() else {
            return Ok(None);
        };
        let admins = self
            .list_users(
                &org.id,
                &crate::UserFilter {
                    role: Some(gatehouse_domain::Role::Admin),
                    status: Some(gatehouse_domain::UserStatus::Active),
                    q: None,
                },
                gatehouse_domain::Page {
                    limit: 1,
                    offset: 0,
                },
            )
            .await?;
        Ok((admins.total == 0).then(|| org.id.clone()))
    }

    /// D28: custom limits belong to an enterprise plan. With `fixture`
    /// (staging, D33) the organization starts with the fixture data.
    pub async fn create_org(&self, new: NewOrg, fixture: bool) -> AppResult<Organization> {
        let (plan, per_minute, per_second) =
            gatehouse_domain::decide_plan(new.plan, new.per_minute, new.per_second)
                .map_err(AppError::Rule)?;
        let new = NewOrg {
            per_minute,
            per_second,
            ..new
        };
        let org = Organization {
            id: OrgId::generate(),
            name: new.name.into_string(),
            plan,
            per_minute: new.per_minute,
            per_second: new.per_second,
            created_at: Timestamp::now(),
        };
        org_store(self)
            .create_org(&org)
            .await
            .or_app(Resource::Organization)?;
        if fixture {
            org_store(self)
                .reset_to_fixture(Some(&org.id), &Fixture::standard(), Timestamp::now(), None)
                .await
                .or_app(Resource::Organization)?;
        }
        Ok(org)
    }

    /// `gatehouse org rename ORG --name N` (issue 32): the organization as
    /// renamed, with `organization.updated` (D54) when the name changed. The
    /// name shows on the sign-in pages, in e-mails and on the dashboard of
    /// every server from their next request (D40).
    pub async fn rename_org(&self, org: &OrgId, name: Name) -> AppResult<Organization> {
        let before = self.existing_org(org).await?;
        let after = Organization {
            name: name.into_string(),
            ..before.clone()
        };
        self.change_org(before, after).await
    }

    /// `gatehouse org plan ORG [--plan P] [--per-minute N --per-second M]`
    /// (issue 32): the plan and limits [`gatehouse_domain::decide_plan`]
    /// gives (limits alone make an enterprise plan; no plan and no limits,
    /// free), in force on every server from their next request (D28, D40),
    /// with `organization.updated` (D54) when they changed.
    pub async fn change_plan(
        &self,
        org: &OrgId,
        plan: Option<Plan>,
        per_minute: Option<u32>,
        per_second: Option<u32>,
    ) -> AppResult<Organization> {
        let (plan, per_minute, per_second) =
            gatehouse_domain::decide_plan(plan, per_minute, per_second).map_err(AppError::Rule)?;
        let before = self.existing_org(org).await?;
        let after = Organization {
            plan,
            per_minute,
            per_second,
            ..before.clone()
        };
        self.change_org(before, after).await
    }

    async fn change_org(
        &self,
        before: Organization,
        after: Organization,
    ) -> AppResult<Organization> {
        let now = Timestamp::now();
        let tell = self.teller(&Origin::operator());
        let fx = gatehouse_domain::effect::of_org_change(&tell, &before, after.clone(), now);
        if !fx.is_empty() {
            org_store(self)
                .write_org(&before.id, &fx, now, &tell)
                .await
                .or_app(Resource::Organization)?;
        }
        Ok(after)
    }

    /// D32: whether the v2 preview is on for the organization.
    pub async fn v2_preview(&self, org: &OrgId) -> AppResult<bool> {
        org_store(self)
            .v2_preview(org)
            .await
            .or_app(Resource::Organization)
    }

    /// D32: an operator turns the v2 preview on or off.
    pub async fn set_v2_preview(&self, org: &OrgId, enabled: bool) -> AppResult<()> {
        org_store(self)
            .set_v2_preview(org, enabled)
            .await
            .or_app(Resource::Organization)
    }
}

/// This area's view of storage: the `OrgStore` trait only (issue 25).
fn org_store(app: &App) -> &dyn gatehouse_store::OrgStore {
    app.0.store.as_ref()
}
