//! What token introspection (D49) and the mock's fixture (D53) ask of a
//! backend: the refresh-token look-up is read-only, and a fixture can carry
//! its users' password hash.

use super::*;

/// D49: introspecting never uses up or replays a refresh token — the
/// look-up it uses, [`GrantStore::resolve_refresh_token`], writes nothing,
/// however often it runs: the token is then rotated as if never looked at.
///
/// [`GrantStore::resolve_refresh_token`]: crate::GrantStore::resolve_refresh_token
pub async fn refresh_token_lookup_is_read_only(s: &dyn Store) {
    let o = new_org(s).await;
    let now = Timestamp::now();
    let u = s
        .insert_user(
            &o,
            &user("look@example.com", Role::Viewer, UserStatus::Active, 1),
            crate::conformance::teller(),
        )
        .await
        .unwrap();
    let c = s.insert_client(&o, &client(None), teller()).await.unwrap();
    let code = AuthCode {
        authn: None,
        digest: [91; 32],
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
        &[91; 32],
        now,
        &chain_for(&o, &c.id, &u.id, now, "chlook"),
        &rt(92, "chlook", now),
    )
    .await
    .unwrap();
    let first = s.resolve_refresh_token(&[92; 32]).await.unwrap().unwrap();
    for _ in 0..3 {
        let again = s.resolve_refresh_token(&[92; 32]).await.unwrap().unwrap();
        assert_eq!(again, first, "a look-up changes nothing");
    }
    assert_eq!(
        (first.0.used_at, first.0.successor_sealed.as_deref()),
        (None, None)
    );
    assert_eq!(first.1.client, c.id, "the chain names its client");
    // Still the first use: the rotation wins as for a token never looked at.
    assert!(matches!(
        s.rotate_refresh_token(
            &[92; 32],
            &c.id,
            now,
            b"pair",
            now.plus_seconds(10),
            &rt(93, "chlook", now),
            now.plus_seconds(3660),
        )
        .await
        .unwrap(),
        Rotated::Fresh(_)
    ));
    let (used, _) = s.resolve_refresh_token(&[92; 32]).await.unwrap().unwrap();
    assert_eq!(used.used_at, Some(now));
}

/// D53: in the mock every fixture user gets the fixture's password hash;
/// the standard fixture (staging, D33) sets none.
pub async fn fixture_users_get_the_fixture_password(s: &dyn Store) {
    use gatehouse_domain::Fixture;
    let with = new_org(s).await;
    let without = new_org(s).await;
    let hash = "$argon2id$v=19$m=19456,t=2,p=1$c2FsdHNhbHQ$aGFzaGhhc2hoYXNo".to_owned();
    let fixture = Fixture::standard().with_password_hash(hash.clone());
    s.reset_to_fixture(Some(&with), &fixture, Timestamp::now(), None)
        .await
        .unwrap();
    s.reset_to_fixture(Some(&without), &Fixture::standard(), Timestamp::now(), None)
        .await
        .unwrap();
    for f in &fixture.users {
        let (_, got) = s
            .find_user_by_email(&with, &f.email)
            .await
            .unwrap()
            .expect("a fixture user");
        assert_eq!(got.as_deref(), Some(hash.as_str()), "{}", f.email.as_str());
        let (_, none) = s
            .find_user_by_email(&without, &f.email)
            .await
            .unwrap()
            .expect("a fixture user");
        assert_eq!(none, None, "{}", f.email.as_str());
    }
}
