//! D14 at scale: list, filter and count one organization of a million users
//! (and 100 000 products) in SQLite. Search (`q`) is not storage's: the
//! index's own benchmark is `cargo bench -p gatehouse-search`.
//!
//!     cargo bench -p gatehouse-store-sqlite --bench million
//!
//! The seed (bulk SQL in one transaction, triggers included) is written once
//! to `target/bench-million.db` and reused by later runs. `USERS=N` changes
//! the size.

use std::path::PathBuf;
use std::time::Instant;

use criterion::{Criterion, criterion_group, criterion_main};
use gatehouse_domain::{
    OrgId, Organization, Page, Plan, ProductStatus, Role, Timestamp, UserStatus,
};
use gatehouse_store::prelude::*;
use gatehouse_store::{ProductFilter, UserFilter};
use gatehouse_store_sqlite::SqliteStore;

fn db_path(users: usize) -> PathBuf {
    let target = std::env::var("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| PathBuf::from("../../target"));
    target.join(format!("bench-million-{users}.db"))
}

fn seed(path: &PathBuf, users: usize) -> OrgId {
    let org_file = path.with_extension("org");
    if path.exists()
        && let Ok(id) = std::fs::read_to_string(&org_file)
    {
        return OrgId::from_trusted(id);
    }
    let _ = std::fs::remove_file(path);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let store = SqliteStore::open(path).unwrap();
    let org = Organization {
        id: OrgId::generate(),
        name: "Big".into(),
        plan: Plan::Pro,
        per_minute: None,
        per_second: None,
        created_at: Timestamp::now(),
    };
    rt.block_on(store.create_org(&org)).unwrap();
    drop(store);
    let started = Instant::now();
    let mut c = rusqlite::Connection::open(path).unwrap();
    c.execute_batch("PRAGMA journal_mode=WAL; PRAGMA synchronous=OFF;")
        .unwrap();
    let tx = c.transaction().unwrap();
    {
        let first = [
            "ada", "grace", "alan", "edsger", "barbara", "donald", "ken", "dennis", "linus",
            "margaret",
        ];
        let last = [
            "lovelace", "hopper", "turing", "dijkstra", "liskov", "knuth", "thompson", "ritchie",
            "torvalds", "hamilton",
        ];
        let roles = ["viewer", "viewer", "viewer", "editor", "admin"];
        let statuses = ["active", "active", "active", "inactive", "pending_invite"];
        let mut st = tx
            .prepare("INSERT INTO users (id, org_id, email, email_norm, name, role, status, created_at, updated_at) VALUES (?1, ?2, ?3, ?3, ?4, ?5, ?6, ?7, ?7)")
            .unwrap();
        for i in 0..users {
            let name = format!("{} {} {i}", first[i % 10], last[(i / 10) % 10]);
            let email = format!(
                "{}.{}{i}@example{}.com",
                first[i % 10],
                last[(i / 10) % 10],
                i % 97
            );
            st.execute(rusqlite::params![
                format!("usr_{i:022}"),
                org.id.as_str(),
                email,
                name,
                roles[i % 5],
                statuses[(i / 5) % 5],
                1_700_000_000_000i64 + i as i64,
            ])
            .unwrap();
        }
        let mut st = tx
            .prepare("INSERT INTO products (id, org_id, name, sku, price, stock, status, created_at, updated_at) VALUES (?1, ?2, ?3, ?4, 100, ?5, ?6, ?7, ?7)")
            .unwrap();
        let colours = ["Blue", "Red", "Green", "Black", "White"];
        let kinds = ["Shirt", "Jeans", "Shoe", "Hat", "Sock", "Jacket"];
        for i in 0..users / 10 {
            let stock = (i % 7) as i64;
            st.execute(rusqlite::params![
                format!("prod_{i:022}"),
                org.id.as_str(),
                format!("{} {} {i}", colours[i % 5], kinds[(i / 5) % 6]),
                format!(
                    "{}-{}-{i}",
                    kinds[(i / 5) % 6].to_uppercase(),
                    colours[i % 5].to_uppercase()
                ),
                stock,
                ProductStatus::for_stock(stock).as_str(),
                1_700_000_000_000i64 + i as i64,
            ])
            .unwrap();
        }
    }
    tx.commit().unwrap();
    c.execute_batch("ANALYZE; PRAGMA wal_checkpoint(TRUNCATE);")
        .unwrap();
    eprintln!(
        "seeded {users} users and {} products in {:.1?}",
        users / 10,
        started.elapsed()
    );
    std::fs::write(&org_file, org.id.as_str()).unwrap();
    org.id
}

fn bench(c: &mut Criterion) {
    let users: usize = std::env::var("USERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let path = db_path(users);
    let org = seed(&path, users);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let store = SqliteStore::open(&path).unwrap();
    let page = Page {
        limit: 20,
        offset: 0,
    };
    let cases: Vec<(&str, UserFilter, Page)> = vec![
        ("users/first page", UserFilter::default(), page),
        (
            "users/offset 10000",
            UserFilter::default(),
            Page {
                limit: 20,
                offset: 10_000,
            },
        ),
        (
            "users/role=admin",
            UserFilter {
                role: Some(Role::Admin),
                ..Default::default()
            },
            page,
        ),
        (
            "users/role+status",
            UserFilter {
                role: Some(Role::Editor),
                status: Some(UserStatus::Inactive),
            },
            page,
        ),
    ];
    let mut g = c.benchmark_group("million");
    g.sample_size(20);
    for (name, filter, page) in cases {
        g.bench_function(name, |b| {
            b.to_async(&rt)
                .iter(|| async { store.list_users(&org, &filter, page).await.unwrap() })
        });
    }
    for (name, filter) in [
        ("products/first page", ProductFilter::default()),
        (
            "products/status=out_of_stock",
            ProductFilter {
                status: Some(ProductStatus::OutOfStock),
            },
        ),
    ] {
        g.bench_function(name, |b| {
            b.to_async(&rt)
                .iter(|| async { store.list_products(&org, &filter, page).await.unwrap() })
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
