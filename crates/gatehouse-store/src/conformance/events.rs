//! Events (D54): written with their change, sequenced per organization in
//! commit order without gaps, listed, filtered, caught up and purged.

use gatehouse_domain::event::{Actor, Event, EventType};
use gatehouse_domain::{EventId, Page, ProductPatch};

use super::*;
use crate::EventFilter;

/// Sequences until `org` shows `want` events (a backend that sequences
/// after commit may need a few rounds while other transactions of the
/// cluster run), then answers them oldest first.
async fn settled(s: &dyn Store, org: &OrgId, want: u64) -> Vec<Event> {
    for _ in 0..400 {
        s.sequence_events().await.unwrap();
        let l = s
            .events_after(org, &EventFilter::default(), 0, 1000)
            .await
            .unwrap();
        if l.total >= want {
            assert_eq!(l.total, want, "no more events than the changes told");
            return l.items;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    panic!("{org}: fewer than {want} events were ever sequenced");
}

fn kinds(events: &[Event]) -> Vec<(&'static str, String)> {
    events
        .iter()
        .map(|e| (e.event.kind.as_str(), e.event.object_id.clone()))
        .collect()
}

fn json(s: &str) -> serde_json::Value {
    serde_json::from_str(s).unwrap()
}

pub async fn events_are_written_with_their_change_and_sequenced(s: &dyn Store) {
    let o = new_org(s).await;
    let t = teller();
    let at = Timestamp::from_millis(1_000);
    let p1 = s
        .insert_product(&o, &product("One", "ONE", 0), at, t)
        .await
        .unwrap();
    let p2 = s
        .insert_product(&o, &product("Two", "TWO", 1), at, t)
        .await
        .unwrap();
    let p3 = s
        .insert_product(&o, &product("Three", "THREE", 1), at, t)
        .await
        .unwrap();
    // D54: no event for a change refused without commit …
    let dup = s
        .insert_product(&o, &product("Dup", "one", 1), at, t)
        .await;
    assert!(matches!(dup, Err(StoreError::Duplicate("sku"))), "{dup:?}");
    // … nor for a PATCH that changes nothing.
    let same = ProductPatch {
        name: Some(Name::parse("Two").unwrap()),
        ..Default::default()
    };
    s.update_product(&o, &p2.id, &same, Timestamp::from_millis(2_000), t)
        .await
        .unwrap();
    // D18: restocking moves the status in the same `product.updated`.
    let restock = ProductPatch {
        stock: Some(5),
        ..Default::default()
    };
    let later = Timestamp::from_millis(3_000);
    s.update_product(&o, &p1.id, &restock, later, t)
        .await
        .unwrap();
    s.delete_product(&o, &p3.id, Timestamp::from_millis(4_000), t)
        .await
        .unwrap();

    let events = settled(s, &o, 5).await;
    assert_eq!(
        kinds(&events),
        vec![
            ("product.created", p1.id.to_string()),
            ("product.created", p2.id.to_string()),
            ("product.created", p3.id.to_string()),
            ("product.updated", p1.id.to_string()),
            ("product.deleted", p3.id.to_string()),
        ]
    );
    let sequences: Vec<i64> = events.iter().map(|e| e.sequence).collect();
    assert_eq!(sequences, vec![1, 2, 3, 4, 5], "1, 2, 3 … without gaps");

    let updated = &events[3].event;
    assert_eq!(updated.created_at, later, "the change's time (D4)");
    let object = json(&updated.object);
    assert_eq!(
        (object["stock"].clone(), object["status"].clone()),
        (5.into(), "available".into())
    );
    assert_eq!(
        json(updated.previous.as_deref().unwrap()),
        serde_json::json!({"stock": 0, "status": "out_of_stock"}),
        "the old values of the changed fields only"
    );
    assert!(
        events[0].event.previous.is_none(),
        "only *.updated has previous_attributes"
    );
    // A deletion carries the last state.
    assert_eq!(json(&events[4].event.object)["sku"], "THREE");
    assert_eq!(events[4].event.origin.actor, Actor::System);
    assert_eq!(events[4].event.origin.request, None);

    // Newest first, with the exact total; paging.
    let page = s
        .list_events(
            &o,
            &EventFilter::default(),
            Page {
                limit: 2,
                offset: 1,
            },
        )
        .await
        .unwrap();
    assert_eq!(page.total, 5);
    assert_eq!(
        page.items.iter().map(|e| e.sequence).collect::<Vec<_>>(),
        vec![4, 3]
    );
    // The catch-up cursor: ascending from N+1, `total` counts after N.
    let after = s
        .events_after(&o, &EventFilter::default(), 2, 2)
        .await
        .unwrap();
    assert_eq!(after.total, 3);
    assert_eq!(
        after.items.iter().map(|e| e.sequence).collect::<Vec<_>>(),
        vec![3, 4]
    );
    // Filters: type, object, time.
    let created = EventFilter {
        types: Some(vec![EventType::ProductCreated]),
        ..Default::default()
    };
    assert_eq!(
        s.list_events(&o, &created, Page::default())
            .await
            .unwrap()
            .total,
        3
    );
    let of_p1 = EventFilter {
        object_id: Some(p1.id.to_string()),
        ..Default::default()
    };
    let l = s.list_events(&o, &of_p1, Page::default()).await.unwrap();
    assert_eq!(
        kinds(&l.items),
        vec![
            ("product.updated", p1.id.to_string()),
            ("product.created", p1.id.to_string())
        ]
    );
    let window = EventFilter {
        from: Some(Timestamp::from_millis(2_000)),
        to: Some(Timestamp::from_millis(4_000)),
        ..Default::default()
    };
    let l = s.list_events(&o, &window, Page::default()).await.unwrap();
    assert_eq!(
        kinds(&l.items),
        vec![("product.updated", p1.id.to_string())]
    );
    let none = EventFilter {
        types: Some(vec![]),
        ..Default::default()
    };
    assert_eq!(
        s.list_events(&o, &none, Page::default())
            .await
            .unwrap()
            .total,
        0
    );

    // Read by id, in its organization only.
    let id = &events[3].event.id;
    assert_eq!(
        s.get_event(&o, id).await.unwrap().as_ref(),
        Some(&events[3])
    );
    let other = new_org(s).await;
    assert_eq!(s.get_event(&other, id).await.unwrap(), None);
    assert_eq!(s.get_event(&o, &EventId::generate()).await.unwrap(), None);
    assert_eq!(
        s.list_events(&other, &EventFilter::default(), Page::default())
            .await
            .unwrap()
            .total,
        0
    );
}

pub async fn event_sequences_are_per_organization(s: &dyn Store) {
    let (a, b) = (new_org(s).await, new_org(s).await);
    let t = teller();
    for i in 0..3 {
        for o in [&a, &b] {
            s.insert_product(o, &product("P", &format!("P-{i}"), 1), Timestamp::now(), t)
                .await
                .unwrap();
        }
    }
    for o in [&a, &b] {
        let seqs: Vec<i64> = settled(s, o, 3).await.iter().map(|e| e.sequence).collect();
        assert_eq!(seqs, vec![1, 2, 3], "each organization counts from 1");
    }
}

/// D54: concurrent writers of one organization get one gap-free sequence,
/// and of two changes to one object the later has the larger sequence: each
/// update's `previous_attributes` holds the stock the event before it on
/// that object showed.
pub async fn concurrent_writers_get_one_gap_free_sequence(s: &dyn Store) {
    let o = new_org(s).await;
    let t = teller();
    let shared = s
        .insert_product(&o, &product("Shared", "SHARED", 1), Timestamp::now(), t)
        .await
        .unwrap();
    let writers = (0..8).map(|w| {
        let (o, t, shared) = (&o, &t, &shared.id);
        async move {
            for i in 0..5 {
                s.insert_product(
                    o,
                    &product("P", &format!("W{w}-{i}"), 1),
                    Timestamp::now(),
                    t,
                )
                .await
                .unwrap();
                let bump = ProductPatch {
                    stock: Some(100 + w * 10 + i),
                    ..Default::default()
                };
                s.update_product(o, shared, &bump, Timestamp::now(), t)
                    .await
                    .unwrap();
            }
        }
    });
    futures_util::future::join_all(writers).await;
    let events = settled(s, &o, 1 + 8 * 5 * 2).await;
    let seqs: Vec<i64> = events.iter().map(|e| e.sequence).collect();
    assert_eq!(seqs, (1..=81).collect::<Vec<_>>());
    let mut stock = json(&events[0].event.object)["stock"].clone();
    for e in events
        .iter()
        .filter(|e| e.event.object_id == shared.id.as_str())
        .skip(1)
    {
        let previous = json(e.event.previous.as_deref().unwrap());
        assert_eq!(
            previous["stock"], stock,
            "sequence {} follows the change before it",
            e.sequence
        );
        stock = json(&e.event.object)["stock"].clone();
    }
    let last = s.get_product(&o, &shared.id).await.unwrap().unwrap();
    assert_eq!(
        stock,
        serde_json::json!(last.stock),
        "the last event shows the product as it is"
    );
}

pub async fn events_are_purged_after_the_retention(s: &dyn Store) {
    let o = new_org(s).await;
    let t = teller();
    for (i, at) in [1_000, 2_000, 3_000].into_iter().enumerate() {
        s.insert_product(
            &o,
            &product("P", &format!("R-{i}"), 1),
            Timestamp::from_millis(at),
            t,
        )
        .await
        .unwrap();
    }
    settled(s, &o, 3).await;
    assert_eq!(
        s.purge_events(Timestamp::from_millis(2_500), 1)
            .await
            .unwrap(),
        1
    );
    assert_eq!(
        s.purge_events(Timestamp::from_millis(2_500), 10)
            .await
            .unwrap(),
        1
    );
    assert_eq!(
        s.purge_events(Timestamp::from_millis(2_500), 10)
            .await
            .unwrap(),
        0
    );
    let left = s
        .events_after(&o, &EventFilter::default(), 0, 10)
        .await
        .unwrap();
    // D14 (continued): the oldest kept entry's sequence shows the gap.
    assert_eq!(
        left.items.iter().map(|e| e.sequence).collect::<Vec<_>>(),
        vec![3]
    );
}

/// D54: creating a user tells `user.created`, then `user.invited` when it
/// is sent one; re-sending the invitation tells `user.invited` again.
pub async fn user_creation_and_invitations_are_told(s: &dyn Store) {
    let o = new_org(s).await;
    let t = teller();
    let plain = s
        .insert_user(
            &o,
            &user("op@example.com", Role::Admin, UserStatus::Active, 1_000),
            t,
        )
        .await
        .unwrap();
    let invited = s
        .insert_user_with_link(
            &o,
            &user(
                "new@example.com",
                Role::Viewer,
                UserStatus::PendingInvite,
                2_000,
            ),
            Some(&link(
                1,
                Timestamp::from_millis(9_000_000_000_000),
                "new@example.com",
            )),
            t,
        )
        .await
        .unwrap();
    s.reissue_invitation(
        &o,
        &invited.id,
        &link(
            2,
            Timestamp::from_millis(9_000_000_000_000),
            "new@example.com",
        ),
        t,
    )
    .await
    .unwrap();
    // A refused re-invitation (an active user) tells nothing.
    assert!(
        s.reissue_invitation(
            &o,
            &plain.id,
            &link(3, Timestamp::now(), "op@example.com"),
            t
        )
        .await
        .is_err()
    );
    let events = settled(s, &o, 4).await;
    assert_eq!(
        kinds(&events),
        vec![
            ("user.created", plain.id.to_string()),
            ("user.created", invited.id.to_string()),
            ("user.invited", invited.id.to_string()),
            ("user.invited", invited.id.to_string()),
        ]
    );
    let object = json(&events[1].event.object);
    assert_eq!(object["email"], "new@example.com");
    assert_eq!(object["status"], "pending_invite");
    assert_eq!(events[1].event.created_at, invited.created_at);
}
