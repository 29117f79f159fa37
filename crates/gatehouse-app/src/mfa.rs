//! Second factors (D56): the organization's policy, a person's factors and
//! recovery codes, the admin reset, and the second step of a sign-in with
//! its throttles and the step-up of a browser session.
//!
//! The rules (levels, policy, deadlines, throttles, the replay rule) are
//! `gatehouse_domain::mfa`'s; TOTP and recovery-code digests are
//! `gatehouse_auth::totp`'s; sealing under the master key is
//! `gatehouse_auth::second_step`'s. Every write is a list of effects
//! applied by storage in one transaction with its e-mail and events.

use gatehouse_auth::totp;
use gatehouse_domain::effect::{self, Effect};
use gatehouse_domain::event::Origin;
use gatehouse_domain::link::OutboundEmail;
use gatehouse_domain::mfa::{
    self, AcrRequest, Factor, FactorKind, Factors, Level, PolicyPatch, SecondStep, SecurityPolicy,
    TotpFactor,
};
use gatehouse_domain::{MfaId, OrgId, Timestamp, User, UserId, UserStatus};
use gatehouse_store::{Session, StoreError};

use crate::error::{AppError, AppResult, OrApp};
use crate::{App, Resource};

/// A TOTP secret offered to a person, waiting for a confirming code.
pub struct TotpEnrolment {
    /// The secret as people type it (base32, no padding).
    pub secret_base32: String,
    /// The `otpauth://` URI (D56), also drawn as a QR code.
    pub uri: String,
    /// The enrolment sealed for the confirming form.
    pub sealed: String,
}

/// Why a factor change was refused.
#[derive(Debug, thiserror::Error)]
pub enum MfaError {
    /// The confirming code is not the secret's code now.
    #[error("the code is not valid")]
    WrongCode,
    /// The enrolment expired or is not this person's.
    #[error("the enrolment expired")]
    Expired,
    /// D56: while a policy covers the person, their last factor stays.
    #[error("the last factor stays while the policy covers you")]
    LastFactor,
    #[error("no such factor")]
    NotFound,
    /// Recovery codes stand in for a factor: none without one (D56).
    #[error("recovery codes need a factor")]
    NoFactor,
    #[error(transparent)]
    Failed(#[from] AppError),
}

/// Why a second step did not pass.
#[derive(Debug, thiserror::Error)]
pub enum SecondStepError {
    #[error("the code is not valid")]
    Wrong,
    /// D56: five wrong codes end the attempt: the password is asked again.
    #[error("too many wrong codes for this sign-in")]
    AttemptEnded,
    /// D56: ten wrong codes in fifteen minutes block the account's second
    /// step (recovery codes still pass).
    #[error("the second step is paused")]
    Blocked,
    #[error(transparent)]
    Failed(#[from] AppError),
}

/// A passed second step: the session's new `amr`, and the recovery codes
/// left when one was used.
#[derive(Debug)]
pub struct Passed {
    pub amr: Vec<String>,
    pub recovery_left: Option<u32>,
}

/// What an authorization needs of a browser session that is signed in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StepUp {
    /// The session meets what is asked.
    Met,
    /// The second step (or the enrolment step under the policy) first.
    Needed(SecondStep),
    /// D56: a passkey first (`phr` asked, a passkey is what is missing).
    Passkey,
    /// An Essential `acr` the person has no factor for.
    Unmet,
}

impl App {
    /// D56 (D40 continued): `GATEHOUSE_MFA_GRACE_DAY`.
    pub fn with_mfa_grace_day(mut self, secs: i64) -> Self {
        std::sync::Arc::get_mut(&mut self.0)
            .expect("settings are applied before the App is shared")
            .mfa_grace_day_secs = secs.max(1);
        self
    }

    /// The length of one grace day.
    pub fn mfa_grace_day_secs(&self) -> i64 {
        self.0.mfa_grace_day_secs
    }

    fn mfa_store(&self) -> &dyn gatehouse_store::MfaStore {
        self.0.store.as_ref()
    }

