//! Issue 12, item 8: a database made by the last release (commit c73c7d0,
//! PostgreSQL migrations 1–4) migrates forward without loss.
//!
//! `tests/fixtures/main-c73c7d0.sql` is a `pg_dump` of a database that
//! release's binary wrote (`tests/fixtures/README.md` says how, and lists
//! what it holds). The test loads it into a new database of the throwaway
//! cluster, connects today's store (migrations 6 and 7, e-mail re-keying at
//! start) and checks that every migration is applied, that every row is
//! still there and readable through the `Store` API, that the e-mail keys
//! follow D8 (revised), and that new writes work. Skipped without
//! PostgreSQL binaries (see `gatehouse_store_postgres::testing`).

use std::borrow::Cow;

use gatehouse_store::migrated::{self, Fixture};
use gatehouse_store_postgres::PgStore;
use gatehouse_store_postgres::testing::fresh_database_url;
use sqlx_core::connection::Connection;
use sqlx_core::executor::Executor;
use sqlx_core::migrate::{Migration, MigrationType};
use sqlx_postgres::PgConnection;

const DUMP: &str = include_str!("fixtures/main-c73c7d0.sql");

/// The ids in the fixture (also in `fixtures/main-c73c7d0.secrets.json`).
const ORG_A: &str = "org_xD05v206Xcu2bihFS3LUpH";
const ORG_B: &str = "org_Zfe5KxBZ3UaGfE05URxLFX";
const BOOT_ID: &str = "app_gkPNXwbS105wTEI0kBH0ky";
const BOOT_SECRET: &str = "gcs_g681dRZw778GEZyk5iaOOIb54pSg3Q3AmtMBUCy7Paw";
const CONF_ID: &str = "app_GKpDZY8cbvaJMLT19qkNyd";
const CONF_SECRET: &str = "gcs_FdZhd0B3aqip5i6LsySiP1IVwHDzjd7rTBAFwV5ID6H";
const PUB_ID: &str = "app_NstOab5dMmqUMOVDGxDEPX";
const KEY_ID: &str = "key_gfXSvqxycNw3qD1YmDV6QZ";
const KEY_SECRET: &str = "gk_live_58Af0etv5I7Pk7TDuGTateSWs3C0JrwURyE7ytAwsAQ";
const SIGNING_KID: &str = "AiK3LyBy6EmLmxXNl";

/// The ids of `migrated::USERS` and `migrated::PRODUCTS` in this fixture.
const USER_IDS: [&str; 9] = [
    "usr_cmgMh0wJ61HDJAxYZforxT",
    "usr_MQP7BMYoUnLOCYWE9pi5rm",
    "usr_d9aBq413qirAfYx0nn8IXm",
    "usr_pmO3iKEvZyQydIhD0Hsq7G",
    "usr_75qrlV5gIOlRUvD3mEFYYm",
    "usr_p6zsDECUmZyiIxJ5bnawjg",
    "usr_eGI757KLDEYQMWy2y0SlsV",
    "usr_GVqyDn0N4Rss0JF3wZXAtp",
    "usr_mVZFqTx9X9FK5KKH3ssjtt",
];
const PRODUCT_IDS: [&str; 4] = [
    "prod_fFeCvJIrGqvhMVC4DUK75n",
    "prod_GkvRoGGR0AfzLi3xRaPsm8",
    "prod_2ro9tZNX2DQfz69XKoVARq",
    "prod_U4AoDXn0rSP9nxyJPpKX0u",
];

/// SHA-256 computed by the server (`sha256()`, PostgreSQL 11+): client
/// secrets and API keys are stored as SHA-256 digests, and this crate has
/// no hashing dependency of its own to compute them here.
async fn sha256(url: &str, text: &str) -> [u8; 32] {
    let mut c = PgConnection::connect(url).await.unwrap();
    let d: Vec<u8> = sqlx_core::query_scalar::query_scalar("SELECT sha256(convert_to($1, 'UTF8'))")
        .bind(text)
        .fetch_one(&mut c)
        .await
        .unwrap();
    c.close().await.unwrap();
    d.try_into().unwrap()
}

