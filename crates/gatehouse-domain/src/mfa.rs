//! The second factor's rules (D56) that need no cryptography: TOTP's time
//! steps and its replay rule, and recovery codes' shape (Crockford base32,
//! `XXXXX-XXXXX`) and how an entered code is read. Computing a code (HMAC)
//! is `gatehouse_auth::totp`'s; storing factors is storage's.

use crate::time::Timestamp;
use serde::Serialize;

/// RFC 6238 as D56 fixes it: 30-second steps, 6 digits (SHA-1).
pub const TOTP_PERIOD_SECS: i64 = 30;
pub const TOTP_DIGITS: u32 = 6;
/// D56: a TOTP secret has 160 bits.
pub const TOTP_SECRET_BYTES: usize = 20;

/// D56: ten recovery codes of 50 random bits each.
pub const RECOVERY_CODES: usize = 10;
pub const RECOVERY_CODE_BITS: u32 = 50;
/// D56: the account page warns when this many codes or fewer remain.
pub const RECOVERY_CODES_LOW: usize = 3;

/// The TOTP time step of `at` (RFC 6238: Unix time ÷ 30 s).
pub fn totp_step(at: Timestamp) -> u64 {
    u64::try_from(at.unix_seconds().div_euclid(TOTP_PERIOD_SECS)).unwrap_or(0)
}

/// The steps a code is checked against at step `t` (D56: T−1, T and T+1),
/// oldest first.
pub fn totp_window(t: u64) -> [u64; 3] {
    [t.saturating_sub(1), t, t + 1]
}

/// D56's replay rule: of the steps whose code matched, the one a sign-in
/// may accept — the newest, and only if it is after the last step accepted
/// for this factor (a code of a step at or before it is refused). `None`:
/// refused.
pub fn accepted_step(matched: &[u64], last_accepted: Option<u64>) -> Option<u64> {
    let newest = matched.iter().copied().max()?;
    match last_accepted {
        Some(last) if newest <= last => None,
        _ => Some(newest),
    }
}

/// Crockford's base32 alphabet (no I, L, O, U).
const CROCKFORD: &[u8; 32] = b"0123456789ABCDEFGHJKMNPQRSTVWXYZ";

/// A recovery code as shown once (D56): the low 50 bits of `bits` as ten
/// Crockford digits, `XXXXX-XXXXX`.
pub fn recovery_code(bits: u64) -> String {
    let mut digits = [0u8; 10];
    for (i, d) in digits.iter_mut().enumerate() {
        let shift = 5 * (9 - i);
        *d = CROCKFORD[((bits >> shift) & 0x1f) as usize];
    }
    let text: String = digits.iter().map(|&b| b as char).collect();
    format!("{}-{}", &text[..5], &text[5..])
}

/// A recovery code as entered, in the form its digest is taken of (the ten
/// digits, upper case, no hyphen): D56's entry ignores case, spaces and the
/// hyphen; Crockford's readings of `I`/`L` as 1 and `O` as 0 are accepted
/// too. `None` when it cannot be a code.
pub fn canonical_recovery_code(entered: &str) -> Option<String> {
    let mut out = String::with_capacity(10);
    for c in entered.chars() {
        let c = match c.to_ascii_uppercase() {
            ' ' | '-' | '\t' => continue,
            'I' | 'L' => '1',
            'O' => '0',
            c => c,
        };
        if !c.is_ascii() || !CROCKFORD.contains(&(c as u8)) {
            return None;
        }
        out.push(c);
        if out.len() > 10 {
            return None;
        }
    }
    (out.len() == 10).then_some(out)
}

// --- How a person signed in: `amr` and `acr` (D56) ---------------------

/// The authentication context classes Gatehouse achieves, in D56's order:
/// a level is met by itself or a higher one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Level {
    /// A password alone.
    Pwd,
    /// A password with TOTP or a recovery code.
    Mfa,
    /// Any sign-in that included a WebAuthn assertion (D56: `phr`).
    Phr,
}

impl Level {
    /// Every level, lowest first: discovery's `acr_values_supported`.
    pub const ALL: [Level; 3] = [Level::Pwd, Level::Mfa, Level::Phr];

