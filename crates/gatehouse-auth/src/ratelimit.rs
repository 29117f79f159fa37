//! Rate limits (D28): a sliding window over admitted requests per credential
//! lineage — fewer than the per-minute number in the preceding 60 s and fewer
//! than the per-second number in the preceding second — with suspension of a
//! credential that keeps sending inside its `Retry-After`, and the brute-force
//! guard on failed client authentication.
//!
//! State lives in memory, sharded by key, with idle keys evicted so memory
//! stays bounded. A check costs a shard lock and a hash look-up.

use std::collections::{HashMap, VecDeque};
use std::hash::BuildHasher;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::caller::Lineage;

const SHARDS: usize = 64;
const MINUTE_MS: u64 = 60_000;
const SECOND_MS: u64 = 1_000;
/// Requests inside `Retry-After` that get a credential suspended, within a minute.
pub const SUSPEND_AFTER: usize = 10;
pub const SUSPENSION_MS: u64 = 15 * 60_000;

/// The limits of an organization's plan.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    pub per_minute: u32,
    pub per_second: u32,
}

/// What goes into the `X-RateLimit-*` headers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RateInfo {
    pub limit: u32,
    pub remaining: u32,
    /// Unix second at which `remaining` next rises.
    pub reset: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    Allowed(RateInfo),
    /// 429 with `Retry-After` (whole seconds, ≥ 1).
    Limited {
        info: RateInfo,
        retry_after: u64,
    },
}

/// The admissions of the last minute, one entry per millisecond that had
/// any, with running totals for the minute and for the last second. A check
/// costs O(1) amortized whatever the limit: the previous version kept one
/// timestamp per request and walked the last second's worth on every check,
/// which at 20,000 requests/s for an enterprise credential was 20,000 steps.
#[derive(Default)]
struct Admissions {
    /// (Unix ms, requests admitted in that ms), oldest first.
    entries: VecDeque<(u64, u32)>,
    /// Index of the first entry inside the last second.
    second_start: usize,
    in_minute: u64,
    in_second: u64,
}

impl Admissions {
    /// Drops what left the minute and the second before `now_ms`.
    fn advance(&mut self, now_ms: u64) {
        while let Some(&(t, n)) = self.entries.get(self.second_start) {
            if t + SECOND_MS > now_ms {
                break;
            }
            self.in_second -= u64::from(n);
            self.second_start += 1;
        }
        while let Some(&(t, n)) = self.entries.front() {
            if t + MINUTE_MS > now_ms {
                break;
            }
            self.in_minute -= u64::from(n);
            self.entries.pop_front();
            // An entry out of the minute is out of the second too, so the
            // cursor is already past it.
            self.second_start -= 1;
        }
    }

    fn push(&mut self, now_ms: u64) {
        match self.entries.back_mut() {
            // Same millisecond, or a clock that stepped back: count it with
            // the newest entry so the deque stays ordered.
            Some((t, n)) if *t >= now_ms => *n += 1,
            _ => self.entries.push_back((now_ms, 1)),
        }
        self.in_minute += 1;
        self.in_second += 1;
    }

    /// The instant at which the count of `from..` entries, now `count`,
    /// drops below `limit` as the oldest of them leave after `span` ms.
    fn frees_at(&self, from: usize, count: u64, limit: u64, span: u64) -> u64 {
        let mut must_leave = count + 1 - limit;
        for &(t, n) in self.entries.range(from..) {
            if u64::from(n) >= must_leave {
                return t + span;
            }
            must_leave -= u64::from(n);
        }
        0
    }

    /// When the per-minute count next falls.
    fn oldest(&self) -> Option<u64> {
        self.entries.front().map(|&(t, _)| t)
    }
}

/// D28 (revised) across nodes: plans above this many per second are
/// counted by leases (several admissions counted at once in the shared
/// windows, admitted by this node during one 100 ms bucket); at or below
/// it every request is decided in the shared store, exactly.
pub const LEASE_ABOVE_PER_SECOND: u32 = 50;
/// A lease is good for the bucket it was counted in (the shared windows'
/// bucket, `gatehouse-store-postgres`'s `RATE_BUCKET_MS`).
const LEASE_BUCKET_MS: u64 = 100;

