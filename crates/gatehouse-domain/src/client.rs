//! Rules about registered client applications (D13, D20, D46 revised).

use crate::Client;
use crate::error::{DomainError, FieldIssue};
use crate::ids::UserId;
use crate::user::{User, UserStatus};

/// D46 (revised): why an application is suspended, as the API names it
/// (`suspended_reason`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SuspendedReason {
    /// Its owner is deactivated.
    OwnerInactive,
    /// It was moved away from a deactivated or deleted owner, who may still
    /// hold its secret, and the secret has not been rotated since.
    SecretRotationRequired,
}

impl SuspendedReason {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::OwnerInactive => "owner_inactive",
            Self::SecretRotationRequired => "secret_rotation_required",
        }
    }
}

/// D46 (revised): the two facts that suspend an application. Both are
/// stored, so that lifting one never lifts the other (an application moved
/// to a new owner who is then deactivated and reactivated still needs its
/// secret rotated).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Suspension {
    /// Its owner is deactivated; lifted when they are active again or an
    /// admin moves the application.
    pub owner_inactive: bool,
    /// It was moved away from a deactivated or deleted owner; lifted by a
    /// rotation of its secret with no grace.
    pub rotation_required: bool,
}

impl Suspension {
    /// Not suspended.
    pub const NONE: Suspension = Suspension {
        owner_inactive: false,
        rotation_required: false,
    };

    /// Whether going from `self` to `next` suspends an application that was
    /// not: then every access token issued to it so far is revoked (D46
    /// revised: they stay refused for good, whatever lifts the suspension).
    pub fn revokes_on(self, next: Suspension) -> bool {
        self.reason().is_none() && next.reason().is_some()
    }

    /// The reason shown, the owner's state first (it is lifted first: the
    /// owner's return or a move, which may leave a rotation to do).
    pub fn reason(self) -> Option<SuspendedReason> {
        if self.owner_inactive {
            Some(SuspendedReason::OwnerInactive)
        } else if self.rotation_required {
            Some(SuspendedReason::SecretRotationRequired)
        } else {
            None
        }
    }
}

/// D46 (revised): an application's suspension after its owner was
/// deactivated (`inactive`) or became active again.
pub fn owner_status_changed(app: &Client, inactive: bool) -> Suspension {
    Suspension {
        owner_inactive: inactive,
        ..app.suspension
    }
}

/// D46 (revised): moving `app` to the user `to` (`found`: that user as the
/// store read them in the client's organization, in the transaction that
/// moves it). The new owner must be an active user of the organization; an
/// application moved away from an owner who is deactivated (`current`, or
/// the application already suspended for it) needs its secret rotated
/// before it works again, unless it is public (it has no secret). The
/// suspension the application has after the move.
pub fn move_owner(
    app: &Client,
    current: Option<&User>,
    to: &UserId,
    found: Option<&User>,
) -> Result<Suspension, DomainError> {
    let Some(new_owner) = found.filter(|u| u.id == *to) else {
        return Err(unknown_owner());
    };
    if new_owner.status != UserStatus::Active {
        return Err(DomainError::InvalidStateTransition(format!(
            "{to} is not an active user: an application can be moved only to an active user"
        )));
    }
    let leaver =
        app.suspension.owner_inactive || current.is_some_and(|u| u.status == UserStatus::Inactive);
    Ok(moved_from(app, leaver))
}

/// D46 (revised), D13: the suspension of an application handed to the heir
/// of its deleted owner (`transfer_to`): a deleted owner is a leaver.
pub fn inherited(app: &Client) -> Suspension {
    moved_from(app, true)
}

fn moved_from(app: &Client, leaver: bool) -> Suspension {
    Suspension {
        owner_inactive: false,
        rotation_required: app.suspension.rotation_required || (leaver && !app.is_public()),
    }
}

/// D46 (revised), D20: rotating `app`'s secret, the previous one kept for a
/// grace or not. A public application has no secret; one that must be
/// rotated (its former owner may hold the secret) is rotated with no grace,
/// which lifts that suspension. The suspension after the rotation.
pub fn check_rotation(app: &Client, grace: bool) -> Result<Suspension, DomainError> {
    if app.is_public() {
        return Err(DomainError::InvalidStateTransition(format!(
            "{} is a public client: it has no secret",
            app.id
        )));
    }
    if app.suspension.rotation_required && grace {
        return Err(DomainError::InvalidStateTransition(
            "this application was moved away from a former owner who may hold its secret: rotate it with no grace (grace_seconds 0)".into(),
        ));
    }
    Ok(Suspension {
        rotation_required: false,
        ..app.suspension
    })
}

/// The error for an owner that is not a user of the client's organization.
pub fn unknown_owner() -> DomainError {
    DomainError::Validation(vec![FieldIssue::new(
        "owner",
        "must name a user of the client's organization",
    )])
}

