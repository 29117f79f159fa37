//! Passkeys (D56): the WebAuthn ceremonies, with `webauthn-rs-core`.
//!
//! Not the high-level `webauthn-rs`: it takes a 16-byte UUID as the user
//! handle (D56: 32 random bytes), always requires user verification (D56:
//! `preferred` at registration and for a second factor) and asks for no
//! resident key (D56: discoverable). The core crate lets each be set; this
//! module is the one place that sets them. Ceremony state is returned as
//! bytes for the caller to seal and spend once; credentials as bytes for
//! storage (opaque above this module).

use std::time::Duration;

use webauthn_rs_core::WebauthnCore;
use webauthn_rs_core::error::WebauthnError;
use webauthn_rs_core::proto::{
    AttestationConveyancePreference, AuthenticationState, Credential, PublicKeyCredential,
    RegisterPublicKeyCredential, RegistrationState, RequestRegistrationExtensions,
    UserVerificationPolicy,
};

/// How long a ceremony waits for the authenticator.
const TIMEOUT: Duration = Duration::from_secs(300);

/// Why a ceremony failed; every one reads to the person as "that did not
/// work" (the page says which step to retry).
#[derive(Debug, thiserror::Error)]
pub enum PasskeyError {
    #[error("the browser's answer is not a WebAuthn credential")]
    Malformed,
    #[error("the authenticator made no discoverable credential (resident key)")]
    NotDiscoverable,
    /// D56: a counter not greater than the stored one, where either is
    /// non-zero: a possibly cloned authenticator (audited as `sign_count`).
    #[error("the signature counter did not increase: a possibly cloned authenticator")]
    SignCount,
    /// A passwordless sign-in without user verification (D56: the page
    /// then asks for the password).
    #[error("the authenticator did not verify the person")]
    NotVerified,
    #[error("the WebAuthn ceremony failed: {0}")]
    Ceremony(String),
}

impl From<WebauthnError> for PasskeyError {
    fn from(e: WebauthnError) -> Self {
        match e {
            WebauthnError::CredentialPossibleCompromise => Self::SignCount,
            WebauthnError::UserNotVerified => Self::NotVerified,
            e => Self::Ceremony(e.to_string()),
        }
    }
}

/// A registered passkey, for storage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Registered {
    pub credential_id: Vec<u8>,
    /// The credential as this module reads it back.
    pub credential: Vec<u8>,
    pub sign_count: u32,
}

/// A checked assertion.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Asserted {
    pub user_verified: bool,
    /// The counter the authenticator reported (to store).
    pub sign_count: u32,
}

/// The relying party: the host of `public_url` as its id, `public_url` as
/// the one origin.
pub struct Passkeys {
    core: WebauthnCore,
}

impl std::fmt::Debug for Passkeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Passkeys(…)")
    }
}

impl Passkeys {
    /// The relying party of `public_url`; `Err` with the reason when
    /// passkeys cannot be offered there (D56: an IP address as the host).
    pub fn new(public_url: &str) -> Result<Self, String> {
        let url = url::Url::parse(public_url).map_err(|e| format!("the public URL: {e}"))?;
        let host = url
            .host_str()
            .ok_or_else(|| "the public URL has no host".to_owned())?;
        if let Some(why) = gatehouse_domain::mfa::passkeys_unavailable(host) {
            return Err(why.to_owned());
        }
        let origin = url::Url::parse(&url.origin().ascii_serialization())
            .map_err(|e| format!("the public URL's origin: {e}"))?;
        Ok(Self {
            core: WebauthnCore::new_unsafe_experts_only(
                "Gatehouse",
                host,
                vec![origin],
                TIMEOUT,
                None,
                None,
            ),
        })
    }

    /// Starts a registration (D56: discoverable, user verification
    /// `preferred`, attestation `none`, none of `existing` again): the
    /// options for `navigator.credentials.create` (JSON, the `publicKey`
    /// member) and the state to seal.
    pub fn start_registration(
        &self,
        handle: &[u8],
        email: &str,
        display_name: &str,
        existing: &[Vec<u8>],
    ) -> Result<(serde_json::Value, Vec<u8>), PasskeyError> {
        let builder = self
            .core
            .new_challenge_register_builder(handle, email, display_name)?
            .attestation(AttestationConveyancePreference::None)
            .user_verification_policy(UserVerificationPolicy::Preferred)
            .require_resident_key(true)
            .exclude_credentials(Some(existing.to_vec()))
            .extensions(Some(RequestRegistrationExtensions {
                cred_protect: None,
                uvm: None,
                cred_props: Some(true),
                min_pin_length: None,
                hmac_create_secret: None,
            }));
        let (options, state) = self.core.generate_challenge_register(builder)?;
        let options =
            serde_json::to_value(options.public_key).map_err(|_| PasskeyError::Malformed)?;
        let state = serde_json::to_vec(&state).map_err(|_| PasskeyError::Malformed)?;
        Ok((options, state))
    }

