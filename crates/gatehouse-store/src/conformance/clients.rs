//! Client applications: admin approval, secret rotation, the change counter.

use super::*;

pub async fn clients_and_admin_approval(s: &dyn Store) {
    let o = new_org(s).await;
    let c = s.insert_client(&o, &client(None), teller()).await.unwrap();
    let found = s.resolve_client(&c.id).await.unwrap().unwrap();
    assert_eq!(found, c);
    assert_eq!(found.org, o);
    assert_eq!(found.secret_hash, Some([7; 32]));
    assert!(!found.admin_approved);
    assert!(matches!(
        s.approve_admin(&new_org(s).await, &c.id, teller()).await,
        Err(StoreError::NotFound)
    ));
    let a = s.approve_admin(&o, &c.id, teller()).await.unwrap();
    assert!(a.admin_approved && a.scopes.contains(Scope::Admin));
    assert_eq!(s.resolve_client(&ClientId::generate()).await.unwrap(), None);
}

pub async fn client_secret_rotation(s: &dyn Store) {
    let o = new_org(s).await;
    let c = s.insert_client(&o, &client(None), teller()).await.unwrap();
    let until = Timestamp::now().plus_seconds(60);
    let r = s
        .rotate_client_secret(&o, &c.id, &[1; 32], Some(until), teller())
        .await
        .unwrap();
    assert_eq!(r.secret_hash, Some([1; 32]));
    assert_eq!(r.previous_secret, Some(([7; 32], until)));
    let r = s
        .rotate_client_secret(&o, &c.id, &[2; 32], None, teller())
        .await
        .unwrap();
    assert_eq!((r.secret_hash, r.previous_secret), (Some([2; 32]), None));
    assert!(matches!(
        s.rotate_client_secret(&new_org(s).await, &c.id, &[3; 32], None, teller())
            .await,
        Err(StoreError::NotFound)
    ));
}

/// [`Store::clients_version`]: a backend that offers it moves it after every
/// committed change to a client (the auth layer's client cache depends on
/// it, D40), and leaves it alone for writes that touch no client.
pub async fn clients_version_moves_with_every_client_change(s: &dyn Store) {
    let Some(_) = s.clients_version() else {
        return;
    };
    let o = new_org(s).await;
    let owner = s
        .insert_user(
            &o,
            &user("cv@example.com", Role::Editor, UserStatus::Active, 1),
            crate::conformance::teller(),
        )
        .await
        .unwrap();
    let heir = s
        .insert_user(
            &o,
            &user("cv2@example.com", Role::Editor, UserStatus::Active, 2),
            crate::conformance::teller(),
        )
        .await
        .unwrap();
    let c = s
        .insert_client(&o, &client(Some(owner.id.clone())), teller())
        .await
        .unwrap();
    let version = || s.clients_version().unwrap();

    let v = version();
    s.rotate_client_secret(&o, &c.id, &[4; 32], None, teller())
        .await
        .unwrap();
    assert_ne!(version(), v, "a secret rotation moves it");

    let v = version();
    s.approve_admin(&o, &c.id, teller()).await.unwrap();
    assert_ne!(version(), v, "an admin approval moves it");

    let v = version();
    s.delete_user_at(
        &o,
        &owner.id,
        Some(&heir.id),
        gatehouse_domain::Timestamp::now(),
        teller(),
    )
    .await
    .unwrap();
    assert_ne!(version(), v, "an ownership transfer moves it");

    let v = version();
    let narrow = ClientChanges {
        scopes: Some(ScopeSet::parse("users:read").unwrap()),
        ..Default::default()
    };
    s.update_client(&o, &c.id, &narrow, Timestamp::now(), teller())
        .await
        .unwrap();
    assert_ne!(version(), v, "an update moves it");

    let v = version();
    let gone = s.insert_client(&o, &client(None), teller()).await.unwrap();
    s.delete_client(&o, &gone.id, Timestamp::now(), teller())
        .await
        .unwrap();
    assert_ne!(version(), v, "a deletion moves it");

    let v = version();
    s.insert_user(
        &o,
        &user("cv3@example.com", Role::Viewer, UserStatus::Active, 3),
        crate::conformance::teller(),
    )
    .await
    .unwrap();
    assert_eq!(version(), v, "a write that touches no client leaves it");

    // A refused change (unknown client) commits nothing.
    let v = version();
    assert!(
        s.rotate_client_secret(&o, &ClientId::generate(), &[5; 32], None, teller())
            .await
            .is_err()
    );
    assert_eq!(version(), v, "a failed change leaves it");
}

