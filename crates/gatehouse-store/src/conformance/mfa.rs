//! Second factors (D56): a TOTP factor replaced, never two; the replay
//! rule across concurrent sign-ins; recovery codes spent once, regenerated
//! as a new set; the reset removing everything with the person's sessions;
//! the second step's wrong codes; the policy, its deadlines set once and
//! moved only earlier; a step-up of a session.

use gatehouse_domain::effect::{self, Effect};
use gatehouse_domain::mfa::{
    self, DeadlineChange, Factor, FactorKind, MfaMode, PolicyPatch, SecurityPolicy, TotpFactor,
};
use gatehouse_domain::{MfaId, link::OutboundEmail};

use super::events::{kinds, settled};
use super::*;

pub(crate) fn totp(at: i64, secret: u8) -> TotpFactor {
    TotpFactor {
        factor: Factor {
            id: MfaId::generate(),
            kind: FactorKind::Totp,
            name: mfa::TOTP_NAME.into(),
            created_at: Timestamp::from_millis(at),
            last_used_at: None,
        },
        sealed_secret: vec![secret; 48],
        last_step: 100,
    }
}

pub(crate) fn mail() -> OutboundEmail {
    OutboundEmail {
        to: "mfa@example.com".into(),
        subject: "A factor changed".into(),
        body: "…".into(),
    }
}

pub(crate) async fn person(s: &dyn Store, o: &OrgId, email: &str) -> gatehouse_domain::User {
    s.insert_user(
        o,
        &user(email, Role::Editor, UserStatus::Active, 1),
        teller(),
    )
    .await
    .unwrap()
}

pub async fn totp_factors_are_replaced_and_replay_safe(s: &dyn Store) {
    let o = new_org(s).await;
    let other = new_org(s).await;
    let u = person(s, &o, "totp@example.com").await;
    assert_eq!(s.factors(&o, &u.id).await.unwrap(), Default::default());

    let first = totp(1_000, 1);
    let fx = effect::of_totp_enrolment(teller(), &u.id, first.clone(), None, &mail());
    s.write_mfa(&o, &fx, Timestamp::from_millis(1_000), teller())
        .await
        .unwrap();
    let got = s.factors(&o, &u.id).await.unwrap();
    assert_eq!(got.totp, Some(first.clone()));
    assert_eq!(got.recovery_remaining, None);
    assert!(got.any());
    // Another organization sees nothing of it (D2).
    assert_eq!(s.factors(&other, &u.id).await.unwrap(), Default::default());

    // The replay rule: only a later step, once, on every node.
    let id = &first.factor.id;
    let now = Timestamp::from_millis(2_000);
    assert!(!s.accept_totp_step(&o, &u.id, id, 100, now).await.unwrap());
    let (a, b) = tokio::join!(
        s.accept_totp_step(&o, &u.id, id, 101, now),
        s.accept_totp_step(&o, &u.id, id, 101, now)
    );
    assert_eq!(
        [a.unwrap(), b.unwrap()].iter().filter(|x| **x).count(),
        1,
        "the same step is accepted once"
    );
    assert!(
        !s.accept_totp_step(&other, &u.id, id, 105, now)
            .await
            .unwrap()
    );
    let after = s.factors(&o, &u.id).await.unwrap().totp.unwrap();
    assert_eq!(after.last_step, 101);
    assert_eq!(after.factor.last_used_at, Some(now));

    // Enrolling again replaces it: never two TOTP factors.
    let second = totp(3_000, 2);
    let fx = effect::of_totp_enrolment(
        teller(),
        &u.id,
        second.clone(),
        Some(&first.factor),
        &mail(),
    );
    s.write_mfa(&o, &fx, Timestamp::from_millis(3_000), teller())
        .await
        .unwrap();
    assert_eq!(
        s.factors(&o, &u.id).await.unwrap().totp,
        Some(second.clone())
    );

    let events = settled(s, &o, 4).await;
    let told: Vec<_> = kinds(&events).into_iter().map(|(k, _)| k).collect();
    assert_eq!(
        told,
        [
            "user.created",
            "user.mfa_enrolled",
            "user.mfa_removed",
            "user.mfa_enrolled"
        ]
    );

    // Removing the factor leaves none.
    let fx = effect::of_factor_removal(
        teller(),
        &u.id,
        &second.factor,
        &mail(),
        Timestamp::from_millis(4_000),
    );
    s.write_mfa(&o, &fx, Timestamp::from_millis(4_000), teller())
        .await
        .unwrap();
    assert_eq!(s.factors(&o, &u.id).await.unwrap().totp, None);
}

