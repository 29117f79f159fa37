//! The staging dataset (D33).

use gatehouse_domain::{Fixture, Timestamp};

use crate::App;
use crate::error::{AppResult, OrApp};

impl App {
    /// Restores the fixture in every organization, atomically; the number
    /// of organizations. A serving node also drops removed users' tokens at
    /// once (others follow within their sync interval).
    pub async fn reset_staging(&self) -> AppResult<u64> {
        let n = self
            .store()
            .reset_to_fixture(None, &Fixture::standard(), Timestamp::now())
            .await
            .or_app("organization")?;
        if let Some(auth) = self.auth() {
            if let Err(e) = auth.sync_revocations().await {
                tracing::warn!(error = %e, "revocation sync failed");
            }
        }
        Ok(n)
    }
}