/// A client's owner, when one is named, must be a user of the client's
/// organization. `found` is the user the store read for `owner` within that
/// organization (`None`: no such user), in the transaction that inserts the
/// client. The new client's suspension: D46 (revised), suspended from the
/// start when its owner is deactivated.
pub fn check_owner(
    owner: Option<&UserId>,
    found: Option<&User>,
) -> Result<Suspension, DomainError> {
    match owner {
        Some(id) if found.is_none_or(|u| u.id != *id) => Err(unknown_owner()),
        _ => Ok(Suspension {
            owner_inactive: owner.is_some()
                && found.is_some_and(|u| u.status == UserStatus::Inactive),
            rotation_required: false,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::Timestamp;
    use crate::user::Role;
    use crate::values::{Email, Name};
    use crate::{ClientId, OrgId, ScopeSet};

    fn person(status: UserStatus) -> User {
        User {
            id: UserId::generate(),
            email: Email::parse("p@b.co").unwrap(),
            name: Name::parse("P").unwrap(),
            role: Role::Editor,
            status,
            created_at: Timestamp::from_millis(1),
            updated_at: Timestamp::from_millis(1),
            has_password: true,
        }
    }

    fn app(public: bool, suspension: Suspension) -> Client {
        Client {
            id: ClientId::generate(),
            org: OrgId::generate(),
            name: "a".into(),
            secret_hash: (!public).then_some([1; 32]),
            previous_secret: None,
            scopes: ScopeSet::parse("users:read").unwrap(),
            redirect_uris: vec![],
            post_logout_redirect_uris: vec![],
            admin_approved: false,
            owner: None,
            created_at: Timestamp::from_millis(1),
            updated_at: Timestamp::from_millis(1),
            suspension,
        }
    }

    #[test]
    fn d46_revised_a_move_away_from_a_leaver_needs_a_rotation_unless_public() {
        let active = person(UserStatus::Active);
        let gone = person(UserStatus::Inactive);
        let heir = person(UserStatus::Active);
        let suspended = Suspension {
            owner_inactive: true,
            rotation_required: false,
        };
        let moved = move_owner(&app(false, suspended), Some(&gone), &heir.id, Some(&heir));
        assert_eq!(
            moved.map(Suspension::reason),
            Ok(Some(SuspendedReason::SecretRotationRequired))
        );
        assert_eq!(
            move_owner(&app(true, suspended), Some(&gone), &heir.id, Some(&heir)),
            Ok(Suspension::NONE),
            "a public application resumes at once"
        );
        assert_eq!(
            move_owner(
                &app(false, Suspension::NONE),
                Some(&active),
                &heir.id,
                Some(&heir)
            ),
            Ok(Suspension::NONE),
            "between active people nothing is suspended"
        );
        let pending = Suspension {
            owner_inactive: false,
            rotation_required: true,
        };
        assert_eq!(
            move_owner(&app(false, pending), Some(&active), &heir.id, Some(&heir)),
            Ok(pending),
            "a rotation still owed stays owed"
        );
        assert!(matches!(
            move_owner(&app(false, Suspension::NONE), None, &gone.id, Some(&gone)),
            Err(DomainError::InvalidStateTransition(_))
        ));
        assert_eq!(
            move_owner(&app(false, Suspension::NONE), None, &heir.id, None),
            Err(unknown_owner())
        );
        assert_eq!(
            inherited(&app(false, Suspension::NONE)).reason(),
            Some(SuspendedReason::SecretRotationRequired),
            "a deleted owner is a leaver"
        );
        assert_eq!(inherited(&app(true, Suspension::NONE)), Suspension::NONE);
    }

    #[test]
    fn d46_revised_only_a_new_suspension_revokes_and_the_owners_return_lifts_only_its_own() {
        let owed = Suspension {
            owner_inactive: false,
            rotation_required: true,
        };
        let deactivated = owner_status_changed(&app(false, Suspension::NONE), true);
        assert_eq!(deactivated.reason(), Some(SuspendedReason::OwnerInactive));
        assert!(Suspension::NONE.revokes_on(deactivated));
        let both = owner_status_changed(&app(false, owed), true);
        assert!(
            !owed.revokes_on(both),
            "already suspended: nothing new to revoke"
        );
        assert_eq!(
            owner_status_changed(&app(false, both), false),
            owed,
            "the owner's return leaves the owed rotation"
        );
        assert!(!deactivated.revokes_on(Suspension::NONE));
    }

    #[test]
    fn d46_revised_an_owed_rotation_takes_no_grace_and_lifts_only_itself() {
        let owed = Suspension {
            owner_inactive: false,
            rotation_required: true,
        };
        assert!(matches!(
            check_rotation(&app(false, owed), true),
            Err(DomainError::InvalidStateTransition(_))
        ));
        assert_eq!(
            check_rotation(&app(false, owed), false),
            Ok(Suspension::NONE)
        );
        let both = Suspension {
            owner_inactive: true,
            rotation_required: true,
        };
        assert_eq!(
            check_rotation(&app(false, both), false).map(Suspension::reason),
            Ok(Some(SuspendedReason::OwnerInactive))
        );
        assert_eq!(
            check_rotation(&app(false, Suspension::NONE), true),
            Ok(Suspension::NONE)
        );
        assert!(check_rotation(&app(true, Suspension::NONE), false).is_err());
    }

    #[test]
    fn an_owner_must_be_a_user_of_the_organization() {
        let u = User {
            id: UserId::generate(),
            email: Email::parse("a@b.co").unwrap(),
            name: Name::parse("A").unwrap(),
            role: Role::Viewer,
            status: UserStatus::Inactive,
            created_at: Timestamp::from_millis(1),
            updated_at: Timestamp::from_millis(1),
            has_password: false,
        };
        let other = UserId::generate();
        let cases = [
            ("no owner", None, None, true),
            ("owner found", Some(&u.id), Some(&u), true),
            ("owner missing", Some(&other), None, false),
            ("another user's row", Some(&other), Some(&u), false),
        ];
        for (case, owner, found, allowed) in cases {
            let got = check_owner(owner, found).map(Suspension::reason);
            if allowed {
                let suspended = owner.is_some().then_some(SuspendedReason::OwnerInactive);
                assert_eq!(
                    got,
                    Ok(suspended),
                    "{case}: an inactive owner's client is suspended"
                );
            } else {
                assert_eq!(got, Err(unknown_owner()), "{case}");
            }
        }
    }
}
