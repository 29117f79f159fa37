//! SQLite: second factors, recovery codes, the second step's wrong codes,
//! the policy and deadlines (D56).

use gatehouse_domain::effect::Effect;
use gatehouse_domain::event::Teller;
use gatehouse_domain::mfa::{
    DeadlineChange, Factor, FactorKind, Factors, MfaMode, PasskeyFactor, SecurityPolicy, TotpFactor,
};
use gatehouse_domain::{MfaId, SessionId};
use gatehouse_store::MfaStore;

use super::*;

/// Writes one of D56's effects (`effects::apply` passes only those).
pub(crate) fn apply(c: &Connection, org: &OrgId, effect: &Effect) -> StoreResult<()> {
    match effect {
        Effect::PutTotp { user, totp } => {
            c.prepare_cached(
                "DELETE FROM mfa_factors WHERE user_id = ?1 AND org_id = ?2 AND kind = 'totp'",
            )
            .and_then(|mut s| s.execute(params![user.as_str(), org.as_str()]))
            .map_err(db_err)?;
            let f = &totp.factor;
            c.prepare_cached(
                "INSERT INTO mfa_factors (id, org_id, user_id, kind, name, secret, last_step, created_at, last_used_at)
                 VALUES (?1, ?2, ?3, 'totp', ?4, ?5, ?6, ?7, ?8)",
            )
            .and_then(|mut s| {
                s.execute(params![
                    f.id.as_str(),
                    org.as_str(),
                    user.as_str(),
                    f.name,
                    totp.sealed_secret,
                    i64::try_from(totp.last_step).unwrap_or(i64::MAX),
                    f.created_at.millis(),
                    f.last_used_at.map(Timestamp::millis),
                ])
            })
            .map_err(db_err)?;
        }
        Effect::PutPasskey {
            user,
            passkey,
            handle,
        } => {
            // D56: the person's handle is the first registration's; a
            // registration made for another handle meanwhile is refused.
            c.prepare_cached(
                "UPDATE users SET passkey_handle = ?3 WHERE id = ?1 AND org_id = ?2 AND passkey_handle IS NULL",
            )
            .and_then(|mut s| s.execute(params![user.as_str(), org.as_str(), handle]))
            .map_err(db_err)?;
            let stored: Option<Vec<u8>> = c
                .prepare_cached("SELECT passkey_handle FROM users WHERE id = ?1 AND org_id = ?2")
                .and_then(|mut s| {
                    s.query_row(params![user.as_str(), org.as_str()], |r| r.get(0))
                        .optional()
                })
                .map_err(db_err)?
                .flatten();
            if stored.as_ref() != Some(handle) {
                return Err(StoreError::Duplicate("passkey_handle"));
            }
            // D56: at most ten, counted in the writing transaction.
            let held: i64 = c
                .prepare_cached(
                    "SELECT COUNT(*) FROM mfa_factors WHERE org_id = ?1 AND user_id = ?2 AND kind = 'passkey'",
                )
                .and_then(|mut s| s.query_row(params![org.as_str(), user.as_str()], |r| r.get(0)))
                .map_err(db_err)?;
            if held >= gatehouse_domain::mfa::PASSKEYS_MAX as i64 {
                return Err(StoreError::Rule(
                    gatehouse_domain::DomainError::LimitReached(format!(
                        "a person has at most {} passkeys",
                        gatehouse_domain::mfa::PASSKEYS_MAX
                    )),
                ));
            }
            let f = &passkey.factor;
            c.prepare_cached(
                "INSERT INTO mfa_factors (id, org_id, user_id, kind, name, credential_id, credential, sign_count, created_at, last_used_at)
                 VALUES (?1, ?2, ?3, 'passkey', ?4, ?5, ?6, ?7, ?8, ?9)",
            )
            .and_then(|mut s| {
                s.execute(params![
                    f.id.as_str(),
                    org.as_str(),
                    user.as_str(),
                    f.name,
                    passkey.credential_id,
                    passkey.credential,
                    i64::from(passkey.sign_count),
                    f.created_at.millis(),
                    f.last_used_at.map(Timestamp::millis),
                ])
            })
            .map_err(|e| match e {
                rusqlite::Error::SqliteFailure(f, _)
                    if f.code == rusqlite::ErrorCode::ConstraintViolation =>
                {
                    StoreError::Duplicate("credential_id")
                }
                e => db_err(e),
            })?;
        }
        Effect::RemoveFactor { user, id } => {
            c.prepare_cached(
                "DELETE FROM mfa_factors WHERE id = ?1 AND user_id = ?2 AND org_id = ?3",
            )
            .and_then(|mut s| s.execute(params![id.as_str(), user.as_str(), org.as_str()]))
            .map_err(db_err)?;
        }
        Effect::PutRecoveryCodes { user, digests } => {
            c.prepare_cached("DELETE FROM recovery_codes WHERE user_id = ?1 AND org_id = ?2")
                .and_then(|mut s| s.execute(params![user.as_str(), org.as_str()]))
                .map_err(db_err)?;
            let mut ins = c
                .prepare_cached(
                    "INSERT INTO recovery_codes (user_id, org_id, digest) VALUES (?1, ?2, ?3)",
                )
                .map_err(db_err)?;
            for d in digests {
                ins.execute(params![user.as_str(), org.as_str(), d.to_vec()])
                    .map_err(db_err)?;
            }
        }
        Effect::RemoveMfa { user } => {
            for sql in [
                "DELETE FROM mfa_factors WHERE user_id = ?1 AND org_id = ?2",
                "DELETE FROM recovery_codes WHERE user_id = ?1 AND org_id = ?2",
                "DELETE FROM second_step_failures WHERE user_id = ?1 AND org_id = ?2",
            ] {
                c.prepare_cached(sql)
                    .and_then(|mut s| s.execute(params![user.as_str(), org.as_str()]))
                    .map_err(db_err)?;
            }
        }
        Effect::NewMfaDeadline { user } => {
            c.prepare_cached(
                "UPDATE users SET mfa_deadline = NULL, mfa_since = NULL
                 WHERE id = ?1 AND org_id = ?2
                   AND (SELECT mfa_policy FROM organizations WHERE id = ?2) = 'required_for_admins'",
            )
            .and_then(|mut s| s.execute(params![user.as_str(), org.as_str()]))
            .map_err(db_err)?;
        }
        Effect::SetSecurityPolicy { policy, deadlines } => {
            c.prepare_cached(
                "UPDATE organizations SET mfa_policy = ?2, mfa_grace_days = ?3, security_updated_at = ?4 WHERE id = ?1",
            )
            .and_then(|mut s| {
                s.execute(params![
                    org.as_str(),
                    policy.mfa.as_str(),
                    policy.enrollment_grace_days,
                    policy.updated_at.millis()
                ])
            })
            .map_err(db_err)?;
            match deadlines {
                DeadlineChange::Keep => {}
                DeadlineChange::Shorten { grace_secs } => {
                    c.prepare_cached(
                        "UPDATE users SET mfa_deadline = min(mfa_deadline, mfa_since + ?2)
                         WHERE org_id = ?1 AND mfa_deadline IS NOT NULL",
                    )
                    .and_then(|mut s| s.execute(params![org.as_str(), grace_secs * 1000]))
                    .map_err(db_err)?;
                }
                DeadlineChange::Clear => {
                    c.prepare_cached(
                        "UPDATE users SET mfa_deadline = NULL, mfa_since = NULL WHERE org_id = ?1",
                    )
                    .and_then(|mut s| s.execute([org.as_str()]))
                    .map_err(db_err)?;
                }
            }
        }
        _ => {}
    }
    Ok(())
}

