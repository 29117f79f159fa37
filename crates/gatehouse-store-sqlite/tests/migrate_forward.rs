//! Issue 12, item 8: a database made by the last release (commit c73c7d0,
//! SQLite migrations 1–5, no checksums) migrates forward without loss.
//!
//! `tests/fixtures/main-c73c7d0.db` was written by that release's binary
//! (`tests/fixtures/README.md` says how, and lists what it holds). The test
//! opens a copy with today's store and checks that every migration is
//! applied with its checksum, that every row is still there and readable
//! through the `Store` API, that the e-mail keys follow D8 (revised), and
//! that new writes work.

use std::path::{Path, PathBuf};

use gatehouse_store::migrated::{self, Fixture};
use gatehouse_store_sqlite::SqliteStore;
use sha2::{Digest, Sha256};

/// The ids in the fixture (also in `fixtures/main-c73c7d0.secrets.json`).
const ORG_A: &str = "org_jiiwcl0Gt0exLehdmvDkDC";
const ORG_B: &str = "org_qVWPCZCCplFQG3iqOihK5M";
const BOOT_ID: &str = "app_dp135peIAIAGathGp0kNuE";
const BOOT_SECRET: &str = "gcs_6wvYzAoLMF2toVUmXSAuLXDmEeVasquGzqKLQ5m9JMo";
const CONF_ID: &str = "app_DDPOtwsezP0rOTR3b2QqCR";
const CONF_SECRET: &str = "gcs_daT0g41JtsLmstoIUO3J3tdusWCSXobMd2g90QNQY46";
const PUB_ID: &str = "app_UC8Ye1bnPj0oORlwSsHwCl";
const KEY_ID: &str = "key_Wthm4Zvwm4oTPAB6H4nHTe";
const KEY_SECRET: &str = "gk_live_10OjMIKdDq8asr2a12o3Hu283hzWMkl2faMskmT8Lmf";
const SIGNING_KID: &str = "Fhz49dYv4IQ8ajcbW";

/// The ids of `migrated::USERS` and `migrated::PRODUCTS` in this fixture.
const USER_IDS: [&str; 9] = [
    "usr_8Pod6IVZbSdLrbzEdeZQjE",
    "usr_lK7b1KAzhARxvYrkYea7hX",
    "usr_Lfp4ZolAMoebrIykSI1f02",
    "usr_1grw1kWzOnCJnkzW0PrzGG",
    "usr_8HdFcJJY35fveCdquvlo05",
    "usr_rkyKUkD8IfbGgWXvMGa4iN",
    "usr_hW2uzi1M1UEfzZBdBR4Ghu",
    "usr_g6KOS99dt6fCbP3F3TkyoE",
    "usr_IutBRAAuyMMtU2FF1QcvRY",
];
const PRODUCT_IDS: [&str; 4] = [
    "prod_NznU0dnwRDuNTkuH7dOfNk",
    "prod_2m40N1JYffdHoC46HTqoCl",
    "prod_EYsJFO5JruxINlmQyC82Uk",
    "prod_MxsbqYG21imwCENCHJdmZy",
];

