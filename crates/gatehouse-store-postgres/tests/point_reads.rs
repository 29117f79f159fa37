//! Point reads arriving together share one statement (`batch.rs`, issue 16
//! target 3), and sharing changes no answer: each read gets its own row, in
//! its own organization only (D2), and a corrupt row fails only its readers.

use std::time::{Duration, Instant};

use gatehouse_domain::{ClientId, Name, NewProduct, OrgId, Role, Sku, Timestamp, UserId};
use gatehouse_store::conformance::PlantRows;
use gatehouse_store::prelude::*;
use gatehouse_store::{NewClient, StoreError};
use gatehouse_store_postgres::testing::{StoppableCluster, fresh_store};
use gatehouse_store_postgres::{PgOptions, PgStore};

mod common;

async fn new_org(s: &PgStore) -> OrgId {
    let o = common::org();
    s.create_org(&o).await.unwrap();
    o.id
}

async fn new_user(s: &PgStore, org: &OrgId, n: usize) -> UserId {
    let u = common::user(&format!("u{n}@example.com"), Role::Viewer);
    s.insert_user(org, &u, gatehouse_store::conformance::teller())
        .await
        .unwrap()
        .id
}

// One thread: every read of a `join_all` is queued before the first batch's
// task runs, so the statement counts below are exact. On several threads the
// test thread could be descheduled between two reads' first polls, the first
// batch could finish meanwhile, and the count would be a matter of timing.
#[tokio::test(flavor = "current_thread")]
async fn reads_arriving_together_share_statements_and_keep_their_own_answers() {
    let Some(s) = fresh_store().await else { return };
    // A read stranded in the queue would hang: fail instead.
    tokio::time::timeout(std::time::Duration::from_secs(60), reads(s))
        .await
        .expect("every batched read was answered within a minute");
}

async fn reads(s: PgStore) {
    let a = new_org(&s).await;
    let b = new_org(&s).await;
    let mut users_a = Vec::new();
    for n in 0..20 {
        users_a.push(new_user(&s, &a, n).await);
    }
    let user_b = new_user(&s, &b, 99).await;
    let product = s
        .insert_product(
            &a,
            &NewProduct {
                name: Name::parse("Widget").unwrap(),
                sku: Sku::parse("W-1").unwrap(),
                price: 100,
                stock: 3,
                discontinued: false,
            },
            Timestamp::now(),
            gatehouse_store::conformance::teller(),
        )
        .await
        .unwrap();
    let client = s
        .insert_client(
            &a,
            &NewClient {
                redirect_uris: vec![],
                ..common::client()
            },
            gatehouse_store::conformance::teller(),
        )
        .await
        .unwrap();

    // 20 users read under their organization, each twice; the same ids
    // under the other organization; B's user under A; an unknown id.
    let before = s.point_read_statements();
    let mut reads = Vec::new();
    for id in users_a.iter().chain(users_a.iter()) {
        reads.push((a.clone(), id.clone(), true));
        reads.push((b.clone(), id.clone(), false));
    }
    reads.push((a.clone(), user_b.clone(), false));
    reads.push((b.clone(), user_b.clone(), true));
    reads.push((a.clone(), UserId::generate(), false));
    let answers =
        futures_util::future::join_all(reads.iter().map(|(o, id, _)| s.get_user(o, id))).await;
    for ((o, id, there), got) in reads.iter().zip(answers) {
        let got = got.unwrap();
        assert_eq!(
            got.as_ref().map(|u| &u.id),
            there.then_some(id),
            "user {id} read in organization {o}"
        );
    }
    let statements = s.point_read_statements() - before;
    assert!(
        statements == 2,
        "{} reads sent {statements} statements",
        reads.len()
    );

    // Products and clients, batched the same way: the right row or none.
    let unknown = ClientId::generate();
    let (p_a, p_b, c, c_none) = tokio::join!(
        s.get_product(&a, &product.id),
        s.get_product(&b, &product.id),
        s.resolve_client(&client.id),
        s.resolve_client(&unknown),
    );
    assert_eq!(p_a.unwrap().unwrap().id, product.id);
    assert!(
        p_b.unwrap().is_none(),
        "a product is not read through another organization"
    );
    let c = c.unwrap().unwrap();
    assert_eq!((c.id, c.org), (client.id, a.clone()));
    assert!(c_none.unwrap().is_none());

    // A corrupt row fails its own readers and nobody else in its batch: the
    // first read starts a statement alone, the other 19, the corrupt one in
    // their middle, share the next.
    let bad = &users_a[10];
    s.plant(&format!(
        "UPDATE users SET role = 'owner' WHERE id = '{bad}'"
    ))
    .await;
    let before = s.point_read_statements();
    let answers = futures_util::future::join_all(users_a.iter().map(|id| s.get_user(&a, id))).await;
    assert_eq!(
        s.point_read_statements() - before,
        2,
        "the corrupt row was read in a statement shared with others"
    );
    for (id, got) in users_a.iter().zip(answers) {
        if id == bad {
            match got {
                Err(StoreError::Internal(why)) => {
                    assert!(
                        why.contains("users") && why.contains("role") && why.contains(bad.as_str()),
                        "{why}"
                    )
                }
                other => panic!("the corrupt row read as {other:?}"),
            }
        } else {
            assert_eq!(got.unwrap().unwrap().id, *id);
        }
    }
}

