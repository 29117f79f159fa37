//! Client applications: admin approval, secret rotation, the change counter.

use super::*;

pub async fn clients_and_admin_approval(s: &dyn Store) {
    let o = new_org(s).await;
    let c = s.insert_client(&o, &client(None)).await.unwrap();
    let found = s.resolve_client(&c.id).await.unwrap().unwrap();
    assert_eq!(found, c);
    assert_eq!(found.org, o);
    assert_eq!(found.secret_hash, Some([7; 32]));
    assert!(!found.admin_approved);
    assert!(matches!(
        s.approve_admin(&new_org(s).await, &c.id).await,
        Err(StoreError::NotFound)
    ));
    let a = s.approve_admin(&o, &c.id).await.unwrap();
    assert!(a.admin_approved && a.scopes.contains(Scope::Admin));
    assert_eq!(s.resolve_client(&ClientId::generate()).await.unwrap(), None);
}

pub async fn client_secret_rotation(s: &dyn Store) {
    let o = new_org(s).await;
    let c = s.insert_client(&o, &client(None)).await.unwrap();
    let until = Timestamp::now().plus_seconds(60);
    let r = s
        .rotate_client_secret(&o, &c.id, &[1; 32], Some(until))
        .await
        .unwrap();
    assert_eq!(r.secret_hash, Some([1; 32]));
    assert_eq!(r.previous_secret, Some(([7; 32], until)));
    let r = s
        .rotate_client_secret(&o, &c.id, &[2; 32], None)
        .await
        .unwrap();
    assert_eq!((r.secret_hash, r.previous_secret), (Some([2; 32]), None));
    assert!(matches!(
        s.rotate_client_secret(&new_org(s).await, &c.id, &[3; 32], None)
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
        )
        .await
        .unwrap();
    let heir = s
        .insert_user(
            &o,
            &user("cv2@example.com", Role::Editor, UserStatus::Active, 2),
        )
        .await
        .unwrap();
    let c = s
        .insert_client(&o, &client(Some(owner.id.clone())))
        .await
        .unwrap();
    let version = || s.clients_version().unwrap();

    let v = version();
    s.rotate_client_secret(&o, &c.id, &[4; 32], None)
        .await
        .unwrap();
    assert_ne!(version(), v, "a secret rotation moves it");

    let v = version();
    s.approve_admin(&o, &c.id).await.unwrap();
    assert_ne!(version(), v, "an admin approval moves it");

    let v = version();
    s.delete_user(&o, &owner.id, Some(&heir.id)).await.unwrap();
    assert_ne!(version(), v, "an ownership transfer moves it");

    let v = version();
    s.insert_user(
        &o,
        &user("cv3@example.com", Role::Viewer, UserStatus::Active, 3),
    )
    .await
    .unwrap();
    assert_eq!(version(), v, "a write that touches no client leaves it");

    // A refused change (unknown client) commits nothing.
    let v = version();
    assert!(
        s.rotate_client_secret(&o, &ClientId::generate(), &[5; 32], None)
            .await
            .is_err()
    );
    assert_eq!(version(), v, "a failed change leaves it");
}
