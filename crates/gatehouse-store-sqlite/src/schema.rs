//! Embedded migrations, applied in order inside one `BEGIN IMMEDIATE`
//! transaction each, so two processes starting at once apply each only once.

use gatehouse_domain::Email;
use gatehouse_store::StoreResult;
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
    let (mut rekeyed, mut kept) = (0u64, 0u64);
    for (seq, id, org, new) in stale {
        let holder: Option<String> = tx
            .prepare_cached("SELECT id FROM users WHERE org_id = ?1 AND email_norm = ?2")
            .and_then(|mut st| st.query_row(params![org, new], |r| r.get(0)).optional())
            .map_err(db_err)?;
        if let Some(holder) = holder {
            tracing::warn!(
                user = %id, org = %org, key = %new, holder = %holder,
                "e-mail re-keying (D8): this user's address is now the same address as an \
                 earlier user's; its old key is kept, resolve the pair by hand"
            );
            kept += 1;
            continue;
        }
        tx.prepare_cached("UPDATE users SET email_norm = ?1 WHERE seq = ?2")
            .and_then(|mut st| st.execute(params![new, seq]))
            .map_err(db_err)?;
        rekeyed += 1;
    }
    tx.commit().map_err(db_err)?;
    if rekeyed + kept > 0 {
        tracing::info!(
            rekeyed,
            kept,
            "e-mail keys brought to the D8 (revised) rule"
        );
    }
    Ok(())
}