/// A passkey from `id, name, created_at, last_used_at, credential_id,
/// credential, sign_count`.
fn passkey_row(r: &Row<'_>) -> rusqlite::Result<PasskeyFactor> {
    Ok(PasskeyFactor {
        factor: Factor {
            id: MfaId::from_trusted(r.get(0)?),
            kind: FactorKind::Passkey,
            name: r.get(1)?,
            created_at: Timestamp::from_millis(r.get(2)?),
            last_used_at: r.get::<_, Option<i64>>(3)?.map(Timestamp::from_millis),
        },
        credential_id: r.get(4)?,
        credential: r.get(5)?,
        sign_count: u32::try_from(r.get::<_, i64>(6)?).map_err(|e| {
            rusqlite::Error::FromSqlConversionFailure(
                6,
                rusqlite::types::Type::Integer,
                Box::new(e),
            )
        })?,
    })
}

fn factor_kind(text: &str) -> FactorKind {
    FactorKind::parse(text).unwrap_or(FactorKind::Totp)
}

#[async_trait]
impl MfaStore for SqliteStore {
    async fn factors(&self, org: &OrgId, user: &UserId) -> StoreResult<Factors> {
        let (org, user) = (org.clone(), user.clone());
        self.pool
            .read(move |c| {
                let totp = c
                    .prepare_cached(
                        "SELECT id, kind, name, created_at, last_used_at, secret, last_step FROM mfa_factors
                         WHERE user_id = ?1 AND org_id = ?2 AND kind = 'totp'",
                    )
                    .and_then(|mut s| {
                        s.query_row(params![user.as_str(), org.as_str()], |r| {
                            Ok(TotpFactor {
                                factor: Factor {
                                    id: MfaId::from_trusted(r.get(0)?),
                                    kind: factor_kind(&r.get::<_, String>(1)?),
                                    name: r.get(2)?,
                                    created_at: Timestamp::from_millis(r.get(3)?),
                                    last_used_at: r
                                        .get::<_, Option<i64>>(4)?
                                        .map(Timestamp::from_millis),
                                },
                                sealed_secret: r.get::<_, Option<Vec<u8>>>(5)?.unwrap_or_default(),
                                last_step: u64::try_from(r.get::<_, Option<i64>>(6)?.unwrap_or(0))
                                    .unwrap_or(0),
                            })
                        })
                        .optional()
                    })
                    .map_err(db_err)?;
                let (total, unused): (i64, i64) = c
                    .prepare_cached(
                        "SELECT count(*), count(*) FILTER (WHERE used_at IS NULL) FROM recovery_codes
                         WHERE user_id = ?1 AND org_id = ?2",
                    )
                    .and_then(|mut s| {
                        s.query_row(params![user.as_str(), org.as_str()], |r| {
                            Ok((r.get(0)?, r.get(1)?))
                        })
                    })
                    .map_err(db_err)?;
                let mut s = c
                    .prepare_cached(
                        "SELECT id, name, created_at, last_used_at, credential_id, credential, sign_count FROM mfa_factors
                         WHERE user_id = ?1 AND org_id = ?2 AND kind = 'passkey' ORDER BY created_at, id",
                    )
                    .map_err(db_err)?;
                let passkeys = s
                    .query_map(params![user.as_str(), org.as_str()], passkey_row)
                    .map_err(db_err)?
                    .collect::<rusqlite::Result<Vec<_>>>()
                    .map_err(db_err)?;
                Ok(Factors {
                    totp,
                    passkeys,
                    recovery_remaining: (total > 0).then(|| u32::try_from(unused).unwrap_or(0)),
                })
            })
            .await
    }

