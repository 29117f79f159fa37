//! The rules and side effects the application layer owns, without HTTP.

use std::sync::Arc;

use gatehouse_app::Resource;
use gatehouse_app::clients::ClientRegistration;
use gatehouse_app::orgs::NewOrg;
use gatehouse_app::{App, AppError};
use gatehouse_auth::{AuthService, Issuer, MasterKey};
use gatehouse_domain::user::UserPatch;
use gatehouse_domain::{DomainError, Email, Name, Plan, RedirectUri, Role, ScopeSet, UserStatus};
use gatehouse_store::Store;
use gatehouse_store_sqlite::SqliteStore;

async fn serving(dir: &tempfile::TempDir) -> (App, Arc<AuthService>) {
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&dir.path().join("db")).unwrap());
    let keys = gatehouse_app::keys::load_key_ring(store.as_ref(), MasterKey::generate())
        .await
        .unwrap();
    let auth = Arc::new(AuthService::new(keys, Issuer::new("https://gh.test")));
    (
        App::new(
            store,
            auth.clone(),
            "https://gh.test/",
            Arc::new(gatehouse_store::conformance::TestPublish),
        ),
        auth,
    )
}

fn org(name: &str) -> NewOrg {
    NewOrg {
        name: Name::parse(name).unwrap(),
        plan: None,
        per_minute: None,
        per_second: None,
    }
}

fn fields(e: AppError) -> Vec<String> {
    match e {
        AppError::Rule(DomainError::Validation(issues)) => {
            issues.into_iter().map(|i| i.field).collect()
        }
        other => panic!("expected a validation error, got {other:?}"),
    }
}

#[tokio::test]
async fn custom_limits_make_an_enterprise_plan_and_need_one() {
    let dir = tempfile::tempdir().unwrap();
    let (app, _) = serving(&dir).await;
    let mut new = org("Acme");
    new.per_minute = Some(100);
    let o = app.create_org(new.clone(), false).await.unwrap();
    assert_eq!(o.plan, Plan::Enterprise);
    new.plan = Some(Plan::Pro);
    new.per_second = Some(0);
    let e = app.create_org(new, false).await.unwrap_err();
    assert_eq!(fields(e), ["plan", "per_second"]);
}

#[tokio::test]
async fn a_public_client_needs_a_redirect_uri_and_has_no_secret() {
    let dir = tempfile::tempdir().unwrap();
    let (app, _) = serving(&dir).await;
    let o = app.create_org(org("Acme"), false).await.unwrap();
    let mut reg = ClientRegistration {
        name: Name::parse("SPA").unwrap(),
        scopes: ScopeSet::parse("users:read admin").unwrap(),
        redirect_uris: vec![],
        post_logout_redirect_uris: vec![],
        public: true,
        owner: None,
    };
    let e = app
        .register_client(
            &o.id,
            reg.clone(),
            &gatehouse_domain::event::Origin::operator(),
        )
        .await
        .unwrap_err();
    assert_eq!(fields(e), ["redirect_uri"]);
    reg.redirect_uris = vec![RedirectUri::parse("https://spa.example/cb").unwrap()];
    let r = app
        .register_client(&o.id, reg, &gatehouse_domain::event::Origin::operator())
        .await
        .unwrap();
    assert!(r.secret.is_none());
    // D22: registering admin is not approving it.
    assert!(!r.client.admin_approved);
    let e = app
        .rotate_client_secret(
            &r.client.id,
            0,
            &gatehouse_domain::event::Origin::operator(),
        )
        .await
        .unwrap_err();
    assert!(matches!(
        e,
        AppError::Rule(DomainError::InvalidStateTransition(_))
    ));
    assert!(
        app.approve_admin(&r.client.id)
            .await
            .unwrap()
            .admin_approved
    );
}