/// A chain of `client` for `user` with `scopes`, begun by redeeming a code
/// (the only way a store writes one). Its refresh token's digest is `[byte; 32]`.
async fn chain_with_scopes(
    s: &dyn Store,
    o: &OrgId,
    client: &ClientId,
    user: &UserId,
    scopes: &str,
    byte: u8,
) -> ChainId {
    let now = Timestamp::from_millis(Timestamp::now().millis());
    let scopes = ScopeSet::parse(scopes).unwrap();
    let code = AuthCode {
        authn: None,
        digest: [byte.wrapping_add(100); 32],
        org: o.clone(),
        client: client.clone(),
        user: user.clone(),
        redirect_uri: "https://app.example.com/cb".into(),
        scopes,
        code_challenge: "abc".into(),
        created_at: now,
        expires_at: now.plus_seconds(300),
        used_at: None,
        chain: None,
        nonce: None,
        auth_time: None,
        sid: None,
    };
    s.insert_auth_code(o, &code).await.unwrap();
    let id = format!("chain{byte}");
    let mut ch = chain_for(o, client, user, now, &id);
    ch.scopes = scopes;
    s.redeem_auth_code(&code.digest, now, &ch, &rt(byte, &id, now))
        .await
        .unwrap();
    ch.id
}

/// The `Client` revocations written since `after`, as (subject, cut-off).
async fn client_revocations(s: &dyn Store, after: i64) -> Vec<(String, i64)> {
    s.revocations_since(after, Timestamp::now())
        .await
        .unwrap()
        .into_iter()
        .filter(|r| r.kind == RevocationKind::Client)
        .map(|r| (r.subject, r.cutoff))
        .collect()
}

async fn last_revocation(s: &dyn Store) -> i64 {
    s.revocations_since(0, Timestamp::now())
        .await
        .unwrap()
        .last()
        .map_or(0, |r| r.id)
}

