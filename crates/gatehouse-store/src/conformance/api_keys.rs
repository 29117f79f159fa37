//! API keys.

use super::*;

pub async fn api_keys(s: &dyn Store) {
    let o = new_org(s).await;
    let other = new_org(s).await;
    let k = ApiKey {
        id: ApiKeyId::generate(),
        org: o.clone(),
        name: "ci".into(),
        scopes: ScopeSet::parse("products:read").unwrap(),
        created_at: Timestamp::from_millis(5),
        prefix: String::new(),
        owner: None,
        expires_at: None,
        last_used_at: None,
        revoked_at: None,
    };
    s.insert_api_key(&k.org, &k, &[9; 32], teller())
        .await
        .unwrap();
    assert_eq!(s.resolve_api_key(&[9; 32]).await.unwrap(), Some(k.clone()));
    assert_eq!(s.resolve_api_key(&[8; 32]).await.unwrap(), None);
    assert_eq!(
        s.operator_find_api_key(&k.id).await.unwrap(),
        Some(k.clone())
    );
    assert!(matches!(
        s.revoke_api_key(&other, &k.id, Timestamp::from_millis(7), teller())
            .await,
        Err(StoreError::NotFound)
    ));
    let r = s
        .revoke_api_key(&o, &k.id, Timestamp::from_millis(7), teller())
        .await
        .unwrap();
    assert_eq!(r.revoked_at, Some(Timestamp::from_millis(7)));
    let again = s
        .revoke_api_key(&o, &k.id, Timestamp::from_millis(9), teller())
        .await
        .unwrap();
    assert_eq!(again.revoked_at, Some(Timestamp::from_millis(7)));
    assert_eq!(
        s.resolve_api_key(&[9; 32])
            .await
            .unwrap()
            .unwrap()
            .revoked_at,
        Some(Timestamp::from_millis(7))
    );
}

/// D46: keys remember owner, prefix and expiry; usage adds up across
/// flushes (several nodes) and moves `last_used_at`; a person's keys die
/// with their deactivation or deletion, and a demotion revokes those
/// carrying a scope the new role lacks.
pub async fn d46_keys_usage_and_owner_cuts(s: &dyn Store) {
    let o = new_org(s).await;
    let admin = s
        .insert_user(
            &o,
            &user("ka@example.com", Role::Admin, UserStatus::Active, 1),
            crate::conformance::teller(),
        )
        .await
        .unwrap();
    let ed = s
        .insert_user(
            &o,
            &user("ke@example.com", Role::Editor, UserStatus::Active, 2),
            crate::conformance::teller(),
        )
        .await
        .unwrap();
    let ed2 = s
        .insert_user(
            &o,
            &user("kf@example.com", Role::Editor, UserStatus::Active, 3),
            crate::conformance::teller(),
        )
        .await
        .unwrap();
    let key = |owner: &UserId, scopes: &str, d: u8| {
        let k = ApiKey {
            id: ApiKeyId::generate(),
            org: o.clone(),
            name: format!("k{d}"),
            scopes: ScopeSet::parse(scopes).unwrap(),
            prefix: "gk_live_abcd".into(),
            owner: Some(owner.clone()),
            expires_at: Some(Timestamp::from_millis(9_000_000_000_000)),
            created_at: Timestamp::from_millis(i64::from(d)),
            last_used_at: None,
            revoked_at: None,
        };
        (k, [d; 32])
    };
    let (read, read_d) = key(&ed.id, "products:read", 31);
    let (write, write_d) = key(&ed.id, "products:write", 32);
    let (other, other_d) = key(&ed2.id, "products:read", 33);
    for (k, d) in [(&read, &read_d), (&write, &write_d), (&other, &other_d)] {
        s.insert_api_key(&o, k, d, teller()).await.unwrap();
    }
    assert_eq!(
        s.get_api_key(&o, &read.id).await.unwrap(),
        Some(read.clone())
    );

    // Usage: two flushes of the same minute add up; the key's last use moves.
    let count = |minute, requests, rejected| crate::UsageCount {
        org: o.clone(),
        credential: crate::Credential::ApiKey(read.id.clone()),
        minute,
        requests,
        rejected,
    };
    s.add_usage(&[count(100, 3, 1), count(101, 1, 0)])
        .await
        .unwrap();
    s.add_usage(&[count(100, 2, 2)]).await.unwrap();
    let range = gatehouse_domain::UsageRange {
        from_minute: 99,
        to_minute: 102,
    };
    let got = s
        .usage(&o, &crate::Credential::ApiKey(read.id.clone()), range)
        .await
        .unwrap();
    assert_eq!(
        got.iter()
            .map(|m| (m.minute, m.requests, m.rejected))
            .collect::<Vec<_>>(),
        vec![(100, 5, 3), (101, 1, 0)]
    );
    assert_eq!(
        s.get_api_key(&o, &read.id)
            .await
            .unwrap()
            .unwrap()
            .last_used_at,
        Some(Timestamp::from_millis(101 * 60_000))
    );

    // Demotion to viewer: the products:write key dies, the read key lives.
    let at = Timestamp::from_millis(50_000);
    s.update_user(
        &o,
        &ed.id,
        &UserPatch {
            role: Some(Role::Viewer),
            ..Default::default()
        },
        at,
        teller(),
    )
    .await
    .unwrap();
    assert_eq!(
        revoked_at(s, &o, &write).await,
        Some(at),
        "demotion revokes a key beyond the new role"
    );
    assert_eq!(revoked_at(s, &o, &read).await, None);
    // Deactivation: every key of theirs dies; another person's lives.
    s.update_user(
        &o,
        &ed.id,
        &UserPatch {
            status: Some(UserStatus::Inactive),
            ..Default::default()
        },
        Timestamp::from_millis(60_000),
        teller(),
    )
    .await
    .unwrap();
    assert_eq!(
        revoked_at(s, &o, &read).await,
        Some(Timestamp::from_millis(60_000))
    );
    assert_eq!(
        revoked_at(s, &o, &write).await,
        Some(at),
        "the first revocation time stays"
    );
    assert_eq!(revoked_at(s, &o, &other).await, None);
    // Deletion: the keys of the deleted person die.
    s.delete_user_at(&o, &ed2.id, None, Timestamp::from_millis(70_000), teller())
        .await
        .unwrap();
    assert_eq!(
        revoked_at(s, &o, &other).await,
        Some(Timestamp::from_millis(70_000))
    );
    let _ = admin;
}

async fn revoked_at(s: &dyn Store, o: &OrgId, k: &ApiKey) -> Option<Timestamp> {
    s.get_api_key(o, &k.id).await.unwrap().unwrap().revoked_at
}
