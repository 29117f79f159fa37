//! Embedded migrations, applied in order at start (and by `gatehouse
//! migrate`) under a PostgreSQL advisory lock, so several nodes starting at
//! once apply each exactly once (D44).
//!
//! The SQL files are embedded at compile time, as `sqlx::migrate!` would do;
//! the macro itself is not used because `sqlx-macros` drags in an optional
//! `sqlx-sqlite` whose `libsqlite3-sys` clashes with rusqlite's in this
//! workspace (see Cargo.toml). The bookkeeping is sqlx's own: the
//! `_sqlx_migrations` table, a checksum per migration (an edited migration
//! that was already applied is refused), one transaction per migration.

use std::borrow::Cow;

use gatehouse_domain::Email;
use gatehouse_store::{StoreError, StoreResult};
use sqlx_core::connection::Connection;
use sqlx_core::migrate::{MigrateError, Migration, MigrationType, Migrator};
use sqlx_postgres::{PgConnectOptions, PgConnection};

use crate::db_err;

/// (version, description, SQL), in order. Never edit one that has shipped:
/// add a new file.
const MIGRATIONS: &[(i64, &str, &str)] = &[
    (1, "init", include_str!("../migrations/0001_init.sql")),
    (2, "auth", include_str!("../migrations/0002_auth.sql")),
    (
        3,
        "rate_limits",
        include_str!("../migrations/0003_rate_limits.sql"),
    ),
    (4, "jobs", include_str!("../migrations/0004_jobs.sql")),
    // From version 6 on, a change both backends make has one number on both
    // (SQLite's 6 and 7 are these); the older ones were numbered apart.
    (
        6,
        "email_keys",
        include_str!("../migrations/0006_email_keys.sql"),
    ),
    (
        7,
        "reset_requests",
        include_str!("../migrations/0007_reset_requests.sql"),
    ),
    (
        8,
        "idempotency",
        include_str!("../migrations/0008_idempotency.sql"),
    ),
    (9, "oidc", include_str!("../migrations/0009_oidc.sql")),
    (
        10,
        "client_revocations",
        include_str!("../migrations/0010_client_revocations.sql"),
    ),
    (
        11,
        "management",
        include_str!("../migrations/0011_management.sql"),
    ),
    (
        12,
        "search_changes",
        include_str!("../migrations/0012_search_changes.sql"),
    ),
    (
        13,
        "rate_leases",
        include_str!("../migrations/0013_rate_leases.sql"),
    ),
    (
        14,
        "offboarding",
        include_str!("../migrations/0014_offboarding.sql"),
    ),
    (
        15,
        "one_search",
        include_str!("../migrations/0015_one_search.sql"),
    ),
    (
        16,
        "used_once",
        include_str!("../migrations/0016_used_once.sql"),
    ),
    (17, "events", include_str!("../migrations/0017_events.sql")),
    (
        18,
        "event_progress",
        include_str!("../migrations/0018_event_progress.sql"),
    ),
    (
        19,
        "deferred_insert_counts",
        include_str!("../migrations/0019_deferred_insert_counts.sql"),
    ),
    (
        20,
        "webhook_endpoints",
        include_str!("../migrations/0020_webhook_endpoints.sql"),
    ),
    (
        21,
        "webhook_deliveries",
        include_str!("../migrations/0021_webhook_deliveries.sql"),
    ),
    (
        22,
        "resequence_passed_over",
        include_str!("../migrations/0022_resequence_passed_over.sql"),
    ),
    (
        23,
        "sessions",
        include_str!("../migrations/0023_sessions.sql"),
    ),
    (24, "mfa", include_str!("../migrations/0024_mfa.sql")),
    (
        25,
        "master_key_rotation",
        include_str!("../migrations/0025_master_key_rotation.sql"),
    ),
    (
        26,
        "passkeys",
        include_str!("../migrations/0026_passkeys.sql"),
    ),
    (27, "audit", include_str!("../migrations/0027_audit.sql")),
    (
        28,
        "scope_bits",
        include_str!("../migrations/0028_scope_bits.sql"),
    ),
    (
        29,
        "audit_keys",
        include_str!("../migrations/0029_audit_keys.sql"),
    ),
    (
        30,
        "audit_first_uses",
        include_str!("../migrations/0030_audit_first_uses.sql"),
    ),
    (
        31,
        "org_changes_notify",
        include_str!("../migrations/0031_org_changes_notify.sql"),
    ),
];

/// The advisory-lock key of the migration (`"gatehous"` in ASCII), separate
/// from the transaction-level keys the store uses.
pub(crate) const MIGRATION_LOCK: i64 = 0x6761_7465_686f_7573;

fn migrator() -> Migrator {
    let migrations = MIGRATIONS
        .iter()
        .map(|&(version, description, sql)| {
            Migration::new(
                version,
                Cow::Borrowed(description),
                MigrationType::Simple,
                Cow::Borrowed(sql),
                false,
            )
        })
        .collect::<Vec<_>>();
    Migrator {
        migrations: Cow::Owned(migrations),
        ignore_missing: false,
        // We hold our own lock around the whole run (below).
        locking: false,
        no_tx: false,
    }
}

