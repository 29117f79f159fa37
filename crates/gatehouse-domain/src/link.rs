//! Single-use links sent by e-mail: invitations (D11) and password resets
//! (D19), and when one may still be used.

use crate::time::Timestamp;
use crate::user::UserStatus;

/// The kinds of single-use links sent by e-mail.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkKind {
    Invitation,
    Reset,
}

impl LinkKind {
    pub fn as_str(self) -> &'static str {
        match self {
            LinkKind::Invitation => "invitation",
            LinkKind::Reset => "reset",
        }
    }
}

/// Whether a link of `kind` may be used at `now`: it was never used, has
/// not expired, and its user is in the state the link is for — pending for
/// an invitation (D11: accepting is what activates), active for a reset
/// (D19: only an active account resets its password). The pages that show
/// a link's form and the stores that use one ask this same question.
pub fn usable(
    kind: LinkKind,
    used_at: Option<Timestamp>,
    expires_at: Timestamp,
    user_status: UserStatus,
    now: Timestamp,
) -> bool {
    let for_status = match kind {
        LinkKind::Invitation => UserStatus::PendingInvite,
        LinkKind::Reset => UserStatus::Active,
    };
    used_at.is_none() && expires_at > now && user_status == for_status
}

#[cfg(test)]
mod tests {
    use super::*;
    use LinkKind::*;
    use UserStatus::*;

    #[test]
    fn a_link_is_usable_once_before_it_expires_for_its_users_state() {
        let now = Timestamp::from_millis(1_000);
        let later = Timestamp::from_millis(2_000);
        let earlier = Timestamp::from_millis(500);
        let cases = [
            // (kind, used_at, expires_at, status, usable)
            (Invitation, None, later, PendingInvite, true),
            (Invitation, Some(earlier), later, PendingInvite, false),
            (Invitation, None, now, PendingInvite, false),
            (Invitation, None, earlier, PendingInvite, false),
            (Invitation, None, later, Active, false),
            (Invitation, None, later, Inactive, false),
            (Reset, None, later, Active, true),
            (Reset, Some(earlier), later, Active, false),
            (Reset, None, now, Active, false),
            (Reset, None, later, PendingInvite, false),
            (Reset, None, later, Inactive, false),
        ];
        for (kind, used, expires, status, want) in cases {
            assert_eq!(
                usable(kind, used, expires, status, now),
                want,
                "{kind:?} used {used:?} expires {expires:?} for a {status:?} user"
            );
        }
    }
}

/// An e-mail to send (D30).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutboundEmail {
    pub to: String,
    pub subject: String,
    pub body: String,
}

/// A new single-use link with the e-mail that carries it, written together.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewLink {
    pub digest: [u8; 32],
    pub expires_at: Timestamp,
    pub email: OutboundEmail,
}