    async fn write_mfa(
        &self,
        org: &OrgId,
        effects: &[Effect],
        now: Timestamp,
        tell: &Teller,
    ) -> StoreResult<()> {
        let (org, effects, tell) = (org.clone(), effects.to_vec(), tell.clone());
        self.pool
            .write(move |tx| crate::effects::apply(tx, &org, &effects, now, Some(&tell)))
            .await
    }

    async fn resolve_passkey(
        &self,
        credential_id: &[u8],
    ) -> StoreResult<Option<(OrgId, UserId, PasskeyFactor)>> {
        let credential_id = credential_id.to_vec();
        self.pool
            .read(move |c| {
                c.prepare_cached(
                    "SELECT id, name, created_at, last_used_at, credential_id, credential, sign_count, org_id, user_id
                     FROM mfa_factors WHERE credential_id = ?1 AND kind = 'passkey'",
                )
                .and_then(|mut s| {
                    s.query_row([credential_id], |r| {
                        Ok((
                            OrgId::from_trusted(r.get(7)?),
                            UserId::from_trusted(r.get(8)?),
                            passkey_row(r)?,
                        ))
                    })
                    .optional()
                })
                .map_err(db_err)
            })
            .await
    }

    async fn passkey_handle(&self, org: &OrgId, user: &UserId) -> StoreResult<Option<Vec<u8>>> {
        let (org, user) = (org.clone(), user.clone());
        self.pool
            .read(move |c| {
                c.prepare_cached("SELECT passkey_handle FROM users WHERE id = ?1 AND org_id = ?2")
                    .and_then(|mut s| {
                        s.query_row(params![user.as_str(), org.as_str()], |r| {
                            r.get::<_, Option<Vec<u8>>>(0)
                        })
                        .optional()
                    })
                    .map(Option::flatten)
                    .map_err(db_err)
            })
            .await
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
        let (org, user, id) = (org.clone(), user.clone(), id.clone());
        self.pool
            .write(move |tx| {
                tx.prepare_cached(
                    "UPDATE mfa_factors SET sign_count = ?5, last_used_at = ?6
                     WHERE id = ?1 AND user_id = ?2 AND org_id = ?3 AND kind = 'passkey' AND sign_count = ?4",
                )
                .and_then(|mut s| {
                    s.execute(params![
                        id.as_str(),
                        user.as_str(),
                        org.as_str(),
                        i64::from(stored),
                        i64::from(count),
                        now.millis()
                    ])
                })
                .map(|n| n == 1)
                .map_err(db_err)
            })
            .await
    }

