//! PostgreSQL: second factors, recovery codes, the second step's wrong
//! codes, the policy and deadlines (D56).

use gatehouse_domain::effect::Effect;
use gatehouse_domain::event::Teller;
use gatehouse_domain::mfa::{
    DeadlineChange, Factor, FactorKind, Factors, MfaMode, PasskeyFactor, SecurityPolicy, TotpFactor,
};
use gatehouse_domain::{MfaId, SessionId};
use gatehouse_store::MfaStore;
use sqlx_postgres::PgRow;

use super::*;

/// Writes one of D56's effects (`effects::apply` passes only those).
pub(crate) async fn apply(c: &mut PgConnection, org: &OrgId, effect: &Effect) -> TxResult<()> {
    match effect {
        Effect::PutTotp { user, totp } => {
            query("DELETE FROM mfa_factors WHERE user_id = $1 AND org_id = $2 AND kind = 'totp'")
                .bind(user.as_str())
                .bind(org.as_str())
                .execute(&mut *c)
                .await?;
            let f = &totp.factor;
            query(
                "INSERT INTO mfa_factors (id, org_id, user_id, kind, name, secret, last_step, created_at, last_used_at)
                 VALUES ($1, $2, $3, 'totp', $4, $5, $6, $7, $8)",
            )
            .bind(f.id.as_str())
            .bind(org.as_str())
            .bind(user.as_str())
            .bind(&f.name)
            .bind(&totp.sealed_secret[..])
            .bind(i64::try_from(totp.last_step).unwrap_or(i64::MAX))
            .bind(f.created_at.millis())
            .bind(f.last_used_at.map(Timestamp::millis))
            .execute(&mut *c)
            .await?;
        }
        Effect::PutPasskey {
            user,
            passkey,
            handle,
        } => {
            // D56: the person's handle is the first registration's; a
            // registration made for another handle meanwhile is refused.
            // The person's row is locked first, so the limit below is
            // counted by one registration at a time.
            query(
                "UPDATE users SET passkey_handle = COALESCE(passkey_handle, $3) WHERE id = $1 AND org_id = $2",
            )
            .bind(user.as_str())
            .bind(org.as_str())
            .bind(&handle[..])
            .execute(&mut *c)
            .await?;
            let stored: Option<Vec<u8>> =
                query_scalar("SELECT passkey_handle FROM users WHERE id = $1 AND org_id = $2")
                    .bind(user.as_str())
                    .bind(org.as_str())
                    .fetch_optional(&mut *c)
                    .await?
                    .flatten();
            if stored.as_ref() != Some(handle) {
                return Err(StoreError::Duplicate("passkey_handle").into());
            }
            // D56: at most ten, counted in the writing transaction.
            let held: i64 = query_scalar(
                "SELECT COUNT(*) FROM mfa_factors WHERE org_id = $1 AND user_id = $2 AND kind = 'passkey'",
            )
            .bind(org.as_str())
            .bind(user.as_str())
            .fetch_one(&mut *c)
            .await?;
            if held >= gatehouse_domain::mfa::PASSKEYS_MAX as i64 {
                return Err(DomainError::LimitReached(format!(
                    "a person has at most {} passkeys",
                    gatehouse_domain::mfa::PASSKEYS_MAX
                ))
                .into());
            }
            let f = &passkey.factor;
            query(
                "INSERT INTO mfa_factors (id, org_id, user_id, kind, name, credential_id, credential, sign_count, created_at, last_used_at)
                 VALUES ($1, $2, $3, 'passkey', $4, $5, $6, $7, $8, $9)",
            )
            .bind(f.id.as_str())
            .bind(org.as_str())
            .bind(user.as_str())
            .bind(&f.name)
            .bind(&passkey.credential_id[..])
            .bind(&passkey.credential[..])
            .bind(i64::from(passkey.sign_count))
            .bind(f.created_at.millis())
            .bind(f.last_used_at.map(Timestamp::millis))
            .execute(&mut *c)
            .await?;
        }
        Effect::RemoveFactor { user, id } => {
            query("DELETE FROM mfa_factors WHERE id = $1 AND user_id = $2 AND org_id = $3")
                .bind(id.as_str())
                .bind(user.as_str())
                .bind(org.as_str())
                .execute(&mut *c)
                .await?;
        }
        Effect::PutRecoveryCodes { user, digests } => {
            query("DELETE FROM recovery_codes WHERE user_id = $1 AND org_id = $2")
                .bind(user.as_str())
                .bind(org.as_str())
                .execute(&mut *c)
                .await?;
            let all: Vec<Vec<u8>> = digests.iter().map(|d| d.to_vec()).collect();
            query(
                "INSERT INTO recovery_codes (user_id, org_id, digest) SELECT $1, $2, d FROM unnest($3::bytea[]) AS d",
            )
            .bind(user.as_str())
            .bind(org.as_str())
            .bind(all)
            .execute(&mut *c)
            .await?;
        }
        Effect::RemoveMfa { user } => {
            for sql in [
                "DELETE FROM mfa_factors WHERE user_id = $1 AND org_id = $2",
                "DELETE FROM recovery_codes WHERE user_id = $1 AND org_id = $2",
                "DELETE FROM second_step_failures WHERE user_id = $1 AND org_id = $2",
            ] {
                query(sql)
                    .bind(user.as_str())
                    .bind(org.as_str())
                    .execute(&mut *c)
                    .await?;
            }
        }
        Effect::NewMfaDeadline { user } => {
            query(
                "UPDATE users SET mfa_deadline = NULL, mfa_since = NULL
                 WHERE id = $1 AND org_id = $2
                   AND (SELECT mfa_policy FROM organizations WHERE id = $2) = 'required_for_admins'",
            )
            .bind(user.as_str())
            .bind(org.as_str())
            .execute(&mut *c)
            .await?;
        }
        Effect::SetSecurityPolicy { policy, deadlines } => {
            query(
                "UPDATE organizations SET mfa_policy = $2, mfa_grace_days = $3, security_updated_at = $4 WHERE id = $1",
            )
            .bind(org.as_str())
            .bind(policy.mfa.as_str())
            .bind(i32::try_from(policy.enrollment_grace_days).unwrap_or(i32::MAX))
            .bind(policy.updated_at.millis())
            .execute(&mut *c)
            .await?;
            match deadlines {
                DeadlineChange::Keep => {}
                DeadlineChange::Shorten { grace_secs } => {
                    query(
                        "UPDATE users SET mfa_deadline = least(mfa_deadline, mfa_since + $2)
                         WHERE org_id = $1 AND mfa_deadline IS NOT NULL",
                    )
                    .bind(org.as_str())
                    .bind(grace_secs * 1000)
                    .execute(&mut *c)
                    .await?;
                }
                DeadlineChange::Clear => {
                    query("UPDATE users SET mfa_deadline = NULL, mfa_since = NULL WHERE org_id = $1 AND mfa_deadline IS NOT NULL")
                        .bind(org.as_str())
                        .execute(&mut *c)
                        .await?;
                }
            }
        }
        _ => {}
    }
    Ok(())
}