/// This node's share of a credential's shared window.
#[derive(Default)]
struct Lease {
    /// The bucket (`now / LEASE_BUCKET_MS`) the admissions were counted in.
    bucket: u64,
    /// Admissions left to give in that bucket.
    left: u32,
    /// How many the last lease granted, and how many were given in the bucket.
    size: u32,
    used: u32,
    /// The headers of the requests admitted from it (the window as counted
    /// when the lease was granted, the whole lease included).
    info: Option<RateInfo>,
}

#[derive(Default)]
struct Window {
    lease: Lease,
    admitted: Admissions,
    /// Until when the last 429 told the credential to wait.
    told_until: u64,
    violations: VecDeque<u64>,
    suspended_until: u64,
    last_seen: u64,
}

struct Sharded<V> {
    hasher: std::collections::hash_map::RandomState,
    shards: Vec<Mutex<HashMap<Lineage, V>>>,
}

impl<V: Default> Sharded<V> {
    fn new() -> Self {
        Self {
            hasher: Default::default(),
            shards: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect(),
        }
    }

    fn with<R>(&self, key: &Lineage, f: impl FnOnce(&mut V) -> R) -> R {
        let i = (self.hasher.hash_one(key) as usize) % SHARDS;
        let mut shard = self.shards[i].lock().unwrap_or_else(|e| e.into_inner());
        if let Some(v) = shard.get_mut(key) {
            return f(v);
        }
        f(shard.entry(key.clone()).or_default())
    }

    /// Like [`Sharded::with`] without creating an entry for an unknown key.
    fn get<R>(&self, key: &Lineage, f: impl FnOnce(&V) -> R) -> Option<R> {
        let i = (self.hasher.hash_one(key) as usize) % SHARDS;
        let shard = self.shards[i].lock().unwrap_or_else(|e| e.into_inner());
        shard.get(key).map(f)
    }

    fn retain(&self, mut keep: impl FnMut(&mut V) -> bool) {
        for s in &self.shards {
            s.lock()
                .unwrap_or_else(|e| e.into_inner())
                .retain(|_, v| keep(v));
        }
    }

    fn len(&self) -> usize {
        self.shards
            .iter()
            .map(|s| s.lock().unwrap_or_else(|e| e.into_inner()).len())
            .sum()
    }
}

/// A refused request: sending again before the last `Retry-After` elapsed
/// is a violation, and ten in a minute suspend the credential (D28).
fn refuse(w: &mut Window, now_ms: u64, retry_after: u64, info: RateInfo) -> Decision {
    if now_ms < w.told_until {
        w.violations.push_back(now_ms);
        while w
            .violations
            .front()
            .is_some_and(|t| *t + MINUTE_MS <= now_ms)
        {
            w.violations.pop_front();
        }
        if w.violations.len() >= SUSPEND_AFTER {
            w.violations.clear();
            w.suspended_until = now_ms + SUSPENSION_MS;
            return Decision::Limited {
                info,
                retry_after: ceil_secs(SUSPENSION_MS),
            };
        }
    }
    w.told_until = w.told_until.max(now_ms + retry_after * 1000);
    Decision::Limited { info, retry_after }
}

fn ceil_secs(ms: u64) -> u64 {
    ms.div_ceil(1000).max(1)
}

/// The per-credential limiter.
pub struct RateLimiter {
    windows: Sharded<Window>,
}

impl Default for RateLimiter {
    fn default() -> Self {
        Self {
            windows: Sharded::new(),
        }
    }
}

impl RateLimiter {
    /// Checks and, if admitted, counts one request at `now_ms` (Unix ms).
    pub fn check(&self, key: &Lineage, limits: Limits, now_ms: u64) -> Decision {
        let per_minute = u64::from(limits.per_minute.max(1));
        let per_second = u64::from(limits.per_second.max(1));
        self.windows.with(key, |w| {
            w.last_seen = now_ms;
            w.admitted.advance(now_ms);
            let info = |w: &Window| RateInfo {
                limit: per_minute as u32,
                remaining: per_minute.saturating_sub(w.admitted.in_minute) as u32,
                reset: w
                    .admitted
                    .oldest()
                    .map_or(now_ms, |t| t + MINUTE_MS)
                    .div_ceil(1000),
            };
            if now_ms < w.suspended_until {
                return Decision::Limited {
                    info: info(w),
                    retry_after: ceil_secs(w.suspended_until - now_ms),
                };
            }
            let a = &w.admitted;
            let (in_minute, in_second) = (a.in_minute, a.in_second);
            if in_minute < per_minute && in_second < per_second {
                w.admitted.push(now_ms);
                return Decision::Allowed(info(w));
            }
            // The earliest instant a request would be admitted.
            let mut at = now_ms;
            if in_minute >= per_minute {
                at = at.max(a.frees_at(0, in_minute, per_minute, MINUTE_MS));
            }
            if in_second >= per_second {
                at = at.max(a.frees_at(a.second_start, in_second, per_second, SECOND_MS));
            }
            let retry_after = ceil_secs(at - now_ms);
            let info = info(w);
            refuse(w, now_ms, retry_after, info)
        })
    }

