//! Jobs and the expiry sweeps.

use super::*;

pub async fn purge_removes_only_expired(s: &dyn Store) {
    let o = new_org(s).await;
    let now = Timestamp::now();
    let u = s
        .insert_user(
            &o,
            &user("p@example.com", Role::Editor, UserStatus::Active, 1),
            crate::conformance::teller(),
        )
        .await
        .unwrap();
    let sess = |exp: Timestamp| session(&o, &u.id, now, exp);
    s.create_session(&o, &[30; 32], &sess(now.plus_seconds(-5)), &[])
        .await
        .unwrap();
    s.create_session(&o, &[31; 32], &sess(now.plus_seconds(500)), &[])
        .await
        .unwrap();
    s.insert_revocation(&crate::NewRevocation::new(
        RevocationKind::Jti,
        "old",
        0,
        now.plus_seconds(-5),
    ))
    .await
    .unwrap();
    let mut purged = 0;
    loop {
        let n = s.purge_expired(now, 1).await.unwrap();
        if n == 0 {
            break;
        }
        purged += n;
    }
    assert!(purged >= 2);
    assert!(s.resolve_session(&[30; 32]).await.unwrap().is_none());
    assert!(s.resolve_session(&[31; 32]).await.unwrap().is_some());
}

/// D44: a scheduled job's occurrence is claimed by one caller only.
pub async fn jobs_are_claimed_once(s: &dyn Store) {
    let now = Timestamp::now();
    assert!(
        s.claim_job("staging_reset", "1800000000", now)
            .await
            .unwrap()
    );
    assert!(
        !s.claim_job("staging_reset", "1800000000", now)
            .await
            .unwrap()
    );
    assert!(
        s.claim_job("staging_reset", "1800086400", now)
            .await
            .unwrap()
    );
    assert!(s.claim_job("other", "1800000000", now).await.unwrap());
    // Concurrent claims: exactly one wins.
    let claims = futures_join8(s, "race").await;
    assert_eq!(claims.iter().filter(|c| **c).count(), 1, "{claims:?}");
}