/// D46, D47: changing a client. Names and URIs change alone; a scope set
/// that drops a scope revokes the chains that carry it (and only those),
/// drops codes that carry it, narrows consents (forgetting emptied ones),
/// withdraws an admin approval when `admin` goes, and writes one `Client`
/// revocation at `now`. Another organization's client is `NotFound`.
pub async fn client_update_narrows_and_revokes(s: &dyn Store) {
    let o = new_org(s).await;
    let other = new_org(s).await;
    let u = s
        .insert_user(
            &o,
            &user("upd@example.com", Role::Admin, UserStatus::Active, 1),
            crate::conformance::teller(),
        )
        .await
        .unwrap();
    let mut new = client(None);
    new.scopes = ScopeSet::parse("users:read products:read openid").unwrap();
    let c = s.insert_client(&o, &new, teller()).await.unwrap();
    let c = s.approve_admin(&o, &c.id, teller()).await.unwrap();
    let now = Timestamp::from_millis(Timestamp::now().millis());

    // Only the name and the URIs: nothing is revoked.
    let before = last_revocation(s).await;
    let changes = ClientChanges {
        name: Some("renamed".into()),
        redirect_uris: Some(vec!["https://new.example.com/cb".into()]),
        post_logout_redirect_uris: Some(vec!["https://new.example.com/bye".into()]),
        scopes: None,
        owner: None,
    };
    let got = s
        .update_client(&o, &c.id, &changes, now, teller())
        .await
        .unwrap();
    assert_eq!(got.name, "renamed");
    assert_eq!(got.redirect_uris, vec!["https://new.example.com/cb"]);
    assert_eq!(
        got.post_logout_redirect_uris,
        vec!["https://new.example.com/bye"]
    );
    assert_eq!(got.scopes, c.scopes);
    assert!(got.admin_approved);
    assert_eq!(s.resolve_client(&c.id).await.unwrap().unwrap(), got);
    assert!(client_revocations(s, before).await.is_empty());
    // Adding a scope revokes nothing either and keeps the approval.
    let wider = c.scopes.with(Scope::UsersWrite);
    let got = s
        .update_client(
            &o,
            &c.id,
            &ClientChanges {
                scopes: Some(wider),
                ..Default::default()
            },
            now,
            teller(),
        )
        .await
        .unwrap();
    assert_eq!(got.scopes, wider);
    assert!(got.admin_approved);
    assert!(client_revocations(s, before).await.is_empty());

    // Another organization cannot change it.
    assert!(matches!(
        s.update_client(&other, &c.id, &changes, now, teller())
            .await,
        Err(StoreError::NotFound)
    ));
    assert!(matches!(
        s.update_client(&o, &ClientId::generate(), &changes, now, teller())
            .await,
        Err(StoreError::NotFound)
    ));

    // Chains: one carries products:read, one does not.
    let keeps = chain_with_scopes(s, &o, &c.id, &u.id, "users:read openid", 51).await;
    let loses = chain_with_scopes(s, &o, &c.id, &u.id, "users:read products:read", 52).await;
    let pending = AuthCode {
        authn: None,
        digest: [53; 32],
        org: o.clone(),
        client: c.id.clone(),
        user: u.id.clone(),
        redirect_uri: "https://app.example.com/cb".into(),
        scopes: ScopeSet::parse("products:read").unwrap(),
        code_challenge: "abc".into(),
        created_at: now,
        expires_at: now.plus_seconds(300),
        used_at: None,
        chain: None,
        nonce: None,
        auth_time: None,
        sid: None,
    };
    s.insert_auth_code(&o, &pending).await.unwrap();
    s.remember_consent(
        &o,
        &u.id,
        &c.id,
        ScopeSet::parse("openid products:read").unwrap(),
        now,
    )
    .await
    .unwrap();
    let u2 = s
        .insert_user(
            &o,
            &user("upd2@example.com", Role::Viewer, UserStatus::Active, 2),
            crate::conformance::teller(),
        )
        .await
        .unwrap();
    s.remember_consent(
        &o,
        &u2.id,
        &c.id,
        ScopeSet::parse("products:read").unwrap(),
        now,
    )
    .await
    .unwrap();

    let narrow = ScopeSet::parse("users:read openid").unwrap();
    let before = last_revocation(s).await;
    let got = s
        .update_client(
            &o,
            &c.id,
            &ClientChanges {
                scopes: Some(narrow),
                ..Default::default()
            },
            now,
            teller(),
        )
        .await
        .unwrap();
    assert_eq!(got.scopes, narrow);
    assert!(
        !got.admin_approved,
        "admin dropped: its approval goes with it"
    );
    assert_eq!(got.name, "renamed", "what was not named stays");
    let pair = ChainFilter::UserClient(u.id.clone(), c.id.clone());
    assert_eq!(s.live_chains(&o, &pair).await.unwrap(), vec![keeps.clone()]);
    let (_, lost) = s.resolve_refresh_token(&[52; 32]).await.unwrap().unwrap();
    assert_eq!(lost.id, loses);
    assert!(
        lost.revoked_at.is_some(),
        "the chain that carried the scope is revoked"
    );
    let (_, kept) = s.resolve_refresh_token(&[51; 32]).await.unwrap().unwrap();
    assert!(
        kept.revoked_at.is_none(),
        "a chain within the new scopes lives"
    );
    assert_eq!(
        s.resolve_auth_code(&[53; 32]).await.unwrap(),
        None,
        "a code carrying the scope is gone"
    );
    assert_eq!(
        s.consent(&o, &u.id, &c.id).await.unwrap().unwrap().scopes,
        ScopeSet::parse("openid").unwrap(),
        "the scope leaves the consent"
    );
    assert_eq!(
        s.consent(&o, &u2.id, &c.id).await.unwrap(),
        None,
        "a consent left with no scope is forgotten"
    );
    assert_eq!(
        client_revocations(s, before).await,
        vec![(c.id.to_string(), now.unix_seconds())],
        "one Client revocation at now"
    );
    let cut: Vec<_> = s
        .revocations_since(before, Timestamp::now())
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.scopes)
        .collect();
    assert_eq!(
        cut,
        vec![Some(
            ScopeSet::parse("users:write products:read admin").unwrap()
        )],
        "D46 revised: it covers exactly the tokens carrying a removed scope"
    );

    // Listing admin again does not approve it.
    let got = s
        .update_client(
            &o,
            &c.id,
            &ClientChanges {
                scopes: Some(narrow.with(Scope::Admin)),
                ..Default::default()
            },
            now,
            teller(),
        )
        .await
        .unwrap();
    assert!(got.scopes.contains(Scope::Admin) && !got.admin_approved);
}

