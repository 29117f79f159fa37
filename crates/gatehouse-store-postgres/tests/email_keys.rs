//! D8 (revised) on PostgreSQL: keys written by the old rule (plain lower
//! case) are re-keyed when the store starts; a pair that is now one address
//! keeps both rows, the later one with its old key. Skipped without
//! PostgreSQL binaries (see `gatehouse_store_postgres::testing`).

use gatehouse_domain::{
    Email, Name, NewUser, OrgId, Organization, Plan, Role, Timestamp, UserId, UserStatus,
};
use gatehouse_store::StoreError;
use gatehouse_store::prelude::*;
use gatehouse_store_postgres::PgStore;
use gatehouse_store_postgres::testing::fresh_database_url;
use sqlx_core::connection::Connection;
use sqlx_postgres::PgConnection;

async fn key_of(url: &str, id: &str) -> String {
    let mut c = PgConnection::connect(url).await.unwrap();
    let k = sqlx_core::query_scalar::query_scalar("SELECT email_norm FROM users WHERE id = $1")
        .bind(id)
        .fetch_one(&mut c)
        .await
        .unwrap();
    c.close().await.unwrap();
    k
}

#[tokio::test]
async fn old_keys_are_rekeyed_at_start_and_collisions_keep_both_rows() {
    let Some(url) = fresh_database_url().await else {
        return;
    };
    let org = Organization {
        id: OrgId::generate(),
        name: "Acme".into(),
        plan: Plan::Free,
        per_minute: None,
        per_second: None,
        created_at: Timestamp::now(),
    };
    {
        let store = PgStore::connect(&url).await.unwrap();
        store.create_org(&org).await.unwrap();
        store.close().await;
    }
    let planted = [
        ("usr_rekey1", "STRASSE@x.com", 1i64),
        ("usr_rekey2", "Stra\u{df}e@x.com", 2),
        ("usr_rekey3", "JOSE\u{301}@b.example.com", 3),
        ("usr_rekey4", "ana@B\u{dc}CHER.example", 4),
    ];
    {
        let mut c = PgConnection::connect(&url).await.unwrap();
        for (id, email, at) in planted {
            sqlx_core::query::query(
                "INSERT INTO users (id, org_id, email, email_norm, name, name_fold, role, status, created_at, updated_at)
                 VALUES ($1, $2, $3, $4, 'n', 'n', 'viewer', 'pending_invite', $5, $5)",
            )
            .bind(id)
            .bind(org.id.as_str())
            .bind(email)
            .bind(email.to_lowercase())
            .bind(at)
            .execute(&mut c)
            .await
            .unwrap();
        }
        c.close().await.unwrap();
    }

    let store = PgStore::connect(&url).await.unwrap();
    assert_eq!(key_of(&url, "usr_rekey1").await, "strasse@x.com");
    assert_eq!(key_of(&url, "usr_rekey2").await, "stra\u{df}e@x.com");
    assert_eq!(key_of(&url, "usr_rekey3").await, "jos\u{e9}@b.example.com");
    assert_eq!(
        key_of(&url, "usr_rekey4").await,
        "ana@xn--bcher-kva.example"
    );
    for (email, id) in [
        ("Jose\u{301}@B.EXAMPLE.COM", "usr_rekey3"),
        ("ANA@b\u{fc}cher.example", "usr_rekey4"),
        ("stra\u{df}e@x.com", "usr_rekey1"),
    ] {
        let (u, _) = store
            .find_user_by_email(&org.id, &Email::parse(email).unwrap())
            .await
            .unwrap()
            .unwrap_or_else(|| panic!("{email} not found"));
        assert_eq!(u.id.as_str(), id, "{email}");
    }
    let dup = NewUser {
        id: UserId::generate(),
        email: Email::parse("jos\u{e9}@b.example.com").unwrap(),
        name: Name::parse("Dup").unwrap(),
        role: Role::Viewer,
        status: UserStatus::PendingInvite,
        password_hash: None,
        created_at: Timestamp::now(),
    };
    match store.insert_user(&org.id, &dup).await {
        Err(StoreError::Duplicate("email")) => {}
        other => panic!("{other:?}"),
    }
    store.close().await;

    // A second start changes nothing and loses nothing.
    let store = PgStore::connect(&url).await.unwrap();
    assert_eq!(key_of(&url, "usr_rekey2").await, "stra\u{df}e@x.com");
    let mut c = PgConnection::connect(&url).await.unwrap();
    let n: i64 = sqlx_core::query_scalar::query_scalar("SELECT count(*) FROM users")
        .fetch_one(&mut c)
        .await
        .unwrap();
    assert_eq!(n, 4);
    c.close().await.unwrap();
    store.close().await;
}