#[tokio::test]
async fn deactivating_a_user_notes_the_revocation_in_memory() {
    let dir = tempfile::tempdir().unwrap();
    let (app, auth) = serving(&dir).await;
    let o = app.create_org(org("Acme"), false).await.unwrap();
    for (email, role) in [
        ("a@acme.example", Role::Admin),
        ("b@acme.example", Role::Editor),
    ] {
        app.create_active_user(
            &o.id,
            Email::parse(email).unwrap(),
            Name::parse("Someone").unwrap(),
            role,
            "a long enough passphrase".into(),
        )
        .await
        .unwrap();
    }
    let listing = app
        .list_users(&o.id, &Default::default(), Default::default())
        .await
        .unwrap();
    let editor = listing
        .items
        .iter()
        .find(|u| u.role == Role::Editor)
        .unwrap()
        .clone();
    let before = auth.revocations().len();
    let patch = UserPatch {
        status: Some(UserStatus::Inactive),
        ..Default::default()
    };
    let user = app
        .update_user(
            &o.id,
            &editor.id,
            &patch,
            &gatehouse_domain::event::Origin::operator(),
        )
        .await
        .unwrap();
    assert_eq!(user.status, UserStatus::Inactive);
    assert_eq!(auth.revocations().len(), before + 1);
}

#[tokio::test]
async fn another_organizations_user_is_not_found() {
    let dir = tempfile::tempdir().unwrap();
    let (app, _) = serving(&dir).await;
    let a = app.create_org(org("A"), false).await.unwrap();
    let b = app.create_org(org("B"), false).await.unwrap();
    let u = app
        .invite_user(
            &a.id,
            Email::parse("x@a.example").unwrap(),
            Name::parse("X").unwrap(),
            Role::Viewer,
            &gatehouse_domain::event::Origin::system(),
        )
        .await
        .unwrap();
    assert_eq!(u.status, UserStatus::PendingInvite);
    let e = app.get_user(&b.id, &u.id).await.unwrap_err();
    assert!(matches!(e, AppError::NotFound(Resource::User)));
}

/// D50: a kept body holding a secret is stored sealed under the master key
/// (like D24's successor pair) and replayed as it was; other bodies are kept
/// as they are.
#[tokio::test]
async fn idempotent_bodies_with_secrets_are_kept_sealed() {
    use gatehouse_app::idempotency::{Idempotent, StoredResponse, request_digest};
    use gatehouse_auth::Lineage;
    use gatehouse_domain::{ClientId, OrgId, Timestamp};
    use gatehouse_store::{Begun, IdempotencyKey};

    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&dir.path().join("db")).unwrap());
    let keys = gatehouse_app::keys::load_key_ring(store.as_ref(), MasterKey::generate())
        .await
        .unwrap();
    let auth = Arc::new(AuthService::new(keys, Issuer::new("https://gh.test")));
    let app = App::new(
        store.clone(),
        auth,
        "https://gh.test/",
        Arc::new(gatehouse_store::conformance::TestPublish),
    );
    let org = OrgId::generate();
    let lineage = Lineage::Client(ClientId::generate());
    let digest = request_digest("POST", "/v1/clients", None, b"{}");
    let secret = br#"{"data":{"client_id":"app_1","client_secret":"very-secret-value"}}"#;
    let response = |body: &[u8]| StoredResponse {
        status: 201,
        location: Some("/v1/clients/app_1".into()),
        content_type: Some("application/json".into()),
        body: body.to_vec(),
    };
    for (key, body) in [("sealed", &secret[..]), ("plain", &br#"{"data":{}}"#[..])] {
        let Idempotent::Run(claim) = app
            .begin_idempotent(&org, &lineage, key, &digest)
            .await
            .unwrap()
        else {
            panic!("the first request runs");
        };
        app.finish_idempotent(claim, response(body)).await.unwrap();
        // The row as stored.
        let raw = store
            .begin_idempotent(
                &org,
                &IdempotencyKey {
                    lineage: lineage.shared_key(),
                    key: key.into(),
                },
                &digest,
                "probe",
                Timestamp::now(),
                Timestamp::now().plus_seconds(60),
            )
            .await
            .unwrap();
        let Begun::Done(kept) = raw else {
            panic!("kept: {raw:?}")
        };
        let leaks = kept
            .body
            .windows(b"very-secret-value".len())
            .any(|w| w == b"very-secret-value");
        if key == "sealed" {
            assert!(kept.sealed && !leaks && kept.body != body);
        } else {
            assert!(!kept.sealed && kept.body == body);
        }
        // The replay is the original, byte for byte.
        match app
            .begin_idempotent(&org, &lineage, key, &digest)
            .await
            .unwrap()
        {
            Idempotent::Replay(r) => assert_eq!(r, response(body)),
            other => panic!("{other:?}"),
        }
    }
}

// The search index's checks (issue 16, and since issue 25 the only search)
// are in `tests/search.rs`, on both backends.

