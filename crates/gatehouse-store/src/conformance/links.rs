//! Single-use links: invitations and password resets.

use super::*;

pub async fn invitations_and_outbox(s: &dyn Store) {
    let o = new_org(s).await;
    let now = Timestamp::now();
    let nu = user(
        "inv@example.com",
        Role::Viewer,
        UserStatus::PendingInvite,
        now.millis(),
    );
    let u = s
        .insert_user_with_link(
            &o,
            &nu,
            Some(&link(1, now.plus_seconds(600), "inv@example.com")),
            crate::conformance::teller(),
        )
        .await
        .unwrap();
    assert_eq!(
        s.outbox_backlog().await.unwrap(),
        1,
        "the invitation e-mail is queued with the user"
    );
    let rec = s
        .resolve_link(LinkKind::Invitation, &[1; 32])
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (rec.org.clone(), rec.user.id.clone(), rec.used_at),
        (o.clone(), u.id.clone(), None)
    );
    assert!(
        s.resolve_link(LinkKind::Reset, &[1; 32])
            .await
            .unwrap()
            .is_none()
    );
    // Re-sending replaces the link (D19).
    s.reissue_invitation(
        &o,
        &u.id,
        &link(2, now.plus_seconds(600), "inv@example.com"),
        crate::conformance::teller(),
    )
    .await
    .unwrap();
    assert!(
        s.resolve_link(LinkKind::Invitation, &[1; 32])
            .await
            .unwrap()
            .is_none()
    );
    assert!(matches!(
        s.accept_invitation(&[1; 32], "$argon2id$x", now, teller())
            .await,
        Err(StoreError::NotFound)
    ));
    let active = s
        .accept_invitation(&[2; 32], "$argon2id$x", now, teller())
        .await
        .unwrap();
    assert_eq!(active.status, UserStatus::Active);
    assert!(active.has_password);
    // D49: an accepted invitation verifies the address.
    assert!(s.email_verified(&o, &active.id).await.unwrap());
    // Single use.
    assert!(matches!(
        s.accept_invitation(&[2; 32], "$argon2id$y", now, teller())
            .await,
        Err(StoreError::NotFound)
    ));
    // Only a pending user can be invited again.
    let r = s
        .reissue_invitation(
            &o,
            &u.id,
            &link(3, now.plus_seconds(600), "x@example.com"),
            crate::conformance::teller(),
        )
        .await;
    assert!(
        matches!(
            r,
            Err(StoreError::Rule(DomainError::InvalidStateTransition(_)))
        ),
        "{r:?}"
    );
    assert!(matches!(
        s.reissue_invitation(
            &new_org(s).await,
            &u.id,
            &link(3, now, "x"),
            crate::conformance::teller()
        )
        .await,
        Err(StoreError::NotFound)
    ));
    // An expired link is refused; cancelling an invitation kills its link (D11).
    let late = s
        .insert_user_with_link(
            &o,
            &user(
                "late@example.com",
                Role::Viewer,
                UserStatus::PendingInvite,
                1,
            ),
            Some(&link(4, now.plus_seconds(-1), "late@example.com")),
            crate::conformance::teller(),
        )
        .await
        .unwrap();
    assert!(matches!(
        s.accept_invitation(&[4; 32], "$argon2id$x", now, teller())
            .await,
        Err(StoreError::NotFound)
    ));
    let c = s
        .insert_user_with_link(
            &o,
            &user(
                "cancel@example.com",
                Role::Viewer,
                UserStatus::PendingInvite,
                2,
            ),
            Some(&link(5, now.plus_seconds(600), "c@example.com")),
            crate::conformance::teller(),
        )
        .await
        .unwrap();
    let off = UserPatch {
        status: Some(UserStatus::Inactive),
        ..Default::default()
    };
    s.update_user(&o, &c.id, &off, now, teller()).await.unwrap();
    assert!(
        s.resolve_link(LinkKind::Invitation, &[5; 32])
            .await
            .unwrap()
            .is_none()
    );
    assert_eq!(
        s.get_user(&o, &late.id).await.unwrap().unwrap().status,
        UserStatus::PendingInvite
    );
}