/// Loads the dump into the empty database at `url`. pg_dump 15.14 and later
/// write psql meta-commands (`\restrict KEY` … `\unrestrict KEY`) around
/// the SQL; the server does not know them, so those lines are dropped. The
/// rest (the dump is made with `--inserts`, no `COPY … FROM stdin`) goes to
/// the server as one simple-protocol batch, as psql would send it.
async fn load_dump(url: &str) {
    let sql: String = DUMP
        .lines()
        .filter(|l| !l.starts_with('\\'))
        .flat_map(|l| [l, "\n"])
        .collect();
    let mut c = PgConnection::connect(url).await.unwrap();
    c.execute(sql.as_str())
        .await
        .unwrap_or_else(|e| panic!("loading the fixture dump: {e}"));
    c.close().await.unwrap();
}

/// (version, success, checksum) from `_sqlx_migrations`.
async fn applied(url: &str) -> Vec<(i64, bool, Vec<u8>)> {
    let mut c = PgConnection::connect(url).await.unwrap();
    let rows = sqlx_core::query_as::query_as(
        "SELECT version, success, checksum FROM _sqlx_migrations ORDER BY version",
    )
    .fetch_all(&mut c)
    .await
    .unwrap();
    c.close().await.unwrap();
    rows
}

async fn count(url: &str, table: &str) -> i64 {
    let mut c = PgConnection::connect(url).await.unwrap();
    let n = sqlx_core::query_scalar::query_scalar(&format!("SELECT count(*) FROM {table}"))
        .fetch_one(&mut c)
        .await
        .unwrap();
    c.close().await.unwrap();
    n
}

async fn key_of(url: &str, id: &str) -> String {
    let mut c = PgConnection::connect(url).await.unwrap();
    let k = sqlx_core::query_scalar::query_scalar("SELECT email_norm FROM users WHERE id = $1")
        .bind(id)
        .fetch_one(&mut c)
        .await
        .unwrap();
    c.close().await.unwrap();
    k
}

/// sqlx's checksum of a migration file, as `schema.rs` builds it.
fn checksum(version: i64, description: &'static str, sql: &'static str) -> Vec<u8> {
    Migration::new(
        version,
        Cow::Borrowed(description),
        MigrationType::Simple,
        Cow::Borrowed(sql),
        false,
    )
    .checksum
    .into_owned()
}

#[tokio::test]
async fn a_database_of_the_last_release_migrates_forward_without_loss() {
    let Some(url) = fresh_database_url().await else {
        return;
    };
    load_dump(&url).await;
    // The premise: the loaded database is a c73c7d0 one (migrations 1–4).
    let before = applied(&url).await;
    assert_eq!(before.iter().map(|m| m.0).collect::<Vec<_>>(), [1, 2, 3, 4]);

    // The keys the old rule (plain lower case) wrote, which the store must
    // replace when it starts.
    assert_eq!(key_of(&url, USER_IDS[7]).await, "stra\u{df}e@example.com");
    assert_eq!(key_of(&url, USER_IDS[8]).await, "ana@b\u{fc}cher.example");

    let store = PgStore::connect(&url).await.unwrap();
    // D8 (revised): re-keyed at start.
    assert_eq!(key_of(&url, USER_IDS[7]).await, "strasse@example.com");
    assert_eq!(key_of(&url, USER_IDS[8]).await, "ana@xn--bcher-kva.example");
    assert_eq!(key_of(&url, USER_IDS[1]).await, "jos\u{e9}@example.com");

    // --- every migration applied; the old ones untouched ------------------
    let after = applied(&url).await;
    assert_eq!(
        after.iter().map(|m| (m.0, m.1)).collect::<Vec<_>>(),
        [
            (1, true),
            (2, true),
            (3, true),
            (4, true),
            (6, true),
            (7, true),
            (8, true),
            (9, true),
            (10, true),
            (11, true),
            (12, true),
            (13, true),
            (14, true),
            (15, true),
            (16, true),
            (17, true),
            (18, true),
            (19, true),
            (20, true),
            (21, true),
            (22, true),
            (23, true),
            (24, true),
            (25, true),
            (26, true),
            (27, true),
            (28, true),
            (29, true),
            (30, true),
            (31, true)
        ]
    );
    assert_eq!(
        after[..4],
        before[..],
        "the old bookkeeping is kept as it was"
    );
    let files = [
        (1, "init", include_str!("../migrations/0001_init.sql")),
        (2, "auth", include_str!("../migrations/0002_auth.sql")),
        (
            3,
            "rate_limits",
            include_str!("../migrations/0003_rate_limits.sql"),
        ),
        (4, "jobs", include_str!("../migrations/0004_jobs.sql")),
        (
            6,
            "email_keys",
            include_str!("../migrations/0006_email_keys.sql"),
        ),
        (
            7,
            "reset_requests",
            include_str!("../migrations/0007_reset_requests.sql"),
        ),
        (
            8,
            "idempotency",
            include_str!("../migrations/0008_idempotency.sql"),
        ),
        (9, "oidc", include_str!("../migrations/0009_oidc.sql")),
        (
            10,
            "client_revocations",
            include_str!("../migrations/0010_client_revocations.sql"),
        ),
    ];
    for ((v, d, sql), row) in files.into_iter().zip(&after) {
        assert_eq!(row.2, checksum(v, d, sql), "checksum of migration {v}");
    }
    for (table, n) in migrated::TABLES {
        assert_eq!(count(&url, table).await, n, "rows of {table}");
    }
    one_search_schema(&url).await;
    let f = facts(&url).await;
    migrated::check_contents(&store, &f, 0).await;
    migrated::check_email_keys(&store, &f).await;
    migrated::check_new_writes(&store, &f).await;
    store.close().await;

    // Connecting again (a restart) finds nothing left to do.
    let again = PgStore::connect(&url).await.unwrap();
    assert_eq!(applied(&url).await, after);
    // check_new_writes added one user to each organization.
    migrated::check_contents(&again, &f, 1).await;
    again.close().await;
}

