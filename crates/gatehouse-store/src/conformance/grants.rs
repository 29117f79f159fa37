//! Sessions, login failures, authorization codes and refresh chains.

use super::*;

pub async fn sessions_and_login_failures(s: &dyn Store) {
    let o = new_org(s).await;
    let now = Timestamp::now();
    let u = s
        .insert_user(
            &o,
            &user("s@example.com", Role::Editor, UserStatus::Active, 1),
            crate::conformance::teller(),
        )
        .await
        .unwrap();
    let sess = session(&o, &u.id, now, now.plus_seconds(3600));
    s.create_session(&o, &[1; 32], &sess, &[]).await.unwrap();
    assert_eq!(
        s.resolve_session(&[1; 32]).await.unwrap(),
        Some(sess.clone())
    );
    assert_eq!(s.resolve_session(&[9; 32]).await.unwrap(), None);
    let off = UserPatch {
        status: Some(UserStatus::Inactive),
        ..Default::default()
    };
    s.update_user(&o, &u.id, &off, now, teller()).await.unwrap();
    assert_eq!(
        s.resolve_session(&[1; 32]).await.unwrap(),
        None,
        "deactivation ends sessions"
    );
    for (src, at) in [("1.1.1.1", 10), ("2.2.2.2", 20), ("1.1.1.1", 30)] {
        s.record_login_failure(&o, "s@example.com", src, now.plus_seconds(at))
            .await
            .unwrap();
    }
    let f = s
        .login_failures(&o, "s@example.com", now.plus_seconds(15))
        .await
        .unwrap();
    assert_eq!(
        f,
        vec![
            ("2.2.2.2".to_owned(), now.plus_seconds(20)),
            ("1.1.1.1".to_owned(), now.plus_seconds(30))
        ]
    );
    assert!(
        s.login_failures(&new_org(s).await, "s@example.com", now)
            .await
            .unwrap()
            .is_empty()
    );
}

/// D48 (continued): a one-time value is spent once, whoever races for it;
/// another value is unaffected; an expired one is purged (and nothing else).
pub async fn one_time_values_are_spent_once(s: &dyn Store) {
    let now = Timestamp::now();
    let live = now.plus_seconds(120);
    let (a, b) = ([7u8; 32], [8u8; 32]);
    let tries = tokio::join!(
        s.use_once(&a, live),
        s.use_once(&a, live),
        s.use_once(&a, live),
        s.use_once(&a, live)
    );
    let won = [tries.0, tries.1, tries.2, tries.3]
        .into_iter()
        .filter(|r| *r.as_ref().unwrap())
        .count();
    assert_eq!(won, 1, "exactly one of four concurrent spends wins");
    assert!(!s.use_once(&a, live).await.unwrap(), "spent is spent");
    assert!(s.use_once(&b, now.plus_seconds(-1)).await.unwrap());
    s.purge_expired(now, 100).await.unwrap();
    assert!(
        !s.use_once(&a, live).await.unwrap(),
        "a live value survives the purge"
    );
    assert!(
        s.use_once(&b, live).await.unwrap(),
        "an expired value was purged (its code or choice is refused on its expiry anyway)"
    );
}

pub async fn codes_redeem_once(s: &dyn Store) {
    let o = new_org(s).await;
    let now = Timestamp::now();
    let u = s
        .insert_user(
            &o,
            &user("c@example.com", Role::Editor, UserStatus::Active, 1),
            crate::conformance::teller(),
        )
        .await
        .unwrap();
    let c = s.insert_client(&o, &client(None), teller()).await.unwrap();
    let code = auth_code(3, &o, &c.id, &u.id, now);
    s.insert_auth_code(&code.org, &code).await.unwrap();
    assert_eq!(
        s.resolve_auth_code(&[3; 32]).await.unwrap(),
        Some(code.clone())
    );
    let ch = chain_for(&o, &c.id, &u.id, now, "chaincode");
    assert_eq!(
        s.redeem_auth_code(&[3; 32], now, &ch, &rt(4, "chaincode", now))
            .await
            .unwrap(),
        Redeemed::Fresh
    );
    assert!(s.resolve_refresh_token(&[4; 32]).await.unwrap().is_some());
    let ch2 = chain_for(&o, &c.id, &u.id, now, "chaincode2");
    assert_eq!(
        s.redeem_auth_code(&[3; 32], now, &ch2, &rt(5, "chaincode2", now))
            .await
            .unwrap(),
        Redeemed::Reused(Some(cid("chaincode")))
    );
    assert!(
        s.resolve_refresh_token(&[5; 32]).await.unwrap().is_none(),
        "a second redemption writes nothing"
    );
    let used = s.resolve_auth_code(&[3; 32]).await.unwrap().unwrap();
    assert_eq!(
        (used.used_at, used.chain.as_ref().map(ChainId::as_str)),
        (Some(now), Some("chaincode"))
    );
}

