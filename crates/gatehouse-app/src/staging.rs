//! The staging dataset (D33).

use gatehouse_domain::event::Origin;
use gatehouse_domain::{Fixture, Timestamp};

use crate::App;
use crate::Resource;
use crate::error::{AppResult, OrApp};

impl App {
    /// Restores the fixture in every organization, atomically; the number
    /// of organizations. A serving node also drops removed users' tokens at
    /// once (others follow within their sync interval). Each organization
    /// tells one `staging.reset` (D33 continued), from `origin` (the
    /// operator, or the system for the nightly reset).
    pub async fn reset_staging(&self, origin: &Origin) -> AppResult<u64> {
        let n = org_store(self)
            .reset_to_fixture(
                None,
                &Fixture::standard(),
                Timestamp::now(),
                Some(&self.teller(origin)),
            )
            .await
            .or_app(Resource::Organization)?;
        if let Err(e) = self.sync_revocations().await {
            tracing::warn!(error = %e, "revocation sync failed");
        }
        Ok(n)
    }
}

/// What became of a night's reset.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NightlyReset {
    /// Restored in this many organizations.
    Done(u64),
    /// Another node ran it (D44).
    ClaimedElsewhere,
}

impl App {
    /// D33's nightly reset due at `due` (a key naming the night): D44, one
    /// node runs it, the others find it claimed.
    pub async fn nightly_staging_reset(&self, due: &str) -> AppResult<NightlyReset> {
        let claimed = job_store(self)
            .claim_job("staging_reset", due, gatehouse_domain::Timestamp::now())
            .await
            .or_app(Resource::Job)?;
        if !claimed {
            return Ok(NightlyReset::ClaimedElsewhere);
        }
        self.reset_staging(&Origin::system())
            .await
            .map(NightlyReset::Done)
    }
}

/// This area's view of storage: the `OrgStore` trait only (issue 25).
fn org_store(app: &App) -> &dyn gatehouse_store::OrgStore {
    app.0.store.as_ref()
}

/// This area's view of storage: the `JobStore` trait only (issue 25).
fn job_store(app: &App) -> &dyn gatehouse_store::JobStore {
    app.0.store.as_ref()
}