fn totp_row(r: &PgRow) -> Result<TotpFactor, sqlx_core::Error> {
    let kind: String = r.try_get(1)?;
    Ok(TotpFactor {
        factor: Factor {
            id: MfaId::from_trusted(r.try_get(0)?),
            kind: FactorKind::parse(&kind).unwrap_or(FactorKind::Totp),
            name: r.try_get(2)?,
            created_at: Timestamp::from_millis(r.try_get(3)?),
            last_used_at: r.try_get::<Option<i64>, _>(4)?.map(Timestamp::from_millis),
        },
        sealed_secret: r.try_get::<Option<Vec<u8>>, _>(5)?.unwrap_or_default(),
        last_step: u64::try_from(r.try_get::<Option<i64>, _>(6)?.unwrap_or(0)).unwrap_or(0),
    })
}

/// A passkey from `id, name, created_at, last_used_at, credential_id,
/// credential, sign_count`.
fn passkey_row(r: &PgRow) -> Result<PasskeyFactor, sqlx_core::Error> {
    let count: i64 = r.try_get(6)?;
    Ok(PasskeyFactor {
        factor: Factor {
            id: MfaId::from_trusted(r.try_get(0)?),
            kind: FactorKind::Passkey,
            name: r.try_get(1)?,
            created_at: Timestamp::from_millis(r.try_get(2)?),
            last_used_at: r.try_get::<Option<i64>, _>(3)?.map(Timestamp::from_millis),
        },
        credential_id: r.try_get(4)?,
        credential: r.try_get(5)?,
        sign_count: u32::try_from(count).map_err(|e| sqlx_core::Error::ColumnDecode {
            index: "sign_count".into(),
            source: Box::new(e),
        })?,
    })
}