/// D11, D19: whether a link may be used is decided in the transaction that
/// uses it, so of two concurrent uses of one link exactly one succeeds.
pub async fn concurrent_link_uses_succeed_once(s: &dyn Store) {
    let o = new_org(s).await;
    let now = Timestamp::now();
    for round in 0..4u8 {
        let email = format!("race{round}@example.com");
        s.insert_user_with_link(
            &o,
            &user(
                &email,
                Role::Viewer,
                UserStatus::PendingInvite,
                i64::from(round),
            ),
            Some(&link(100 + round, now.plus_seconds(600), &email)),
            crate::conformance::teller(),
        )
        .await
        .unwrap();
        let digest = [100 + round; 32];
        let tell = teller();
        let (x, y) = tokio::join!(
            s.accept_invitation(&digest, "$argon2id$x", now, tell),
            s.accept_invitation(&digest, "$argon2id$y", now, tell)
        );
        let ok = [&x, &y].iter().filter(|r| r.is_ok()).count();
        let gone = [&x, &y]
            .iter()
            .filter(|r| matches!(r, Err(StoreError::NotFound)))
            .count();
        assert_eq!((ok, gone), (1, 1), "invitation round {round}: {x:?} {y:?}");
        // The now active user resets their password: the reset link too is
        // used once.
        assert!(
            s.request_password_reset(
                &o,
                &Email::parse(&email).unwrap(),
                &link(150 + round, now.plus_seconds(600), &email),
                None,
            )
            .await
            .unwrap()
        );
        let digest = [150 + round; 32];
        let (x, y) = tokio::join!(
            s.reset_password(&digest, "$argon2id$p", now, tell),
            s.reset_password(&digest, "$argon2id$q", now, tell)
        );
        let ok = [&x, &y].iter().filter(|r| r.is_ok()).count();
        let gone = [&x, &y]
            .iter()
            .filter(|r| matches!(r, Err(StoreError::NotFound)))
            .count();
        assert_eq!((ok, gone), (1, 1), "reset round {round}: {x:?} {y:?}");
    }
}

pub async fn password_resets(s: &dyn Store) {
    let o = new_org(s).await;
    let now = Timestamp::now();
    let u = s
        .insert_user(
            &o,
            &user("reset@example.com", Role::Viewer, UserStatus::Active, 1),
            crate::conformance::teller(),
        )
        .await
        .unwrap();
    let email = Email::parse("RESET@example.com").unwrap();
    let before = s.outbox_backlog().await.unwrap();
    assert!(
        s.request_password_reset(
            &o,
            &email,
            &link(7, now.plus_seconds(3600), "reset@example.com"),
            None,
        )
        .await
        .unwrap()
    );
    assert_eq!(s.outbox_backlog().await.unwrap(), before + 1);
    // D19 (revised): a second request within 5 minutes sends nothing, and
    // the first link stays the usable one.
    assert!(
        !s.request_password_reset(
            &o,
            &email,
            &link(9, now.plus_seconds(3600), "reset@example.com"),
            None,
        )
        .await
        .unwrap()
    );
    assert_eq!(s.outbox_backlog().await.unwrap(), before + 1);
    let nobody = Email::parse("nobody@example.com").unwrap();
    assert!(
        !s.request_password_reset(&o, &nobody, &link(8, now.plus_seconds(3600), "x"), None)
            .await
            .unwrap()
    );
    assert_eq!(
        s.outbox_backlog().await.unwrap(),
        before + 1,
        "nothing queued for an unknown address"
    );
    let last = s
        .revocations_since(0, now)
        .await
        .unwrap()
        .last()
        .map_or(0, |r| r.id);
    assert!(!s.email_verified(&o, &u.id).await.unwrap());
    s.reset_password(&[7; 32], "$argon2id$new", now, teller())
        .await
        .unwrap();
    // D49: so does a completed password reset.
    assert!(s.email_verified(&o, &u.id).await.unwrap());
    let (_, hash) = s.find_user_by_email(&o, &email).await.unwrap().unwrap();
    assert_eq!(hash.as_deref(), Some("$argon2id$new"));
    assert!(matches!(
        s.reset_password(&[7; 32], "$argon2id$again", now, teller())
            .await,
        Err(StoreError::NotFound)
    ));
    let revs = s.revocations_since(last, now).await.unwrap();
    assert!(
        revs.iter()
            .any(|r| r.kind == RevocationKind::User && r.subject == u.id.as_str()),
        "a reset revokes the user's tokens"
    );
    assert!(
        s.find_user_by_email(&new_org(s).await, &email)
            .await
            .unwrap()
            .is_none()
    );
}

/// `reset_password` returns the user as updated: what a fresh read returns,
/// on every backend (here an active user who had no password yet).
pub async fn reset_password_returns_the_user_as_updated(s: &dyn Store) {
    let o = new_org(s).await;
    let now = Timestamp::now();
    let mut nu = user("fresh@example.com", Role::Editor, UserStatus::Active, 5);
    nu.password_hash = None;
    let u = s
        .insert_user(&o, &nu, crate::conformance::teller())
        .await
        .unwrap();
    assert!(!u.has_password);
    assert!(
        s.request_password_reset(
            &o,
            &u.email,
            &link(21, now.plus_seconds(3600), "fresh@example.com"),
            None,
        )
        .await
        .unwrap()
    );
    let returned = s
        .reset_password(&[21; 32], "$argon2id$new", now, teller())
        .await
        .unwrap();
    let read = s.get_user(&o, &u.id).await.unwrap().unwrap();
    assert_eq!(returned, read);
    assert!(returned.has_password);
    assert_eq!(
        (returned.status, returned.updated_at),
        (read.status, read.updated_at)
    );
}
