//! D8 (revised): the tally and the log lines of the e-mail re-keying each
//! backend runs when its store starts (the reading and writing are the
//! backend's own).

/// What one re-keying run did.
#[derive(Debug, Default)]
pub struct Rekeying {
    rekeyed: u64,
    kept: u64,
}

impl Rekeying {
    /// A row got its new key.
    pub fn rekeyed(&mut self) {
        self.rekeyed += 1;
    }

    /// A row kept its old key: its address is now the same as the earlier
    /// row of the same organization that holds `key`.
    pub fn kept(&mut self, user: &str, org: &str, key: &str) {
        tracing::warn!(
            user,
            org,
            key,
            "e-mail re-keying (D8): this user's address is now the same address as an \
             earlier user's; its old key is kept, resolve the pair by hand"
        );
        self.kept += 1;
    }

    /// Logs the run's outcome, when it changed or kept anything.
    pub fn report(self) {
        let Self { rekeyed, kept } = self;
        if rekeyed + kept > 0 {
            tracing::info!(
                rekeyed,
                kept,
                "e-mail keys brought to the D8 (revised) rule"
            );
        }
    }
}