pub async fn recovery_codes_are_spent_once_and_reset_removes_all(s: &dyn Store) {
    let o = new_org(s).await;
    let u = person(s, &o, "codes@example.com").await;
    let digests: Vec<[u8; 32]> = (0..10u8).map(|i| [i; 32]).collect();
    let put = [Effect::PutRecoveryCodes {
        user: u.id.clone(),
        digests: digests.clone(),
    }];
    let now = Timestamp::from_millis(5_000);
    s.write_mfa(&o, &put, now, teller()).await.unwrap();
    assert_eq!(
        s.factors(&o, &u.id).await.unwrap().recovery_remaining,
        Some(10)
    );
    let (a, b) = tokio::join!(
        s.use_recovery_code(&o, &u.id, &[3; 32], now, &[]),
        s.use_recovery_code(&o, &u.id, &[3; 32], now, &[])
    );
    let spent: Vec<_> = [a.unwrap(), b.unwrap()].into_iter().flatten().collect();
    assert_eq!(spent, vec![9], "one use wins; nine left");
    assert_eq!(
        s.use_recovery_code(&o, &u.id, &[42; 32], now, &[])
            .await
            .unwrap(),
        None
    );
    // Regenerating invalidates the old set.
    let fresh = [Effect::PutRecoveryCodes {
        user: u.id.clone(),
        digests: vec![[77; 32]],
    }];
    s.write_mfa(&o, &fresh, now, teller()).await.unwrap();
    assert_eq!(
        s.use_recovery_code(&o, &u.id, &[4; 32], now, &[])
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        s.factors(&o, &u.id).await.unwrap().recovery_remaining,
        Some(1)
    );

    // The reset: factors, codes and sessions go, tokens are revoked.
    let t = totp(6_000, 3);
    let fx = effect::of_totp_enrolment(teller(), &u.id, t.clone(), None, &mail());
    s.write_mfa(&o, &fx, now, teller()).await.unwrap();
    let sess = session(&o, &u.id, now, Timestamp::now().plus_seconds(3600));
    s.create_session(&o, &[61; 32], &sess, &[]).await.unwrap();
    let fx = effect::of_mfa_reset(
        teller(),
        &u.id,
        std::slice::from_ref(&t.factor),
        &mail(),
        now,
    );
    s.write_mfa(&o, &fx, now, teller()).await.unwrap();
    assert_eq!(s.factors(&o, &u.id).await.unwrap(), Default::default());
    assert!(
        s.resolve_session(&[61; 32]).await.unwrap().is_none(),
        "the reset ends the person's sessions"
    );
}