/// Migration 15 (one search): the trigram and tsvector indexes are gone,
/// and the columns they indexed take what a node of the previous release
/// still writes during a rolling upgrade (its INSERTs name them), or
/// nothing, as this release writes.
async fn one_search_schema(url: &str) {
    let mut c = PgConnection::connect(url).await.unwrap();
    let left: Vec<String> = sqlx_core::query_scalar::query_scalar(
        "SELECT indexname::text FROM pg_indexes
         WHERE indexname IN ('users_search', 'products_search')
            OR indexdef LIKE '%gin_trgm_ops%' OR indexdef LIKE '%USING gin%'",
    )
    .fetch_all(&mut c)
    .await
    .unwrap();
    assert_eq!(left, Vec::<String>::new(), "no search index is left");
    c.execute("BEGIN").await.unwrap();
    c.execute(
        "INSERT INTO users (id, org_id, email, email_norm, name, name_fold, role, status, created_at, updated_at)
         VALUES ('usr_oldnode', 'org_xD05v206Xcu2bihFS3LUpH', 'old@example.com', 'old@example.com',
                 'Old Node', 'old node', 'viewer', 'active', 1, 1)",
    )
    .await
    .expect("a previous-release INSERT of a user still works");
    c.execute(
        "INSERT INTO products (id, org_id, name, sku, price, stock, status, words, created_at, updated_at)
         VALUES ('prod_oldnode', 'org_xD05v206Xcu2bihFS3LUpH', 'Old Kite', 'PREV-NODE-1', 1, 1, 'available',
                 array_to_tsvector(ARRAY['old', 'kite']), 1, 1)",
    )
    .await
    .expect("a previous-release INSERT of a product still works");
    c.execute(
        "INSERT INTO users (id, org_id, email, email_norm, name, role, status, created_at, updated_at)
         VALUES ('usr_newnode', 'org_xD05v206Xcu2bihFS3LUpH', 'new@example.com', 'new@example.com',
                 'New Node', 'viewer', 'active', 1, 1)",
    )
    .await
    .expect("this release's INSERT of a user (no name_fold)");
    c.execute("ROLLBACK").await.unwrap();
    c.close().await.unwrap();
}

/// This fixture, for the checks both backends share.
async fn facts(url: &str) -> Fixture {
    Fixture {
        org_a: ORG_A,
        org_b: ORG_B,
        boot_id: BOOT_ID,
        conf_id: CONF_ID,
        pub_id: PUB_ID,
        key_id: KEY_ID,
        signing_kid: SIGNING_KID,
        boot_digest: sha256(url, BOOT_SECRET).await,
        conf_digest: sha256(url, CONF_SECRET).await,
        key_digest: sha256(url, KEY_SECRET).await,
        user_ids: USER_IDS,
        product_ids: PRODUCT_IDS,
    }
}
