//! SQL for the authorization server's state (revocations, outbox, links,
//! sessions, codes, refresh chains), used by the `Store` impl in `lib.rs`.

use gatehouse_domain::{ChainId, ClientId, Jti, OrgId, Timestamp, UserId};
use gatehouse_store::{
    AuthCode, LinkKind, NewLink, NewRevocation, OutboundEmail, RefreshChain, RefreshToken,
    StoreError, StoreResult,
};
use rusqlite::{Connection, OptionalExtension, Row, params};

use gatehouse_store::decode;

use crate::{corrupt, db_err, digest32, scopes};

pub(crate) fn insert_revocation(c: &Connection, r: &NewRevocation) -> StoreResult<i64> {
    c.prepare_cached(
        "INSERT INTO revocations (kind, subject, cutoff, expires_at, scopes) VALUES (?1, ?2, ?3, ?4, ?5)",
    )
    .and_then(|mut s| {
        s.execute(params![
            r.kind.as_str(),
            r.subject,
            r.cutoff,
            r.expires_at.millis(),
            r.scopes.map(|s| i64::from(s.bits())),
        ])
    })
    .map_err(db_err)?;
    Ok(c.last_insert_rowid())
}

/// Ends every grant a user holds (D11, D13, D19, D29): their access tokens
/// through a `User` revocation at `now`, and their codes and refresh chains
/// in storage. Their browser sessions are `Effect::EndSessions`'s.
pub(crate) fn revoke_user(c: &Connection, user: &UserId, now: Timestamp) -> StoreResult<()> {
    insert_revocation(c, &NewRevocation::user(user, now))?;
    c.prepare_cached("DELETE FROM auth_codes WHERE user_id = ?1")
        .and_then(|mut s| s.execute([user.as_str()]))
        .map_err(db_err)?;
    c.prepare_cached(
        "UPDATE refresh_chains SET revoked_at = coalesce(revoked_at, ?2) WHERE user_id = ?1",
    )
    .and_then(|mut s| s.execute(params![user.as_str(), now.millis()]))
    .map_err(db_err)?;
    Ok(())
}

pub(crate) fn enqueue_mail(
    c: &Connection,
    email: &OutboundEmail,
    now: Timestamp,
) -> StoreResult<()> {
    c.prepare_cached("INSERT INTO outbox (recipient, subject, body, created_at, next_attempt_at) VALUES (?1, ?2, ?3, ?4, ?4)")
        .and_then(|mut s| s.execute(params![email.to, email.subject, email.body, now.millis()]))
        .map_err(db_err)?;
    Ok(())
}

/// Writes a link and its e-mail; any earlier link of the same kind for the
/// user dies (D19: re-sending invalidates the previous link).
pub(crate) fn insert_link(
    c: &Connection,
    kind: LinkKind,
    org: &OrgId,
    user: &UserId,
    link: &NewLink,
    now: Timestamp,
) -> StoreResult<()> {
    delete_links(c, kind, user)?;
    c.prepare_cached("INSERT INTO user_tokens (digest, kind, org_id, user_id, expires_at) VALUES (?1, ?2, ?3, ?4, ?5)")
        .and_then(|mut s| s.execute(params![link.digest.to_vec(), kind.as_str(), org.as_str(), user.as_str(), link.expires_at.millis()]))
        .map_err(db_err)?;
    enqueue_mail(c, &link.email, now)
}

pub(crate) fn delete_links(c: &Connection, kind: LinkKind, user: &UserId) -> StoreResult<()> {
    c.prepare_cached("DELETE FROM user_tokens WHERE user_id = ?1 AND kind = ?2")
        .and_then(|mut s| s.execute(params![user.as_str(), kind.as_str()]))
        .map_err(db_err)?;
    Ok(())
}

/// A link as stored: (org, user id, expires_at, used_at). Whether it may be
/// used is `gatehouse_domain::link::usable`'s decision, not the query's.
pub(crate) type LinkRow = (OrgId, UserId, Timestamp, Option<Timestamp>);

pub(crate) fn link_row(
    c: &Connection,
    kind: LinkKind,
    digest: &[u8; 32],
) -> StoreResult<Option<LinkRow>> {
    c.prepare_cached("SELECT org_id, user_id, expires_at, used_at FROM user_tokens WHERE digest = ?1 AND kind = ?2")
        .and_then(|mut s| {
            s.query_row(params![digest.to_vec(), kind.as_str()], |r| {
                Ok((
                    OrgId::from_trusted(r.get(0)?),
                    UserId::from_trusted(r.get(1)?),
                    Timestamp::from_millis(r.get(2)?),
                    r.get::<_, Option<i64>>(3)?.map(Timestamp::from_millis),
                ))
            })
            .optional()
        })
        .map_err(db_err)
}

