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

use gatehouse_domain::{
    ApiKeyId, ClientId, Email, Name, NewUser, OrgId, Page, ProductId, ProductStatus, Role, Scope,
    Timestamp, UserId, UserStatus,
};
use gatehouse_store::{NewLink, OutboundEmail, ProductFilter, Store, StoreError, UserFilter};
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

/// (org, id, email, role, status, has a password)
const USERS: [(&str, &str, &str, Role, UserStatus, bool); 9] = [
    (
        ORG_A,
        "usr_8Pod6IVZbSdLrbzEdeZQjE",
        "alice.admin@example.com",
        Role::Admin,
        UserStatus::Active,
        true,
    ),
    (
        ORG_A,
        "usr_lK7b1KAzhARxvYrkYea7hX",
        "josé@example.com",
        Role::Editor,
        UserStatus::Active,
        true,
    ),
    (
        ORG_A,
        "usr_Lfp4ZolAMoebrIykSI1f02",
        "STRASSE@example.com",
        Role::Viewer,
        UserStatus::Active,
        true,
    ),
    (
        ORG_A,
        "usr_1grw1kWzOnCJnkzW0PrzGG",
        "dave.pending@example.com",
        Role::Viewer,
        UserStatus::PendingInvite,
        false,
    ),
    (
        ORG_B,
        "usr_8HdFcJJY35fveCdquvlo05",
        "bob.admin@example.com",
        Role::Admin,
        UserStatus::Active,
        true,
    ),
    (
        ORG_B,
        "usr_rkyKUkD8IfbGgWXvMGa4iN",
        "carol.viewer@example.com",
        Role::Viewer,
        UserStatus::Active,
        true,
    ),
    (
        ORG_B,
        "usr_hW2uzi1M1UEfzZBdBR4Ghu",
        "erin.inactive@example.com",
        Role::Editor,
        UserStatus::Inactive,
        false,
    ),
    // Added by a second run of the old `user create` (README): their old
    // keys (plain lower case) differ from D8 (revised)'s, so they must be
    // re-keyed.
    (
        ORG_B,
        "usr_g6KOS99dt6fCbP3F3TkyoE",
        "Straße@example.com",
        Role::Editor,
        UserStatus::Active,
        true,
    ),
    (
        ORG_B,
        "usr_IutBRAAuyMMtU2FF1QcvRY",
        "ana@BÜCHER.example",
        Role::Viewer,
        UserStatus::Active,
        true,
    ),
];

/// (org, id, sku, price, stock, status)
const PRODUCTS: [(&str, &str, &str, i64, i64, ProductStatus); 4] = [
    (
        ORG_A,
        "prod_NznU0dnwRDuNTkuH7dOfNk",
        "WID-1",
        1999,
        5,
        ProductStatus::Available,
    ),
    (
        ORG_A,
        "prod_2m40N1JYffdHoC46HTqoCl",
        "GAD-1",
        500,
        0,
        ProductStatus::OutOfStock,
    ),
    (
        ORG_A,
        "prod_EYsJFO5JruxINlmQyC82Uk",
        "OLD-1",
        100,
        3,
        ProductStatus::Discontinued,
    ),
    (
        ORG_B,
        "prod_MxsbqYG21imwCENCHJdmZy",
        "BOX-1",
        2500,
        10,
        ProductStatus::Available,
    ),
];

/// The migrations this build embeds, as `schema.rs` lists them: the
/// checksums recorded for an old database must be these files' SHA-256.
const MIGRATIONS: [(i64, &str); 7] = [
    (1, include_str!("../migrations/0001_init.sql")),
    (2, include_str!("../migrations/0002_api_keys.sql")),
    (3, include_str!("../migrations/0003_auth.sql")),
    (4, include_str!("../migrations/0004_access_jti.sql")),
    (5, include_str!("../migrations/0005_jobs.sql")),
    (6, include_str!("../migrations/0006_email_keys.sql")),
    (7, include_str!("../migrations/0007_reset_requests.sql")),
];

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/main-c73c7d0.db")
}