    /// Finishes a registration with the browser's answer (the JSON of
    /// `PublicKeyCredential.toJSON()`).
    pub fn finish_registration(
        &self,
        answer: &str,
        state: &[u8],
    ) -> Result<Registered, PasskeyError> {
        let reg: RegisterPublicKeyCredential =
            serde_json::from_str(answer).map_err(|_| PasskeyError::Malformed)?;
        let state: RegistrationState =
            serde_json::from_slice(state).map_err(|_| PasskeyError::Malformed)?;
        // The library asks for a resident key but does not check the
        // answer: the browser's `credProps` says whether it made one.
        if reg.extensions.cred_props.as_ref().and_then(|p| p.rk) == Some(false) {
            return Err(PasskeyError::NotDiscoverable);
        }
        let cred = self.core.register_credential(&reg, &state, None)?;
        Ok(Registered {
            credential_id: cred.cred_id.clone(),
            sign_count: cred.counter,
            credential: serde_json::to_vec(&cred).map_err(|_| PasskeyError::Malformed)?,
        })
    }

    /// Starts an assertion: for the second factor, of `credentials` (the
    /// person's) with user verification `preferred`; for a passwordless
    /// sign-in (`credentials` empty: any discoverable credential) also
    /// `preferred`, the result's flag deciding (D56: without it the page
    /// asks for the password). The options for `navigator.credentials.get`
    /// and the state to seal.
    pub fn start_assertion(
        &self,
        credentials: &[&[u8]],
    ) -> Result<(serde_json::Value, Vec<u8>), PasskeyError> {
        let creds = credentials
            .iter()
            .map(|c| {
                serde_json::from_slice::<Credential>(c)
                    .map(without_required_verification)
                    .map_err(|_| PasskeyError::Malformed)
            })
            .collect::<Result<Vec<_>, _>>()?;
        let builder = self
            .core
            .new_challenge_authenticate_builder(creds, Some(UserVerificationPolicy::Preferred))?;
        let (options, mut state) = self.core.generate_challenge_authenticate(builder)?;
        // The state need not carry the credentials: the finish names one.
        state.set_allowed_credentials(Vec::new());
        let options =
            serde_json::to_value(options.public_key).map_err(|_| PasskeyError::Malformed)?;
        let state = serde_json::to_vec(&state).map_err(|_| PasskeyError::Malformed)?;
        Ok((options, state))
    }

    /// The browser's assertion, parsed: the credential id and the user
    /// handle it names, to find the stored passkey with.
    pub fn parse_assertion(answer: &str) -> Result<Assertion, PasskeyError> {
        serde_json::from_str(answer)
            .map(Assertion)
            .map_err(|_| PasskeyError::Malformed)
    }

    /// Checks `assertion` against `state` and the stored `credential`
    /// (`sign_count` the counter stored with it). `passwordless`: user
    /// verification is required.
    pub fn finish_assertion(
        &self,
        assertion: &Assertion,
        state: &[u8],
        credential: &[u8],
        sign_count: u32,
        passwordless: bool,
    ) -> Result<Asserted, PasskeyError> {
        let state: AuthenticationState =
            serde_json::from_slice(state).map_err(|_| PasskeyError::Malformed)?;
        let mut cred: Credential =
            serde_json::from_slice(credential).map_err(|_| PasskeyError::Malformed)?;
        cred.counter = sign_count;
        let cred = without_required_verification(cred);
        let res = self
            .core
            .authenticate_single_credential(&assertion.0, &state, &cred)?;
        if !gatehouse_domain::mfa::sign_count_ok(sign_count, res.counter()) {
            return Err(PasskeyError::SignCount);
        }
        if passwordless && !res.user_verified() {
            return Err(PasskeyError::NotVerified);
        }
        Ok(Asserted {
            user_verified: res.user_verified(),
            sign_count: res.counter(),
        })
    }
}

/// A passkey registration waiting for the browser's answer (sealed in the
/// page's form): the ceremony state and the user handle it registers (the
/// person's, or a new one that becomes theirs with this passkey).
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize, PartialEq, Eq)]
pub struct PendingPasskey {
    pub org: gatehouse_domain::OrgId,
    pub user: gatehouse_domain::UserId,
    pub handle: Vec<u8>,
    pub state: Vec<u8>,
    pub exp: i64,
}

const REGISTRATION_PURPOSE: &[u8] = b"gatehouse passkey registration v1";

impl crate::AuthService {
    pub fn seal_passkey_registration(&self, p: &PendingPasskey) -> String {
        self.seal(REGISTRATION_PURPOSE, p)
    }

    /// The registration of a form, when it is ours, for `user` of `org`,
    /// and not expired. (Spent once by the credential id's uniqueness: the
    /// same answer cannot be stored twice.)
    pub fn open_passkey_registration(
        &self,
        sealed: &str,
        org: &gatehouse_domain::OrgId,
        user: &gatehouse_domain::UserId,
    ) -> Option<PendingPasskey> {
        self.unseal::<PendingPasskey>(REGISTRATION_PURPOSE, sealed)
            .filter(|p| {
                p.exp > gatehouse_domain::Timestamp::now().unix_seconds()
                    && &p.org == org
                    && &p.user == user
            })
    }
}

