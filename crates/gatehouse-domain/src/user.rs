//! Users: roles (D10), statuses and the lifecycle state machine (D11), the
//! last-admin rule (D13).

use serde::Serialize;

use crate::error::{DomainError, FieldIssue};
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

    /// The user as inserted.
    pub fn user(&self) -> User {
        User {
            id: self.id.clone(),
            email: self.email.clone(),
            name: self.name.clone(),
            role: self.role,
            status: self.status,
            created_at: self.created_at,
            updated_at: self.created_at,
            has_password: self.password_hash.is_some(),
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

/// Whether going from `before` to `after` (`None`: deleted) takes away an
/// active admin (D13). Exactly then the store counts the organization's other
/// active admins for [`check_change`] or [`check_delete`], in the transaction
/// that writes the change.
pub fn removes_active_admin(before: &User, after: Option<&User>) -> bool {
    before.is_active_admin() && !after.is_some_and(User::is_active_admin)
}

/// D13 (`LAST_ADMIN`): an organization keeps at least one active admin.
/// `other_active_admins` is the count of active admins besides this user,
/// taken when [`removes_active_admin`] says so; `None` (not counted) is
/// treated as none left, so a change that needed the count never passes
/// without it.
fn keeps_an_admin(
    before: &User,
    after: Option<&User>,
    other_active_admins: Option<u64>,
) -> Result<(), DomainError> {
    if removes_active_admin(before, after) && other_active_admins.unwrap_or(0) == 0 {
        return Err(DomainError::LastAdmin);
    }
    Ok(())
}

/// Whether `current` may become `updated` (the user of [`apply_patch`]'s
/// change): D13's last-admin rule. D11's transitions were checked by
/// `apply_patch`.
pub fn check_change(
    current: &User,
    updated: &User,
    other_active_admins: Option<u64>,
) -> Result<(), DomainError> {
    keeps_an_admin(current, Some(updated), other_active_admins)
}

/// What deleting a user writes besides removing the user (D13).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Deletion {
    /// Move the user's client applications to this user first.
    pub transfer_clients_to: Option<UserId>,
}

/// D13: whether `current` may be deleted, and what moves with it.
///
/// The facts are read in the deleting transaction: the other active admins
/// (see [`removes_active_admin`]), the number of client applications
/// `current` owns, the `?transfer_to` id, and `heir`, the user that id names
/// in the same organization (`None` when there is none). The checks come in
/// this order: `LAST_ADMIN`; a named heir must be another active user of the
/// organization (400 on `transfer_to`); owned clients need an heir
/// (`OWNED_RESOURCES_EXIST`).
pub fn check_delete(
    current: &User,
    other_active_admins: Option<u64>,
    owned_clients: u64,
    transfer_to: Option<&UserId>,
    heir: Option<&User>,
) -> Result<Deletion, DomainError> {
    keeps_an_admin(current, None, other_active_admins)?;
    if let Some(named) = transfer_to {
        let valid = heir.is_some_and(|h| {
            h.id == *named && h.id != current.id && h.status == UserStatus::Active
        });
        if !valid {
            return Err(DomainError::Validation(vec![FieldIssue::new(
                "transfer_to",
                "must name another active user of this organization",
            )]));
        }
    }
    if owned_clients == 0 {
        return Ok(Deletion {
            transfer_clients_to: None,
        });
    }
    match transfer_to {
        Some(heir) => Ok(Deletion {
            transfer_clients_to: Some(heir.clone()),
        }),
        None => Err(DomainError::OwnedResourcesExist(owned_clients)),
    }
}

/// D19: only a `pending_invite` user is sent a new invitation.
pub fn check_reinvite(user: &User) -> Result<(), DomainError> {
    if user.status != UserStatus::PendingInvite {
        return Err(DomainError::InvalidStateTransition(format!(
            "only a pending_invite user can be invited again; this user is {}",
            user.status.as_str()
        )));
    }
    Ok(())
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

#[cfg(test)]
mod rule_tests {
    use super::*;

    fn user(role: Role, status: UserStatus) -> User {
        User {
            id: UserId::generate(),
            email: Email::parse("a@b.co").unwrap(),
            name: Name::parse("A").unwrap(),
            role,
            status,
            created_at: Timestamp::from_millis(1),
            updated_at: Timestamp::from_millis(1),
            has_password: status != UserStatus::PendingInvite,
        }
    }

    fn with(u: &User, role: Role, status: UserStatus) -> User {
        User {
            role,
            status,
            ..u.clone()
        }
    }

    #[test]
    fn d13_a_change_keeps_an_active_admin() {
        use Role::*;
        use UserStatus::*;
        let cases = [
            // (before, after, other active admins, allowed)
            ((Admin, Active), (Editor, Active), Some(0), false),
            ((Admin, Active), (Admin, Inactive), Some(0), false),
            ((Admin, Active), (Viewer, Inactive), Some(0), false),
            ((Admin, Active), (Editor, Active), Some(1), true),
            ((Admin, Active), (Admin, Inactive), Some(3), true),
            // Not counted where a count was needed: refused, never waved through.
            ((Admin, Active), (Editor, Active), None, false),
            // Changes that take no active admin away need no count.
            ((Admin, Active), (Admin, Active), None, true),
            ((Admin, Inactive), (Viewer, Inactive), None, true),
            ((Admin, PendingInvite), (Viewer, PendingInvite), None, true),
            ((Editor, Active), (Admin, Active), None, true),
            ((Editor, Active), (Viewer, Inactive), None, true),
        ];
        for ((r0, s0), (r1, s1), others, allowed) in cases {
            let before = user(r0, s0);
            let after = with(&before, r1, s1);
            let got = check_change(&before, &after, others);
            if allowed {
                assert_eq!(got, Ok(()), "{r0:?}/{s0:?} → {r1:?}/{s1:?}, {others:?}");
            } else {
                assert_eq!(
                    got,
                    Err(DomainError::LastAdmin),
                    "{r0:?}/{s0:?} → {r1:?}/{s1:?}, {others:?}"
                );
            }
        }
    }

    #[test]
    fn d13_deletion() {
        use Role::*;
        use UserStatus::*;
        let heir_error = || {
            Err(DomainError::Validation(vec![FieldIssue::new(
                "transfer_to",
                "must name another active user of this organization",
            )]))
        };
        let editor = user(Editor, Active);
        let admin = user(Admin, Active);
        let heir = user(Viewer, Active);
        let pending = user(Viewer, PendingInvite);
        let inactive = user(Admin, Inactive);
        let stranger = UserId::generate();
        let keep = Ok(Deletion {
            transfer_clients_to: None,
        });
        let to_heir = Ok(Deletion {
            transfer_clients_to: Some(heir.id.clone()),
        });
        type Outcome = Result<Deletion, DomainError>;
        let cases: Vec<(&str, Outcome, Outcome)> = vec![
            (
                "plain",
                check_delete(&editor, None, 0, None, None),
                keep.clone(),
            ),
            (
                "owns clients, no heir",
                check_delete(&editor, None, 2, None, None),
                Err(DomainError::OwnedResourcesExist(2)),
            ),
            (
                "owns clients, heir",
                check_delete(&editor, None, 2, Some(&heir.id), Some(&heir)),
                to_heir,
            ),
            (
                "heir named, nothing owned: nothing moves",
                check_delete(&editor, None, 0, Some(&heir.id), Some(&heir)),
                keep.clone(),
            ),
            (
                "heir is the user itself",
                check_delete(&editor, None, 1, Some(&editor.id), Some(&editor)),
                heir_error(),
            ),
            (
                "heir is pending",
                check_delete(&editor, None, 1, Some(&pending.id), Some(&pending)),
                heir_error(),
            ),
            (
                "heir is inactive",
                check_delete(&editor, None, 0, Some(&inactive.id), Some(&inactive)),
                heir_error(),
            ),
            (
                "heir not in the organization",
                check_delete(&editor, None, 1, Some(&stranger), None),
                heir_error(),
            ),
            (
                "heir row is another user's",
                check_delete(&editor, None, 1, Some(&stranger), Some(&heir)),
                heir_error(),
            ),
            (
                "last admin, before anything else",
                check_delete(&admin, Some(0), 1, Some(&stranger), None),
                Err(DomainError::LastAdmin),
            ),
            (
                "admin not counted",
                check_delete(&admin, None, 0, None, None),
                Err(DomainError::LastAdmin),
            ),
            (
                "another admin remains",
                check_delete(&admin, Some(1), 0, None, None),
                keep.clone(),
            ),
            (
                "an inactive admin may go",
                check_delete(&inactive, None, 0, None, None),
                keep,
            ),
        ];
        for (case, got, want) in cases {
            assert_eq!(got, want, "{case}");
        }
    }

    #[test]
    fn d19_only_a_pending_user_is_invited_again() {
        use UserStatus::*;
        for (status, allowed) in [(PendingInvite, true), (Active, false), (Inactive, false)] {
            let got = check_reinvite(&user(Role::Viewer, status));
            match got {
                Ok(()) => assert!(allowed, "{status:?}"),
                Err(DomainError::InvalidStateTransition(m)) => {
                    assert!(!allowed, "{status:?}");
                    assert_eq!(
                        m,
                        format!(
                            "only a pending_invite user can be invited again; this user is {}",
                            status.as_str()
                        )
                    );
                }
                Err(e) => panic!("{status:?}: {e:?}"),
            }
        }
    }
}