fn sha256(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

fn org(s: &str) -> OrgId {
    OrgId::parse(s).unwrap()
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
        (USERS[7].1, "stra\u{df}e@example.com"),
        (USERS[8].1, "ana@b\u{fc}cher.example"),
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
        let want: Vec<(String, i64)> = [
            ("organizations", 2),
            ("users", 9),
            ("products", 4),
            ("clients", 3),
            ("api_keys", 1),
            ("signing_keys", 1),
            ("outbox", 2),
            ("user_tokens", 1),
            ("revocations", 1),
        ]
        .iter()
        .map(|(t, n)| (t.to_string(), *n))
        .collect();
        assert_eq!(counts, want, "no row lost");
        // D8 (revised): the old keys were re-keyed at open.
        for (id, key) in [
            (USERS[7].1, "strasse@example.com"),
            (USERS[8].1, "ana@xn--bcher-kva.example"),
            (USERS[1].1, "jos\u{e9}@example.com"),
        ] {
            let k: String = c
                .query_row("SELECT email_norm FROM users WHERE id = ?1", [id], |r| {
                    r.get(0)
                })
                .unwrap();
            assert_eq!(k, key, "{id}");
        }
    }

    check_contents(&store, 0).await;
    check_email_keys(&store).await;
    check_new_writes(&store).await;

    // Opening the migrated file again (a restart) still reads everything.
    drop(store);
    let again = SqliteStore::open(&path).unwrap();
    // check_new_writes added one user to each organization.
    check_contents(&again, 1).await;
}

