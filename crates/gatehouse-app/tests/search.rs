//! The search suite (issue 25, "one search"): what `q` must do (D14 for
//! users, D17 for products, D6 (continued) for control characters, D14's
//! exact `total`), checked through the application, whose in-memory index
//! (`gatehouse_app::search`) is the only thing that answers `q`. Every check
//! runs on both backends: rows are written through the store, as any node or
//! the operator CLI writes them, and searched through an `App` whose index
//! must catch up from storage's change feed.
//!
//! These checks were the store conformance suite's while storage searched;
//! their assertions are unchanged. PostgreSQL runs on the throwaway cluster
//! of `gatehouse_store_postgres::testing` (skipped without its binaries,
//! unless `GATEHOUSE_REQUIRE_POSTGRES=1`).

use std::sync::Arc;

use gatehouse_app::{App, ProductFilter, UserFilter};
use gatehouse_domain::user::UserPatch;
use gatehouse_domain::{
    Email, Listing, Name, NewProduct, NewUser, OrgId, Organization, Page, Plan, Product,
    ProductPatch, ProductStatus, Role, SearchText, Sku, Timestamp, User, UserId, UserStatus,
};
use gatehouse_store::Store;

/// Runs each check on a fresh SQLite store and a fresh PostgreSQL one.
macro_rules! on_both_backends {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    let dir = tempfile::tempdir().unwrap();
                    let store = gatehouse_store_sqlite::SqliteStore::open(&dir.path().join("db"))
                        .unwrap();
                    super::$name(std::sync::Arc::new(store)).await;
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    let Some(store) = gatehouse_store_postgres::testing::fresh_store().await else {
                        return;
                    };
                    super::$name(std::sync::Arc::new(store)).await;
                }
            )*
        }
    };
}

on_both_backends!(
    user_search_is_substring_and_literal,
    product_search_by_word_prefix,
    control_characters_in_q_match_nothing,
    a_staging_reset_is_searched_at_once,
    the_index_answers_as_d14_and_d17_say,
);

fn org(name: &str) -> Organization {
    Organization {
        id: OrgId::generate(),
        name: name.into(),
        plan: Plan::Free,
        per_minute: None,
        per_second: None,
        created_at: Timestamp::now(),
    }
}

async fn new_org(s: &dyn Store) -> OrgId {
    let o = org("Acme");
    s.create_org(&o).await.unwrap();
    o.id
}

fn user(email: &str, role: Role, status: UserStatus, at: i64) -> NewUser {
    NewUser {
        id: UserId::generate(),
        email: Email::parse(email).unwrap(),
        name: Name::parse(&email.replace('@', " at ")).unwrap(),
        role,
        status,
        password_hash: (status == UserStatus::Active).then(|| "$argon2id$test".to_owned()),
        created_at: Timestamp::from_millis(at),
    }
}

fn product(name: &str, sku: &str, stock: i64) -> NewProduct {
    NewProduct {
        name: Name::parse(name).unwrap(),
        sku: Sku::parse(sku).unwrap(),
        price: 1999,
        stock,
        discontinued: false,
    }
}

fn q(s: &str) -> Option<SearchText> {
    SearchText::parse(s).unwrap()
}

