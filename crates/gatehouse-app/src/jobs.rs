//! The background work of a serving process (D23, D24, D25, D28, D44, D46,
//! D50, issue 16), as `App` methods the binary runs on timers: the binary
//! owns the timers and shutdown, this crate owns what each round does.

use gatehouse_domain::Timestamp;

use crate::App;

impl App {
    /// One housekeeping round (every 5 s): idle rate-limit state forgotten
    /// (D28), the outbox backlog gauge, sealed successor pairs past the
    /// grace window erased (D24), the signing keys re-read every sixth round
    /// or when one is due (D23), and, when `purge` is set, expired rows
    /// purged in small batches (D24, D50) and the search indexes' upkeep.
    pub async fn housekeeping_round(&self, now: Timestamp, reread_keys: bool, purge: bool) {
        if let Some(auth) = self.auth() {
            auth.evict_idle_limits();
        }
        if let Ok(n) = outbox_store(self).outbox_backlog().await {
            metrics::gauge!("gatehouse_outbox_backlog").set(n as f64);
        }
        // D23 (continued): a master-key rotation's next key, learned within a round.
        self.learn_master_key().await;
        if let Err(e) = job_store(self).erase_expired_successors(now).await {
            tracing::warn!(error = %e, "erasing successor pairs failed");
        }
        let keys_due = self
            .auth()
            .is_some_and(|a| reread_keys || a.keys().stale(now));
        if keys_due && let Err(e) = self.reload_keys().await {
            tracing::warn!(error = %e, "re-reading signing keys failed");
        }
        if purge {
            match job_store(self).purge_expired(now, 500).await {
                Ok(n) if n > 0 => tracing::debug!(rows = n, "purged expired rows"),
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "purge failed"),
            }
            match self.purge_events(now, self.event_retention_secs()).await {
                Ok(n) if n > 0 => tracing::debug!(events = n, "purged events past the retention"),
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "event purge failed"),
            }
            match self.purge_audit_log(now).await {
                Ok(p) if p.entries > 0 => tracing::info!(
                    entries = p.entries,
                    chains = p.chains,
                    "purged audit entries past their retention"
                ),
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "audit purge failed"),
            }
            if let Err(e) = self.search_housekeeping(now).await {
                tracing::warn!(error = %e, "search housekeeping failed");
            }
        }
    }
}

/// This area's view of storage: the `OutboxStore` trait only (issue 25).
fn outbox_store(app: &App) -> &dyn gatehouse_store::OutboxStore {
    app.0.store.as_ref()
}

/// This area's view of storage: the `JobStore` trait only (issue 25).
fn job_store(app: &App) -> &dyn gatehouse_store::JobStore {
    app.0.store.as_ref()
}
