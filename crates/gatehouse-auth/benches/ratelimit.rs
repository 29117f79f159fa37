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
