//! The store conformance suite of `gatehouse-store`, against PostgreSQL: a
//! fresh database per test on a throwaway cluster started once for this test
//! binary (see `gatehouse_store_postgres::testing`). Without PostgreSQL
//! binaries every test prints "skipped" and passes, unless
//! `GATEHOUSE_REQUIRE_POSTGRES=1`.

use gatehouse_store_postgres::testing::fresh_store;

gatehouse_store::store_conformance_tests!(match fresh_store().await {
    Some(store) => store,
    None => return,
});

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leases_left_behind_at_start() {
    let Some(store) = fresh_store().await else {
        return;
    };
    // Nodes share a PostgreSQL database (D44).
    gatehouse_store::conformance::leases_left_behind_at_start(&store, false).await;
}