/// D23 (continued): a value no key opens stops the rotation, which stays
/// under way (a server learns the next key and opens under both); a server
/// that does not report the next key holds the rotation back; a second run,
/// to another key, still opens what the first moved, and completes; the
/// server then forgets the older keys.
#[tokio::test]
async fn d23_a_rotation_stops_at_an_unreadable_value_and_a_second_run_completes() {
    use gatehouse_app::master_key::MasterKeyError;
    use gatehouse_auth::keys::aad;
    use gatehouse_store::SealedKind;
    use std::time::Duration;

    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&dir.path().join("db")).unwrap());
    let current = MasterKey::generate();
    let keys = gatehouse_app::keys::load_key_ring(store.as_ref(), current.clone())
        .await
        .unwrap();
    let auth = Arc::new(AuthService::new(keys, Issuer::new("https://gh.test")));
    let server = App::new(
        store.clone(),
        auth.clone(),
        "https://gh.test/",
        Arc::new(gatehouse_store::conformance::TestPublish),
    );
    let operator = App::operator(
        store.clone(),
        Arc::new(gatehouse_store::conformance::TestPublish),
    );
    // The recovery-code key, sealed under a key nobody holds.
    let stray = MasterKey::generate().encrypt(&[1; 32], aad::RECOVERY_KEY);
    store
        .sealed_key(aad::RECOVERY_KEY_NAME, &stray)
        .await
        .unwrap();
    // A wrong current key is refused before anything is recorded.
    let e = operator
        .rotate_master_key(
            &MasterKey::generate(),
            &MasterKey::generate(),
            Duration::ZERO,
        )
        .await
        .unwrap_err();
    assert!(matches!(e, MasterKeyError::WrongKey), "{e}");
    assert_eq!(store.master_key_rotation().await.unwrap(), None);

    let next = MasterKey::generate();
    let e = operator
        .rotate_master_key(&current, &next, Duration::ZERO)
        .await
        .unwrap_err();
    assert!(
        matches!(&e, MasterKeyError::Unreadable(list) if list == "1 sealed_keys"),
        "{e}"
    );
    let under_way = store.master_key_rotation().await.unwrap().unwrap();
    assert_eq!(under_way.next_id, next.id());
    // A server learns the next key: it seals with it and opens under both.
    server.learn_master_key().await;
    assert_eq!(auth.keys().master().ids(), vec![next.id(), current.id()]);
    server.reload_keys().await.unwrap();
    let by_next = auth.keys().master().encrypt(b"v", b"aad");
    assert!(next.decrypt(&by_next, b"aad").is_some());

    // Another key cannot take over: servers seal with `next` already.
    let other = MasterKey::generate();
    let e = operator
        .rotate_master_key(&current, &other, Duration::ZERO)
        .await
        .unwrap_err();
    assert!(
        matches!(&e, MasterKeyError::OtherUnderWay(id) if *id == next.id()),
        "{e}"
    );

    // The value made readable again. A second run waits for every server
    // seen lately to hold the key; one that does not is named.
    let v = store
        .sealed_values(SealedKind::SealedKey, None, 10)
        .await
        .unwrap()
        .remove(0);
    let fixed = current.encrypt(&[1; 32], aad::RECOVERY_KEY);
    assert!(store.reseal(&v.at, &v.sealed, &fixed).await.unwrap());
    store
        .record_key_holder(
            "mkh_lagging",
            &[current.id()],
            gatehouse_domain::Timestamp::now(),
        )
        .await
        .unwrap();
    let e = operator
        .rotate_master_key(&current, &next, Duration::ZERO)
        .await
        .unwrap_err();
    assert!(
        matches!(&e, MasterKeyError::Lagging(names, 0) if names == "server mkh_lagging"),
        "{e}"
    );
    // Once it holds the key, the run opens what the first moved to `next`
    // and completes.
    store
        .record_key_holder(
            "mkh_lagging",
            &[next.id(), current.id()],
            gatehouse_domain::Timestamp::now(),
        )
        .await
        .unwrap();
    let done = operator
        .rotate_master_key(&current, &next, Duration::ZERO)
        .await
        .unwrap();
    assert_eq!(done.resealed.get("sealed_keys"), Some(&1));
    assert_eq!(done.already, 1, "the signing key moved in the first run");
    operator.end_master_key_rotation(&next).await.unwrap();
    assert_eq!(store.master_key_rotation().await.unwrap(), None);
    for kind in SealedKind::ALL {
        for v in store.sealed_values(kind, None, 100).await.unwrap() {
            let data = aad::of(&v.at).unwrap();
            assert!(next.decrypt(&v.sealed, &data).is_some(), "{:?}", v.at);
        }
    }
    let other = next.clone();
    // The server forgets the older keys at its next round.
    assert_eq!(auth.keys().master().ids()[0], other.id());
    server.learn_master_key().await;
    assert_eq!(auth.keys().master().ids(), vec![other.id()]);
    let by_current = current.encrypt(b"v", b"aad");
    assert!(auth.keys().master().decrypt(&by_current, b"aad").is_none());
    assert!(auth.keys().master().decrypt(&by_next, b"aad").is_some());
    server.reload_keys().await.unwrap();
    // The same key again has nothing to rotate; ending it again is refused.
    assert!(matches!(
        operator
            .rotate_master_key(&other, &other, Duration::ZERO)
            .await,
        Err(MasterKeyError::SameKey(_))
    ));
    assert!(matches!(
        operator.end_master_key_rotation(&other).await,
        Err(MasterKeyError::Concurrent)
    ));
}

