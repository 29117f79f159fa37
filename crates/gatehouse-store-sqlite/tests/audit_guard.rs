//! D58: the audit rows' trigger on SQLite (work in progress, issue 31): an
//! entry is written once and sealed once; no other UPDATE, and no DELETE
//! outside the purge's transaction.

use gatehouse_store_sqlite::SqliteStore;
use rusqlite::{Connection, params};

fn insert(c: &Connection, id: &str) {
    c.execute(
        "INSERT INTO audit_entries (id, org_id, category, created_at, action, outcome, actor_type, body)
         VALUES (?1, 'org_1', 'admin', 1, 'user.updated', 'success', 'operator', '{}')",
        params![id],
    )
    .unwrap();
}

fn refused(r: rusqlite::Result<usize>, why: &str) {
    let e = r.expect_err(why).to_string();
    assert!(e.contains("audit entries"), "{why}: {e}");
}

#[test]
fn d58_an_audit_row_is_sealed_once_and_removed_only_by_the_purge() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gatehouse.db");
    drop(SqliteStore::open(&path).unwrap());
    let c = Connection::open(&path).unwrap();
    insert(&c, "adt_1");

    // Nothing but the seal changes an unsealed row.
    refused(
        c.execute(
            "UPDATE audit_entries SET action = 'user.deleted' WHERE id = 'adt_1'",
            [],
        ),
        "an unsealed row's action",
    );
    refused(
        c.execute(
            "UPDATE audit_entries SET sequence = 1, hash = 'h', body = '{\"x\":1}' WHERE id = 'adt_1'",
            [],
        ),
        "a seal that also changes the body",
    );
    // The seal.
    c.execute(
        "UPDATE audit_entries SET sequence = 1, hash = 'h1' WHERE id = 'adt_1'",
        [],
    )
    .unwrap();
    // A sealed row never changes again (the tamper test's trigger half).
    refused(
        c.execute(
            "UPDATE audit_entries SET hash = 'h2' WHERE id = 'adt_1'",
            [],
        ),
        "a second seal",
    );
    refused(
        c.execute(
            "UPDATE audit_entries SET outcome = 'failure' WHERE id = 'adt_1'",
            [],
        ),
        "a sealed row's outcome",
    );
    refused(
        c.execute("DELETE FROM audit_entries WHERE id = 'adt_1'", []),
        "a DELETE outside the purge",
    );

    // The purge marks its own transaction.
    let tx = c.unchecked_transaction().unwrap();
    tx.execute("INSERT INTO audit_purge (running) VALUES (1)", [])
        .unwrap();
    assert_eq!(
        tx.execute("DELETE FROM audit_entries WHERE id = 'adt_1'", [])
            .unwrap(),
        1
    );
    tx.execute("DELETE FROM audit_purge", []).unwrap();
    tx.commit().unwrap();
    let left: i64 = c
        .query_row("SELECT COUNT(*) FROM audit_entries", [], |r| r.get(0))
        .unwrap();
    assert_eq!(left, 0);
    // And the marker is gone: the next DELETE is refused again.
    insert(&c, "adt_2");
    refused(
        c.execute("DELETE FROM audit_entries WHERE id = 'adt_2'", []),
        "a DELETE after the purge",
    );
}
