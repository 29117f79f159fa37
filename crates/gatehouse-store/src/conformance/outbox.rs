//! The e-mail outbox.

use super::*;

pub async fn outbox_claims_and_retries(s: &dyn Store) {
    let o = new_org(s).await;
    let now = Timestamp::now();
    for i in 0..3u8 {
        s.insert_user_with_link(
            &o,
            &user(
                &format!("m{i}@example.com"),
                Role::Viewer,
                UserStatus::PendingInvite,
                i as i64,
            ),
            Some(&link(
                20 + i,
                now.plus_seconds(600),
                &format!("m{i}@example.com"),
            )),
            crate::conformance::teller(),
        )
        .await
        .unwrap();
    }
    let first = s.claim_outbox(now, 2, 60_000).await.unwrap();
    assert_eq!(first.len(), 2);
    assert!(first.iter().all(|m| m.attempts == 1));
    // Leased messages are not handed to another worker.
    let second = s.claim_outbox(now, 10, 60_000).await.unwrap();
    assert_eq!(second.len(), 1);
    assert!(s.claim_outbox(now, 10, 60_000).await.unwrap().is_empty());
    s.outbox_sent(first[0].id, now).await.unwrap();
    s.outbox_failed(first[1].id, "connection refused", now.plus_seconds(30))
        .await
        .unwrap();
    assert_eq!(s.outbox_backlog().await.unwrap(), 2);
    assert!(
        s.claim_outbox(now.plus_seconds(10), 10, 60_000)
            .await
            .unwrap()
            .is_empty(),
        "not before its next attempt"
    );
    let retry = s
        .claim_outbox(now.plus_seconds(31), 10, 60_000)
        .await
        .unwrap();
    assert_eq!(
        retry.iter().map(|m| (m.id, m.attempts)).collect::<Vec<_>>(),
        vec![(first[1].id, 2)]
    );
    // An expired lease (a worker died) makes the message claimable again.
    let again = s
        .claim_outbox(now.plus_seconds(200), 10, 60_000)
        .await
        .unwrap();
    assert_eq!(again.len(), 2);
}