/// D46, D47: deleting a client removes it with its codes, chains and
/// consents and writes a `Client` revocation, atomically; another
/// organization's client is `NotFound` and untouched.
pub async fn client_delete_removes_everything_it_holds(s: &dyn Store) {
    let o = new_org(s).await;
    let other = new_org(s).await;
    let u = s
        .insert_user(
            &o,
            &user("del@example.com", Role::Admin, UserStatus::Active, 1),
            crate::conformance::teller(),
        )
        .await
        .unwrap();
    let c = s.insert_client(&o, &client(None), teller()).await.unwrap();
    let survivor = s.insert_client(&o, &client(None), teller()).await.unwrap();
    chain_with_scopes(s, &o, &c.id, &u.id, "users:read", 61).await;
    chain_with_scopes(s, &o, &survivor.id, &u.id, "users:read", 62).await;
    let now = Timestamp::from_millis(Timestamp::now().millis());
    s.remember_consent(
        &o,
        &u.id,
        &c.id,
        ScopeSet::parse("users:read").unwrap(),
        now,
    )
    .await
    .unwrap();

    assert!(matches!(
        s.delete_client(&other, &c.id, now, teller()).await,
        Err(StoreError::NotFound)
    ));
    assert!(s.resolve_client(&c.id).await.unwrap().is_some());

    let before = last_revocation(s).await;
    s.delete_client(&o, &c.id, now, teller()).await.unwrap();
    assert_eq!(s.resolve_client(&c.id).await.unwrap(), None);
    assert_eq!(s.resolve_refresh_token(&[61; 32]).await.unwrap(), None);
    assert_eq!(s.consent(&o, &u.id, &c.id).await.unwrap(), None);
    assert_eq!(
        client_revocations(s, before).await,
        vec![(c.id.to_string(), now.unix_seconds())]
    );
    // The organization's other client keeps what it holds.
    assert!(s.resolve_refresh_token(&[62; 32]).await.unwrap().is_some());
    assert_eq!(
        s.list_clients(&o)
            .await
            .unwrap()
            .iter()
            .map(|c| &c.id)
            .collect::<Vec<_>>(),
        vec![&survivor.id]
    );
    assert!(matches!(
        s.delete_client(&o, &c.id, now, teller()).await,
        Err(StoreError::NotFound)
    ));
}

