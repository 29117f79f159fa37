//! Users: isolation, uniqueness, listing, and the D11/D13 rules (search is
//! the application's: `gatehouse-app/tests/search.rs`).

use super::*;

pub async fn users_roundtrip_and_isolation(s: &dyn Store) {
    let a = new_org(s).await;
    let b = new_org(s).await;
    let nu = user(
        "ada@example.com",
        Role::Editor,
        UserStatus::PendingInvite,
        1000,
    );
    let u = s
        .insert_user(&a, &nu, crate::conformance::teller())
        .await
        .unwrap();
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
        s.update_user(&b, &u.id, &p, Timestamp::now(), teller())
            .await,
        Err(StoreError::NotFound)
    ));
    assert!(matches!(
        s.delete_user_at(
            &b,
            &u.id,
            None,
            gatehouse_domain::Timestamp::now(),
            teller()
        )
        .await,
        Err(StoreError::NotFound)
    ));
    assert_eq!(
        s.list_users(&b, &UserFilter::default(), Page::default())
            .await
            .unwrap()
            .total,
        0
    );
    s.delete_user_at(
        &a,
        &u.id,
        None,
        gatehouse_domain::Timestamp::now(),
        teller(),
    )
    .await
    .unwrap();
    assert_eq!(s.get_user(&a, &u.id).await.unwrap(), None);
    assert!(matches!(
        s.delete_user_at(
            &a,
            &u.id,
            None,
            gatehouse_domain::Timestamp::now(),
            teller()
        )
        .await,
        Err(StoreError::NotFound)
    ));
}

