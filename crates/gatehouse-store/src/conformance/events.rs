//! Events (D54): written with their change, sequenced per organization in
//! commit order without gaps, listed, filtered, caught up and purged.

use gatehouse_domain::event::{Actor, Event, EventType};
use gatehouse_domain::{EventId, Page, ProductPatch};

use super::*;
use crate::EventFilter;

/// Sequences until `org` shows `want` events (a backend that sequences
/// after commit may need a few rounds while other transactions of the
/// cluster run), then answers them oldest first.
pub(crate) async fn settled(s: &dyn Store, org: &OrgId, want: u64) -> Vec<Event> {
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

pub(crate) fn kinds(events: &[Event]) -> Vec<(&'static str, String)> {
    events
        .iter()
        .map(|e| (e.event.kind.as_str(), e.event.object_id.clone()))
        .collect()
}

pub(crate) fn json(s: &str) -> serde_json::Value {
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
    let dup = s.insert_product(&o, &product("Dup", "one", 1), at, t).await;
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
    // The /v2 cursor (D32 continued): older than a sequence, newest first.
    let older = EventFilter {
        before_sequence: Some(3),
        ..Default::default()
    };
    let l = s.list_events(&o, &older, Page::default()).await.unwrap();
    assert_eq!(
        l.items.iter().map(|e| e.sequence).collect::<Vec<_>>(),
        vec![2, 1]
    );
    assert_eq!(l.total, 2);
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
    // Purged to the last event, the organization's next change still gets
    // the next sequence: none is ever given twice.
    assert_eq!(
        s.purge_events(Timestamp::from_millis(9_000), 10)
            .await
            .unwrap(),
        1
    );
    s.insert_product(
        &o,
        &product("P", "R-9", 1),
        Timestamp::from_millis(9_500),
        t,
    )
    .await
    .unwrap();
    let mut next = Vec::new();
    for _ in 0..400 {
        s.sequence_events().await.unwrap();
        next = s
            .events_after(&o, &EventFilter::default(), 0, 10)
            .await
            .unwrap()
            .items;
        if !next.is_empty() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert_eq!(next.iter().map(|e| e.sequence).collect::<Vec<_>>(), vec![4]);
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

/// An API key of `org` owned by `owner`, with `scopes`, made at `at`.
fn owned_key(org: &OrgId, owner: &UserId, scopes: &str, at: i64) -> ApiKey {
    ApiKey {
        id: ApiKeyId::generate(),
        org: org.clone(),
        name: "k".into(),
        scopes: ScopeSet::parse(scopes).unwrap(),
        created_at: Timestamp::from_millis(at),
        prefix: String::new(),
        owner: Some(owner.clone()),
        expires_at: None,
        last_used_at: None,
        revoked_at: None,
    }
}

/// D54's cascades: deactivating a person tells `api_key.revoked` for each
/// key revoked, `application.updated` for each application suspended, then
/// `user.updated`; demoting tells the applications narrowed, then the keys
/// revoked, then `user.updated`; deleting tells the keys revoked, the
/// applications moved, then `user.deleted`. A PATCH that changes nothing,
/// and a refused change, tell nothing.
pub async fn user_changes_tell_their_cascades_first(s: &dyn Store) {
    let o = new_org(s).await;
    let t = teller();
    let admin = |email: &str, at| user(email, Role::Admin, UserStatus::Active, at);
    let keeper = s
        .insert_user(&o, &admin("keep@example.com", 1_000), t)
        .await
        .unwrap();
    let ann = s
        .insert_user(&o, &admin("ann@example.com", 2_000), t)
        .await
        .unwrap();
    let bob = s
        .insert_user(&o, &admin("bob@example.com", 3_000), t)
        .await
        .unwrap();
    let mut apps = Vec::new();
    for (owner, scopes) in [(&ann, "users:read"), (&bob, "users:write products:read")] {
        let c = s
            .insert_client(
                &o,
                &NewClient {
                    scopes: ScopeSet::parse(scopes).unwrap(),
                    ..client(Some(owner.id.clone()))
                },
                t,
            )
            .await
            .unwrap();
        apps.push(c);
    }
    let (ann_key, bob_key, bob_read_key) = (
        owned_key(&o, &ann.id, "users:read", 4_000),
        owned_key(&o, &bob.id, "users:write", 5_000),
        owned_key(&o, &bob.id, "products:read", 6_000),
    );
    for (k, d) in [(&ann_key, 91u8), (&bob_key, 92), (&bob_read_key, 93)] {
        s.insert_api_key(&o, k, &[d; 32], t).await.unwrap();
    }
    let before = settled(s, &o, 8).await;
    assert_eq!(
        before
            .iter()
            .map(|e| e.event.kind.as_str())
            .collect::<Vec<_>>(),
        vec![
            "user.created",
            "user.created",
            "user.created",
            "application.created",
            "application.created",
            "api_key.created",
            "api_key.created",
            "api_key.created",
        ]
    );

    // Nothing changes, nothing is refused-and-committed: no event.
    let same = UserPatch {
        role: Some(Role::Admin),
        ..Default::default()
    };
    let unchanged = s
        .update_user(&o, &ann.id, &same, Timestamp::now(), t)
        .await
        .unwrap();
    assert!(!unchanged.changed);

    // Deactivating Ann: her key, her application, then Ann.
    let off = UserPatch {
        status: Some(UserStatus::Inactive),
        ..Default::default()
    };
    s.update_user(&o, &ann.id, &off, Timestamp::now(), t)
        .await
        .unwrap();
    // Demoting Bob to viewer: his application loses `users:write`, his
    // `users:write` key is revoked (the `products:read` one stays), then Bob.
    let down = UserPatch {
        role: Some(Role::Viewer),
        ..Default::default()
    };
    s.update_user(&o, &bob.id, &down, Timestamp::now(), t)
        .await
        .unwrap();
    // Deleting Bob, his application moved to the keeper: his remaining key,
    // the application, then Bob.
    s.delete_user_at(&o, &bob.id, Some(&keeper.id), Timestamp::now(), t)
        .await
        .unwrap();
    // Deleting the keeper without a transfer is refused (they own an
    // application now): nothing committed, nothing told.
    assert!(
        s.delete_user_at(&o, &keeper.id, None, Timestamp::now(), t)
            .await
            .is_err()
    );
    let all = settled(s, &o, 8 + 3 + 3 + 3).await;
    let told = kinds(&all[8..]);
    assert_eq!(
        told,
        vec![
            ("api_key.revoked", ann_key.id.to_string()),
            ("application.updated", apps[0].id.to_string()),
            ("user.updated", ann.id.to_string()),
            ("application.updated", apps[1].id.to_string()),
            ("api_key.revoked", bob_key.id.to_string()),
            ("user.updated", bob.id.to_string()),
            ("api_key.revoked", bob_read_key.id.to_string()),
            ("application.updated", apps[1].id.to_string()),
            ("user.deleted", bob.id.to_string()),
        ]
    );
    let e = &all[8..];
    // What changed, in `previous_attributes` (the old values).
    let prev = |i: usize| {
        json(
            e[i].event
                .previous
                .as_deref()
                .expect("an update's previous"),
        )
    };
    assert_eq!(
        json(&e[1].event.object)["suspended_reason"],
        "owner_inactive"
    );
    assert_eq!(prev(1)["suspended_reason"], serde_json::Value::Null);
    assert_eq!(json(&e[2].event.object)["status"], "inactive");
    assert_eq!(prev(2)["status"], "active");
    let narrowed = ScopeSet::parse("products:read").unwrap().bits();
    assert_eq!(json(&e[3].event.object)["scopes"], narrowed);
    assert_eq!(json(&e[5].event.object)["role"], "viewer");
    assert_eq!(prev(5)["role"], "admin");
    assert!(json(&e[6].event.object)["revoked_at"].is_number());
    assert_eq!(json(&e[7].event.object)["owner_id"], keeper.id.as_str());
    assert_eq!(prev(7)["owner_id"], bob.id.as_str());
    assert_eq!(json(&e[8].event.object)["email"], "bob@example.com");
    // One transaction, one instant: the cascade's events share the user's.
    assert_eq!(e[0].event.created_at, e[2].event.created_at);
    assert!(e.iter().all(|e| e.event.origin.actor == Actor::System));
}

/// D54: applications and keys tell their own changes: an update that
/// changes something, a rotation (never the secret), a deletion with its
/// last state; a key's revocation once (revoking twice keeps the first).
pub async fn applications_and_keys_tell_their_changes(s: &dyn Store) {
    let o = new_org(s).await;
    let t = teller();
    let c = s.insert_client(&o, &client(None), t).await.unwrap();
    let same = ClientChanges {
        name: Some(c.name.clone()),
        ..Default::default()
    };
    s.update_client(&o, &c.id, &same, Timestamp::now(), t)
        .await
        .unwrap();
    let renamed = ClientChanges {
        name: Some("renamed".into()),
        ..Default::default()
    };
    s.update_client(&o, &c.id, &renamed, Timestamp::now(), t)
        .await
        .unwrap();
    s.rotate_client_secret(&o, &c.id, &[9; 32], None, t)
        .await
        .unwrap();
    s.delete_client(&o, &c.id, Timestamp::now(), t)
        .await
        .unwrap();
    let u = s
        .insert_user(
            &o,
            &user("k@example.com", Role::Admin, UserStatus::Active, 1_000),
            t,
        )
        .await
        .unwrap();
    let k = owned_key(&o, &u.id, "users:read", 2_000);
    s.insert_api_key(&o, &k, &[77; 32], t).await.unwrap();
    s.revoke_api_key(&o, &k.id, Timestamp::from_millis(3_000), t)
        .await
        .unwrap();
    s.revoke_api_key(&o, &k.id, Timestamp::from_millis(4_000), t)
        .await
        .unwrap();
    let e = settled(s, &o, 7).await;
    assert_eq!(
        kinds(&e),
        vec![
            ("application.created", c.id.to_string()),
            ("application.updated", c.id.to_string()),
            ("application.secret_rotated", c.id.to_string()),
            ("application.deleted", c.id.to_string()),
            ("user.created", u.id.to_string()),
            ("api_key.created", k.id.to_string()),
            ("api_key.revoked", k.id.to_string()),
        ]
    );
    assert_eq!(
        json(&e[1].event.previous.clone().unwrap()),
        serde_json::json!({"name": "app"})
    );
    assert_eq!(json(&e[3].event.object)["name"], "renamed");
    assert_eq!(e[6].event.created_at, Timestamp::from_millis(3_000));
    for ev in &e {
        assert!(
            !ev.event.object.contains("secret_hash"),
            "{}",
            ev.event.object
        );
    }
}

/// D54: forgetting a consent tells `consent.revoked` with the consent as
/// it was (forgetting one that is gone tells nothing); revoking a live
/// chain for reuse tells `refresh_token.reuse_detected` once (revoking it
/// again, or plainly, tells nothing).
pub async fn consents_and_reuse_are_told(s: &dyn Store) {
    let o = new_org(s).await;
    let t = teller();
    let now = Timestamp::from_millis(Timestamp::now().millis());
    let u = s
        .insert_user(
            &o,
            &user("c@example.com", Role::Viewer, UserStatus::Active, 1),
            t,
        )
        .await
        .unwrap();
    let c = s.insert_client(&o, &client(None), t).await.unwrap();
    let sess = session(&o, &u.id, now, now.plus_seconds(3600));
    s.create_session(&o, &[60; 32], &sess, &[]).await.unwrap();
    let sid = sess.id.to_string();
    let code = AuthCode {
        auth_time: Some(now),
        sid: Some(sid.clone()),
        ..auth_code(61, &o, &c.id, &u.id, now)
    };
    s.insert_auth_code(&o, &code).await.unwrap();
    let mut ch = chain_for(&o, &c.id, &u.id, now, "reused");
    ch.sid = Some(sid.clone());
    s.redeem_auth_code(&[61; 32], now, &ch, &rt(62, "reused", now))
        .await
        .unwrap();
    let scopes = ScopeSet::parse("users:read").unwrap();
    s.remember_consent(&o, &u.id, &c.id, scopes, now)
        .await
        .unwrap();

    let until = now.plus_seconds(3660);
    let code = gatehouse_domain::event::ReuseTrigger::AuthorizationCode;
    s.revoke_reused_chain(&o, &ch.id, now, until, code, t)
        .await
        .unwrap();
    s.revoke_reused_chain(&o, &ch.id, now, until, code, t)
        .await
        .unwrap();
    s.revoke_chain(&o, &ch.id, now, until).await.unwrap();
    assert!(s.forget_consent(&o, &u.id, &c.id, t).await.unwrap());
    assert!(!s.forget_consent(&o, &u.id, &c.id, t).await.unwrap());

    let e = settled(s, &o, 4).await;
    assert_eq!(
        kinds(&e[2..]),
        vec![
            ("refresh_token.reuse_detected", u.id.to_string()),
            ("consent.revoked", u.id.to_string()),
        ]
    );
    assert_eq!(
        json(&e[2].event.object),
        serde_json::json!({
            "user_id": u.id.as_str(),
            "client_id": c.id.as_str(),
            "sid": sid.as_str(),
            "trigger": "authorization_code",
        })
    );
    let consent = json(&e[3].event.object);
    assert_eq!(consent["id"], c.id.as_str());
    assert_eq!(consent["user_id"], u.id.as_str());
    assert_eq!(consent["scopes"], scopes.bits());
}

/// A stored event whose object or `previous_attributes` is not a JSON
/// object is a corrupt row: reading it is an internal error naming the
/// table, the column and the event, never an event shown with `{}`.
pub async fn corrupt_events_are_internal_errors<S: PlantRows>(s: &S) {
    let o = new_org(s).await;
    let t = teller();
    let p = s
        .insert_product(&o, &product("P", "C-1", 1), Timestamp::now(), t)
        .await
        .unwrap();
    let patch = ProductPatch {
        stock: Some(2),
        ..Default::default()
    };
    s.update_product(&o, &p.id, &patch, Timestamp::now(), t)
        .await
        .unwrap();
    let events = settled(s, &o, 2).await;
    let (created, updated) = (events[0].event.id.clone(), events[1].event.id.clone());
    s.plant(&format!(
        "UPDATE events SET object = 'not json' WHERE id = '{created}'"
    ))
    .await;
    s.plant(&format!(
        "UPDATE events SET previous = '[1]' WHERE id = '{updated}'"
    ))
    .await;
    assert_corrupt(
        s.get_event(&o, &created).await,
        "events",
        "object",
        created.as_str(),
    );
    assert_corrupt(
        s.get_event(&o, &updated).await,
        "events",
        "previous",
        updated.as_str(),
    );
    assert_corrupt(
        s.events_after(&o, &EventFilter::default(), 0, 10).await,
        "events",
        "object",
        created.as_str(),
    );
}
