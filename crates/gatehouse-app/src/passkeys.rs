//! Passkeys (D56): registration on the account page, the second step with
//! a passkey, and passwordless sign-in. The ceremonies are
//! `gatehouse_auth::passkeys`'; this module adds the person, the limit,
//! the tenant, spending each assertion once, the counter across nodes,
//! storage and what a registration tells.

use gatehouse_auth::passkeys::{PasskeyError, Passkeys, PendingAssertion, PendingPasskey};
use gatehouse_domain::effect;
use gatehouse_domain::event::Origin;
use gatehouse_domain::mfa::{self, Factor, FactorKind, PasskeyFactor};
use gatehouse_domain::{MfaId, OrgId, Timestamp, User, UserId, UserStatus};
use gatehouse_store::StoreError;

use crate::error::{AppError, OrApp};
use crate::{App, Resource};

/// Why a passkey could not be registered.
#[derive(Debug, thiserror::Error)]
pub enum PasskeyRegistrationError {
    /// D56: at most ten passkeys per person.
    #[error("a person has at most {} passkeys", mfa::PASSKEYS_MAX)]
    TooMany,
    /// Passkeys are not offered at this address (an IP host).
    #[error("{0}")]
    Unavailable(String),
    /// The registration expired or is not this person's.
    #[error("the registration expired")]
    Expired,
    #[error(transparent)]
    Ceremony(#[from] PasskeyError),
    /// The credential is registered already (the same answer again).
    #[error("this passkey is registered already")]
    Duplicate,
    #[error(transparent)]
    Failed(#[from] AppError),
}

impl App {
    /// Offers a registration to `user` (D56: a discoverable credential,
    /// user verification preferred, attestation none, none already theirs;
    /// at most ten).
    pub async fn begin_passkey(
        &self,
        org: &OrgId,
        user: &User,
    ) -> Result<PasskeyChallenge, PasskeyRegistrationError> {
        let (auth, passkeys) = self.registering_party()?;
        let factors = mfa_store(self)
            .factors(org, &user.id)
            .await
            .or_app(Resource::User)?;
        if !factors.passkey_room() {
            return Err(PasskeyRegistrationError::TooMany);
        }
        let stored = mfa_store(self)
            .passkey_handle(org, &user.id)
            .await
            .or_app(Resource::User)?;
        let handle = stored.unwrap_or_else(|| {
            gatehouse_domain::random::bytes::<{ mfa::USER_HANDLE_BYTES }>().to_vec()
        });
        let org_name = self.org_name(org).await?;
        let existing: Vec<Vec<u8>> = factors
            .passkeys
            .iter()
            .map(|p| p.credential_id.clone())
            .collect();
        let (options, state) = passkeys.start_registration(
            &handle,
            user.email.as_str(),
            &mfa::passkey_display_name(user.name.as_str(), &org_name),
            &existing,
        )?;
        let sealed = auth.seal_passkey_registration(&PendingPasskey {
            org: org.clone(),
            user: user.id.clone(),
            handle,
            state,
            exp: Timestamp::now().unix_seconds() + gatehouse_auth::second_step::PENDING_TTL_SECS,
        });
        Ok(PasskeyChallenge { options, sealed })
    }

    /// Stores the passkey the browser answered with (`answer`, the JSON of
    /// `PublicKeyCredential.toJSON()`), named `name`: the person is
    /// e-mailed and `user.mfa_enrolled` is told.
    pub async fn finish_passkey(
        &self,
        org: &OrgId,
        user: &User,
        sealed: &str,
        answer: &str,
        name: &str,
        origin: &Origin,
    ) -> Result<Factor, PasskeyRegistrationError> {
        let (auth, passkeys) = self.registering_party()?;
        let pending = auth
            .open_passkey_registration(sealed, org, &user.id)
            .ok_or(PasskeyRegistrationError::Expired)?;
        let registered = passkeys.finish_registration(answer, &pending.state)?;
        // The limit again is storage's: it counts in the writing
        // transaction, so two registrations offered at once cannot both
        // pass (`LimitReached` below).
        let now = Timestamp::now();
        let factor = Factor {
            id: MfaId::generate(),
            kind: FactorKind::Passkey,
            name: mfa::passkey_name(name),
            created_at: now,
            last_used_at: None,
        };
        let passkey = PasskeyFactor {
            factor: factor.clone(),
            credential_id: registered.credential_id,
            credential: registered.credential,
            sign_count: registered.sign_count,
        };
        let mail = self.factor_mail(
            user,
            "A passkey was added to your Gatehouse account",
            "A passkey was added to this account: it signs you in, or confirms a sign-in after your password.",
        );
        let tell = self.teller(origin);
        let fx = effect::of_passkey_registration(&tell, &user.id, passkey, pending.handle, &mail);
        match mfa_store(self).write_mfa(org, &fx, now, &tell).await {
            Ok(()) => Ok(factor),
            // Another first registration gave the person their handle
            // meanwhile: this one was made for another (offer it again).
            Err(StoreError::Duplicate("passkey_handle")) => Err(PasskeyRegistrationError::Expired),
            Err(StoreError::Duplicate(_)) => Err(PasskeyRegistrationError::Duplicate),
            Err(StoreError::Rule(gatehouse_domain::DomainError::LimitReached(_))) => {
                Err(PasskeyRegistrationError::TooMany)
            }
            Err(e) => Err(AppError::store(e, Resource::User).into()),
        }
    }
}

/// A ceremony offered to the browser: the options for
/// `navigator.credentials.create` (a registration) or `.get` (an
/// assertion), and the sealed state for the form.
pub struct PasskeyChallenge {
    pub options: serde_json::Value,
    pub sealed: String,
}

/// Why a passkey did not sign the person in.
#[derive(Debug, thiserror::Error)]
pub enum PasskeySignInError {
    /// Not a passkey of an account that can sign in here, or an answer
    /// that does not check (D56: answered like a wrong password).
    #[error("the passkey is not valid here")]
    Wrong,
    /// D56: a passwordless sign-in needs user verification; the page asks
    /// for the password instead.
    #[error("the authenticator did not verify the person")]
    NotVerified,
    /// D56: the counter did not increase (a possibly cloned authenticator),
    /// or the same assertion came twice.
    #[error("the signature counter did not increase")]
    SignCount,
    /// The offer expired, or was answered already.
    #[error("the passkey request expired")]
    Expired,
    /// D56: the sign-in's attempt ended after five wrong codes: the
    /// password is asked again, whatever the factor.
    #[error("the attempt ended")]
    AttemptEnded,
    #[error(transparent)]
    Failed(#[from] AppError),
}

/// A passwordless sign-in: the account the passkey named and the `amr`.
#[derive(Debug)]
pub struct PasskeySignedIn {
    pub org: OrgId,
    pub user: User,
    pub amr: Vec<String>,
}

/// What a second step's page offers a person (D56): their passkeys (when
/// they have some and passkeys are offered here) and the code form (an
/// authenticator app's code, or a recovery code).
pub struct SecondStepOffer {
    pub passkey: Option<PasskeyChallenge>,
    pub codes: bool,
}

impl App {
    /// The relying party, when passkeys are offered at this address.
    fn relying_party(&self) -> Option<(&gatehouse_auth::AuthService, &Passkeys)> {
        let auth = self.auth()?;
        let passkeys = auth.passkeys().ok()?;
        Some((auth.as_ref(), passkeys))
    }

    /// The relying party for a registration, or why there is none.
    fn registering_party(
        &self,
    ) -> Result<(&gatehouse_auth::AuthService, &Passkeys), PasskeyRegistrationError> {
        let auth = self
            .auth()
            .ok_or_else(|| AppError::Internal("passkeys without the serving state".into()))?;
        let passkeys = auth
            .passkeys()
            .map_err(|why| PasskeyRegistrationError::Unavailable(why.to_owned()))?;
        Ok((auth.as_ref(), passkeys))
    }

    /// What the second step of `user` offers, from one read of their
    /// factors: an assertion of any of their passkeys (user verification
    /// preferred) when `passkeys_here` and they have one, and whether the
    /// code form is there.
    pub async fn second_step_offer(
        &self,
        org: &OrgId,
        user: &UserId,
        passkeys_here: bool,
    ) -> Result<SecondStepOffer, AppError> {
        let factors = mfa_store(self)
            .factors(org, user)
            .await
            .or_app(Resource::User)?;
        let codes = factors.takes_codes();
        let party = self.relying_party().filter(|_| passkeys_here);
        let Some((auth, passkeys)) = party.filter(|_| !factors.passkeys.is_empty()) else {
            return Ok(SecondStepOffer {
                passkey: None,
                codes,
            });
        };
        let credentials: Vec<&[u8]> = factors
            .passkeys
            .iter()
            .map(|p| p.credential.as_slice())
            .collect();
        let (options, state) = passkeys
            .start_assertion(&credentials)
            .map_err(|e| AppError::Internal(format!("a stored passkey does not read: {e}")))?;
        let pending = PendingAssertion::new(
            Some((org.clone(), user.clone())),
            state,
            gatehouse_auth::second_step::PENDING_TTL_SECS,
        );
        Ok(SecondStepOffer {
            passkey: Some(PasskeyChallenge {
                options,
                sealed: auth.seal_passkey_assertion(&pending),
            }),
            codes,
        })
    }

    /// The assertion a sign-in page offers beside the password (D56: any
    /// discoverable credential): `None` when passkeys are not offered here.
    pub fn passkey_sign_in_offer(&self) -> Option<PasskeyChallenge> {
        let (auth, passkeys) = self.relying_party()?;
        let (options, state) = passkeys.start_assertion(&[]).ok()?;
        let pending = PendingAssertion::new(None, state, SIGN_IN_OFFER_TTL_SECS);
        Some(PasskeyChallenge {
            options,
            sealed: auth.seal_passkey_assertion(&pending),
        })
    }

    /// The second step of `user`'s sign-in `attempt` with a passkey (D56:
    /// with or without user verification): the session's new `amr`.
    pub async fn pass_passkey_step(
        &self,
        org: &OrgId,
        user: &User,
        attempt: &str,
        sealed: &str,
        answer: &str,
        amr_before: &[String],
    ) -> Result<Vec<String>, PasskeySignInError> {
        let (auth, passkeys) = self.relying_party().ok_or(PasskeySignInError::Expired)?;
        let pending = auth
            .open_passkey_assertion(sealed)
            .filter(|p| p.person.as_ref() == Some(&(org.clone(), user.id.clone())))
            .ok_or(PasskeySignInError::Expired)?;
        if user.status != UserStatus::Active {
            return Err(PasskeySignInError::Wrong);
        }
        if self.attempt_over(org, &user.id, attempt).await? {
            return Err(PasskeySignInError::AttemptEnded);
        }
        let assertion = Passkeys::parse_assertion(answer).map_err(|_| PasskeySignInError::Wrong)?;
        let factors = mfa_store(self)
            .factors(org, &user.id)
            .await
            .or_app(Resource::User)?;
        let Some(passkey) = factors
            .passkeys
            .iter()
            .find(|p| p.credential_id == assertion.credential_id())
        else {
            return Err(PasskeySignInError::Wrong);
        };
        self.accept_assertion(
            passkeys, &pending, &assertion, org, &user.id, passkey, false,
        )
        .await?;
        Ok(mfa::amr_with_passkey(amr_before))
    }

    /// A passwordless sign-in (D56): the passkey names the account, which
    /// must be of `client_org` when the client has one (else answered like
    /// a wrong password); user verification is required. D26's password
    /// throttles play no part.
    pub async fn passkey_sign_in(
        &self,
        sealed: &str,
        answer: &str,
        client_org: Option<&OrgId>,
    ) -> Result<PasskeySignedIn, PasskeySignInError> {
        let (auth, passkeys) = self.relying_party().ok_or(PasskeySignInError::Expired)?;
        let pending = auth
            .open_passkey_assertion(sealed)
            .filter(|p| p.person.is_none())
            .ok_or(PasskeySignInError::Expired)?;
        let assertion = Passkeys::parse_assertion(answer).map_err(|_| PasskeySignInError::Wrong)?;
        let found = mfa_store(self)
            .resolve_passkey(assertion.credential_id())
            .await
            .or_app(Resource::User)?;
        let Some((org, user_id, passkey)) = found else {
            return Err(PasskeySignInError::Wrong);
        };
        if client_org.is_some_and(|c| c != &org) {
            return Err(PasskeySignInError::Wrong);
        }
        // The handle the authenticator returned must be the person's.
        let handle = mfa_store(self)
            .passkey_handle(&org, &user_id)
            .await
            .or_app(Resource::User)?;
        match (handle.as_deref(), assertion.user_handle()) {
            (Some(stored), Some(returned)) if stored == returned => {}
            _ => return Err(PasskeySignInError::Wrong),
        }
        let user = match self.get_user(&org, &user_id).await {
            Ok(u) if u.status == UserStatus::Active => u,
            Ok(_) | Err(AppError::NotFound(_)) => return Err(PasskeySignInError::Wrong),
            Err(e) => return Err(e.into()),
        };
        self.accept_assertion(
            passkeys, &pending, &assertion, &org, &user_id, &passkey, true,
        )
        .await?;
        Ok(PasskeySignedIn {
            org,
            user,
            amr: mfa::amr_with_passkey(&[]),
        })
    }

    /// Checks `assertion` against `passkey`, spends the offer once on every
    /// node, and moves the counter with its compare-and-set.
    #[allow(clippy::too_many_arguments)]
    async fn accept_assertion(
        &self,
        passkeys: &Passkeys,
        pending: &PendingAssertion,
        assertion: &gatehouse_auth::passkeys::Assertion,
        org: &OrgId,
        user: &UserId,
        passkey: &PasskeyFactor,
        passwordless: bool,
    ) -> Result<(), PasskeySignInError> {
        let checked = passkeys.finish_assertion(
            assertion,
            &pending.state,
            &passkey.credential,
            passkey.sign_count,
            passwordless,
        );
        let asserted = match checked {
            Ok(a) => a,
            Err(PasskeyError::NotVerified) => return Err(PasskeySignInError::NotVerified),
            Err(PasskeyError::SignCount) => {
                tracing::warn!(
                    org = %org, user = %user, factor = %passkey.factor.id,
                    stored = passkey.sign_count,
                    "a passkey assertion's counter did not increase: a possibly cloned authenticator"
                );
                self.record_cloned_passkey(org, user).await;
                return Err(PasskeySignInError::SignCount);
            }
            Err(_) => return Err(PasskeySignInError::Wrong),
        };
        let first = grant_store(self)
            .use_once(
                &gatehouse_auth::secrets::hash_secret(&pending.nonce),
                Timestamp::from_unix_seconds(pending.exp),
            )
            .await
            .or_app(Resource::Storage)?;
        if !first {
            return Err(PasskeySignInError::Expired);
        }
        let moved = mfa_store(self)
            .accept_passkey_assertion(
                org,
                user,
                &passkey.factor.id,
                passkey.sign_count,
                asserted.sign_count,
                Timestamp::now(),
            )
            .await
            .or_app(Resource::User)?;
        if !moved {
            // Another sign-in moved the counter first: the same reason.
            self.record_cloned_passkey(org, user).await;
            return Err(PasskeySignInError::SignCount);
        }
        Ok(())
    }
}

/// How long a sign-in page's passkey offer stays good.
const SIGN_IN_OFFER_TTL_SECS: i64 = 600;

/// This area's views of storage: passkeys are second factors (`MfaStore`);
/// an offer is spent once like the dashboard's codes (`GrantStore`).
fn mfa_store(app: &App) -> &dyn gatehouse_store::MfaStore {
    app.0.store.as_ref()
}

fn grant_store(app: &App) -> &dyn gatehouse_store::GrantStore {
    app.0.store.as_ref()
}

impl App {
    /// D58: a passkey sign-in refused for its counter (`sign_count`).
    async fn record_cloned_passkey(&self, org: &OrgId, user: &UserId) {
        self.record_sign_in_failure(
            org,
            gatehouse_domain::audit::SignInFailure::SignCount,
            Some(user),
            None,
            None,
            None,
        )
        .await;
    }
}
