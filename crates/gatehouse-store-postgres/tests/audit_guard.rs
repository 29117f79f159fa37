//! D58: the audit rows' trigger on PostgreSQL (work in progress, issue
//! 31): an entry is written once and sealed once; no other UPDATE, and no
//! DELETE outside a transaction that set `gatehouse.audit_purge`.

use gatehouse_store_postgres::PgStore;
use gatehouse_store_postgres::testing::fresh_database_url;
use sqlx_core::connection::Connection as _;
use sqlx_core::executor::Executor as _;
use sqlx_postgres::PgConnection;

async fn refused(c: &mut PgConnection, sql: &str, why: &str) {
    let e = c.execute(sql).await.expect_err(why).to_string();
    assert!(e.contains("audit entries"), "{why}: {e}");
}

async fn insert(c: &mut PgConnection, id: &str) {
    c.execute(
        format!(
            "INSERT INTO audit_entries (id, org_id, category, created_at, action, outcome, actor_type, body)
             VALUES ('{id}', 'org_1', 'admin', 1, 'user.updated', 'success', 'operator', '{{}}')"
        )
        .as_str(),
    )
    .await
    .unwrap();
}

#[tokio::test]
async fn d58_an_audit_row_is_sealed_once_and_removed_only_by_the_purge() {
    let Some(url) = fresh_database_url().await else {
        return;
    };
    drop(PgStore::connect(&url).await.unwrap());
    let mut c = PgConnection::connect(&url).await.unwrap();
    insert(&mut c, "adt_1").await;

    refused(
        &mut c,
        "UPDATE audit_entries SET action = 'user.deleted' WHERE id = 'adt_1'",
        "an unsealed row's action",
    )
    .await;
    refused(
        &mut c,
        "UPDATE audit_entries SET sequence = 1, hash = 'h', body = '{\"x\":1}' WHERE id = 'adt_1'",
        "a seal that also changes the body",
    )
    .await;
    c.execute("UPDATE audit_entries SET sequence = 1, hash = 'h1' WHERE id = 'adt_1'")
        .await
        .unwrap();
    refused(
        &mut c,
        "UPDATE audit_entries SET hash = 'h2' WHERE id = 'adt_1'",
        "a second seal",
    )
    .await;
    refused(
        &mut c,
        "UPDATE audit_entries SET outcome = 'failure' WHERE id = 'adt_1'",
        "a sealed row's outcome",
    )
    .await;
    refused(
        &mut c,
        "DELETE FROM audit_entries WHERE id = 'adt_1'",
        "a DELETE outside the purge",
    )
    .await;

    // The purge marks its own transaction only.
    c.execute("BEGIN").await.unwrap();
    c.execute("SET LOCAL gatehouse.audit_purge = 'on'")
        .await
        .unwrap();
    c.execute("DELETE FROM audit_entries WHERE id = 'adt_1'")
        .await
        .unwrap();
    c.execute("COMMIT").await.unwrap();
    insert(&mut c, "adt_2").await;
    refused(
        &mut c,
        "DELETE FROM audit_entries WHERE id = 'adt_2'",
        "a DELETE after the purge's transaction",
    )
    .await;
}