    fn sealer(&self) -> AppResult<&gatehouse_auth::AuthService> {
        self.auth()
            .map(|a| a.as_ref())
            .ok_or_else(|| AppError::Internal("second factors without the serving state".into()))
    }

    /// The recovery-code key (D3 revised): made once for the deployment,
    /// stored encrypted under the master key, the first writer winning on
    /// every node.
    async fn recovery_key(&self) -> AppResult<[u8; 32]> {
        if let Some(k) = self.0.recovery_key.get() {
            return Ok(*k);
        }
        let auth = self.sealer()?;
        let fresh = gatehouse_domain::random::bytes::<32>();
        let stored = self
            .mfa_store()
            .sealed_key(RECOVERY_KEY_NAME, &auth.seal_recovery_key(&fresh))
            .await
            .or_app(Resource::Storage)?;
        let key = auth.open_recovery_key(&stored).ok_or_else(|| {
            AppError::Internal("the recovery-code key does not open under the master key".into())
        })?;
        Ok(*self.0.recovery_key.get_or_init(|| key))
    }

    /// `GET /v1/me/mfa`, `GET /v1/users/{id}/mfa`: the person's factors.
    pub async fn mfa_of(&self, org: &OrgId, user: &UserId) -> AppResult<Factors> {
        self.get_user(org, user).await?;
        self.mfa_store()
            .factors(org, user)
            .await
            .or_app(Resource::User)
    }

    /// `GET /v1/organization/security`.
    pub async fn security_policy(&self, org: &OrgId) -> AppResult<SecurityPolicy> {
        self.mfa_store()
            .security_policy(org)
            .await
            .or_app(Resource::Organization)
    }

    /// `PATCH /v1/organization/security`: the policy after the patch, with
    /// `organization.security_updated` when it changed.
    pub async fn update_security_policy(
        &self,
        org: &OrgId,
        patch: PolicyPatch,
        origin: &Origin,
    ) -> AppResult<SecurityPolicy> {
        let before = self.security_policy(org).await?;
        let now = Timestamp::now();
        let Some((after, deadlines)) = patch.apply(&before, now, self.0.mfa_grace_day_secs) else {
            return Ok(before);
        };
        let tell = self.teller(origin);
        let fx = effect::of_policy_change(&tell, org, &before, after, deadlines);
        self.mfa_store()
            .write_mfa(org, &fx, now, &tell)
            .await
            .or_app(Resource::Organization)?;
        Ok(after)
    }

    /// D56's admin reset (`DELETE /v1/users/{id}/mfa`, `gatehouse user
    /// reset-mfa`): every factor and recovery code goes, the person's
    /// sessions end and their tokens are revoked, and they are e-mailed.
    /// Done also when there was nothing to remove.
    pub async fn reset_mfa(&self, org: &OrgId, user: &UserId, origin: &Origin) -> AppResult<()> {
        let person = self.get_user(org, user).await?;
        let factors = self
            .mfa_store()
            .factors(org, user)
            .await
            .or_app(Resource::User)?;
        let now = Timestamp::now();
        let mail = self.factor_mail(
            &person,
            "The second factors of your Gatehouse account were reset",
            "An administrator of your organization removed every second factor and recovery code of this account, and signed it out everywhere. At your next sign-in you can set up a new one.",
        );
        let tell = self.teller(origin);
        let fx = effect::of_mfa_reset(
            &tell,
            user,
            &factors.listed().into_iter().cloned().collect::<Vec<_>>(),
            &mail,
            now,
        );
        self.mfa_store()
            .write_mfa(org, &fx, now, &tell)
            .await
            .or_app(Resource::User)?;
        self.sync_revocations().await?;
        Ok(())
    }

    /// `gatehouse user reset-mfa USR` (D47 continued): [`App::reset_mfa`]
    /// as the operator, for the user of whichever organization holds them.
    pub async fn operator_reset_mfa(&self, user: &UserId) -> AppResult<OrgId> {
        let org = self.org_of_user(user).await?;
        self.reset_mfa(&org, user, &Origin::operator()).await?;
        Ok(org)
    }