/// An assertion offered to a browser, waiting for its answer (sealed in
/// the page's form): the ceremony state, a nonce spent once in storage
/// (a counter that stays 0, as many passkeys keep it, cannot stop a
/// replay), and for a second step the person it is for.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize, PartialEq, Eq)]
pub struct PendingAssertion {
    /// `None`: a passwordless sign-in, which any discoverable credential
    /// may answer.
    pub person: Option<(gatehouse_domain::OrgId, gatehouse_domain::UserId)>,
    pub nonce: String,
    pub state: Vec<u8>,
    pub exp: i64,
}

const ASSERTION_PURPOSE: &[u8] = b"gatehouse passkey assertion v1";

impl PendingAssertion {
    /// A fresh assertion's pending state, live for `ttl_secs`.
    pub fn new(
        person: Option<(gatehouse_domain::OrgId, gatehouse_domain::UserId)>,
        state: Vec<u8>,
        ttl_secs: i64,
    ) -> Self {
        Self {
            person,
            nonce: gatehouse_domain::random::base62(128),
            state,
            exp: gatehouse_domain::Timestamp::now().unix_seconds() + ttl_secs,
        }
    }
}

impl crate::AuthService {
    pub fn seal_passkey_assertion(&self, p: &PendingAssertion) -> String {
        self.seal(ASSERTION_PURPOSE, p)
    }

    /// The assertion of a form, when it is ours and not expired (the
    /// caller spends its nonce).
    pub fn open_passkey_assertion(&self, sealed: &str) -> Option<PendingAssertion> {
        self.unseal::<PendingAssertion>(ASSERTION_PURPOSE, sealed)
            .filter(|p| p.exp > gatehouse_domain::Timestamp::now().unix_seconds())
    }
}

/// A browser's assertion.
pub struct Assertion(PublicKeyCredential);

impl Assertion {
    pub fn credential_id(&self) -> &[u8] {
        self.0.get_credential_id()
    }

    /// The user handle (present in a discoverable sign-in).
    pub fn user_handle(&self) -> Option<&[u8]> {
        self.0.get_user_unique_id()
    }
}

/// D56: a passkey serves as a second factor with or without user
/// verification, even when it verified the person at registration (the
/// library would otherwise demand it ever after); a passwordless sign-in
/// checks the flag itself.
fn without_required_verification(mut cred: Credential) -> Credential {
    cred.user_verified = false;
    cred.registration_policy = UserVerificationPolicy::Preferred;
    cred
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn d56_no_passkeys_on_an_ip_host() {
        assert!(Passkeys::new("https://127.0.0.1:8443").is_err());
        assert!(Passkeys::new("https://[::1]").is_err());
        assert!(Passkeys::new("https://localhost:8443").is_ok());
        assert!(Passkeys::new("https://auth.example.com").is_ok());
    }

    #[test]
    fn d56_registration_asks_for_a_discoverable_credential_preferring_verification() {
        let p = Passkeys::new("https://auth.example.com").unwrap();
        let handle = [7u8; 32];
        let (options, state) = p
            .start_registration(&handle, "ada@example.com", "Ada (Acme)", &[vec![1; 16]])
            .unwrap();
        assert_eq!(options["rp"]["id"], "auth.example.com");
        assert_eq!(options["user"]["name"], "ada@example.com");
        assert_eq!(options["user"]["displayName"], "Ada (Acme)");
        use base64::Engine;
        let id = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(options["user"]["id"].as_str().unwrap())
            .unwrap();
        assert_eq!(id, handle, "the 32-byte handle, never the e-mail");
        assert_eq!(options["attestation"], "none");
        let sel = &options["authenticatorSelection"];
        assert_eq!(sel["residentKey"], "required");
        assert_eq!(sel["userVerification"], "preferred");
        assert_eq!(options["excludeCredentials"].as_array().unwrap().len(), 1);
        assert_eq!(options["extensions"]["credProps"], true);
        assert!(
            options["extensions"]
                .get("credentialProtectionPolicy")
                .is_none(),
            "no credProtect: a second factor without verification must work"
        );
        assert!(!state.is_empty());
        // A garbled answer is refused, not a panic.
        assert!(matches!(
            p.finish_registration("{}", &state),
            Err(PasskeyError::Malformed)
        ));
    }

    #[test]
    fn d56_a_passwordless_assertion_names_no_credential_and_prefers_verification() {
        let p = Passkeys::new("https://auth.example.com").unwrap();
        let (options, state) = p.start_assertion(&[]).unwrap();
        assert_eq!(options["rpId"], "auth.example.com");
        assert_eq!(options["userVerification"], "preferred");
        assert!(
            options
                .get("allowCredentials")
                .and_then(|a| a.as_array())
                .is_none_or(|a| a.is_empty())
        );
        assert!(!state.is_empty());
        assert!(Passkeys::parse_assertion("not json").is_err());
    }
}