/// D56: a passkey registration is offered with the person's 32-byte handle
/// and display name, at most ten per person; none on an IP address.
#[tokio::test]
async fn d56_passkey_offers_stop_at_ten_and_never_on_an_ip_host() {
    use gatehouse_domain::event::Origin;
    use gatehouse_domain::mfa::{Factor, FactorKind, PasskeyFactor};
    use gatehouse_domain::{MfaId, NewUser, Timestamp, UserId};
    use gatehouse_store::{MfaStore, UserStore};

    let dir = tempfile::tempdir().unwrap();
    let (app, _) = serving(&dir).await;
    let o = app.create_org(org("Acme"), false).await.unwrap();
    let store = SqliteStore::open(&dir.path().join("db")).unwrap();
    let user = store
        .insert_user(
            &o.id,
            &NewUser {
                id: UserId::generate(),
                email: Email::parse("ada@example.com").unwrap(),
                name: Name::parse("Ada").unwrap(),
                role: Role::Editor,
                status: UserStatus::Active,
                password_hash: None,
                created_at: Timestamp::now(),
            },
            &app.teller(&Origin::operator()),
        )
        .await
        .unwrap();
    let offer = app.begin_passkey(&o.id, &user).await.unwrap();
    assert_eq!(offer.options["user"]["displayName"], "Ada (Acme)");
    assert_eq!(offer.options["user"]["name"], "ada@example.com");
    assert!(!offer.sealed.is_empty());
    // Ten passkeys stored: the eleventh is not offered.
    for i in 0..10u8 {
        let p = PasskeyFactor {
            factor: Factor {
                id: MfaId::generate(),
                kind: FactorKind::Passkey,
                name: format!("Key {i}"),
                created_at: Timestamp::now(),
                last_used_at: None,
            },
            credential_id: vec![i; 16],
            credential: vec![i; 40],
            sign_count: 0,
        };
        let fx = [gatehouse_domain::effect::Effect::PutPasskey {
            user: user.id.clone(),
            passkey: Box::new(p),
            handle: vec![5; 32],
        }];
        store
            .write_mfa(
                &o.id,
                &fx,
                Timestamp::now(),
                &app.teller(&Origin::operator()),
            )
            .await
            .unwrap();
    }
    assert!(matches!(
        app.begin_passkey(&o.id, &user).await,
        Err(gatehouse_app::passkeys::PasskeyRegistrationError::TooMany)
    ));

    // On an IP address, no passkeys.
    let dir2 = tempfile::tempdir().unwrap();
    let store2: Arc<dyn Store> = Arc::new(SqliteStore::open(&dir2.path().join("db")).unwrap());
    let keys = gatehouse_app::keys::load_key_ring(store2.as_ref(), MasterKey::generate())
        .await
        .unwrap();
    let auth = Arc::new(AuthService::new(
        keys,
        Issuer::new("https://127.0.0.1:8443"),
    ));
    let ip = App::new(
        store2,
        auth,
        "https://127.0.0.1:8443/",
        Arc::new(gatehouse_store::conformance::TestPublish),
    );
    assert!(matches!(
        ip.begin_passkey(&o.id, &user).await,
        Err(gatehouse_app::passkeys::PasskeyRegistrationError::Unavailable(_))
    ));
}
