//! Strict decoding: a corrupt row of any aggregate is an internal error.

use super::*;

/// A value a row cannot hold (an unknown enum text, a digest of the wrong
/// length, an unparsable id, an unknown scope bit) reads as `StoreError::Internal` naming the
/// table, column and row, never as a default value.
pub async fn corrupt_rows_are_internal_errors<S: PlantRows>(s: &S) {
    let o = new_org(s).await;
    let now = Timestamp::now();
    let owner = s
        .insert_user(
            &o,
            &user("owner@example.com", Role::Editor, UserStatus::Active, 1),
            crate::conformance::teller(),
        )
        .await
        .unwrap();
    s.plant(&format!(
        "UPDATE users SET role = 'owner' WHERE id = '{}'",
        owner.id
    ))
    .await;
    assert_corrupt(
        s.get_user(&o, &owner.id).await,
        "users",
        "role",
        owner.id.as_str(),
    );
    assert_corrupt(
        s.list_users(&o, &UserFilter::default(), Page::default())
            .await,
        "users",
        "role",
        owner.id.as_str(),
    );
    assert_corrupt(
        s.find_user_by_email(&o, &owner.email).await,
        "users",
        "role",
        owner.id.as_str(),
    );

    let o = new_org(s).await;
    let odd = s
        .insert_user(
            &o,
            &user("odd@example.com", Role::Viewer, UserStatus::Active, 2),
            crate::conformance::teller(),
        )
        .await
        .unwrap();
    s.plant(&format!(
        "UPDATE users SET status = 'suspended' WHERE id = '{}'",
        odd.id
    ))
    .await;
    assert_corrupt(
        s.get_user(&o, &odd.id).await,
        "users",
        "status",
        odd.id.as_str(),
    );

    let p = s
        .insert_product(
            &o,
            &product("Odd socks", "ODD-1", 1),
            now,
            crate::conformance::teller(),
        )
        .await
        .unwrap();
    s.plant(&format!(
        "UPDATE products SET status = 'bogus' WHERE id = '{}'",
        p.id
    ))
    .await;
    assert_corrupt(
        s.get_product(&o, &p.id).await,
        "products",
        "status",
        p.id.as_str(),
    );
    // Its own organization, so the list meets only this corrupt row.
    let o = new_org(s).await;
    let q = s
        .insert_product(
            &o,
            &product("Odd hat", "ODD-2", 1),
            now,
            crate::conformance::teller(),
        )
        .await
        .unwrap();
    s.plant(&format!(
        "UPDATE products SET id = 'prod_not-an-id' WHERE id = '{}'",
        q.id
    ))
    .await;
    assert_corrupt(
        s.list_products(&o, &ProductFilter::default(), Page::default())
            .await,
        "products",
        "id",
        "prod_not-an-id",
    );

    let c = s.insert_client(&o, &client(None), teller()).await.unwrap();
    s.plant(&format!(
        "UPDATE clients SET secret_hash = substr(secret_hash, 1, 31) WHERE id = '{}'",
        c.id
    ))
    .await;
    assert_corrupt(
        s.resolve_client(&c.id).await,
        "clients",
        "secret_hash",
        c.id.as_str(),
    );
    // A scope bit no scope has (the sign bit of PostgreSQL's smallint,
    // bit 15 once read): not silently dropped.
    let c = s.insert_client(&o, &client(None), teller()).await.unwrap();
    s.plant(&format!(
        "UPDATE clients SET scopes = -32768 WHERE id = '{}'",
        c.id
    ))
    .await;
    assert_corrupt(
        s.resolve_client(&c.id).await,
        "clients",
        "scopes",
        c.id.as_str(),
    );

    let bad = new_org(s).await;
    s.plant(&format!(
        "UPDATE organizations SET plan = 'platinum' WHERE id = '{bad}'"
    ))
    .await;
    assert_corrupt(s.get_org(&bad).await, "organizations", "plan", bad.as_str());

    let id = s
        .insert_revocation(&crate::NewRevocation::new(
            RevocationKind::Jti,
            "jti-bogus",
            1,
            now.plus_seconds(60),
        ))
        .await
        .unwrap();
    s.plant(&format!(
        "UPDATE revocations SET kind = 'bogus' WHERE id = {id}"
    ))
    .await;
    assert_corrupt(
        s.revocations_since(id - 1, now).await,
        "revocations",
        "kind",
        &id.to_string(),
    );
}

/// A stored `jti` that is not one (chain ids and `jti`s are typed, D24,
/// D25) reads as `StoreError::Internal`, not as a token id nobody issued.
pub async fn corrupt_token_ids_are_internal_errors<S: PlantRows>(s: &S) {
    let o = new_org(s).await;
    let now = Timestamp::now();
    let u = s
        .insert_user(
            &o,
            &user("jti@example.com", Role::Editor, UserStatus::Active, 1),
            crate::conformance::teller(),
        )
        .await
        .unwrap();
    let c = s.insert_client(&o, &client(None), teller()).await.unwrap();
    let code = AuthCode {
        authn: None,
        digest: [80; 32],
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
    s.insert_auth_code(&o, &code).await.unwrap();
    s.redeem_auth_code(
        &[80; 32],
        now,
        &chain_for(&o, &c.id, &u.id, now, "plantjti"),
        &rt(81, "plantjti", now),
    )
    .await
    .unwrap();
    s.plant("UPDATE refresh_tokens SET access_jti = 'not-a-jti' WHERE chain_id = 'plantjti'")
        .await;
    assert_corrupt(
        s.resolve_refresh_token(&[81; 32]).await,
        "refresh_tokens",
        "access_jti",
        "plantjti",
    );
}