pub async fn second_step_failures_and_policy_deadlines(s: &dyn Store) {
    let o = new_org(s).await;
    let u = person(s, &o, "policy@example.com").await;
    let v = person(s, &o, "policy2@example.com").await;
    let t0 = Timestamp::from_millis(1_000_000);
    for i in 0..3 {
        s.record_second_step_failure(&o, &u.id, if i < 2 { "a" } else { "b" }, t0.plus_seconds(i))
            .await
            .unwrap();
    }
    let mut seen = s.second_step_failures(&o, &u.id, t0).await.unwrap();
    seen.sort_by_key(|(_, t)| t.millis());
    assert_eq!(
        seen,
        vec![
            ("a".to_owned(), t0),
            ("a".to_owned(), t0.plus_seconds(1)),
            ("b".to_owned(), t0.plus_seconds(2))
        ]
    );
    assert!(
        s.second_step_failures(&o, &v.id, t0)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        s.second_step_failures(&o, &u.id, t0.plus_seconds(2))
            .await
            .unwrap()
            .len(),
        1
    );

    // The default policy, then a change with its event.
    let before = s.security_policy(&o).await.unwrap();
    assert_eq!(before.mfa, MfaMode::Optional);
    assert_eq!(before.enrollment_grace_days, 7);
    let (after, change) = PolicyPatch {
        mfa: Some(MfaMode::Required),
        enrollment_grace_days: None,
    }
    .apply(&before, t0, 1)
    .unwrap();
    let fx = effect::of_policy_change(teller(), &o, &before, after, change);
    s.write_mfa(&o, &fx, t0, teller()).await.unwrap();
    assert_eq!(s.security_policy(&o).await.unwrap(), after);

    // A deadline is set once and never extended.
    let d1 = s
        .mfa_deadline(&o, &u.id, t0.plus_seconds(7), t0)
        .await
        .unwrap();
    assert_eq!(d1, t0.plus_seconds(7));
    let d2 = s
        .mfa_deadline(&o, &u.id, t0.plus_seconds(99), t0.plus_seconds(50))
        .await
        .unwrap();
    assert_eq!(d2, d1, "set at the first sign-in under the policy");
    // Lowering the grace brings it forward, from its start.
    let fx = [Effect::SetSecurityPolicy {
        policy: SecurityPolicy {
            enrollment_grace_days: 2,
            ..after
        },
        deadlines: DeadlineChange::Shorten { grace_secs: 2 },
    }];
    s.write_mfa(&o, &fx, t0, teller()).await.unwrap();
    assert_eq!(
        s.mfa_deadline(&o, &u.id, t0.plus_seconds(99), t0)
            .await
            .unwrap(),
        t0.plus_seconds(2)
    );
    // Optional clears them: the next sign-in under a policy starts anew.
    let fx = [Effect::SetSecurityPolicy {
        policy: SecurityPolicy {
            mfa: MfaMode::Optional,
            ..after
        },
        deadlines: DeadlineChange::Clear,
    }];
    s.write_mfa(&o, &fx, t0, teller()).await.unwrap();
    assert_eq!(
        s.mfa_deadline(&o, &u.id, t0.plus_seconds(30), t0.plus_seconds(20))
            .await
            .unwrap(),
        t0.plus_seconds(30)
    );
    let events = settled(s, &o, 3).await;
    assert_eq!(
        events[2].event.kind.as_str(),
        "organization.security_updated"
    );

    // A step-up raises the session's amr and moves its auth_time.
    let sess = session(&o, &u.id, t0, Timestamp::now().plus_seconds(3600));
    s.create_session(&o, &[62; 32], &sess, &[]).await.unwrap();
    let amr = mfa::amr_with_otp(&sess.amr);
    s.step_up_session(&o, &sess.id, &amr, t0.plus_seconds(60))
        .await
        .unwrap();
    let got = s.resolve_session(&[62; 32]).await.unwrap().unwrap();
    assert_eq!(got.amr, amr);
    assert_eq!(got.auth_time, t0.plus_seconds(60));
    assert_eq!(got.created_at, t0);

    // A promotion under `required_for_admins` starts a new deadline; under
    // `required` the one set stays (never extended).
    let policy = |mfa| Effect::SetSecurityPolicy {
        policy: SecurityPolicy { mfa, ..after },
        deadlines: DeadlineChange::Keep,
    };
    let promoted = [Effect::NewMfaDeadline { user: v.id.clone() }];
    s.write_mfa(&o, &[policy(MfaMode::RequiredForAdmins)], t0, teller())
        .await
        .unwrap();
    let first = s
        .mfa_deadline(&o, &v.id, t0.plus_seconds(5), t0)
        .await
        .unwrap();
    assert_eq!(first, t0.plus_seconds(5));
    s.write_mfa(&o, &promoted, t0, teller()).await.unwrap();
    let renewed = s
        .mfa_deadline(&o, &v.id, t0.plus_seconds(50), t0.plus_seconds(40))
        .await
        .unwrap();
    assert_eq!(renewed, t0.plus_seconds(50), "a new deadline");
    s.write_mfa(&o, &[policy(MfaMode::Required)], t0, teller())
        .await
        .unwrap();
    s.write_mfa(&o, &promoted, t0, teller()).await.unwrap();
    let kept = s
        .mfa_deadline(&o, &v.id, t0.plus_seconds(99), t0.plus_seconds(90))
        .await
        .unwrap();
    assert_eq!(kept, t0.plus_seconds(50), "never extended under required");

    // A sealed key: the first writer wins.
    let k1 = s.sealed_key("recovery_codes", b"first").await.unwrap();
    let k2 = s.sealed_key("recovery_codes", b"second").await.unwrap();
    assert_eq!(
        (k1.as_slice(), k2.as_slice()),
        (&b"first"[..], &b"first"[..])
    );
}

fn passkey(at: i64, credential: u8) -> gatehouse_domain::mfa::PasskeyFactor {
    gatehouse_domain::mfa::PasskeyFactor {
        factor: Factor {
            id: MfaId::generate(),
            kind: FactorKind::Passkey,
            name: format!("Key {credential}"),
            created_at: Timestamp::from_millis(at),
            last_used_at: None,
        },
        credential_id: vec![credential; 16],
        credential: vec![credential; 120],
        sign_count: 0,
    }
}

