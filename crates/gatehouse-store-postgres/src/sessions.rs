//! PostgreSQL: browser sessions (D49, D57).

use gatehouse_domain::effect::Effect;
use gatehouse_domain::event::Teller;
use gatehouse_domain::session::{SessionSelect, amr_from_text, amr_to_text};
use gatehouse_domain::{SessionId, access_revocation_expiry};
use gatehouse_store::SessionStore;
use sqlx_postgres::PgRow;

use super::*;

const COLS: &str = "s.id, s.org_id, s.user_id, s.created_at, s.last_seen_at, s.expires_at, s.ip, s.user_agent, s.amr, COALESCE(s.auth_time, s.created_at)";

/// A live chain `c` (not revoked, not past its end, a refresh token of it
/// not expired) at `${now}`.
fn live_chain(now: usize) -> String {
    format!(
        "c.revoked_at IS NULL AND c.ends_at > ${now}
         AND EXISTS (SELECT 1 FROM refresh_tokens t WHERE t.chain_id = c.id AND t.expires_at > ${now})"
    )
}

/// Whether the session `s` is listed at `${now}` (`SessionStore`): its
/// browser sign-in lasts or a chain begun in it is live.
fn listed(now: usize) -> String {
    listed_as("s", now)
}

/// [`listed`] of the session row named `row` (a table or an alias).
fn listed_as(row: &str, now: usize) -> String {
    format!(
        "({row}.expires_at > ${now} OR EXISTS (SELECT 1 FROM refresh_chains c WHERE c.sid = {row}.id AND {}))",
        live_chain(now)
    )
}

/// The purge's condition on a row of `sessions` at `${now}`: no longer
/// listed (D57: a lapsed browser sign-in stays while a chain begun in it
/// lives), the condition every read uses.
pub(crate) fn purgeable(now: usize) -> String {
    format!("NOT {}", listed_as("sessions", now))
}

fn session_row(r: &PgRow) -> Result<Session, sqlx_core::Error> {
    Ok(Session {
        id: SessionId::from_trusted(r.try_get(0)?),
        org: OrgId::from_trusted(r.try_get(1)?),
        user: UserId::from_trusted(r.try_get(2)?),
        created_at: Timestamp::from_millis(r.try_get(3)?),
        last_seen_at: Timestamp::from_millis(r.try_get(4)?),
        expires_at: Timestamp::from_millis(r.try_get(5)?),
        ip: r.try_get(6)?,
        user_agent: r.try_get(7)?,
        amr: amr_from_text(&r.try_get::<String, _>(8)?),
        auth_time: Timestamp::from_millis(r.try_get(9)?),
        applications: Vec::new(),
    })
}

/// Fills `s.applications`: the clients with live chains begun in it.
async fn fill_applications(c: &mut PgConnection, s: &mut Session, now: Timestamp) -> TxResult<()> {
    let ids: Vec<String> = query_scalar(&format!(
        "SELECT DISTINCT c.client_id FROM refresh_chains c WHERE c.sid = $1 AND {} ORDER BY c.client_id",
        live_chain(2)
    ))
    .bind(s.id.as_str())
    .bind(now.millis())
    .fetch_all(&mut *c)
    .await?;
    s.applications = ids.into_iter().map(ClientId::from_trusted).collect();
    Ok(())
}