pub async fn refresh_rotation_is_atomic(s: &dyn Store) {
    let o = new_org(s).await;
    let now = Timestamp::now();
    let u = s
        .insert_user(
            &o,
            &user("r@example.com", Role::Editor, UserStatus::Active, 1),
            crate::conformance::teller(),
        )
        .await
        .unwrap();
    let c = s.insert_client(&o, &client(None), teller()).await.unwrap();
    let code = AuthCode {
        authn: None,
        digest: [9; 32],
        org: o.clone(),
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
    s.redeem_auth_code(
        &[9; 32],
        now,
        &chain_for(&o, &c.id, &u.id, now, "ch"),
        &rt(10, "ch", now),
    )
    .await
    .unwrap();
    let (tok, ch) = s.resolve_refresh_token(&[10; 32]).await.unwrap().unwrap();
    assert_eq!(
        (
            tok.chain.as_str(),
            ch.user.clone(),
            ch.revoked_at,
            tok.access_jti.as_ref().map(Jti::as_str)
        ),
        ("ch", u.id.clone(), None, Some("jti10"))
    );
    let until = now.plus_seconds(10);
    let access_expiry = now.plus_seconds(3660);
    assert!(matches!(
        s.rotate_refresh_token(
            &[10; 32],
            &c.id,
            now,
            b"sealed-pair",
            until,
            &rt(11, "ch", now),
            access_expiry
        )
        .await
        .unwrap(),
        Rotated::Fresh(Some(_))
    ));
    match s
        .rotate_refresh_token(
            &[10; 32],
            &c.id,
            now,
            b"other",
            until,
            &rt(12, "ch", now),
            access_expiry,
        )
        .await
        .unwrap()
    {
        Rotated::AlreadyUsed(t) => {
            assert_eq!(t.successor_sealed.as_deref(), Some(&b"sealed-pair"[..]));
            assert_eq!((t.used_at, t.successor_until), (Some(now), Some(until)));
        }
        other => panic!("{other:?}"),
    }
    assert!(
        s.resolve_refresh_token(&[12; 32]).await.unwrap().is_none(),
        "the loser writes no successor"
    );
    // The grace window ends: the pair is erased.
    assert_eq!(s.erase_expired_successors(until).await.unwrap(), 1);
    let (t, _) = s.resolve_refresh_token(&[10; 32]).await.unwrap().unwrap();
    assert_eq!(t.successor_sealed, None);
    // Revoking the chain: its tokens cannot rotate, and a Chain revocation is written once.
    let last = s
        .revocations_since(0, now)
        .await
        .unwrap()
        .last()
        .map_or(0, |r| r.id);
    s.revoke_chain(&o, &cid("ch"), now, now.plus_seconds(3660))
        .await
        .unwrap();
    s.revoke_chain(&o, &cid("ch"), now, now.plus_seconds(3660))
        .await
        .unwrap();
    let revs = s.revocations_since(last, now).await.unwrap();
    assert_eq!(revs.len(), 1);
    assert_eq!(
        (revs[0].kind, revs[0].subject.as_str()),
        (RevocationKind::Chain, "ch")
    );
    assert!(matches!(
        s.rotate_refresh_token(
            &[11; 32],
            &c.id,
            now,
            b"p",
            until,
            &rt(13, "ch", now),
            access_expiry
        )
        .await
        .unwrap(),
        Rotated::AlreadyUsed(_)
    ));
    assert!(
        s.resolve_refresh_token(&[11; 32])
            .await
            .unwrap()
            .unwrap()
            .1
            .revoked_at
            .is_some()
    );
    // Deleting the user removes the chains with them.
    s.delete_user_at(&o, &u.id, None, now, teller())
        .await
        .unwrap();
    assert!(s.resolve_refresh_token(&[11; 32]).await.unwrap().is_none());
}

/// D24: "a refresh makes the previous access token of the chain invalid",
/// written by the rotation's own transaction, so no crash can leave the
/// replaced access token alive; a rotation that fails writes nothing.
pub async fn refresh_rotation_revokes_the_replaced_access_token(s: &dyn Store) {
    let o = new_org(s).await;
    let now = Timestamp::now();
    let u = s
        .insert_user(
            &o,
            &user("rot@example.com", Role::Editor, UserStatus::Active, 1),
            crate::conformance::teller(),
        )
        .await
        .unwrap();
    let c = s.insert_client(&o, &client(None), teller()).await.unwrap();
    let other = s.insert_client(&o, &client(None), teller()).await.unwrap();
    let code = AuthCode {
        authn: None,
        digest: [40; 32],
        org: o.clone(),
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
    s.redeem_auth_code(
        &[40; 32],
        now,
        &chain_for(&o, &c.id, &u.id, now, "rot"),
        &rt(41, "rot", now),
    )
    .await
    .unwrap();
    let last = |revs: Vec<Revocation>| revs.last().map_or(0, |r| r.id);
    let before = last(s.revocations_since(0, now).await.unwrap());
    let until = now.plus_seconds(10);
    let access_expiry = now.plus_seconds(3660);

    // Another client's rotation: refused, nothing written or changed.
    assert!(matches!(
        s.rotate_refresh_token(
            &[41; 32],
            &other.id,
            now,
            b"pair",
            until,
            &rt(42, "rot", now),
            access_expiry
        )
        .await,
        Err(StoreError::NotFound)
    ));
    assert_eq!(s.revocations_since(before, now).await.unwrap(), vec![]);
    assert!(s.resolve_refresh_token(&[42; 32]).await.unwrap().is_none());
    let (t, _) = s.resolve_refresh_token(&[41; 32]).await.unwrap().unwrap();
    assert_eq!((t.used_at, t.successor_sealed), (None, None));

    // The winning rotation: the revocation of `jti41` is committed with it
    // and returned as written.
    let written = match s
        .rotate_refresh_token(
            &[41; 32],
            &c.id,
            now,
            b"pair",
            until,
            &rt(42, "rot", now),
            access_expiry,
        )
        .await
        .unwrap()
    {
        Rotated::Fresh(Some(r)) => r,
        other => panic!("{other:?}"),
    };
    let revs = s.revocations_since(before, now).await.unwrap();
    assert_eq!(revs, vec![written.clone()]);
    assert_eq!(
        (
            written.kind,
            written.subject.as_str(),
            written.cutoff,
            written.expires_at
        ),
        (
            RevocationKind::Jti,
            "jti41",
            now.unix_seconds(),
            access_expiry
        )
    );
    let after = written.id;

    // A used token: nothing more is written, the stored state is unchanged.
    match s
        .rotate_refresh_token(
            &[41; 32],
            &c.id,
            now,
            b"second",
            until,
            &rt(43, "rot", now),
            access_expiry,
        )
        .await
        .unwrap()
    {
        Rotated::AlreadyUsed(t) => assert_eq!(t.successor_sealed.as_deref(), Some(&b"pair"[..])),
        other => panic!("{other:?}"),
    }
    assert_eq!(s.revocations_since(after, now).await.unwrap(), vec![]);
    assert!(s.resolve_refresh_token(&[43; 32]).await.unwrap().is_none());

    // A revoked chain: the successor is not rotated and no `Jti` record appears.
    s.revoke_chain(&o, &cid("rot"), now, access_expiry)
        .await
        .unwrap();
    let after = last(s.revocations_since(0, now).await.unwrap());
    assert!(matches!(
        s.rotate_refresh_token(
            &[42; 32],
            &c.id,
            now,
            b"third",
            until,
            &rt(44, "rot", now),
            access_expiry
        )
        .await
        .unwrap(),
        Rotated::AlreadyUsed(_)
    ));
    assert_eq!(s.revocations_since(after, now).await.unwrap(), vec![]);
    let (t, _) = s.resolve_refresh_token(&[42; 32]).await.unwrap().unwrap();
    assert_eq!(t.used_at, None);
    assert!(s.resolve_refresh_token(&[44; 32]).await.unwrap().is_none());

    // An unknown token is `NotFound`.
    assert!(matches!(
        s.rotate_refresh_token(
            &[45; 32],
            &c.id,
            now,
            b"x",
            until,
            &rt(46, "rot", now),
            access_expiry
        )
        .await,
        Err(StoreError::NotFound)
    ));
}

/// D49: a code and its chain keep the nonce, sign-in time and session; the
/// live chains of a session or of a person and an application are found
/// (and no longer once revoked); consents are remembered, widened,
/// listed and forgotten per organization; `email_verified` starts false.
pub async fn oidc_sessions_chains_and_consents(s: &dyn Store) {
    let o = new_org(s).await;
    let other = new_org(s).await;
    let now = Timestamp::from_millis(Timestamp::now().millis());
    let u = s
        .insert_user(
            &o,
            &user("oidc@example.com", Role::Viewer, UserStatus::Active, 1),
            crate::conformance::teller(),
        )
        .await
        .unwrap();
    let c = s.insert_client(&o, &client(None), teller()).await.unwrap();
    // D57: a chain begins only in a session that exists.
    let sess = session(&o, &u.id, now, now.plus_seconds(3600));
    s.create_session(&o, &[40; 32], &sess, &[]).await.unwrap();
    let sid = sess.id.to_string();
    let code = AuthCode {
        authn: None,
        digest: [41; 32],
        org: o.clone(),
        client: c.id.clone(),
        user: u.id.clone(),
        redirect_uri: "https://app.example.com/cb".into(),
        scopes: ScopeSet::parse("openid email").unwrap(),
        code_challenge: "abc".into(),
        created_at: now,
        expires_at: now.plus_seconds(300),
        used_at: None,
        chain: None,
        nonce: Some("n-1".into()),
        auth_time: Some(now),
        sid: Some(sid.clone()),
    };
    s.insert_auth_code(&o, &code).await.unwrap();
    assert_eq!(s.resolve_auth_code(&[41; 32]).await.unwrap(), Some(code));
    let mut ch = chain_for(&o, &c.id, &u.id, now, "chainoidc");
    ch.auth_time = Some(now);
    ch.sid = Some(sid.clone());
    s.redeem_auth_code(&[41; 32], now, &ch, &rt(42, "chainoidc", now))
        .await
        .unwrap();
    let (_, read) = s.resolve_refresh_token(&[42; 32]).await.unwrap().unwrap();
    assert_eq!(read.auth_time, Some(now));
    assert_eq!(read.sid.as_deref(), Some(sid.as_str()));
    let by_session = ChainFilter::Session(sid.clone());
    let by_pair = ChainFilter::UserClient(u.id.clone(), c.id.clone());
    assert_eq!(
        s.live_chains(&o, &by_session).await.unwrap(),
        vec![ch.id.clone()]
    );
    assert_eq!(
        s.live_chains(&o, &by_pair).await.unwrap(),
        vec![ch.id.clone()]
    );
    assert!(s.live_chains(&other, &by_session).await.unwrap().is_empty());
    assert!(
        s.live_chains(&o, &ChainFilter::Session("ses_other".into()))
            .await
            .unwrap()
            .is_empty()
    );
    s.revoke_chain(&o, &ch.id, now, now.plus_seconds(3660))
        .await
        .unwrap();
    assert!(s.live_chains(&o, &by_session).await.unwrap().is_empty());
    assert!(s.live_chains(&o, &by_pair).await.unwrap().is_empty());

    assert_eq!(s.consent(&o, &u.id, &c.id).await.unwrap(), None);
    let first = ScopeSet::parse("openid profile").unwrap();
    s.remember_consent(&o, &u.id, &c.id, first, now)
        .await
        .unwrap();
    let later = now.plus_seconds(5);
    s.remember_consent(&o, &u.id, &c.id, ScopeSet::parse("email").unwrap(), later)
        .await
        .unwrap();
    let got = s.consent(&o, &u.id, &c.id).await.unwrap().unwrap();
    assert_eq!(got.scopes, ScopeSet::parse("openid profile email").unwrap());
    assert_eq!(got.created_at, now);
    assert_eq!(got.last_used_at, later);
    assert_eq!(s.list_consents(&o, &u.id).await.unwrap(), vec![got]);
    // Another organization sees and writes nothing of it.
    assert_eq!(s.consent(&other, &u.id, &c.id).await.unwrap(), None);
    assert!(s.list_consents(&other, &u.id).await.unwrap().is_empty());
    assert!(
        !s.forget_consent(&other, &u.id, &c.id, teller())
            .await
            .unwrap()
    );
    s.remember_consent(&other, &u.id, &c.id, first, now)
        .await
        .unwrap();
    assert_eq!(
        s.consent(&o, &u.id, &c.id).await.unwrap().unwrap().scopes,
        ScopeSet::parse("openid profile email").unwrap()
    );
    assert!(s.forget_consent(&o, &u.id, &c.id, teller()).await.unwrap());
    assert!(!s.forget_consent(&o, &u.id, &c.id, teller()).await.unwrap());
    assert_eq!(s.consent(&o, &u.id, &c.id).await.unwrap(), None);

    assert!(!s.email_verified(&o, &u.id).await.unwrap());
    assert!(!s.email_verified(&other, &u.id).await.unwrap());
}