/// D6 during an outage: reads queued behind a statement that found no
/// connection for a whole acquire timeout fail with it (503), rather than
/// wait for a connection in turn.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn reads_queued_in_an_outage_fail_with_the_statement_ahead_of_them() {
    let Some(mut cluster) = StoppableCluster::start() else {
        return;
    };
    let url = cluster.create_database("outage").await;
    let wait = Duration::from_secs(1);
    let s = PgStore::connect_with(
        &url,
        PgOptions {
            max_connections: 1,
            acquire_timeout: wait,
        },
    )
    .await
    .unwrap();
    let o = new_org(&s).await;
    let id = new_user(&s, &o, 1).await;
    cluster.stop_fast();
    // The one pooled connection is dead: the first read finds that out
    // (503) and the pool drops it; from then on no connection can be had.
    assert!(matches!(
        s.get_user(&o, &id).await,
        Err(StoreError::Unavailable(_))
    ));

    let began = Instant::now();
    let first = tokio::spawn({
        let (s, o, id) = (s.clone(), o.clone(), id.clone());
        async move { s.get_user(&o, &id).await }
    });
    // While that statement waits for a connection, more reads queue.
    tokio::time::sleep(wait / 4).await;
    let queued = futures_util::future::join_all((0..10).map(|_| async {
        let answer = s.get_user(&o, &id).await;
        (answer, began.elapsed())
    }))
    .await;
    assert!(matches!(
        first.await.unwrap(),
        Err(StoreError::Unavailable(_))
    ));
    for (answer, after) in queued {
        assert!(
            matches!(answer, Err(StoreError::Unavailable(_))),
            "a queued read during the outage answered {answer:?}"
        );
        // One acquire timeout (the statement ahead), not two (its own too).
        assert!(
            after < wait * 2,
            "a queued read was answered {after:?} after the outage's first read, \
             the acquire timeout being {wait:?}"
        );
    }
}

/// Waits (at most 20 s) until `f(store's orgs_version)` holds.
async fn version_until(s: &PgStore, what: &str, f: impl Fn(Option<u64>) -> bool) -> Option<u64> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let v = s.orgs_version();
        if f(v) {
            return v;
        }
        assert!(Instant::now() < deadline, "{what}: still {v:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Issue 32, D40: a node keeps organizations in memory only while its
/// listener for their changes is live. When the database goes away the
/// node offers no version (every read goes to the database, so a change
/// missed meanwhile leaves nothing stale); when it is back, a new listener
/// offers a version again, and a change moves it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn organizations_are_kept_in_memory_only_while_their_changes_are_heard() {
    let Some(mut cluster) = StoppableCluster::start() else {
        return;
    };
    let url = cluster.create_database("org_changes").await;
    let s = PgStore::connect(&url).await.unwrap();
    let o = new_org(&s).await;
    version_until(&s, "listening", |v| v.is_some()).await;

    cluster.stop_fast();
    version_until(&s, "the database went away", |v| v.is_none()).await;

    cluster.start_again();
    let live = version_until(&s, "listening again", |v| v.is_some()).await;
    // The pool's connection from before the outage fails its first query
    // (503) and is dropped, as every pooled connection does.
    let before = match s.get_org(&o).await {
        Err(StoreError::Unavailable(_)) => s.get_org(&o).await,
        other => other,
    }
    .unwrap()
    .unwrap();
    let after = gatehouse_domain::Organization {
        name: "Heard".into(),
        ..before.clone()
    };
    let t = gatehouse_store::conformance::teller();
    let now = Timestamp::now();
    let fx = gatehouse_domain::effect::of_org_change(t, &before, after, now);
    s.write_org(&o, &fx, now, t).await.unwrap();
    version_until(&s, "the change heard", |v| v.is_some() && v != live).await;
}
