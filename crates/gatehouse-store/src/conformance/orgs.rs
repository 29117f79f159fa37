//! Organizations: creation, changes (issue 32), bootstrap, the `/v2/` preview flag and the staging reset.

use super::*;

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
            crate::conformance::teller(),
        )
        .await
        .unwrap();
    let app = s
        .insert_client(&a, &client(Some(dev.id.clone())), teller())
        .await
        .unwrap();
    let key = ApiKey {
        id: ApiKeyId::generate(),
        org: a.clone(),
        name: "staging".into(),
        scopes: ScopeSet::parse("users:read").unwrap(),
        created_at: Timestamp::from_millis(5),
        prefix: String::new(),
        owner: None,
        expires_at: None,
        last_used_at: None,
        revoked_at: None,
    };
    s.insert_api_key(&key.org, &key, &[42; 32], teller())
        .await
        .unwrap();
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
        crate::conformance::teller(),
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
        s.reset_to_fixture(Some(&b), &fixture, Timestamp::now(), None)
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
    let n = s
        .reset_to_fixture(None, &fixture, now, Some(teller()))
        .await
        .unwrap();
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
        // Counters follow the new rows (that search does too is the
        // application's search suite, `gatehouse-app/tests/search.rs`).
        let admins = s
            .list_users(
                o,
                &UserFilter {
                    role: Some(Role::Admin),
                    status: None,
                },
                Page::default(),
            )
            .await
            .unwrap();
        assert_eq!(admins.total, 2);
    }
    // The developer's user is gone, its client stays without owner, the key stays.
    assert_eq!(s.get_user(&a, &dev.id).await.unwrap(), None);
    let kept = s
        .resolve_client(&app.id)
        .await
        .unwrap()
        .expect("client kept");
    assert_eq!(kept.owner, None);
    assert_eq!(s.resolve_api_key(&[42; 32]).await.unwrap(), Some(key));
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
            crate::conformance::teller(),
        )
        .await;
    assert!(matches!(dup, Err(StoreError::Duplicate(_))), "{dup:?}");
}

/// Issue 32 (`org rename`, `org plan`): a change's effects write the
/// organization's name, plan and limits with `organization.updated` in one
/// transaction; another organization is untouched; a missing one is
/// `NotFound` and writes nothing; a backend that offers `orgs_version`
/// moves it with the change.
pub async fn organization_changes_are_written_with_their_event(s: &dyn Store) {
    let t = teller();
    let o = new_org(s).await;
    let other = new_org(s).await;
    let before = s.get_org(&o).await.unwrap().unwrap();
    let version = s.orgs_version();
    let after = Organization {
        name: "Renamed".into(),
        plan: Plan::Enterprise,
        per_minute: Some(5_000),
        per_second: Some(90),
        ..before.clone()
    };
    let at = Timestamp::from_millis(7_000);
    let fx = gatehouse_domain::effect::of_org_change(t, &before, after.clone(), at);
    s.write_org(&o, &fx, at, t).await.unwrap();
    assert_eq!(s.get_org(&o).await.unwrap(), Some(after.clone()));
    assert_eq!(after.limits(), (5_000, 90));
    let untouched = s.get_org(&other).await.unwrap().unwrap();
    assert_ne!(untouched.name, "Renamed");
    if let Some(v) = version {
        assert_ne!(
            s.orgs_version(),
            Some(v),
            "the version moves with the change"
        );
    }
    let events = super::events::settled(s, &o, 1).await;
    assert_eq!(
        super::events::kinds(&events),
        vec![("organization.updated", o.to_string())]
    );
    assert!(events[0].event.previous.is_some(), "what changed");
    assert_eq!(events[0].event.created_at, at);

    // Back to free: custom limits go with the plan.
    let free = Organization {
        plan: Plan::Free,
        per_minute: None,
        per_second: None,
        ..after.clone()
    };
    let fx = gatehouse_domain::effect::of_org_change(t, &after, free.clone(), at);
    s.write_org(&o, &fx, at, t).await.unwrap();
    assert_eq!(s.get_org(&o).await.unwrap().unwrap().limits(), (60, 10));

    // A rename and a plan change decided from the same reading (two
    // operators at once) both stand: each writes only what it changed.
    let renamed = Organization {
        name: "Second name".into(),
        ..free.clone()
    };
    let pro = Organization {
        plan: Plan::Pro,
        ..free.clone()
    };
    let fx = gatehouse_domain::effect::of_org_change(t, &free, renamed, at);
    s.write_org(&o, &fx, at, t).await.unwrap();
    let fx = gatehouse_domain::effect::of_org_change(t, &free, pro, at);
    s.write_org(&o, &fx, at, t).await.unwrap();
    let both = s.get_org(&o).await.unwrap().unwrap();
    assert_eq!((both.name.as_str(), both.plan), ("Second name", Plan::Pro));
    let free = both;

    // Nothing changed: no effects, nothing told.
    assert!(gatehouse_domain::effect::of_org_change(t, &free, free.clone(), at).is_empty());

    let ghost = Organization {
        id: OrgId::generate(),
        ..free.clone()
    };
    let fx = gatehouse_domain::effect::of_org_change(t, &free, ghost.clone(), at);
    assert!(matches!(
        s.write_org(&ghost.id, &fx, at, t).await,
        Err(StoreError::NotFound)
    ));
    assert_eq!(s.get_org(&ghost.id).await.unwrap(), None);
    super::events::settled(s, &o, 4).await;
}