fn migrate_err(e: MigrateError) -> StoreError {
    match e {
        MigrateError::Execute(e) => db_err(e),
        other => StoreError::Internal(format!("migration failed: {other}")),
    }
}

/// Applies every pending migration on a dedicated connection, holding a
/// session-level advisory lock for the whole run. The connection is closed
/// afterwards whatever happened, which also releases the lock if a migration
/// failed half-way.
pub(crate) async fn migrate(options: &PgConnectOptions) -> StoreResult<()> {
    let mut c = PgConnection::connect_with(options).await.map_err(db_err)?;
    let outcome = run_locked(&mut c).await;
    let _ = c.close().await;
    outcome
}

async fn run_locked(c: &mut PgConnection) -> StoreResult<()> {
    // Stored strings are UTF-8 text; a SQL_ASCII database would accept
    // anything and compare bytes, so refuse it up front.
    let encoding: String = sqlx_core::query_scalar::query_scalar("SHOW server_encoding")
        .fetch_one(&mut *c)
        .await
        .map_err(db_err)?;
    if !encoding.eq_ignore_ascii_case("UTF8") {
        return Err(StoreError::Internal(format!(
            "the database's encoding is {encoding}; Gatehouse needs a UTF8 database \
             (CREATE DATABASE … ENCODING 'UTF8')"
        )));
    }
    sqlx_core::query::query("SELECT pg_advisory_lock($1)")
        .bind(MIGRATION_LOCK)
        .execute(&mut *c)
        .await
        .map_err(db_err)?;
    // `run_direct` rather than `run`: the latter's `Acquire` bound makes the
    // future not `Send` (a known sqlx limitation), and `connect` must be
    // usable from spawned tasks.
    let mut applied = migrator().run_direct(&mut *c).await.map_err(migrate_err);
    if applied.is_ok() {
        tracing::debug!("PostgreSQL schema is up to date");
        applied = rekey_emails(&mut *c).await;
    }
    let unlocked = sqlx_core::query::query("SELECT pg_advisory_unlock($1)")
        .bind(MIGRATION_LOCK)
        .execute(&mut *c)
        .await
        .map_err(db_err);
    applied.and(unlocked.map(|_| ()))
}

/// D8 (revised): gives every row whose `email_norm` was computed by an older
/// rule (plain lower case) the current key, [`Email::normalized`]. Runs at
/// every start under the migration lock, after the migrations, so rows that
/// an older node wrote during a rolling upgrade are caught at the next start.
/// Only non-ASCII addresses can differ, and `users_non_ascii_email`
/// (migration 6) lists just those.
///
/// Rows are taken oldest first, each update on its own (autocommit): a row
/// whose new key another row already holds (two addresses that were distinct
/// under the old rule and are one address now) keeps its old key, and a
/// warning names both; no row is lost and the start does not fail, but the
/// later account can be found only by its old key until an operator resolves
/// the pair.
async fn rekey_emails(c: &mut PgConnection) -> StoreResult<()> {
    let mut tally = gatehouse_store::rekey::Rekeying::default();
    // Keyset pages of the partial index, so memory does not grow with the
    // number of non-ASCII rows; updating `email_norm` does not move a row in
    // the (created_at, id) order.
    let mut after: (i64, String) = (i64::MIN, String::new());
    loop {
        let rows: Vec<(i64, String, String, String, String)> = sqlx_core::query_as::query_as(
            "SELECT created_at, id, org_id, email, email_norm FROM users
             WHERE octet_length(email) <> char_length(email) AND (created_at, id) > ($1, $2)
             ORDER BY created_at, id LIMIT 1000",
        )
        .bind(after.0)
        .bind(&after.1)
        .fetch_all(&mut *c)
        .await
        .map_err(db_err)?;
        let Some(last) = rows.last() else { break };
        after = (last.0, last.1.clone());
        for (_, id, org, email, old) in rows {
            let new = Email::from_trusted(email).normalized();
            if new == old {
                continue;
            }
            // The NOT EXISTS keeps a collision from becoming a unique violation;
            // a violation anyway (a node inserting that address at this moment)
            // is the same collision, reported the same way.
            let updated = sqlx_core::query::query(
                "UPDATE users SET email_norm = $1 WHERE id = $2 AND email_norm = $3
             AND NOT EXISTS (SELECT 1 FROM users WHERE org_id = $4 AND email_norm = $1)",
            )
            .bind(&new)
            .bind(&id)
            .bind(&old)
            .bind(&org)
            .execute(&mut *c)
            .await;
            let collided = match updated {
                Ok(r) => r.rows_affected() == 0,
                Err(sqlx_core::Error::Database(e)) if e.is_unique_violation() => true,
                Err(e) => return Err(db_err(e)),
            };
            if collided {
                tally.kept(&id, &org, &new);
            } else {
                tally.rekeyed();
            }
        }
    }
    tally.report();
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn versions_increase_and_files_are_embedded() {
        let versions: Vec<i64> = super::MIGRATIONS.iter().map(|m| m.0).collect();
        assert!(versions.windows(2).all(|w| w[0] < w[1]));
        assert!(super::MIGRATIONS.iter().all(|m| !m.2.trim().is_empty()));
        assert_eq!(super::migrator().iter().count(), super::MIGRATIONS.len());
    }
}
