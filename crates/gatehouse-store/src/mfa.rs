//! Second factors (D56): TOTP factors, recovery codes, the second step's
//! wrong codes, the organization's policy and each person's deadline, and
//! the step-up of a browser session.

use async_trait::async_trait;
use gatehouse_domain::effect::Effect;
use gatehouse_domain::event::Teller;
use gatehouse_domain::mfa::{Factors, PasskeyFactor, SecurityPolicy};
use gatehouse_domain::{MfaId, OrgId, SessionId, Timestamp, UserId};

use crate::StoreResult;

/// Second factors and the policy (D56). Every method takes the
/// organization (D2).
#[async_trait]
pub trait MfaStore: Send + Sync {
    /// `user`'s factors: the TOTP factor (its sealed seed and last accepted
    /// step), the passkeys by creation, and how many recovery codes remain.
    async fn factors(&self, org: &OrgId, user: &UserId) -> StoreResult<Factors>;
    /// Applies a second-factor change's `effects` (`effect::of_totp_enrolment`,
    /// `of_factor_removal`, `of_mfa_reset`, `of_policy_change`, recovery
    /// codes) in one transaction; `tell` is the change's teller.
    async fn write_mfa(
        &self,
        org: &OrgId,
        effects: &[Effect],
        now: Timestamp,
        tell: &Teller,
    ) -> StoreResult<()>;
    /// D56's replay rule, atomically on every node: records `step` as the
    /// TOTP factor `id`'s last accepted step (and `now` as its last use)
    /// when it is after the one stored. `false`: refused (a replay, or the
    /// factor is gone).
    async fn accept_totp_step(
        &self,
        org: &OrgId,
        user: &UserId,
        id: &MfaId,
        step: u64,
        now: Timestamp,
    ) -> StoreResult<bool>;
    /// Spends the unused recovery code of `user` with `digest`, with
    /// `effects` (the e-mail of its use), in one transaction: the codes
    /// left, or `None` when no unused code has that digest.
    async fn use_recovery_code(
        &self,
        org: &OrgId,
        user: &UserId,
        digest: &[u8; 32],
        now: Timestamp,
        effects: &[Effect],
    ) -> StoreResult<Option<u32>>;
    /// A wrong second-step code for `user`, in sign-in `attempt`.
    async fn record_second_step_failure(
        &self,
        org: &OrgId,
        user: &UserId,
        attempt: &str,
        at: Timestamp,
    ) -> StoreResult<()>;
    /// Forgets the wrong code recorded as `attempt` (a reservation of the
    /// second step that turned out right).
    async fn forget_second_step_failure(
        &self,
        org: &OrgId,
        user: &UserId,
        attempt: &str,
    ) -> StoreResult<()>;
    /// `user`'s wrong codes since `since`, each with its attempt.
    async fn second_step_failures(
        &self,
        org: &OrgId,
        user: &UserId,
        since: Timestamp,
    ) -> StoreResult<Vec<(String, Timestamp)>>;
    /// The organization's policy (the default one when none was set).
    async fn security_policy(&self, org: &OrgId) -> StoreResult<SecurityPolicy>;
    /// `user`'s deadline under the policy (D56): the one set at their
    /// first sign-in under it, or, when none is set, `candidate` (set now,
    /// with `now` as its start). Never extended.
    async fn mfa_deadline(
        &self,
        org: &OrgId,
        user: &UserId,
        candidate: Timestamp,
        now: Timestamp,
    ) -> StoreResult<Timestamp>;
    /// A step-up (D56): the session's `amr` becomes `amr` and its
    /// `auth_time` `at`.
    async fn step_up_session(
        &self,
        org: &OrgId,
        session: &SessionId,
        amr: &[String],
        at: Timestamp,
    ) -> StoreResult<()>;
    /// The passkey with `credential_id`, with the organization and person
    /// it belongs to: the look-up that establishes the tenant of a
    /// passkey sign-in (D56, like the other `resolve_*`).
    async fn resolve_passkey(
        &self,
        credential_id: &[u8],
    ) -> StoreResult<Option<(OrgId, UserId, PasskeyFactor)>>;
    /// `user`'s passkey user handle (D56), once their first passkey gave
    /// them one.
    async fn passkey_handle(&self, org: &OrgId, user: &UserId) -> StoreResult<Option<Vec<u8>>>;
    /// D56's counter rule and the last use, atomically on every node: the
    /// passkey `id`'s counter becomes `count` (and its last use `now`) when
    /// it still is `stored`. `false`: another assertion got there first (a
    /// clone or a replay), or the passkey is gone.
    async fn accept_passkey_assertion(
        &self,
        org: &OrgId,
        user: &UserId,
        id: &MfaId,
        stored: u32,
        count: u32,
        now: Timestamp,
    ) -> StoreResult<bool>;
    /// A key kept sealed under the master key (D3 revised: the
    /// recovery-code key): the stored value, storing `sealed` first when
    /// there is none (the first writer wins on every node).
    async fn sealed_key(&self, name: &str, sealed: &[u8]) -> StoreResult<Vec<u8>>;
}