/// `added`: users each organization gained since the fixture was opened.
async fn check_contents(store: &SqliteStore, added: u64) {
    // Organizations.
    let a = store.get_org(&org(ORG_A)).await.unwrap().unwrap();
    assert_eq!(a.name, "Default");
    let b = store.get_org(&org(ORG_B)).await.unwrap().unwrap();
    assert_eq!(b.name, "Beta Corp");
    assert_eq!(b.plan, gatehouse_domain::Plan::Pro);

    // Users: each by id, and the lists with their totals (the count tables
    // the lists read must have survived too).
    for (o, id, email, role, status, has_password) in USERS {
        let u = store
            .get_user(&org(o), &UserId::parse(id).unwrap())
            .await
            .unwrap()
            .unwrap_or_else(|| panic!("user {id} is missing"));
        assert_eq!(u.email.as_str(), email, "{id}");
        assert_eq!(u.role, role, "{id}");
        assert_eq!(u.status, status, "{id}");
        assert_eq!(u.has_password, has_password, "{id}");
    }
    for o in [ORG_A, ORG_B] {
        let want: Vec<&str> = USERS.iter().filter(|u| u.0 == o).map(|u| u.1).collect();
        let list = store
            .list_users(&org(o), &UserFilter::default(), Page::default())
            .await
            .unwrap();
        assert_eq!(list.total, want.len() as u64 + added, "users of {o}");
        let got: Vec<&str> = list.items.iter().map(|u| u.id.as_str()).collect();
        for id in &want {
            assert!(got.contains(id), "{id} not listed in {o}");
        }
        for (role, status) in USERS.iter().filter(|u| u.0 == o).map(|u| (u.3, u.4)) {
            let filter = UserFilter {
                role: Some(role),
                status: Some(status),
                q: None,
            };
            let n = store
                .list_users(&org(o), &filter, Page::default())
                .await
                .unwrap()
                .total;
            assert!(n >= 1, "{o}: no {role:?}/{status:?} user counted");
        }
    }
    let q = UserFilter {
        q: Some(
            gatehouse_domain::SearchText::parse("josé")
                .unwrap()
                .unwrap(),
        ),
        ..UserFilter::default()
    };
    let found = store
        .list_users(&org(ORG_A), &q, Page::default())
        .await
        .unwrap();
    assert_eq!(found.total, 1, "the search index survived");
    assert_eq!(found.items[0].id.as_str(), USERS[1].1);

    // Products, with their statuses, through lists, counts and search.
    for (o, id, sku, price, stock, status) in PRODUCTS {
        let p = store
            .get_product(&org(o), &ProductId::parse(id).unwrap())
            .await
            .unwrap()
            .unwrap_or_else(|| panic!("product {id} is missing"));
        assert_eq!(p.sku.as_str(), sku);
        assert_eq!((p.price, p.stock, p.status), (price, stock, status), "{id}");
        let filter = ProductFilter {
            status: Some(status),
            q: Some(gatehouse_domain::SearchText::parse(sku).unwrap().unwrap()),
        };
        let l = store
            .list_products(&org(o), &filter, Page::default())
            .await
            .unwrap();
        assert!(
            l.items.iter().any(|x| x.id.as_str() == id),
            "{id} not found by sku and status"
        );
    }
    for o in [ORG_A, ORG_B] {
        let want = PRODUCTS.iter().filter(|p| p.0 == o).count() as u64;
        let l = store
            .list_products(&org(o), &ProductFilter::default(), Page::default())
            .await
            .unwrap();
        assert_eq!(l.total, want, "products of {o}");
    }

    // Client applications: the bootstrap client, a confidential one with
    // redirect URIs, a public one; old secrets still match their hashes.
    let boot = store
        .find_client(&ClientId::parse(BOOT_ID).unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(boot.org.as_str(), ORG_A);
    assert!(boot.admin_approved);
    assert_eq!(boot.secret_hash, Some(sha256(BOOT_SECRET.as_bytes())));
    let conf = store
        .find_client(&ClientId::parse(CONF_ID).unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(conf.org.as_str(), ORG_B);
    assert_eq!(conf.name, "Beta Backend");
    assert_eq!(conf.secret_hash, Some(sha256(CONF_SECRET.as_bytes())));
    assert_eq!(
        conf.redirect_uris,
        [
            "https://beta.example.com/callback",
            "https://beta.example.com/cb2"
        ]
    );
    assert!(conf.scopes.contains(Scope::UsersWrite) && !conf.scopes.contains(Scope::Admin));
    let public = store
        .find_client(&ClientId::parse(PUB_ID).unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(public.org.as_str(), ORG_A);
    assert_eq!(public.secret_hash, None);
    assert_eq!(
        public.redirect_uris,
        ["http://127.0.0.1/callback", "http://[::1]/callback"]
    );

    // The API key, by id and by the digest of its secret.
    let key = store
        .find_api_key(&ApiKeyId::parse(KEY_ID).unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(key.org.as_str(), ORG_A);
    assert_eq!(key.name, "Alpha CI");
    assert_eq!(key.revoked_at, None);
    assert!(key.scopes.contains(Scope::UsersRead) && key.scopes.contains(Scope::ProductsRead));
    let by_digest = store
        .find_api_key_by_digest(&sha256(KEY_SECRET.as_bytes()))
        .await
        .unwrap()
        .expect("the old API key's secret still finds it");
    assert_eq!(by_digest.id.as_str(), KEY_ID);

    // The signing key made at the first start.
    let keys = store.signing_keys().await.unwrap();
    assert_eq!(keys.len(), 1);
    assert_eq!(keys[0].kid, SIGNING_KID);
    assert_eq!(keys[0].public_key.len(), 65, "uncompressed P-256 point");
    assert!(!keys[0].private_key_encrypted.is_empty());
}

async fn check_email_keys(store: &SqliteStore) {
    let a = org(ORG_A);
    // D8 (revised): other forms of the stored addresses find the same users …
    for (form, id) in [
        ("JOSÉ@example.com", USERS[1].1),
        ("jose\u{301}@example.com", USERS[1].1),
        ("straße@example.com", USERS[2].1),
        ("strasse@EXAMPLE.com", USERS[2].1),
    ] {
        let (u, hash) = store
            .find_user_by_email(&a, &Email::parse_for_lookup(form).unwrap())
            .await
            .unwrap()
            .unwrap_or_else(|| panic!("{form} finds nobody"));
        assert_eq!(u.id.as_str(), id, "{form}");
        assert!(hash.is_some(), "{form}: the old password hash is kept");
    }
    // The rows whose old key was not D8 (revised)'s are found by any form.
    for (form, id) in [
        ("STRASSE@example.com", USERS[7].1),
        ("strasse@example.com", USERS[7].1),
        ("ana@bücher.example", USERS[8].1),
        ("ANA@xn--bcher-kva.example", USERS[8].1),
    ] {
        let (u, hash) = store
            .find_user_by_email(&org(ORG_B), &Email::parse_for_lookup(form).unwrap())
            .await
            .unwrap()
            .unwrap_or_else(|| panic!("{form} finds nobody"));
        assert_eq!(u.id.as_str(), id, "{form}");
        assert!(hash.is_some(), "{form}: the old password hash is kept");
    }
    for form in ["strasse@example.com", "ANA@bücher.example"] {
        let r = store.insert_user(&org(ORG_B), &new_user(form)).await;
        assert!(
            matches!(r, Err(StoreError::Duplicate("email"))),
            "{form}: {r:?}"
        );
    }
    // … and a new user with one of them is a duplicate.
    for form in ["JOSÉ@example.com", "straße@example.com"] {
        let r = store.insert_user(&a, &new_user(form)).await;
        assert!(
            matches!(r, Err(StoreError::Duplicate("email"))),
            "{form}: {r:?}"
        );
    }
    // Another organization is another namespace.
    store
        .insert_user(&org(ORG_B), &new_user("JOSÉ@example.com"))
        .await
        .unwrap();
}

fn new_user(email: &str) -> NewUser {
    NewUser {
        id: UserId::generate(),
        email: Email::parse(email).unwrap(),
        name: Name::parse("New Person").unwrap(),
        role: Role::Viewer,
        status: UserStatus::PendingInvite,
        password_hash: None,
        created_at: Timestamp::now(),
    }
}

async fn check_new_writes(store: &SqliteStore) {
    let a = org(ORG_A);
    let before = store
        .list_users(&a, &UserFilter::default(), Page::default())
        .await
        .unwrap()
        .total;
    let u = store
        .insert_user(&a, &new_user("frank.new@example.com"))
        .await
        .unwrap();
    let after = store
        .list_users(&a, &UserFilter::default(), Page::default())
        .await
        .unwrap()
        .total;
    assert_eq!(after, before + 1);
    assert_eq!(
        store
            .get_user(&a, &u.id)
            .await
            .unwrap()
            .unwrap()
            .email
            .as_str(),
        "frank.new@example.com"
    );

    // A password reset for an old user (migration 7's table), by another
    // form of the address, queues one e-mail and its link works.
    let backlog = store.outbox_backlog().await.unwrap();
    let now = Timestamp::now();
    let link = NewLink {
        digest: [42; 32],
        expires_at: now.plus_seconds(3600),
        email: OutboundEmail {
            to: "STRASSE@example.com".into(),
            subject: "Reset".into(),
            body: "reset link".into(),
        },
    };
    let sent = store
        .request_password_reset(&a, &Email::parse("straße@example.com").unwrap(), &link)
        .await
        .unwrap();
    assert!(sent);
    assert_eq!(store.outbox_backlog().await.unwrap(), backlog + 1);
    let user = store
        .reset_password(&[42; 32], "$argon2id$after-migration", now)
        .await
        .unwrap();
    assert_eq!(user.id.as_str(), USERS[2].1);
}