    pub fn as_str(self) -> &'static str {
        match self {
            Level::Pwd => "urn:gatehouse:acr:pwd",
            Level::Mfa => "urn:gatehouse:acr:mfa",
            Level::Phr => "phr",
        }
    }

    /// A value Gatehouse supports; `None` for the others (which `acr_values`
    /// ignores, D56).
    pub fn parse(s: &str) -> Option<Self> {
        Level::ALL.into_iter().find(|l| l.as_str() == s)
    }

    /// The level an `amr` achieved: `pop` (a WebAuthn assertion) is `phr`,
    /// `mfa` without it is the second factor's level, else a password's.
    pub fn of_amr(amr: &[String]) -> Self {
        if amr.iter().any(|m| m == "pop") {
            Level::Phr
        } else if amr.iter().any(|m| m == "mfa") {
            Level::Mfa
        } else {
            Level::Pwd
        }
    }
}

/// `amr` of a password alone (D56).
pub fn amr_password() -> Vec<String> {
    vec!["pwd".to_owned()]
}

/// `amr` once a TOTP code or a recovery code was added to `before` (a
/// password's `["pwd"]` becomes `["pwd","otp","mfa"]`): RFC 8176 values,
/// each once, in D56's order.
pub fn amr_with_otp(before: &[String]) -> Vec<String> {
    amr_adding(before, &["otp", "mfa"])
}

/// How a person signed in, as a code, a chain and the tokens of both carry
/// it (D56): chains begun before D56 have none.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Authn {
    pub amr: Vec<String>,
    /// The level returned (`acr`): the highest requested level met, when one
    /// was requested and met, else the level achieved (D56).
    pub acr: Level,
}

impl Authn {
    /// The sign-in's `amr` with the level it achieved.
    pub fn achieved(amr: &[String]) -> Self {
        Self {
            amr: amr.to_vec(),
            acr: Level::of_amr(amr),
        }
    }

    /// The `amr` column as stored, in sessions' one encoding
    /// (`session::amr_to_text`); the `acr` column is `acr.as_str()`.
    pub fn amr_text(&self) -> String {
        crate::session::amr_to_text(&self.amr)
    }

    /// From the stored columns; `None` when either is absent (a code or
    /// chain from before D56) or the level is unknown.
    pub fn from_columns(amr: Option<String>, acr: Option<String>) -> Option<Self> {
        let (amr, acr) = (amr?, Level::parse(&acr?)?);
        Some(Self {
            amr: crate::session::amr_from_text(&amr),
            acr,
        })
    }
}

/// What an authorization request asks of the level (D56): `acr_values`
/// (voluntary) and an Essential `acr` of the `claims` parameter.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AcrRequest {
    /// The supported values of `acr_values`, in the request's order.
    pub voluntary: Vec<Level>,
    /// The levels an Essential `acr` accepts (`value` or `values`), of
    /// those Gatehouse supports; `Some(empty)` when none is supported.
    pub essential: Option<Vec<Level>>,
}

impl AcrRequest {
    /// The lowest level that meets the Essential request: `None` when
    /// there is none, or when it names no supported level.
    pub fn essential_floor(&self) -> Option<Level> {
        self.essential.as_ref()?.iter().copied().min()
    }

    /// Whether the Essential request cannot be met by any level at all
    /// (it names only values Gatehouse does not support).
    pub fn essential_unsupported(&self) -> bool {
        self.essential.as_ref().is_some_and(Vec::is_empty)
    }

    /// The level a sign-in should reach for this request, given the level
    /// `achieved` and the highest level the person has a factor for
    /// (`possible`): the Essential floor must be met (the caller refuses
    /// when `possible` is below it); `acr_values`' first supported value is
    /// reached when the person can, else nothing more is asked.
    pub fn target(&self, achieved: Level, possible: Level) -> Level {
        let mut target = achieved;
        if let Some(floor) = self.essential_floor() {
            target = target.max(floor);
        }
        if let Some(first) = self.voluntary.first().copied()
            && first <= possible
        {
            target = target.max(first);
        }
        target
    }