pub(crate) fn use_link(c: &Connection, digest: &[u8; 32], now: Timestamp) -> StoreResult<()> {
    c.prepare_cached("UPDATE user_tokens SET used_at = ?2 WHERE digest = ?1")
        .and_then(|mut s| s.execute(params![digest.to_vec(), now.millis()]))
        .map_err(db_err)?;
    Ok(())
}

pub(crate) const CODE_COLS: &str = "digest, org_id, client_id, user_id, redirect_uri, scopes, code_challenge, created_at, expires_at, used_at, chain_id, nonce, auth_time, sid, amr, acr";

pub(crate) fn code_row(r: &Row<'_>) -> rusqlite::Result<AuthCode> {
    let chain: Option<String> = r.get(10)?;
    // The digest is the row's key: the row is named by its chain.
    let row = chain.clone().unwrap_or_else(|| "(no chain)".into());
    let row = row.as_str();
    Ok(AuthCode {
        digest: digest32(r.get(0)?, ("auth_codes", "digest", row))?,
        org: OrgId::from_trusted(r.get(1)?),
        client: ClientId::from_trusted(r.get(2)?),
        user: UserId::from_trusted(r.get(3)?),
        redirect_uri: r.get(4)?,
        scopes: scopes(r.get(5)?, ("auth_codes", "scopes", row))?,
        code_challenge: r.get(6)?,
        created_at: Timestamp::from_millis(r.get(7)?),
        expires_at: Timestamp::from_millis(r.get(8)?),
        used_at: r.get::<_, Option<i64>>(9)?.map(Timestamp::from_millis),
        chain: decode::optional(chain.as_deref(), ChainId::parse)
            .map_err(|p| corrupt("auth_codes", "chain_id", row, &p))?,
        nonce: r.get(11)?,
        auth_time: r.get::<_, Option<i64>>(12)?.map(Timestamp::from_millis),
        sid: r.get(13)?,
        authn: gatehouse_domain::mfa::Authn::from_columns(r.get(14)?, r.get(15)?),
    })
}

pub(crate) const CHAIN_COLS: &str = "id, org_id, client_id, user_id, scopes, created_at, ends_at, revoked_at, auth_time, sid, amr, acr";

pub(crate) fn chain_row(r: &Row<'_>, at: usize) -> rusqlite::Result<RefreshChain> {
    let text: String = r.get(at)?;
    let id = decode::text(&text, ChainId::parse)
        .map_err(|p| corrupt("refresh_chains", "id", &text, &p))?;
    Ok(RefreshChain {
        org: OrgId::from_trusted(r.get(at + 1)?),
        client: ClientId::from_trusted(r.get(at + 2)?),
        user: UserId::from_trusted(r.get(at + 3)?),
        scopes: scopes(r.get(at + 4)?, ("refresh_chains", "scopes", &text))?,
        created_at: Timestamp::from_millis(r.get(at + 5)?),
        ends_at: Timestamp::from_millis(r.get(at + 6)?),
        revoked_at: r.get::<_, Option<i64>>(at + 7)?.map(Timestamp::from_millis),
        auth_time: r.get::<_, Option<i64>>(at + 8)?.map(Timestamp::from_millis),
        sid: r.get(at + 9)?,
        authn: gatehouse_domain::mfa::Authn::from_columns(r.get(at + 10)?, r.get(at + 11)?),
        id,
    })
}

pub(crate) const TOKEN_COLS: &str = "digest, chain_id, issued_at, expires_at, used_at, successor_sealed, successor_until, access_jti";

pub(crate) fn token_row(r: &Row<'_>) -> rusqlite::Result<RefreshToken> {
    let chain: String = r.get(1)?;
    Ok(RefreshToken {
        // The digest is the row's key: the row is named by its chain.
        digest: digest32(r.get(0)?, ("refresh_tokens", "digest", &chain))?,
        chain: decode::text(&chain, ChainId::parse)
            .map_err(|p| corrupt("refresh_tokens", "chain_id", &chain, &p))?,
        issued_at: Timestamp::from_millis(r.get(2)?),
        expires_at: Timestamp::from_millis(r.get(3)?),
        used_at: r.get::<_, Option<i64>>(4)?.map(Timestamp::from_millis),
        successor_sealed: r.get(5)?,
        successor_until: r.get::<_, Option<i64>>(6)?.map(Timestamp::from_millis),
        access_jti: decode::optional(r.get::<_, Option<String>>(7)?.as_deref(), Jti::parse)
            .map_err(|p| corrupt("refresh_tokens", "access_jti", &chain, &p))?,
    })
}

pub(crate) fn insert_chain(c: &Connection, ch: &RefreshChain) -> StoreResult<()> {
    c.prepare_cached(&format!(
        "INSERT INTO refresh_chains ({CHAIN_COLS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)"
    ))
    .and_then(|mut s| {
        s.execute(params![
            ch.id.as_str(),
            ch.org.as_str(),
            ch.client.as_str(),
            ch.user.as_str(),
            ch.scopes.bits() as i64,
            ch.created_at.millis(),
            ch.ends_at.millis(),
            ch.revoked_at.map(Timestamp::millis),
            ch.auth_time.map(Timestamp::millis),
            ch.sid,
            ch.authn.as_ref().map(|a| a.amr_text()),
            ch.authn.as_ref().map(|a| a.acr.as_str()),
        ])
    })
    .map_err(db_err)?;
    Ok(())
}