    /// D56 (D53 continued): the mock's fixture user `email` gets a TOTP
    /// factor with the known `secret`, so client developers can test the
    /// second step; nothing when the person already has one.
    pub async fn enrol_fixture_totp(
        &self,
        org: &OrgId,
        email: &str,
        secret: &[u8],
    ) -> AppResult<()> {
        let auth = self.sealer()?;
        let email = gatehouse_domain::Email::parse_for_lookup(email)
            .map_err(|_| AppError::Internal("the fixture address".into()))?;
        let Some((user, _)) = self
            .0
            .store
            .find_user_by_email(org, &email)
            .await
            .or_app(Resource::User)?
        else {
            return Err(AppError::NotFound(Resource::User));
        };
        let factors = self
            .mfa_store()
            .factors(org, &user.id)
            .await
            .or_app(Resource::User)?;
        if factors.totp.is_some() {
            return Ok(());
        }
        let now = Timestamp::now();
        let id = MfaId::generate();
        let totp = TotpFactor {
            factor: Factor {
                id: id.clone(),
                kind: FactorKind::Totp,
                name: mfa::TOTP_NAME.to_owned(),
                created_at: now,
                last_used_at: None,
            },
            sealed_secret: auth.seal_totp_secret(org, &user.id, &id, secret),
            last_step: 0,
        };
        let fx = [Effect::PutTotp {
            user: user.id.clone(),
            totp: Box::new(totp),
        }];
        self.mfa_store()
            .write_mfa(org, &fx, now, &self.teller(&Origin::system()))
            .await
            .or_app(Resource::User)
    }

    pub(crate) fn factor_mail(&self, user: &User, subject: &str, what: &str) -> OutboundEmail {
        OutboundEmail {
            to: user.email.as_str().to_owned(),
            subject: subject.to_owned(),
            body: format!(
                "{what}\n\nIf it was not you, change your password at {}/account/security and tell your organization's admins.\n",
                self.public_url()
            ),
        }
    }

    /// D58: a sign-in whose password was right but that cannot finish
    /// before the person enrols a second factor (the deadline passed) is a
    /// failed sign-in, `enrollment_required`. A step-up (`step_up`: the
    /// person is signed in already) is no sign-in and records nothing.
    pub async fn note_enrolment_step(
        &self,
        org: &OrgId,
        user: &UserId,
        step: SecondStep,
        step_up: bool,
    ) {
        if let (
            SecondStep::Enrol {
                skippable_until: None,
            },
            false,
        ) = (step, step_up)
        {
            self.record_sign_in_failure(
                org,
                gatehouse_domain::audit::SignInFailure::EnrollmentRequired,
                Some(user),
                None,
                None,
                None,
            )
            .await;
        }
    }

    /// A new TOTP secret for `user`, shown until confirmed (D56).
    pub async fn begin_totp(&self, org: &OrgId, user: &User) -> AppResult<TotpEnrolment> {
        let auth = self.sealer()?;
        let org_name = self.org_name(org).await?;
        let secret = totp::new_secret();
        Ok(TotpEnrolment {
            secret_base32: totp::secret_base32(&secret),
            uri: totp::otpauth_uri(&org_name, user.email.as_str(), &secret),
            sealed: auth.seal_enrolment(&gatehouse_auth::second_step::PendingTotp {
                org: org.clone(),
                user: user.id.clone(),
                secret: secret.to_vec(),
                exp: Timestamp::now().unix_seconds()
                    + gatehouse_auth::second_step::PENDING_TTL_SECS,
            }),
        })
    }

    /// The enrolment sealed in `sealed`, reopened (to show it again after a
    /// wrong code).
    pub async fn reopen_totp(
        &self,
        org: &OrgId,
        user: &User,
        sealed: &str,
    ) -> Result<TotpEnrolment, MfaError> {
        let auth = self.sealer()?;
        let pending = auth
            .open_enrolment(sealed, org, &user.id)
            .ok_or(MfaError::Expired)?;
        let org_name = self.org_name(org).await?;
        Ok(TotpEnrolment {
            secret_base32: totp::secret_base32(&pending.secret),
            uri: totp::otpauth_uri(&org_name, user.email.as_str(), &pending.secret),
            sealed: sealed.to_owned(),
        })
    }