    async fn accept_totp_step(
        &self,
        org: &OrgId,
        user: &UserId,
        id: &MfaId,
        step: u64,
        now: Timestamp,
    ) -> StoreResult<bool> {
        let (org, user, id) = (org.clone(), user.clone(), id.clone());
        let step = i64::try_from(step).unwrap_or(i64::MAX);
        self.pool
            .write(move |tx| {
                let n = tx
                    .prepare_cached(
                        "UPDATE mfa_factors SET last_step = ?4, last_used_at = ?5
                         WHERE id = ?1 AND user_id = ?2 AND org_id = ?3 AND (last_step IS NULL OR last_step < ?4)",
                    )
                    .and_then(|mut s| {
                        s.execute(params![id.as_str(), user.as_str(), org.as_str(), step, now.millis()])
                    })
                    .map_err(db_err)?;
                Ok(n == 1)
            })
            .await
    }

    async fn use_recovery_code(
        &self,
        org: &OrgId,
        user: &UserId,
        digest: &[u8; 32],
        now: Timestamp,
        effects: &[Effect],
    ) -> StoreResult<Option<u32>> {
        let (org, user, digest, effects) = (org.clone(), user.clone(), *digest, effects.to_vec());
        self.pool
            .write(move |tx| {
                let n = tx
                    .prepare_cached(
                        "UPDATE recovery_codes SET used_at = ?4
                         WHERE user_id = ?1 AND org_id = ?2 AND digest = ?3 AND used_at IS NULL",
                    )
                    .and_then(|mut s| {
                        s.execute(params![user.as_str(), org.as_str(), digest.to_vec(), now.millis()])
                    })
                    .map_err(db_err)?;
                if n != 1 {
                    return Ok(None);
                }
                let left: i64 = tx
                    .prepare_cached(
                        "SELECT count(*) FROM recovery_codes WHERE user_id = ?1 AND org_id = ?2 AND used_at IS NULL",
                    )
                    .and_then(|mut s| s.query_row(params![user.as_str(), org.as_str()], |r| r.get(0)))
                    .map_err(db_err)?;
                crate::effects::apply(tx, &org, &effects, now, None)?;
                Ok(Some(u32::try_from(left).unwrap_or(0)))
            })
            .await
    }

    async fn record_second_step_failure(
        &self,
        org: &OrgId,
        user: &UserId,
        attempt: &str,
        at: Timestamp,
    ) -> StoreResult<()> {
        let (org, user, attempt) = (org.clone(), user.clone(), attempt.to_owned());
        self.pool
            .write(move |tx| {
                tx.prepare_cached(
                    "INSERT INTO second_step_failures (org_id, user_id, attempt, at) VALUES (?1, ?2, ?3, ?4)",
                )
                .and_then(|mut s| s.execute(params![org.as_str(), user.as_str(), attempt, at.millis()]))
                .map_err(db_err)?;
                Ok(())
            })
            .await
    }

    async fn forget_second_step_failure(
        &self,
        org: &OrgId,
        user: &UserId,
        attempt: &str,
    ) -> StoreResult<()> {
        let (org, user, attempt) = (org.clone(), user.clone(), attempt.to_owned());
        self.pool
            .write(move |tx| {
                tx.prepare_cached(
                    "DELETE FROM second_step_failures WHERE user_id = ?1 AND org_id = ?2 AND attempt = ?3",
                )
                .and_then(|mut s| s.execute(params![user.as_str(), org.as_str(), attempt]))
                .map_err(db_err)?;
                Ok(())
            })
            .await
    }

