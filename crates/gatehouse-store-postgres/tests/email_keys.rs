//! D8 (revised) on PostgreSQL: keys written by the old rule (plain lower
//! case) are re-keyed when the store starts; a pair that is now one address
//! keeps both rows, the later one with its old key. Skipped without
//! PostgreSQL binaries (see `gatehouse_store_postgres::testing`).

use gatehouse_store::migrated;
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
    let org = migrated::rekey_org();
    {
        let store = PgStore::connect(&url).await.unwrap();
        store.create_org(&org).await.unwrap();
        store.close().await;
    }
    {
        let mut c = PgConnection::connect(&url).await.unwrap();
        for (id, email, at) in migrated::PLANTED {
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
    for (id, key) in migrated::REKEYED {
        assert_eq!(key_of(&url, id).await, key, "{id}");
    }
    migrated::check_rekeyed(&store, &org.id).await;
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
