//! SQL for the authorization server's state (revocations, outbox, links,
//! codes, refresh chains), used inside the transactions of the
//! `Store` impl in `lib.rs`.

use gatehouse_domain::{ChainId, Jti, OrgId, Timestamp, UserId};
use gatehouse_store::{LinkKind, NewLink, NewRevocation, RefreshChain, RefreshToken, StoreError};
use sqlx_core::query::query;
use sqlx_core::query_scalar::query_scalar;
use sqlx_postgres::PgConnection;

use crate::TxResult;
use crate::rows::{CHAIN_COLS, TOKEN_COLS};

/// The transaction-level advisory-lock key that orders revocation writers.
const REVOCATION_LOCK: i64 = 0x6768_7265_766f_6b65; // "ghrevoke"

/// Writes a revocation record and returns its id.
///
/// Nodes poll for ids above the highest they have seen (D24, D25, D44). An
/// identity column alone hands out ids in *allocation* order, but
/// transactions commit in any order: a poller could see id 10 committed
/// before id 9 and skip 9 for ever. So writers take a transaction-level
/// advisory lock before allocating the id and hold it until commit: ids then
/// become visible in increasing order.
///
/// Callers must make this the LAST statement of their transaction: it is the
/// only lock taken after all row locks, so it can never be part of a
/// deadlock, and it is held for as short a time as possible.
pub(crate) async fn insert_revocation(c: &mut PgConnection, r: &NewRevocation) -> TxResult<i64> {
    query("SELECT pg_advisory_xact_lock($1)")
        .bind(REVOCATION_LOCK)
        .execute(&mut *c)
        .await?;
    let id = query_scalar(
        "INSERT INTO revocations (kind, subject, cutoff, expires_at, scopes) VALUES ($1, $2, $3, $4, $5) RETURNING id",
    )
    .bind(r.kind.as_str())
    .bind(&r.subject)
    .bind(r.cutoff)
    .bind(r.expires_at.millis())
    .bind(r.scopes.map(super::bits))
    .fetch_one(&mut *c)
    .await?;
    Ok(id)
}

/// The `User` revocation that ends every access token of `user` issued up to
/// `now` (D11, D13, D19, D29). Last statement of its transaction (see
/// [`insert_revocation`]).
pub(crate) async fn revoke_user_tokens(
    c: &mut PgConnection,
    user: &UserId,
    now: Timestamp,
) -> TxResult<()> {
    insert_revocation(c, &NewRevocation::user(user, now)).await?;
    Ok(())
}

/// Ends the grants a user holds in storage: codes, refresh chains (their
/// browser sessions are `Effect::EndSessions`'s). The caller adds the
/// `User` revocation with [`revoke_user_tokens`] as the last statement of
/// the same transaction.
pub(crate) async fn end_user_grants(
    c: &mut PgConnection,
    user: &UserId,
    now: Timestamp,
) -> TxResult<()> {
    query("DELETE FROM auth_codes WHERE user_id = $1")
        .bind(user.as_str())
        .execute(&mut *c)
        .await?;
    query("UPDATE refresh_chains SET revoked_at = coalesce(revoked_at, $2) WHERE user_id = $1")
        .bind(user.as_str())
        .bind(now.millis())
        .execute(&mut *c)
        .await?;
    Ok(())
}

/// Writes a link and its e-mail; any earlier link of the same kind for the
/// user dies (D19: re-sending invalidates the previous link). One statement
/// (one round trip): the earlier links' deletion, the link and its e-mail
/// are data-modifying parts of one query. The new link's digest is fresh, so
/// the deletion (which sees the rows as they were before the statement)
/// cannot reach it.
pub(crate) async fn insert_link(
    c: &mut PgConnection,
    kind: LinkKind,
    org: &OrgId,
    user: &UserId,
    link: &NewLink,
    now: Timestamp,
) -> TxResult<()> {
    query(
        "WITH ended AS (DELETE FROM user_tokens WHERE user_id = $4 AND kind = $2),
              mail AS (INSERT INTO outbox (recipient, subject, body, created_at, next_attempt_at)
                       VALUES ($6, $7, $8, $9, $9))
         INSERT INTO user_tokens (digest, kind, org_id, user_id, expires_at) VALUES ($1, $2, $3, $4, $5)",
    )
    .bind(&link.digest[..])
    .bind(kind.as_str())
    .bind(org.as_str())
    .bind(user.as_str())
    .bind(link.expires_at.millis())
    .bind(&link.email.to)
    .bind(&link.email.subject)
    .bind(&link.email.body)
    .bind(now.millis())
    .execute(&mut *c)
    .await?;
    Ok(())
}

