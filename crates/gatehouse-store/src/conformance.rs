//! The store conformance suite: behaviour every backend must show. A backend
//! runs it with [`store_conformance_tests!`](crate::store_conformance_tests),
//! giving an async expression that yields a fresh, empty, migrated store.

use gatehouse_domain::{
    ApiKey, ApiKeyId, ClientId, DomainError, Email, Name, NewProduct, NewUser, OrgId, Organization,
    Page, Plan, ProductPatch, ProductStatus, Role, Scope, ScopeSet, SearchText, Sku, Timestamp,
    UserId, UserPatch, UserStatus,
};

use crate::records::*;
use crate::{NewClient, ProductFilter, SigningKeyRecord, Store, StoreError, UserFilter};

/// Generates one `#[tokio::test]` per conformance check for a backend.
#[macro_export]
macro_rules! store_conformance_tests {
    ($make:expr) => {
        $crate::store_conformance_tests!(@each $make;
            organizations, bootstrap_runs_once, users_roundtrip_and_isolation,
            duplicate_email_is_per_org_and_case_insensitive, user_list_order_filters_and_paging,
            user_search_is_substring_and_literal, user_update_rules, last_admin_rule,
            concurrent_demotions_keep_an_admin, concurrent_link_uses_succeed_once,
            delete_with_owned_clients, products_roundtrip_and_rules, product_search_by_word_prefix, control_characters_in_q_match_nothing,
            clients_and_admin_approval, api_keys, signing_keys,
            invitations_and_outbox, password_resets, reset_password_returns_the_user_as_updated, revocations_follow_user_changes,
            outbox_claims_and_retries, sessions_and_login_failures, codes_redeem_once,
            refresh_rotation_is_atomic, refresh_rotation_revokes_the_replaced_access_token, client_secret_rotation, purge_removes_only_expired, cursor_pages_are_stable_under_inserts, v2_preview_flag,
            staging_reset_restores_the_fixture, shared_rate_windows, jobs_are_claimed_once,
            clients_version_moves_with_every_client_change, corrupt_rows_are_internal_errors);
    };
    (@each $make:expr; $($name:ident),*) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                let store = $make;
                $crate::conformance::$name(&store).await;
            }
        )*
    };
}

/// Test-only access to a backend's own database, for the checks that need
/// a row no [`Store`] method would write (strict decoding: a corrupt row
/// must read as `StoreError::Internal`, never as a default value). Each
/// backend implements it for its tests only.
#[async_trait::async_trait]
pub trait PlantRows: Store {
    /// Runs `sql` (plain SQL both backends accept) as is, with the schema's
    /// CHECK constraints out of the way, so it can plant a value the schema
    /// would refuse. Panics when it fails.
    async fn plant(&self, sql: &str);
}

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

fn client(owner: Option<UserId>) -> NewClient {
    NewClient {
        id: ClientId::generate(),
        name: "app".into(),
        secret_hash: Some([7; 32]),
        scopes: ScopeSet::parse("users:read products:read").unwrap(),
        redirect_uris: vec!["https://app.example.com/cb".into()],
        admin_approved: false,
        owner,
        created_at: Timestamp::now(),
    }
}

fn q(s: &str) -> Option<SearchText> {
    SearchText::parse(s).unwrap()
}

pub async fn organizations(s: &dyn Store) {
    let mut o = org("Big");
    o.plan = Plan::Enterprise;
    o.per_minute = Some(1000);
    o.per_second = Some(70);
    s.create_org(&o).await.unwrap();
    assert_eq!(s.get_org(&o.id).await.unwrap(), Some(o.clone()));
    assert_eq!(s.get_org(&OrgId::generate()).await.unwrap(), None);
    s.ping().await.unwrap();
}

pub async fn bootstrap_runs_once(s: &dyn Store) {
    let o = org("Default");
    assert!(s.bootstrap(&o, &client(None)).await.unwrap());
    assert!(!s.bootstrap(&org("Default"), &client(None)).await.unwrap());
    assert!(s.get_org(&o.id).await.unwrap().is_some());
}

pub async fn users_roundtrip_and_isolation(s: &dyn Store) {
    let a = new_org(s).await;
    let b = new_org(s).await;
    let nu = user(
        "ada@example.com",
        Role::Editor,
        UserStatus::PendingInvite,
        1000,
    );
    let u = s.insert_user(&a, &nu).await.unwrap();
    assert_eq!(u.id, nu.id);
    assert_eq!(u.status, UserStatus::PendingInvite);
    assert!(!u.has_password);
    assert_eq!(s.get_user(&a, &u.id).await.unwrap(), Some(u.clone()));
    // Another organization cannot see, change or delete it (D2).
    assert_eq!(s.get_user(&b, &u.id).await.unwrap(), None);
    let p = UserPatch {
        name: Some(Name::parse("X").unwrap()),
        ..Default::default()
    };
    assert!(matches!(
        s.update_user(&b, &u.id, &p, Timestamp::now()).await,
        Err(StoreError::NotFound)
    ));
    assert!(matches!(
        s.delete_user(&b, &u.id, None).await,
        Err(StoreError::NotFound)
    ));
    assert_eq!(
        s.list_users(&b, &UserFilter::default(), Page::default())
            .await
            .unwrap()
            .total,
        0
    );
    s.delete_user(&a, &u.id, None).await.unwrap();
    assert_eq!(s.get_user(&a, &u.id).await.unwrap(), None);
    assert!(matches!(
        s.delete_user(&a, &u.id, None).await,
        Err(StoreError::NotFound)
    ));
}

pub async fn duplicate_email_is_per_org_and_case_insensitive(s: &dyn Store) {
    let a = new_org(s).await;
    let b = new_org(s).await;
    s.insert_user(
        &a,
        &user("Bob@Example.com", Role::Viewer, UserStatus::Active, 1),
    )
    .await
    .unwrap();
    let dup = s
        .insert_user(
            &a,
            &user("bob@example.COM", Role::Viewer, UserStatus::Active, 2),
        )
        .await;
    assert!(
        matches!(dup, Err(StoreError::Duplicate("email"))),
        "{dup:?}"
    );
    s.insert_user(
        &b,
        &user("bob@example.com", Role::Viewer, UserStatus::Active, 3),
    )
    .await
    .unwrap();
}

pub async fn user_list_order_filters_and_paging(s: &dyn Store) {
    let o = new_org(s).await;
    let mut ids = Vec::new();
    for i in 0..7 {
        let role = if i % 2 == 0 {
            Role::Viewer
        } else {
            Role::Editor
        };
        // Two users share each millisecond: ties are ordered by id, descending (D14).
        let u = s
            .insert_user(
                &o,
                &user(
                    &format!("u{i}@example.com"),
                    role,
                    UserStatus::Active,
                    1000 + i / 2,
                ),
            )
            .await
            .unwrap();
        ids.push(u);
    }
    let mut expected = ids.clone();
    expected.sort_by(|x, y| (y.created_at, y.id.as_str()).cmp(&(x.created_at, x.id.as_str())));
    let all = s
        .list_users(
            &o,
            &UserFilter::default(),
            Page {
                limit: 100,
                offset: 0,
            },
        )
        .await
        .unwrap();
    assert_eq!(all.total, 7);
    assert_eq!(all.items, expected);
    let page = s
        .list_users(
            &o,
            &UserFilter::default(),
            Page {
                limit: 3,
                offset: 2,
            },
        )
        .await
        .unwrap();
    assert_eq!(page.total, 7);
    assert_eq!(page.items, expected[2..5].to_vec());
    let beyond = s
        .list_users(
            &o,
            &UserFilter::default(),
            Page {
                limit: 3,
                offset: 50,
            },
        )
        .await
        .unwrap();
    assert_eq!((beyond.total, beyond.items.len()), (7, 0));
    let editors = s
        .list_users(
            &o,
            &UserFilter {
                role: Some(Role::Editor),
                ..Default::default()
            },
            Page::default(),
        )
        .await
        .unwrap();
    assert_eq!(editors.total, 3);
    assert!(editors.items.iter().all(|u| u.role == Role::Editor));
    let pending = s
        .list_users(
            &o,
            &UserFilter {
                status: Some(UserStatus::PendingInvite),
                ..Default::default()
            },
            Page::default(),
        )
        .await
        .unwrap();
    assert_eq!(pending.total, 0);
    // Counts follow changes of role and status and deletions.
    let target = &expected[0];
    let p = UserPatch {
        role: Some(Role::Editor),
        status: Some(UserStatus::Inactive),
        ..Default::default()
    };
    s.update_user(&o, &target.id, &p, Timestamp::now())
        .await
        .unwrap();
    let inactive_editors = s
        .list_users(
            &o,
            &UserFilter {
                role: Some(Role::Editor),
                status: Some(UserStatus::Inactive),
                q: None,
            },
            Page::default(),
        )
        .await
        .unwrap();
    assert_eq!(inactive_editors.total, 1);
    s.delete_user(&o, &target.id, None).await.unwrap();
    assert_eq!(
        s.list_users(&o, &UserFilter::default(), Page::default())
            .await
            .unwrap()
            .total,
        6
    );
}