    /// Confirms the enrolment sealed in `sealed` with one valid code (which
    /// counts as the last accepted step): the factor replaces any earlier
    /// TOTP factor, the person is e-mailed, `user.mfa_enrolled` is told.
    pub async fn confirm_totp(
        &self,
        org: &OrgId,
        user: &User,
        sealed: &str,
        code: &str,
        origin: &Origin,
    ) -> Result<Factor, MfaError> {
        let auth = self.sealer()?;
        let pending = auth
            .open_enrolment(sealed, org, &user.id)
            .ok_or(MfaError::Expired)?;
        let now = Timestamp::now();
        let step = totp::verify(&pending.secret, code, now, None).ok_or(MfaError::WrongCode)?;
        let before = self
            .mfa_store()
            .factors(org, &user.id)
            .await
            .or_app(Resource::User)?;
        let id = MfaId::generate();
        let factor = Factor {
            id: id.clone(),
            kind: FactorKind::Totp,
            name: mfa::TOTP_NAME.to_owned(),
            created_at: now,
            last_used_at: None,
        };
        let stored = TotpFactor {
            factor: factor.clone(),
            sealed_secret: auth.seal_totp_secret(org, &user.id, &id, &pending.secret),
            last_step: step,
        };
        let mail = self.factor_mail(
            user,
            "An authenticator app was added to your Gatehouse account",
            "An authenticator app (one-time codes) was added to this account as its second factor.",
        );
        let tell = self.teller(origin);
        let replaced = before.totp.as_ref().map(|t| &t.factor);
        let fx = effect::of_totp_enrolment(&tell, &user.id, stored, replaced, &mail);
        self.mfa_store()
            .write_mfa(org, &fx, now, &tell)
            .await
            .or_app(Resource::User)?;
        Ok(factor)
    }

    /// Removes the factor `id` of `user` (the account page): refused for
    /// the last factor while the policy covers the person (D56).
    pub async fn remove_factor(
        &self,
        org: &OrgId,
        user: &User,
        id: &MfaId,
        origin: &Origin,
    ) -> Result<(), MfaError> {
        let factors = self
            .mfa_store()
            .factors(org, &user.id)
            .await
            .or_app(Resource::User)?;
        let listed = factors.listed();
        let factor = listed
            .iter()
            .find(|f| &f.id == id)
            .ok_or(MfaError::NotFound)?;
        let policy = self.security_policy(org).await?;
        if listed.len() == 1 && policy.mfa.covers(user.role) {
            return Err(MfaError::LastFactor);
        }
        let now = Timestamp::now();
        let mail = self.factor_mail(
            user,
            "A second factor was removed from your Gatehouse account",
            &format!(
                "The second factor \"{}\" was removed from this account.",
                factor.name
            ),
        );
        let tell = self.teller(origin);
        let mut fx = effect::of_factor_removal(&tell, &user.id, factor, &mail, now);
        // The recovery codes go with the last factor they stood in for.
        if listed.len() == 1 {
            fx.insert(
                1,
                Effect::PutRecoveryCodes {
                    user: user.id.clone(),
                    digests: Vec::new(),
                },
            );
        }
        self.mfa_store()
            .write_mfa(org, &fx, now, &tell)
            .await
            .or_app(Resource::User)?;
        Ok(())
    }