/// Ends the listed sessions of `user` that `select` reaches (D57,
/// `Effect::EndSessions`): their chains are revoked, their codes and rows
/// go. The sessions as they were, oldest first, for their
/// `session.revoked`, and the `Chain` revocations the caller writes last
/// (`auth_state::insert_revocation`). With [`SessionSelect::All`], rows no
/// longer listed go too (nothing to tell).
pub(crate) async fn end_sessions(
    c: &mut PgConnection,
    org: &OrgId,
    user: &UserId,
    select: &SessionSelect,
    now: Timestamp,
) -> TxResult<(Vec<Session>, Vec<NewRevocation>)> {
    // The rows locked, so two ends of one session tell it once.
    let rows = query(&format!(
        "SELECT {COLS} FROM sessions s WHERE s.org_id = $1 AND s.user_id = $2 AND {}
         ORDER BY s.created_at, s.id FOR UPDATE OF s",
        listed(3)
    ))
    .bind(org.as_str())
    .bind(user.as_str())
    .bind(now.millis())
    .fetch_all(&mut *c)
    .await?;
    let mut ended = Vec::new();
    for r in &rows {
        let s = session_row(r)?;
        if select.reaches(&s.id) {
            ended.push(s);
        }
    }
    let mut revocations = Vec::new();
    for s in &mut ended {
        fill_applications(c, s, now).await?;
        let chains: Vec<String> = query_scalar(
            "UPDATE refresh_chains SET revoked_at = $3
             WHERE sid = $1 AND org_id = $2 AND revoked_at IS NULL RETURNING id",
        )
        .bind(s.id.as_str())
        .bind(org.as_str())
        .bind(now.millis())
        .fetch_all(&mut *c)
        .await?;
        for chain in &chains {
            // Sealed successors are never handed out for a revoked chain (D24).
            query("UPDATE refresh_tokens SET successor_sealed = NULL, successor_until = NULL WHERE chain_id = $1 AND successor_until IS NOT NULL")
                .bind(chain)
                .execute(&mut *c)
                .await?;
            revocations.push(NewRevocation::chain(
                &ChainId::from_trusted(chain.clone()),
                now,
                access_revocation_expiry(now),
            ));
        }
        // The dashboard's tokens carry the session where a chain's carry
        // the chain (D57): one `Chain` revocation under its id ends them.
        revocations.push(NewRevocation::chain(
            &ChainId::from_trusted(s.id.as_str().to_owned()),
            now,
            access_revocation_expiry(now),
        ));
        for sql in [
            "DELETE FROM auth_codes WHERE sid = $1 AND org_id = $2",
            "DELETE FROM sessions WHERE id = $1 AND org_id = $2",
        ] {
            query(sql)
                .bind(s.id.as_str())
                .bind(org.as_str())
                .execute(&mut *c)
                .await?;
        }
    }
    if *select == SessionSelect::All {
        for sql in [
            "DELETE FROM auth_codes WHERE org_id = $1 AND user_id = $2 AND sid IS NOT NULL",
            "DELETE FROM sessions WHERE org_id = $1 AND user_id = $2",
        ] {
            query(sql)
                .bind(org.as_str())
                .bind(user.as_str())
                .execute(&mut *c)
                .await?;
        }
    }
    Ok((ended, revocations))
}

/// D57: a refresh of a chain begun in a session is a use of it, written
/// at most once a minute.
pub(crate) async fn chain_refreshed(
    c: &mut PgConnection,
    token_digest: &[u8],
    now: Timestamp,
) -> TxResult<()> {
    // SKIP LOCKED: the refresh holds its chain's row (FOR SHARE) and an end
    // of the session holds the session's row and then updates the chain;
    // waiting here would deadlock the two. A session being ended needs no
    // `last_seen_at`.
    query(
        "WITH s AS (SELECT id FROM sessions
                    WHERE id = (SELECT ch.sid FROM refresh_tokens t JOIN refresh_chains ch ON ch.id = t.chain_id
                                WHERE t.digest = $1)
                      AND last_seen_at < $2 - $3
                    FOR UPDATE SKIP LOCKED)
         UPDATE sessions SET last_seen_at = $2 FROM s WHERE sessions.id = s.id",
    )
    .bind(token_digest)
    .bind(now.millis())
    .bind(gatehouse_domain::session::SEEN_EVERY_SECS * 1000)
    .execute(&mut *c)
    .await?;
    Ok(())
}

#[async_trait]
impl SessionStore for PgStore {
    async fn create_session(
        &self,
        org: &OrgId,
        digest: &[u8; 32],
        sess: &Session,
        effects: &[Effect],
    ) -> StoreResult<()> {
        check_org(org, &sess.org)?;
        write_tx!(self, |tx| {
            query(
                "INSERT INTO sessions (digest, id, org_id, user_id, created_at, last_seen_at, expires_at, ip, user_agent, amr, auth_time)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
            )
            .bind(&digest[..])
            .bind(sess.id.as_str())
            .bind(sess.org.as_str())
            .bind(sess.user.as_str())
            .bind(sess.created_at.millis())
            .bind(sess.last_seen_at.millis())
            .bind(sess.expires_at.millis())
            .bind(sess.ip.as_deref())
            .bind(sess.user_agent.as_deref())
            .bind(amr_to_text(&sess.amr))
            .bind(sess.auth_time.millis())
            .execute(&mut *tx)
            .await?;
            crate::effects::apply(&mut tx, org, effects, sess.created_at, None).await?;
            Ok(())
        })
    }

