//! Shared rate windows.

use super::*;

/// D28 across nodes: a backend that shares rate limits counts exactly; one
/// that serves a single node says so with `None`.
pub async fn shared_rate_windows(s: &dyn Store) {
    let t0 = 1_900_000_000_000i64; // on a 100 ms boundary
    let at = |ms: i64| Timestamp::from_millis(t0 + ms);
    let key = format!("client:{}", ClientId::generate());
    let first = s.count_request(&key, 5, 3, at(0)).await.unwrap();
    assert_eq!(
        first.is_some(),
        s.shares_rate_limits(),
        "a backend counts shared windows exactly when it says it shares them"
    );
    let Some(first) = first else {
        return;
    };
    assert!(first.admitted);
    assert_eq!((first.in_minute, first.in_second), (1, 1));
    assert_eq!(first.minute_frees_at, Some(t0 + 60_000));
    for expect in [2, 3] {
        let w = s.count_request(&key, 5, 3, at(10)).await.unwrap().unwrap();
        assert!(w.admitted);
        assert_eq!(w.in_second, expect);
    }
    // The fourth in the same second is refused and not counted.
    let w = s.count_request(&key, 5, 3, at(20)).await.unwrap().unwrap();
    assert!(!w.admitted);
    assert_eq!((w.in_minute, w.in_second), (3, 3));
    assert_eq!(w.second_frees_at, Some(t0 + 1_000));
    // Another lineage is counted apart.
    let other = format!("client:{}", ClientId::generate());
    assert!(
        s.count_request(&other, 5, 3, at(20))
            .await
            .unwrap()
            .unwrap()
            .admitted
    );
    // A second later there is room in the second, then the minute fills.
    for expect in [4, 5] {
        let w = s
            .count_request(&key, 5, 3, at(1_000))
            .await
            .unwrap()
            .unwrap();
        assert!(w.admitted, "{w:?}");
        assert_eq!(w.in_minute, expect);
    }
    let w = s
        .count_request(&key, 5, 3, at(2_000))
        .await
        .unwrap()
        .unwrap();
    assert!(!w.admitted);
    assert_eq!(w.in_minute, 5);
    assert_eq!(w.minute_frees_at, Some(t0 + 60_000));
    // When the oldest admissions leave the minute, requests are admitted again.
    let w = s
        .count_request(&key, 5, 3, at(60_000))
        .await
        .unwrap()
        .unwrap();
    assert!(w.admitted, "{w:?}");
    assert_eq!(w.in_minute, 3);
    // Old buckets are purged without touching the current window.
    s.purge_expired(at(61_100), 500).await.unwrap();
    let w = s
        .count_request(&key, 5, 3, at(61_100))
        .await
        .unwrap()
        .unwrap();
    assert!(w.admitted, "{w:?}");
    // Those at 1 s left at 61 s; the one at 60 s is still in the window.
    assert_eq!(w.in_minute, 2, "the admission at 60 s survives the purge");
}

/// D28 (revised): a node leases several admissions of a busy credential at
/// once; leases are counted in the same windows as single decisions and
/// never grant more than the windows have room for.
pub async fn leases_never_exceed_the_window(s: &dyn Store) {
    let t0 = 1_900_000_000_000i64;
    let at = |ms: i64| Timestamp::from_millis(t0 + ms);
    let key = format!("client:{}", ClientId::generate());
    let Some((granted, w)) = s
        .lease_requests(&key, 100, 60, 50, None, at(0))
        .await
        .unwrap()
    else {
        assert!(
            !s.shares_rate_limits(),
            "a backend that shares windows leases them"
        );
        return;
    };
    assert_eq!(granted, 50);
    assert!(w.admitted);
    assert_eq!((w.in_minute, w.in_second), (50, 50));
    // Only ten are left in this second.
    let (granted, w) = s
        .lease_requests(&key, 100, 60, 50, None, at(150))
        .await
        .unwrap()
        .unwrap();
    assert_eq!((granted, w.in_second), (10, 60));
    let (granted, w) = s
        .lease_requests(&key, 100, 60, 50, None, at(200))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(granted, 0);
    assert!(!w.admitted);
    assert_eq!(w.second_frees_at, Some(t0 + 1_000));
    // Single decisions see the leased admissions.
    assert!(
        !s.count_request(&key, 100, 60, at(300))
            .await
            .unwrap()
            .unwrap()
            .admitted
    );
    // A second later the minute still holds 60 of 100: 40 more at most;
    // with 15 of the first lease given back (never used), 55.
    let (granted, w) = s
        .lease_requests(&key, 100, 60, 50, Some((at(0), 15)), at(1_000))
        .await
        .unwrap()
        .unwrap();
    assert_eq!((granted, w.in_minute), (50, 95));
    let (granted, w) = s
        .lease_requests(&key, 100, 60, 50, None, at(1_100))
        .await
        .unwrap()
        .unwrap();
    assert_eq!((granted, w.in_minute), (5, 100));
    // Another lineage is counted apart.
    let other = format!("client:{}", ClientId::generate());
    assert_eq!(
        s.lease_requests(&other, 100, 60, 5, None, at(1_000))
            .await
            .unwrap()
            .unwrap()
            .0,
        5
    );
}