    /// `Some(retry_after)` while `key` is suspended on this node.
    pub fn suspended(&self, key: &Lineage, now_ms: u64) -> Option<u64> {
        self.windows.with(key, |w| {
            (now_ms < w.suspended_until).then(|| ceil_secs(w.suspended_until - now_ms))
        })
    }

    /// The decision for a request the shared store counted (D28 across
    /// nodes, D44): the windows are shared; the suspension of a credential
    /// that ignores `Retry-After` is kept by the node that sees it.
    pub fn decide_shared(
        &self,
        key: &Lineage,
        limits: Limits,
        shared: &gatehouse_domain::auth_state::SharedWindow,
        now_ms: u64,
    ) -> Decision {
        let per_minute = limits.per_minute.max(1);
        let per_second = limits.per_second.max(1);
        let now = now_ms as i64;
        let info = RateInfo {
            limit: per_minute,
            remaining: per_minute.saturating_sub(shared.in_minute),
            reset: (shared.minute_frees_at.unwrap_or(now).max(now) as u64).div_ceil(1000),
        };
        if shared.admitted {
            self.windows.with(key, |w| w.last_seen = now_ms);
            return Decision::Allowed(info);
        }
        let mut at = now;
        if shared.in_minute >= per_minute {
            at = at.max(shared.minute_frees_at.unwrap_or(now));
        }
        if shared.in_second >= per_second {
            at = at.max(shared.second_frees_at.unwrap_or(now));
        }
        let retry_after = ceil_secs((at - now).max(0) as u64);
        self.windows.with(key, |w| {
            w.last_seen = now_ms;
            refuse(w, now_ms, retry_after, info)
        })
    }

    /// Admits a request from this node's lease of `key`'s window when one is
    /// left for the current bucket (D28 revised: no store call).
    pub fn take_leased(&self, key: &Lineage, now_ms: u64) -> Option<Decision> {
        let bucket = now_ms / LEASE_BUCKET_MS;
        self.windows.with(key, |w| {
            let l = &mut w.lease;
            if l.bucket != bucket || l.left == 0 {
                return None;
            }
            l.left -= 1;
            l.used += 1;
            w.last_seen = now_ms;
            l.info.map(Decision::Allowed)
        })
    }

    /// How many admissions to lease next, and the admissions of an ended
    /// lease to give back (its bucket's start, Unix ms, and how many): one
    /// at first, doubling while leases run out within their bucket, back to
    /// what was used when one ends with admissions left over; at most a
    /// twentieth of the per-second number and a hundredth of the per-minute
    /// one, so what a lease holds back is small next to the plan. Taking the
    /// leftover here (under the key's lock) gives it back exactly once.
    pub fn lease_want(
        &self,
        key: &Lineage,
        limits: Limits,
        now_ms: u64,
    ) -> (u32, Option<(u64, u32)>) {
        let cap = (limits.per_second / 20).min(limits.per_minute / 100).max(1);
        let bucket = now_ms / LEASE_BUCKET_MS;
        self.windows.with(key, |w| {
            let l = &mut w.lease;
            let mut returned = None;
            let next = if l.size == 0 {
                1
            } else if l.bucket == bucket {
                l.size.saturating_mul(2)
            } else if l.left > 0 {
                returned = Some((l.bucket * LEASE_BUCKET_MS, l.left));
                l.left = 0;
                l.size = l.used.max(1);
                l.size
            } else {
                l.size
            };
            (next.clamp(1, cap), returned)
        })
    }

