//! Rules about registered client applications (D13, D20).

use crate::error::{DomainError, FieldIssue};
use crate::ids::UserId;
use crate::user::User;

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
/// client.
pub fn check_owner(owner: Option<&UserId>, found: Option<&User>) -> Result<(), DomainError> {
    match owner {
        Some(id) if found.is_none_or(|u| u.id != *id) => Err(unknown_owner()),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::Timestamp;
    use crate::user::{Role, UserStatus};
    use crate::values::{Email, Name};

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
            let got = check_owner(owner, found);
            if allowed {
                assert_eq!(got, Ok(()), "{case}");
            } else {
                assert_eq!(got, Err(unknown_owner()), "{case}");
            }
        }
    }
}
