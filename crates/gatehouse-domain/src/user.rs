//! Users: roles (D10), statuses and the lifecycle state machine (D11), the
//! last-admin rule (D13).

use serde::Serialize;

use crate::error::DomainError;
use crate::ids::UserId;
use crate::time::Timestamp;
use crate::values::{Email, Name};

macro_rules! str_enum {
    ($name:ident, $allowed:literal, { $($variant:ident => $text:literal),+ $(,)? }) => {
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
        pub enum $name { $( #[serde(rename = $text)] $variant ),+ }

        impl $name {
            pub fn as_str(self) -> &'static str {
                match self { $( $name::$variant => $text ),+ }
            }
            /// The error text lists the allowed values (D10).
            pub fn parse(s: &str) -> Result<Self, String> {
                match s {
                    $( $text => Ok($name::$variant), )+
                    _ => Err(concat!("must be one of: ", $allowed).to_owned()),
                }
            }
        }
    };
}
pub(crate) use str_enum;

str_enum!(Role, "admin, editor, viewer", {
    Admin => "admin",
    Editor => "editor",
    Viewer => "viewer",
});

str_enum!(UserStatus, "active, inactive, pending_invite", {
    Active => "active",
    Inactive => "inactive",
    PendingInvite => "pending_invite",
});

impl UserStatus {
    /// The values a PATCH may set (interface.md §4.3: `pending_invite` cannot be set).
    pub fn parse_patch(s: &str) -> Result<Self, String> {
        match s {
            "active" => Ok(UserStatus::Active),
            "inactive" => Ok(UserStatus::Inactive),
            _ => Err("must be one of: active, inactive".into()),
        }
    }
}

/// The User schema of interface.md §2.1.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct User {
    pub id: UserId,
    pub email: Email,
    pub name: Name,
    pub role: Role,
    pub status: UserStatus,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    /// Whether the user has ever set a password (accepted an invitation).
    #[serde(skip)]
    pub has_password: bool,
}

impl User {
    pub fn is_active_admin(&self) -> bool {
        self.role == Role::Admin && self.status == UserStatus::Active
    }
}

/// A user to be inserted.
#[derive(Clone, Debug)]
pub struct NewUser {
    pub id: UserId,
    pub email: Email,
    pub name: Name,
    pub role: Role,
    pub status: UserStatus,
    /// Argon2id PHC string, for users created with a password (D40 `user create`).
    pub password_hash: Option<String>,
    pub created_at: Timestamp,
}

impl NewUser {
    /// A user created through the API: `pending_invite` until the invitation
    /// is accepted (D11).
    pub fn invited(email: Email, name: Name, role: Role, now: Timestamp) -> Self {
        Self {
            id: UserId::generate(),
            email,
            name,
            role,
            status: UserStatus::PendingInvite,
            password_hash: None,
            created_at: now,
        }
    }
}

/// A partial update; `None` leaves a field alone.
#[derive(Clone, Debug, Default)]
pub struct UserPatch {
    pub name: Option<Name>,
    pub role: Option<Role>,
    pub status: Option<UserStatus>,
}

/// The outcome of applying a patch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UserChange {
    pub user: User,
    /// Something changed (and `updated_at` moved).
    pub changed: bool,
    /// The change ends the user's sessions and tokens: deactivation (D11) or a
    /// role with fewer rights (D29).
    pub revokes_tokens: bool,
    /// The change cancels a pending invitation (D11 `pending_invite → inactive`).
    pub cancels_invitation: bool,
}

/// D11: whether a PATCH may move a user from `from` to `to`.
pub fn check_transition(
    from: UserStatus,
    to: UserStatus,
    has_password: bool,
) -> Result<(), DomainError> {
    use UserStatus::*;
    match (from, to) {
        (Active, Active) | (Inactive, Inactive) => Ok(()),
        (Active, Inactive) | (PendingInvite, Inactive) => Ok(()),
        (Inactive, Active) if has_password => Ok(()),
        (Inactive, Active) => Err(DomainError::InvalidStateTransition(
            "this user never accepted an invitation; re-send it instead of activating".into(),
        )),
        (PendingInvite, Active) => Err(DomainError::InvalidStateTransition(
            "a pending user becomes active only by accepting the invitation".into(),
        )),
        (PendingInvite, PendingInvite) => Ok(()),
        (_, PendingInvite) => Err(DomainError::InvalidStateTransition(
            "pending_invite cannot be set".into(),
        )),
    }
}

fn rank(role: Role) -> u8 {
    match role {
        Role::Viewer => 0,
        Role::Editor => 1,
        Role::Admin => 2,
    }
}

