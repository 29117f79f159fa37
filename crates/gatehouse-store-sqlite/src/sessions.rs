//! SQLite: browser sessions (D49, D57).

use gatehouse_domain::effect::Effect;
use gatehouse_domain::event::Teller;
use gatehouse_domain::session::{SessionSelect, amr_from_text, amr_to_text};
use gatehouse_domain::{SessionId, access_revocation_expiry};
use gatehouse_store::SessionStore;

use super::*;

const COLS: &str = "s.id, s.org_id, s.user_id, s.created_at, s.last_seen_at, s.expires_at, s.ip, s.user_agent, s.amr, COALESCE(s.auth_time, s.created_at)";

/// A live chain `c` (not revoked, not past its end, a refresh token of it
/// not expired) at `?{now}`.
fn live_chain(now: usize) -> String {
    format!(
        "c.revoked_at IS NULL AND c.ends_at > ?{now}
         AND EXISTS (SELECT 1 FROM refresh_tokens t WHERE t.chain_id = c.id AND t.expires_at > ?{now})"
    )
}

/// Whether the session `s` is listed at `?{now}` (`SessionStore`): its
/// browser sign-in lasts or a chain begun in it is live.
fn listed(now: usize) -> String {
    listed_as("s", now)
}

/// [`listed`] of the session row named `row` (a table or an alias).
fn listed_as(row: &str, now: usize) -> String {
    format!(
        "({row}.expires_at > ?{now} OR EXISTS (SELECT 1 FROM refresh_chains c WHERE c.sid = {row}.id AND {}))",
        live_chain(now)
    )
}

/// The purge's condition on a row of `sessions` at `?{now}`: no longer
/// listed (D57: a lapsed browser sign-in stays while a chain begun in it
/// lives), the condition every read uses.
pub(crate) fn purgeable(now: usize) -> String {
    format!("NOT {}", listed_as("sessions", now))
}

fn session_row(r: &Row<'_>) -> rusqlite::Result<Session> {
    Ok(Session {
        id: SessionId::from_trusted(r.get(0)?),
        org: OrgId::from_trusted(r.get(1)?),
        user: UserId::from_trusted(r.get(2)?),
        created_at: Timestamp::from_millis(r.get(3)?),
        last_seen_at: Timestamp::from_millis(r.get(4)?),
        expires_at: Timestamp::from_millis(r.get(5)?),
        ip: r.get(6)?,
        user_agent: r.get(7)?,
        amr: amr_from_text(&r.get::<_, String>(8)?),
        auth_time: Timestamp::from_millis(r.get(9)?),
        applications: Vec::new(),
    })
}

/// Fills `s.applications`: the clients with live chains begun in it.
fn fill_applications(c: &Connection, s: &mut Session, now: Timestamp) -> StoreResult<()> {
    s.applications = c
        .prepare_cached(&format!(
            "SELECT DISTINCT c.client_id FROM refresh_chains c WHERE c.sid = ?1 AND {} ORDER BY c.client_id",
            live_chain(2)
        ))
        .and_then(|mut st| {
            st.query_map(params![s.id.as_str(), now.millis()], |r| {
                r.get::<_, String>(0).map(ClientId::from_trusted)
            })?
            .collect::<rusqlite::Result<Vec<_>>>()
        })
        .map_err(db_err)?;
    Ok(())
}

/// The revocation of the access tokens acting in the browser session `s`
/// itself (the dashboard's, `AccessClaims::chain` = the session's id).
fn session_tokens(s: &Session, now: Timestamp) -> NewRevocation {
    NewRevocation::chain(
        &ChainId::from_trusted(s.id.as_str().to_owned()),
        now,
        access_revocation_expiry(now),
    )
}