#[async_trait]
impl MfaStore for PgStore {
    async fn factors(&self, org: &OrgId, user: &UserId) -> StoreResult<Factors> {
        snapshot_read!(self, |c| {
            let totp = query(
                "SELECT id, kind, name, created_at, last_used_at, secret, last_step FROM mfa_factors
                 WHERE user_id = $1 AND org_id = $2 AND kind = 'totp'",
            )
            .bind(user.as_str())
            .bind(org.as_str())
            .fetch_optional(&mut *c)
            .await?
            .as_ref()
            .map(totp_row)
            .transpose()?;
            let (total, unused): (i64, i64) = query_as(
                "SELECT count(*), count(*) FILTER (WHERE used_at IS NULL) FROM recovery_codes
                 WHERE user_id = $1 AND org_id = $2",
            )
            .bind(user.as_str())
            .bind(org.as_str())
            .fetch_one(&mut *c)
            .await?;
            let passkeys = query(
                "SELECT id, name, created_at, last_used_at, credential_id, credential, sign_count FROM mfa_factors
                 WHERE user_id = $1 AND org_id = $2 AND kind = 'passkey' ORDER BY created_at, id",
            )
            .bind(user.as_str())
            .bind(org.as_str())
            .fetch_all(&mut *c)
            .await?
            .iter()
            .map(passkey_row)
            .collect::<Result<Vec<_>, _>>()?;
            Ok::<_, TxError>(Factors {
                totp,
                passkeys,
                recovery_remaining: (total > 0).then(|| u32::try_from(unused).unwrap_or(0)),
            })
        })
    }

    async fn write_mfa(
        &self,
        org: &OrgId,
        effects: &[Effect],
        now: Timestamp,
        tell: &Teller,
    ) -> StoreResult<()> {
        write_tx!(self, |tx| {
            crate::effects::apply(&mut tx, org, effects, now, Some(tell)).await?;
            Ok(())
        })
    }

    async fn resolve_passkey(
        &self,
        credential_id: &[u8],
    ) -> StoreResult<Option<(OrgId, UserId, PasskeyFactor)>> {
        let row = query(
            "SELECT id, name, created_at, last_used_at, credential_id, credential, sign_count, org_id, user_id
             FROM mfa_factors WHERE credential_id = $1 AND kind = 'passkey'",
        )
        .bind(credential_id)
        .fetch_optional(&self.pool)
        .await
        .map_err(db_err)?;
        row.map(|r| {
            Ok((
                OrgId::from_trusted(r.try_get(7)?),
                UserId::from_trusted(r.try_get(8)?),
                passkey_row(&r)?,
            ))
        })
        .transpose()
        .map_err(db_err)
    }