/// Queues `email` in the outbox at `now`.
pub(crate) async fn enqueue_mail(
    c: &mut PgConnection,
    email: &gatehouse_store::OutboundEmail,
    now: Timestamp,
) -> TxResult<()> {
    query("INSERT INTO outbox (recipient, subject, body, created_at, next_attempt_at) VALUES ($1, $2, $3, $4, $4)")
        .bind(&email.to)
        .bind(&email.subject)
        .bind(&email.body)
        .bind(now.millis())
        .execute(&mut *c)
        .await?;
    Ok(())
}

pub(crate) async fn delete_links(
    c: &mut PgConnection,
    kind: LinkKind,
    user: &UserId,
) -> TxResult<()> {
    query("DELETE FROM user_tokens WHERE user_id = $1 AND kind = $2")
        .bind(user.as_str())
        .bind(kind.as_str())
        .execute(&mut *c)
        .await?;
    Ok(())
}

/// A link as stored: (org, user id, expires_at, used_at), locked for the
/// rest of the transaction (`FOR UPDATE`): of two transactions using one
/// link, the second reads it as the first left it, so whether it may still be
/// used (`gatehouse_domain::link::usable`) is decided on what is committed.
pub(crate) async fn lock_link(
    c: &mut PgConnection,
    kind: LinkKind,
    digest: &[u8; 32],
) -> TxResult<Option<(OrgId, UserId, Timestamp, Option<Timestamp>)>> {
    let row: Option<(String, String, i64, Option<i64>)> = sqlx_core::query_as::query_as(
        "SELECT org_id, user_id, expires_at, used_at FROM user_tokens
         WHERE digest = $1 AND kind = $2 FOR UPDATE",
    )
    .bind(&digest[..])
    .bind(kind.as_str())
    .fetch_optional(&mut *c)
    .await?;
    Ok(row.map(|(org, user, expires_at, used_at)| {
        (
            OrgId::from_trusted(org),
            UserId::from_trusted(user),
            Timestamp::from_millis(expires_at),
            used_at.map(Timestamp::from_millis),
        )
    }))
}

/// Marks a link used; the caller's transaction rolls this back if it fails
/// later.
pub(crate) async fn use_link(
    c: &mut PgConnection,
    digest: &[u8; 32],
    now: Timestamp,
) -> TxResult<()> {
    query("UPDATE user_tokens SET used_at = $2 WHERE digest = $1")
        .bind(&digest[..])
        .bind(now.millis())
        .execute(&mut *c)
        .await?;
    Ok(())
}

pub(crate) async fn insert_chain(c: &mut PgConnection, ch: &RefreshChain) -> TxResult<()> {
    query(&format!(
        "INSERT INTO refresh_chains ({CHAIN_COLS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)"
    ))
    .bind(ch.id.as_str())
    .bind(ch.org.as_str())
    .bind(ch.client.as_str())
    .bind(ch.user.as_str())
    .bind(crate::bits(ch.scopes))
    .bind(ch.created_at.millis())
    .bind(ch.ends_at.millis())
    .bind(ch.revoked_at.map(Timestamp::millis))
    .bind(ch.auth_time.map(Timestamp::millis))
    .bind(ch.sid.as_deref())
    .bind(ch.authn.as_ref().map(|a| a.amr_text()))
    .bind(ch.authn.as_ref().map(|a| a.acr.as_str()))
    .execute(&mut *c)
    .await?;
    Ok(())
}

pub(crate) async fn insert_token(c: &mut PgConnection, t: &RefreshToken) -> TxResult<()> {
    query(&format!(
        "INSERT INTO refresh_tokens ({TOKEN_COLS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)"
    ))
    .bind(&t.digest[..])
    .bind(t.chain.as_str())
    .bind(t.issued_at.millis())
    .bind(t.expires_at.millis())
    .bind(t.used_at.map(Timestamp::millis))
    .bind(t.successor_sealed.as_deref())
    .bind(t.successor_until.map(Timestamp::millis))
    .bind(t.access_jti.as_ref().map(Jti::as_str))
    .execute(&mut *c)
    .await?;
    Ok(())
}