    /// A new set of ten recovery codes, shown once; the old set dies (D56).
    pub async fn regenerate_recovery_codes(
        &self,
        org: &OrgId,
        user: &User,
        origin: &Origin,
    ) -> Result<Vec<String>, MfaError> {
        let factors = self
            .mfa_store()
            .factors(org, &user.id)
            .await
            .or_app(Resource::User)?;
        if !factors.any() {
            return Err(MfaError::NoFactor);
        }
        let key = self.recovery_key().await?;
        let codes = totp::new_recovery_codes();
        let digests = codes
            .iter()
            .map(|c| totp::recovery_digest(&key, c))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| AppError::Internal("a new recovery code has no digest".into()))?;
        let now = Timestamp::now();
        let mail = self.factor_mail(
            user,
            "New recovery codes for your Gatehouse account",
            "A new set of recovery codes was made for this account; the earlier ones no longer work.",
        );
        // D58: `user.recovery_codes_regenerated`, with the new set.
        let regenerated = gatehouse_domain::audit::security(
            "user.recovery_codes_regenerated",
            Some(origin.actor.clone()),
            Some((
                gatehouse_domain::audit::TargetType::User,
                user.id.as_str().to_owned(),
            )),
            origin.request.as_ref(),
            now,
        );
        let fx = [
            Effect::PutRecoveryCodes {
                user: user.id.clone(),
                digests,
            },
            Effect::Mail(Box::new(mail)),
            Effect::Audit(Box::new(regenerated)),
        ];
        let tell = self.teller(origin);
        self.mfa_store()
            .write_mfa(org, &fx, now, &tell)
            .await
            .or_app(Resource::User)?;
        Ok(codes)
    }

    /// What follows a right password for `user` (D56): nothing, the second
    /// factor, or the enrolment step (the deadline set at the first
    /// sign-in under the policy).
    pub async fn next_step(&self, org: &OrgId, user: &User) -> AppResult<SecondStep> {
        Ok(self
            .next_step_for(org, user, &AcrRequest::default())
            .await?
            .0)
    }

    /// [`App::next_step`] for an authorization asking `acr`, and whether
    /// the second step is a passkey alone (D56: a request for `phr` asks
    /// for a passkey, when the person can give one here), from one read of
    /// the person's factors.
    pub async fn next_step_for(
        &self,
        org: &OrgId,
        user: &User,
        acr: &AcrRequest,
    ) -> AppResult<(SecondStep, bool)> {
        let factors = self
            .mfa_store()
            .factors(org, &user.id)
            .await
            .or_app(Resource::User)?;
        let policy = self.security_policy(org).await?;
        let step = self.step_for(org, user, &factors, &policy).await?;
        let passkey_only = step == SecondStep::Code
            && acr.target(Level::Pwd, self.reachable(&factors)) == Level::Phr;
        Ok((step, passkey_only))
    }

    async fn step_for(
        &self,
        org: &OrgId,
        user: &User,
        factors: &Factors,
        policy: &SecurityPolicy,
    ) -> AppResult<SecondStep> {
        let covered = policy.mfa.covers(user.role);
        let now = Timestamp::now();
        let deadline = if covered && !factors.any() {
            let candidate = policy.deadline_from(now, self.0.mfa_grace_day_secs);
            Some(
                self.mfa_store()
                    .mfa_deadline(org, &user.id, candidate, now)
                    .await
                    .or_app(Resource::User)?,
            )
        } else {
            None
        };
        Ok(mfa::second_step(factors.any(), covered, deadline, now))
    }

    /// What an authorization asks of `session` (D56): the policy treats a
    /// session without `mfa` of a person it covers as a sign-in under it;
    /// `acr` asks for a level the session may lack.
    pub async fn step_up_for(
        &self,
        session: &Session,
        user: &User,
        acr: &AcrRequest,
    ) -> AppResult<StepUp> {
        let org = &session.org;
        let achieved = Level::of_amr(&session.amr);
        let factors = self
            .mfa_store()
            .factors(org, &user.id)
            .await
            .or_app(Resource::User)?;
        let possible = self.reachable(&factors).max(achieved);
        if acr.essential_unsupported()
            || acr.essential_floor().is_some_and(|floor| floor > possible)
        {
            return Ok(StepUp::Unmet);
        }
        let target = acr.target(achieved, possible);
        if target == Level::Phr && achieved < Level::Phr {
            return Ok(StepUp::Passkey);
        }
        if achieved < Level::Mfa {
            let policy = self.security_policy(org).await?;
            if policy.mfa.covers(user.role) {
                let step = self.step_for(org, user, &factors, &policy).await?;
                if step != SecondStep::Done {
                    return Ok(StepUp::Needed(step));
                }
            }
        }
        if target > achieved {
            return Ok(StepUp::Needed(SecondStep::Code));
        }
        Ok(StepUp::Met)
    }