/// The migrations this build embeds, as `schema.rs` lists them: the
/// checksums recorded for an old database must be these files' SHA-256.
const MIGRATIONS: [(i64, &str); 26] = [
    (1, include_str!("../migrations/0001_init.sql")),
    (2, include_str!("../migrations/0002_api_keys.sql")),
    (3, include_str!("../migrations/0003_auth.sql")),
    (4, include_str!("../migrations/0004_access_jti.sql")),
    (5, include_str!("../migrations/0005_jobs.sql")),
    (6, include_str!("../migrations/0006_email_keys.sql")),
    (7, include_str!("../migrations/0007_reset_requests.sql")),
    (8, include_str!("../migrations/0008_idempotency.sql")),
    (9, include_str!("../migrations/0009_oidc.sql")),
    (
        10,
        include_str!("../migrations/0010_client_revocations.sql"),
    ),
    (11, include_str!("../migrations/0011_management.sql")),
    (12, include_str!("../migrations/0012_search_changes.sql")),
    (13, include_str!("../migrations/0013_offboarding.sql")),
    (14, include_str!("../migrations/0014_one_search.sql")),
    (15, include_str!("../migrations/0015_used_once.sql")),
    (16, include_str!("../migrations/0016_events.sql")),
    (17, include_str!("../migrations/0017_webhook_endpoints.sql")),
    (
        18,
        include_str!("../migrations/0018_webhook_deliveries.sql"),
    ),
    (19, include_str!("../migrations/0019_sessions.sql")),
    (20, include_str!("../migrations/0020_mfa.sql")),
    (
        21,
        include_str!("../migrations/0021_master_key_rotation.sql"),
    ),
    (22, include_str!("../migrations/0022_passkeys.sql")),
    (23, include_str!("../migrations/0023_audit.sql")),
    (24, include_str!("../migrations/0024_audit_keys.sql")),
    (25, include_str!("../migrations/0025_audit_first_uses.sql")),
    (
        26,
        include_str!("../migrations/0026_audit_sealed_at_insert.sql"),
    ),
];

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/main-c73c7d0.db")
}

fn sha256(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

/// A copy of the fixture in a temporary directory: the committed file must
/// stay as the old release wrote it, and opening migrates in place.
fn copy_fixture() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gatehouse.db");
    std::fs::copy(fixture(), &path).unwrap();
    (dir, path)
}