/// Ends the listed sessions of `user` that `select` reaches (D57,
/// `Effect::EndSessions`): their chains are revoked with a `Chain`
/// revocation each, their codes and rows go. The sessions as they were,
/// oldest first, for their `session.revoked`. With
/// [`SessionSelect::All`], rows no longer listed go too (nothing to tell).
pub(crate) fn end_sessions(
    c: &Connection,
    org: &OrgId,
    user: &UserId,
    select: &SessionSelect,
    now: Timestamp,
) -> StoreResult<Vec<Session>> {
    let mut ended: Vec<Session> = c
        .prepare_cached(&format!(
            "SELECT {COLS} FROM sessions s WHERE s.org_id = ?1 AND s.user_id = ?2 AND {}
             ORDER BY s.created_at, s.id",
            listed(3)
        ))
        .and_then(|mut st| {
            st.query_map(
                params![org.as_str(), user.as_str(), now.millis()],
                session_row,
            )?
            .collect::<rusqlite::Result<Vec<_>>>()
        })
        .map_err(db_err)?;
    ended.retain(|s| select.reaches(&s.id));
    for s in &mut ended {
        fill_applications(c, s, now)?;
        let chains: Vec<String> = c
            .prepare_cached(
                "SELECT id FROM refresh_chains WHERE sid = ?1 AND org_id = ?2 AND revoked_at IS NULL",
            )
            .and_then(|mut st| {
                st.query_map(params![s.id.as_str(), org.as_str()], |r| r.get(0))?
                    .collect::<rusqlite::Result<Vec<_>>>()
            })
            .map_err(db_err)?;
        for chain in chains {
            let chain = ChainId::from_trusted(chain);
            auth_state::revoke_chain(c, org, &chain, now, access_revocation_expiry(now))?;
        }
        // The dashboard's tokens carry the session where a chain's carry
        // the chain (D57): one `Chain` revocation under its id ends them.
        auth_state::insert_revocation(c, &session_tokens(s, now))?;
        for sql in [
            "DELETE FROM auth_codes WHERE sid = ?1 AND org_id = ?2",
            "DELETE FROM sessions WHERE id = ?1 AND org_id = ?2",
        ] {
            c.prepare_cached(sql)
                .and_then(|mut st| st.execute(params![s.id.as_str(), org.as_str()]))
                .map_err(db_err)?;
        }
    }
    if *select == SessionSelect::All {
        for sql in [
            "DELETE FROM auth_codes WHERE org_id = ?1 AND user_id = ?2 AND sid IS NOT NULL",
            "DELETE FROM sessions WHERE org_id = ?1 AND user_id = ?2",
        ] {
            c.prepare_cached(sql)
                .and_then(|mut st| st.execute(params![org.as_str(), user.as_str()]))
                .map_err(db_err)?;
        }
    }
    Ok(ended)
}

/// D57: a refresh of a chain begun in a session is a use of it, written
/// at most once a minute.
pub(crate) fn chain_refreshed(
    c: &Connection,
    chain_token: &[u8],
    now: Timestamp,
) -> StoreResult<()> {
    c.prepare_cached(
        "UPDATE sessions SET last_seen_at = ?2
         WHERE id = (SELECT ch.sid FROM refresh_tokens t JOIN refresh_chains ch ON ch.id = t.chain_id
                     WHERE t.digest = ?1)
           AND last_seen_at < ?2 - ?3",
    )
    .and_then(|mut st| {
        st.execute(params![
            chain_token,
            now.millis(),
            gatehouse_domain::session::SEEN_EVERY_SECS * 1000
        ])
    })
    .map_err(db_err)?;
    Ok(())
}

#[async_trait]
impl SessionStore for SqliteStore {
    async fn create_session(
        &self,
        org: &OrgId,
        digest: &[u8; 32],
        sess: &Session,
        effects: &[Effect],
    ) -> StoreResult<()> {
        check_org(org, &sess.org)?;
        let (org, digest, sess, effects) = (org.clone(), *digest, sess.clone(), effects.to_vec());
        self.pool
            .write(move |tx| {
                tx.prepare_cached(
                    "INSERT INTO sessions (digest, id, org_id, user_id, created_at, last_seen_at, expires_at, ip, user_agent, amr, auth_time)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
                )
                .and_then(|mut s| {
                    s.execute(params![
                        digest.to_vec(),
                        sess.id.as_str(),
                        sess.org.as_str(),
                        sess.user.as_str(),
                        sess.created_at.millis(),
                        sess.last_seen_at.millis(),
                        sess.expires_at.millis(),
                        sess.ip,
                        sess.user_agent,
                        amr_to_text(&sess.amr),
                        sess.auth_time.millis(),
                    ])
                })
                .map_err(db_err)?;
                crate::effects::apply(tx, &org, &effects, sess.created_at, None)
            })
            .await
    }

