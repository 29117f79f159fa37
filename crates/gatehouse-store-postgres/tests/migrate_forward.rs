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

use gatehouse_domain::{
    ApiKeyId, ClientId, Email, Name, NewUser, OrgId, Page, ProductId, ProductStatus, Role, Scope,
    Timestamp, UserId, UserStatus,
};
use gatehouse_store::{NewLink, OutboundEmail, ProductFilter, Store, StoreError, UserFilter};
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

/// (org, id, email, role, status, has a password)
const USERS: [(&str, &str, &str, Role, UserStatus, bool); 9] = [
    (
        ORG_A,
        "usr_cmgMh0wJ61HDJAxYZforxT",
        "alice.admin@example.com",
        Role::Admin,
        UserStatus::Active,
        true,
    ),
    (
        ORG_A,
        "usr_MQP7BMYoUnLOCYWE9pi5rm",
        "josé@example.com",
        Role::Editor,
        UserStatus::Active,
        true,
    ),
    (
        ORG_A,
        "usr_d9aBq413qirAfYx0nn8IXm",
        "STRASSE@example.com",
        Role::Viewer,
        UserStatus::Active,
        true,
    ),
    (
        ORG_A,
        "usr_pmO3iKEvZyQydIhD0Hsq7G",
        "dave.pending@example.com",
        Role::Viewer,
        UserStatus::PendingInvite,
        false,
    ),
    (
        ORG_B,
        "usr_75qrlV5gIOlRUvD3mEFYYm",
        "bob.admin@example.com",
        Role::Admin,
        UserStatus::Active,
        true,
    ),
    (
        ORG_B,
        "usr_p6zsDECUmZyiIxJ5bnawjg",
        "carol.viewer@example.com",
        Role::Viewer,
        UserStatus::Active,
        true,
    ),
    (
        ORG_B,
        "usr_eGI757KLDEYQMWy2y0SlsV",
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
        "usr_GVqyDn0N4Rss0JF3wZXAtp",
        "Straße@example.com",
        Role::Editor,
        UserStatus::Active,
        true,
    ),
    (
        ORG_B,
        "usr_mVZFqTx9X9FK5KKH3ssjtt",
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
        "prod_fFeCvJIrGqvhMVC4DUK75n",
        "WID-1",
        1999,
        5,
        ProductStatus::Available,
    ),
    (
        ORG_A,
        "prod_GkvRoGGR0AfzLi3xRaPsm8",
        "GAD-1",
        500,
        0,
        ProductStatus::OutOfStock,
    ),
    (
        ORG_A,
        "prod_2ro9tZNX2DQfz69XKoVARq",
        "OLD-1",
        100,
        3,
        ProductStatus::Discontinued,
    ),
    (
        ORG_B,
        "prod_U4AoDXn0rSP9nxyJPpKX0u",
        "BOX-1",
        2500,
        10,
        ProductStatus::Available,
    ),
];

fn org(s: &str) -> OrgId {
    OrgId::parse(s).unwrap()
}

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

const TABLES: [(&str, i64); 9] = [
    ("organizations", 2),
    ("users", 9),
    ("products", 4),
    ("clients", 3),
    ("api_keys", 1),
    ("signing_keys", 1),
    ("outbox", 2),
    ("user_tokens", 1),
    ("revocations", 1),
];

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
    assert_eq!(key_of(&url, USERS[7].1).await, "stra\u{df}e@example.com");
    assert_eq!(key_of(&url, USERS[8].1).await, "ana@b\u{fc}cher.example");

    let store = PgStore::connect(&url).await.unwrap();
    // D8 (revised): re-keyed at start.
    assert_eq!(key_of(&url, USERS[7].1).await, "strasse@example.com");
    assert_eq!(key_of(&url, USERS[8].1).await, "ana@xn--bcher-kva.example");
    assert_eq!(key_of(&url, USERS[1].1).await, "jos\u{e9}@example.com");

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
            (7, true)
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
    ];
    for ((v, d, sql), row) in files.into_iter().zip(&after) {
        assert_eq!(row.2, checksum(v, d, sql), "checksum of migration {v}");
    }
    for (table, n) in TABLES {
        assert_eq!(count(&url, table).await, n, "rows of {table}");
    }
    check_contents(&store, &url, 0).await;
    check_email_keys(&store).await;
    check_new_writes(&store).await;
    store.close().await;

    // Connecting again (a restart) finds nothing left to do.
    let again = PgStore::connect(&url).await.unwrap();
    assert_eq!(applied(&url).await, after);
    // check_new_writes added one user to each organization.
    check_contents(&again, &url, 1).await;
    again.close().await;
}

/// `added`: users each organization gained since the store first started.
async fn check_contents(store: &PgStore, url: &str, added: u64) {
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
    assert_eq!(boot.secret_hash, Some(sha256(url, BOOT_SECRET).await));
    let conf = store
        .find_client(&ClientId::parse(CONF_ID).unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(conf.org.as_str(), ORG_B);
    assert_eq!(conf.name, "Beta Backend");
    assert_eq!(conf.secret_hash, Some(sha256(url, CONF_SECRET).await));
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
        .find_api_key_by_digest(&sha256(url, KEY_SECRET).await)
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

async fn check_email_keys(store: &PgStore) {
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

async fn check_new_writes(store: &PgStore) {
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
