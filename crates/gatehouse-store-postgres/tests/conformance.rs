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