pub async fn duplicate_email_is_per_org_and_case_insensitive(s: &dyn Store) {
    let a = new_org(s).await;
    let b = new_org(s).await;
    s.insert_user(
        &a,
        &user("Bob@Example.com", Role::Viewer, UserStatus::Active, 1),
        crate::conformance::teller(),
    )
    .await
    .unwrap();
    let dup = s
        .insert_user(
            &a,
            &user("bob@example.COM", Role::Viewer, UserStatus::Active, 2),
            crate::conformance::teller(),
        )
        .await;
    assert!(
        matches!(dup, Err(StoreError::Duplicate("email"))),
        "{dup:?}"
    );
    s.insert_user(
        &b,
        &user("bob@example.com", Role::Viewer, UserStatus::Active, 3),
        crate::conformance::teller(),
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
                crate::conformance::teller(),
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
    s.update_user(&o, &target.id, &p, Timestamp::now(), teller())
        .await
        .unwrap();
    let inactive_editors = s
        .list_users(
            &o,
            &UserFilter {
                role: Some(Role::Editor),
                status: Some(UserStatus::Inactive),
            },
            Page::default(),
        )
        .await
        .unwrap();
    assert_eq!(inactive_editors.total, 1);
    s.delete_user_at(
        &o,
        &target.id,
        None,
        gatehouse_domain::Timestamp::now(),
        teller(),
    )
    .await
    .unwrap();
    assert_eq!(
        s.list_users(&o, &UserFilter::default(), Page::default())
            .await
            .unwrap()
            .total,
        6
    );
}

pub async fn user_update_rules(s: &dyn Store) {
    let o = new_org(s).await;
    let pending = s
        .insert_user(
            &o,
            &user("p@example.com", Role::Viewer, UserStatus::PendingInvite, 1),
            crate::conformance::teller(),
        )
        .await
        .unwrap();
    let act = UserPatch {
        status: Some(UserStatus::Active),
        ..Default::default()
    };
    let r = s
        .update_user(&o, &pending.id, &act, Timestamp::now(), teller())
        .await;
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
        s.update_user(&o, &pending.id, &both, Timestamp::now(), teller())
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
        .update_user(
            &o,
            &pending.id,
            &off,
            Timestamp::from_millis(50_000),
            teller(),
        )
        .await
        .unwrap();
    assert!(c.changed && c.cancels_invitation);
    assert_eq!(c.user.status, UserStatus::Inactive);
    assert_eq!(c.user.updated_at, Timestamp::from_millis(50_000));
    // Never accepted an invitation: cannot be activated.
    assert!(
        s.update_user(&o, &pending.id, &act, Timestamp::now(), teller())
            .await
            .is_err()
    );
    // Setting the current value changes nothing, not even updated_at (D11).
    let same = s
        .update_user(
            &o,
            &pending.id,
            &off,
            Timestamp::from_millis(90_000),
            teller(),
        )
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
            crate::conformance::teller(),
        )
        .await
        .unwrap();
    let a2 = s
        .insert_user(
            &o,
            &user("a2@example.com", Role::Admin, UserStatus::Active, 2),
            crate::conformance::teller(),
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
        .update_user(&o, &a1.id, &demote, Timestamp::now(), teller())
        .await
        .unwrap();
    assert!(c.revokes_tokens);
    // a2 is now the last active admin.
    for p in [&demote, &off] {
        let r = s
            .update_user(&o, &a2.id, p, Timestamp::now(), teller())
            .await;
        assert!(
            matches!(r, Err(StoreError::Rule(DomainError::LastAdmin))),
            "{r:?}"
        );
    }
    assert!(matches!(
        s.delete_user_at(
            &o,
            &a2.id,
            None,
            gatehouse_domain::Timestamp::now(),
            teller()
        )
        .await,
        Err(StoreError::Rule(DomainError::LastAdmin))
    ));
    // An admin of another organization does not count.
    let other = new_org(s).await;
    s.insert_user(
        &other,
        &user("x@example.com", Role::Admin, UserStatus::Active, 3),
        crate::conformance::teller(),
    )
    .await
    .unwrap();
    assert!(
        s.delete_user_at(
            &o,
            &a2.id,
            None,
            gatehouse_domain::Timestamp::now(),
            teller()
        )
        .await
        .is_err()
    );
    // A pending admin does not count either; an inactive admin may be removed.
    let promote = UserPatch {
        role: Some(Role::Admin),
        ..Default::default()
    };
    s.update_user(&o, &a1.id, &promote, Timestamp::now(), teller())
        .await
        .unwrap();
    s.update_user(&o, &a2.id, &off, Timestamp::now(), teller())
        .await
        .unwrap();
    s.delete_user_at(
        &o,
        &a2.id,
        None,
        gatehouse_domain::Timestamp::now(),
        teller(),
    )
    .await
    .unwrap();
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
                crate::conformance::teller(),
            )
            .await
            .unwrap();
        let a2 = s
            .insert_user(
                &o,
                &user("a2@example.com", Role::Admin, UserStatus::Active, 2),
                crate::conformance::teller(),
            )
            .await
            .unwrap();
        let now = Timestamp::now();
        let outcomes: Vec<Result<(), StoreError>> = match round % 3 {
            0 => {
                let (x, y) = tokio::join!(
                    s.update_user(&o, &a1.id, &demote, now, teller()),
                    s.update_user(&o, &a2.id, &demote, now, teller())
                );
                vec![x.map(drop), y.map(drop)]
            }
            1 => {
                let (x, y) = tokio::join!(
                    s.update_user(&o, &a1.id, &off, now, teller()),
                    s.update_user(&o, &a2.id, &demote, now, teller())
                );
                vec![x.map(drop), y.map(drop)]
            }
            _ => {
                let (x, y) = tokio::join!(
                    s.delete_user_at(
                        &o,
                        &a1.id,
                        None,
                        gatehouse_domain::Timestamp::now(),
                        teller()
                    ),
                    s.update_user(&o, &a2.id, &off, now, teller())
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
            crate::conformance::teller(),
        )
        .await
        .unwrap();
    let heir = s
        .insert_user(
            &o,
            &user("heir@example.com", Role::Editor, UserStatus::Active, 2),
            crate::conformance::teller(),
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
            crate::conformance::teller(),
        )
        .await
        .unwrap();
    let app = s
        .insert_client(&o, &client(Some(owner.id.clone())), teller())
        .await
        .unwrap();
    let r = s
        .delete_user_at(
            &o,
            &owner.id,
            None,
            gatehouse_domain::Timestamp::now(),
            teller(),
        )
        .await;
    assert!(
        matches!(
            r,
            Err(StoreError::Rule(DomainError::OwnedResourcesExist(1)))
        ),
        "{r:?}"
    );
    // The heir must be another active user of the same organization.
    for bad in [&idle.id, &owner.id, &UserId::generate()] {
        let r = s
            .delete_user_at(
                &o,
                &owner.id,
                Some(bad),
                gatehouse_domain::Timestamp::now(),
                teller(),
            )
            .await;
        assert!(
            matches!(r, Err(StoreError::Rule(DomainError::Validation(_)))),
            "{r:?}"
        );
    }
    assert!(s.get_user(&o, &owner.id).await.unwrap().is_some());
    s.delete_user_at(
        &o,
        &owner.id,
        Some(&heir.id),
        gatehouse_domain::Timestamp::now(),
        teller(),
    )
    .await
    .unwrap();
    assert_eq!(
        s.resolve_client(&app.id).await.unwrap().unwrap().owner,
        Some(heir.id.clone())
    );
    assert!(s.get_user(&o, &owner.id).await.unwrap().is_none());
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
            crate::conformance::teller(),
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
            crate::conformance::teller(),
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
        .insert_product(
            &o,
            &product("A", "A-1", 1),
            Timestamp::from_millis(1),
            crate::conformance::teller(),
        )
        .await
        .unwrap();
    let p2 = s
        .insert_product(
            &o,
            &product("B", "B-1", 1),
            Timestamp::from_millis(2),
            crate::conformance::teller(),
        )
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
