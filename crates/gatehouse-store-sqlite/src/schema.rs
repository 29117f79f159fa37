//! Embedded migrations, applied in order inside one `BEGIN IMMEDIATE`
//! transaction each, so two processes starting at once apply each only once.
//! Each applied migration's SHA-256 is recorded in `schema_migrations`, and a
//! database whose applied migration differs from the SQL embedded here is
//! refused, as the PostgreSQL backend's bookkeeping does.

use std::path::Path;

use gatehouse_domain::Email;
use gatehouse_store::{StoreError, StoreResult};
use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

use crate::db_err;

pub(crate) const MIGRATIONS: &[(i64, &str)] = &[
    (1, include_str!("../migrations/0001_init.sql")),
    (2, include_str!("../migrations/0002_api_keys.sql")),
    (3, include_str!("../migrations/0003_auth.sql")),
    (4, include_str!("../migrations/0004_access_jti.sql")),
    (5, include_str!("../migrations/0005_jobs.sql")),
    (6, include_str!("../migrations/0006_email_keys.sql")),
    (7, include_str!("../migrations/0007_reset_requests.sql")),
    (8, include_str!("../migrations/0008_idempotency.sql")),
    (9, include_str!("../migrations/0009_oidc.sql")),
    (
        10,
        include_str!("../migrations/0010_client_revocations.sql"),
    ),
    (11, include_str!("../migrations/0011_management.sql")),
    (12, include_str!("../migrations/0012_search_changes.sql")),
    (13, include_str!("../migrations/0013_offboarding.sql")),
    (14, include_str!("../migrations/0014_one_search.sql")),
    (15, include_str!("../migrations/0015_used_once.sql")),
    (16, include_str!("../migrations/0016_events.sql")),
    (17, include_str!("../migrations/0017_webhook_endpoints.sql")),
    (
        18,
        include_str!("../migrations/0018_webhook_deliveries.sql"),
    ),
    (19, include_str!("../migrations/0019_sessions.sql")),
    (20, include_str!("../migrations/0020_mfa.sql")),
    (
        21,
        include_str!("../migrations/0021_master_key_rotation.sql"),
    ),
    (22, include_str!("../migrations/0022_passkeys.sql")),
    (23, include_str!("../migrations/0023_audit.sql")),
    (24, include_str!("../migrations/0024_audit_keys.sql")),
    (25, include_str!("../migrations/0025_audit_first_uses.sql")),
    (
        26,
        include_str!("../migrations/0026_audit_sealed_at_insert.sql"),
    ),
];

/// D8 (revised): gives every row whose `email_norm` was computed by an older
/// rule (plain lower case) the current key, [`Email::normalized`]. Runs at
/// every open, after the migrations, so rows written by an older binary
/// sharing the file are caught too. Only non-ASCII addresses can differ, and
/// `users_non_ascii_email` (migration 6) lists just those.
///
/// Rows are taken oldest first; a row whose new key another row already holds
/// (two addresses that were distinct under the old rule and are one address
/// now) keeps its old key, and a warning names both: no row is lost and the
/// open does not fail, but the later account can be found only by its old
/// key until an operator resolves the pair.
pub(crate) fn rekey_emails(c: &mut Connection) -> StoreResult<()> {
    let tx = c
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(db_err)?;
    // One streaming pass keeps only the rows whose key changes (none, once
    // re-keyed), so memory does not grow with the number of non-ASCII rows.
    let stale: Vec<(i64, String, String, String)> = tx
        .prepare(
            "SELECT seq, id, org_id, email, email_norm FROM users
             WHERE length(email) <> length(CAST(email AS BLOB))
             ORDER BY created_at, seq",
        )
        .and_then(|mut st| {
            let mut stale = Vec::new();
            let mut rows = st.query([])?;
            while let Some(r) = rows.next()? {
                let new = Email::from_trusted(r.get(3)?).normalized();
                if new != r.get::<_, String>(4)? {
                    stale.push((r.get(0)?, r.get(1)?, r.get(2)?, new));
                }
            }
            Ok(stale)
        })
        .map_err(db_err)?;
    let mut tally = gatehouse_store::rekey::Rekeying::default();
    for (seq, id, org, new) in stale {
        let holder: Option<String> = tx
            .prepare_cached("SELECT id FROM users WHERE org_id = ?1 AND email_norm = ?2")
            .and_then(|mut st| st.query_row(params![org, new], |r| r.get(0)).optional())
            .map_err(db_err)?;
        if holder.is_some() {
            tally.kept(&id, &org, &new);
            continue;
        }
        tx.prepare_cached("UPDATE users SET email_norm = ?1 WHERE seq = ?2")
            .and_then(|mut st| st.execute(params![new, seq]))
            .map_err(db_err)?;
        tally.rekeyed();
    }
    tx.commit().map_err(db_err)?;
    tally.report();
    Ok(())
}