    async fn passkey_handle(&self, org: &OrgId, user: &UserId) -> StoreResult<Option<Vec<u8>>> {
        let handle: Option<Option<Vec<u8>>> =
            query_scalar("SELECT passkey_handle FROM users WHERE id = $1 AND org_id = $2")
                .bind(user.as_str())
                .bind(org.as_str())
                .fetch_optional(&self.pool)
                .await
                .map_err(db_err)?;
        Ok(handle.flatten())
    }

    async fn accept_passkey_assertion(
        &self,
        org: &OrgId,
        user: &UserId,
        id: &MfaId,
        stored: u32,
        count: u32,
        now: Timestamp,
    ) -> StoreResult<bool> {
        write_tx!(self, |tx| {
            let done = query(
                "UPDATE mfa_factors SET sign_count = $5, last_used_at = $6
                 WHERE id = $1 AND user_id = $2 AND org_id = $3 AND kind = 'passkey' AND sign_count = $4",
            )
            .bind(id.as_str())
            .bind(user.as_str())
            .bind(org.as_str())
            .bind(i64::from(stored))
            .bind(i64::from(count))
            .bind(now.millis())
            .execute(&mut *tx)
            .await?;
            Ok(done.rows_affected() == 1)
        })
    }

    async fn accept_totp_step(
        &self,
        org: &OrgId,
        user: &UserId,
        id: &MfaId,
        step: u64,
        now: Timestamp,
    ) -> StoreResult<bool> {
        let step = i64::try_from(step).unwrap_or(i64::MAX);
        write_tx!(self, |tx| {
            let done = query(
                "UPDATE mfa_factors SET last_step = $4, last_used_at = $5
                 WHERE id = $1 AND user_id = $2 AND org_id = $3 AND (last_step IS NULL OR last_step < $4)",
            )
            .bind(id.as_str())
            .bind(user.as_str())
            .bind(org.as_str())
            .bind(step)
            .bind(now.millis())
            .execute(&mut *tx)
            .await?;
            Ok(done.rows_affected() == 1)
        })
    }

    async fn use_recovery_code(
        &self,
        org: &OrgId,
        user: &UserId,
        digest: &[u8; 32],
        now: Timestamp,
        effects: &[Effect],
    ) -> StoreResult<Option<u32>> {
        write_tx!(self, |tx| {
            let done = query(
                "UPDATE recovery_codes SET used_at = $4
                 WHERE user_id = $1 AND org_id = $2 AND digest = $3 AND used_at IS NULL",
            )
            .bind(user.as_str())
            .bind(org.as_str())
            .bind(&digest[..])
            .bind(now.millis())
            .execute(&mut *tx)
            .await?;
            if done.rows_affected() != 1 {
                return Ok(None);
            }
            let left: i64 = query_scalar(
                "SELECT count(*) FROM recovery_codes WHERE user_id = $1 AND org_id = $2 AND used_at IS NULL",
            )
            .bind(user.as_str())
            .bind(org.as_str())
            .fetch_one(&mut *tx)
            .await?;
            crate::effects::apply(&mut tx, org, effects, now, None).await?;
            Ok(Some(u32::try_from(left).unwrap_or(0)))
        })
    }

    async fn record_second_step_failure(
        &self,
        org: &OrgId,
        user: &UserId,
        attempt: &str,
        at: Timestamp,
    ) -> StoreResult<()> {
        write_tx!(self, |tx| {
            query("INSERT INTO second_step_failures (org_id, user_id, attempt, at) VALUES ($1, $2, $3, $4)")
                .bind(org.as_str())
                .bind(user.as_str())
                .bind(attempt)
                .bind(at.millis())
                .execute(&mut *tx)
                .await?;
            Ok(())
        })
    }

    async fn forget_second_step_failure(
        &self,
        org: &OrgId,
        user: &UserId,
        attempt: &str,
    ) -> StoreResult<()> {
        write_tx!(self, |tx| {
            query("DELETE FROM second_step_failures WHERE user_id = $1 AND org_id = $2 AND attempt = $3")
                .bind(user.as_str())
                .bind(org.as_str())
                .bind(attempt)
                .execute(&mut *tx)
                .await?;
            Ok(())
        })
    }