    /// The `acr` returned after a sign-in that achieved `achieved` (D56):
    /// the highest requested level met when one was requested and met,
    /// else the level achieved.
    pub fn returned(&self, achieved: Level) -> Level {
        let requested = self
            .voluntary
            .iter()
            .chain(self.essential.iter().flatten())
            .copied()
            .filter(|l| *l <= achieved)
            .max();
        requested.unwrap_or(achieved)
    }
}

// --- The organization's policy (D56) ------------------------------------

crate::user::str_enum!(MfaMode, "optional, required_for_admins, required", {
    Optional => "optional",
    RequiredForAdmins => "required_for_admins",
    Required => "required",
});

impl MfaMode {
    /// Whether the policy covers a person of `role`.
    pub fn covers(self, role: crate::Role) -> bool {
        match self {
            MfaMode::Optional => false,
            MfaMode::RequiredForAdmins => role == crate::Role::Admin,
            MfaMode::Required => true,
        }
    }
}

/// D56: `enrollment_grace_days` lies in 0–30; 7 by default.
pub const GRACE_DAYS_MAX: u32 = 30;
pub const GRACE_DAYS_DEFAULT: u32 = 7;
/// D40 (continued): the length of one grace day, `GATEHOUSE_MFA_GRACE_DAY`.
pub const GRACE_DAY_SECS: i64 = 86_400;

/// An organization's second-factor policy (D56).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SecurityPolicy {
    pub mfa: MfaMode,
    pub enrollment_grace_days: u32,
    pub updated_at: Timestamp,
}

impl SecurityPolicy {
    /// An organization's policy before anyone set one.
    pub fn default_since(created_at: Timestamp) -> Self {
        Self {
            mfa: MfaMode::Optional,
            enrollment_grace_days: GRACE_DAYS_DEFAULT,
            updated_at: created_at,
        }
    }

    /// The deadline set at a person's first sign-in under the policy, at
    /// `now`: that moment plus the grace days (D56).
    pub fn deadline_from(&self, now: Timestamp, day_secs: i64) -> Timestamp {
        now.plus_seconds(i64::from(self.enrollment_grace_days) * day_secs)
    }
}

/// What a PATCH of the policy asks (D56): either member may be absent.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PolicyPatch {
    pub mfa: Option<MfaMode>,
    pub enrollment_grace_days: Option<u32>,
}

/// How a policy change moves the deadlines already set (D56): lowering the
/// grace brings them forward (never later), raising it moves none, setting
/// `optional` clears them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeadlineChange {
    Keep,
    /// Every deadline becomes at most its start plus this many seconds.
    Shorten {
        grace_secs: i64,
    },
    Clear,
}

impl PolicyPatch {
    /// The policy after the patch at `now`, and what it does to deadlines;
    /// `None` when nothing changes.
    pub fn apply(
        &self,
        before: &SecurityPolicy,
        now: Timestamp,
        day_secs: i64,
    ) -> Option<(SecurityPolicy, DeadlineChange)> {
        let after = SecurityPolicy {
            mfa: self.mfa.unwrap_or(before.mfa),
            enrollment_grace_days: self
                .enrollment_grace_days
                .unwrap_or(before.enrollment_grace_days),
            updated_at: now,
        };
        if after.mfa == before.mfa && after.enrollment_grace_days == before.enrollment_grace_days {
            return None;
        }
        let change = if after.mfa == MfaMode::Optional {
            DeadlineChange::Clear
        } else if after.enrollment_grace_days < before.enrollment_grace_days {
            DeadlineChange::Shorten {
                grace_secs: i64::from(after.enrollment_grace_days) * day_secs,
            }
        } else {
            DeadlineChange::Keep
        };
        Some((after, change))
    }
}

/// What a sign-in by password asks next (D56).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SecondStep {
    /// Nothing: the person has no factor and no policy covers them.
    Done,
    /// The person's second factor.
    Code,
    /// The enrolment step; before the deadline (`Some`) it can be skipped.
    Enrol { skippable_until: Option<Timestamp> },
}

/// D56: the second step a person faces, from whether they have a factor,
/// whether the policy covers them, and their deadline (set at their first
/// sign-in under the policy).
pub fn second_step(
    has_factor: bool,
    covered: bool,
    deadline: Option<Timestamp>,
    now: Timestamp,
) -> SecondStep {
    if has_factor {
        SecondStep::Code
    } else if !covered {
        SecondStep::Done
    } else {
        SecondStep::Enrol {
            skippable_until: deadline.filter(|d| *d > now),
        }
    }
}