/// D47's operator listings: organizations, an organization's clients and
/// API keys (oldest first, each only in its own organization), and a user
/// found by id alone.
pub async fn operator_listings(s: &dyn Store) {
    let before = s.list_orgs().await.unwrap().len();
    let mut a = org("A");
    a.created_at = Timestamp::from_millis(1_000);
    let mut b = org("B");
    b.created_at = Timestamp::from_millis(2_000);
    s.create_org(&b).await.unwrap();
    s.create_org(&a).await.unwrap();
    let orgs = s.list_orgs().await.unwrap();
    assert_eq!(orgs.len(), before + 2);
    let pos = |id: &OrgId| orgs.iter().position(|o| &o.id == id).unwrap();
    assert!(pos(&a.id) < pos(&b.id), "oldest first");
    assert_eq!(orgs[pos(&a.id)], a);

    let mut first = client(None);
    first.created_at = Timestamp::from_millis(10_000);
    let mut second = client(None);
    second.created_at = Timestamp::from_millis(20_000);
    s.insert_client(&a.id, &second, teller()).await.unwrap();
    s.insert_client(&a.id, &first, teller()).await.unwrap();
    let ids: Vec<ClientId> = s
        .list_clients(&a.id)
        .await
        .unwrap()
        .into_iter()
        .map(|c| c.id)
        .collect();
    assert_eq!(ids, vec![first.id.clone(), second.id.clone()]);
    assert!(s.list_clients(&b.id).await.unwrap().is_empty());

    let key = |at: i64| ApiKey {
        id: ApiKeyId::generate(),
        org: a.id.clone(),
        name: "k".into(),
        scopes: ScopeSet::parse("users:read").unwrap(),
        created_at: Timestamp::from_millis(at),
        prefix: String::new(),
        owner: None,
        expires_at: None,
        last_used_at: None,
        revoked_at: None,
    };
    let (k1, k2) = (key(1_000), key(2_000));
    s.insert_api_key(&a.id, &k2, &[81; 32], teller())
        .await
        .unwrap();
    s.insert_api_key(&a.id, &k1, &[82; 32], teller())
        .await
        .unwrap();
    s.revoke_api_key(&a.id, &k2.id, Timestamp::from_millis(3_000), teller())
        .await
        .unwrap();
    let keys = s.list_api_keys(&a.id).await.unwrap();
    assert_eq!(
        keys.iter().map(|k| &k.id).collect::<Vec<_>>(),
        vec![&k1.id, &k2.id]
    );
    assert!(keys[1].revoked_at.is_some(), "revoked keys are listed too");
    assert!(s.list_api_keys(&b.id).await.unwrap().is_empty());

    let u = s
        .insert_user(
            &b.id,
            &user("op@example.com", Role::Viewer, UserStatus::Active, 1),
            crate::conformance::teller(),
        )
        .await
        .unwrap();
    assert_eq!(s.operator_find_user(&u.id).await.unwrap(), Some(u));
    assert_eq!(
        s.operator_find_user(&UserId::generate()).await.unwrap(),
        None
    );
}

