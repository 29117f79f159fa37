//! Every tenant method is scoped (D2): data of organization A is neither
//! visible nor changeable through organization B. Each method that takes an
//! [`OrgId`] is called with B on A's records: it answers `None`, an empty
//! list, `false` or `NotFound`, and A's records read back unchanged.

use super::*;
use crate::StoreResult;

fn not_found<T: std::fmt::Debug>(what: &str, r: StoreResult<T>) {
    assert!(
        matches!(r, Err(StoreError::NotFound)),
        "{what} through another organization: {r:?}"
    );
}

pub async fn every_tenant_method_is_scoped(s: &dyn Store) {
    let a = new_org(s).await;
    let b = new_org(s).await;
    let now = Timestamp::now();

    // --- organizations: B's flag is B's alone -------------------------------
    s.set_v2_preview(&b, true).await.unwrap();
    assert!(!s.v2_preview(&a).await.unwrap());

    // --- users ----------------------------------------------------------------
    let admin = s
        .insert_user(
            &a,
            &user("boss@example.com", Role::Admin, UserStatus::Active, 1),
            crate::conformance::teller(),
        )
        .await
        .unwrap();
    let pending = s
        .insert_user(
            &a,
            &user(
                "new@example.com",
                Role::Editor,
                UserStatus::PendingInvite,
                2,
            ),
            crate::conformance::teller(),
        )
        .await
        .unwrap();
    for id in [&admin.id, &pending.id] {
        assert_eq!(s.get_user(&b, id).await.unwrap(), None);
    }
    let all = UserFilter::default();
    assert_eq!(
        s.list_users(&b, &all, Page::default()).await.unwrap().total,
        0
    );
    assert_eq!(
        s.list_users_after(&b, &all, Some(&admin.id), 10)
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        s.list_users_after(&b, &all, None, 10).await.unwrap(),
        Some(vec![])
    );
    let email = Email::parse("boss@example.com").unwrap();
    assert!(s.find_user_by_email(&b, &email).await.unwrap().is_none());
    let off = UserPatch {
        status: Some(UserStatus::Inactive),
        ..Default::default()
    };
    not_found(
        "update_user",
        s.update_user(&b, &admin.id, &off, now, teller()).await,
    );
    not_found(
        "delete_user_at",
        s.delete_user_at(&b, &pending.id, None, now, teller()).await,
    );

    // --- links and invitations ------------------------------------------------
    let backlog = s.outbox_backlog().await.unwrap();
    not_found(
        "reissue_invitation",
        s.reissue_invitation(
            &b,
            &pending.id,
            &link(70, now.plus_seconds(3600), "new@example.com"),
            crate::conformance::teller(),
        )
        .await,
    );
    assert!(
        !s.request_password_reset(
            &b,
            &email,
            &link(71, now.plus_seconds(3600), "boss@example.com"),
            None,
        )
        .await
        .unwrap()
    );
    assert_eq!(
        s.resolve_link(LinkKind::Invitation, &[70; 32])
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        s.resolve_link(LinkKind::Reset, &[71; 32]).await.unwrap(),
        None
    );
    assert_eq!(
        s.outbox_backlog().await.unwrap(),
        backlog,
        "no e-mail queued"
    );

    // --- products -------------------------------------------------------------
    let p = s
        .insert_product(
            &a,
            &product("Anvil", "ANV-1", 3),
            now,
            crate::conformance::teller(),
        )
        .await
        .unwrap();
    assert_eq!(s.get_product(&b, &p.id).await.unwrap(), None);
    let any = ProductFilter::default();
    assert_eq!(
        s.list_products(&b, &any, Page::default())
            .await
            .unwrap()
            .total,
        0
    );
    assert_eq!(
        s.list_products_after(&b, &any, Some(&p.id), 10)
            .await
            .unwrap(),
        None
    );
    let restock = ProductPatch {
        stock: Some(99),
        ..Default::default()
    };
    not_found(
        "update_product",
        s.update_product(&b, &p.id, &restock, now, crate::conformance::teller())
            .await,
    );
    not_found(
        "delete_product",
        s.delete_product(&b, &p.id, Timestamp::now(), crate::conformance::teller())
            .await,
    );
    assert_eq!(s.get_product(&a, &p.id).await.unwrap(), Some(p.clone()));

    // --- client applications --------------------------------------------------
    let c = s
        .insert_client(&a, &client(Some(admin.id.clone())), teller())
        .await
        .unwrap();
    not_found("approve_admin", s.approve_admin(&b, &c.id, teller()).await);
    not_found(
        "rotate_client_secret",
        s.rotate_client_secret(&b, &c.id, &[8; 32], None, teller())
            .await,
    );
    assert_eq!(s.resolve_client(&c.id).await.unwrap(), Some(c.clone()));

    // --- API keys ---------------------------------------------------------------
    let k = ApiKey {
        id: ApiKeyId::generate(),
        org: a.clone(),
        name: "ci".into(),
        scopes: ScopeSet::parse("products:read").unwrap(),
        created_at: Timestamp::from_millis(5),
        prefix: String::new(),
        owner: None,
        expires_at: None,
        last_used_at: None,
        revoked_at: None,
    };
    // A record of A written through B is refused, and nothing is stored.
    assert!(s.insert_api_key(&b, &k, &[72; 32], teller()).await.is_err());
    assert_eq!(s.resolve_api_key(&[72; 32]).await.unwrap(), None);
    s.insert_api_key(&a, &k, &[72; 32], teller()).await.unwrap();
    not_found(
        "revoke_api_key",
        s.revoke_api_key(&b, &k.id, now, teller()).await,
    );
    assert_eq!(s.get_api_key(&b, &k.id).await.unwrap(), None, "get_api_key");
    assert_eq!(s.get_api_key(&a, &k.id).await.unwrap(), Some(k.clone()));
    // D46: usage counts are read under their own organization only.
    let counted = crate::Credential::Application(c.id.clone());
    s.add_usage(&[crate::UsageCount {
        org: a.clone(),
        credential: counted.clone(),
        minute: 3,
        requests: 2,
        rejected: 1,
    }])
    .await
    .unwrap();
    let range = gatehouse_domain::UsageRange {
        from_minute: 0,
        to_minute: 10,
    };
    assert!(
        s.usage(&b, &counted, range).await.unwrap().is_empty(),
        "usage"
    );
    assert_eq!(s.usage(&a, &counted, range).await.unwrap().len(), 1);
    assert_eq!(s.resolve_api_key(&[72; 32]).await.unwrap(), Some(k.clone()));

    // --- sessions, codes, refresh chains and their revocation -------------------
    let sess = session(&a, &admin.id, now, now.plus_seconds(3600));
    assert!(s.create_session(&b, &[73; 32], &sess, &[]).await.is_err());
    assert_eq!(s.resolve_session(&[73; 32]).await.unwrap(), None);
    let code = AuthCode {
        authn: None,
        digest: [74; 32],
        org: a.clone(),
        client: c.id.clone(),
        user: admin.id.clone(),
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
    assert!(s.insert_auth_code(&b, &code).await.is_err());
    assert_eq!(s.resolve_auth_code(&[74; 32]).await.unwrap(), None);
    s.insert_auth_code(&a, &code).await.unwrap();
    s.redeem_auth_code(
        &[74; 32],
        now,
        &chain_for(&a, &c.id, &admin.id, now, "scoped"),
        &rt(75, "scoped", now),
    )
    .await
    .unwrap();
    let seen = s.revocations_since(0, now).await.unwrap().len();
    not_found(
        "revoke_chain",
        s.revoke_chain(&b, &cid("scoped"), now, now.plus_seconds(3660))
            .await,
    );
    let (_, chain) = s.resolve_refresh_token(&[75; 32]).await.unwrap().unwrap();
    assert_eq!(chain.revoked_at, None, "the chain of A is not revoked");
    assert_eq!(
        s.revocations_since(0, now).await.unwrap().len(),
        seen,
        "no revocation was written"
    );
    // Through its own organization it is.
    s.revoke_chain(&a, &cid("scoped"), now, now.plus_seconds(3660))
        .await
        .unwrap();
    let (_, chain) = s.resolve_refresh_token(&[75; 32]).await.unwrap().unwrap();
    assert_eq!(chain.revoked_at, Some(now));

    // --- login failures ---------------------------------------------------------
    s.record_login_failure(&a, "boss@example.com", "10.0.0.1", now)
        .await
        .unwrap();
    assert!(
        s.login_failures(&b, "boss@example.com", now.plus_seconds(-60))
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        s.login_failures(&a, "boss@example.com", now.plus_seconds(-60))
            .await
            .unwrap()
            .len(),
        1
    );

    // --- A's users are as they were --------------------------------------------
    assert_eq!(s.get_user(&a, &admin.id).await.unwrap(), Some(admin));
    assert_eq!(s.get_user(&a, &pending.id).await.unwrap(), Some(pending));
    assert!(s.find_user_by_email(&a, &email).await.unwrap().is_some());
}