    async fn resolve_session(&self, digest: &[u8; 32]) -> StoreResult<Option<Session>> {
        let digest = *digest;
        self.pool
            .read(move |c| {
                c.prepare_cached(&format!(
                    "SELECT {COLS} FROM sessions s WHERE s.digest = ?1"
                ))
                .and_then(|mut s| s.query_row([digest.to_vec()], session_row).optional())
                .map_err(db_err)
            })
            .await
    }

    async fn record_browser_use(&self, org: &OrgId, seen: &Session) -> StoreResult<()> {
        check_org(org, &seen.org)?;
        let seen = seen.clone();
        self.pool
            .write(move |tx| {
                tx.prepare_cached(
                    "UPDATE sessions SET last_seen_at = max(last_seen_at, ?3), expires_at = ?4, ip = ?5, user_agent = ?6
                     WHERE id = ?1 AND org_id = ?2",
                )
                .and_then(|mut s| {
                    s.execute(params![
                        seen.id.as_str(),
                        seen.org.as_str(),
                        seen.last_seen_at.millis(),
                        seen.expires_at.millis(),
                        seen.ip,
                        seen.user_agent,
                    ])
                })
                .map_err(db_err)?;
                Ok(())
            })
            .await
    }

    async fn list_sessions(
        &self,
        org: &OrgId,
        user: &UserId,
        page: Page,
        now: Timestamp,
    ) -> StoreResult<(Vec<Session>, u64)> {
        let (org, user) = (org.clone(), user.clone());
        self.pool
            .read(move |c| {
                let total: i64 = c
                    .prepare_cached(&format!(
                        "SELECT count(*) FROM sessions s WHERE s.org_id = ?1 AND s.user_id = ?2 AND {}",
                        listed(3)
                    ))
                    .and_then(|mut st| {
                        st.query_row(params![org.as_str(), user.as_str(), now.millis()], |r| {
                            r.get(0)
                        })
                    })
                    .map_err(db_err)?;
                let mut rows: Vec<Session> = c
                    .prepare_cached(&format!(
                        "SELECT {COLS} FROM sessions s WHERE s.org_id = ?1 AND s.user_id = ?2 AND {}
                         ORDER BY s.created_at DESC, s.id DESC LIMIT ?4 OFFSET ?5",
                        listed(3)
                    ))
                    .and_then(|mut st| {
                        st.query_map(
                            params![
                                org.as_str(),
                                user.as_str(),
                                now.millis(),
                                i64::from(page.limit),
                                page.offset as i64
                            ],
                            session_row,
                        )?
                        .collect::<rusqlite::Result<Vec<_>>>()
                    })
                    .map_err(db_err)?;
                for s in &mut rows {
                    fill_applications(c, s, now)?;
                }
                Ok((rows, total as u64))
            })
            .await
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
        let (org, user, select, tell) = (org.clone(), user.clone(), select.clone(), tell.clone());
        let also = also.to_vec();
        self.pool
            .write(move |tx| {
                let ended = end_sessions(tx, &org, &user, &select, now)?;
                let mut effects: Vec<Effect> = ended
                    .iter()
                    .map(|s| Effect::Event(Box::new(tell.session_revoked(s, now))))
                    .collect();
                if !ended.is_empty() {
                    effects.extend(also);
                }
                crate::effects::apply(tx, &org, &effects, now, None)?;
                Ok(ended)
            })
            .await
    }

    async fn session_of_chain(
        &self,
        org: &OrgId,
        chain: &ChainId,
    ) -> StoreResult<Option<SessionId>> {
        let (org, chain) = (org.clone(), chain.clone());
        self.pool
            .read(move |c| {
                c.prepare_cached("SELECT sid FROM refresh_chains WHERE id = ?1 AND org_id = ?2")
                    .and_then(|mut s| {
                        s.query_row(params![chain.as_str(), org.as_str()], |r| {
                            r.get::<_, Option<String>>(0)
                        })
                        .optional()
                    })
                    .map(|found| found.flatten().map(SessionId::from_trusted))
                    .map_err(db_err)
            })
            .await
    }
}
