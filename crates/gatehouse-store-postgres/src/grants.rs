//! PostgreSQL: what the authorization server grants: login throttling (D26), authorization codes and refresh chains (D24, D26).

use gatehouse_domain::event::{ReuseTrigger, Teller};

use super::*;

#[async_trait]
impl GrantStore for PgStore {
    async fn use_once(&self, digest: &[u8; 32], expires_at: Timestamp) -> StoreResult<bool> {
        write_tx!(self, |tx| {
            // The primary key is the whole race: one insert wins, on any node.
            Ok(query(
                "INSERT INTO used_once (digest, expires_at) VALUES ($1, $2) ON CONFLICT (digest) DO NOTHING",
            )
            .bind(&digest[..])
            .bind(expires_at.millis())
            .execute(&mut *tx)
            .await?
            .rows_affected()
                == 1)
        })
    }
    async fn record_login_failure(
        &self,
        org: &OrgId,
        email_norm: &str,
        source: &str,
        at: Timestamp,
    ) -> StoreResult<()> {
        write_tx!(self, |tx| {
            query("INSERT INTO login_failures (org_id, email_norm, source, at) VALUES ($1, $2, $3, $4)")
                .bind(org.as_str())
                .bind(email_norm)
                .bind(source)
                .bind(at.millis())
                .execute(&mut *tx)
                .await?;
            Ok(())
        })
    }
    async fn login_failures(
        &self,
        org: &OrgId,
        email_norm: &str,
        since: Timestamp,
    ) -> StoreResult<Vec<(String, Timestamp)>> {
        let rows: Vec<(String, i64)> = query_as(
            "SELECT source, at FROM login_failures
             WHERE org_id = $1 AND email_norm = $2 AND at >= $3 ORDER BY at, id LIMIT 5000",
        )
        .bind(org.as_str())
        .bind(email_norm)
        .bind(since.millis())
        .fetch_all(&self.pool)
        .await
        .map_err(db_err)?;
        Ok(rows
            .into_iter()
            .map(|(s, at)| (s, Timestamp::from_millis(at)))
            .collect())
    }
    async fn insert_auth_code(&self, org: &OrgId, code: &AuthCode) -> StoreResult<()> {
        check_org(org, &code.org)?;
        write_tx!(self, |tx| {
            query(&format!(
                "INSERT INTO auth_codes ({CODE_COLS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16)"
            ))
            .bind(&code.digest[..])
            .bind(code.org.as_str())
            .bind(code.client.as_str())
            .bind(code.user.as_str())
            .bind(&code.redirect_uri)
            .bind(bits(code.scopes))
            .bind(&code.code_challenge)
            .bind(code.created_at.millis())
            .bind(code.expires_at.millis())
            .bind(code.used_at.map(Timestamp::millis))
            .bind(code.chain.as_ref().map(ChainId::as_str))
            .bind(code.nonce.as_deref())
            .bind(code.auth_time.map(Timestamp::millis))
            .bind(code.sid.as_deref())
            .bind(code.authn.as_ref().map(|a| a.amr_text()))
            .bind(code.authn.as_ref().map(|a| a.acr.as_str()))
            .execute(&mut *tx)
            .await?;
            Ok(())
        })
    }
    async fn resolve_auth_code(&self, digest: &[u8; 32]) -> StoreResult<Option<AuthCode>> {
        let row = query(&format!(
            "SELECT {CODE_COLS} FROM auth_codes WHERE digest = $1"
        ))
        .bind(&digest[..])
        .fetch_optional(&self.pool)
        .await
        .map_err(db_err)?;
        row.as_ref().map(code_row).transpose().map_err(db_err)
    }
    async fn redeem_auth_code_recorded(
        &self,
        digest: &[u8; 32],
        now: Timestamp,
        chain: &RefreshChain,
        token: &RefreshToken,
        audit: Option<&gatehouse_domain::audit::Entry>,
    ) -> StoreResult<Redeemed> {
        let audit = audit.map(gatehouse_store::AuditRow::of);
        write_tx!(self, |tx| {
            // D57: the session first (before the code's row, in the order an
            // end of it takes them), held until commit: an end waits for
            // this chain and revokes it, or has ended the session already.
            if let Some(sid) = &chain.sid {
                let live: Option<i32> =
                    query_scalar("SELECT 1 FROM sessions WHERE id = $1 AND org_id = $2 FOR SHARE")
                        .bind(sid)
                        .bind(chain.org.as_str())
                        .fetch_optional(&mut *tx)
                        .await?;
                if live.is_none() {
                    return Ok(Redeemed::SessionEnded);
                }
            }
            // D26: the conditional update is the whole race; one caller wins.
            let won = query(
                "UPDATE auth_codes SET used_at = $2, chain_id = $3 WHERE digest = $1 AND used_at IS NULL",
            )
            .bind(&digest[..])
            .bind(now.millis())
            .bind(chain.id.as_str())
            .execute(&mut *tx)
            .await?
            .rows_affected();
            if won == 0 {
                let previous: Option<Option<String>> =
                    query_scalar("SELECT chain_id FROM auth_codes WHERE digest = $1")
                        .bind(&digest[..])
                        .fetch_optional(&mut *tx)
                        .await?;
                return Ok(Redeemed::Reused(
                    previous.flatten().map(ChainId::from_trusted),
                ));
            }
            auth_state::insert_chain(&mut tx, chain).await?;
            auth_state::insert_token(&mut tx, token).await?;
            if let Some(row) = &audit {
                crate::audit::insert_audit(&mut tx, &chain.org, row).await?;
            }
            Ok(Redeemed::Fresh)
        })
    }
    async fn resolve_refresh_token(
        &self,
        digest: &[u8; 32],
    ) -> StoreResult<Option<(RefreshToken, RefreshChain)>> {
        let row = query(
            "SELECT t.digest, t.chain_id, t.issued_at, t.expires_at, t.used_at, t.successor_sealed, t.successor_until, t.access_jti,
                    c.id, c.org_id, c.client_id, c.user_id, c.scopes, c.created_at, c.ends_at, c.revoked_at, c.auth_time, c.sid, c.amr, c.acr
             FROM refresh_tokens t JOIN refresh_chains c ON c.id = t.chain_id WHERE t.digest = $1",
        )
        .bind(&digest[..])
        .fetch_optional(&self.pool)
        .await
        .map_err(db_err)?;
        row.map(|r| Ok((token_row(&r)?, chain_row(&r, 8)?)))
            .transpose()
            .map_err(db_err)
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
        let audit = audit.map(|(org, e)| (org, gatehouse_store::AuditRow::of(e)));
        write_tx!(self, |tx| {
            // The chain's row in share mode: a concurrent revocation of the
            // chain (which updates that row) runs wholly before or after
            // this rotation, never in the middle (D24: a revoked chain never
            // gets a successor).
            let chain: Option<(bool, String)> = query_as(
                "SELECT c.revoked_at IS NULL, c.client_id FROM refresh_tokens t JOIN refresh_chains c ON c.id = t.chain_id
                 WHERE t.digest = $1 FOR SHARE OF c",
            )
            .bind(&digest[..])
            .fetch_optional(&mut *tx)
            .await?;
            // Another client's token is as good as unknown: nothing is read
            // back for it, nothing written.
            let live = match chain {
                Some((live, owner)) if owner == client.as_str() => live,
                _ => return Err(StoreError::NotFound.into()),
            };
            // D24: the conditional update is the whole race: exactly one
            // caller, on any node, sees a row.
            let won: Option<Option<String>> = if live {
                query_scalar(
                    "UPDATE refresh_tokens SET used_at = $2, successor_sealed = $3, successor_until = $4
                     WHERE digest = $1 AND used_at IS NULL
                     RETURNING access_jti",
                )
                .bind(&digest[..])
                .bind(now.millis())
                .bind(successor_sealed)
                .bind(successor_until.millis())
                .fetch_optional(&mut *tx)
                .await?
            } else {
                None
            };
            if let Some(jti) = won {
                auth_state::insert_token(&mut tx, successor).await?;
                crate::sessions::chain_refreshed(&mut tx, &digest[..], now).await?;
                if let Some((org, row)) = &audit {
                    crate::audit::insert_audit(&mut tx, org, row).await?;
                }
                // D24: the access token issued with the used refresh token
                // dies in the same transaction (the revocation is its last
                // statement, see `auth_state::insert_revocation`).
                let revoked = match NewRevocation::of_rotation(jti.as_deref(), now, access_expiry)?
                {
                    Some(r) => Some(
                        r.clone()
                            .stored(auth_state::insert_revocation(&mut tx, &r).await?),
                    ),
                    None => None,
                };
                return Ok(Rotated::Fresh(revoked));
            }
            let current = query(&format!(
                "SELECT {TOKEN_COLS} FROM refresh_tokens WHERE digest = $1"
            ))
            .bind(&digest[..])
            .fetch_optional(&mut *tx)
            .await?
            .ok_or(StoreError::NotFound)?;
            Ok(Rotated::AlreadyUsed(token_row(&current)?))
        })
    }
    async fn revoke_chain(
        &self,
        org: &OrgId,
        chain: &ChainId,
        now: Timestamp,
        access_expiry: Timestamp,
    ) -> StoreResult<()> {
        write_tx!(self, |tx| auth_state::revoke_chain(
            &mut tx,
            org,
            chain,
            now,
            access_expiry
        )
        .await
        .map(drop))
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
        write_tx!(self, |tx| {
            if !auth_state::revoke_chain(&mut tx, org, chain, now, access_expiry).await? {
                return Ok(());
            }
            let row = query("SELECT user_id, client_id, sid FROM refresh_chains WHERE id = $1")
                .bind(chain.as_str())
                .fetch_one(&mut *tx)
                .await?;
            let user = UserId::from_trusted(row.try_get::<String, _>(0)?);
            let client = ClientId::from_trusted(row.try_get::<String, _>(1)?);
            let sid: Option<String> = row.try_get(2)?;
            let told = effect::of_reuse(tell, &user, &client, sid.as_deref(), trigger, now);
            crate::effects::apply(&mut tx, org, &told, now, None).await
        })
    }
    async fn live_chains(&self, org: &OrgId, filter: &ChainFilter) -> StoreResult<Vec<ChainId>> {
        let q = match filter {
            ChainFilter::Session(sid) => query_scalar(
                "SELECT id FROM refresh_chains WHERE org_id = $1 AND sid = $2 AND revoked_at IS NULL",
            )
            .bind(org.as_str())
            .bind(sid.as_str()),
            ChainFilter::UserClient(user, client) => query_scalar(
                "SELECT id FROM refresh_chains
                 WHERE org_id = $1 AND user_id = $2 AND client_id = $3 AND revoked_at IS NULL",
            )
            .bind(org.as_str())
            .bind(user.as_str())
            .bind(client.as_str()),
        };
        let ids: Vec<String> = q.fetch_all(&self.pool).await.map_err(db_err)?;
        gatehouse_store::decode::chain_ids(&ids)
    }
    async fn consent(
        &self,
        org: &OrgId,
        user: &UserId,
        client: &ClientId,
    ) -> StoreResult<Option<Consent>> {
        let row = query(
            "SELECT client_id, scopes, created_at, last_used_at FROM consents
             WHERE org_id = $1 AND user_id = $2 AND client_id = $3",
        )
        .bind(org.as_str())
        .bind(user.as_str())
        .bind(client.as_str())
        .fetch_optional(&self.pool)
        .await
        .map_err(db_err)?;
        row.as_ref().map(consent_row).transpose().map_err(db_err)
    }
    async fn remember_consent(
        &self,
        org: &OrgId,
        user: &UserId,
        client: &ClientId,
        scopes: ScopeSet,
        now: Timestamp,
    ) -> StoreResult<()> {
        write_tx!(self, |tx| {
            query(
                "INSERT INTO consents (org_id, user_id, client_id, scopes, created_at, last_used_at)
                 SELECT $1, $2, $3, $4, $5, $5
                  WHERE EXISTS (SELECT 1 FROM users WHERE id = $2 AND org_id = $1)
                    AND EXISTS (SELECT 1 FROM clients WHERE id = $3 AND org_id = $1)
                 ON CONFLICT (user_id, client_id)
                 DO UPDATE SET scopes = consents.scopes | excluded.scopes,
                               last_used_at = excluded.last_used_at
                  WHERE consents.org_id = excluded.org_id",
            )
            .bind(org.as_str())
            .bind(user.as_str())
            .bind(client.as_str())
            .bind(bits(scopes))
            .bind(now.millis())
            .execute(&mut *tx)
            .await?;
            Ok(())
        })
    }
    async fn list_consents(&self, org: &OrgId, user: &UserId) -> StoreResult<Vec<Consent>> {
        let rows = query(
            "SELECT client_id, scopes, created_at, last_used_at FROM consents
             WHERE org_id = $1 AND user_id = $2 ORDER BY last_used_at DESC, client_id LIMIT 1000",
        )
        .bind(org.as_str())
        .bind(user.as_str())
        .fetch_all(&self.pool)
        .await
        .map_err(db_err)?;
        rows.iter()
            .map(consent_row)
            .collect::<Result<Vec<_>, _>>()
            .map_err(db_err)
    }
    async fn forget_consent(
        &self,
        org: &OrgId,
        user: &UserId,
        client: &ClientId,
        tell: &Teller,
    ) -> StoreResult<bool> {
        write_tx!(self, |tx| {
            let gone = query(
                "DELETE FROM consents WHERE org_id = $1 AND user_id = $2 AND client_id = $3
                 RETURNING client_id, scopes, created_at, last_used_at",
            )
            .bind(org.as_str())
            .bind(user.as_str())
            .bind(client.as_str())
            .fetch_optional(&mut *tx)
            .await?;
            let Some(row) = gone else { return Ok(false) };
            let consent = consent_row(&row)?;
            let app = query(&format!(
                "SELECT {CLIENT_COLS} FROM clients WHERE id = $1 AND org_id = $2"
            ))
            .bind(client.as_str())
            .bind(org.as_str())
            .fetch_optional(&mut *tx)
            .await?;
            if let Some(app) = app {
                let app = client_row(&app)?;
                let now = Timestamp::now();
                let told = effect::of_consent_revocation(tell, user, &consent, &app, now);
                crate::effects::apply(&mut tx, org, &told, now, None).await?;
            }
            Ok(true)
        })
    }
}

fn consent_row(r: &sqlx_postgres::PgRow) -> Result<Consent, sqlx_core::Error> {
    let client: String = r.try_get(0)?;
    Ok(Consent {
        scopes: crate::rows::scopes(r.try_get(1)?, ("consents", "scopes", &client))?,
        created_at: Timestamp::from_millis(r.try_get(2)?),
        last_used_at: Timestamp::from_millis(r.try_get(3)?),
        client: ClientId::from_trusted(client),
    })
}