/// The SHA-256 of a migration's SQL, as recorded in
/// `schema_migrations.checksum`.
pub(crate) fn checksum(sql: &str) -> Vec<u8> {
    use sha2::Digest;
    sha2::Sha256::digest(sql.as_bytes()).to_vec()
}

/// Brings the checksum bookkeeping up to date, then checks it, in one
/// `BEGIN IMMEDIATE` transaction: a database made before checksums were
/// recorded gets the `checksum` column, and its applied migrations the
/// checksums of the SQL embedded here (they were applied from it); then
/// every applied migration this build knows must match its embedded SQL,
/// or the database is refused. Versions this build does not know are left
/// alone.
pub(crate) fn check_applied(c: &mut Connection, path: &Path) -> StoreResult<()> {
    let tx = c
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(db_err)?;
    let has_column: bool = tx
        .query_row(
            "SELECT EXISTS (SELECT 1 FROM pragma_table_info('schema_migrations') WHERE name = 'checksum')",
            [],
            |r| r.get(0),
        )
        .map_err(db_err)?;
    if !has_column {
        tx.execute_batch("ALTER TABLE schema_migrations ADD COLUMN checksum BLOB")
            .map_err(db_err)?;
    }
    for (version, sql) in MIGRATIONS {
        tx.execute(
            "UPDATE schema_migrations SET checksum = ?2 WHERE version = ?1 AND checksum IS NULL",
            params![version, checksum(sql)],
        )
        .map_err(db_err)?;
        let recorded: Option<Vec<u8>> = tx
            .query_row(
                "SELECT checksum FROM schema_migrations WHERE version = ?1",
                [version],
                |r| r.get(0),
            )
            .optional()
            .map_err(db_err)?;
        if recorded.is_some_and(|r| r != checksum(sql)) {
            return Err(StoreError::Internal(format!(
                "{}: SQLite migration {version} was applied from different SQL than this \
                 build embeds (checksum mismatch); refusing to open the database",
                path.display()
            )));
        }
    }
    tx.commit().map_err(db_err)
}

#[cfg(test)]
mod tests {
    use rusqlite::Connection;

    use super::{MIGRATIONS, checksum};
    use crate::SqliteStore;
    use gatehouse_store::StoreError;

    fn recorded(path: &std::path::Path) -> Vec<(i64, Option<Vec<u8>>)> {
        let c = Connection::open(path).unwrap();
        let mut s = c
            .prepare("SELECT version, checksum FROM schema_migrations ORDER BY version")
            .unwrap();
        s.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    }

    fn embedded() -> Vec<(i64, Option<Vec<u8>>)> {
        MIGRATIONS
            .iter()
            .map(|(v, sql)| (*v, Some(checksum(sql))))
            .collect()
    }

    #[test]
    fn applied_migrations_record_their_checksums() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("gatehouse.db");
        drop(SqliteStore::open(&path).unwrap());
        assert_eq!(recorded(&path), embedded());
        // Opening again checks them and changes nothing.
        drop(SqliteStore::open(&path).unwrap());
        assert_eq!(recorded(&path), embedded());
    }

    #[test]
    fn a_database_made_before_checksums_opens_and_gets_them() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("gatehouse.db");
        drop(SqliteStore::open(&path).unwrap());
        // The bookkeeping as a build without checksums left it.
        Connection::open(&path)
            .unwrap()
            .execute_batch("ALTER TABLE schema_migrations DROP COLUMN checksum")
            .unwrap();
        drop(SqliteStore::open(&path).unwrap());
        assert_eq!(recorded(&path), embedded());
    }

    #[test]
    fn a_tampered_checksum_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("gatehouse.db");
        drop(SqliteStore::open(&path).unwrap());
        let version = MIGRATIONS[2].0;
        Connection::open(&path)
            .unwrap()
            .execute(
                "UPDATE schema_migrations SET checksum = zeroblob(32) WHERE version = ?1",
                [version],
            )
            .unwrap();
        match SqliteStore::open(&path) {
            Err(StoreError::Internal(m)) => {
                assert!(
                    m.contains(&format!("migration {version} "))
                        && m.contains("checksum mismatch")
                        && m.contains(&path.display().to_string()),
                    "{m}"
                );
            }
            Err(other) => panic!("{other:?}"),
            Ok(_) => panic!("a database with an edited migration was opened"),
        }
    }
}
