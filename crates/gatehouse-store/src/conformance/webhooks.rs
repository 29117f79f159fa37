//! Webhook endpoints (D55).

use gatehouse_domain::event::{EventFilter, TypePattern};
use gatehouse_domain::webhook::{
    AllowList, DisabledReason, Endpoint, EndpointPatch, EndpointUrl, MAX_ENDPOINTS, Ordering,
};

use super::*;
use crate::SealedSecrets;

fn endpoint(owner: Option<UserId>, at: i64) -> Endpoint {
    let url = EndpointUrl::parse("https://hooks.example.com/in", &AllowList::default()).unwrap();
    Endpoint::new(
        &url,
        "orders mirror".into(),
        vec![TypePattern::parse("user.*").unwrap()],
        Ordering::None,
        owner,
        Timestamp::from_millis(at),
    )
}

async fn told(s: &dyn Store, org: &OrgId, want: u64) -> Vec<(String, String)> {
    for _ in 0..400 {
        s.sequence_events().await.unwrap();
        let l = s
            .events_after(org, &EventFilter::default(), 0, 1000)
            .await
            .unwrap();
        if l.total >= want {
            assert_eq!(l.total, want, "no more events than the changes told");
            return l
                .items
                .iter()
                .map(|e| (e.event.kind.as_str().to_owned(), e.event.object_id.clone()))
                .collect();
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    panic!("{org}: fewer than {want} events were ever sequenced");
}

/// D55: endpoints round-trip with their sealed secrets, list newest first,
/// stay in their organization, change as `webhook::patched` decides (a
/// patch that changes nothing tells nothing), rotate keeping the previous
/// secret for the grace, and stop at 16 per organization.
pub async fn webhook_endpoints_roundtrip_rotate_and_limit(s: &dyn Store) {
    let o = new_org(s).await;
    let other = new_org(s).await;
    let t = teller();
    let admin = s
        .insert_user(
            &o,
            &user("root@example.com", Role::Admin, UserStatus::Active, 1),
            t,
        )
        .await
        .unwrap();
    let first = endpoint(Some(admin.id.clone()), 10);
    s.insert_endpoint(&o, &first, b"sealed-1", t).await.unwrap();
    assert_eq!(
        s.get_endpoint(&o, &first.id).await.unwrap(),
        Some(first.clone())
    );
    assert_eq!(s.get_endpoint(&other, &first.id).await.unwrap(), None);
    assert_eq!(
        s.endpoint_secrets(&o, &first.id).await.unwrap(),
        Some(SealedSecrets {
            current: b"sealed-1".to_vec(),
            previous: None
        })
    );
    assert_eq!(s.endpoint_secrets(&other, &first.id).await.unwrap(), None);

    // A patch that changes nothing writes and tells nothing.
    let same = s
        .update_endpoint(
            &o,
            &first.id,
            &EndpointPatch {
                enabled: Some(true),
                ..Default::default()
            },
            None,
            Timestamp::from_millis(20),
            t,
        )
        .await
        .unwrap();
    assert_eq!(same, first);
    // Disabling by hand is `manual`; enabling again makes the caller the owner.
    let off = s
        .update_endpoint(
            &o,
            &first.id,
            &EndpointPatch {
                enabled: Some(false),
                description: Some("paused".into()),
                ..Default::default()
            },
            Some(&admin.id),
            Timestamp::from_millis(30),
            t,
        )
        .await
        .unwrap();
    assert_eq!(off.disabled, Some(DisabledReason::Manual));
    assert_eq!(off.description, "paused");
    assert_eq!(off.updated_at, Timestamp::from_millis(30));
    assert_eq!(s.get_endpoint(&o, &first.id).await.unwrap(), Some(off));
    let on = s
        .update_endpoint(
            &o,
            &first.id,
            &EndpointPatch {
                enabled: Some(true),
                ..Default::default()
            },
            None,
            Timestamp::from_millis(40),
            t,
        )
        .await
        .unwrap();
    assert_eq!((on.disabled, on.owner), (None, None));
    assert!(matches!(
        s.update_endpoint(
            &other,
            &first.id,
            &EndpointPatch::default(),
            None,
            Timestamp::from_millis(41),
            t
        )
        .await,
        Err(StoreError::NotFound)
    ));

    // Rotation: the new secret signs, the old one until the grace ends.
    let rotated = s
        .rotate_endpoint_secret(
            &o,
            &first.id,
            b"sealed-2",
            Timestamp::from_millis(5_000),
            Timestamp::from_millis(50),
            t,
        )
        .await
        .unwrap();
    assert_eq!(rotated.updated_at, Timestamp::from_millis(50));
    assert_eq!(
        s.endpoint_secrets(&o, &first.id).await.unwrap(),
        Some(SealedSecrets {
            current: b"sealed-2".to_vec(),
            previous: Some((b"sealed-1".to_vec(), Timestamp::from_millis(5_000)))
        })
    );
    assert!(matches!(
        s.rotate_endpoint_secret(
            &other,
            &first.id,
            b"x",
            Timestamp::from_millis(1),
            Timestamp::from_millis(1),
            t
        )
        .await,
        Err(StoreError::NotFound)
    ));

    // Up to 16, newest first; a 17th is refused and writes nothing.
    let mut ids = vec![first.id.clone()];
    for i in 1..MAX_ENDPOINTS as i64 {
        let e = endpoint(None, 100 + i);
        s.insert_endpoint(&o, &e, b"s", t).await.unwrap();
        ids.push(e.id);
    }
    let extra = endpoint(None, 1_000);
    assert!(matches!(
        s.insert_endpoint(&o, &extra, b"s", t).await,
        Err(StoreError::Rule(DomainError::LimitReached(_)))
    ));
    assert_eq!(s.get_endpoint(&o, &extra.id).await.unwrap(), None);
    // Another organization has its own 16.
    s.insert_endpoint(&other, &endpoint(None, 1), b"s", t)
        .await
        .unwrap();
    let page = s
        .list_endpoints(
            &o,
            Page {
                limit: 5,
                offset: 0,
            },
        )
        .await
        .unwrap();
    assert_eq!(page.total, MAX_ENDPOINTS as u64);
    ids.reverse();
    assert_eq!(
        page.items.iter().map(|e| e.id.clone()).collect::<Vec<_>>(),
        ids[..5]
    );
    let tail = s
        .list_endpoints(
            &o,
            Page {
                limit: 5,
                offset: 15,
            },
        )
        .await
        .unwrap();
    assert_eq!(tail.items.len(), 1);
    assert_eq!(tail.items[0].id, first.id);

    // Deleting frees a place; the endpoint is gone, in its organization only.
    assert!(matches!(
        s.delete_endpoint(&other, &first.id, Timestamp::from_millis(60), t)
            .await,
        Err(StoreError::NotFound)
    ));
    s.delete_endpoint(&o, &first.id, Timestamp::from_millis(60), t)
        .await
        .unwrap();
    assert_eq!(s.get_endpoint(&o, &first.id).await.unwrap(), None);
    assert_eq!(s.endpoint_secrets(&o, &first.id).await.unwrap(), None);
    s.insert_endpoint(&o, &extra, b"s", t).await.unwrap();

    // D54: created, updated twice (disabled, enabled), updated (rotated),
    // the other fifteen created, deleted, then the 17th's creation.
    let events = told(s, &o, 1 + 1 + 3 + 15 + 1 + 1).await;
    let kinds: Vec<&str> = events.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(kinds[1], "webhook_endpoint.created");
    assert_eq!(
        kinds[2..5],
        ["webhook_endpoint.updated"; 3],
        "two changes and a rotation, not the patch that changed nothing"
    );
    assert_eq!(kinds[20], "webhook_endpoint.deleted");
    assert_eq!(events[20].1, first.id.to_string());
    assert_eq!(kinds[21], "webhook_endpoint.created");
}

/// D55 under D44: endpoints created at once in one organization stop at
/// exactly 16, however many nodes create them.
pub async fn concurrent_endpoint_creations_stop_at_the_limit(s: &dyn Store) {
    let o = new_org(s).await;
    let attempts = MAX_ENDPOINTS + 8;
    let results = futures_util::future::join_all((0..attempts).map(|i| {
        let e = endpoint(None, i as i64);
        let o = o.clone();
        async move { s.insert_endpoint(&o, &e, b"s", teller()).await }
    }))
    .await;
    let made = results.iter().filter(|r| r.is_ok()).count();
    let refused = results
        .iter()
        .filter(|r| matches!(r, Err(StoreError::Rule(DomainError::LimitReached(_)))))
        .count();
    assert_eq!((made, refused), (MAX_ENDPOINTS, 8), "{results:?}");
    let all = s
        .list_endpoints(
            &o,
            Page {
                limit: 100,
                offset: 0,
            },
        )
        .await
        .unwrap();
    assert_eq!(all.total, MAX_ENDPOINTS as u64);
}

/// D55 (D46 revised): an owner who is deactivated, demoted below admin or
/// deleted has their enabled endpoints disabled (`owner_removed`) in the
/// same transaction, each telling `webhook_endpoint.disabled` after the
/// keys and applications and before the user's own event (D54); another
/// admin's endpoints and one disabled already stay as they are.
pub async fn removed_owners_disable_their_endpoints(s: &dyn Store) {
    let o = new_org(s).await;
    let t = teller();
    let admin = |email: &str, at| user(email, Role::Admin, UserStatus::Active, at);
    let keeper = s
        .insert_user(&o, &admin("k@example.com", 1), t)
        .await
        .unwrap();
    let ann = s
        .insert_user(&o, &admin("a@example.com", 2), t)
        .await
        .unwrap();
    let bob = s
        .insert_user(&o, &admin("b@example.com", 3), t)
        .await
        .unwrap();
    let cat = s
        .insert_user(&o, &admin("c@example.com", 4), t)
        .await
        .unwrap();
    let e_ann = endpoint(Some(ann.id.clone()), 10);
    let e_ann_off = endpoint(Some(ann.id.clone()), 11);
    let e_bob = endpoint(Some(bob.id.clone()), 12);
    let e_cat = endpoint(Some(cat.id.clone()), 13);
    let e_keep = endpoint(Some(keeper.id.clone()), 14);
    for e in [&e_ann, &e_ann_off, &e_bob, &e_cat, &e_keep] {
        s.insert_endpoint(&o, e, b"s", t).await.unwrap();
    }
    s.update_endpoint(
        &o,
        &e_ann_off.id,
        &EndpointPatch {
            enabled: Some(false),
            ..Default::default()
        },
        Some(&ann.id),
        Timestamp::from_millis(20),
        t,
    )
    .await
    .unwrap();
    let at = Timestamp::from_millis(30);
    let off = UserPatch {
        status: Some(UserStatus::Inactive),
        ..Default::default()
    };
    s.update_user(&o, &ann.id, &off, at, t).await.unwrap();
    let down = UserPatch {
        role: Some(Role::Editor),
        ..Default::default()
    };
    s.update_user(&o, &bob.id, &down, at, t).await.unwrap();
    s.delete_user_at(&o, &cat.id, None, at, t).await.unwrap();

    let mut reasons = Vec::new();
    for e in [&e_ann, &e_ann_off, &e_bob, &e_cat, &e_keep] {
        reasons.push(s.get_endpoint(&o, &e.id).await.unwrap().unwrap().disabled);
    }
    let reason = |i: usize| reasons[i];
    assert_eq!(reason(0), Some(DisabledReason::OwnerRemoved));
    assert_eq!(
        reason(1),
        Some(DisabledReason::Manual),
        "a disabled endpoint keeps its reason"
    );
    assert_eq!(reason(2), Some(DisabledReason::OwnerRemoved));
    assert_eq!(reason(3), Some(DisabledReason::OwnerRemoved));
    assert_eq!(reason(4), None);
    let cat_endpoint = s.get_endpoint(&o, &e_cat.id).await.unwrap().unwrap();
    assert_eq!(
        cat_endpoint.owner,
        Some(cat.id.clone()),
        "it keeps naming its owner"
    );
    assert_eq!(cat_endpoint.updated_at, at);

    // 4 users, 5 endpoints, 1 manual disabling; then each change's cascade.
    let events = told(s, &o, 4 + 5 + 1 + 2 + 2 + 2).await;
    let tail: Vec<(&str, &str)> = events[10..]
        .iter()
        .map(|(k, id)| (k.as_str(), id.as_str()))
        .collect();
    assert_eq!(
        tail,
        vec![
            ("webhook_endpoint.disabled", e_ann.id.as_str()),
            ("user.updated", ann.id.as_str()),
            ("webhook_endpoint.disabled", e_bob.id.as_str()),
            ("user.updated", bob.id.as_str()),
            ("webhook_endpoint.disabled", e_cat.id.as_str()),
            ("user.deleted", cat.id.as_str()),
        ]
    );
}