    /// The decision for a request after the store granted `granted`
    /// admissions of `key`'s window (the counts of `shared` include them all):
    /// this request takes one, the rest stay for this bucket; nothing granted
    /// is a refusal, as from [`RateLimiter::decide_shared`].
    pub fn start_lease(
        &self,
        key: &Lineage,
        limits: Limits,
        granted: u32,
        shared: &gatehouse_domain::auth_state::SharedWindow,
        now_ms: u64,
    ) -> Decision {
        let decision = self.decide_shared(key, limits, shared, now_ms);
        let Decision::Allowed(info) = decision else {
            return decision;
        };
        let bucket = now_ms / LEASE_BUCKET_MS;
        self.windows.with(key, |w| {
            let l = &mut w.lease;
            if l.bucket == bucket {
                l.left += granted.saturating_sub(1);
                l.used += 1;
            } else {
                *l = Lease {
                    bucket,
                    left: granted.saturating_sub(1),
                    size: 0,
                    used: 1,
                    info: None,
                };
            }
            l.size = granted;
            l.info = Some(info);
        });
        decision
    }

    /// Forgets credentials idle for a minute and not suspended (bounded memory).
    pub fn evict_idle(&self, now_ms: u64) {
        self.windows
            .retain(|w| w.last_seen + MINUTE_MS > now_ms || w.suspended_until > now_ms);
    }

    pub fn tracked(&self) -> usize {
        self.windows.len()
    }
}

/// D28's guard on failed client authentication: `limit` failures per key in
/// five minutes, then 429 for five minutes.
pub struct FailureGuard {
    limit: usize,
    failures: Sharded<(VecDeque<u64>, u64)>,
    /// The latest instant any key is blocked until: while it is past, no key
    /// is blocked and a check costs one atomic load (no key built, no lock).
    blocked_until: AtomicU64,
}

pub const FAILURE_WINDOW_MS: u64 = 5 * 60_000;

impl FailureGuard {
    pub fn new(limit: usize) -> Self {
        Self {
            limit,
            failures: Sharded::new(),
            blocked_until: AtomicU64::new(0),
        }
    }

    /// Whether any key may be blocked at `now_ms`; `false` means none is.
    pub fn any_blocked(&self, now_ms: u64) -> bool {
        now_ms < self.blocked_until.load(Ordering::Acquire)
    }

    /// `Some(retry_after)` while `key` is blocked.
    pub fn blocked(&self, key: &Lineage, now_ms: u64) -> Option<u64> {
        if !self.any_blocked(now_ms) {
            return None;
        }
        self.failures.get(key, |(_, until)| {
            (now_ms < *until).then(|| ceil_secs(*until - now_ms))
        })?
    }

    /// Records a failure; blocks the key when it reaches the limit.
    pub fn record(&self, key: &Lineage, now_ms: u64) {
        let limit = self.limit;
        self.failures.with(key, |(times, until)| {
            while times
                .front()
                .is_some_and(|t| *t + FAILURE_WINDOW_MS <= now_ms)
            {
                times.pop_front();
            }
            times.push_back(now_ms);
            if times.len() >= limit {
                *until = now_ms + FAILURE_WINDOW_MS;
                times.clear();
                self.blocked_until.fetch_max(*until, Ordering::AcqRel);
            }
        })
    }

    pub fn evict_idle(&self, now_ms: u64) {
        self.failures.retain(|(times, until)| {
            *until > now_ms || times.back().is_some_and(|t| t + FAILURE_WINDOW_MS > now_ms)
        });
    }
}

/// At most `limit` events per key in a sliding `window_ms` (D19 revised:
/// password-reset requests per source address).
pub struct SlidingCounter {
    limit: usize,
    window_ms: u64,
    events: Sharded<VecDeque<u64>>,
}

impl SlidingCounter {
    pub fn new(limit: usize, window_ms: u64) -> Self {
        Self {
            limit,
            window_ms,
            events: Sharded::new(),
        }
    }

    /// Counts an event for `key` at `now_ms`, or refuses it with the whole
    /// seconds until one would be admitted (≥ 1). Refused events do not count.
    pub fn admit(&self, key: &Lineage, now_ms: u64) -> Result<(), u64> {
        let (limit, window) = (self.limit, self.window_ms);
        self.events.with(key, |times| {
            while times.front().is_some_and(|t| t + window <= now_ms) {
                times.pop_front();
            }
            if times.len() >= limit {
                let frees_at = times.front().map_or(now_ms, |t| t + window);
                return Err(ceil_secs(frees_at.saturating_sub(now_ms)).max(1));
            }
            times.push_back(now_ms);
            Ok(())
        })
    }

