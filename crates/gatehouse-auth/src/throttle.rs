//! Failed-login throttling (D26): five failures for one account from one
//! source within 15 minutes lock that source out of that account for 15
//! minutes; fifty failures for one account from anywhere within an hour make
//! every login to it wait 15 minutes.

use gatehouse_domain::Timestamp;

pub const SOURCE_FAILURES: usize = 5;
pub const SOURCE_WINDOW_SECS: i64 = 15 * 60;
pub const ACCOUNT_FAILURES: usize = 50;
pub const ACCOUNT_WINDOW_SECS: i64 = 60 * 60;
pub const LOCK_SECS: i64 = 15 * 60;

/// How far back failures matter: the longest window plus the lock.
pub fn lookback(now: Timestamp) -> Timestamp {
    now.plus_seconds(-(ACCOUNT_WINDOW_SECS + LOCK_SECS))
}

/// Whether `n` failures (sorted) within `window` end less than LOCK ago.
fn locked(times: &[Timestamp], n: usize, window_secs: i64, now: Timestamp) -> bool {
    times.windows(n).any(|w| {
        let (first, last) = (w[0], w[n - 1]);
        last.millis() - first.millis() <= window_secs * 1000
            && now.millis() - last.millis() < LOCK_SECS * 1000
    })
}

/// `failures`: (source, when) for one account, oldest first.
pub fn is_locked(failures: &[(String, Timestamp)], source: &str, now: Timestamp) -> bool {
    let from_source: Vec<Timestamp> = failures
        .iter()
        .filter(|(s, _)| s == source)
        .map(|(_, t)| *t)
        .collect();
    let all: Vec<Timestamp> = failures.iter().map(|(_, t)| *t).collect();
    locked(&from_source, SOURCE_FAILURES, SOURCE_WINDOW_SECS, now)
        || locked(&all, ACCOUNT_FAILURES, ACCOUNT_WINDOW_SECS, now)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: i64) -> Timestamp {
        Timestamp::from_unix_seconds(1_000_000 + secs)
    }

    #[test]
    fn five_from_one_source_lock_that_source_for_15_minutes() {
        let f: Vec<_> = (0..5).map(|i| ("a".to_owned(), at(i * 60))).collect();
        assert!(is_locked(&f, "a", at(5 * 60)));
        assert!(
            !is_locked(&f, "b", at(5 * 60)),
            "other sources are unaffected"
        );
        assert!(is_locked(&f, "a", at(4 * 60 + LOCK_SECS - 1)));
        assert!(!is_locked(&f, "a", at(4 * 60 + LOCK_SECS)));
        assert!(
            !is_locked(&f[..4], "a", at(5 * 60)),
            "four failures do not lock"
        );
        // Spread over more than 15 minutes: no lock.
        let spread: Vec<_> = (0..5).map(|i| ("a".to_owned(), at(i * 300))).collect();
        assert!(!is_locked(&spread, "a", at(1201)));
    }

    #[test]
    fn fifty_from_anywhere_lock_the_account() {
        let f: Vec<_> = (0..50)
            .map(|i| (format!("s{}", i % 25), at(i * 60)))
            .collect();
        assert!(is_locked(&f, "fresh-source", at(50 * 60)));
        assert!(!is_locked(&f[..49], "fresh-source", at(50 * 60)));
    }
}