    async fn second_step_failures(
        &self,
        org: &OrgId,
        user: &UserId,
        since: Timestamp,
    ) -> StoreResult<Vec<(String, Timestamp)>> {
        read!(self, |c| {
            let rows: Vec<(String, i64)> = query_as(
                "SELECT attempt, at FROM second_step_failures WHERE user_id = $1 AND org_id = $2 AND at >= $3",
            )
            .bind(user.as_str())
            .bind(org.as_str())
            .bind(since.millis())
            .fetch_all(&mut *c)
            .await?;
            Ok(rows
                .into_iter()
                .map(|(a, t)| (a, Timestamp::from_millis(t)))
                .collect())
        })
    }

    async fn security_policy(&self, org: &OrgId) -> StoreResult<SecurityPolicy> {
        read!(self, |c| {
            let row: Option<(String, i32, Option<i64>, i64)> = query_as(
                "SELECT mfa_policy, mfa_grace_days, security_updated_at, created_at FROM organizations WHERE id = $1",
            )
            .bind(org.as_str())
            .fetch_optional(&mut *c)
            .await?;
            let (mode, grace, updated, created) = row.ok_or(StoreError::NotFound)?;
            Ok(SecurityPolicy {
                mfa: MfaMode::parse(&mode)
                    .map_err(|e| StoreError::Internal(format!("organizations.mfa_policy: {e}")))?,
                enrollment_grace_days: u32::try_from(grace).unwrap_or(0),
                updated_at: Timestamp::from_millis(updated.unwrap_or(created)),
            })
        })
    }

    async fn mfa_deadline(
        &self,
        org: &OrgId,
        user: &UserId,
        candidate: Timestamp,
        now: Timestamp,
    ) -> StoreResult<Timestamp> {
        write_tx!(self, |tx| {
            query(
                "UPDATE users SET mfa_since = $3, mfa_deadline = $4
                 WHERE id = $1 AND org_id = $2 AND mfa_deadline IS NULL",
            )
            .bind(user.as_str())
            .bind(org.as_str())
            .bind(now.millis())
            .bind(candidate.millis())
            .execute(&mut *tx)
            .await?;
            let deadline: Option<Option<i64>> =
                query_scalar("SELECT mfa_deadline FROM users WHERE id = $1 AND org_id = $2")
                    .bind(user.as_str())
                    .bind(org.as_str())
                    .fetch_optional(&mut *tx)
                    .await?;
            deadline
                .flatten()
                .map(Timestamp::from_millis)
                .ok_or(TxError::from(StoreError::NotFound))
        })
    }

    async fn step_up_session(
        &self,
        org: &OrgId,
        session: &SessionId,
        amr: &[String],
        at: Timestamp,
    ) -> StoreResult<()> {
        write_tx!(self, |tx| {
            query("UPDATE sessions SET amr = $3, auth_time = $4 WHERE id = $1 AND org_id = $2")
                .bind(session.as_str())
                .bind(org.as_str())
                .bind(gatehouse_domain::session::amr_to_text(amr))
                .bind(at.millis())
                .execute(&mut *tx)
                .await?;
            Ok(())
        })
    }

    async fn sealed_key(&self, name: &str, sealed: &[u8]) -> StoreResult<Vec<u8>> {
        write_tx!(self, |tx| {
            query("INSERT INTO sealed_keys (name, sealed) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING")
                .bind(name)
                .bind(sealed)
                .execute(&mut *tx)
                .await?;
            let stored: Vec<u8> = query_scalar("SELECT sealed FROM sealed_keys WHERE name = $1")
                .bind(name)
                .fetch_one(&mut *tx)
                .await?;
            Ok(stored)
        })
    }
}