#[test]
fn the_fixture_is_what_the_old_release_left() {
    // Guards the premise: the committed file is a c73c7d0 database (five
    // migrations, no checksum column), so the test below really migrates.
    // Read from a copy too: the file is in WAL mode, and even a read-only
    // open would leave `-wal`/`-shm` files beside the committed one.
    let (_dir, path) = copy_fixture();
    let c = rusqlite::Connection::open(&path).unwrap();
    let versions: Vec<i64> = c
        .prepare("SELECT version FROM schema_migrations ORDER BY version")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(versions, [1, 2, 3, 4, 5]);
    let has_checksum: bool = c
        .query_row(
            "SELECT EXISTS (SELECT 1 FROM pragma_table_info('schema_migrations') WHERE name = 'checksum')",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert!(!has_checksum);
    // The keys the old rule (plain lower case) wrote, which opening must
    // replace.
    for (id, old_key) in [
        (USER_IDS[7], "stra\u{df}e@example.com"),
        (USER_IDS[8], "ana@b\u{fc}cher.example"),
    ] {
        let k: String = c
            .query_row("SELECT email_norm FROM users WHERE id = ?1", [id], |r| {
                r.get(0)
            })
            .unwrap();
        assert_eq!(k, old_key);
    }
}

#[tokio::test]
async fn a_database_of_the_last_release_migrates_forward_without_loss() {
    let (_dir, path) = copy_fixture();
    let store = SqliteStore::open(&path).unwrap();

    // --- every migration applied, each with its checksum ------------------
    {
        let c = rusqlite::Connection::open(&path).unwrap();
        let applied: Vec<(i64, Option<Vec<u8>>)> = c
            .prepare("SELECT version, checksum FROM schema_migrations ORDER BY version")
            .unwrap()
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        let expected: Vec<(i64, Option<Vec<u8>>)> = MIGRATIONS
            .iter()
            .map(|(v, sql)| (*v, Some(sha256(sql.as_bytes()).to_vec())))
            .collect();
        assert_eq!(applied, expected);
        let counts: Vec<(String, i64)> = [
            "organizations",
            "users",
            "products",
            "clients",
            "api_keys",
            "signing_keys",
            "outbox",
            "user_tokens",
            "revocations",
        ]
        .iter()
        .map(|t| {
            let n = c
                .query_row(&format!("SELECT count(*) FROM {t}"), [], |r| r.get(0))
                .unwrap();
            (t.to_string(), n)
        })
        .collect();
        let want: Vec<(String, i64)> = migrated::TABLES
            .iter()
            .map(|(t, n)| (t.to_string(), *n))
            .collect();
        assert_eq!(counts, want, "no row lost");
        // Migration 14 (one search): the full-text tables and the triggers
        // that fed them are gone; the counting triggers are still there.
        let objects: Vec<String> = c
            .prepare(
                "SELECT name FROM sqlite_master
                 WHERE name LIKE '%fts%' OR sql LIKE '%fts%' ORDER BY name",
            )
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(objects, Vec::<String>::new(), "nothing full-text is left");
        let triggers: Vec<String> = c
            .prepare(
                "SELECT name FROM sqlite_master WHERE type = 'trigger'
                 AND (name LIKE 'users_a%' OR name LIKE 'products_a%') ORDER BY name",
            )
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(
            triggers,
            [
                "products_ad",
                "products_ai",
                "products_au_count",
                "users_ad",
                "users_ai",
                "users_au_count"
            ]
        );
        // D8 (revised): the old keys were re-keyed at open.
        for (id, key) in [
            (USER_IDS[7], "strasse@example.com"),
            (USER_IDS[8], "ana@xn--bcher-kva.example"),
            (USER_IDS[1], "jos\u{e9}@example.com"),
        ] {
            let k: String = c
                .query_row("SELECT email_norm FROM users WHERE id = ?1", [id], |r| {
                    r.get(0)
                })
                .unwrap();
            assert_eq!(k, key, "{id}");
        }
    }

    let f = facts();
    migrated::check_contents(&store, &f, 0).await;
    migrated::check_email_keys(&store, &f).await;
    migrated::check_new_writes(&store, &f).await;

    // Opening the migrated file again (a restart) still reads everything.
    drop(store);
    let again = SqliteStore::open(&path).unwrap();
    // check_new_writes added one user to each organization.
    migrated::check_contents(&again, &f, 1).await;
}

/// This fixture, for the checks both backends share.
fn facts() -> Fixture {
    Fixture {
        org_a: ORG_A,
        org_b: ORG_B,
        boot_id: BOOT_ID,
        conf_id: CONF_ID,
        pub_id: PUB_ID,
        key_id: KEY_ID,
        signing_kid: SIGNING_KID,
        boot_digest: sha256(BOOT_SECRET.as_bytes()),
        conf_digest: sha256(CONF_SECRET.as_bytes()),
        key_digest: sha256(KEY_SECRET.as_bytes()),
        user_ids: USER_IDS,
        product_ids: PRODUCT_IDS,
    }
}

/// Migration 10 rebuilds `revocations` (SQLite cannot change a CHECK
/// constraint) and must carry its AUTOINCREMENT counter over: nodes poll the
/// feed by increasing id, so an id handed out before — even by a row since
/// purged — must never be handed out again.
#[tokio::test]
async fn migration_10_keeps_the_revocation_ids_increasing() {
    use gatehouse_store::prelude::*;
    let (_dir, path) = copy_fixture();
    {
        let c = rusqlite::Connection::open(&path).unwrap();
        // As if 500 revocations had been written and most since purged.
        c.execute(
            "UPDATE sqlite_sequence SET seq = 500 WHERE name = 'revocations'",
            [],
        )
        .unwrap();
    }
    let store = SqliteStore::open(&path).unwrap();
    let now = gatehouse_domain::Timestamp::now();
    let id = store
        .insert_revocation(&gatehouse_store::NewRevocation::new(
            gatehouse_store::RevocationKind::Client,
            "app_xxxxxxxxxxxxxxxxxxxxxx",
            now.unix_seconds(),
            now.plus_seconds(60),
        ))
        .await
        .unwrap();
    assert!(id > 500, "a fresh id after the rebuild: {id}");
    let old: i64 = rusqlite::Connection::open(&path)
        .unwrap()
        .query_row("SELECT count(*) FROM revocations WHERE id = 1", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(old, 1, "the old row is kept with its id");
    let revs = store.revocations_since(0, now).await.unwrap();
    assert!(
        revs.iter()
            .any(|r| r.id == id && r.kind == gatehouse_store::RevocationKind::Client)
    );
}