async fn user_search_is_substring_and_literal(s: Arc<dyn Store>) {
    let app = App::operator(
        s.clone(),
        Arc::new(gatehouse_store::conformance::TestPublish),
    );
    let o = new_org(s.as_ref()).await;
    let mut a = user("grace.hopper@navy.mil", Role::Viewer, UserStatus::Active, 1);
    a.name = Name::parse("Grace Hopper").unwrap();
    let mut b = user("ada_100%@example.com", Role::Admin, UserStatus::Active, 2);
    b.name = Name::parse("Ada Lovelace").unwrap();
    let mut c = user("adax100x@example.com", Role::Viewer, UserStatus::Active, 3);
    c.name = Name::parse("Charles Babbage").unwrap();
    for u in [&a, &b, &c] {
        s.insert_user(&o, u, gatehouse_store::conformance::teller())
            .await
            .unwrap();
    }
    let (o, app) = (&o, &app);
    let find = |text: &str, role: Option<Role>| {
        let f = UserFilter {
            q: q(text),
            role,
            status: None,
        };
        async move {
            let l = app.list_users(o, &f, Page::default()).await.unwrap();
            let mut names: Vec<String> =
                l.items.iter().map(|u| u.name.as_str().to_owned()).collect();
            names.sort();
            assert_eq!(l.total as usize, names.len());
            names
        }
    };
    assert_eq!(find("HOPP", None).await, vec!["Grace Hopper"]);
    assert_eq!(find("navy.MIL", None).await, vec!["Grace Hopper"]);
    assert_eq!(find("ce ho", None).await, vec!["Grace Hopper"]);
    assert_eq!(
        find("example.com", None).await,
        vec!["Ada Lovelace", "Charles Babbage"]
    );
    // `_` and `%` match themselves, not any character (D9).
    assert_eq!(find("a_1", None).await, vec!["Ada Lovelace"]);
    assert_eq!(find("100%", None).await, vec!["Ada Lovelace"]);
    assert_eq!(find("%", None).await, vec!["Ada Lovelace"]);
    // Short queries still work, with Unicode case folding.
    assert_eq!(find("gr", None).await, vec!["Grace Hopper"]);
    let mut e = user("emile@example.org", Role::Viewer, UserStatus::Active, 4);
    e.name = Name::parse("Émile Zola").unwrap();
    s.insert_user(o, &e, gatehouse_store::conformance::teller())
        .await
        .unwrap();
    assert_eq!(find("éM", None).await, vec!["Émile Zola"]);
    assert_eq!(find("ÉMILE", None).await, vec!["Émile Zola"]);
    assert_eq!(
        find("example.com", Some(Role::Admin)).await,
        vec!["Ada Lovelace"]
    );
    assert!(find("nobody", None).await.is_empty());
    // Past the end of a search: an empty page with the true total.
    let f = UserFilter {
        q: q("example.com"),
        ..Default::default()
    };
    let past = app
        .list_users(
            o,
            &f,
            Page {
                limit: 1,
                offset: 5,
            },
        )
        .await
        .unwrap();
    assert_eq!((past.items.len(), past.total), (0, 2));
    let second = app
        .list_users(
            o,
            &f,
            Page {
                limit: 1,
                offset: 1,
            },
        )
        .await
        .unwrap();
    assert_eq!((second.items.len(), second.total), (1, 2));
    assert!(find("\"", None).await.is_empty());
    // A NUL or other control character cannot be in a stored name or
    // e-mail (D8): such a search matches nothing and is no error.
    for weird in ["\u{b6}!\0L", "\0", "ab\0", "x\u{1}y"] {
        let found = app
            .list_users(
                o,
                &UserFilter {
                    q: q(weird),
                    ..Default::default()
                },
                Page::default(),
            )
            .await
            .unwrap_or_else(|e| panic!("q={weird:?}: {e:?}"));
        assert_eq!(found.total, 0, "q={weird:?}");
        let found = app
            .list_products(
                o,
                &ProductFilter {
                    q: q(weird),
                    ..Default::default()
                },
                Page::default(),
            )
            .await
            .unwrap_or_else(|e| panic!("q={weird:?}: {e:?}"));
        assert_eq!(found.total, 0, "q={weird:?}");
    }
}

