//! Passkeys (D56): registration on the account page. The ceremonies are
//! `gatehouse_auth::passkeys`'; this module adds the person, the limit,
//! storage and what a registration tells.
//!
//! Work in progress (branch `passkeys`): the second step with a passkey and
//! passwordless sign-in come next.

use gatehouse_auth::passkeys::{PasskeyError, PendingPasskey};
use gatehouse_domain::effect;
use gatehouse_domain::event::Origin;
use gatehouse_domain::mfa::{self, Factor, FactorKind, PasskeyFactor};
use gatehouse_domain::{MfaId, OrgId, Timestamp, User};
use gatehouse_store::StoreError;

use crate::error::{AppError, OrApp};
use crate::mfa::MfaError;
use crate::{App, Resource};

/// A registration offered to the browser: the options for
/// `navigator.credentials.create` and the sealed state for the form.
pub struct PasskeyOffer {
    pub options: serde_json::Value,
    pub sealed: String,
}

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

impl From<MfaError> for PasskeyRegistrationError {
    fn from(e: MfaError) -> Self {
        match e {
            MfaError::Failed(e) => Self::Failed(e),
            e => Self::Failed(AppError::Internal(e.to_string())),
        }
    }
}

impl App {
    /// Offers a registration to `user` (D56: a discoverable credential,
    /// user verification preferred, attestation none, none already theirs;
    /// at most ten).
    pub async fn begin_passkey(
        &self,
        org: &OrgId,
        user: &User,
    ) -> Result<PasskeyOffer, PasskeyRegistrationError> {
        let auth = self
            .auth()
            .ok_or_else(|| AppError::Internal("passkeys without the serving state".into()))?;
        let passkeys = auth
            .passkeys()
            .map_err(|why| PasskeyRegistrationError::Unavailable(why.to_owned()))?;
        let factors = self.mfa_of(org, &user.id).await?;
        if !factors.passkey_room() {
            return Err(PasskeyRegistrationError::TooMany);
        }
        let stored = mfa_store(self)
            .passkey_handle(org, &user.id)
            .await
            .or_app(Resource::User)?;
        let new_handle = stored.is_none();
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
            new_handle,
            state,
            exp: Timestamp::now().unix_seconds() + gatehouse_auth::second_step::PENDING_TTL_SECS,
        });
        Ok(PasskeyOffer { options, sealed })
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
        let auth = self
            .auth()
            .ok_or_else(|| AppError::Internal("passkeys without the serving state".into()))?;
        let passkeys = auth
            .passkeys()
            .map_err(|why| PasskeyRegistrationError::Unavailable(why.to_owned()))?;
        let pending = auth
            .open_passkey_registration(sealed, org, &user.id)
            .ok_or(PasskeyRegistrationError::Expired)?;
        let registered = passkeys.finish_registration(answer, &pending.state)?;
        // The limit again: two registrations may have been offered at once.
        if !self.mfa_of(org, &user.id).await?.passkey_room() {
            return Err(PasskeyRegistrationError::TooMany);
        }
        let now = Timestamp::now();
        let name = name.trim();
        let factor = Factor {
            id: MfaId::generate(),
            kind: FactorKind::Passkey,
            name: if name.is_empty() {
                "Passkey".to_owned()
            } else {
                name.chars().take(64).collect()
            },
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
        let fx = effect::of_passkey_registration(
            &tell,
            &user.id,
            passkey,
            pending.new_handle.then_some(pending.handle),
            &mail,
        );
        match mfa_store(self).write_mfa(org, &fx, now, &tell).await {
            Ok(()) => Ok(factor),
            Err(StoreError::Duplicate(_)) => Err(PasskeyRegistrationError::Duplicate),
            Err(e) => Err(AppError::store(e, Resource::User).into()),
        }
    }
}

/// This area's view of storage: the `MfaStore` trait only (issue 25).
fn mfa_store(app: &App) -> &dyn gatehouse_store::MfaStore {
    app.0.store.as_ref()
}