pub async fn passkeys_are_stored_resolved_and_counted_once(s: &dyn Store) {
    let o = new_org(s).await;
    let other = new_org(s).await;
    let u = person(s, &o, "passkey@example.com").await;
    assert_eq!(s.passkey_handle(&o, &u.id).await.unwrap(), None);

    // The first passkey gives the person their handle; later ones keep it.
    let first = passkey(1_000, 1);
    let fx = effect::of_passkey_registration(teller(), &u.id, first.clone(), vec![9; 32], &mail());
    s.write_mfa(&o, &fx, Timestamp::from_millis(1_000), teller())
        .await
        .unwrap();
    // A registration made for another handle (two first registrations at
    // once) is refused, and writes nothing.
    let stray = passkey(1_500, 7);
    let fx = effect::of_passkey_registration(teller(), &u.id, stray, vec![8; 32], &mail());
    assert!(matches!(
        s.write_mfa(&o, &fx, Timestamp::from_millis(1_500), teller())
            .await,
        Err(StoreError::Duplicate("passkey_handle"))
    ));
    let second = passkey(2_000, 2);
    let fx = effect::of_passkey_registration(teller(), &u.id, second.clone(), vec![9; 32], &mail());
    s.write_mfa(&o, &fx, Timestamp::from_millis(2_000), teller())
        .await
        .unwrap();
    assert_eq!(
        s.passkey_handle(&o, &u.id).await.unwrap(),
        Some(vec![9; 32])
    );
    let got = s.factors(&o, &u.id).await.unwrap();
    assert_eq!(got.passkeys, vec![first.clone(), second.clone()]);
    assert_eq!(got.totp, None);
    assert!(got.any());
    assert_eq!(got.possible(), mfa::Level::Phr);
    // D14 (continued): newest first.
    assert_eq!(got.listed(), vec![&second.factor, &first.factor]);
    // Another organization sees nothing of them (D2).
    assert_eq!(s.factors(&other, &u.id).await.unwrap(), Default::default());
    assert_eq!(s.passkey_handle(&other, &u.id).await.unwrap(), None);

    // A sign-in finds the passkey, its organization and person by its id.
    assert_eq!(
        s.resolve_passkey(&[1; 16]).await.unwrap(),
        Some((o.clone(), u.id.clone(), first.clone()))
    );
    assert_eq!(s.resolve_passkey(&[3; 16]).await.unwrap(), None);
    // A credential id is one passkey's, in every organization.
    let v = person(s, &other, "passkey2@example.com").await;
    let copy = passkey(3_000, 1);
    let fx = effect::of_passkey_registration(teller(), &v.id, copy, vec![6; 32], &mail());
    assert!(matches!(
        s.write_mfa(&other, &fx, Timestamp::from_millis(3_000), teller())
            .await,
        Err(StoreError::Duplicate("credential_id"))
    ));

    // The counter moves once from the value read, on every node.
    let id = &first.factor.id;
    let now = Timestamp::from_millis(4_000);
    let (a, b) = tokio::join!(
        s.accept_passkey_assertion(&o, &u.id, id, 0, 5, now),
        s.accept_passkey_assertion(&o, &u.id, id, 0, 6, now)
    );
    assert_eq!(
        [a.unwrap(), b.unwrap()].iter().filter(|x| **x).count(),
        1,
        "one assertion wins"
    );
    assert!(
        !s.accept_passkey_assertion(&o, &u.id, id, 0, 9, now)
            .await
            .unwrap()
    );
    assert!(
        !s.accept_passkey_assertion(&other, &u.id, id, 5, 9, now)
            .await
            .unwrap()
            && !s
                .accept_passkey_assertion(&other, &u.id, id, 6, 9, now)
                .await
                .unwrap(),
        "another organization moves nothing"
    );
    let after = s.factors(&o, &u.id).await.unwrap().passkeys;
    assert!([5, 6].contains(&after[0].sign_count));
    assert_eq!(after[0].factor.last_used_at, Some(now));

    // Removing one leaves the other.
    let fx = effect::of_factor_removal(
        teller(),
        &u.id,
        &first.factor,
        &mail(),
        Timestamp::from_millis(5_000),
    );
    s.write_mfa(&o, &fx, Timestamp::from_millis(5_000), teller())
        .await
        .unwrap();
    assert_eq!(
        s.factors(&o, &u.id).await.unwrap().passkeys,
        vec![second.clone()]
    );
    let events = settled(s, &o, 4).await;
    let told: Vec<_> = kinds(&events).into_iter().map(|(k, _)| k).collect();
    assert_eq!(
        told,
        [
            "user.created",
            "user.mfa_enrolled",
            "user.mfa_enrolled",
            "user.mfa_removed"
        ]
    );

    // D56: ten at most, counted by the write itself.
    for n in 0..9u8 {
        let more = passkey(6_000 + i64::from(n), 20 + n);
        let fx = effect::of_passkey_registration(teller(), &u.id, more, vec![9; 32], &mail());
        s.write_mfa(&o, &fx, Timestamp::from_millis(6_000), teller())
            .await
            .unwrap();
    }
    assert_eq!(s.factors(&o, &u.id).await.unwrap().passkeys.len(), 10);
    let eleventh = passkey(7_000, 40);
    let fx = effect::of_passkey_registration(teller(), &u.id, eleventh, vec![9; 32], &mail());
    assert!(matches!(
        s.write_mfa(&o, &fx, Timestamp::from_millis(7_000), teller())
            .await,
        Err(StoreError::Rule(
            gatehouse_domain::DomainError::LimitReached(_)
        ))
    ));
    assert_eq!(s.factors(&o, &u.id).await.unwrap().passkeys.len(), 10);
}
