//! Checks shared by both backends' migrate-forward tests (issue 12, item 8):
//! a database written by the last release (commit c73c7d0) and opened by
//! today's store still holds every row, readable through the [`Store`] API,
//! its e-mail keys follow D8 (revised), and new writes work. Each backend's
//! `tests/migrate_forward.rs` loads its own fixture (the ids differ) and
//! describes it with a [`Fixture`].

use gatehouse_domain::search::{self, SearchKind};
use gatehouse_domain::{
    ApiKeyId, ClientId, Email, Name, NewUser, OrgId, Page, ProductId, ProductStatus, Role, Scope,
    SearchText, Timestamp, UserId, UserStatus,
};
use gatehouse_search::{Filter, Hits, Index};

use crate::{NewLink, OutboundEmail, ProductFilter, Store, StoreError, UserFilter};

/// A user of a fixture: (organization, id, e-mail, role, status, has a password).
pub type FixtureUser = (
    &'static str,
    &'static str,
    &'static str,
    Role,
    UserStatus,
    bool,
);
/// A product of a fixture: (organization, id, sku, price, stock, status).
pub type FixtureProduct = (
    &'static str,
    &'static str,
    &'static str,
    i64,
    i64,
    ProductStatus,
);

/// What a fixture holds (`tests/fixtures/README.md` of each backend).
pub struct Fixture {
    pub org_a: &'static str,
    pub org_b: &'static str,
    pub boot_id: &'static str,
    pub conf_id: &'static str,
    pub pub_id: &'static str,
    pub key_id: &'static str,
    pub signing_kid: &'static str,
    /// SHA-256 of the bootstrap client's, the confidential client's and the
    /// API key's secrets as the old release showed them.
    pub boot_digest: [u8; 32],
    pub conf_digest: [u8; 32],
    pub key_digest: [u8; 32],
    /// The ids of [`USERS`] and [`PRODUCTS`], in order, as this fixture has them.
    pub user_ids: [&'static str; 9],
    pub product_ids: [&'static str; 4],
}

/// The users the last release wrote in each backend's fixture (only the
/// ids differ): (organization, 0 for a and 1 for b, e-mail, role, status,
/// has a password). The last two were added by a second run of the old
/// `user create` (README): their old keys (plain lower case) differ from
/// D8 (revised)'s, so they must be re-keyed.
pub const USERS: [(usize, &str, Role, UserStatus, bool); 9] = [
    (
        0,
        "alice.admin@example.com",
        Role::Admin,
        UserStatus::Active,
        true,
    ),
    (
        0,
        "josé@example.com",
        Role::Editor,
        UserStatus::Active,
        true,
    ),
    (
        0,
        "STRASSE@example.com",
        Role::Viewer,
        UserStatus::Active,
        true,
    ),
    (
        0,
        "dave.pending@example.com",
        Role::Viewer,
        UserStatus::PendingInvite,
        false,
    ),
    (
        1,
        "bob.admin@example.com",
        Role::Admin,
        UserStatus::Active,
        true,
    ),
    (
        1,
        "carol.viewer@example.com",
        Role::Viewer,
        UserStatus::Active,
        true,
    ),
    (
        1,
        "erin.inactive@example.com",
        Role::Editor,
        UserStatus::Inactive,
        false,
    ),
    (
        1,
        "Straße@example.com",
        Role::Editor,
        UserStatus::Active,
        true,
    ),
    (
        1,
        "ana@BÜCHER.example",
        Role::Viewer,
        UserStatus::Active,
        true,
    ),
];

/// The products of each fixture: (organization as in [`USERS`], sku,
/// price, stock, status).
pub const PRODUCTS: [(usize, &str, i64, i64, ProductStatus); 4] = [
    (0, "WID-1", 1999, 5, ProductStatus::Available),
    (0, "GAD-1", 500, 0, ProductStatus::OutOfStock),
    (0, "OLD-1", 100, 3, ProductStatus::Discontinued),
    (1, "BOX-1", 2500, 10, ProductStatus::Available),
];

/// The rows each table of a fixture holds.
pub const TABLES: [(&str, i64); 9] = [
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

impl Fixture {
    fn org_of(&self, i: usize) -> &'static str {
        [self.org_a, self.org_b][i]
    }

    /// The fixture's users with their ids and organizations.
    pub fn users(&self) -> Vec<FixtureUser> {
        USERS
            .iter()
            .zip(self.user_ids)
            .map(|(&(o, email, role, status, pw), id)| {
                (self.org_of(o), id, email, role, status, pw)
            })
            .collect()
    }

    /// The fixture's products with their ids and organizations.
    pub fn products(&self) -> Vec<FixtureProduct> {
        PRODUCTS
            .iter()
            .zip(self.product_ids)
            .map(|(&(o, sku, price, stock, status), id)| {
                (self.org_of(o), id, sku, price, stock, status)
            })
            .collect()
    }
}

fn org(s: &str) -> OrgId {
    OrgId::parse(s).unwrap()
}

/// The first page of `o`'s `kind` list matching `q` and `filter`, from an
/// index built as the application builds it (`gatehouse_app::search`).
async fn search(store: &dyn Store, o: &str, kind: SearchKind, q: &str, filter: Filter) -> Hits {
    let rows = store.search_rows(&org(o), kind).await.unwrap();
    let q = SearchText::parse(q).unwrap().unwrap();
    let needles = match kind {
        SearchKind::Users => search::user_needles(&q),
        SearchKind::Products => search::product_needles(&q),
    };
    Index::from_rows(rows).page(&needles, filter, 0, 100)
}

/// `added`: users each organization gained since the fixture was opened.
pub async fn check_contents(store: &dyn Store, f: &Fixture, added: u64) {
    // Organizations.
    let a = store.get_org(&org(f.org_a)).await.unwrap().unwrap();
    assert_eq!(a.name, "Default");
    let b = store.get_org(&org(f.org_b)).await.unwrap().unwrap();
    assert_eq!(b.name, "Beta Corp");
    assert_eq!(b.plan, gatehouse_domain::Plan::Pro);

    // Users: each by id, and the lists with their totals (the count tables
    // the lists read must have survived too).
    for (o, id, email, role, status, has_password) in f.users().iter().copied() {
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
    for o in [f.org_a, f.org_b] {
        let want: Vec<&str> = f.users().iter().filter(|u| u.0 == o).map(|u| u.1).collect();
        let list = store
            .list_users(&org(o), &UserFilter::default(), Page::default())
            .await
            .unwrap();
        assert_eq!(list.total, want.len() as u64 + added, "users of {o}");
        let got: Vec<&str> = list.items.iter().map(|u| u.id.as_str()).collect();
        for id in &want {
            assert!(got.contains(id), "{id} not listed in {o}");
        }
        for (role, status) in f.users().iter().filter(|u| u.0 == o).map(|u| (u.3, u.4)) {
            let filter = UserFilter {
                role: Some(role),
                status: Some(status),
            };
            let n = store
                .list_users(&org(o), &filter, Page::default())
                .await
                .unwrap()
                .total;
            assert!(n >= 1, "{o}: no {role:?}/{status:?} user counted");
        }
    }
    // Search: `q` is answered by the in-memory index (gatehouse-search),
    // which reads the rows through `SearchStore`; the migrated rows must
    // read into it and be found there.
    let found = search(store, f.org_a, SearchKind::Users, "josé", Filter::default()).await;
    assert_eq!(found.total, 1, "found by the index after the upgrade");
    assert_eq!(found.ids[0], f.user_ids[1]);
    // Products, with their statuses, through lists, counts and search.
    for (o, id, sku, price, stock, status) in f.products().iter().copied() {
        let p = store
            .get_product(&org(o), &ProductId::parse(id).unwrap())
            .await
            .unwrap()
            .unwrap_or_else(|| panic!("product {id} is missing"));
        assert_eq!(p.sku.as_str(), sku);
        assert_eq!((p.price, p.stock, p.status), (price, stock, status), "{id}");
        let filter = Filter(search::product_filter_codes(Some(status)));
        let found = search(store, o, SearchKind::Products, sku, filter).await;
        assert!(
            found.ids.iter().any(|x| x == id),
            "{id} not found by sku and status"
        );
    }
    for o in [f.org_a, f.org_b] {
        let want = f.products().iter().filter(|p| p.0 == o).count() as u64;
        let l = store
            .list_products(&org(o), &ProductFilter::default(), Page::default())
            .await
            .unwrap();
        assert_eq!(l.total, want, "products of {o}");
    }

    // Client applications: the bootstrap client, a confidential one with
    // redirect URIs, a public one; old secrets still match their hashes.
    let boot = store
        .resolve_client(&ClientId::parse(f.boot_id).unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(boot.org.as_str(), f.org_a);
    assert!(boot.admin_approved);
    assert_eq!(boot.secret_hash, Some(f.boot_digest));
    let conf = store
        .resolve_client(&ClientId::parse(f.conf_id).unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(conf.org.as_str(), f.org_b);
    assert_eq!(conf.name, "Beta Backend");
    assert_eq!(conf.secret_hash, Some(f.conf_digest));
    assert_eq!(
        conf.redirect_uris,
        [
            "https://beta.example.com/callback",
            "https://beta.example.com/cb2"
        ]
    );
    assert!(conf.scopes.contains(Scope::UsersWrite) && !conf.scopes.contains(Scope::Admin));
    let public = store
        .resolve_client(&ClientId::parse(f.pub_id).unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(public.org.as_str(), f.org_a);
    assert_eq!(public.secret_hash, None);
    assert_eq!(
        public.redirect_uris,
        ["http://127.0.0.1/callback", "http://[::1]/callback"]
    );

    // The API key, by id and by the digest of its secret.
    let key = store
        .operator_find_api_key(&ApiKeyId::parse(f.key_id).unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(key.org.as_str(), f.org_a);
    assert_eq!(key.name, "Alpha CI");
    assert_eq!(key.revoked_at, None);
    assert!(key.scopes.contains(Scope::UsersRead) && key.scopes.contains(Scope::ProductsRead));
    let by_digest = store
        .resolve_api_key(&f.key_digest)
        .await
        .unwrap()
        .expect("the old API key's secret still finds it");
    assert_eq!(by_digest.id.as_str(), f.key_id);

    // The signing key made at the first start.
    let keys = store.signing_keys().await.unwrap();
    assert_eq!(keys.len(), 1);
    assert_eq!(keys[0].kid, f.signing_kid);
    assert_eq!(keys[0].public_key.len(), 65, "uncompressed P-256 point");
    assert!(!keys[0].private_key_encrypted.is_empty());
}

pub async fn check_email_keys(store: &dyn Store, f: &Fixture) {
    let a = org(f.org_a);
    // D8 (revised): other forms of the stored addresses find the same users …
    for (form, id) in [
        ("JOSÉ@example.com", f.user_ids[1]),
        ("jose\u{301}@example.com", f.user_ids[1]),
        ("straße@example.com", f.user_ids[2]),
        ("strasse@EXAMPLE.com", f.user_ids[2]),
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
        ("STRASSE@example.com", f.user_ids[7]),
        ("strasse@example.com", f.user_ids[7]),
        ("ana@bücher.example", f.user_ids[8]),
        ("ANA@xn--bcher-kva.example", f.user_ids[8]),
    ] {
        let (u, hash) = store
            .find_user_by_email(&org(f.org_b), &Email::parse_for_lookup(form).unwrap())
            .await
            .unwrap()
            .unwrap_or_else(|| panic!("{form} finds nobody"));
        assert_eq!(u.id.as_str(), id, "{form}");
        assert!(hash.is_some(), "{form}: the old password hash is kept");
    }
    for form in ["strasse@example.com", "ANA@bücher.example"] {
        let r = store
            .insert_user(&org(f.org_b), &new_user(form), crate::conformance::teller())
            .await;
        assert!(
            matches!(r, Err(StoreError::Duplicate("email"))),
            "{form}: {r:?}"
        );
    }
    // … and a new user with one of them is a duplicate.
    for form in ["JOSÉ@example.com", "straße@example.com"] {
        let r = store
            .insert_user(&a, &new_user(form), crate::conformance::teller())
            .await;
        assert!(
            matches!(r, Err(StoreError::Duplicate("email"))),
            "{form}: {r:?}"
        );
    }
    // Another organization is another namespace.
    store
        .insert_user(
            &org(f.org_b),
            &new_user("JOSÉ@example.com"),
            crate::conformance::teller(),
        )
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

pub async fn check_new_writes(store: &dyn Store, f: &Fixture) {
    let a = org(f.org_a);
    let before = store
        .list_users(&a, &UserFilter::default(), Page::default())
        .await
        .unwrap()
        .total;
    let u = store
        .insert_user(
            &a,
            &new_user("frank.new@example.com"),
            crate::conformance::teller(),
        )
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
        .request_password_reset(
            &a,
            &Email::parse("straße@example.com").unwrap(),
            &link,
            None,
        )
        .await
        .unwrap();
    assert!(sent);
    assert_eq!(store.outbox_backlog().await.unwrap(), backlog + 1);
    let user = store
        .reset_password(
            &[42; 32],
            "$argon2id$after-migration",
            now,
            crate::conformance::teller(),
        )
        .await
        .unwrap();
    assert_eq!(user.id.as_str(), f.user_ids[2]);
}

/// D8 (revised) re-keying, both backends' test: rows as the old code wrote
/// them (id, the e-mail as given in NFD or upper case, created at), their
/// key plain lower case.
pub const PLANTED: [(&str, &str, i64); 4] = [
    ("usr_rekey1", "STRASSE@x.com", 1),
    ("usr_rekey2", "Stra\u{df}e@x.com", 2),
    ("usr_rekey3", "JOSE\u{301}@b.example.com", 3),
    ("usr_rekey4", "ana@B\u{dc}CHER.example", 4),
];

/// The keys of [`PLANTED`] after the re-keying: ASCII was already right;
/// `Straße` is now the same address as the earlier `STRASSE`, so both rows
/// stay and the later keeps its old key.
pub const REKEYED: [(&str, &str); 4] = [
    ("usr_rekey1", "strasse@x.com"),
    ("usr_rekey2", "stra\u{df}e@x.com"),
    ("usr_rekey3", "jos\u{e9}@b.example.com"),
    ("usr_rekey4", "ana@xn--bcher-kva.example"),
];

/// The organization [`PLANTED`] is written in.
pub fn rekey_org() -> gatehouse_domain::Organization {
    gatehouse_domain::Organization {
        id: OrgId::generate(),
        name: "Acme".into(),
        plan: gatehouse_domain::Plan::Free,
        per_minute: None,
        per_second: None,
        created_at: Timestamp::now(),
    }
}

/// After the re-keying, look-ups find the rows of [`PLANTED`] by any form
/// of the address, and a new user with one of them is a duplicate.
pub async fn check_rekeyed(store: &dyn Store, org: &OrgId) {
    for (email, id) in [
        ("jos\u{e9}@b.example.com", "usr_rekey3"),
        ("Jose\u{301}@B.EXAMPLE.COM", "usr_rekey3"),
        ("ANA@b\u{fc}cher.example", "usr_rekey4"),
        ("ana@xn--bcher-kva.example", "usr_rekey4"),
        ("stra\u{df}e@x.com", "usr_rekey1"),
    ] {
        let (u, _) = store
            .find_user_by_email(org, &Email::parse(email).unwrap())
            .await
            .unwrap()
            .unwrap_or_else(|| panic!("{email} not found"));
        assert_eq!(u.id.as_str(), id, "{email}");
    }
    for email in ["jos\u{e9}@b.example.com", "Ana@xn--bcher-kva.example"] {
        let new = NewUser {
            id: UserId::generate(),
            email: Email::parse(email).unwrap(),
            name: Name::parse("Dup").unwrap(),
            role: Role::Viewer,
            status: UserStatus::PendingInvite,
            password_hash: None,
            created_at: Timestamp::now(),
        };
        match store
            .insert_user(org, &new, crate::conformance::teller())
            .await
        {
            Err(StoreError::Duplicate("email")) => {}
            other => panic!("{email}: {other:?}"),
        }
    }
}