/// The whole grace days left before `until` at `now` (at least 1 while any
/// time is left), as the enrolment step shows them.
pub fn days_left(until: Timestamp, now: Timestamp, day_secs: i64) -> i64 {
    let day = day_secs.max(1);
    let secs = until.unix_seconds() - now.unix_seconds();
    (secs + day - 1).div_euclid(day).max(1)
}

// --- The second step's throttles (D56) ----------------------------------

/// Wrong codes that end one attempt (the password is asked again).
pub const ATTEMPT_WRONG_MAX: usize = 5;
/// Wrong codes for an account within [`BLOCK_WINDOW_SECS`] that block its
/// second step for [`BLOCK_SECS`], from every address.
pub const ACCOUNT_WRONG_MAX: usize = 10;
pub const BLOCK_WINDOW_SECS: i64 = 15 * 60;
pub const BLOCK_SECS: i64 = 15 * 60;

/// How far back the throttles look.
pub fn failures_since(now: Timestamp) -> Timestamp {
    now.plus_seconds(-(BLOCK_WINDOW_SECS + BLOCK_SECS))
}

/// Whether `attempt` has used its wrong codes: `failures` are the
/// account's recent wrong codes, each with the attempt it was made in.
pub fn attempt_ended(failures: &[(String, Timestamp)], attempt: &str) -> bool {
    failures.iter().filter(|(a, _)| a == attempt).count() >= ATTEMPT_WRONG_MAX
}

/// Whether the account's second step is blocked at `now`: some ten wrong
/// codes fell within fifteen minutes, the last of them less than fifteen
/// minutes ago.
pub fn blocked(failures: &[(String, Timestamp)], now: Timestamp) -> bool {
    let mut at: Vec<i64> = failures.iter().map(|(_, t)| t.millis()).collect();
    at.sort_unstable();
    at.windows(ACCOUNT_WRONG_MAX).any(|w| {
        let (first, last) = (w[0], w[ACCOUNT_WRONG_MAX - 1]);
        last - first <= BLOCK_WINDOW_SECS * 1000 && now.millis() < last + BLOCK_SECS * 1000
    })
}

/// A factor as `GET /v1/me/mfa` lists it (D56).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Factor {
    pub id: crate::MfaId,
    pub kind: FactorKind,
    pub name: String,
    pub created_at: Timestamp,
    pub last_used_at: Option<Timestamp>,
}

/// A TOTP factor as stored: its seed sealed under the master key (D3
/// revised) and the last step it accepted (the replay rule).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TotpFactor {
    pub factor: Factor,
    pub sealed_secret: Vec<u8>,
    pub last_step: u64,
}

/// A passkey as stored (D56): the WebAuthn credential as the ceremony
/// library keeps it (opaque here), its id, and the signature counter the
/// last assertion reported.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PasskeyFactor {
    pub factor: Factor,
    pub credential_id: Vec<u8>,
    pub credential: Vec<u8>,
    pub sign_count: u32,
}

/// D56: at most this many passkeys per person.
pub const PASSKEYS_MAX: usize = 10;

/// D56: a passkey's user handle is this many random bytes per person.
pub const USER_HANDLE_BYTES: usize = 32;

/// A person's second factors as storage holds them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Factors {
    pub totp: Option<TotpFactor>,
    /// By creation.
    pub passkeys: Vec<PasskeyFactor>,
    /// Unused recovery codes; `None` when the person has no set.
    pub recovery_remaining: Option<u32>,
}

impl Factors {
    /// Whether the person has a factor (recovery codes are not one: they
    /// stand in for a factor, and go with the last one).
    pub fn any(&self) -> bool {
        self.totp.is_some() || !self.passkeys.is_empty()
    }

    /// The factors as listed (D14 continued: `created_at` descending, then
    /// `id`).
    pub fn listed(&self) -> Vec<&Factor> {
        let mut all: Vec<&Factor> = self
            .totp
            .iter()
            .map(|t| &t.factor)
            .chain(self.passkeys.iter().map(|p| &p.factor))
            .collect();
        all.sort_by(|a, b| (b.created_at, b.id.as_str()).cmp(&(a.created_at, a.id.as_str())));
        all
    }