/// D46 (revised): an application's suspension follows its owner. A
/// deactivation suspends what they own (and revokes its access tokens so
/// far), their return lifts it; a move to an active user of the
/// organization away from a leaver owes a rotation with no grace (not for
/// a public application); a deletion hands the applications to the heir
/// owing one too. Each change is atomic with the change that causes it.
pub async fn owner_suspensions_follow_deactivation_moves_and_rotation(s: &dyn Store) {
    use gatehouse_domain::client::{SuspendedReason, Suspension};
    let o = new_org(s).await;
    let other = new_org(s).await;
    let add = |email: &'static str, role: Role, status: UserStatus, org: OrgId| async move {
        s.insert_user(
            &org,
            &user(email, role, status, 1),
            crate::conformance::teller(),
        )
        .await
        .unwrap()
    };
    let a = add("a@example.com", Role::Editor, UserStatus::Active, o.clone()).await;
    let b = add("b@example.com", Role::Editor, UserStatus::Active, o.clone()).await;
    let gone = add(
        "c@example.com",
        Role::Editor,
        UserStatus::Inactive,
        o.clone(),
    )
    .await;
    let foreign = add(
        "d@example.com",
        Role::Editor,
        UserStatus::Active,
        other.clone(),
    )
    .await;
    let reason = |c: &gatehouse_domain::Client| c.suspended_reason();
    let fetch = |id: ClientId| async move { s.resolve_client(&id).await.unwrap().unwrap() };

    let born = s
        .insert_client(&o, &client(Some(gone.id.clone())), teller())
        .await
        .unwrap();
    assert_eq!(
        reason(&born),
        Some(SuspendedReason::OwnerInactive),
        "an inactive owner's new application is suspended"
    );
    assert_eq!(fetch(born.id.clone()).await, born);
    let x = s
        .insert_client(&o, &client(Some(a.id.clone())), teller())
        .await
        .unwrap();
    let mut public = client(Some(a.id.clone()));
    public.secret_hash = None;
    let p = s.insert_client(&o, &public, teller()).await.unwrap();
    assert_eq!(x.suspension, Suspension::NONE);

    let status = |st: UserStatus| UserPatch {
        status: Some(st),
        ..Default::default()
    };
    let now = Timestamp::from_millis(Timestamp::now().millis());
    let before = last_revocation(s).await;
    s.update_user(&o, &a.id, &status(UserStatus::Inactive), now, teller())
        .await
        .unwrap();
    for c in [&x, &p] {
        assert_eq!(
            reason(&fetch(c.id.clone()).await),
            Some(SuspendedReason::OwnerInactive)
        );
    }
    let mut revoked = client_revocations(s, before).await;
    revoked.sort();
    let mut expected = vec![
        (x.id.to_string(), now.unix_seconds()),
        (p.id.to_string(), now.unix_seconds()),
    ];
    expected.sort();
    assert_eq!(revoked, expected, "their access tokens so far are revoked");

    let before = last_revocation(s).await;
    s.update_user(&o, &a.id, &status(UserStatus::Active), now, teller())
        .await
        .unwrap();
    assert_eq!(
        reason(&fetch(x.id.clone()).await),
        None,
        "the owner's return lifts it"
    );
    assert!(client_revocations(s, before).await.is_empty());

    // A move away from a deactivated owner.
    s.update_user(&o, &a.id, &status(UserStatus::Inactive), now, teller())
        .await
        .unwrap();
    let to = |u: &UserId| ClientChanges {
        owner: Some(u.clone()),
        ..Default::default()
    };
    assert!(matches!(
        s.update_client(&o, &x.id, &to(&gone.id), now, teller())
            .await,
        Err(StoreError::Rule(DomainError::InvalidStateTransition(_)))
    ));
    assert!(matches!(
        s.update_client(&o, &x.id, &to(&foreign.id), now, teller())
            .await,
        Err(StoreError::Rule(DomainError::Validation(_)))
    ));
    let moved = s
        .update_client(&o, &x.id, &to(&b.id), now, teller())
        .await
        .unwrap();
    assert_eq!(moved.owner.as_ref(), Some(&b.id));
    assert_eq!(
        reason(&moved),
        Some(SuspendedReason::SecretRotationRequired)
    );
    assert_eq!(fetch(x.id.clone()).await, moved);
    let moved_public = s
        .update_client(&o, &p.id, &to(&b.id), now, teller())
        .await
        .unwrap();
    assert_eq!(
        reason(&moved_public),
        None,
        "a public application resumes at once"
    );
    assert!(matches!(
        s.rotate_client_secret(&o, &x.id, &[9; 32], Some(now.plus_seconds(60)), teller())
            .await,
        Err(StoreError::Rule(DomainError::InvalidStateTransition(_)))
    ));
    assert_eq!(
        fetch(x.id.clone()).await.secret_hash,
        Some([7; 32]),
        "a refused rotation changes nothing"
    );
    let rotated = s
        .rotate_client_secret(&o, &x.id, &[9; 32], None, teller())
        .await
        .unwrap();
    assert_eq!(
        (reason(&rotated), rotated.secret_hash),
        (None, Some([9; 32]))
    );

    // A deletion hands them to the heir, owing a rotation.
    s.update_user(&o, &a.id, &status(UserStatus::Active), now, teller())
        .await
        .unwrap();
    let before = last_revocation(s).await;
    s.delete_user_at(&o, &b.id, Some(&a.id), now, teller())
        .await
        .unwrap();
    let inherited = fetch(x.id.clone()).await;
    assert_eq!(inherited.owner.as_ref(), Some(&a.id));
    assert_eq!(
        reason(&inherited),
        Some(SuspendedReason::SecretRotationRequired)
    );
    assert_eq!(reason(&fetch(p.id.clone()).await), None);
    assert_eq!(
        client_revocations(s, before)
            .await
            .into_iter()
            .filter(|(c, _)| *c == x.id.to_string())
            .count(),
        1,
        "the newly suspended application's tokens are revoked"
    );
}