    /// The highest level a step-up can reach for a person with `factors`
    /// here: their passkeys count where passkeys are offered (D56).
    fn reachable(&self, factors: &Factors) -> Level {
        let offered = self.auth().is_some_and(|a| a.passkeys().is_ok());
        factors.possible_where(offered)
    }

    /// Whether `user`'s sign-in `attempt` has ended (D56: five wrong codes;
    /// the password is asked again), which no factor continues.
    pub(crate) async fn attempt_over(
        &self,
        org: &OrgId,
        user: &UserId,
        attempt: &str,
    ) -> AppResult<bool> {
        let now = Timestamp::now();
        let failures: Vec<(String, Timestamp)> = self
            .mfa_store()
            .second_step_failures(org, user, mfa::failures_since(now))
            .await
            .or_app(Resource::User)?
            .into_iter()
            .map(|(a, at)| (attempt_of(&a).to_owned(), at))
            .collect();
        Ok(mfa::attempt_ended(&failures, attempt))
    }

    /// The second step of `user`'s sign-in `attempt` with `entered`: a TOTP
    /// code or a recovery code, under D56's throttles.
    pub async fn pass_second_step(
        &self,
        org: &OrgId,
        user: &User,
        attempt: &str,
        entered: &str,
        amr_before: &[String],
        request: Option<&gatehouse_domain::event::RequestRef>,
    ) -> Result<Passed, SecondStepError> {
        let passed = self
            .check_second_step(org, user, attempt, entered, amr_before, request)
            .await;
        // D58: a failed second step is a failed sign-in, with its reason.
        let reason = match &passed {
            Err(SecondStepError::Wrong) => Some(gatehouse_domain::audit::SignInFailure::MfaFailed),
            Err(SecondStepError::Blocked | SecondStepError::AttemptEnded) => {
                Some(gatehouse_domain::audit::SignInFailure::MfaThrottled)
            }
            _ => None,
        };
        if let Some(reason) = reason {
            self.record_sign_in_failure(org, reason, Some(&user.id), None, None, request)
                .await;
        }
        passed
    }

    async fn check_second_step(
        &self,
        org: &OrgId,
        user: &User,
        attempt: &str,
        entered: &str,
        amr_before: &[String],
        request: Option<&gatehouse_domain::event::RequestRef>,
    ) -> Result<Passed, SecondStepError> {
        let now = Timestamp::now();
        let store = self.mfa_store();
        if user.status != UserStatus::Active {
            return Err(SecondStepError::AttemptEnded);
        }
        let recovery = mfa::canonical_recovery_code(entered).is_some();
        // Each try is recorded as a wrong code *before* the code is
        // checked (and forgotten when it was right), so tries sent in
        // parallel see each other: no more than five codes are ever
        // checked in one attempt, nor past the block (D56).
        let reservation = format!("{attempt}.{}", gatehouse_domain::random::base62(64));
        store
            .record_second_step_failure(org, &user.id, &reservation, now)
            .await
            .or_app(Resource::User)?;
        let failures: Vec<(String, Timestamp)> = store
            .second_step_failures(org, &user.id, mfa::failures_since(now))
            .await
            .or_app(Resource::User)?
            .into_iter()
            .map(|(a, at)| {
                let named = attempt_of(&a).to_owned();
                ((a == reservation).then_some(()), (named, at))
            })
            .filter_map(|(own, f)| own.is_none().then_some(f))
            .collect();
        // Refused before its code is checked: the try is not a wrong code.
        let refused = mfa::attempt_ended(&failures, attempt)
            .then_some(SecondStepError::AttemptEnded)
            // D56: recovery codes are accepted during the block.
            .or_else(|| {
                (!recovery && mfa::blocked(&failures, now)).then_some(SecondStepError::Blocked)
            });
        if let Some(refused) = refused {
            store
                .forget_second_step_failure(org, &user.id, &reservation)
                .await
                .or_app(Resource::User)?;
            return Err(refused);
        }
        let amr = mfa::amr_with_otp(amr_before);
        let right = if recovery {
            self.spend_recovery_code(org, user, entered, now, request)
                .await?
        } else {
            self.accept_totp(org, user, entered, now).await?
        };
        if let Some(recovery_left) = right {
            store
                .forget_second_step_failure(org, &user.id, &reservation)
                .await
                .or_app(Resource::User)?;
            return Ok(Passed {
                amr,
                recovery_left: recovery.then_some(recovery_left),
            });
        }
        let mut after = failures;
        after.push((attempt.to_owned(), now));
        if mfa::attempt_ended(&after, attempt) {
            Err(SecondStepError::AttemptEnded)
        } else if mfa::blocked(&after, now) && !recovery {
            Err(SecondStepError::Blocked)
        } else {
            Err(SecondStepError::Wrong)
        }
    }

