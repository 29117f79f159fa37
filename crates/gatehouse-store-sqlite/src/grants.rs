//! SQLite: what the authorization server grants: login throttling (D26), authorization codes and refresh chains (D24, D26).

use gatehouse_domain::event::{ReuseTrigger, Teller};

use super::*;

#[async_trait]
impl GrantStore for SqliteStore {
    async fn use_once(&self, digest: &[u8; 32], expires_at: Timestamp) -> StoreResult<bool> {
        let digest = *digest;
        self.pool
            .write(move |tx| {
                // The primary key is the whole race: one insert wins.
                tx.prepare_cached(
                    "INSERT INTO used_once (digest, expires_at) VALUES (?1, ?2) ON CONFLICT (digest) DO NOTHING",
                )
                .and_then(|mut s| s.execute(params![digest.to_vec(), expires_at.millis()]))
                .map(|n| n == 1)
                .map_err(db_err)
            })
            .await
    }
    async fn record_login_failure(
        &self,
        org: &OrgId,
        email_norm: &str,
        source: &str,
        at: Timestamp,
    ) -> StoreResult<()> {
        let (org, email, source) = (org.clone(), email_norm.to_owned(), source.to_owned());
        self.pool
            .write(move |tx| {
                tx.prepare_cached("INSERT INTO login_failures (org_id, email_norm, source, at) VALUES (?1, ?2, ?3, ?4)")
                    .and_then(|mut s| s.execute(params![org.as_str(), email, source, at.millis()]))
                    .map_err(db_err)?;
                Ok(())
            })
            .await
    }
    async fn login_failures(
        &self,
        org: &OrgId,
        email_norm: &str,
        since: Timestamp,
    ) -> StoreResult<Vec<(String, Timestamp)>> {
        self.pool
            .read(|c| {
                let mut s = c
                    .prepare_cached("SELECT source, at FROM login_failures WHERE org_id = ?1 AND email_norm = ?2 AND at >= ?3 ORDER BY at LIMIT 5000")
                    .map_err(db_err)?;
                let rows = s
                    .query_map(params![org.as_str(), email_norm, since.millis()], |r| Ok((r.get(0)?, Timestamp::from_millis(r.get(1)?))))
                    .map_err(db_err)?;
                rows.collect::<rusqlite::Result<Vec<_>>>().map_err(db_err)
            })
            .await
    }
    async fn insert_auth_code(&self, org: &OrgId, code: &AuthCode) -> StoreResult<()> {
        check_org(org, &code.org)?;
        let code = code.clone();
        self.pool
            .write(move |tx| {
                tx.prepare_cached(&format!("INSERT INTO auth_codes ({}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)", auth_state::CODE_COLS))
                    .and_then(|mut s| {
                        s.execute(params![
                            code.digest.to_vec(),
                            code.org.as_str(),
                            code.client.as_str(),
                            code.user.as_str(),
                            code.redirect_uri,
                            code.scopes.bits() as i64,
                            code.code_challenge,
                            code.created_at.millis(),
                            code.expires_at.millis(),
                            code.used_at.map(Timestamp::millis),
                            code.chain.as_ref().map(ChainId::as_str),
                            code.nonce,
                            code.auth_time.map(Timestamp::millis),
                            code.sid,
                            code.authn.as_ref().map(|a| a.amr_text()),
                            code.authn.as_ref().map(|a| a.acr.as_str()),
                        ])
                    })
                    .map_err(db_err)?;
                Ok(())
            })
            .await
    }
    async fn resolve_auth_code(&self, digest: &[u8; 32]) -> StoreResult<Option<AuthCode>> {
        self.pool
            .read(|c| {
                c.prepare_cached(&format!(
                    "SELECT {} FROM auth_codes WHERE digest = ?1",
                    auth_state::CODE_COLS
                ))
                .and_then(|mut s| {
                    s.query_row([digest.to_vec()], auth_state::code_row)
                        .optional()
                })
                .map_err(db_err)
            })
            .await
    }
    async fn redeem_auth_code_recorded(
        &self,
        digest: &[u8; 32],
        now: Timestamp,
        chain: &RefreshChain,
        token: &RefreshToken,
        audit: Option<&gatehouse_domain::audit::Entry>,
    ) -> StoreResult<Redeemed> {
        let (digest, chain, token) = (*digest, chain.clone(), token.clone());
        let audit = audit.map(gatehouse_store::AuditRow::of);
        self.pool
            .write(move |tx| {
                // D57: no chain begins in a session that has ended (the
                // single writer orders this against any end).
                if let Some(sid) = &chain.sid {
                    let live = tx
                        .prepare_cached("SELECT 1 FROM sessions WHERE id = ?1 AND org_id = ?2")
                        .and_then(|mut s| {
                            s.query_row(params![sid, chain.org.as_str()], |_| Ok(()))
                                .optional()
                        })
                        .map_err(db_err)?;
                    if live.is_none() {
                        return Ok(Redeemed::SessionEnded);
                    }
                }
                let won = tx
                    .prepare_cached("UPDATE auth_codes SET used_at = ?2, chain_id = ?3 WHERE digest = ?1 AND used_at IS NULL")
                    .and_then(|mut s| s.execute(params![digest.to_vec(), now.millis(), chain.id.as_str()]))
                    .map_err(db_err)?;
                if won == 0 {
                    let previous: Option<Option<String>> = tx
                        .prepare_cached("SELECT chain_id FROM auth_codes WHERE digest = ?1")
                        .and_then(|mut s| s.query_row([digest.to_vec()], |r| r.get(0)).optional())
                        .map_err(db_err)?;
                    return Ok(Redeemed::Reused(previous.flatten().map(ChainId::from_trusted)));
                }
                auth_state::insert_chain(tx, &chain)?;
                auth_state::insert_token(tx, &token)?;
                if let Some(row) = &audit {
                    crate::audit::insert_audit(tx, &chain.org, row)?;
                }
                Ok(Redeemed::Fresh)
            })
            .await
    }
    async fn resolve_refresh_token(
        &self,
        digest: &[u8; 32],
    ) -> StoreResult<Option<(RefreshToken, RefreshChain)>> {
        self.pool
            .read(|c| {
                let sql = "SELECT t.digest, t.chain_id, t.issued_at, t.expires_at, t.used_at, t.successor_sealed, t.successor_until, t.access_jti,
                            c.id, c.org_id, c.client_id, c.user_id, c.scopes, c.created_at, c.ends_at, c.revoked_at, c.auth_time, c.sid, c.amr, c.acr
                     FROM refresh_tokens t JOIN refresh_chains c ON c.id = t.chain_id WHERE t.digest = ?1";
                c.prepare_cached(sql)
                    .and_then(|mut s| s.query_row([digest.to_vec()], |r| Ok((auth_state::token_row(r)?, auth_state::chain_row(r, 8)?))).optional())
                    .map_err(db_err)
            })
            .await
    }
    async fn rotate_refresh_token_recorded(
        &self,
        digest: &[u8; 32],
        client: &ClientId,
        now: Timestamp,
        successor_sealed: &[u8],
        successor_until: Timestamp,
        successor: &RefreshToken,
        access_expiry: Timestamp,
        audit: Option<(&OrgId, &gatehouse_domain::audit::Entry)>,
    ) -> StoreResult<Rotated> {
        let (digest, client, sealed, successor) = (
            *digest,
            client.clone(),
            successor_sealed.to_vec(),
            successor.clone(),
        );
        let audit = audit.map(|(org, e)| (org.clone(), gatehouse_store::AuditRow::of(e)));
        self.pool
            .write(move |tx| {
                // The conditional update is the whole race: exactly one
                // caller sees a row. Another client's token is as good as
                // unknown: its chain does not match, nothing is written (and
                // the read below finds nothing either).
                let won: Option<Option<String>> = tx
                    .prepare_cached(
                        "UPDATE refresh_tokens SET used_at = ?2, successor_sealed = ?3, successor_until = ?4
                         WHERE digest = ?1 AND used_at IS NULL
                           AND EXISTS (SELECT 1 FROM refresh_chains c
                                       WHERE c.id = refresh_tokens.chain_id AND c.revoked_at IS NULL
                                         AND c.client_id = ?5)
                         RETURNING access_jti",
                    )
                    .and_then(|mut s| {
                        s.query_row(
                            params![digest.to_vec(), now.millis(), sealed, successor_until.millis(), client.as_str()],
                            |r| r.get(0),
                        )
                        .optional()
                    })
                    .map_err(db_err)?;
                if let Some(jti) = won {
                    auth_state::insert_token(tx, &successor)?;
                    crate::sessions::chain_refreshed(tx, &digest, now)?;
                    if let Some((org, row)) = &audit {
                        crate::audit::insert_audit(tx, org, row)?;
                    }
                    // D24: the access token issued with the used refresh token
                    // dies in the same transaction.
                    let revoked = match NewRevocation::of_rotation(jti.as_deref(), now, access_expiry)? {
                        Some(r) => Some(r.clone().stored(auth_state::insert_revocation(tx, &r)?)),
                        None => None,
                    };
                    return Ok(Rotated::Fresh(revoked));
                }
                let current = tx
                    .prepare_cached(&format!(
                        "SELECT {} FROM refresh_tokens WHERE digest = ?1
                           AND EXISTS (SELECT 1 FROM refresh_chains c
                                       WHERE c.id = refresh_tokens.chain_id AND c.client_id = ?2)",
                        auth_state::TOKEN_COLS
                    ))
                    .and_then(|mut s| {
                        s.query_row(params![digest.to_vec(), client.as_str()], auth_state::token_row)
                            .optional()
                    })
                    .map_err(db_err)?
                    .ok_or(StoreError::NotFound)?;
                Ok(Rotated::AlreadyUsed(current))
            })
            .await
    }
    async fn revoke_chain(
        &self,
        org: &OrgId,
        chain: &ChainId,
        now: Timestamp,
        access_expiry: Timestamp,
    ) -> StoreResult<()> {
        let (org, chain) = (org.clone(), chain.clone());
        self.pool
            .write(move |tx| {
                auth_state::revoke_chain(tx, &org, &chain, now, access_expiry).map(drop)
            })
            .await
    }
    async fn revoke_reused_chain(
        &self,
        org: &OrgId,
        chain: &ChainId,
        now: Timestamp,
        access_expiry: Timestamp,
        trigger: ReuseTrigger,
        tell: &Teller,
    ) -> StoreResult<()> {
        let (org, chain, tell) = (org.clone(), chain.clone(), tell.clone());
        self.pool
            .write(move |tx| {
                if !auth_state::revoke_chain(tx, &org, &chain, now, access_expiry)? {
                    return Ok(());
                }
                let (user, client, sid): (String, String, Option<String>) = tx
                    .prepare_cached(
                        "SELECT user_id, client_id, sid FROM refresh_chains WHERE id = ?1",
                    )
                    .and_then(|mut s| {
                        s.query_row([chain.as_str()], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
                    })
                    .map_err(db_err)?;
                let (user, client) = (UserId::from_trusted(user), ClientId::from_trusted(client));
                let told = effect::of_reuse(&tell, &user, &client, sid.as_deref(), trigger, now);
                crate::effects::apply(tx, &org, &told, now, None)
            })
            .await
    }
    async fn live_chains(&self, org: &OrgId, filter: &ChainFilter) -> StoreResult<Vec<ChainId>> {
        let (sql, a, b) = match filter {
            ChainFilter::Session(sid) => (
                "SELECT id FROM refresh_chains WHERE org_id = ?1 AND sid = ?2 AND ?3 = ?3 AND revoked_at IS NULL",
                sid.clone(),
                String::new(),
            ),
            ChainFilter::UserClient(user, client) => (
                "SELECT id FROM refresh_chains WHERE org_id = ?1 AND user_id = ?2 AND client_id = ?3 AND revoked_at IS NULL",
                user.as_str().to_owned(),
                client.as_str().to_owned(),
            ),
        };
        let org = org.clone();
        self.pool
            .read(move |c| {
                let mut s = c.prepare_cached(sql).map_err(db_err)?;
                let ids = s
                    .query_map(params![org.as_str(), a, b], |r| r.get::<_, String>(0))
                    .map_err(db_err)?
                    .collect::<rusqlite::Result<Vec<_>>>()
                    .map_err(db_err)?;
                gatehouse_store::decode::chain_ids(&ids)
            })
            .await
    }
    async fn consent(
        &self,
        org: &OrgId,
        user: &UserId,
        client: &ClientId,
    ) -> StoreResult<Option<Consent>> {
        self.pool
            .read(|c| {
                c.prepare_cached("SELECT client_id, scopes, created_at, last_used_at FROM consents WHERE org_id = ?1 AND user_id = ?2 AND client_id = ?3")
                    .and_then(|mut s| s.query_row(params![org.as_str(), user.as_str(), client.as_str()], consent_row).optional())
                    .map_err(db_err)
            })
            .await
    }
    async fn remember_consent(
        &self,
        org: &OrgId,
        user: &UserId,
        client: &ClientId,
        scopes: ScopeSet,
        now: Timestamp,
    ) -> StoreResult<()> {
        let (org, user, client) = (org.clone(), user.clone(), client.clone());
        self.pool
            .write(move |tx| {
                tx.prepare_cached(
                    "INSERT INTO consents (org_id, user_id, client_id, scopes, created_at, last_used_at)
                     SELECT ?1, ?2, ?3, ?4, ?5, ?5
                      WHERE EXISTS (SELECT 1 FROM users WHERE id = ?2 AND org_id = ?1)
                        AND EXISTS (SELECT 1 FROM clients WHERE id = ?3 AND org_id = ?1)
                     ON CONFLICT (user_id, client_id)
                     DO UPDATE SET scopes = consents.scopes | excluded.scopes, last_used_at = excluded.last_used_at
                      WHERE consents.org_id = excluded.org_id",
                )
                .and_then(|mut s| {
                    s.execute(params![org.as_str(), user.as_str(), client.as_str(), scopes.bits() as i64, now.millis()])
                })
                .map_err(db_err)?;
                Ok(())
            })
            .await
    }
    async fn list_consents(&self, org: &OrgId, user: &UserId) -> StoreResult<Vec<Consent>> {
        self.pool
            .read(|c| {
                let mut s = c
                    .prepare_cached("SELECT client_id, scopes, created_at, last_used_at FROM consents WHERE org_id = ?1 AND user_id = ?2 ORDER BY last_used_at DESC, client_id LIMIT 1000")
                    .map_err(db_err)?;
                let rows = s
                    .query_map(params![org.as_str(), user.as_str()], consent_row)
                    .map_err(db_err)?;
                rows.collect::<rusqlite::Result<Vec<_>>>().map_err(db_err)
            })
            .await
    }
    async fn forget_consent(
        &self,
        org: &OrgId,
        user: &UserId,
        client: &ClientId,
        tell: &Teller,
    ) -> StoreResult<bool> {
        let (org, user, client, tell) = (org.clone(), user.clone(), client.clone(), tell.clone());
        self.pool
            .write(move |tx| {
                let gone = tx
                    .prepare_cached(
                        "DELETE FROM consents WHERE org_id = ?1 AND user_id = ?2 AND client_id = ?3
                         RETURNING client_id, scopes, created_at, last_used_at",
                    )
                    .and_then(|mut s| {
                        s.query_row(
                            params![org.as_str(), user.as_str(), client.as_str()],
                            consent_row,
                        )
                        .optional()
                    })
                    .map_err(db_err)?;
                let Some(consent) = gone else {
                    return Ok(false);
                };
                if let Some(app) = crate::clients::get_client_tx(tx, &org, &client)? {
                    let now = Timestamp::now();
                    let told = effect::of_consent_revocation(&tell, &user, &consent, &app, now);
                    crate::effects::apply(tx, &org, &told, now, None)?;
                }
                Ok(true)
            })
            .await
    }
}

fn consent_row(r: &Row<'_>) -> rusqlite::Result<Consent> {
    let client: String = r.get(0)?;
    Ok(Consent {
        scopes: scopes(r.get(1)?, ("consents", "scopes", &client))?,
        created_at: Timestamp::from_millis(r.get(2)?),
        last_used_at: Timestamp::from_millis(r.get(3)?),
        client: ClientId::from_trusted(client),
    })
}