    pub fn evict_idle(&self, now_ms: u64) {
        let window = self.window_ms;
        self.events
            .retain(|times| times.back().is_some_and(|t| t + window > now_ms));
    }
}

/// Keys of the failure guard (D28 revised): per (`client_id`, source
/// address) and per source address. A `client_id` is public, so failures
/// never block a client for every address.
pub fn client_source_key(client_id: &str, addr: &str) -> Lineage {
    Lineage::Other(format!("client:{client_id}|addr:{addr}"))
}

pub fn source_key(addr: &str) -> Lineage {
    Lineage::Other(format!("addr:{addr}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use gatehouse_domain::ClientId;

    const FREE: Limits = Limits {
        per_minute: 60,
        per_second: 10,
    };

    fn key() -> Lineage {
        Lineage::Client(ClientId::generate())
    }

    /// D28 (revised): a lease is given out within its bucket without asking
    /// again, sizes double while leases run out and shrink to what was used
    /// when one ends with some left (given back once), capped at a twentieth
    /// of the per-second number and a hundredth of the per-minute one;
    /// nothing granted is a refusal with `Retry-After`.
    #[test]
    fn leases_are_given_within_their_bucket_and_sized_by_use() {
        let l = RateLimiter::default();
        let k = key();
        let busy = Limits {
            per_minute: 1_000_000,
            per_second: 400,
        };
        let t0 = 1_000_000_000u64; // on a bucket boundary
        let window = |granted: u32, in_minute: u32| gatehouse_domain::auth_state::SharedWindow {
            admitted: granted > 0,
            in_minute,
            in_second: in_minute,
            minute_frees_at: Some(t0 as i64 + 60_000),
            second_frees_at: Some(t0 as i64 + 1_000),
        };
        assert!(l.take_leased(&k, t0).is_none(), "no lease yet");
        assert_eq!(l.lease_want(&k, busy, t0), (1, None));
        assert!(matches!(
            l.start_lease(&k, busy, 1, &window(1, 1), t0),
            Decision::Allowed(_)
        ));
        assert!(
            l.take_leased(&k, t0 + 1).is_none(),
            "a lease of one is used up"
        );
        // Ran out within the bucket: the next lease is twice as big, and its
        // admissions are given here until it is used up.
        assert_eq!(l.lease_want(&k, busy, t0 + 2), (2, None));
        assert_eq!(l.lease_want(&k, busy, t0 + 2), (2, None));
        let d = l.start_lease(&k, busy, 2, &window(2, 3), t0 + 2);
        let Decision::Allowed(info) = d else {
            panic!("{d:?}")
        };
        assert_eq!(info.remaining, 1_000_000 - 3);
        assert_eq!(l.take_leased(&k, t0 + 3), Some(Decision::Allowed(info)));
        assert!(l.take_leased(&k, t0 + 4).is_none());
        assert_eq!(l.lease_want(&k, busy, t0 + 5), (4, None));
        // The cap: a twentieth of 400 per second.
        for _ in 0..6 {
            let (want, _) = l.lease_want(&k, busy, t0 + 6);
            l.start_lease(&k, busy, want, &window(want, 10), t0 + 6);
            for _ in 1..want {
                assert!(l.take_leased(&k, t0 + 6).is_some());
            }
        }
        assert_eq!(l.lease_want(&k, busy, t0 + 7), (20, None));
        // A lease is good for its bucket only; one that ended with some left
        // makes the next as big as what was used in its bucket.
        let b1 = t0 + LEASE_BUCKET_MS;
        l.start_lease(&k, busy, 20, &window(20, 50), b1);
        for _ in 0..2 {
            assert!(l.take_leased(&k, b1 + 1).is_some());
        }
        let b2 = b1 + LEASE_BUCKET_MS;
        assert!(l.take_leased(&k, b2).is_none(), "the bucket ended");
        // The 17 never given go back, once.
        assert_eq!(l.lease_want(&k, busy, b2), (3, Some((b1, 17))));
        assert_eq!(l.lease_want(&k, busy, b2), (3, None));
        // A plan of 1,000 a minute leases at most 10 at once.
        let small = Limits {
            per_minute: 1_000,
            per_second: 400,
        };
        let k2 = key();
        for _ in 0..8 {
            let (want, _) = l.lease_want(&k2, small, t0);
            l.start_lease(&k2, small, want, &window(want, 10), t0);
            for _ in 1..want {
                assert!(l.take_leased(&k2, t0).is_some());
            }
        }
        assert_eq!(l.lease_want(&k2, small, t0).0, 10);
        // Nothing granted: refused with `Retry-After`.
        match l.start_lease(&k, busy, 0, &window(0, 400), b2) {
            Decision::Limited { retry_after, .. } => assert_eq!(retry_after, 1),
            d => panic!("{d:?}"),
        }
    }

    #[test]
    fn eleventh_request_in_a_second_is_limited_with_retry_after() {
        let l = RateLimiter::default();
        let k = key();
        let t0 = 1_000_000_000u64;
        for i in 0..10 {
            match l.check(&k, FREE, t0 + i * 10) {
                Decision::Allowed(info) => assert_eq!(info.remaining, 60 - (i as u32 + 1)),
                d => panic!("{d:?}"),
            }
        }
        match l.check(&k, FREE, t0 + 500) {
            Decision::Limited { retry_after, info } => {
                assert_eq!(retry_after, 1);
                assert_eq!(info.remaining, 50);
            }
            d => panic!("{d:?}"),
        }
        // One second after the first admission there is room again.
        assert!(matches!(l.check(&k, FREE, t0 + 1000), Decision::Allowed(_)));
    }

    #[test]
    fn sixty_first_in_a_minute_is_limited_until_the_oldest_leaves() {
        let l = RateLimiter::default();
        let k = key();
        let t0 = 5_000_000u64;
        for i in 0..60 {
            assert!(
                matches!(l.check(&k, FREE, t0 + i * 200), Decision::Allowed(_)),
                "request {i}"
            );
        }
        let now = t0 + 60 * 200;
        match l.check(&k, FREE, now) {
            Decision::Limited { retry_after, info } => {
                assert_eq!(info.remaining, 0);
                assert_eq!(retry_after, (t0 + 60_000 - now).div_ceil(1000));
                assert_eq!(info.reset, (t0 + 60_000).div_ceil(1000));
            }
            d => panic!("{d:?}"),
        }
        assert!(matches!(
            l.check(&k, FREE, t0 + 60_000),
            Decision::Allowed(_)
        ));
    }

    #[test]
    fn refused_requests_do_not_count_and_keys_are_independent() {
        let l = RateLimiter::default();
        let (a, b) = (key(), key());
        let t0 = 9_000_000u64;
        for i in 0..10 {
            l.check(&a, FREE, t0 + i);
        }
        for i in 0..5 {
            assert!(matches!(
                l.check(&a, FREE, t0 + 20 + i),
                Decision::Limited { .. }
            ));
        }
        assert!(matches!(l.check(&b, FREE, t0 + 30), Decision::Allowed(_)));
        // After the second passes, exactly 10 more are admitted: refusals left no trace.
        let admitted = (0..20)
            .filter(|i| matches!(l.check(&a, FREE, t0 + 1100 + i), Decision::Allowed(_)))
            .count();
        assert_eq!(admitted, 10);
    }

    #[test]
    fn ignoring_retry_after_ten_times_suspends_for_15_minutes() {
        let l = RateLimiter::default();
        let k = key();
        let t0 = 50_000_000u64;
        for i in 0..10 {
            l.check(&k, FREE, t0 + i);
        }
        // The first refusal tells it to wait; the next ten inside that wait are violations.
        assert!(matches!(
            l.check(&k, FREE, t0 + 10),
            Decision::Limited { retry_after: 1, .. }
        ));
        let mut last = None;
        for i in 0..10 {
            last = Some(l.check(&k, FREE, t0 + 20 + i));
        }
        match last.unwrap() {
            Decision::Limited { retry_after, .. } => assert_eq!(retry_after, 900),
            d => panic!("{d:?}"),
        }
        // Suspended: even after the window frees up.
        match l.check(&k, FREE, t0 + 5_000) {
            Decision::Limited { retry_after, .. } => {
                assert!(retry_after > 890 && retry_after <= 900)
            }
            d => panic!("{d:?}"),
        }
        assert!(matches!(
            l.check(&k, FREE, t0 + 30 + SUSPENSION_MS),
            Decision::Allowed(_)
        ));
    }

    #[test]
    fn many_requests_in_one_millisecond_count_one_by_one() {
        let l = RateLimiter::default();
        let k = key();
        let big = Limits {
            per_minute: 5_000,
            per_second: 1_000,
        };
        let t0 = 70_000_000u64;
        for i in 0..1_000 {
            match l.check(&k, big, t0 + i / 400) {
                Decision::Allowed(info) => assert_eq!(info.remaining, 5_000 - (i as u32 + 1)),
                d => panic!("request {i}: {d:?}"),
            }
        }
        match l.check(&k, big, t0 + 999) {
            Decision::Limited { retry_after, info } => {
                assert_eq!(retry_after, 1);
                assert_eq!(info.remaining, 4_000);
            }
            d => panic!("{d:?}"),
        }
        // Sends at `at` until the first refusal (fewer than ten refusals, so
        // no suspension); returns how many were admitted.
        let fill = |at: u64| {
            (0..)
                .take_while(|_| matches!(l.check(&k, big, at), Decision::Allowed(_)))
                .count()
        };
        // The 400 of t0 leave at t0+1000: exactly 400 more fit then.
        assert_eq!(fill(t0 + 1_000), 400);
        // Per minute: 1,400 so far, then 1,000 a second until 5,000.
        assert_eq!(fill(t0 + 2_000), 1_000);
        assert_eq!(fill(t0 + 3_000), 1_000);
        assert_eq!(fill(t0 + 4_000), 1_000);
        assert_eq!(fill(t0 + 5_000), 600);
        match l.check(&k, big, t0 + 10_000) {
            Decision::Limited { retry_after, info } => {
                assert_eq!(info.remaining, 0);
                assert_eq!(retry_after, 50);
            }
            d => panic!("{d:?}"),
        }
    }

    #[test]
    fn a_clock_that_steps_back_neither_panics_nor_frees_the_window() {
        let l = RateLimiter::default();
        let k = key();
        let t0 = 80_000_000u64;
        for i in 0..10 {
            l.check(&k, FREE, t0 + 500 + i);
        }
        assert!(matches!(l.check(&k, FREE, t0), Decision::Limited { .. }));
        assert!(matches!(
            l.check(&k, FREE, t0 + 1_510),
            Decision::Allowed(_)
        ));
    }

    #[test]
    fn idle_keys_are_evicted() {
        let l = RateLimiter::default();
        l.check(&key(), FREE, 1_000);
        l.check(&key(), FREE, 50_000);
        l.evict_idle(62_000);
        assert_eq!(l.tracked(), 1);
    }

    #[test]
    fn sliding_counter_admits_the_limit_per_window() {
        let c = SlidingCounter::new(20, 3_600_000);
        let k = source_key("192.0.2.9");
        for i in 0..20 {
            assert_eq!(c.admit(&k, 1_000 + i * 1_000), Ok(()), "request {}", i + 1);
        }
        // The 21st waits until the first leaves the hour.
        assert_eq!(c.admit(&k, 30_000), Err(3_600 - 29));
        assert_eq!(c.admit(&source_key("192.0.2.10"), 30_000), Ok(()));
        assert_eq!(c.admit(&k, 1_000 + 3_600_000), Ok(()));
    }

    #[test]
    fn failure_guard_blocks_after_the_limit_for_five_minutes() {
        let g = FailureGuard::new(10);
        let k = client_source_key("app_x", "192.0.2.1");
        for i in 0..9 {
            g.record(&k, 1_000 + i);
            assert_eq!(g.blocked(&k, 1_000 + i), None);
        }
        g.record(&k, 2_000);
        assert_eq!(g.blocked(&k, 2_000), Some(300));
        assert_eq!(g.blocked(&k, 2_000 + FAILURE_WINDOW_MS), None);
        assert_eq!(
            g.blocked(&client_source_key("app_y", "192.0.2.1"), 2_000),
            None
        );
        // D28 (revised): the same client from another address is not blocked.
        assert_eq!(
            g.blocked(&client_source_key("app_x", "192.0.2.2"), 2_000),
            None
        );
    }
}