/// Revokes a chain once (D24, D25): marks it, erases its sealed successors
/// (a revoked chain never benefits from the grace window) and, the first
/// time only, writes a `Chain` revocation. The conditional update makes
/// concurrent revocations write one record.
pub(crate) async fn revoke_chain(
    c: &mut PgConnection,
    org: &OrgId,
    chain: &ChainId,
    now: Timestamp,
    access_expiry: Timestamp,
) -> TxResult<bool> {
    // D2: a chain of another organization is as good as unknown.
    query_scalar::<_, i32>("SELECT 1 FROM refresh_chains WHERE id = $1 AND org_id = $2")
        .bind(chain.as_str())
        .bind(org.as_str())
        .fetch_optional(&mut *c)
        .await?
        .ok_or(StoreError::NotFound)?;
    let changed =
        query("UPDATE refresh_chains SET revoked_at = $2 WHERE id = $1 AND revoked_at IS NULL")
            .bind(chain.as_str())
            .bind(now.millis())
            .execute(&mut *c)
            .await?
            .rows_affected();
    query("UPDATE refresh_tokens SET successor_sealed = NULL, successor_until = NULL WHERE chain_id = $1 AND successor_until IS NOT NULL")
        .bind(chain.as_str())
        .execute(&mut *c)
        .await?;
    if changed > 0 {
        insert_revocation(c, &NewRevocation::chain(chain, now, access_expiry)).await?;
    }
    Ok(changed > 0)
}

/// Deletes at most `batch` expired rows from each table (D24). Rows another
/// node is purging right now are skipped, not waited for.
pub(crate) async fn purge(c: &mut PgConnection, now: Timestamp, batch: u32) -> TxResult<u64> {
    let now = now.millis();
    let hour_ago = now - 3_600_000;
    let sessions_cond = crate::sessions::purgeable(1);
    // (table, key, condition on $1, the value of $1)
    let statements: [(&str, &str, &str, i64); 13] = [
        ("auth_codes", "digest", "expires_at < $1", now),
        ("refresh_tokens", "digest", "expires_at < $1", now),
        (
            "refresh_chains",
            "id",
            "ends_at < $1 OR (revoked_at IS NOT NULL AND revoked_at < $1 - 2592000000)",
            now,
        ),
        ("user_tokens", "digest", "expires_at < $1", now),
        // D57: sessions no longer listed.
        ("sessions", "digest", sessions_cond.as_str(), now),
        // D48 (continued): spent one-time values, once they have expired.
        ("used_once", "digest", "expires_at < $1", now),
        ("revocations", "id", "expires_at < $1", now),
        ("login_failures", "id", "at < $1", hour_ago),
        // D56: the second step's throttles look back half an hour.
        ("second_step_failures", "ctid", "at < $1", hour_ago),
        (
            "outbox",
            "id",
            "sent_at IS NOT NULL AND sent_at < $1",
            hour_ago,
        ),
        // D19 (revised): reset e-mails count against an account this long.
        (
            "reset_requests",
            "id",
            "requested_at < $1",
            now - gatehouse_domain::user::RESET_EMAIL_WINDOW_SECS * 1000,
        ),
        // D50: kept responses (and claims) past their retention.
        ("idempotency_keys", "id", "expires_at < $1", now),
        // D46: usage counts are kept 30 days (the column is in minutes).
        (
            "usage_minutes",
            "ctid",
            "minute < $1",
            now.div_euclid(60_000) - gatehouse_domain::manage::USAGE_RETENTION_DAYS * 24 * 60,
        ),
    ];
    let mut total = 0u64;
    for (table, key, cond, before) in statements {
        let sql = format!(
            "DELETE FROM {table} WHERE {key} IN (
                SELECT {key} FROM {table} WHERE {cond} LIMIT $2 FOR UPDATE SKIP LOCKED)"
        );
        total += query(&sql)
            .bind(before)
            .bind(i64::from(batch))
            .execute(&mut *c)
            .await?
            .rows_affected();
    }
    Ok(total)
}