    /// The highest level a step-up can reach for this person.
    pub fn possible(&self) -> Level {
        self.possible_where(true)
    }

    /// The highest level a step-up can reach for this person where
    /// passkeys are offered or not (D56: not on an IP host): without them,
    /// an authenticator app or recovery codes reach `mfa`.
    pub fn possible_where(&self, passkeys_offered: bool) -> Level {
        if passkeys_offered && !self.passkeys.is_empty() {
            Level::Phr
        } else if self.totp.is_some() || (self.any() && self.recovery_remaining.is_some()) {
            Level::Mfa
        } else {
            Level::Pwd
        }
    }

    /// Whether another passkey may be registered (D56: at most ten).
    pub fn passkey_room(&self) -> bool {
        self.passkeys.len() < PASSKEYS_MAX
    }

    /// Whether the second step takes a code: an authenticator app's, or a
    /// recovery code (which stands in for any factor, D56).
    pub fn takes_codes(&self) -> bool {
        self.totp.is_some() || self.recovery_remaining.is_some()
    }
}

/// `amr` once a WebAuthn assertion was added to `before` (D56): a
/// password's `["pwd"]` becomes `["pwd","pop","user","mfa"]`, no password
/// (`before` empty, a passwordless sign-in) `["pop","user","mfa"]`.
pub fn amr_with_passkey(before: &[String]) -> Vec<String> {
    amr_adding(before, &["pop", "user", "mfa"])
}

/// `before` with `added`, each once, in D56's order (RFC 8176 values).
fn amr_adding(before: &[String], added: &[&str]) -> Vec<String> {
    ["pwd", "otp", "pop", "user", "mfa"]
        .iter()
        .filter(|m| added.contains(m) || before.iter().any(|b| b == *m))
        .map(|m| (*m).to_owned())
        .collect()
}

/// D56's counter rule: an assertion whose counter is not greater than the
/// stored one, where either is non-zero, may come from a cloned
/// authenticator and is refused.
pub fn sign_count_ok(stored: u32, presented: u32) -> bool {
    (stored == 0 && presented == 0) || presented > stored
}

/// The longest name a person may give a passkey (characters).
pub const PASSKEY_NAME_MAX: usize = 64;

/// A passkey's name as the person typed it, trimmed and cut to
/// [`PASSKEY_NAME_MAX`] characters; "Passkey" when left empty.
pub fn passkey_name(entered: &str) -> String {
    let name = entered.trim();
    if name.is_empty() {
        "Passkey".to_owned()
    } else {
        name.chars().take(PASSKEY_NAME_MAX).collect()
    }
}

/// D56: the `user.displayName` of a passkey.
pub fn passkey_display_name(name: &str, organization: &str) -> String {
    format!("{name} ({organization})")
}

/// D56: no passkeys when the relying-party id (the host of `public_url`)
/// is an IP address; why not, when so.
pub fn passkeys_unavailable(rp_host: &str) -> Option<&'static str> {
    let bare = rp_host.trim_start_matches('[').trim_end_matches(']');
    bare.parse::<std::net::IpAddr>().is_ok().then_some(
        "passkeys are not offered: the host of the public URL is an IP address, and WebAuthn needs a domain name as its relying-party id",
    )
}

crate::user::str_enum!(FactorKind, "totp, passkey", {
    Totp => "totp",
    Passkey => "passkey",
});

