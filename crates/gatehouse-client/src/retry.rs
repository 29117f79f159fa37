//! The retry policy of interface.md §7.2 and D51, and the sleep hook.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

/// When and how often the client retries.
///
/// * 500, 503 and transport failures (connection refused or reset, timeout)
///   are retried after the [`backoff`](Self::backoff) delays — 1, 2, 4 and
///   8 seconds by default, each lengthened by up to
///   [`jitter`](Self::jitter) of itself — and then returned as the error
///   (interface.md §7.2, D51). A 503's `Retry-After` does not change this
///   schedule; it is in the returned error. Other statuses (a proxy's 502
///   or 504 included) are returned at once: §7.2 names 500 and 503.
/// * POSTs are retried like the rest: every attempt of one call carries the
///   same `Idempotency-Key`, so the server answers a repeat with the first
///   answer instead of acting twice (D50). A token request (code or
///   refresh grant) is retried after a transport failure only when the
///   connection was never made: a second use of a code, or of a refresh
///   token after D24's grace window, revokes the grant (D24, D26).
/// * 429 `RATE_LIMIT_EXCEEDED` is waited out per `Retry-After`, at most
///   [`max_waits`](Self::max_waits) times per call; 409
///   `IDEMPOTENCY_KEY_IN_USE` until the first request with the key has
///   ended (the server's lease bounds it). A `Retry-After` above [`max_retry_after`](Self::max_retry_after) is
///   not waited for: the error is returned with its `retry_after`, since
///   sending again early only prolongs a rate limit (D28).
///
/// ```
/// use std::time::Duration;
/// use gatehouse_client::RetryPolicy;
///
/// let policy = RetryPolicy {
///     max_retry_after: Duration::from_secs(10),
///     ..RetryPolicy::default()
/// };
/// assert_eq!(policy.backoff.len(), 4);
/// let none = RetryPolicy::none();
/// assert!(none.backoff.is_empty());
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct RetryPolicy {
    /// The delays before each retry of a 500, 503 or transport failure;
    /// their number is the number of retries.
    pub backoff: Vec<Duration>,
    /// Each back-off delay `d` becomes a random delay in `[d, d × (1 + jitter)]`.
    pub jitter: f64,
    /// The longest `Retry-After` the client waits out.
    pub max_retry_after: Duration,
    /// How many 429 / 409 `IDEMPOTENCY_KEY_IN_USE` answers one call waits
    /// out before returning the error.
    pub max_waits: u32,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            backoff: [1, 2, 4, 8].map(Duration::from_secs).to_vec(),
            jitter: 0.2,
            max_retry_after: Duration::from_secs(60),
            max_waits: 5,
        }
    }
}

impl RetryPolicy {
    /// No retries and no waiting at all.
    pub fn none() -> Self {
        Self {
            backoff: Vec::new(),
            jitter: 0.0,
            max_retry_after: Duration::ZERO,
            max_waits: 0,
        }
    }

    /// The jittered delay before retry number `n` (0-based), or `None` when
    /// the retries are used up.
    pub(crate) fn delay(&self, n: usize) -> Option<Duration> {
        let d = *self.backoff.get(n)?;
        let j = self.jitter.max(0.0) * fastrand::f64();
        Some(d.mul_f64(1.0 + j))
    }
}

/// Why the client is about to wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum RetryReason {
    /// A 500 `INTERNAL_ERROR`.
    InternalError,
    /// A 503 `SERVICE_UNAVAILABLE`.
    Unavailable,
    /// No answer (connection refused or reset, timeout).
    Transport,
    /// A 429, waited out per `Retry-After`.
    RateLimited,
    /// A 409 `IDEMPOTENCY_KEY_IN_USE`, waited out per `Retry-After`.
    IdempotencyKeyInUse,
}

/// One wait the client is about to make, as given to the sleep hook.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RetryDelay {
    /// How long.
    pub delay: Duration,
    /// Why.
    pub reason: RetryReason,
    /// The number of this retry within the call (1 for the first).
    pub attempt: u32,
    /// The request id of the answer (or of the attempt, for a transport
    /// failure) that caused the wait.
    pub request_id: Option<String>,
}

/// The future a sleep hook returns.
pub type SleepFuture = Pin<Box<dyn Future<Output = ()> + Send>>;

/// What the client calls for every wait; `tokio::time::sleep` by default.
/// Tests give their own to record the delays without waiting (a paused
/// tokio clock would also fire the timeouts of real sockets at once).
pub(crate) type SleepHook = Arc<dyn Fn(RetryDelay) -> SleepFuture + Send + Sync>;

pub(crate) fn tokio_sleep() -> SleepHook {
    Arc::new(|d: RetryDelay| Box::pin(tokio::time::sleep(d.delay)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_follow_the_schedule_within_the_jitter() {
        let p = RetryPolicy::default();
        for _ in 0..100 {
            for (n, base) in [1.0, 2.0, 4.0, 8.0].into_iter().enumerate() {
                let d = p.delay(n).unwrap().as_secs_f64();
                assert!(d >= base && d <= base * 1.2 + 1e-9, "{n}: {d}");
            }
            assert_eq!(p.delay(4), None);
        }
    }
}