/// Applies a patch to `current` (D9 all-or-nothing, D11). The last-admin rule
/// needs a count of admins and is checked by the store with
/// [`removes_active_admin`] inside the same transaction.
pub fn apply_patch(
    current: &User,
    patch: &UserPatch,
    now: Timestamp,
) -> Result<UserChange, DomainError> {
    let mut next = current.clone();
    if let Some(status) = patch.status {
        check_transition(current.status, status, current.has_password)?;
        next.status = status;
    }
    if let Some(name) = &patch.name {
        next.name = name.clone();
    }
    if let Some(role) = patch.role {
        next.role = role;
    }
    let changed = next != *current;
    if changed {
        next.updated_at = now.max(current.updated_at);
    }
    let deactivated = current.status != UserStatus::Inactive && next.status == UserStatus::Inactive;
    let demoted = rank(next.role) < rank(current.role);
    Ok(UserChange {
        cancels_invitation: current.status == UserStatus::PendingInvite
            && next.status == UserStatus::Inactive,
        revokes_tokens: deactivated || demoted,
        changed,
        user: next,
    })
}

/// Whether going from `before` to `after` takes away an active admin (D13).
pub fn removes_active_admin(before: &User, after: Option<&User>) -> bool {
    before.is_active_admin() && !after.is_some_and(User::is_active_admin)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(status: UserStatus, has_password: bool) -> User {
        User {
            id: UserId::generate(),
            email: Email::parse("a@b.co").unwrap(),
            name: Name::parse("A").unwrap(),
            role: Role::Admin,
            status,
            created_at: Timestamp::from_millis(1),
            updated_at: Timestamp::from_millis(1),
            has_password,
        }
    }

    #[test]
    fn d11_transitions() {
        use UserStatus::*;
        assert!(check_transition(Active, Inactive, true).is_ok());
        assert!(check_transition(Inactive, Active, true).is_ok());
        assert!(check_transition(PendingInvite, Inactive, false).is_ok());
        assert!(check_transition(PendingInvite, Active, false).is_err());
        assert!(check_transition(Inactive, Active, false).is_err());
        assert!(check_transition(Active, Active, true).is_ok());
    }

    #[test]
    fn same_value_changes_nothing() {
        let u = user(UserStatus::Active, true);
        let patch = UserPatch {
            name: Some(u.name.clone()),
            role: Some(Role::Admin),
            status: Some(UserStatus::Active),
        };
        let c = apply_patch(&u, &patch, Timestamp::from_millis(99)).unwrap();
        assert!(!c.changed);
        assert_eq!(c.user.updated_at, Timestamp::from_millis(1));
    }

    #[test]
    fn deactivation_and_demotion_revoke_tokens() {
        let u = user(UserStatus::Active, true);
        let off = UserPatch {
            status: Some(UserStatus::Inactive),
            ..Default::default()
        };
        let c = apply_patch(&u, &off, Timestamp::from_millis(9)).unwrap();
        assert!(c.changed && c.revokes_tokens);
        assert_eq!(c.user.updated_at, Timestamp::from_millis(9));
        assert!(removes_active_admin(&u, Some(&c.user)));
        let demote = UserPatch {
            role: Some(Role::Editor),
            ..Default::default()
        };
        assert!(
            apply_patch(&u, &demote, Timestamp::from_millis(9))
                .unwrap()
                .revokes_tokens
        );
    }

    #[test]
    fn pending_to_inactive_cancels_the_invitation() {
        let u = user(UserStatus::PendingInvite, false);
        let p = UserPatch {
            status: Some(UserStatus::Inactive),
            ..Default::default()
        };
        assert!(
            apply_patch(&u, &p, Timestamp::from_millis(2))
                .unwrap()
                .cancels_invitation
        );
    }
}

/// D19 (revised): how far back reset e-mails count against an account.
pub const RESET_EMAIL_WINDOW_SECS: i64 = 3600;

/// D19 (revised): whether a reset e-mail may go to an account that was sent
/// the ones at `recent` (any order): at most one per 5 minutes and 5 per hour.
pub fn reset_email_allowed(recent: &[Timestamp], now: Timestamp) -> bool {
    let within = |secs: i64| {
        recent
            .iter()
            .filter(|t| now.millis() - t.millis() < secs * 1000)
            .count()
    };
    within(5 * 60) == 0 && within(RESET_EMAIL_WINDOW_SECS) < 5
}

#[cfg(test)]
mod reset_limit_tests {
    use super::*;

    fn at(secs: i64) -> Timestamp {
        Timestamp::from_unix_seconds(2_000_000 + secs)
    }

    #[test]
    fn one_reset_email_per_five_minutes_and_five_per_hour() {
        assert!(reset_email_allowed(&[], at(0)));
        assert!(!reset_email_allowed(&[at(0)], at(299)), "within 5 minutes");
        assert!(reset_email_allowed(&[at(0)], at(300)));
        let four: Vec<_> = (0..4).map(|i| at(i * 600)).collect();
        assert!(reset_email_allowed(&four, at(2400)));
        let five: Vec<_> = (0..5).map(|i| at(i * 600)).collect();
        assert!(!reset_email_allowed(&five, at(3000)), "five in the hour");
        // The oldest leaves the hour: room for one more.
        assert!(reset_email_allowed(&five, at(3600)));
    }
}