    async fn resolve_session(&self, digest: &[u8; 32]) -> StoreResult<Option<Session>> {
        read!(self, |c| {
            let row = query(&format!(
                "SELECT {COLS} FROM sessions s WHERE s.digest = $1"
            ))
            .bind(&digest[..])
            .fetch_optional(&mut *c)
            .await?;
            Ok(match row {
                Some(r) => Some(session_row(&r)?),
                None => None,
            })
        })
    }

    async fn record_browser_use(&self, org: &OrgId, seen: &Session) -> StoreResult<()> {
        check_org(org, &seen.org)?;
        write_tx!(self, |tx| {
            query(
                "UPDATE sessions SET last_seen_at = greatest(last_seen_at, $3), expires_at = $4, ip = $5, user_agent = $6
                 WHERE id = $1 AND org_id = $2",
            )
            .bind(seen.id.as_str())
            .bind(seen.org.as_str())
            .bind(seen.last_seen_at.millis())
            .bind(seen.expires_at.millis())
            .bind(seen.ip.as_deref())
            .bind(seen.user_agent.as_deref())
            .execute(&mut *tx)
            .await?;
            Ok(())
        })
    }

    async fn list_sessions(
        &self,
        org: &OrgId,
        user: &UserId,
        page: Page,
        now: Timestamp,
    ) -> StoreResult<(Vec<Session>, u64)> {
        snapshot_read!(self, |c| {
            let total: i64 = query_scalar(&format!(
                "SELECT count(*) FROM sessions s WHERE s.org_id = $1 AND s.user_id = $2 AND {}",
                listed(3)
            ))
            .bind(org.as_str())
            .bind(user.as_str())
            .bind(now.millis())
            .fetch_one(&mut *c)
            .await?;
            let rows = query(&format!(
                "SELECT {COLS} FROM sessions s WHERE s.org_id = $1 AND s.user_id = $2 AND {}
                 ORDER BY s.created_at DESC, s.id DESC LIMIT $4 OFFSET $5",
                listed(3)
            ))
            .bind(org.as_str())
            .bind(user.as_str())
            .bind(now.millis())
            .bind(i64::from(page.limit))
            .bind(i64::try_from(page.offset).unwrap_or(i64::MAX))
            .fetch_all(&mut *c)
            .await?;
            let mut sessions = Vec::with_capacity(rows.len());
            for r in &rows {
                let mut s = session_row(r)?;
                fill_applications(c, &mut s, now).await?;
                sessions.push(s);
            }
            Ok::<_, TxError>((sessions, total as u64))
        })
    }

    async fn end_sessions_with(
        &self,
        org: &OrgId,
        user: &UserId,
        select: &SessionSelect,
        now: Timestamp,
        tell: &Teller,
        also: &[Effect],
    ) -> StoreResult<Vec<Session>> {
        write_tx!(self, |tx| {
            let (ended, revocations) = end_sessions(&mut tx, org, user, select, now).await?;
            let mut effects: Vec<Effect> = ended
                .iter()
                .map(|s| Effect::Event(Box::new(tell.session_revoked(s, now))))
                .collect();
            if !ended.is_empty() {
                effects.extend(also.iter().cloned());
            }
            crate::effects::apply(&mut tx, org, &effects, now, None).await?;
            // Revocations last (`auth_state::insert_revocation`).
            for r in &revocations {
                auth_state::insert_revocation(&mut tx, r).await?;
            }
            Ok(ended)
        })
    }

    async fn session_of_chain(
        &self,
        org: &OrgId,
        chain: &ChainId,
    ) -> StoreResult<Option<SessionId>> {
        read!(self, |c| {
            let sid: Option<Option<String>> =
                query_scalar("SELECT sid FROM refresh_chains WHERE id = $1 AND org_id = $2")
                    .bind(chain.as_str())
                    .bind(org.as_str())
                    .fetch_optional(&mut *c)
                    .await?;
            Ok(sid.flatten().map(SessionId::from_trusted))
        })
    }
}
