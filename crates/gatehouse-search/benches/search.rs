//! The in-memory search at one million users (issue 16): the scan a search
//! costs without HTTP or storage. `cargo bench -p gatehouse-search`.

use criterion::{Criterion, criterion_group, criterion_main};
use gatehouse_domain::SearchText;
use gatehouse_domain::search::{SearchRow, product_needles, product_text, user_needles, user_text};
use gatehouse_search::{Filter, Index};

const SURNAMES: [&str; 25] = [
    "Hopper",
    "Knuth",
    "Lovelace",
    "Turing",
    "Liskov",
    "Hamilton",
    "Dijkstra",
    "Ritchie",
    "Thompson",
    "Kernighan",
    "Stroustrup",
    "Torvalds",
    "Wirth",
    "Backus",
    "McCarthy",
    "Minsky",
    "Hoare",
    "Lamport",
    "Cerf",
    "Kahn",
    "Berners",
    "Goldberg",
    "Kay",
    "Engelbart",
    "Sutherland",
];
const GIVEN: [&str; 12] = [
    "Ada", "Grace", "Alan", "Barbara", "Margaret", "Edsger", "Dennis", "Ken", "Brian", "Bjarne",
    "Linus", "Niklaus",
];
const DOMAINS: [&str; 9] = [
    "northwind.example",
    "contoso.example",
    "fabrikam.example",
    "initech.example",
    "globex.example",
    "umbrella.example",
    "acme.example",
    "hooli.example",
    "stark.example",
];

fn index(n: usize) -> Index {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    Index::from_rows(
        (0..n)
            .map(|i| {
                let (g, s, d) = (
                    GIVEN[next() as usize % 12],
                    SURNAMES[next() as usize % 25],
                    DOMAINS[next() as usize % 9],
                );
                SearchRow {
                    created_at: 1_700_000_000_000 + i as i64,
                    id: format!("usr_{i:026}"),
                    text: user_text(
                        &format!("{g} {s}"),
                        &format!("{}.{}.{i}@{d}", g.to_lowercase(), s.to_lowercase()),
                    ),
                    attrs: [(next() % 3) as u8, (next() % 3) as u8],
                }
            })
            .collect(),
    )
}

fn bench(c: &mut Criterion) {
    let index = index(1_000_000);
    let mut g = c.benchmark_group("search_1m_users");
    g.sample_size(20);
    for q in ["ad", "hopper", "northwind", ".500000@", "zzzzqqq"] {
        let needles = user_needles(&SearchText::parse(q).unwrap().unwrap());
        g.bench_function(format!("q={q}"), |b| {
            b.iter(|| index.page(&needles, Filter::default(), 0, 20))
        });
    }
    g.bench_function("offset 500000", |b| {
        b.iter(|| index.page(&Some(vec![]), Filter::default(), 500_000, 20))
    });
    g.bench_function("offset 500000 role", |b| {
        b.iter(|| index.page(&Some(vec![]), Filter([Some(1), None]), 300_000, 20))
    });
    g.finish();
    let products = Index::from_rows(
        (0..1_000_000usize)
            .map(|i| SearchRow {
                created_at: i as i64,
                id: format!("prd_{i:026}"),
                text: product_text(
                    &format!(
                        "{} {} {}",
                        ["Blue", "Red", "Slim", "Soft"][i % 4],
                        ["Cotton", "Wool", "Silk"][i % 3],
                        ["Shirt", "Scarf", "Sock", "Hat", "Coat"][i % 5]
                    ),
                    &format!("KIN-{i:07}"),
                ),
                attrs: [(i % 3) as u8, 0],
            })
            .collect(),
    );
    let mut g = c.benchmark_group("search_1m_products");
    g.sample_size(20);
    for q in ["s", "cot", "blue shirt", "0500000"] {
        let needles = product_needles(&SearchText::parse(q).unwrap().unwrap());
        g.bench_function(format!("q={q}"), |b| {
            b.iter(|| products.page(&needles, Filter::default(), 0, 20))
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
