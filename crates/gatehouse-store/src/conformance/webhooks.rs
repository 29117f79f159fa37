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

const FIVE_DAYS: std::time::Duration = std::time::Duration::from_secs(5 * 86_400);

async fn fanned(s: &dyn Store, want: u64) {
    let mut made = 0;
    for _ in 0..400 {
        s.sequence_events().await.unwrap();
        made += s.fan_out(Timestamp::now(), 100).await.unwrap();
        if made >= want {
            assert_eq!(made, want, "each event fanned out once");
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    panic!("only {made} of {want} deliveries were ever made");
}

fn made_at(now: Timestamp, status: u16) -> crate::Made {
    crate::Made {
        started_at: now,
        duration_ms: 12,
        response_status: Some(status),
        error: None,
        excerpt: "ok".into(),
    }
}

/// D55, D44: sequenced events fan out once to the enabled endpoints that
/// want them; claims lease each delivery to one process, hold the
/// per-endpoint limit and `per_object` ordering; a finished attempt is
/// logged and queues the next or ends the delivery; a 410 disables the
/// endpoint, cancels what it had pending and tells it.
pub async fn deliveries_fan_out_lease_and_finish(s: &dyn Store) {
    use gatehouse_domain::webhook::{AttemptError, Next};

    use crate::{AttemptFilter, AttemptStatus};
    let o = new_org(s).await;
    let t = teller();
    let now = Timestamp::now();
    let url = EndpointUrl::parse("https://hooks.example.com/in", &AllowList::default()).unwrap();
    let products = Endpoint::new(
        &url,
        String::new(),
        vec![TypePattern::parse("product.*").unwrap()],
        Ordering::PerObject,
        None,
        now,
    );
    let users = Endpoint::new(
        &url,
        String::new(),
        vec![TypePattern::parse("user.*").unwrap()],
        Ordering::None,
        None,
        now,
    );
    s.insert_endpoint(&o, &products, b"s", t).await.unwrap();
    s.insert_endpoint(&o, &users, b"s", t).await.unwrap();
    let p1 = s
        .insert_product(&o, &product("One", "D-1", 5), Timestamp::now(), t)
        .await
        .unwrap();
    s.insert_product(&o, &product("Two", "D-2", 5), Timestamp::now(), t)
        .await
        .unwrap();
    let patch = ProductPatch {
        stock: Some(9),
        ..Default::default()
    };
    s.update_product(&o, &p1.id, &patch, Timestamp::now(), t)
        .await
        .unwrap();
    // Three product events for one endpoint; nothing for the other.
    fanned(s, 3).await;
    assert_eq!(s.fan_out(Timestamp::now(), 100).await.unwrap(), 0);
    assert_eq!(s.queue_depth().await.unwrap(), 3);

    let now = Timestamp::now();
    let lease = now.plus_seconds(30);
    let first = s.claim_deliveries("n1", now, lease, 10, 10).await.unwrap();
    // per_object: p1's update waits for p1's creation.
    assert_eq!(first.len(), 2, "{first:?}");
    assert!(
        first
            .iter()
            .all(|c| c.attempt == 1 && c.endpoint == products.id)
    );
    assert!(
        s.claim_deliveries("n2", now, lease, 10, 10)
            .await
            .unwrap()
            .is_empty(),
        "leased deliveries are nobody else's"
    );
    // Claimed in sequence order: p1's creation, then p2's.
    let (c1, c2) = (first[0].clone(), first[1].clone());
    assert_ne!(c1.event, c2.event);
    // Another process's finish of a lease it does not hold changes nothing.
    s.finish_attempt("n2", &c1, &made_at(now, 200), Next::Done, FIVE_DAYS, t)
        .await
        .unwrap();
    assert_eq!(s.queue_depth().await.unwrap(), 3);
    s.finish_attempt("n1", &c1, &made_at(now, 200), Next::Done, FIVE_DAYS, t)
        .await
        .unwrap();
    let retry = now.plus_seconds(60);
    s.finish_attempt(
        "n1",
        &c2,
        &made_at(now, 500),
        Next::RetryAt(retry),
        FIVE_DAYS,
        t,
    )
    .await
    .unwrap();
    // p1's update is free now; p2's retry is not due yet.
    let second = s.claim_deliveries("n2", now, lease, 10, 10).await.unwrap();
    assert_eq!(second.len(), 1, "{second:?}");
    assert_ne!(second[0].event, c1.event);
    assert_ne!(second[0].event, c2.event);
    // Given back (shutdown), it is due again at once, the attempt uncounted.
    s.release_deliveries("n2", &[second[0].delivery])
        .await
        .unwrap();
    // Leased for an hour: still in flight when the retry below is due.
    let again = s
        .claim_deliveries("n1", now, now.plus_seconds(3_600), 10, 10)
        .await
        .unwrap();
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].attempt, 1);
    assert_eq!(again[0].attempt_id, second[0].attempt_id);
    // The retry, when due, is attempt 2; the per-endpoint limit holds.
    let later = retry.plus_seconds(1);
    assert!(
        s.claim_deliveries("n2", later, later.plus_seconds(30), 1, 10)
            .await
            .unwrap()
            .is_empty(),
        "one in flight already (the limit is 1)"
    );
    let retried = s
        .claim_deliveries("n2", later, later.plus_seconds(30), 2, 10)
        .await
        .unwrap();
    assert_eq!(retried.len(), 1);
    assert_eq!(
        (retried[0].attempt, retried[0].event.clone()),
        (2, c2.event.clone())
    );

    // The log, newest first: the queued attempt 2 of p2, its failed first,
    // the success.
    let log = s
        .list_attempts(&o, &products.id, &AttemptFilter::default(), Page::default())
        .await
        .unwrap();
    assert_eq!(log.total, 4, "{log:?}");
    for (st, n) in [
        (AttemptStatus::Succeeded, 1),
        (AttemptStatus::Failed, 1),
        (AttemptStatus::Pending, 2),
    ] {
        let f = AttemptFilter {
            status: Some(st),
            ..Default::default()
        };
        let got = s
            .list_attempts(&o, &products.id, &f, Page::default())
            .await
            .unwrap();
        assert_eq!(got.total, n, "{st:?}: {got:?}");
    }
    let of_c2 = s
        .list_attempts(
            &o,
            &products.id,
            &AttemptFilter {
                event: Some(c2.event.clone()),
                ..Default::default()
            },
            Page::default(),
        )
        .await
        .unwrap();
    assert_eq!(
        of_c2.items.iter().map(|a| a.attempt).collect::<Vec<_>>(),
        [2, 1]
    );
    assert_eq!(of_c2.items[1].response_status, Some(500));
    assert_eq!(of_c2.items[1].next_attempt_at, Some(retry));
    assert_eq!(of_c2.items[1].status(), "failed");

    // A 410 disables the endpoint (`gone`), cancels what it had pending
    // and tells `webhook_endpoint.disabled`.
    s.finish_attempt(
        "n2",
        &retried[0],
        &made_at(later, 410),
        Next::Gone,
        FIVE_DAYS,
        t,
    )
    .await
    .unwrap();
    let gone = s.get_endpoint(&o, &products.id).await.unwrap().unwrap();
    assert_eq!(
        gone.disabled,
        Some(gatehouse_domain::webhook::DisabledReason::Gone)
    );
    assert_eq!(
        s.queue_depth().await.unwrap(),
        0,
        "p1's update was cancelled"
    );
    let cancelled = s
        .list_attempts(
            &o,
            &products.id,
            &AttemptFilter {
                event: Some(again[0].event.clone()),
                ..Default::default()
            },
            Page::default(),
        )
        .await
        .unwrap();
    assert_eq!(cancelled.items[0].error, Some(AttemptError::Cancelled));
    // Nothing is made for a disabled endpoint.
    s.insert_product(&o, &product("Three", "D-3", 5), Timestamp::now(), t)
        .await
        .unwrap();
    s.sequence_events().await.unwrap();
    // The disabling and the new product: neither reaches the disabled
    // endpoint; the users' endpoint wants neither.
    for _ in 0..50 {
        assert_eq!(s.fan_out(Timestamp::now(), 100).await.unwrap(), 0);
        s.sequence_events().await.unwrap();
    }
    let kinds = told(s, &o, 2 + 3 + 1 + 1).await;
    assert_eq!(kinds[5].0, "webhook_endpoint.disabled");
    assert_eq!(kinds[5].1, products.id.to_string());
    assert!(
        s.list_attempts(&o, &users.id, &AttemptFilter::default(), Page::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
}

/// D55: an endpoint with a long backlog (a slow or dead receiver) never
/// keeps another endpoint's deliveries from being claimed.
pub async fn a_backlogged_endpoint_does_not_starve_another(s: &dyn Store) {
    let o = new_org(s).await;
    let t = teller();
    let url = EndpointUrl::parse("https://hooks.example.com/in", &AllowList::default()).unwrap();
    let make = |pattern: &str| {
        Endpoint::new(
            &url,
            String::new(),
            vec![TypePattern::parse(pattern).unwrap()],
            Ordering::None,
            None,
            Timestamp::now(),
        )
    };
    let (busy, quiet) = (make("product.*"), make("user.*"));
    s.insert_endpoint(&o, &busy, b"s", t).await.unwrap();
    s.insert_endpoint(&o, &quiet, b"s", t).await.unwrap();
    for i in 0..30 {
        s.insert_product(
            &o,
            &product(&format!("P{i}"), &format!("BUSY-{i}"), 1),
            Timestamp::now(),
            t,
        )
        .await
        .unwrap();
    }
    s.insert_user(
        &o,
        &user(
            "late@example.com",
            Role::Viewer,
            UserStatus::Active,
            Timestamp::now().millis(),
        ),
        t,
    )
    .await
    .unwrap();
    fanned(s, 31).await;
    let now = Timestamp::now();
    let got = s
        .claim_deliveries("n1", now, now.plus_seconds(30), 2, 4)
        .await
        .unwrap();
    let quiet_ones = got.iter().filter(|c| c.endpoint == quiet.id).count();
    let busy_ones = got.iter().filter(|c| c.endpoint == busy.id).count();
    assert_eq!((busy_ones, quiet_ones), (2, 1), "{got:?}");
}

/// D43 (continued): at a worker's start, leases no running process can hold
/// are given back. `one_process` says whether one serving process owns the
/// backend (SQLite, D44): then a lease left by a process killed mid-attempt
/// is due again at once; where nodes share it (PostgreSQL) it stays until it
/// runs out, since another node may be making the attempt. Not in
/// [`store_conformance_tests`](crate::store_conformance_tests): each backend
/// calls it with its answer.
pub async fn leases_left_behind_at_start(s: &dyn Store, one_process: bool) {
    let o = new_org(s).await;
    let t = teller();
    let now = Timestamp::now();
    let url = EndpointUrl::parse("https://hooks.example.com/in", &AllowList::default()).unwrap();
    let e = Endpoint::new(
        &url,
        String::new(),
        vec![TypePattern::parse("product.*").unwrap()],
        Ordering::None,
        None,
        now,
    );
    s.insert_endpoint(&o, &e, b"s", t).await.unwrap();
    s.insert_product(&o, &product("Left", "L-1", 5), Timestamp::now(), t)
        .await
        .unwrap();
    fanned(s, 1).await;
    let now = Timestamp::now();
    let lease = now.plus_seconds(60);
    // The process that leased it is killed mid-attempt.
    assert_eq!(
        s.claim_deliveries("dead", now, lease, 10, 10)
            .await
            .unwrap()
            .len(),
        1
    );
    let released = s.release_orphaned_leases().await.unwrap();
    let again = s
        .claim_deliveries("next", now, lease, 10, 10)
        .await
        .unwrap();
    if one_process {
        assert_eq!(released, 1, "the dead process's lease is given back");
        assert_eq!(again.len(), 1, "and the delivery is due again at once");
        assert_eq!(again[0].attempt, 1, "uncounted");
    } else {
        assert_eq!(released, 0, "another node's lease may be live");
        assert!(again.is_empty(), "it stays leased until it runs out");
    }
}