    async fn second_step_failures(
        &self,
        org: &OrgId,
        user: &UserId,
        since: Timestamp,
    ) -> StoreResult<Vec<(String, Timestamp)>> {
        let (org, user) = (org.clone(), user.clone());
        self.pool
            .read(move |c| {
                c.prepare_cached(
                    "SELECT attempt, at FROM second_step_failures WHERE user_id = ?1 AND org_id = ?2 AND at >= ?3",
                )
                .and_then(|mut s| {
                    s.query_map(params![user.as_str(), org.as_str(), since.millis()], |r| {
                        Ok((r.get(0)?, Timestamp::from_millis(r.get(1)?)))
                    })?
                    .collect()
                })
                .map_err(db_err)
            })
            .await
    }

    async fn security_policy(&self, org: &OrgId) -> StoreResult<SecurityPolicy> {
        let org = org.clone();
        self.pool
            .read(move |c| {
                let row: Option<(String, i64, Option<i64>, i64)> = c
                    .prepare_cached(
                        "SELECT mfa_policy, mfa_grace_days, security_updated_at, created_at FROM organizations WHERE id = ?1",
                    )
                    .and_then(|mut s| {
                        s.query_row([org.as_str()], |r| {
                            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
                        })
                        .optional()
                    })
                    .map_err(db_err)?;
                let (mode, grace, updated, created) = row.ok_or(StoreError::NotFound)?;
                Ok(SecurityPolicy {
                    mfa: MfaMode::parse(&mode)
                        .map_err(|e| StoreError::Internal(format!("organizations.mfa_policy: {e}")))?,
                    enrollment_grace_days: u32::try_from(grace).unwrap_or(0),
                    updated_at: Timestamp::from_millis(updated.unwrap_or(created)),
                })
            })
            .await
    }

    async fn mfa_deadline(
        &self,
        org: &OrgId,
        user: &UserId,
        candidate: Timestamp,
        now: Timestamp,
    ) -> StoreResult<Timestamp> {
        let (org, user) = (org.clone(), user.clone());
        self.pool
            .write(move |tx| {
                tx.prepare_cached(
                    "UPDATE users SET mfa_since = ?3, mfa_deadline = ?4
                     WHERE id = ?1 AND org_id = ?2 AND mfa_deadline IS NULL",
                )
                .and_then(|mut s| {
                    s.execute(params![
                        user.as_str(),
                        org.as_str(),
                        now.millis(),
                        candidate.millis()
                    ])
                })
                .map_err(db_err)?;
                let deadline: Option<i64> = tx
                    .prepare_cached("SELECT mfa_deadline FROM users WHERE id = ?1 AND org_id = ?2")
                    .and_then(|mut s| {
                        s.query_row(params![user.as_str(), org.as_str()], |r| r.get(0))
                            .optional()
                    })
                    .map_err(db_err)?
                    .flatten();
                deadline
                    .map(Timestamp::from_millis)
                    .ok_or(StoreError::NotFound)
            })
            .await
    }

    async fn step_up_session(
        &self,
        org: &OrgId,
        session: &SessionId,
        amr: &[String],
        at: Timestamp,
    ) -> StoreResult<()> {
        let (org, session, amr) = (
            org.clone(),
            session.clone(),
            gatehouse_domain::session::amr_to_text(amr),
        );
        self.pool
            .write(move |tx| {
                tx.prepare_cached(
                    "UPDATE sessions SET amr = ?3, auth_time = ?4 WHERE id = ?1 AND org_id = ?2",
                )
                .and_then(|mut s| {
                    s.execute(params![session.as_str(), org.as_str(), amr, at.millis()])
                })
                .map_err(db_err)?;
                Ok(())
            })
            .await
    }

    async fn sealed_key(&self, name: &str, sealed: &[u8]) -> StoreResult<Vec<u8>> {
        let (name, sealed) = (name.to_owned(), sealed.to_vec());
        self.pool
            .write(move |tx| {
                tx.prepare_cached("INSERT INTO sealed_keys (name, sealed) VALUES (?1, ?2) ON CONFLICT (name) DO NOTHING")
                    .and_then(|mut s| s.execute(params![name, sealed]))
                    .map_err(db_err)?;
                tx.prepare_cached("SELECT sealed FROM sealed_keys WHERE name = ?1")
                    .and_then(|mut s| s.query_row([name.as_str()], |r| r.get(0)))
                    .map_err(db_err)
            })
            .await
    }
}
