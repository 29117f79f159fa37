//! Idempotent POSTs (D50): the claim, the kept response, abandoning, the
//! lease of a stale claim, purging and scoping.

use super::*;
use crate::{Begun, IDEMPOTENCY_LEASE_SECS, IdempotencyKey, KeptResponse};

fn idem(key: &str) -> IdempotencyKey {
    IdempotencyKey {
        lineage: "client:app_test".into(),
        key: key.into(),
    }
}

fn kept(status: u16) -> KeptResponse {
    KeptResponse {
        status,
        location: Some("/v1/users/usr_x".into()),
        content_type: Some("application/json".into()),
        body: br#"{"data":{"id":"usr_x"}}"#.to_vec(),
        sealed: false,
    }
}

/// D50: the first caller claims; a concurrent second sees it running; a
/// finished one answers its kept response; another digest is a mismatch;
/// an abandoned claim lets the next caller run.
pub async fn idempotency_claims_and_keeps(s: &dyn Store) {
    let o = new_org(s).await;
    let now = Timestamp::now();
    let exp = now.plus_seconds(86_400);
    let k = idem("k1");
    let (d1, d2) = ([1u8; 32], [2u8; 32]);
    assert_eq!(
        s.begin_idempotent(&o, &k, &d1, "c1", now, exp)
            .await
            .unwrap(),
        Begun::Claimed
    );
    assert_eq!(
        s.begin_idempotent(&o, &k, &d1, "c2", now, exp)
            .await
            .unwrap(),
        Begun::InProgress
    );
    assert_eq!(
        s.begin_idempotent(&o, &k, &d2, "c2", now, exp)
            .await
            .unwrap(),
        Begun::Mismatch
    );
    // Only the claim's holder finishes it.
    assert!(
        !s.finish_idempotent(&o, &k, "c2", &kept(201), exp)
            .await
            .unwrap()
    );
    assert!(
        s.finish_idempotent(&o, &k, "c1", &kept(201), exp)
            .await
            .unwrap()
    );
    assert_eq!(
        s.begin_idempotent(&o, &k, &d1, "c3", now, exp)
            .await
            .unwrap(),
        Begun::Done(kept(201))
    );
    assert_eq!(
        s.begin_idempotent(&o, &k, &d2, "c3", now, exp)
            .await
            .unwrap(),
        Begun::Mismatch
    );
    // A finished entry is not abandoned by anyone.
    s.abandon_idempotent(&o, &k, "c1").await.unwrap();
    assert_eq!(
        s.begin_idempotent(&o, &k, &d1, "c3", now, exp)
            .await
            .unwrap(),
        Begun::Done(kept(201))
    );

    // A sealed body with no Location comes back as stored.
    let k2 = idem("k2");
    assert_eq!(
        s.begin_idempotent(&o, &k2, &d1, "c1", now, exp)
            .await
            .unwrap(),
        Begun::Claimed
    );
    let secret = KeptResponse {
        status: 200,
        location: None,
        content_type: None,
        body: vec![0, 159, 146, 150, 255],
        sealed: true,
    };
    assert!(
        s.finish_idempotent(&o, &k2, "c1", &secret, exp)
            .await
            .unwrap()
    );
    assert_eq!(
        s.begin_idempotent(&o, &k2, &d1, "c9", now, exp)
            .await
            .unwrap(),
        Begun::Done(secret)
    );

    // Abandoned (a 400, 401 … 5xx is not kept): the retry runs, whatever it asks.
    let k3 = idem("k3");
    assert_eq!(
        s.begin_idempotent(&o, &k3, &d1, "c1", now, exp)
            .await
            .unwrap(),
        Begun::Claimed
    );
    s.abandon_idempotent(&o, &k3, "c1").await.unwrap();
    assert_eq!(
        s.begin_idempotent(&o, &k3, &d2, "c2", now, exp)
            .await
            .unwrap(),
        Begun::Claimed
    );
    assert!(
        s.finish_idempotent(&o, &k3, "c2", &kept(422), exp)
            .await
            .unwrap()
    );
    assert_eq!(
        s.begin_idempotent(&o, &k3, &d2, "c4", now, exp)
            .await
            .unwrap(),
        Begun::Done(kept(422))
    );

    // The same key of another lineage is another key.
    let other = IdempotencyKey {
        lineage: "key:key_other".into(),
        key: "k1".into(),
    };
    assert_eq!(
        s.begin_idempotent(&o, &other, &d2, "c1", now, exp)
            .await
            .unwrap(),
        Begun::Claimed
    );
}

/// D50 across nodes: of concurrent claims of one key, exactly one wins.
pub async fn concurrent_idempotent_claims_win_once(s: &dyn Store) {
    let o = new_org(s).await;
    let now = Timestamp::now();
    let exp = now.plus_seconds(86_400);
    let k = idem("race");
    let b = |c: &'static str| s.begin_idempotent(&o, &k, &[9; 32], c, now, exp);
    let (r1, r2, r3, r4) = tokio::join!(b("c1"), b("c2"), b("c3"), b("c4"));
    let results = [r1, r2, r3, r4];
    let won = results
        .iter()
        .filter(|r| matches!(r, Ok(Begun::Claimed)))
        .count();
    let running = results
        .iter()
        .filter(|r| matches!(r, Ok(Begun::InProgress)))
        .count();
    assert_eq!((won, running), (1, 3), "{results:?}");
}