pub async fn user_search_is_substring_and_literal(s: &dyn Store) {
    let o = new_org(s).await;
    let mut a = user("grace.hopper@navy.mil", Role::Viewer, UserStatus::Active, 1);
    a.name = Name::parse("Grace Hopper").unwrap();
    let mut b = user("ada_100%@example.com", Role::Admin, UserStatus::Active, 2);
    b.name = Name::parse("Ada Lovelace").unwrap();
    let mut c = user("adax100x@example.com", Role::Viewer, UserStatus::Active, 3);
    c.name = Name::parse("Charles Babbage").unwrap();
    for u in [&a, &b, &c] {
        s.insert_user(&o, u).await.unwrap();
    }
    let o = &o;
    let find = |text: &str, role: Option<Role>| {
        let f = UserFilter {
            q: q(text),
            role,
            status: None,
        };
        async move {
            let l = s.list_users(o, &f, Page::default()).await.unwrap();
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
    s.insert_user(o, &e).await.unwrap();
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
    let past = s
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
    let second = s
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
    // e-mail (D8): such a search matches nothing and is no storage error.
    for weird in ["\u{b6}!\0L", "\0", "ab\0", "x\u{1}y"] {
        let found = s
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
        let found = s
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

pub async fn user_update_rules(s: &dyn Store) {
    let o = new_org(s).await;
    let pending = s
        .insert_user(
            &o,
            &user("p@example.com", Role::Viewer, UserStatus::PendingInvite, 1),
        )
        .await
        .unwrap();
    let act = UserPatch {
        status: Some(UserStatus::Active),
        ..Default::default()
    };
    let r = s.update_user(&o, &pending.id, &act, Timestamp::now()).await;
    assert!(
        matches!(
            r,
            Err(StoreError::Rule(DomainError::InvalidStateTransition(_)))
        ),
        "{r:?}"
    );
    // All-or-nothing (D9): the name in the same patch was not applied.
    let both = UserPatch {
        name: Some(Name::parse("New").unwrap()),
        status: Some(UserStatus::Active),
        ..Default::default()
    };
    assert!(
        s.update_user(&o, &pending.id, &both, Timestamp::now())
            .await
            .is_err()
    );
    assert_eq!(
        s.get_user(&o, &pending.id).await.unwrap().unwrap().name,
        pending.name
    );
    let off = UserPatch {
        status: Some(UserStatus::Inactive),
        ..Default::default()
    };
    let c = s
        .update_user(&o, &pending.id, &off, Timestamp::from_millis(50_000))
        .await
        .unwrap();
    assert!(c.changed && c.cancels_invitation);
    assert_eq!(c.user.status, UserStatus::Inactive);
    assert_eq!(c.user.updated_at, Timestamp::from_millis(50_000));
    // Never accepted an invitation: cannot be activated.
    assert!(
        s.update_user(&o, &pending.id, &act, Timestamp::now())
            .await
            .is_err()
    );
    // Setting the current value changes nothing, not even updated_at (D11).
    let same = s
        .update_user(&o, &pending.id, &off, Timestamp::from_millis(90_000))
        .await
        .unwrap();
    assert!(!same.changed);
    assert_eq!(same.user.updated_at, Timestamp::from_millis(50_000));
    assert_eq!(
        s.get_user(&o, &pending.id).await.unwrap().unwrap(),
        same.user
    );
}

pub async fn last_admin_rule(s: &dyn Store) {
    let o = new_org(s).await;
    let a1 = s
        .insert_user(
            &o,
            &user("a1@example.com", Role::Admin, UserStatus::Active, 1),
        )
        .await
        .unwrap();
    let a2 = s
        .insert_user(
            &o,
            &user("a2@example.com", Role::Admin, UserStatus::Active, 2),
        )
        .await
        .unwrap();
    let demote = UserPatch {
        role: Some(Role::Viewer),
        ..Default::default()
    };
    let off = UserPatch {
        status: Some(UserStatus::Inactive),
        ..Default::default()
    };
    let c = s
        .update_user(&o, &a1.id, &demote, Timestamp::now())
        .await
        .unwrap();
    assert!(c.revokes_tokens);
    // a2 is now the last active admin.
    for p in [&demote, &off] {
        let r = s.update_user(&o, &a2.id, p, Timestamp::now()).await;
        assert!(
            matches!(r, Err(StoreError::Rule(DomainError::LastAdmin))),
            "{r:?}"
        );
    }
    assert!(matches!(
        s.delete_user(&o, &a2.id, None).await,
        Err(StoreError::Rule(DomainError::LastAdmin))
    ));
    // An admin of another organization does not count.
    let other = new_org(s).await;
    s.insert_user(
        &other,
        &user("x@example.com", Role::Admin, UserStatus::Active, 3),
    )
    .await
    .unwrap();
    assert!(s.delete_user(&o, &a2.id, None).await.is_err());
    // A pending admin does not count either; an inactive admin may be removed.
    let promote = UserPatch {
        role: Some(Role::Admin),
        ..Default::default()
    };
    s.update_user(&o, &a1.id, &promote, Timestamp::now())
        .await
        .unwrap();
    s.update_user(&o, &a2.id, &off, Timestamp::now())
        .await
        .unwrap();
    s.delete_user(&o, &a2.id, None).await.unwrap();
}

/// D13: the last-admin rule and the write it guards are one transaction, so
/// two concurrent changes that each take away one of the last two active
/// admins (demotion, deactivation, deletion) cannot both succeed.
pub async fn concurrent_demotions_keep_an_admin(s: &dyn Store) {
    let demote = UserPatch {
        role: Some(Role::Viewer),
        ..Default::default()
    };
    let off = UserPatch {
        status: Some(UserStatus::Inactive),
        ..Default::default()
    };
    for round in 0..6 {
        let o = new_org(s).await;
        let a1 = s
            .insert_user(
                &o,
                &user("a1@example.com", Role::Admin, UserStatus::Active, 1),
            )
            .await
            .unwrap();
        let a2 = s
            .insert_user(
                &o,
                &user("a2@example.com", Role::Admin, UserStatus::Active, 2),
            )
            .await
            .unwrap();
        let now = Timestamp::now();
        let outcomes: Vec<Result<(), StoreError>> = match round % 3 {
            0 => {
                let (x, y) = tokio::join!(
                    s.update_user(&o, &a1.id, &demote, now),
                    s.update_user(&o, &a2.id, &demote, now)
                );
                vec![x.map(drop), y.map(drop)]
            }
            1 => {
                let (x, y) = tokio::join!(
                    s.update_user(&o, &a1.id, &off, now),
                    s.update_user(&o, &a2.id, &demote, now)
                );
                vec![x.map(drop), y.map(drop)]
            }
            _ => {
                let (x, y) = tokio::join!(
                    s.delete_user(&o, &a1.id, None),
                    s.update_user(&o, &a2.id, &off, now)
                );
                vec![x, y.map(drop)]
            }
        };
        let refused = outcomes
            .iter()
            .filter(|r| matches!(r, Err(StoreError::Rule(DomainError::LastAdmin))))
            .count();
        assert_eq!(
            (outcomes.iter().filter(|r| r.is_ok()).count(), refused),
            (1, 1),
            "round {round}: {outcomes:?}"
        );
        let left = s
            .list_users(&o, &UserFilter::default(), Page::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .filter(|u| u.role == Role::Admin && u.status == UserStatus::Active)
            .count();
        assert_eq!(left, 1, "round {round}");
    }
}

pub async fn delete_with_owned_clients(s: &dyn Store) {
    let o = new_org(s).await;
    let owner = s
        .insert_user(
            &o,
            &user("own@example.com", Role::Editor, UserStatus::Active, 1),
        )
        .await
        .unwrap();
    let heir = s
        .insert_user(
            &o,
            &user("heir@example.com", Role::Editor, UserStatus::Active, 2),
        )
        .await
        .unwrap();
    let idle = s
        .insert_user(
            &o,
            &user(
                "idle@example.com",
                Role::Editor,
                UserStatus::PendingInvite,
                3,
            ),
        )
        .await
        .unwrap();
    let app = s
        .insert_client(&o, &client(Some(owner.id.clone())))
        .await
        .unwrap();
    let r = s.delete_user(&o, &owner.id, None).await;
    assert!(
        matches!(
            r,
            Err(StoreError::Rule(DomainError::OwnedResourcesExist(1)))
        ),
        "{r:?}"
    );
    // The heir must be another active user of the same organization.
    for bad in [&idle.id, &owner.id, &UserId::generate()] {
        let r = s.delete_user(&o, &owner.id, Some(bad)).await;
        assert!(
            matches!(r, Err(StoreError::Rule(DomainError::Validation(_)))),
            "{r:?}"
        );
    }
    assert!(s.get_user(&o, &owner.id).await.unwrap().is_some());
    s.delete_user(&o, &owner.id, Some(&heir.id)).await.unwrap();
    assert_eq!(
        s.find_client(&app.id).await.unwrap().unwrap().owner,
        Some(heir.id.clone())
    );
    assert!(s.get_user(&o, &owner.id).await.unwrap().is_none());
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

pub async fn products_roundtrip_and_rules(s: &dyn Store) {
    let o = new_org(s).await;
    let other = new_org(s).await;
    let p = s
        .insert_product(
            &o,
            &product("Blue Shirt", "SHIRT-BLUE", 3),
            Timestamp::from_millis(10),
        )
        .await
        .unwrap();
    assert_eq!(p.status, ProductStatus::Available);
    assert_eq!(s.get_product(&o, &p.id).await.unwrap(), Some(p.clone()));
    assert_eq!(s.get_product(&other, &p.id).await.unwrap(), None);
    let dup = s
        .insert_product(
            &o,
            &product("Other", "shirt-blue", 1),
            Timestamp::from_millis(11),
        )
        .await;
    assert!(matches!(dup, Err(StoreError::Duplicate("sku"))), "{dup:?}");
    s.insert_product(
        &other,
        &product("Other", "SHIRT-BLUE", 1),
        Timestamp::from_millis(11),
    )
    .await
    .unwrap();
    let q2 = s
        .insert_product(&o, &product("Red", "RED", 0), Timestamp::from_millis(12))
        .await
        .unwrap();
    assert_eq!(q2.status, ProductStatus::OutOfStock);
    // Renaming onto an existing sku is a duplicate too.
    let clash = ProductPatch {
        sku: Some(Sku::parse("SHIRT-BLUE").unwrap()),
        ..Default::default()
    };
    assert!(matches!(
        s.update_product(&o, &q2.id, &clash, Timestamp::now()).await,
        Err(StoreError::Duplicate("sku"))
    ));
    let zero = ProductPatch {
        stock: Some(0),
        ..Default::default()
    };
    let u = s
        .update_product(&o, &p.id, &zero, Timestamp::from_millis(20))
        .await
        .unwrap();
    assert_eq!(u.status, ProductStatus::OutOfStock);
    let bad = ProductPatch {
        status: Some(ProductStatus::Available),
        price: Some(5),
        ..Default::default()
    };
    assert!(matches!(
        s.update_product(&o, &p.id, &bad, Timestamp::now()).await,
        Err(StoreError::Rule(DomainError::InvalidStateTransition(_)))
    ));
    assert_eq!(s.get_product(&o, &p.id).await.unwrap().unwrap().price, 1999);
    let by_status = s
        .list_products(
            &o,
            &ProductFilter {
                status: Some(ProductStatus::OutOfStock),
                q: None,
            },
            Page::default(),
        )
        .await
        .unwrap();
    assert_eq!(by_status.total, 2);
    assert_eq!(by_status.items[0].id, q2.id, "newest first");
    assert!(matches!(
        s.delete_product(&other, &p.id).await,
        Err(StoreError::NotFound)
    ));
    s.delete_product(&o, &p.id).await.unwrap();
    assert_eq!(s.get_product(&o, &p.id).await.unwrap(), None);
    assert_eq!(
        s.list_products(&o, &ProductFilter::default(), Page::default())
            .await
            .unwrap()
            .total,
        1
    );
}

pub async fn product_search_by_word_prefix(s: &dyn Store) {
    let o = new_org(s).await;
    s.insert_product(
        &o,
        &product("Blue Shirt", "SH-1", 1),
        Timestamp::from_millis(1),
    )
    .await
    .unwrap();
    s.insert_product(
        &o,
        &product("Blue Jeans", "JEANS-BLUE-1", 1),
        Timestamp::from_millis(2),
    )
    .await
    .unwrap();
    s.insert_product(&o, &product("Shoe", "X_9", 1), Timestamp::from_millis(3))
        .await
        .unwrap();
    let o = &o;
    let find = |text: &str| {
        let f = ProductFilter {
            q: q(text),
            status: None,
        };
        async move {
            let l = s.list_products(o, &f, Page::default()).await.unwrap();
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
pub async fn control_characters_in_q_match_nothing(s: &dyn Store) {
    let o = new_org(s).await;
    let u = s
        .insert_user(
            &o,
            &user("ada@example.com", Role::Editor, UserStatus::Active, 1),
        )
        .await
        .unwrap();
    s.insert_product(&o, &product("Ada blue shirt", "ADA-1", 3), Timestamp::now())
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
        let users = s.list_users(&o, &uf, Page::default()).await.unwrap();
        assert_eq!((users.items.len(), users.total), (0, 0), "users, q={bad:?}");
        let after = s.list_users_after(&o, &uf, None, 10).await.unwrap();
        assert_eq!(after.map(|v| v.len()), Some(0), "users after, q={bad:?}");
        let after = s.list_users_after(&o, &uf, Some(&u.id), 10).await.unwrap();
        assert_eq!(
            after.map(|v| v.len()),
            Some(0),
            "users after a cursor, q={bad:?}"
        );
        let pf = ProductFilter {
            q: q(bad),
            ..Default::default()
        };
        let products = s.list_products(&o, &pf, Page::default()).await.unwrap();
        assert_eq!(
            (products.items.len(), products.total),
            (0, 0),
            "products, q={bad:?}"
        );
        let after = s.list_products_after(&o, &pf, None, 10).await.unwrap();
        assert_eq!(after.map(|v| v.len()), Some(0), "products after, q={bad:?}");
    }
    // The same texts without the control character do match.
    let uf = UserFilter {
        q: q("ada"),
        ..Default::default()
    };
    assert_eq!(
        s.list_users(&o, &uf, Page::default()).await.unwrap().total,
        1
    );
    let pf = ProductFilter {
        q: q("blue shirt"),
        ..Default::default()
    };
    assert_eq!(
        s.list_products(&o, &pf, Page::default())
            .await
            .unwrap()
            .total,
        1
    );
}

/// What a corrupt-row read must give: `Internal`, naming the table, the
/// column and the row.
fn assert_corrupt<T: std::fmt::Debug>(
    got: Result<T, StoreError>,
    table: &str,
    column: &str,
    row: &str,
) {
    match got {
        Err(StoreError::Internal(m)) => {
            for part in [table, column, row] {
                assert!(m.contains(part), "{m:?} should name {part:?}");
            }
        }
        other => panic!("a corrupt {table}.{column} read as {other:?}"),
    }
}

/// A value a row cannot hold (an unknown enum text, a digest of the wrong
/// length, an unparsable id, an unknown scope bit) reads as `StoreError::Internal` naming the
/// table, column and row, never as a default value.
pub async fn corrupt_rows_are_internal_errors<S: PlantRows>(s: &S) {
    let o = new_org(s).await;
    let now = Timestamp::now();
    let owner = s
        .insert_user(
            &o,
            &user("owner@example.com", Role::Editor, UserStatus::Active, 1),
        )
        .await
        .unwrap();
    s.plant(&format!(
        "UPDATE users SET role = 'owner' WHERE id = '{}'",
        owner.id
    ))
    .await;
    assert_corrupt(
        s.get_user(&o, &owner.id).await,
        "users",
        "role",
        owner.id.as_str(),
    );
    assert_corrupt(
        s.list_users(&o, &UserFilter::default(), Page::default())
            .await,
        "users",
        "role",
        owner.id.as_str(),
    );
    assert_corrupt(
        s.find_user_by_email(&o, &owner.email).await,
        "users",
        "role",
        owner.id.as_str(),
    );

    let o = new_org(s).await;
    let odd = s
        .insert_user(
            &o,
            &user("odd@example.com", Role::Viewer, UserStatus::Active, 2),
        )
        .await
        .unwrap();
    s.plant(&format!(
        "UPDATE users SET status = 'suspended' WHERE id = '{}'",
        odd.id
    ))
    .await;
    assert_corrupt(
        s.get_user(&o, &odd.id).await,
        "users",
        "status",
        odd.id.as_str(),
    );

    let p = s
        .insert_product(&o, &product("Odd socks", "ODD-1", 1), now)
        .await
        .unwrap();
    s.plant(&format!(
        "UPDATE products SET status = 'bogus' WHERE id = '{}'",
        p.id
    ))
    .await;
    assert_corrupt(
        s.get_product(&o, &p.id).await,
        "products",
        "status",
        p.id.as_str(),
    );
    // Its own organization, so the list meets only this corrupt row.
    let o = new_org(s).await;
    let q = s
        .insert_product(&o, &product("Odd hat", "ODD-2", 1), now)
        .await
        .unwrap();
    s.plant(&format!(
        "UPDATE products SET id = 'prod_not-an-id' WHERE id = '{}'",
        q.id
    ))
    .await;
    assert_corrupt(
        s.list_products(&o, &ProductFilter::default(), Page::default())
            .await,
        "products",
        "id",
        "prod_not-an-id",
    );

    let c = s.insert_client(&o, &client(None)).await.unwrap();
    s.plant(&format!(
        "UPDATE clients SET secret_hash = substr(secret_hash, 1, 31) WHERE id = '{}'",
        c.id
    ))
    .await;
    assert_corrupt(
        s.find_client(&c.id).await,
        "clients",
        "secret_hash",
        c.id.as_str(),
    );
    // A scope bit no scope has: not silently dropped.
    let c = s.insert_client(&o, &client(None)).await.unwrap();
    s.plant(&format!(
        "UPDATE clients SET scopes = 255 WHERE id = '{}'",
        c.id
    ))
    .await;
    assert_corrupt(
        s.find_client(&c.id).await,
        "clients",
        "scopes",
        c.id.as_str(),
    );

    let bad = new_org(s).await;
    s.plant(&format!(
        "UPDATE organizations SET plan = 'platinum' WHERE id = '{bad}'"
    ))
    .await;
    assert_corrupt(s.get_org(&bad).await, "organizations", "plan", bad.as_str());

    let id = s
        .insert_revocation(RevocationKind::Jti, "jti-bogus", 1, now.plus_seconds(60))
        .await
        .unwrap();
    s.plant(&format!(
        "UPDATE revocations SET kind = 'bogus' WHERE id = {id}"
    ))
    .await;
    assert_corrupt(
        s.revocations_since(id - 1, now).await,
        "revocations",
        "kind",
        &id.to_string(),
    );
}

pub async fn clients_and_admin_approval(s: &dyn Store) {
    let o = new_org(s).await;
    let c = s.insert_client(&o, &client(None)).await.unwrap();
    let found = s.find_client(&c.id).await.unwrap().unwrap();
    assert_eq!(found, c);
    assert_eq!(found.org, o);
    assert_eq!(found.secret_hash, Some([7; 32]));
    assert!(!found.admin_approved);
    assert!(matches!(
        s.approve_admin(&new_org(s).await, &c.id).await,
        Err(StoreError::NotFound)
    ));
    let a = s.approve_admin(&o, &c.id).await.unwrap();
    assert!(a.admin_approved && a.scopes.contains(Scope::Admin));
    assert_eq!(s.find_client(&ClientId::generate()).await.unwrap(), None);
}

pub async fn signing_keys(s: &dyn Store) {
    assert!(s.signing_keys().await.unwrap().is_empty());
    let k = SigningKeyRecord {
        kid: "k1".into(),
        private_key_encrypted: vec![1, 2, 3],
        public_key: vec![4; 65],
        created_at: Timestamp::from_millis(1),
        activates_at: Timestamp::from_millis(1),
        expires_at: None,
    };
    s.insert_signing_key(&k).await.unwrap();
    assert_eq!(s.signing_keys().await.unwrap(), vec![k]);
}

pub async fn api_keys(s: &dyn Store) {
    let o = new_org(s).await;
    let other = new_org(s).await;
    let k = ApiKey {
        id: ApiKeyId::generate(),
        org: o.clone(),
        name: "ci".into(),
        scopes: ScopeSet::parse("products:read").unwrap(),
        created_at: Timestamp::from_millis(5),
        revoked_at: None,
    };
    s.insert_api_key(&k, &[9; 32]).await.unwrap();
    assert_eq!(
        s.find_api_key_by_digest(&[9; 32]).await.unwrap(),
        Some(k.clone())
    );
    assert_eq!(s.find_api_key_by_digest(&[8; 32]).await.unwrap(), None);
    assert_eq!(s.find_api_key(&k.id).await.unwrap(), Some(k.clone()));
    assert!(matches!(
        s.revoke_api_key(&other, &k.id, Timestamp::from_millis(7))
            .await,
        Err(StoreError::NotFound)
    ));
    let r = s
        .revoke_api_key(&o, &k.id, Timestamp::from_millis(7))
        .await
        .unwrap();
    assert_eq!(r.revoked_at, Some(Timestamp::from_millis(7)));
    let again = s
        .revoke_api_key(&o, &k.id, Timestamp::from_millis(9))
        .await
        .unwrap();
    assert_eq!(again.revoked_at, Some(Timestamp::from_millis(7)));
    assert_eq!(
        s.find_api_key_by_digest(&[9; 32])
            .await
            .unwrap()
            .unwrap()
            .revoked_at,
        Some(Timestamp::from_millis(7))
    );
}

fn link(byte: u8, expires_at: Timestamp, to: &str) -> NewLink {
    NewLink {
        digest: [byte; 32],
        expires_at,
        email: OutboundEmail {
            to: to.into(),
            subject: "Hello".into(),
            body: format!("link {byte}"),
        },
    }
}

pub async fn invitations_and_outbox(s: &dyn Store) {
    let o = new_org(s).await;
    let now = Timestamp::now();
    let nu = user(
        "inv@example.com",
        Role::Viewer,
        UserStatus::PendingInvite,
        now.millis(),
    );
    let u = s
        .insert_user_with_link(
            &o,
            &nu,
            Some(&link(1, now.plus_seconds(600), "inv@example.com")),
        )
        .await
        .unwrap();
    assert_eq!(
        s.outbox_backlog().await.unwrap(),
        1,
        "the invitation e-mail is queued with the user"
    );
    let rec = s
        .find_link(LinkKind::Invitation, &[1; 32])
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (rec.org.clone(), rec.user.id.clone(), rec.used_at),
        (o.clone(), u.id.clone(), None)
    );
    assert!(
        s.find_link(LinkKind::Reset, &[1; 32])
            .await
            .unwrap()
            .is_none()
    );
    // Re-sending replaces the link (D19).
    s.reissue_invitation(
        &o,
        &u.id,
        &link(2, now.plus_seconds(600), "inv@example.com"),
    )
    .await
    .unwrap();
    assert!(
        s.find_link(LinkKind::Invitation, &[1; 32])
            .await
            .unwrap()
            .is_none()
    );
    assert!(matches!(
        s.accept_invitation(&[1; 32], "$argon2id$x", now).await,
        Err(StoreError::NotFound)
    ));
    let active = s
        .accept_invitation(&[2; 32], "$argon2id$x", now)
        .await
        .unwrap();
    assert_eq!(active.status, UserStatus::Active);
    assert!(active.has_password);
    // Single use.
    assert!(matches!(
        s.accept_invitation(&[2; 32], "$argon2id$y", now).await,
        Err(StoreError::NotFound)
    ));
    // Only a pending user can be invited again.
    let r = s
        .reissue_invitation(&o, &u.id, &link(3, now.plus_seconds(600), "x@example.com"))
        .await;
    assert!(
        matches!(
            r,
            Err(StoreError::Rule(DomainError::InvalidStateTransition(_)))
        ),
        "{r:?}"
    );
    assert!(matches!(
        s.reissue_invitation(&new_org(s).await, &u.id, &link(3, now, "x"))
            .await,
        Err(StoreError::NotFound)
    ));
    // An expired link is refused; cancelling an invitation kills its link (D11).
    let late = s
        .insert_user_with_link(
            &o,
            &user(
                "late@example.com",
                Role::Viewer,
                UserStatus::PendingInvite,
                1,
            ),
            Some(&link(4, now.plus_seconds(-1), "late@example.com")),
        )
        .await
        .unwrap();
    assert!(matches!(
        s.accept_invitation(&[4; 32], "$argon2id$x", now).await,
        Err(StoreError::NotFound)
    ));
    let c = s
        .insert_user_with_link(
            &o,
            &user(
                "cancel@example.com",
                Role::Viewer,
                UserStatus::PendingInvite,
                2,
            ),
            Some(&link(5, now.plus_seconds(600), "c@example.com")),
        )
        .await
        .unwrap();
    let off = UserPatch {
        status: Some(UserStatus::Inactive),
        ..Default::default()
    };
    s.update_user(&o, &c.id, &off, now).await.unwrap();
    assert!(
        s.find_link(LinkKind::Invitation, &[5; 32])
            .await
            .unwrap()
            .is_none()
    );
    assert_eq!(
        s.get_user(&o, &late.id).await.unwrap().unwrap().status,
        UserStatus::PendingInvite
    );
}

/// D11, D19: whether a link may be used is decided in the transaction that
/// uses it, so of two concurrent uses of one link exactly one succeeds.
pub async fn concurrent_link_uses_succeed_once(s: &dyn Store) {
    let o = new_org(s).await;
    let now = Timestamp::now();
    for round in 0..4u8 {
        let email = format!("race{round}@example.com");
        s.insert_user_with_link(
            &o,
            &user(
                &email,
                Role::Viewer,
                UserStatus::PendingInvite,
                i64::from(round),
            ),
            Some(&link(100 + round, now.plus_seconds(600), &email)),
        )
        .await
        .unwrap();
        let digest = [100 + round; 32];
        let (x, y) = tokio::join!(
            s.accept_invitation(&digest, "$argon2id$x", now),
            s.accept_invitation(&digest, "$argon2id$y", now)
        );
        let ok = [&x, &y].iter().filter(|r| r.is_ok()).count();
        let gone = [&x, &y]
            .iter()
            .filter(|r| matches!(r, Err(StoreError::NotFound)))
            .count();
        assert_eq!((ok, gone), (1, 1), "invitation round {round}: {x:?} {y:?}");
        // The now active user resets their password: the reset link too is
        // used once.
        assert!(
            s.request_password_reset(
                &o,
                &Email::parse(&email).unwrap(),
                &link(150 + round, now.plus_seconds(600), &email)
            )
            .await
            .unwrap()
        );
        let digest = [150 + round; 32];
        let (x, y) = tokio::join!(
            s.reset_password(&digest, "$argon2id$p", now),
            s.reset_password(&digest, "$argon2id$q", now)
        );
        let ok = [&x, &y].iter().filter(|r| r.is_ok()).count();
        let gone = [&x, &y]
            .iter()
            .filter(|r| matches!(r, Err(StoreError::NotFound)))
            .count();
        assert_eq!((ok, gone), (1, 1), "reset round {round}: {x:?} {y:?}");
    }
}

pub async fn password_resets(s: &dyn Store) {
    let o = new_org(s).await;
    let now = Timestamp::now();
    let u = s
        .insert_user(
            &o,
            &user("reset@example.com", Role::Viewer, UserStatus::Active, 1),
        )
        .await
        .unwrap();
    let email = Email::parse("RESET@example.com").unwrap();
    let before = s.outbox_backlog().await.unwrap();
    assert!(
        s.request_password_reset(
            &o,
            &email,
            &link(7, now.plus_seconds(3600), "reset@example.com")
        )
        .await
        .unwrap()
    );
    assert_eq!(s.outbox_backlog().await.unwrap(), before + 1);
    // D19 (revised): a second request within 5 minutes sends nothing, and
    // the first link stays the usable one.
    assert!(
        !s.request_password_reset(
            &o,
            &email,
            &link(9, now.plus_seconds(3600), "reset@example.com")
        )
        .await
        .unwrap()
    );
    assert_eq!(s.outbox_backlog().await.unwrap(), before + 1);
    let nobody = Email::parse("nobody@example.com").unwrap();
    assert!(
        !s.request_password_reset(&o, &nobody, &link(8, now.plus_seconds(3600), "x"))
            .await
            .unwrap()
    );
    assert_eq!(
        s.outbox_backlog().await.unwrap(),
        before + 1,
        "nothing queued for an unknown address"
    );
    let last = s
        .revocations_since(0, now)
        .await
        .unwrap()
        .last()
        .map_or(0, |r| r.id);
    s.reset_password(&[7; 32], "$argon2id$new", now)
        .await
        .unwrap();
    let (_, hash) = s.find_user_by_email(&o, &email).await.unwrap().unwrap();
    assert_eq!(hash.as_deref(), Some("$argon2id$new"));
    assert!(matches!(
        s.reset_password(&[7; 32], "$argon2id$again", now).await,
        Err(StoreError::NotFound)
    ));
    let revs = s.revocations_since(last, now).await.unwrap();
    assert!(
        revs.iter()
            .any(|r| r.kind == RevocationKind::User && r.subject == u.id.as_str()),
        "a reset revokes the user's tokens"
    );
    assert!(
        s.find_user_by_email(&new_org(s).await, &email)
            .await
            .unwrap()
            .is_none()
    );
}

/// `reset_password` returns the user as updated: what a fresh read returns,
/// on every backend (here an active user who had no password yet).
pub async fn reset_password_returns_the_user_as_updated(s: &dyn Store) {
    let o = new_org(s).await;
    let now = Timestamp::now();
    let mut nu = user("fresh@example.com", Role::Editor, UserStatus::Active, 5);
    nu.password_hash = None;
    let u = s.insert_user(&o, &nu).await.unwrap();
    assert!(!u.has_password);
    assert!(
        s.request_password_reset(
            &o,
            &u.email,
            &link(21, now.plus_seconds(3600), "fresh@example.com")
        )
        .await
        .unwrap()
    );
    let returned = s
        .reset_password(&[21; 32], "$argon2id$new", now)
        .await
        .unwrap();
    let read = s.get_user(&o, &u.id).await.unwrap().unwrap();
    assert_eq!(returned, read);
    assert!(returned.has_password);
    assert_eq!(
        (returned.status, returned.updated_at),
        (read.status, read.updated_at)
    );
}

pub async fn revocations_follow_user_changes(s: &dyn Store) {
    let o = new_org(s).await;
    let now = Timestamp::now();
    let start = s
        .revocations_since(0, now)
        .await
        .unwrap()
        .last()
        .map_or(0, |r| r.id);
    let a = s
        .insert_user(
            &o,
            &user("a@example.com", Role::Admin, UserStatus::Active, 1),
        )
        .await
        .unwrap();
    let e = s
        .insert_user(
            &o,
            &user("e@example.com", Role::Editor, UserStatus::Active, 2),
        )
        .await
        .unwrap();
    let rename = UserPatch {
        name: Some(Name::parse("Renamed").unwrap()),
        ..Default::default()
    };
    s.update_user(&o, &e.id, &rename, now).await.unwrap();
    assert!(
        s.revocations_since(start, now).await.unwrap().is_empty(),
        "a rename revokes nothing"
    );
    let demote = UserPatch {
        role: Some(Role::Viewer),
        ..Default::default()
    };
    s.update_user(&o, &e.id, &demote, now).await.unwrap();
    let off = UserPatch {
        status: Some(UserStatus::Inactive),
        ..Default::default()
    };
    let v = s
        .insert_user(
            &o,
            &user("v@example.com", Role::Viewer, UserStatus::Active, 3),
        )
        .await
        .unwrap();
    s.update_user(&o, &v.id, &off, now).await.unwrap();
    s.delete_user_at(&o, &a.id, None, now).await.unwrap_err(); // last admin
    s.delete_user_at(&o, &v.id, None, now).await.unwrap();
    let revs = s.revocations_since(start, now).await.unwrap();
    let subjects: Vec<&str> = revs.iter().map(|r| r.subject.as_str()).collect();
    assert_eq!(subjects, vec![e.id.as_str(), v.id.as_str(), v.id.as_str()]);
    assert!(revs.iter().all(|r| r.kind == RevocationKind::User
        && r.cutoff == now.unix_seconds()
        && r.expires_at > now));
    assert!(revs.windows(2).all(|w| w[0].id < w[1].id));
    let id = s
        .insert_revocation(
            RevocationKind::Jti,
            "jti-1",
            now.unix_seconds(),
            now.plus_seconds(60),
        )
        .await
        .unwrap();
    assert_eq!(
        s.revocations_since(id - 1, now).await.unwrap()[0].subject,
        "jti-1"
    );
    assert!(
        s.revocations_since(id - 1, now.plus_seconds(61))
            .await
            .unwrap()
            .is_empty(),
        "expired revocations are not returned"
    );
}

pub async fn outbox_claims_and_retries(s: &dyn Store) {
    let o = new_org(s).await;
    let now = Timestamp::now();
    for i in 0..3u8 {
        s.insert_user_with_link(
            &o,
            &user(
                &format!("m{i}@example.com"),
                Role::Viewer,
                UserStatus::PendingInvite,
                i as i64,
            ),
            Some(&link(
                20 + i,
                now.plus_seconds(600),
                &format!("m{i}@example.com"),
            )),
        )
        .await
        .unwrap();
    }
    let first = s.claim_outbox(now, 2, 60_000).await.unwrap();
    assert_eq!(first.len(), 2);
    assert!(first.iter().all(|m| m.attempts == 1));
    // Leased messages are not handed to another worker.
    let second = s.claim_outbox(now, 10, 60_000).await.unwrap();
    assert_eq!(second.len(), 1);
    assert!(s.claim_outbox(now, 10, 60_000).await.unwrap().is_empty());
    s.outbox_sent(first[0].id, now).await.unwrap();
    s.outbox_failed(first[1].id, "connection refused", now.plus_seconds(30))
        .await
        .unwrap();
    assert_eq!(s.outbox_backlog().await.unwrap(), 2);
    assert!(
        s.claim_outbox(now.plus_seconds(10), 10, 60_000)
            .await
            .unwrap()
            .is_empty(),
        "not before its next attempt"
    );
    let retry = s
        .claim_outbox(now.plus_seconds(31), 10, 60_000)
        .await
        .unwrap();
    assert_eq!(
        retry.iter().map(|m| (m.id, m.attempts)).collect::<Vec<_>>(),
        vec![(first[1].id, 2)]
    );
    // An expired lease (a worker died) makes the message claimable again.
    let again = s
        .claim_outbox(now.plus_seconds(200), 10, 60_000)
        .await
        .unwrap();
    assert_eq!(again.len(), 2);
}

pub async fn sessions_and_login_failures(s: &dyn Store) {
    let o = new_org(s).await;
    let now = Timestamp::now();
    let u = s
        .insert_user(
            &o,
            &user("s@example.com", Role::Editor, UserStatus::Active, 1),
        )
        .await
        .unwrap();
    let sess = Session {
        org: o.clone(),
        user: u.id.clone(),
        created_at: now,
        expires_at: now.plus_seconds(3600),
    };
    s.create_session(&[1; 32], &sess).await.unwrap();
    assert_eq!(s.find_session(&[1; 32]).await.unwrap(), Some(sess.clone()));
    s.delete_session(&[1; 32]).await.unwrap();
    assert_eq!(s.find_session(&[1; 32]).await.unwrap(), None);
    s.create_session(&[2; 32], &sess).await.unwrap();
    let off = UserPatch {
        status: Some(UserStatus::Inactive),
        ..Default::default()
    };
    s.update_user(&o, &u.id, &off, now).await.unwrap();
    assert_eq!(
        s.find_session(&[2; 32]).await.unwrap(),
        None,
        "deactivation ends sessions"
    );
    for (src, at) in [("1.1.1.1", 10), ("2.2.2.2", 20), ("1.1.1.1", 30)] {
        s.record_login_failure(&o, "s@example.com", src, now.plus_seconds(at))
            .await
            .unwrap();
    }
    let f = s
        .login_failures(&o, "s@example.com", now.plus_seconds(15))
        .await
        .unwrap();
    assert_eq!(
        f,
        vec![
            ("2.2.2.2".to_owned(), now.plus_seconds(20)),
            ("1.1.1.1".to_owned(), now.plus_seconds(30))
        ]
    );
    assert!(
        s.login_failures(&new_org(s).await, "s@example.com", now)
            .await
            .unwrap()
            .is_empty()
    );
}

fn chain_for(o: &OrgId, client: &ClientId, u: &UserId, now: Timestamp, id: &str) -> RefreshChain {
    RefreshChain {
        id: id.into(),
        org: o.clone(),
        client: client.clone(),
        user: u.clone(),
        scopes: ScopeSet::parse("users:read").unwrap(),
        created_at: now,
        ends_at: now.plus_seconds(90 * 86400),
        revoked_at: None,
    }
}

fn rt(byte: u8, chain: &str, now: Timestamp) -> RefreshToken {
    RefreshToken {
        digest: [byte; 32],
        chain: chain.into(),
        issued_at: now,
        expires_at: now.plus_seconds(30 * 86400),
        used_at: None,
        successor_sealed: None,
        successor_until: None,
        access_jti: Some(format!("jti-{byte}")),
    }
}

pub async fn codes_redeem_once(s: &dyn Store) {
    let o = new_org(s).await;
    let now = Timestamp::now();
    let u = s
        .insert_user(
            &o,
            &user("c@example.com", Role::Editor, UserStatus::Active, 1),
        )
        .await
        .unwrap();
    let c = s.insert_client(&o, &client(None)).await.unwrap();
    let code = AuthCode {
        digest: [3; 32],
        org: o.clone(),
        client: c.id.clone(),
        user: u.id.clone(),
        redirect_uri: "https://app.example.com/cb".into(),
        scopes: ScopeSet::parse("users:read").unwrap(),
        code_challenge: "abc".into(),
        created_at: now,
        expires_at: now.plus_seconds(300),
        used_at: None,
        chain: None,
    };
    s.insert_auth_code(&code).await.unwrap();
    assert_eq!(
        s.find_auth_code(&[3; 32]).await.unwrap(),
        Some(code.clone())
    );
    let ch = chain_for(&o, &c.id, &u.id, now, "chain-code");
    assert_eq!(
        s.redeem_auth_code(&[3; 32], now, &ch, &rt(4, "chain-code", now))
            .await
            .unwrap(),
        Redeemed::Fresh
    );
    assert!(s.find_refresh_token(&[4; 32]).await.unwrap().is_some());
    let ch2 = chain_for(&o, &c.id, &u.id, now, "chain-code-2");
    assert_eq!(
        s.redeem_auth_code(&[3; 32], now, &ch2, &rt(5, "chain-code-2", now))
            .await
            .unwrap(),
        Redeemed::Reused(Some("chain-code".into()))
    );
    assert!(
        s.find_refresh_token(&[5; 32]).await.unwrap().is_none(),
        "a second redemption writes nothing"
    );
    let used = s.find_auth_code(&[3; 32]).await.unwrap().unwrap();
    assert_eq!(
        (used.used_at, used.chain.as_deref()),
        (Some(now), Some("chain-code"))
    );
}

pub async fn refresh_rotation_is_atomic(s: &dyn Store) {
    let o = new_org(s).await;
    let now = Timestamp::now();
    let u = s
        .insert_user(
            &o,
            &user("r@example.com", Role::Editor, UserStatus::Active, 1),
        )
        .await
        .unwrap();
    let c = s.insert_client(&o, &client(None)).await.unwrap();
    let code = AuthCode {
        digest: [9; 32],
        org: o.clone(),
        client: c.id.clone(),
        user: u.id.clone(),
        redirect_uri: "https://app.example.com/cb".into(),
        scopes: ScopeSet::parse("users:read").unwrap(),
        code_challenge: "x".into(),
        created_at: now,
        expires_at: now.plus_seconds(300),
        used_at: None,
        chain: None,
    };
    s.insert_auth_code(&code).await.unwrap();
    s.redeem_auth_code(
        &[9; 32],
        now,
        &chain_for(&o, &c.id, &u.id, now, "ch"),
        &rt(10, "ch", now),
    )
    .await
    .unwrap();
    let (tok, ch) = s.find_refresh_token(&[10; 32]).await.unwrap().unwrap();
    assert_eq!(
        (
            tok.chain.as_str(),
            ch.user.clone(),
            ch.revoked_at,
            tok.access_jti.as_deref()
        ),
        ("ch", u.id.clone(), None, Some("jti-10"))
    );
    let until = now.plus_seconds(10);
    let access_expiry = now.plus_seconds(3660);
    assert!(matches!(
        s.rotate_refresh_token(
            &[10; 32],
            &c.id,
            now,
            b"sealed-pair",
            until,
            &rt(11, "ch", now),
            access_expiry
        )
        .await
        .unwrap(),
        Rotated::Fresh(Some(_))
    ));
    match s
        .rotate_refresh_token(
            &[10; 32],
            &c.id,
            now,
            b"other",
            until,
            &rt(12, "ch", now),
            access_expiry,
        )
        .await
        .unwrap()
    {
        Rotated::AlreadyUsed(t) => {
            assert_eq!(t.successor_sealed.as_deref(), Some(&b"sealed-pair"[..]));
            assert_eq!((t.used_at, t.successor_until), (Some(now), Some(until)));
        }
        other => panic!("{other:?}"),
    }
    assert!(
        s.find_refresh_token(&[12; 32]).await.unwrap().is_none(),
        "the loser writes no successor"
    );
    // The grace window ends: the pair is erased.
    assert_eq!(s.erase_expired_successors(until).await.unwrap(), 1);
    let (t, _) = s.find_refresh_token(&[10; 32]).await.unwrap().unwrap();
    assert_eq!(t.successor_sealed, None);
    // Revoking the chain: its tokens cannot rotate, and a Chain revocation is written once.
    let last = s
        .revocations_since(0, now)
        .await
        .unwrap()
        .last()
        .map_or(0, |r| r.id);
    s.revoke_chain("ch", now, now.plus_seconds(3660))
        .await
        .unwrap();
    s.revoke_chain("ch", now, now.plus_seconds(3660))
        .await
        .unwrap();
    let revs = s.revocations_since(last, now).await.unwrap();
    assert_eq!(revs.len(), 1);
    assert_eq!(
        (revs[0].kind, revs[0].subject.as_str()),
        (RevocationKind::Chain, "ch")
    );
    assert!(matches!(
        s.rotate_refresh_token(
            &[11; 32],
            &c.id,
            now,
            b"p",
            until,
            &rt(13, "ch", now),
            access_expiry
        )
        .await
        .unwrap(),
        Rotated::AlreadyUsed(_)
    ));
    assert!(
        s.find_refresh_token(&[11; 32])
            .await
            .unwrap()
            .unwrap()
            .1
            .revoked_at
            .is_some()
    );
    // Deleting the user removes the chains with them.
    s.delete_user_at(&o, &u.id, None, now).await.unwrap();
    assert!(s.find_refresh_token(&[11; 32]).await.unwrap().is_none());
}

/// D24: "a refresh makes the previous access token of the chain invalid",
/// written by the rotation's own transaction, so no crash can leave the
/// replaced access token alive; a rotation that fails writes nothing.
pub async fn refresh_rotation_revokes_the_replaced_access_token(s: &dyn Store) {
    let o = new_org(s).await;
    let now = Timestamp::now();
    let u = s
        .insert_user(
            &o,
            &user("rot@example.com", Role::Editor, UserStatus::Active, 1),
        )
        .await
        .unwrap();
    let c = s.insert_client(&o, &client(None)).await.unwrap();
    let other = s.insert_client(&o, &client(None)).await.unwrap();
    let code = AuthCode {
        digest: [40; 32],
        org: o.clone(),
        client: c.id.clone(),
        user: u.id.clone(),
        redirect_uri: "https://app.example.com/cb".into(),
        scopes: ScopeSet::parse("users:read").unwrap(),
        code_challenge: "x".into(),
        created_at: now,
        expires_at: now.plus_seconds(300),
        used_at: None,
        chain: None,
    };
    s.insert_auth_code(&code).await.unwrap();
    s.redeem_auth_code(
        &[40; 32],
        now,
        &chain_for(&o, &c.id, &u.id, now, "rot"),
        &rt(41, "rot", now),
    )
    .await
    .unwrap();
    let last = |revs: Vec<Revocation>| revs.last().map_or(0, |r| r.id);
    let before = last(s.revocations_since(0, now).await.unwrap());
    let until = now.plus_seconds(10);
    let access_expiry = now.plus_seconds(3660);

    // Another client's rotation: refused, nothing written or changed.
    assert!(matches!(
        s.rotate_refresh_token(
            &[41; 32],
            &other.id,
            now,
            b"pair",
            until,
            &rt(42, "rot", now),
            access_expiry
        )
        .await,
        Err(StoreError::NotFound)
    ));
    assert_eq!(s.revocations_since(before, now).await.unwrap(), vec![]);
    assert!(s.find_refresh_token(&[42; 32]).await.unwrap().is_none());
    let (t, _) = s.find_refresh_token(&[41; 32]).await.unwrap().unwrap();
    assert_eq!((t.used_at, t.successor_sealed), (None, None));

    // The winning rotation: the revocation of `jti-41` is committed with it
    // and returned as written.
    let written = match s
        .rotate_refresh_token(
            &[41; 32],
            &c.id,
            now,
            b"pair",
            until,
            &rt(42, "rot", now),
            access_expiry,
        )
        .await
        .unwrap()
    {
        Rotated::Fresh(Some(r)) => r,
        other => panic!("{other:?}"),
    };
    let revs = s.revocations_since(before, now).await.unwrap();
    assert_eq!(revs, vec![written.clone()]);
    assert_eq!(
        (
            written.kind,
            written.subject.as_str(),
            written.cutoff,
            written.expires_at
        ),
        (
            RevocationKind::Jti,
            "jti-41",
            now.unix_seconds(),
            access_expiry
        )
    );
    let after = written.id;

    // A used token: nothing more is written, the stored state is unchanged.
    match s
        .rotate_refresh_token(
            &[41; 32],
            &c.id,
            now,
            b"second",
            until,
            &rt(43, "rot", now),
            access_expiry,
        )
        .await
        .unwrap()
    {
        Rotated::AlreadyUsed(t) => assert_eq!(t.successor_sealed.as_deref(), Some(&b"pair"[..])),
        other => panic!("{other:?}"),
    }
    assert_eq!(s.revocations_since(after, now).await.unwrap(), vec![]);
    assert!(s.find_refresh_token(&[43; 32]).await.unwrap().is_none());

    // A revoked chain: the successor is not rotated and no `Jti` record appears.
    s.revoke_chain("rot", now, access_expiry).await.unwrap();
    let after = last(s.revocations_since(0, now).await.unwrap());
    assert!(matches!(
        s.rotate_refresh_token(
            &[42; 32],
            &c.id,
            now,
            b"third",
            until,
            &rt(44, "rot", now),
            access_expiry
        )
        .await
        .unwrap(),
        Rotated::AlreadyUsed(_)
    ));
    assert_eq!(s.revocations_since(after, now).await.unwrap(), vec![]);
    let (t, _) = s.find_refresh_token(&[42; 32]).await.unwrap().unwrap();
    assert_eq!(t.used_at, None);
    assert!(s.find_refresh_token(&[44; 32]).await.unwrap().is_none());

    // An unknown token is `NotFound`.
    assert!(matches!(
        s.rotate_refresh_token(
            &[45; 32],
            &c.id,
            now,
            b"x",
            until,
            &rt(46, "rot", now),
            access_expiry
        )
        .await,
        Err(StoreError::NotFound)
    ));
}

pub async fn client_secret_rotation(s: &dyn Store) {
    let o = new_org(s).await;
    let c = s.insert_client(&o, &client(None)).await.unwrap();
    let until = Timestamp::now().plus_seconds(60);
    let r = s
        .rotate_client_secret(&o, &c.id, &[1; 32], Some(until))
        .await
        .unwrap();
    assert_eq!(r.secret_hash, Some([1; 32]));
    assert_eq!(r.previous_secret, Some(([7; 32], until)));
    let r = s
        .rotate_client_secret(&o, &c.id, &[2; 32], None)
        .await
        .unwrap();
    assert_eq!((r.secret_hash, r.previous_secret), (Some([2; 32]), None));
    assert!(matches!(
        s.rotate_client_secret(&new_org(s).await, &c.id, &[3; 32], None)
            .await,
        Err(StoreError::NotFound)
    ));
}

/// [`Store::clients_version`]: a backend that offers it moves it after every
/// committed change to a client (the auth layer's client cache depends on
/// it, D40), and leaves it alone for writes that touch no client.
pub async fn clients_version_moves_with_every_client_change(s: &dyn Store) {
    let Some(_) = s.clients_version() else {
        return;
    };
    let o = new_org(s).await;
    let owner = s
        .insert_user(
            &o,
            &user("cv@example.com", Role::Editor, UserStatus::Active, 1),
        )
        .await
        .unwrap();
    let heir = s
        .insert_user(
            &o,
            &user("cv2@example.com", Role::Editor, UserStatus::Active, 2),
        )
        .await
        .unwrap();
    let c = s
        .insert_client(&o, &client(Some(owner.id.clone())))
        .await
        .unwrap();
    let version = || s.clients_version().unwrap();

    let v = version();
    s.rotate_client_secret(&o, &c.id, &[4; 32], None)
        .await
        .unwrap();
    assert_ne!(version(), v, "a secret rotation moves it");

    let v = version();
    s.approve_admin(&o, &c.id).await.unwrap();
    assert_ne!(version(), v, "an admin approval moves it");

    let v = version();
    s.delete_user(&o, &owner.id, Some(&heir.id)).await.unwrap();
    assert_ne!(version(), v, "an ownership transfer moves it");

    let v = version();
    s.insert_user(
        &o,
        &user("cv3@example.com", Role::Viewer, UserStatus::Active, 3),
    )
    .await
    .unwrap();
    assert_eq!(version(), v, "a write that touches no client leaves it");

    // A refused change (unknown client) commits nothing.
    let v = version();
    assert!(
        s.rotate_client_secret(&o, &ClientId::generate(), &[5; 32], None)
            .await
            .is_err()
    );
    assert_eq!(version(), v, "a failed change leaves it");
}

pub async fn purge_removes_only_expired(s: &dyn Store) {
    let o = new_org(s).await;
    let now = Timestamp::now();
    let u = s
        .insert_user(
            &o,
            &user("p@example.com", Role::Editor, UserStatus::Active, 1),
        )
        .await
        .unwrap();
    let sess = |exp: Timestamp| Session {
        org: o.clone(),
        user: u.id.clone(),
        created_at: now,
        expires_at: exp,
    };
    s.create_session(&[30; 32], &sess(now.plus_seconds(-5)))
        .await
        .unwrap();
    s.create_session(&[31; 32], &sess(now.plus_seconds(500)))
        .await
        .unwrap();
    s.insert_revocation(RevocationKind::Jti, "old", 0, now.plus_seconds(-5))
        .await
        .unwrap();
    let mut purged = 0;
    loop {
        let n = s.purge_expired(now, 1).await.unwrap();
        if n == 0 {
            break;
        }
        purged += n;
    }
    assert!(purged >= 2);
    assert!(s.find_session(&[30; 32]).await.unwrap().is_none());
    assert!(s.find_session(&[31; 32]).await.unwrap().is_some());
}

pub async fn cursor_pages_are_stable_under_inserts(s: &dyn Store) {
    let o = new_org(s).await;
    for i in 0..5 {
        s.insert_user(
            &o,
            &user(
                &format!("c{i}@example.com"),
                Role::Viewer,
                UserStatus::Active,
                1000 + i / 2,
            ),
        )
        .await
        .unwrap();
    }
    let f = UserFilter::default();
    let mut seen = Vec::new();
    let mut after: Option<UserId> = None;
    let mut inserted = 0;
    loop {
        let page = s
            .list_users_after(&o, &f, after.as_ref(), 2)
            .await
            .unwrap()
            .unwrap();
        if page.is_empty() {
            break;
        }
        seen.extend(page.iter().map(|u| u.id.clone()));
        after = page.last().map(|u| u.id.clone());
        // New users arrive during the walk: they sort first and are never seen or repeated.
        s.insert_user(
            &o,
            &user(
                &format!("new{inserted}@example.com"),
                Role::Viewer,
                UserStatus::Active,
                5000 + inserted,
            ),
        )
        .await
        .unwrap();
        inserted += 1;
    }
    assert_eq!(seen.len(), 5);
    let mut dedup = seen.clone();
    dedup.sort();
    dedup.dedup();
    assert_eq!(dedup.len(), 5, "no repeats");
    let all = s
        .list_users(
            &o,
            &f,
            Page {
                limit: 100,
                offset: 0,
            },
        )
        .await
        .unwrap();
    let originals: Vec<UserId> = all
        .items
        .iter()
        .filter(|u| u.email.as_str().starts_with('c'))
        .map(|u| u.id.clone())
        .collect();
    assert_eq!(seen, originals, "the walk follows the list order");
    assert_eq!(
        s.list_users_after(&o, &f, Some(&UserId::generate()), 2)
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        s.list_users_after(&new_org(s).await, &f, Some(&seen[0]), 2)
            .await
            .unwrap(),
        None,
        "a cursor of another organization is unknown"
    );
    let editors = UserFilter {
        role: Some(Role::Editor),
        ..Default::default()
    };
    assert!(
        s.list_users_after(&o, &editors, None, 10)
            .await
            .unwrap()
            .unwrap()
            .is_empty()
    );
    let p1 = s
        .insert_product(&o, &product("A", "A-1", 1), Timestamp::from_millis(1))
        .await
        .unwrap();
    let p2 = s
        .insert_product(&o, &product("B", "B-1", 1), Timestamp::from_millis(2))
        .await
        .unwrap();
    let pf = ProductFilter::default();
    assert_eq!(
        s.list_products_after(&o, &pf, None, 1)
            .await
            .unwrap()
            .unwrap()[0]
            .id,
        p2.id
    );
    assert_eq!(
        s.list_products_after(&o, &pf, Some(&p2.id), 5)
            .await
            .unwrap()
            .unwrap()
            .iter()
            .map(|p| p.id.clone())
            .collect::<Vec<_>>(),
        vec![p1.id]
    );
}

pub async fn v2_preview_flag(s: &dyn Store) {
    let o = new_org(s).await;
    assert!(!s.v2_preview(&o).await.unwrap());
    s.set_v2_preview(&o, true).await.unwrap();
    assert!(s.v2_preview(&o).await.unwrap());
    s.set_v2_preview(&o, false).await.unwrap();
    assert!(!s.v2_preview(&o).await.unwrap());
    assert!(matches!(
        s.set_v2_preview(&OrgId::generate(), true).await,
        Err(StoreError::NotFound)
    ));
}

pub async fn staging_reset_restores_the_fixture(s: &dyn Store) {
    use gatehouse_domain::Fixture;
    let fixture = Fixture::standard();
    let a = new_org(s).await;
    let b = new_org(s).await;
    let untouched = new_org(s).await;
    // Developer data in A: a user owning a client, a product, an API key.
    let dev = s
        .insert_user(
            &a,
            &user("dev@example.com", Role::Admin, UserStatus::Active, 1),
        )
        .await
        .unwrap();
    let app = s
        .insert_client(&a, &client(Some(dev.id.clone())))
        .await
        .unwrap();
    let key = ApiKey {
        id: ApiKeyId::generate(),
        org: a.clone(),
        name: "staging".into(),
        scopes: ScopeSet::parse("users:read").unwrap(),
        created_at: Timestamp::from_millis(5),
        revoked_at: None,
    };
    s.insert_api_key(&key, &[42; 32]).await.unwrap();
    s.insert_product(
        &a,
        &NewProduct {
            name: Name::parse("Dev product").unwrap(),
            sku: Sku::parse("DEV-1").unwrap(),
            price: 1,
            stock: 1,
            discontinued: false,
        },
        Timestamp::from_millis(1),
    )
    .await
    .unwrap();
    let before = s
        .revocations_since(0, Timestamp::now())
        .await
        .unwrap()
        .last()
        .map_or(0, |r| r.id);

    // Only B first (first start of an organization).
    assert_eq!(
        s.reset_to_fixture(Some(&b), &fixture, Timestamp::now())
            .await
            .unwrap(),
        1
    );
    let listed = s
        .list_users(&a, &UserFilter::default(), Page::default())
        .await
        .unwrap();
    assert_eq!(listed.total, 1, "A is not touched by a reset of B");

    let now = Timestamp::now();
    let n = s.reset_to_fixture(None, &fixture, now).await.unwrap();
    assert!(n >= 3, "every organization is reset: {n}");
    for o in [&a, &b, &untouched] {
        let users = s
            .list_users(
                o,
                &UserFilter::default(),
                Page {
                    limit: 100,
                    offset: 0,
                },
            )
            .await
            .unwrap();
        let emails: Vec<&str> = users.items.iter().map(|u| u.email.as_str()).collect();
        let expected: Vec<&str> = fixture.users.iter().map(|u| u.email.as_str()).collect();
        assert_eq!(emails, expected, "fixture users, newest first");
        assert_eq!(users.total, fixture.users.len() as u64);
        for (u, f) in users.items.iter().zip(&fixture.users) {
            assert_eq!((u.role, u.status), (f.role, f.status));
        }
        let products = s
            .list_products(
                o,
                &ProductFilter::default(),
                Page {
                    limit: 100,
                    offset: 0,
                },
            )
            .await
            .unwrap();
        let skus: Vec<&str> = products.items.iter().map(|p| p.sku.as_str()).collect();
        let expected: Vec<&str> = fixture.products.iter().map(|p| p.sku.as_str()).collect();
        assert_eq!(skus, expected);
        // Search indexes and counters follow the new rows.
        let found = s
            .list_products(
                o,
                &ProductFilter {
                    status: None,
                    q: q("jack"),
                },
                Page::default(),
            )
            .await
            .unwrap();
        assert_eq!(found.total, 2, "two jackets in the fixture");
        let admins = s
            .list_users(
                o,
                &UserFilter {
                    role: Some(Role::Admin),
                    status: None,
                    q: None,
                },
                Page::default(),
            )
            .await
            .unwrap();
        assert_eq!(admins.total, 2);
    }
    // The developer's user is gone, its client stays without owner, the key stays.
    assert_eq!(s.get_user(&a, &dev.id).await.unwrap(), None);
    let kept = s.find_client(&app.id).await.unwrap().expect("client kept");
    assert_eq!(kept.owner, None);
    assert_eq!(
        s.find_api_key_by_digest(&[42; 32]).await.unwrap(),
        Some(key)
    );
    // D13: the removed user's tokens die.
    let revs = s.revocations_since(before, Timestamp::now()).await.unwrap();
    assert!(
        revs.iter()
            .any(|r| r.kind == RevocationKind::User && r.subject == dev.id.as_str()),
        "{revs:?}"
    );
    // The fixture users are real users: their e-mails are taken (D10).
    let dup = s
        .insert_user(
            &a,
            &user("ADA@example.com", Role::Viewer, UserStatus::Active, 9),
        )
        .await;
    assert!(matches!(dup, Err(StoreError::Duplicate(_))), "{dup:?}");
}

/// D28 across nodes: a backend that shares rate limits counts exactly; one
/// that serves a single node says so with `None`.
pub async fn shared_rate_windows(s: &dyn Store) {
    let t0 = 1_900_000_000_000i64; // on a 100 ms boundary
    let at = |ms: i64| Timestamp::from_millis(t0 + ms);
    let key = format!("client:{}", ClientId::generate());
    let first = s.count_request(&key, 5, 3, at(0)).await.unwrap();
    assert_eq!(
        first.is_some(),
        s.shares_rate_limits(),
        "a backend counts shared windows exactly when it says it shares them"
    );
    let Some(first) = first else {
        return;
    };
    assert!(first.admitted);
    assert_eq!((first.in_minute, first.in_second), (1, 1));
    assert_eq!(first.minute_frees_at, Some(t0 + 60_000));
    for expect in [2, 3] {
        let w = s.count_request(&key, 5, 3, at(10)).await.unwrap().unwrap();
        assert!(w.admitted);
        assert_eq!(w.in_second, expect);
    }
    // The fourth in the same second is refused and not counted.
    let w = s.count_request(&key, 5, 3, at(20)).await.unwrap().unwrap();
    assert!(!w.admitted);
    assert_eq!((w.in_minute, w.in_second), (3, 3));
    assert_eq!(w.second_frees_at, Some(t0 + 1_000));
    // Another lineage is counted apart.
    let other = format!("client:{}", ClientId::generate());
    assert!(
        s.count_request(&other, 5, 3, at(20))
            .await
            .unwrap()
            .unwrap()
            .admitted
    );
    // A second later there is room in the second, then the minute fills.
    for expect in [4, 5] {
        let w = s
            .count_request(&key, 5, 3, at(1_000))
            .await
            .unwrap()
            .unwrap();
        assert!(w.admitted, "{w:?}");
        assert_eq!(w.in_minute, expect);
    }
    let w = s
        .count_request(&key, 5, 3, at(2_000))
        .await
        .unwrap()
        .unwrap();
    assert!(!w.admitted);
    assert_eq!(w.in_minute, 5);
    assert_eq!(w.minute_frees_at, Some(t0 + 60_000));
    // When the oldest admissions leave the minute, requests are admitted again.
    let w = s
        .count_request(&key, 5, 3, at(60_000))
        .await
        .unwrap()
        .unwrap();
    assert!(w.admitted, "{w:?}");
    assert_eq!(w.in_minute, 3);
    // Old buckets are purged without touching the current window.
    s.purge_expired(at(61_100), 500).await.unwrap();
    let w = s
        .count_request(&key, 5, 3, at(61_100))
        .await
        .unwrap()
        .unwrap();
    assert!(w.admitted, "{w:?}");
    // Those at 1 s left at 61 s; the one at 60 s is still in the window.
    assert_eq!(w.in_minute, 2, "the admission at 60 s survives the purge");
}

/// D44: a scheduled job's occurrence is claimed by one caller only.
pub async fn jobs_are_claimed_once(s: &dyn Store) {
    let now = Timestamp::now();
    assert!(
        s.claim_job("staging_reset", "1800000000", now)
            .await
            .unwrap()
    );
    assert!(
        !s.claim_job("staging_reset", "1800000000", now)
            .await
            .unwrap()
    );
    assert!(
        s.claim_job("staging_reset", "1800086400", now)
            .await
            .unwrap()
    );
    assert!(s.claim_job("other", "1800000000", now).await.unwrap());
    // Concurrent claims: exactly one wins.
    let claims = futures_join8(s, "race").await;
    assert_eq!(claims.iter().filter(|c| **c).count(), 1, "{claims:?}");
}

async fn futures_join8(s: &dyn Store, key: &str) -> Vec<bool> {
    let now = Timestamp::now();
    let (a, b, c, d) = tokio::join!(
        s.claim_job("concurrent", key, now),
        s.claim_job("concurrent", key, now),
        s.claim_job("concurrent", key, now),
        s.claim_job("concurrent", key, now),
    );
    vec![a.unwrap(), b.unwrap(), c.unwrap(), d.unwrap()]
}