pub(crate) fn insert_token(c: &Connection, t: &RefreshToken) -> StoreResult<()> {
    c.prepare_cached(&format!(
        "INSERT INTO refresh_tokens ({TOKEN_COLS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)"
    ))
    .and_then(|mut s| {
        s.execute(params![
            t.digest.to_vec(),
            t.chain.as_str(),
            t.issued_at.millis(),
            t.expires_at.millis(),
            t.used_at.map(Timestamp::millis),
            t.successor_sealed,
            t.successor_until.map(Timestamp::millis),
            t.access_jti.as_ref().map(Jti::as_str)
        ])
    })
    .map_err(db_err)?;
    Ok(())
}

pub(crate) fn revoke_chain(
    c: &Connection,
    org: &OrgId,
    chain: &ChainId,
    now: Timestamp,
    access_expiry: Timestamp,
) -> StoreResult<bool> {
    // D2: a chain of another organization is as good as unknown.
    c.prepare_cached("SELECT 1 FROM refresh_chains WHERE id = ?1 AND org_id = ?2")
        .and_then(|mut s| {
            s.query_row(params![chain.as_str(), org.as_str()], |_| Ok(()))
                .optional()
        })
        .map_err(db_err)?
        .ok_or(StoreError::NotFound)?;
    let changed = c
        .prepare_cached(
            "UPDATE refresh_chains SET revoked_at = ?2 WHERE id = ?1 AND revoked_at IS NULL",
        )
        .and_then(|mut s| s.execute(params![chain.as_str(), now.millis()]))
        .map_err(db_err)?;
    // Sealed successors must never be handed out for a revoked chain (D24).
    c.prepare_cached("UPDATE refresh_tokens SET successor_sealed = NULL, successor_until = NULL WHERE chain_id = ?1")
        .and_then(|mut s| s.execute([chain.as_str()]))
        .map_err(db_err)?;
    if changed > 0 {
        insert_revocation(c, &NewRevocation::chain(chain, now, access_expiry))?;
    }
    Ok(changed > 0)
}

/// Deletes at most `batch` expired rows from each table.
pub(crate) fn purge(c: &Connection, now: Timestamp, batch: u32) -> StoreResult<u64> {
    let now = now.millis();
    let hour_ago = now - 3_600_000;
    let sessions_cond = crate::sessions::purgeable(1);
    // D19 (revised): reset e-mails count against an account for this long.
    let resets_before = now - gatehouse_domain::user::RESET_EMAIL_WINDOW_SECS * 1000;
    // (table, condition on ?1, the value of ?1)
    let statements = [
        ("auth_codes", "expires_at < ?1", now),
        ("refresh_tokens", "expires_at < ?1", now),
        (
            "refresh_chains",
            "ends_at < ?1 OR (revoked_at IS NOT NULL AND revoked_at < ?1 - 2592000000)",
            now,
        ),
        ("user_tokens", "expires_at < ?1", now),
        // D57: sessions no longer listed.
        ("sessions", sessions_cond.as_str(), now),
        // D48 (continued): spent one-time values, once they have expired.
        ("used_once", "expires_at < ?1", now),
        ("revocations", "expires_at < ?1", now),
        ("login_failures", "at < ?1", hour_ago),
        // D56: the second step's throttles look back half an hour.
        ("second_step_failures", "at < ?1", hour_ago),
        ("outbox", "sent_at IS NOT NULL AND sent_at < ?1", hour_ago),
        ("reset_requests", "requested_at < ?1", resets_before),
        // D50: kept responses (and claims) past their retention.
        ("idempotency_keys", "expires_at < ?1", now),
        // D46: usage counts are kept 30 days (the column is in minutes).
        (
            "usage_minutes",
            "minute < ?1",
            now.div_euclid(60_000) - gatehouse_domain::manage::USAGE_RETENTION_DAYS * 24 * 60,
        ),
    ];
    let mut total = 0u64;
    for (table, cond, before) in statements {
        let key = if matches!(
            table,
            "auth_codes" | "refresh_tokens" | "user_tokens" | "sessions" | "used_once"
        ) {
            "digest"
        } else if table == "usage_minutes" || table == "second_step_failures" {
            "rowid"
        } else {
            "id"
        };
        let sql = format!(
            "DELETE FROM {table} WHERE {key} IN (SELECT {key} FROM {table} WHERE {cond} LIMIT {batch})"
        );
        let n = c
            .prepare_cached(&sql)
            .and_then(|mut stmt| stmt.execute(params![before]));
        total += n.map_err(db_err)? as u64;
    }
    Ok(total)
}