/// D50: a claim whose node died holds its key for the lease only; then the
/// next request takes it over, and the dead claim can no longer finish.
pub async fn stale_idempotent_claims_are_taken_over(s: &dyn Store) {
    let o = new_org(s).await;
    let now = Timestamp::now();
    let exp = now.plus_seconds(86_400);
    let k = idem("stale");
    assert_eq!(
        s.begin_idempotent(&o, &k, &[1; 32], "dead", now, exp)
            .await
            .unwrap(),
        Begun::Claimed
    );
    let soon = now.plus_seconds(IDEMPOTENCY_LEASE_SECS - 1);
    assert_eq!(
        s.begin_idempotent(&o, &k, &[1; 32], "next", soon, exp)
            .await
            .unwrap(),
        Begun::InProgress
    );
    let later = now.plus_seconds(IDEMPOTENCY_LEASE_SECS + 1);
    assert_eq!(
        s.begin_idempotent(&o, &k, &[1; 32], "next", later, exp)
            .await
            .unwrap(),
        Begun::Claimed
    );
    assert!(
        !s.finish_idempotent(&o, &k, "dead", &kept(201), exp)
            .await
            .unwrap()
    );
    s.abandon_idempotent(&o, &k, "dead").await.unwrap();
    assert!(
        s.finish_idempotent(&o, &k, "next", &kept(201), exp)
            .await
            .unwrap()
    );
    assert_eq!(
        s.begin_idempotent(&o, &k, &[1; 32], "x", later, exp)
            .await
            .unwrap(),
        Begun::Done(kept(201))
    );
}

/// D50: an entry past its retention is purged by `purge_expired`, and until
/// then it no longer answers: the key is usable anew.
pub async fn expired_idempotency_keys_are_purged(s: &dyn Store) {
    let o = new_org(s).await;
    let now = Timestamp::now();
    let short = now.plus_seconds(1);
    let long = now.plus_seconds(86_400);
    let (a, b) = (idem("short"), idem("long"));
    for (k, exp) in [(&a, short), (&b, long)] {
        s.begin_idempotent(&o, k, &[1; 32], "c", now, exp)
            .await
            .unwrap();
        assert!(
            s.finish_idempotent(&o, k, "c", &kept(201), exp)
                .await
                .unwrap()
        );
    }
    let after = now.plus_seconds(2);
    // Expired but not yet purged: a new request, even a different one, runs.
    assert_eq!(
        s.begin_idempotent(&o, &a, &[2; 32], "c2", after, after.plus_seconds(1))
            .await
            .unwrap(),
        Begun::Claimed
    );
    let later = now.plus_seconds(10);
    let mut purged = 0;
    loop {
        let n = s.purge_expired(later, 100).await.unwrap();
        if n == 0 {
            break;
        }
        purged += n;
    }
    assert!(purged >= 1);
    // The purged key is free; the one still kept still answers.
    assert_eq!(
        s.begin_idempotent(&o, &a, &[3; 32], "c3", later, long)
            .await
            .unwrap(),
        Begun::Claimed
    );
    assert_eq!(
        s.begin_idempotent(&o, &b, &[1; 32], "c3", later, long)
            .await
            .unwrap(),
        Begun::Done(kept(201))
    );
}

/// D2: another organization's key is invisible to it, and its finish and
/// abandon change nothing.
pub async fn idempotency_keys_are_scoped(s: &dyn Store) {
    let o = new_org(s).await;
    let p = new_org(s).await;
    let now = Timestamp::now();
    let exp = now.plus_seconds(86_400);
    let k = idem("shared");
    assert_eq!(
        s.begin_idempotent(&o, &k, &[1; 32], "c", now, exp)
            .await
            .unwrap(),
        Begun::Claimed
    );
    assert!(
        !s.finish_idempotent(&p, &k, "c", &kept(201), exp)
            .await
            .unwrap()
    );
    s.abandon_idempotent(&p, &k, "c").await.unwrap();
    assert_eq!(
        s.begin_idempotent(&p, &k, &[2; 32], "d", now, exp)
            .await
            .unwrap(),
        Begun::Claimed
    );
    assert_eq!(
        s.begin_idempotent(&o, &k, &[1; 32], "e", now, exp)
            .await
            .unwrap(),
        Begun::InProgress
    );
    assert!(
        s.finish_idempotent(&o, &k, "c", &kept(201), exp)
            .await
            .unwrap()
    );
    assert_eq!(
        s.begin_idempotent(&p, &k, &[2; 32], "f", now, exp)
            .await
            .unwrap(),
        Begun::InProgress
    );
}