    /// Spends `entered` as a recovery code of `user`, e-mailing them: the
    /// codes left, or `None` when it is not an unused code of theirs.
    async fn spend_recovery_code(
        &self,
        org: &OrgId,
        user: &User,
        entered: &str,
        now: Timestamp,
        request: Option<&gatehouse_domain::event::RequestRef>,
    ) -> Result<Option<u32>, SecondStepError> {
        let key = self.recovery_key().await?;
        let Some(digest) = totp::recovery_digest(&key, entered) else {
            return Ok(None);
        };
        let mail = self.factor_mail(
            user,
            "A recovery code was used for your Gatehouse account",
            "One of this account's recovery codes was used to sign in. Each code works once; make a new set on the account page when few are left.",
        );
        // D58: `user.recovery_code_used`, written with the code's spending.
        let used = gatehouse_domain::audit::security(
            "user.recovery_code_used",
            Some(gatehouse_domain::event::Actor::User {
                user: user.id.clone(),
                client: None,
            }),
            Some((
                gatehouse_domain::audit::TargetType::User,
                user.id.as_str().to_owned(),
            )),
            request,
            now,
        );
        let fx = [Effect::Mail(Box::new(mail)), Effect::Audit(Box::new(used))];
        Ok(self
            .mfa_store()
            .use_recovery_code(org, &user.id, &digest, now, &fx)
            .await
            .or_app(Resource::User)?)
    }

    /// Accepts `entered` as the code of `user`'s authenticator app under
    /// the replay rule: `Some(0)` when right.
    async fn accept_totp(
        &self,
        org: &OrgId,
        user: &User,
        entered: &str,
        now: Timestamp,
    ) -> Result<Option<u32>, SecondStepError> {
        let store = self.mfa_store();
        let factors = store.factors(org, &user.id).await.or_app(Resource::User)?;
        let Some(t) = &factors.totp else {
            return Ok(None);
        };
        let secret = self
            .sealer()?
            .open_totp_secret(org, &user.id, &t.factor.id, &t.sealed_secret)
            .ok_or_else(|| {
                AppError::Internal("a TOTP seed does not open under the master key".into())
            })?;
        let Some(step) = totp::verify(&secret, entered, now, Some(t.last_step)) else {
            return Ok(None);
        };
        let accepted = store
            .accept_totp_step(org, &user.id, &t.factor.id, step, now)
            .await
            .or_app(Resource::User)?;
        Ok(accepted.then_some(0))
    }

    /// A passed step-up of `session` (D56): its `amr` raised, and its
    /// `auth_time` now when `authenticated` (a code of a factor held
    /// before), else kept (an enrolment authenticates nobody).
    pub async fn step_up(
        &self,
        session: &Session,
        amr: &[String],
        authenticated: bool,
    ) -> Result<Session, StoreError> {
        let at = if authenticated {
            Timestamp::now()
        } else {
            session.auth_time
        };
        self.mfa_store()
            .step_up_session(&session.org, &session.id, amr, at)
            .await?;
        Ok(Session {
            amr: amr.to_vec(),
            auth_time: at,
            ..session.clone()
        })
    }
}

/// The name the recovery-code key is stored under.
use gatehouse_auth::keys::aad::RECOVERY_KEY_NAME;

/// The attempt a recorded try belongs to (a try is recorded as
/// `<attempt>.<random>`, so parallel tries of one attempt are apart).
fn attempt_of(recorded: &str) -> &str {
    recorded.split_once('.').map_or(recorded, |(n, _)| n)
}
