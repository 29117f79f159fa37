//! The store conformance suite: behaviour every backend must show. A backend
//! runs it with [`store_conformance_tests!`](crate::store_conformance_tests),
//! giving an async expression that yields a fresh, empty, migrated store.

use gatehouse_domain::{
    ApiKey, ApiKeyId, ClientId, DomainError, Email, Name, NewProduct, NewUser, OrgId, Organization,
    Page, Plan, ProductPatch, ProductStatus, Role, Scope, ScopeSet, SearchText, Sku, Timestamp,
    UserId, UserPatch, UserStatus,
};

use crate::{NewClient, ProductFilter, SigningKeyRecord, Store, StoreError, UserFilter};

/// Generates one `#[tokio::test]` per conformance check for a backend.
#[macro_export]
macro_rules! store_conformance_tests {
    ($make:expr) => {
        $crate::store_conformance_tests!(@each $make;
            organizations, bootstrap_runs_once, users_roundtrip_and_isolation,
            duplicate_email_is_per_org_and_case_insensitive, user_list_order_filters_and_paging,
            user_search_is_substring_and_literal, user_update_rules, last_admin_rule,
            delete_with_owned_clients, products_roundtrip_and_rules, product_search_by_word_prefix,
            clients_and_admin_approval, api_keys, signing_keys);
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
