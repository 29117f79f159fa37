//! Usage counts (D46): every API request made with a credential, and the
//! 429s among them, per UTC minute. Counted in memory on the request path
//! (one short lock, no storage call) and added to storage by a background
//! flush every few seconds, where the counts of several nodes add up.

use std::collections::HashMap;
use std::sync::Mutex;

use gatehouse_domain::OrgId;
use gatehouse_domain::auth_state::{Credential, UsageCount};

use crate::Caller;

/// A credential in one minute (Unix minutes).
type Slot = (Credential, i64);
/// Its organization, requests and 429s.
type Counts = (OrgId, u64, u64);

/// One node's counts not yet in storage.
#[derive(Default)]
pub struct UsageCounter {
    pending: Mutex<HashMap<Slot, Counts>>,
}

/// The credential usage is counted against: the application an access
/// token was issued to (for itself or for a person), or the API key.
pub fn credential_of(caller: &Caller) -> Credential {
    match caller {
        Caller::Token(c) => Credential::Application(c.client_id.clone()),
        Caller::ApiKey(k) => Credential::ApiKey(k.id.clone()),
    }
}

impl UsageCounter {
    /// Counts one request of `caller` at `now_ms`; `rejected`: it got 429.
    pub fn record(&self, caller: &Caller, rejected: bool, now_ms: u64) {
        let minute = (now_ms / 60_000) as i64;
        let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        let entry = pending
            .entry((credential_of(caller), minute))
            .or_insert_with(|| (caller.org().clone(), 0, 0));
        entry.1 += 1;
        entry.2 += u64::from(rejected);
    }

    /// The pending counts, taken out for storage.
    pub fn take(&self) -> Vec<UsageCount> {
        let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        std::mem::take(&mut *pending)
            .into_iter()
            .map(
                |((credential, minute), (org, requests, rejected))| UsageCount {
                    org,
                    credential,
                    minute,
                    requests,
                    rejected,
                },
            )
            .collect()
    }

    /// Puts counts that storage did not take back, for the next flush, so
    /// no count is lost to a passing outage.
    pub fn put_back(&self, counts: Vec<UsageCount>) {
        let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        for c in counts {
            let entry = pending
                .entry((c.credential, c.minute))
                .or_insert_with(|| (c.org, 0, 0));
            entry.1 += c.requests;
            entry.2 += c.rejected;
        }
    }
}