async fn product_search_by_word_prefix(s: Arc<dyn Store>) {
    let app = App::operator(
        s.clone(),
        Arc::new(gatehouse_store::conformance::TestPublish),
    );
    let o = new_org(s.as_ref()).await;
    s.insert_product(
        &o,
        &product("Blue Shirt", "SH-1", 1),
        Timestamp::from_millis(1),
        gatehouse_store::conformance::teller(),
    )
    .await
    .unwrap();
    s.insert_product(
        &o,
        &product("Blue Jeans", "JEANS-BLUE-1", 1),
        Timestamp::from_millis(2),
        gatehouse_store::conformance::teller(),
    )
    .await
    .unwrap();
    s.insert_product(
        &o,
        &product("Shoe", "X_9", 1),
        Timestamp::from_millis(3),
        gatehouse_store::conformance::teller(),
    )
    .await
    .unwrap();
    let (o, app) = (&o, &app);
    let find = |text: &str| {
        let f = ProductFilter {
            q: q(text),
            status: None,
        };
        async move {
            let l = app.list_products(o, &f, Page::default()).await.unwrap();
            assert_eq!(l.total as usize, l.items.len());
            l.items
                .into_iter()
                .map(|p| p.name.into_string())
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(find("blue sh").await, vec!["Blue Shirt"]);
    assert_eq!(find("jeans-blue").await, vec!["Blue Jeans"]);
    assert_eq!(find("BLUE").await, vec!["Blue Jeans", "Blue Shirt"]);
    assert_eq!(find("sh").await, vec!["Shoe", "Blue Shirt"]);
    assert_eq!(find("lue").await, Vec::<String>::new());
    assert_eq!(find("x 9").await, vec!["Shoe"]);
    // A query with no words filters nothing, like an empty one.
    assert_eq!(
        find("\"*()").await,
        vec!["Shoe", "Blue Jeans", "Blue Shirt"]
    );
}

/// D6 (continued): a `q` containing a control character matches nothing,
/// an empty page with `total: 0`, on every list (users and products, offset
/// and cursor pages), whatever else it holds.
async fn control_characters_in_q_match_nothing(s: Arc<dyn Store>) {
    let app = App::operator(
        s.clone(),
        Arc::new(gatehouse_store::conformance::TestPublish),
    );
    let o = new_org(s.as_ref()).await;
    let u = s
        .insert_user(
            &o,
            &user("ada@example.com", Role::Editor, UserStatus::Active, 1),
            gatehouse_store::conformance::teller(),
        )
        .await
        .unwrap();
    s.insert_product(
        &o,
        &product("Ada blue shirt", "ADA-1", 3),
        Timestamp::now(),
        gatehouse_store::conformance::teller(),
    )
    .await
    .unwrap();
    for bad in [
        "\u{1}",
        "\t",
        "\u{7f}",
        "\0",
        "\n",
        "\u{9f}",
        "ada\u{1}",
        "ada\t",
        "a\0da",
        "ada\u{7f}",
        "blue\tshirt",
    ] {
        let uf = UserFilter {
            q: q(bad),
            ..Default::default()
        };
        let users = app.list_users(&o, &uf, Page::default()).await.unwrap();
        assert_eq!((users.items.len(), users.total), (0, 0), "users, q={bad:?}");
        let after = app.list_users_after(&o, &uf, None, 10).await.unwrap();
        assert_eq!(after.map(|v| v.len()), Some(0), "users after, q={bad:?}");
        let after = app
            .list_users_after(&o, &uf, Some(&u.id), 10)
            .await
            .unwrap();
        assert_eq!(
            after.map(|v| v.len()),
            Some(0),
            "users after a cursor, q={bad:?}"
        );
        let pf = ProductFilter {
            q: q(bad),
            ..Default::default()
        };
        let products = app.list_products(&o, &pf, Page::default()).await.unwrap();
        assert_eq!(
            (products.items.len(), products.total),
            (0, 0),
            "products, q={bad:?}"
        );
        let after = app.list_products_after(&o, &pf, None, 10).await.unwrap();
        assert_eq!(after.map(|v| v.len()), Some(0), "products after, q={bad:?}");
    }
    // The same texts without the control character do match.
    let uf = UserFilter {
        q: q("ada"),
        ..Default::default()
    };
    assert_eq!(
        app.list_users(&o, &uf, Page::default())
            .await
            .unwrap()
            .total,
        1
    );
    let pf = ProductFilter {
        q: q("blue shirt"),
        ..Default::default()
    };
    assert_eq!(
        app.list_products(&o, &pf, Page::default())
            .await
            .unwrap()
            .total,
        1
    );
}

/// D33's reset replaces an organization's rows in one transaction; an index
/// built before it answers from the new rows at the next search (the
/// fixture holds two jackets; the developer's product is gone).
async fn a_staging_reset_is_searched_at_once(s: Arc<dyn Store>) {
    let fixture = gatehouse_domain::Fixture::standard();
    let app = App::operator(
        s.clone(),
        Arc::new(gatehouse_store::conformance::TestPublish),
    );
    let o = new_org(s.as_ref()).await;
    s.insert_product(
        &o,
        &product("Dev jacket", "DEV-1", 1),
        Timestamp::now(),
        gatehouse_store::conformance::teller(),
    )
    .await
    .unwrap();
    let jackets = ProductFilter {
        q: q("jack"),
        ..Default::default()
    };
    let dev = app
        .list_products(&o, &jackets, Page::default())
        .await
        .unwrap();
    assert_eq!(dev.total, 1, "the index is built before the reset");
    s.reset_to_fixture(Some(&o), &fixture, Timestamp::now(), None)
        .await
        .unwrap();
    let found = app
        .list_products(&o, &jackets, Page::default())
        .await
        .unwrap();
    assert_eq!(found.total, 2, "two jackets in the fixture");
    assert!(found.items.iter().all(|p| p.sku.as_str() != "DEV-1"));
    let admins = app
        .list_users(
            &o,
            &UserFilter {
                role: Some(Role::Admin),
                q: q("@"),
                ..Default::default()
            },
            Page::default(),
        )
        .await
        .unwrap();
    assert_eq!(admins.total, 2, "the fixture's admins, found by `q`");
}

// ---------------------------------------------------------------------------
// The index against D14 and D17 written out plainly
// ---------------------------------------------------------------------------

/// Lower-cases each character on its own: what "case-insensitive" means for
/// D14 (a final sigma in `q` still finds the same letter inside a name).
fn fold(s: &str) -> String {
    s.chars().flat_map(char::to_lowercase).collect()
}

/// D17's words: runs of letters and digits, lower-cased.
fn words(s: &str) -> Vec<String> {
    s.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

/// Every row of a list through storage's plain pages (no `q`), list order.
async fn everything<T>(mut page: impl AsyncFnMut(Page) -> Listing<T>) -> Vec<T> {
    let mut all = Vec::new();
    loop {
        let l = page(Page {
            limit: 100,
            offset: all.len() as u64,
        })
        .await;
        let n = l.items.len();
        all.extend(l.items);
        if n == 0 || all.len() as u64 >= l.total {
            return all;
        }
    }
}

/// D14: `q` a case-insensitive substring of name or e-mail; D6 (continued):
/// a control character matches nothing.
fn user_matches(u: &User, q: &str) -> bool {
    if q.chars().any(char::is_control) {
        return false;
    }
    let q = fold(q);
    fold(u.name.as_str()).contains(&q) || fold(u.email.as_str()).contains(&q)
}

/// D17: every word of `q` a prefix of a word of name or sku (a `q` without
/// a word filters nothing); D6 (continued) as above.
fn product_matches(p: &Product, q: &str) -> bool {
    if q.chars().any(char::is_control) {
        return false;
    }
    let mut have = words(p.name.as_str());
    have.extend(words(p.sku.as_str()));
    words(q)
        .iter()
        .all(|w| have.iter().any(|h| h.starts_with(w.as_str())))
}

/// A page of `rows` (already in list order and filtered): what D14 says
/// `limit`, `offset` and `total` give.
fn paged<T: Clone>(rows: &[T], page: Page) -> (Vec<T>, u64) {
    let start = (page.offset as usize).min(rows.len());
    let end = (start + page.limit as usize).min(rows.len());
    (rows[start..end].to_vec(), rows.len() as u64)
}

/// Issue 16, now the only search: on a few hundred users and products, with
/// filters, offset and cursor pages, the index's answers are exactly the
/// rows D14 and D17 select, in list order, `total` exact, before and after
/// inserts, renames, role, stock and status changes and deletions made
/// between searches (the index catches up before each one).
async fn the_index_answers_as_d14_and_d17_say(store: Arc<dyn Store>) {
    let app = App::operator(
        store.clone(),
        Arc::new(gatehouse_store::conformance::TestPublish),
    );
    let o = new_org(store.as_ref()).await;
    let other = new_org(store.as_ref()).await;
    let names = [
        "Ada Lovelace",
        "Grace Hopper",
        "Alan Turing",
        "Élodie Durand",
        "Zoë Ådahl",
        "Ad Min",
        "Σωκράτης",
        "O'Brien-Smith",
    ];
    let mut users = Vec::new();
    for i in 0..240usize {
        let name = names[i % names.len()];
        let email = format!(
            "{}.{i}@{}",
            name.split(' ')
                .next()
                .unwrap()
                .to_lowercase()
                .replace('\'', ""),
            ["example.com", "Ex-Ample.org", "adm.io"][i % 3]
        );
        let Ok(email) = Email::parse(&email) else {
            continue;
        };
        let u = NewUser {
            id: UserId::generate(),
            email,
            name: Name::parse(name).unwrap(),
            role: [Role::Admin, Role::Editor, Role::Viewer][i % 3],
            status: [
                UserStatus::Active,
                UserStatus::Inactive,
                UserStatus::PendingInvite,
            ][i % 3],
            password_hash: None,
            // Ties of `created_at` are broken by id (D14).
            created_at: Timestamp::from_millis(1_000 + (i as i64 / 4)),
        };
        users.push(
            store
                .insert_user(&o, &u, gatehouse_store::conformance::teller())
                .await
                .unwrap(),
        );
        if i % 10 == 0 {
            // Another organization's rows match too, and must not be found.
            store
                .insert_user(
                    &other,
                    &NewUser {
                        id: UserId::generate(),
                        ..u
                    },
                    gatehouse_store::conformance::teller(),
                )
                .await
                .unwrap();
        }
    }
    let kinds = ["Shirt", "Scarf", "Sock", "Café Mug", "Blue-Green Hat"];
    let mut products = Vec::new();
    for i in 0..150usize {
        let p = NewProduct {
            name: Name::parse(&format!(
                "{} {}",
                ["Blue", "Red", "Slim"][i % 3],
                kinds[i % kinds.len()]
            ))
            .unwrap(),
            sku: Sku::parse(&format!("SK-{i:04}")).unwrap(),
            price: 100,
            stock: (i % 4) as i64,
            discontinued: i % 7 == 0,
        };
        let at = Timestamp::from_millis(5_000 + i as i64 / 3);
        products.push(
            store
                .insert_product(&o, &p, at, gatehouse_store::conformance::teller())
                .await
                .unwrap(),
        );
        if i % 10 == 0 {
            store
                .insert_product(&other, &p, at, gatehouse_store::conformance::teller())
                .await
                .unwrap();
        }
    }

    let user_queries = [
        "ad", "AD", "a", "lovelace", "é", "ÉLO", "σ", "ς", "'b", "-ample.", ".1", "@adm", "zz",
        "ada\n", "n t", "%", "_",
    ];
    let product_queries = [
        "s",
        "sl sh",
        "café",
        "cafe",
        "CAF",
        "sk 00",
        "green",
        "blue-green",
        "x",
        "hat\t",
        "-",
    ];
    let ids_of_users = |l: &[User]| l.iter().map(|u| u.id.to_string()).collect::<Vec<_>>();
    let ids_of_products = |l: &[Product]| l.iter().map(|p| p.id.to_string()).collect::<Vec<_>>();
    let check = async |round: u32| {
        let mut matched = 0;
        for (role, status) in [
            (None, None),
            (Some(Role::Editor), None),
            (None, Some(UserStatus::Inactive)),
        ] {
            let plain = UserFilter {
                role,
                status,
                q: None,
            };
            let rows =
                everything(async |page| app.list_users(&o, &plain, page).await.unwrap()).await;
            for text in user_queries {
                let f = UserFilter {
                    q: q(text),
                    ..plain.clone()
                };
                let want: Vec<User> = rows
                    .iter()
                    .filter(|u| user_matches(u, text))
                    .cloned()
                    .collect();
                matched += want.len();
                for page in [
                    Page {
                        limit: 20,
                        offset: 0,
                    },
                    Page {
                        limit: 7,
                        offset: 11,
                    },
                    Page {
                        limit: 100,
                        offset: 0,
                    },
                    Page {
                        limit: 5,
                        offset: 1_000,
                    },
                ] {
                    let got = app.list_users(&o, &f, page).await.unwrap();
                    let (items, total) = paged(&want, page);
                    let what =
                        format!("round {round}: users q={text:?} {role:?} {status:?} {page:?}");
                    assert_eq!(got.total, total, "{what}");
                    assert_eq!(ids_of_users(&got.items), ids_of_users(&items), "{what}");
                }
                // D32 cursor pages with `q`.
                let got = app
                    .list_users_after(&o, &f, None, 5)
                    .await
                    .unwrap()
                    .unwrap();
                let first: Vec<User> = want.iter().take(5).cloned().collect();
                assert_eq!(got, first, "round {round}: cursor q={text:?}");
                if let Some(last) = first.last() {
                    let got = app
                        .list_users_after(&o, &f, Some(&last.id), 5)
                        .await
                        .unwrap()
                        .unwrap();
                    let next: Vec<User> = want.iter().skip(5).take(5).cloned().collect();
                    assert_eq!(got, next, "round {round}: next cursor q={text:?}");
                }
            }
        }
        assert!(matched > 100, "the queries find something: {matched}");
        for status in [None, Some(ProductStatus::OutOfStock)] {
            let plain = ProductFilter { status, q: None };
            let rows =
                everything(async |page| app.list_products(&o, &plain, page).await.unwrap()).await;
            for text in product_queries {
                let f = ProductFilter {
                    q: q(text),
                    ..plain.clone()
                };
                let want: Vec<Product> = rows
                    .iter()
                    .filter(|p| product_matches(p, text))
                    .cloned()
                    .collect();
                let page = Page {
                    limit: 100,
                    offset: 3,
                };
                let got = app.list_products(&o, &f, page).await.unwrap();
                let (items, total) = paged(&want, page);
                let what = format!("round {round}: products q={text:?} {status:?}");
                assert_eq!(got.total, total, "{what}");
                assert_eq!(
                    ids_of_products(&got.items),
                    ids_of_products(&items),
                    "{what}"
                );
                let got = app
                    .list_products_after(&o, &f, None, 4)
                    .await
                    .unwrap()
                    .unwrap();
                let first: Vec<Product> = want.iter().take(4).cloned().collect();
                assert_eq!(got, first, "{what}, cursor");
            }
        }
        // Deep pages without `q` (offset ≥ 5,000 goes through the index).
        let deep = Page {
            limit: 20,
            offset: 5_000,
        };
        let got = app
            .list_users(&o, &UserFilter::default(), deep)
            .await
            .unwrap();
        let all = everything(async |page| {
            app.list_users(&o, &UserFilter::default(), page)
                .await
                .unwrap()
        })
        .await;
        assert_eq!((got.items.len(), got.total), (0, all.len() as u64));
    };
    check(0).await;
    // Writes between searches: the index catches up before the next one.
    for u in users.iter().step_by(9) {
        store
            .update_user(
                &o,
                &u.id,
                &UserPatch {
                    name: Some(Name::parse("Adelheid Renamed").unwrap()),
                    role: Some(Role::Viewer),
                    status: None,
                },
                Timestamp::now(),
                gatehouse_store::conformance::teller(),
            )
            .await
            .unwrap();
    }
    for u in users.iter().skip(4).step_by(13) {
        let _ = store
            .delete_user_at(
                &o,
                &u.id,
                None,
                gatehouse_domain::Timestamp::now(),
                gatehouse_store::conformance::teller(),
            )
            .await;
    }
    for p in products.iter().step_by(5) {
        store
            .update_product(
                &o,
                &p.id,
                &ProductPatch {
                    name: Some(Name::parse("Slim Green Sock").unwrap()),
                    stock: Some(0),
                    ..Default::default()
                },
                Timestamp::now(),
                gatehouse_store::conformance::teller(),
            )
            .await
            .unwrap();
    }
    for p in products.iter().skip(2).step_by(11) {
        store
            .delete_product(
                &o,
                &p.id,
                Timestamp::now(),
                gatehouse_store::conformance::teller(),
            )
            .await
            .unwrap();
    }
    let mut late = user("late.comer@adm.io", Role::Editor, UserStatus::Active, 9_999);
    late.name = Name::parse("Ada Late").unwrap();
    store
        .insert_user(&o, &late, gatehouse_store::conformance::teller())
        .await
        .unwrap();
    check(1).await;
}
