//! What SQLite's single writer gives for free and PostgreSQL must earn with
//! locks and conditional updates: races between nodes (D13, D24, D26, D30,
//! D41, D44). Each test runs the racing calls truly concurrently on one pool.

use std::collections::HashSet;

use gatehouse_domain::{
    ChainId, DomainError, OrgId, Page, Role, ScopeSet, Timestamp, UserPatch, UserStatus,
};
use gatehouse_store::prelude::*;
use gatehouse_store::{
    AuthCode, NewLink, OutboundEmail, Redeemed, RefreshChain, RefreshToken, RevocationKind,
    Rotated, StoreError, UserFilter,
};
use gatehouse_store_postgres::PgStore;
use gatehouse_store_postgres::testing::{fresh_database_url, fresh_store};

mod common;
use common::{client, org, user};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn last_admin_survives_concurrent_demotions() {
    let Some(s) = fresh_store().await else { return };
    for round in 0..10 {
        let o = org();
        s.create_org(&o).await.unwrap();
        let a = s
            .insert_user(
                &o.id,
                &user(&format!("a{round}@example.com"), Role::Admin),
                gatehouse_store::conformance::teller(),
            )
            .await
            .unwrap();
        let b = s
            .insert_user(
                &o.id,
                &user(&format!("b{round}@example.com"), Role::Admin),
                gatehouse_store::conformance::teller(),
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
        // One demotion, one deactivation (or deletion), at the same time.
        let (s1, s2) = (s.clone(), s.clone());
        let (o1, o2) = (o.id.clone(), o.id.clone());
        let t1 = tokio::spawn(async move {
            s1.update_user(
                &o1,
                &a.id,
                &demote,
                Timestamp::now(),
                gatehouse_store::conformance::teller(),
            )
            .await
        });
        let t2 = tokio::spawn(async move {
            if round % 2 == 0 {
                s2.update_user(
                    &o2,
                    &b.id,
                    &off,
                    Timestamp::now(),
                    gatehouse_store::conformance::teller(),
                )
                .await
                .map(|_| ())
            } else {
                s2.delete_user_at(
                    &o2,
                    &b.id,
                    None,
                    gatehouse_domain::Timestamp::now(),
                    gatehouse_store::conformance::teller(),
                )
                .await
            }
        });
        let (r1, r2) = (t1.await.unwrap(), t2.await.unwrap());
        let won = [r1.is_ok(), r2.is_ok()];
        assert_eq!(
            won.iter().filter(|w| **w).count(),
            1,
            "round {round}: {won:?}"
        );
        for r in [r1.err(), r2.err()].into_iter().flatten() {
            assert!(
                matches!(r, StoreError::Rule(DomainError::LastAdmin)),
                "{r:?}"
            );
        }
        let admins = s
            .list_users(
                &o.id,
                &UserFilter {
                    role: Some(Role::Admin),
                    status: Some(UserStatus::Active),
                },
                Page::default(),
            )
            .await
            .unwrap();
        assert_eq!(admins.total, 1, "round {round}");
        assert_eq!(admins.items.len(), 1, "round {round}");
    }
}

async fn chain_with_token(s: &PgStore, chain: &str, byte: u8) -> OrgId {
    let o = org();
    s.create_org(&o).await.unwrap();
    let u = s
        .insert_user(
            &o.id,
            &user(&format!("{chain}@example.com"), Role::Editor),
            gatehouse_store::conformance::teller(),
        )
        .await
        .unwrap();
    let c = s
        .insert_client(&o.id, &client(), gatehouse_store::conformance::teller())
        .await
        .unwrap();
    let now = Timestamp::now();
    let code = AuthCode {
        authn: None,
        digest: [byte; 32],
        org: o.id.clone(),
        client: c.id.clone(),
        user: u.id.clone(),
        redirect_uri: "https://app.example.com/cb".into(),
        scopes: ScopeSet::parse("users:read").unwrap(),
        code_challenge: "x".into(),
        created_at: now,
        expires_at: now.plus_seconds(300),
        used_at: None,
        chain: None,
        auth_time: None,
        nonce: None,
        sid: None,
    };
    s.insert_auth_code(&code.org, &code).await.unwrap();
    let ch = RefreshChain {
        authn: None,
        id: ChainId::parse(chain).unwrap(),
        org: o.id.clone(),
        client: c.id,
        user: u.id,
        scopes: ScopeSet::parse("users:read").unwrap(),
        created_at: now,
        ends_at: now.plus_seconds(86400),
        revoked_at: None,
        auth_time: None,
        sid: None,
    };
    assert_eq!(
        s.redeem_auth_code(&[byte; 32], now, &ch, &token(byte, chain))
            .await
            .unwrap(),
        Redeemed::Fresh
    );
    o.id
}

fn token(byte: u8, chain: &str) -> RefreshToken {
    let now = Timestamp::now();
    RefreshToken {
        digest: [byte; 32],
        chain: ChainId::parse(chain).unwrap(),
        issued_at: now,
        expires_at: now.plus_seconds(3600),
        used_at: None,
        successor_sealed: None,
        successor_until: None,
        access_jti: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn refresh_rotation_and_code_redemption_have_one_winner() {
    let Some(s) = fresh_store().await else { return };
    chain_with_token(&s, "chainrace", 1).await;
    let client = s
        .resolve_refresh_token(&[1; 32])
        .await
        .unwrap()
        .unwrap()
        .1
        .client;
    let now = Timestamp::now();
    let mut tasks = Vec::new();
    for i in 0..8u8 {
        let (s, client) = (s.clone(), client.clone());
        tasks.push(tokio::spawn(async move {
            let sealed = vec![i; 4];
            s.rotate_refresh_token(
                &[1; 32],
                &client,
                now,
                &sealed,
                now.plus_seconds(10),
                &token(100 + i, "chainrace"),
                now.plus_seconds(3660),
            )
            .await
            .unwrap()
        }));
    }
    let mut fresh = 0;
    let mut sealed = HashSet::new();
    for t in tasks {
        match t.await.unwrap() {
            Rotated::Fresh(_) => fresh += 1,
            Rotated::AlreadyUsed(t) => {
                sealed.insert(t.successor_sealed.expect("the winner's pair"));
            }
        }
    }
    assert_eq!(fresh, 1);
    assert_eq!(sealed.len(), 1, "every loser sees the one successor pair");
    let mut successors = 0;
    for i in 0..8u8 {
        successors += usize::from(
            s.resolve_refresh_token(&[100 + i; 32])
                .await
                .unwrap()
                .is_some(),
        );
    }
    assert_eq!(successors, 1, "only one successor was written");

    // The same for an authorization code presented several times at once.
    let o = chain_with_token(&s, "chainfirst", 2).await;
    let (u, c) = {
        let code = s.resolve_auth_code(&[2; 32]).await.unwrap().unwrap();
        (code.user, code.client)
    };
    let code = AuthCode {
        authn: None,
        digest: [3; 32],
        org: o.clone(),
        client: c.clone(),
        user: u.clone(),
        redirect_uri: "https://app.example.com/cb".into(),
        scopes: ScopeSet::parse("users:read").unwrap(),
        code_challenge: "x".into(),
        created_at: now,
        expires_at: now.plus_seconds(300),
        used_at: None,
        chain: None,
        auth_time: None,
        nonce: None,
        sid: None,
    };
    s.insert_auth_code(&code.org, &code).await.unwrap();
    let mut tasks = Vec::new();
    for i in 0..8u8 {
        let (s, o, u, c) = (s.clone(), o.clone(), u.clone(), c.clone());
        tasks.push(tokio::spawn(async move {
            let id = format!("codechain{i}");
            let ch = RefreshChain {
                authn: None,
                id: ChainId::parse(&id).unwrap(),
                org: o,
                client: c,
                user: u,
                scopes: ScopeSet::parse("users:read").unwrap(),
                created_at: now,
                ends_at: now.plus_seconds(86400),
                revoked_at: None,
                auth_time: None,
                sid: None,
            };
            s.redeem_auth_code(&[3; 32], now, &ch, &token(200 + i, &id))
                .await
                .unwrap()
        }));
    }
    let mut outcomes = Vec::new();
    for t in tasks {
        outcomes.push(t.await.unwrap());
    }
    assert_eq!(
        outcomes.iter().filter(|r| **r == Redeemed::Fresh).count(),
        1
    );
    let winner = s.resolve_auth_code(&[3; 32]).await.unwrap().unwrap().chain;
    assert!(winner.is_some());
    assert!(
        outcomes
            .iter()
            .all(|r| *r == Redeemed::Fresh || *r == Redeemed::Reused(winner.clone()))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn outbox_claims_never_overlap() {
    let Some(s) = fresh_store().await else { return };
    let o = org();
    s.create_org(&o).await.unwrap();
    let now = Timestamp::now();
    for i in 0..40u8 {
        let mut u = user(&format!("m{i}@example.com"), Role::Viewer);
        u.status = UserStatus::PendingInvite;
        u.password_hash = None;
        let link = NewLink {
            digest: [i; 32],
            expires_at: now.plus_seconds(600),
            email: OutboundEmail {
                to: format!("m{i}@example.com"),
                subject: "Hello".into(),
                body: "link".into(),
            },
        };
        s.insert_user_with_link(
            &o.id,
            &u,
            Some(&link),
            gatehouse_store::conformance::teller(),
        )
        .await
        .unwrap();
    }
    let mut workers = Vec::new();
    for _ in 0..4 {
        let s = s.clone();
        workers.push(tokio::spawn(async move {
            let mut mine = Vec::new();
            loop {
                // Mail is due from its user's creation on, a little after `now`.
                let batch = s
                    .claim_outbox(now.plus_seconds(60), 3, 600_000)
                    .await
                    .unwrap();
                if batch.is_empty() {
                    break;
                }
                mine.extend(batch.iter().map(|m| m.id));
            }
            mine
        }));
    }
    let mut all = Vec::new();
    for w in workers {
        all.extend(w.await.unwrap());
    }
    let distinct: HashSet<i64> = all.iter().copied().collect();
    assert_eq!(all.len(), 40, "each message claimed once: {all:?}");
    assert_eq!(distinct.len(), 40);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn revocation_ids_become_visible_in_order() {
    let Some(s) = fresh_store().await else { return };
    let now = Timestamp::now();
    let mut writers = Vec::new();
    for w in 0..4 {
        let s = s.clone();
        writers.push(tokio::spawn(async move {
            for i in 0..25 {
                s.insert_revocation(&gatehouse_store::NewRevocation::new(
                    RevocationKind::Jti,
                    format!("jti-{w}-{i}"),
                    now.unix_seconds(),
                    now.plus_seconds(600),
                ))
                .await
                .unwrap();
            }
        }));
    }
    // A poller that remembers only the highest id it saw, as a node does.
    let poller = {
        let s = s.clone();
        tokio::spawn(async move {
            let mut last = 0;
            let mut seen = Vec::new();
            while seen.len() < 100 {
                for r in s.revocations_since(last, now).await.unwrap() {
                    last = r.id;
                    seen.push(r.id);
                }
                tokio::task::yield_now().await;
            }
            seen
        })
    };
    for w in writers {
        w.await.unwrap();
    }
    let seen = tokio::time::timeout(std::time::Duration::from_secs(30), poller)
        .await
        .expect("the poller saw every revocation (none was skipped)")
        .unwrap();
    assert_eq!(seen.len(), 100);
    assert!(seen.windows(2).all(|w| w[0] < w[1]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn nodes_starting_together_migrate_and_bootstrap_once() {
    let Some(url) = fresh_database_url().await else {
        return;
    };
    let mut nodes = Vec::new();
    for _ in 0..4 {
        let url = url.clone();
        nodes.push(tokio::spawn(async move {
            let s = PgStore::connect(&url).await.unwrap();
            let created = s.bootstrap(&org(), &client()).await.unwrap();
            (s, created)
        }));
    }
    let mut created = 0;
    let mut store = None;
    for n in nodes {
        let (s, c) = n.await.unwrap();
        created += usize::from(c);
        store = Some(s);
    }
    assert_eq!(created, 1, "exactly one node bootstraps (D41, D44)");
    // Migrating again is a no-op.
    store.unwrap().migrate().await.unwrap();
}

/// The sequencer tests hold a transaction open on purpose, and a running
/// transaction holds back every database's sequencer on the cluster (a
/// snapshot's xmin is the cluster's): they run one at a time.
static HOLDS_TRANSACTIONS_OPEN: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// D54: the sequencer walks the tickets above its high-water mark. A ticket
/// burned by a transaction that rolled back is passed over (no gap in the
/// sequence); a committed event whose ticket is above one still held by a
/// running transaction waits for it, and then follows it, without gap.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sequencer_passes_rolled_back_tickets_and_waits_for_running_ones() {
    use gatehouse_store::EventFilter;
    use sqlx_core::connection::Connection as _;
    use sqlx_core::executor::Executor as _;
    let _alone = HOLDS_TRANSACTIONS_OPEN.lock().await;

    let Some(url) = fresh_database_url().await else {
        return;
    };
    let s = PgStore::connect(&url).await.unwrap();
    let o = org();
    s.create_org(&o).await.unwrap();
    let t = gatehouse_store::conformance::teller();
    let shown = |s: &PgStore, o: &OrgId| {
        let (s, o) = (s.clone(), o.clone());
        async move {
            let l = s
                .events_after(&o, &EventFilter::default(), 0, 100)
                .await
                .unwrap();
            l.items
                .iter()
                .map(|e| (e.sequence, e.event.object_id.clone()))
                .collect::<Vec<_>>()
        }
    };
    let first = s
        .insert_user(&o.id, &user("first@example.com", Role::Viewer), t)
        .await
        .unwrap();
    for _ in 0..3 {
        s.sequence_events().await.unwrap();
    }
    assert_eq!(shown(&s, &o.id).await, vec![(1, first.id.to_string())]);
    // A ticket burned: written, then rolled back.
    let raw = |sql: String| {
        let url = url.clone();
        async move {
            let mut c = sqlx_postgres::PgConnection::connect(&url).await.unwrap();
            c.execute(sql.as_str()).await.unwrap();
            c
        }
    };
    let insert = |id: &str| {
        format!(
            "INSERT INTO events (id, org_id, type, object_id, created_at, actor_type, object)
             VALUES ('{id}', '{}', 'user.updated', 'usr_x', 1, 'system', '{{}}')",
            o.id.as_str()
        )
    };
    let mut burned = raw("BEGIN".into()).await;
    burned.execute(insert("evt_burned").as_str()).await.unwrap();
    burned.execute("ROLLBACK").await.unwrap();
    // A ticket held by a transaction still running.
    let mut running = raw("BEGIN".into()).await;
    running
        .execute(insert("evt_running").as_str())
        .await
        .unwrap();
    let second = s
        .insert_user(&o.id, &user("second@example.com", Role::Viewer), t)
        .await
        .unwrap();
    let mark = s.event_mark().await.unwrap();
    for _ in 0..3 {
        s.sequence_events().await.unwrap();
    }
    assert!(!s.sequenced_through(mark).await.unwrap());
    assert_eq!(
        shown(&s, &o.id).await,
        vec![(1, first.id.to_string())],
        "the later commit waits for the running transaction's ticket"
    );
    running.execute("ROLLBACK").await.unwrap();
    for _ in 0..3 {
        s.sequence_events().await.unwrap();
    }
    assert!(s.sequenced_through(mark).await.unwrap());
    assert_eq!(
        shown(&s, &o.id).await,
        vec![(1, first.id.to_string()), (2, second.id.to_string())],
        "rolled-back tickets leave no gap"
    );
    s.close().await;
}

/// D54: a transaction given its id after the latest one to complete, still
/// running when the sequencer cuts, holds a ticket below the cut; its events
/// must wait for it and be sequenced once it commits. (The cut's bound was
/// once the snapshot's xmax, one past the latest *completed* transaction:
/// this transaction was at or above it, the cut counted as final while it
/// ran, and its events, committed below the high-water mark, were never
/// sequenced.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sequencer_waits_for_the_newest_running_transaction() {
    use gatehouse_store::EventFilter;
    use sqlx_core::connection::Connection as _;
    use sqlx_core::executor::Executor as _;
    let _alone = HOLDS_TRANSACTIONS_OPEN.lock().await;

    let Some(url) = fresh_database_url().await else {
        return;
    };
    let s = PgStore::connect(&url).await.unwrap();
    let o = org();
    s.create_org(&o).await.unwrap();
    let t = gatehouse_store::conformance::teller();
    for round in 0..5 {
        // A committed change: its event waits, so the sequencer cuts.
        let committed = s
            .insert_user(
                &o.id,
                &user(&format!("c{round}@example.com"), Role::Viewer),
                t,
            )
            .await
            .unwrap();
        // Then, with nothing completing after it, a transaction takes the
        // newest id and a ticket, and stays open across the cut.
        let mut running = sqlx_postgres::PgConnection::connect(&url).await.unwrap();
        running.execute("BEGIN").await.unwrap();
        running
            .execute("SELECT pg_current_xact_id()")
            .await
            .unwrap();
        let id = format!("evt_running{round}");
        running
            .execute(
                format!(
                    "INSERT INTO events (id, org_id, type, object_id, created_at, actor_type, object)
                     VALUES ('{id}', '{}', 'user.updated', 'usr_x', 1, 'system', '{{}}')",
                    o.id.as_str()
                )
                .as_str(),
            )
            .await
            .unwrap();
        for _ in 0..3 {
            s.sequence_events().await.unwrap();
        }
        running.execute("COMMIT").await.unwrap();
        for _ in 0..3 {
            s.sequence_events().await.unwrap();
        }
        let listed = s
            .events_after(&o.id, &EventFilter::default(), 0, 100)
            .await
            .unwrap();
        let seq = |wanted: &str| {
            listed
                .items
                .iter()
                .find(|e| e.event.id.as_str() == wanted)
                .map(|e| e.sequence)
        };
        let users: Vec<_> = listed
            .items
            .iter()
            .filter(|e| e.event.object_id == committed.id.to_string())
            .collect();
        assert_eq!(users.len(), 1, "the committed change's event is sequenced");
        assert_eq!(
            seq(&id),
            Some(2 * round as i64 + 2),
            "round {round}: the running transaction's event is sequenced after it commits, \
             right after the committed one"
        );
    }
    s.close().await;
}

/// D54, migration 22: an event the first sequencer passed over (committed
/// below the high-water mark without a sequence) is sequenced once the
/// migration has run, after the events already numbered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migration_22_sequences_events_the_first_sequencer_passed_over() {
    use gatehouse_store::EventFilter;
    use sqlx_core::connection::Connection as _;
    use sqlx_core::executor::Executor as _;
    let _alone = HOLDS_TRANSACTIONS_OPEN.lock().await;

    let Some(url) = fresh_database_url().await else {
        return;
    };
    let s = PgStore::connect(&url).await.unwrap();
    let o = org();
    s.create_org(&o).await.unwrap();
    let t = gatehouse_store::conformance::teller();
    let mut raw = sqlx_postgres::PgConnection::connect(&url).await.unwrap();
    // As the fault left it: an event with no sequence, below the mark.
    raw.execute(
        format!(
            "INSERT INTO events (id, org_id, type, object_id, created_at, actor_type, object)
             VALUES ('evt_passedover', '{}', 'user.updated', 'usr_x', 1, 'system', '{{}}')",
            o.id.as_str()
        )
        .as_str(),
    )
    .await
    .unwrap();
    let after = s
        .insert_user(&o.id, &user("after@example.com", Role::Viewer), t)
        .await
        .unwrap();
    // Both sequenced, however long another test's transaction holds the
    // cut back (the cluster is shared).
    let mark = s.event_mark().await.unwrap();
    for _ in 0..400 {
        s.sequence_events().await.unwrap();
        if s.sequenced_through(mark).await.unwrap() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    raw.execute("UPDATE events SET sequence = NULL WHERE id = 'evt_passedover'")
        .await
        .unwrap();
    let listed = |s: PgStore, o: OrgId| async move {
        s.events_after(&o, &EventFilter::default(), 0, 100)
            .await
            .unwrap()
            .items
            .iter()
            .map(|e| (e.sequence, e.event.object_id.clone()))
            .collect::<Vec<_>>()
    };
    let before = vec![(2, after.id.to_string())];
    s.sequence_events().await.unwrap();
    assert_eq!(
        listed(s.clone(), o.id.clone()).await,
        before,
        "passed over, as the fault left it"
    );
    s.close().await;
    // The migration runs again, as at the upgrade.
    raw.execute("DELETE FROM _sqlx_migrations WHERE version = 22")
        .await
        .unwrap();
    let s = PgStore::connect(&url).await.unwrap();
    // Until the cut is final (a transaction elsewhere on the cluster may
    // hold it back for a moment).
    let mark = s.event_mark().await.unwrap();
    for _ in 0..200 {
        s.sequence_events().await.unwrap();
        if s.sequenced_through(mark).await.unwrap() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert_eq!(
        listed(s.clone(), o.id.clone()).await,
        vec![(2, after.id.to_string()), (3, "usr_x".to_owned())],
        "sequenced late, after the events already numbered"
    );
    s.close().await;
}
