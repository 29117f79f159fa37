//! D56: what a browser carries between a password and its second step (the
//! pending sign-in, sealed in a cookie), a TOTP enrolment waiting for its
//! confirming code (sealed in its form), and the secrets kept under the
//! master key: TOTP seeds and the recovery-code key (D3 revised).
//!
//! Sealing is AES-256-GCM under the master key with a purpose as the
//! associated data, like the dashboard's choices (D48 continued): the
//! browser can neither read nor forge them. What must be spent once (an
//! attempt's wrong codes) is counted in storage, not in the seal.

use gatehouse_domain::{MfaId, OrgId, SessionId, Timestamp, UserId};
use serde::{Deserialize, Serialize};

use crate::grants::AuthService;

const PENDING_PURPOSE: &[u8] = b"gatehouse second step v1";
const ENROL_PURPOSE: &[u8] = b"gatehouse totp enrolment v1";
use crate::keys::aad::RECOVERY_KEY as RECOVERY_KEY_PURPOSE;

/// How long a password stays good for its second step, and an enrolment
/// for its confirming code.
pub const PENDING_TTL_SECS: i64 = 600;

/// A password that was right, waiting for the second factor (or the
/// enrolment step), or a session waiting for its step-up.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct PendingSignIn {
    pub org: OrgId,
    pub user: UserId,
    /// Names the attempt whose wrong codes count toward its five.
    pub attempt: String,
    /// A step-up of this browser session, instead of a new sign-in.
    pub session: Option<SessionId>,
    /// D56: a step-up to `phr`, which only a passkey meets (a code does
    /// not pass it).
    #[serde(default)]
    pub passkey_only: bool,
    /// Unix seconds.
    pub exp: i64,
}

impl PendingSignIn {
    /// A new attempt after a password; a step-up's attempt is named by its
    /// session, so asking again for the same session gains no new five
    /// codes (D56: after five, the password is asked again).
    pub fn new(org: &OrgId, user: &UserId, session: Option<&SessionId>) -> Self {
        let attempt = match session {
            Some(s) => format!("step-up-{s}"),
            None => gatehouse_domain::random::base62(96),
        };
        Self {
            org: org.clone(),
            user: user.clone(),
            attempt,
            session: session.cloned(),
            passkey_only: false,
            exp: Timestamp::now().unix_seconds() + PENDING_TTL_SECS,
        }
    }
}

/// A TOTP secret shown to a person, waiting for the code that confirms it.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct PendingTotp {
    pub org: OrgId,
    pub user: UserId,
    pub secret: Vec<u8>,
    pub exp: i64,
}

impl AuthService {
    pub fn seal_pending(&self, p: &PendingSignIn) -> String {
        self.seal(PENDING_PURPOSE, p)
    }

    /// The pending sign-in of a cookie, when it is ours and not expired.
    pub fn open_pending(&self, sealed: &str) -> Option<PendingSignIn> {
        self.unseal::<PendingSignIn>(PENDING_PURPOSE, sealed)
            .filter(|p| p.exp > Timestamp::now().unix_seconds())
    }

    pub fn seal_enrolment(&self, p: &PendingTotp) -> String {
        self.seal(ENROL_PURPOSE, p)
    }

    /// The enrolment of a form, when it is ours, for `user` of `org`, and
    /// not expired.
    pub fn open_enrolment(&self, sealed: &str, org: &OrgId, user: &UserId) -> Option<PendingTotp> {
        self.unseal::<PendingTotp>(ENROL_PURPOSE, sealed)
            .filter(|p| p.exp > Timestamp::now().unix_seconds() && &p.org == org && &p.user == user)
    }

    /// A TOTP seed as stored (D3 revised): encrypted under the master key,
    /// bound to its factor.
    pub fn seal_totp_secret(
        &self,
        org: &OrgId,
        user: &UserId,
        id: &MfaId,
        secret: &[u8],
    ) -> Vec<u8> {
        self.keys()
            .master()
            .encrypt(secret, &totp_aad(org, user, id))
    }

    pub fn open_totp_secret(
        &self,
        org: &OrgId,
        user: &UserId,
        id: &MfaId,
        sealed: &[u8],
    ) -> Option<Vec<u8>> {
        self.keys()
            .master()
            .decrypt(sealed, &totp_aad(org, user, id))
    }

    /// The recovery-code key as stored (D3 revised).
    pub fn seal_recovery_key(&self, key: &[u8; 32]) -> Vec<u8> {
        self.keys().master().encrypt(key, RECOVERY_KEY_PURPOSE)
    }

    pub fn open_recovery_key(&self, sealed: &[u8]) -> Option<[u8; 32]> {
        let plain = self.keys().master().decrypt(sealed, RECOVERY_KEY_PURPOSE)?;
        plain.try_into().ok()
    }

    /// D58: the audit log's identifier key, sealed under the master key.
    pub fn seal_audit_key(&self, key: &[u8; 32]) -> Vec<u8> {
        self.keys()
            .master()
            .encrypt(key, crate::keys::aad::AUDIT_IDENTIFIER_KEY)
    }

    pub fn open_audit_key(&self, sealed: &[u8]) -> Option<[u8; 32]> {
        let plain = self
            .keys()
            .master()
            .decrypt(sealed, crate::keys::aad::AUDIT_IDENTIFIER_KEY)?;
        plain.try_into().ok()
    }
}

fn totp_aad(org: &OrgId, user: &UserId, id: &MfaId) -> Vec<u8> {
    crate::keys::aad::totp_seed(org.as_str(), user.as_str(), id.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pending_sign_in_is_unique_and_expires_later() {
        let (o, u) = (OrgId::generate(), UserId::generate());
        let a = PendingSignIn::new(&o, &u, None);
        let b = PendingSignIn::new(&o, &u, None);
        assert_ne!(a.attempt, b.attempt);
        let s = SessionId::generate();
        assert_eq!(
            PendingSignIn::new(&o, &u, Some(&s)).attempt,
            PendingSignIn::new(&o, &u, Some(&s)).attempt,
            "a step-up's attempt is its session's"
        );
        assert!(a.exp > Timestamp::now().unix_seconds());
    }
}
