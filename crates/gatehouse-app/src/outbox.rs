//! E-mail delivery from the durable outbox (D30), as the binary's worker
//! runs it: this crate claims due messages and records each outcome with
//! its back-off; the binary only knows how to send one message (SMTP or an
//! `.eml` file), so a mail server that is down loses nothing.

use std::future::Future;

use gatehouse_domain::Timestamp;

pub use gatehouse_store::{OutboundEmail, OutboxMessage};

use crate::App;

/// How many messages one round claims, and how long a claim holds them.
const BATCH: u32 = 16;
const CLAIM_MS: i64 = 60_000;

/// What became of one message.
#[derive(Debug)]
pub enum Delivery {
    Sent,
    /// Try again after [`backoff_secs`].
    Retry(String),
    /// Retrying cannot help: parked with its error for the operator.
    Permanent(String),
}

/// Back-off after `attempts` failures: 5 s, 10 s, 20 s … at most an hour.
pub fn backoff_secs(attempts: u32) -> i64 {
    (5i64 << attempts.saturating_sub(1).min(10)).min(3600)
}

impl App {
    /// One round of the outbox worker: claims up to 16 due messages, hands
    /// each to `send`, records the outcome. Returns how many it claimed (the
    /// worker sleeps when none).
    pub async fn deliver_outbox<F, Fut>(&self, send: F) -> usize
    where
        F: Fn(OutboxMessage) -> Fut,
        Fut: Future<Output = Delivery>,
    {
        let batch = match outbox_store(self)
            .claim_outbox(Timestamp::now(), BATCH, CLAIM_MS)
            .await
        {
            Ok(b) => b,
            Err(e) => {
                tracing::warn!(error = %e, "outbox: claiming failed");
                return 0;
            }
        };
        let claimed = batch.len();
        for m in batch {
            let (id, attempts) = (m.id, m.attempts);
            let outcome = send(m).await;
            let now = Timestamp::now();
            let result = match outcome {
                Delivery::Sent => {
                    tracing::info!(id, "outbox: delivered");
                    outbox_store(self).outbox_sent(id, now).await
                }
                Delivery::Retry(e) => {
                    let wait = backoff_secs(attempts);
                    tracing::warn!(id, attempts, retry_in_secs = wait, error = %e, "outbox: delivery failed");
                    outbox_store(self)
                        .outbox_failed(id, &e, now.plus_seconds(wait))
                        .await
                }
                Delivery::Permanent(e) => {
                    // Parked, not retried and not deleted: the row keeps the
                    // error (and the address) for the operator; the log line
                    // names only the row, the counter says it happened. D8
                    // (revised) keeps addresses the API accepted out of
                    // here; a relay's 5xx or missing SMTPUTF8 still lands here.
                    metrics::counter!("gatehouse_outbox_undeliverable_total").increment(1);
                    tracing::error!(id, error = %e, "outbox: undeliverable; parked, not retried");
                    outbox_store(self)
                        .outbox_failed(id, &e, Timestamp::from_millis(i64::MAX / 2))
                        .await
                }
            };
            if let Err(e) = result {
                tracing::warn!(id, error = %e, "outbox: recording the outcome failed");
            }
        }
        claimed
    }
}

/// This area's view of storage: the `OutboxStore` trait only (issue 25).
fn outbox_store(app: &App) -> &dyn gatehouse_store::OutboxStore {
    app.0.store.as_ref()
}

#[cfg(test)]
mod tests {
    use super::backoff_secs;

    #[test]
    fn backoff_doubles_up_to_an_hour() {
        assert_eq!(backoff_secs(1), 5);
        assert_eq!(backoff_secs(2), 10);
        assert_eq!(backoff_secs(3), 20);
        assert_eq!(backoff_secs(30), 3600);
    }
}