/// D56: the name a TOTP factor gets (the page lets none be chosen).
pub const TOTP_NAME: &str = "Authenticator app";

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn levels_are_ordered_and_read_from_amr() {
        assert!(Level::Pwd < Level::Mfa && Level::Mfa < Level::Phr);
        assert_eq!(Level::of_amr(&strings(&["pwd"])), Level::Pwd);
        assert_eq!(Level::of_amr(&strings(&["pwd", "otp", "mfa"])), Level::Mfa);
        assert_eq!(Level::of_amr(&strings(&["pop", "user", "mfa"])), Level::Phr);
        assert_eq!(Level::parse("phr"), Some(Level::Phr));
        assert_eq!(Level::parse("phrh"), None, "D56: phrh is not used");
        assert_eq!(
            amr_with_otp(&amr_password()),
            strings(&["pwd", "otp", "mfa"])
        );
    }

    #[test]
    fn the_returned_acr_is_the_highest_requested_level_met() {
        let req = AcrRequest {
            voluntary: vec![Level::Phr, Level::Mfa],
            essential: None,
        };
        assert_eq!(req.returned(Level::Mfa), Level::Mfa);
        assert_eq!(req.returned(Level::Pwd), Level::Pwd, "none met: achieved");
        // The first listed level is reached only when the person can.
        assert_eq!(req.target(Level::Pwd, Level::Mfa), Level::Pwd);
        assert_eq!(req.target(Level::Pwd, Level::Phr), Level::Phr);
        let essential = AcrRequest {
            voluntary: vec![],
            essential: Some(vec![Level::Mfa, Level::Phr]),
        };
        assert_eq!(essential.essential_floor(), Some(Level::Mfa));
        assert_eq!(essential.target(Level::Pwd, Level::Pwd), Level::Mfa);
        assert_eq!(essential.returned(Level::Phr), Level::Phr);
        assert!(
            AcrRequest {
                voluntary: vec![],
                essential: Some(vec![])
            }
            .essential_unsupported()
        );
    }

    #[test]
    fn a_policy_change_moves_deadlines_only_earlier_or_clears_them() {
        let now = Timestamp::from_unix_seconds(1_000);
        let before = SecurityPolicy {
            mfa: MfaMode::Required,
            enrollment_grace_days: 7,
            updated_at: now,
        };
        let lower = PolicyPatch {
            mfa: None,
            enrollment_grace_days: Some(2),
        };
        assert_eq!(
            lower.apply(&before, now, 10).unwrap().1,
            DeadlineChange::Shorten { grace_secs: 20 }
        );
        let raise = PolicyPatch {
            mfa: None,
            enrollment_grace_days: Some(9),
        };
        assert_eq!(
            raise.apply(&before, now, 10).unwrap().1,
            DeadlineChange::Keep
        );
        let off = PolicyPatch {
            mfa: Some(MfaMode::Optional),
            enrollment_grace_days: None,
        };
        assert_eq!(
            off.apply(&before, now, 10).unwrap().1,
            DeadlineChange::Clear
        );
        assert_eq!(PolicyPatch::default().apply(&before, now, 10), None);
        assert!(MfaMode::RequiredForAdmins.covers(crate::Role::Admin));
        assert!(!MfaMode::RequiredForAdmins.covers(crate::Role::Editor));
    }

    #[test]
    fn the_second_step_follows_factor_policy_and_deadline() {
        let now = Timestamp::from_unix_seconds(1_000);
        let later = now.plus_seconds(60);
        assert_eq!(second_step(true, false, None, now), SecondStep::Code);
        assert_eq!(second_step(false, false, None, now), SecondStep::Done);
        assert_eq!(
            second_step(false, true, Some(later), now),
            SecondStep::Enrol {
                skippable_until: Some(later)
            }
        );
        assert_eq!(
            second_step(false, true, Some(now), now),
            SecondStep::Enrol {
                skippable_until: None
            },
            "at the deadline, only enrolment"
        );
        assert_eq!(days_left(now.plus_seconds(1), now, 86_400), 1);
        assert_eq!(days_left(now.plus_seconds(86_401), now, 86_400), 2);
        assert_eq!(days_left(now.plus_seconds(6), now, 3), 2);
    }

    #[test]
    fn five_wrong_codes_end_an_attempt_and_ten_in_fifteen_minutes_block() {
        let t0 = Timestamp::from_unix_seconds(10_000);
        let wrong = |attempt: &str, s: i64| (attempt.to_owned(), t0.plus_seconds(s));
        let four: Vec<_> = (0..4).map(|i| wrong("a", i)).collect();
        assert!(!attempt_ended(&four, "a"));
        let mut five = four.clone();
        five.push(wrong("a", 5));
        assert!(attempt_ended(&five, "a"));
        assert!(!attempt_ended(&five, "b"));
        let ten: Vec<_> = (0..10)
            .map(|i| wrong(if i < 5 { "a" } else { "b" }, i * 60))
            .collect();
        let last = t0.plus_seconds(9 * 60);
        assert!(blocked(&ten, last));
        assert!(blocked(&ten, last.plus_seconds(BLOCK_SECS - 1)));
        assert!(!blocked(&ten, last.plus_seconds(BLOCK_SECS)));
        assert!(!blocked(&ten[..9], last));
        let spread: Vec<_> = (0..10).map(|i| wrong("a", i * 120)).collect();
        assert!(
            !blocked(&spread, t0.plus_seconds(18 * 60)),
            "18 minutes apart"
        );
    }

    #[test]
    fn steps_are_thirty_seconds_and_the_window_is_one_either_side() {
        assert_eq!(totp_step(Timestamp::from_unix_seconds(59)), 1);
        assert_eq!(totp_step(Timestamp::from_unix_seconds(60)), 2);
        assert_eq!(totp_window(10), [9, 10, 11]);
        assert_eq!(totp_window(0), [0, 0, 1]);
    }

    #[test]
    fn a_code_of_a_step_at_or_before_the_last_accepted_is_refused() {
        assert_eq!(accepted_step(&[10], None), Some(10));
        assert_eq!(accepted_step(&[9, 11], Some(8)), Some(11));
        assert_eq!(accepted_step(&[10], Some(10)), None, "a replay");
        assert_eq!(accepted_step(&[9], Some(10)), None, "an older code");
        assert_eq!(accepted_step(&[], None), None);
    }

    #[test]
    fn recovery_codes_are_ten_crockford_digits_read_forgivingly() {
        assert_eq!(recovery_code(0), "00000-00000");
        assert_eq!(recovery_code((1 << 50) - 1), "ZZZZZ-ZZZZZ");
        let shown = recovery_code(0x0003_1234_5678_9abc & ((1 << 50) - 1));
        assert_eq!(shown.len(), 11);
        let canon = canonical_recovery_code(&shown).unwrap();
        assert_eq!(canon, shown.replace('-', ""));
        assert_eq!(
            canonical_recovery_code(&format!(" {} ", shown.to_lowercase())),
            Some(canon.clone())
        );
        assert_eq!(
            canonical_recovery_code("0I1L0-O0000"),
            Some("01110 00000".replace(' ', ""))
        );
        assert_eq!(canonical_recovery_code("ABCDE-FGHJ"), None, "nine digits");
        assert_eq!(canonical_recovery_code("ABCDE-FGHJKM"), None, "eleven");
        assert_eq!(
            canonical_recovery_code("ABCDE-FGHJU"),
            None,
            "U is not a digit"
        );
        assert_eq!(canonical_recovery_code("ABCDÉ-FGHJK"), None);
    }

    #[test]
    fn d56_passkeys_amr_counter_names_and_ip_hosts() {
        assert_eq!(
            amr_with_passkey(&strings(&["pwd"])),
            strings(&["pwd", "pop", "user", "mfa"])
        );
        assert_eq!(amr_with_passkey(&[]), strings(&["pop", "user", "mfa"]));
        // A step-up of a TOTP sign-in keeps what it had.
        assert_eq!(
            amr_with_passkey(&strings(&["pwd", "otp", "mfa"])),
            strings(&["pwd", "otp", "pop", "user", "mfa"])
        );
        assert!(sign_count_ok(0, 0), "authenticators without a counter");
        assert!(sign_count_ok(0, 1));
        assert!(sign_count_ok(5, 6));
        assert!(!sign_count_ok(5, 5), "not greater: a possible clone");
        assert!(!sign_count_ok(5, 0));
        assert!(!sign_count_ok(5, 4));
        assert_eq!(passkey_display_name("Ada", "Acme"), "Ada (Acme)");
        assert_eq!(passkey_name("  "), "Passkey");
        assert_eq!(passkey_name(" Laptop "), "Laptop");
        assert_eq!(
            passkey_name(&"é".repeat(80)).chars().count(),
            PASSKEY_NAME_MAX
        );
        assert!(passkeys_unavailable("127.0.0.1").is_some());
        assert!(passkeys_unavailable("[::1]").is_some());
        assert!(passkeys_unavailable("localhost").is_none());
        assert!(passkeys_unavailable("auth.example.com").is_none());
    }
}
