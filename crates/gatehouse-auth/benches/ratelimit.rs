//! The D28 limiter's cost per request (issue 4: "well under a microsecond").
//!
//! `cargo bench -p gatehouse-auth --bench ratelimit`

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use gatehouse_auth::caller::Lineage;
use gatehouse_auth::ratelimit::{Limits, RateLimiter};
use gatehouse_domain::ClientId;

const PRO: Limits = Limits {
    per_minute: 600,
    per_second: 50,
};

fn bench(c: &mut Criterion) {
    // One busy credential on pro: requests 100 ms apart keep its window full
    // (600 entries), the limiter's worst steady state.
    let limiter = RateLimiter::default();
    let key = Lineage::Client(ClientId::generate());
    let mut now = 1_800_000_000_000u64;
    c.bench_function("check: one busy credential (pro)", |b| {
        b.iter(|| {
            now += 100;
            black_box(limiter.check(&key, PRO, now))
        })
    });

    // One enterprise credential at 20,000 requests/s (20 per millisecond)
    // with limits it never reaches: a minute holds 1.2 million admissions.
    // The cost must not grow with that number (it once walked the last
    // second's 20,000 timestamps on every check).
    let big = Limits {
        per_minute: 1_000_000_000,
        per_second: 100_000_000,
    };
    let limiter = RateLimiter::default();
    let key = Lineage::Client(ClientId::generate());
    let mut n = 0u64;
    let t0 = 1_800_000_000_000u64;
    c.bench_function("check: one enterprise credential at 20,000/s", |b| {
        b.iter(|| {
            n += 1;
            black_box(limiter.check(&key, big, t0 + n / 20))
        })
    });

    // Many credentials: 100,000 lineages, each request to the next one.
    let limiter = RateLimiter::default();
    let keys: Vec<Lineage> = (0..100_000)
        .map(|_| Lineage::Client(ClientId::generate()))
        .collect();
    let mut i = 0usize;
    let mut now = 1_800_000_000_000u64;
    c.bench_function("check: 100k credentials round robin", |b| {
        b.iter(|| {
            i = (i + 1) % keys.len();
            now += 1;
            black_box(limiter.check(&keys[i], PRO, now))
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
