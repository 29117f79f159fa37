//! Effects: what a decided change writes beyond its own row, named once
//! (issue 25). A rule decides and returns the outcome with its effects; each
//! storage backend applies a list of effects in one place (its
//! `effects.rs`), inside the transaction of the change, in the list's order
//! (PostgreSQL writes the revocation records last, as its feed of
//! revocations needs). So what a deactivation, a demotion or a deletion
//! reaches across aggregates is composed here, once, and no backend restates
//! it.

use crate::Client;
use crate::client::Suspension;
use crate::event::{NewEvent, Teller};
use crate::ids::{ClientId, UserId};
use crate::link::{LinkKind, NewLink};
use crate::manage::{self, KeyCut};
use crate::product::Product;
use crate::scope::ScopeSet;
use crate::time::Timestamp;
use crate::user::{Deletion, User, UserChange};

/// One write a change causes besides its own row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Effect {
    /// D11, D19, D30: a single-use link for `user` is written with the
    /// e-mail that carries it (queued in the outbox); an earlier link of
    /// the same kind dies.
    SendLink {
        kind: LinkKind,
        user: UserId,
        link: Box<NewLink>,
    },
    /// The user's unused links of `kind` die: D11's `pending_invite →
    /// inactive` ends the invitation, D19's reset ends every other reset
    /// link.
    EndLinks { kind: LinkKind, user: UserId },
    /// D46 (revised): every application `owner` holds follows their status
    /// (`client::owner_status_changed`); a new suspension revokes the
    /// application's access tokens so far.
    OwnerStatus { owner: UserId, inactive: bool },
    /// D13, D46 (revised): every application of `from` moves to `to`,
    /// suspended as `client::inherited` says (its secret may have left with
    /// the old owner).
    MoveOwnedClients { from: UserId, to: UserId },
    /// D11, D13, D19, D29: the user's sessions and codes end, their refresh
    /// chains are revoked, and a `User` revocation covers their access
    /// tokens so far.
    RevokeUser { user: UserId },
    /// D46: API keys `owner` holds are revoked as `cut` says.
    CutOwnedKeys { owner: UserId, cut: KeyCut },
    /// D13: the user's row goes (with it, by the schema, what still
    /// references it).
    DeleteUser { user: UserId },
    /// D46 (revised): `client` (as it was) moves to `to`, with the
    /// suspension `client::move_owner` decided; a new suspension revokes
    /// its access tokens so far.
    MoveClient {
        client: Box<Client>,
        to: UserId,
        suspension: Suspension,
    },
    /// D46, D47: the application goes, with its refresh chains, codes and
    /// consents; a revocation covers every access token issued to it.
    DeleteClient { client: ClientId },
    /// D46 (revised): `client` (as it was) gets the suspension a rule
    /// decided (a rotation's, `client::check_rotation`); a new suspension
    /// revokes its access tokens so far.
    SetSuspension {
        client: Box<Client>,
        next: Suspension,
    },
    /// D46 (revised): the application keeps only `keep`: its refresh chains,
    /// codes and consents carrying a `removed` scope end or shrink, and a
    /// revocation covers exactly the access tokens carrying one.
    NarrowClient {
        client: ClientId,
        keep: ScopeSet,
        removed: ScopeSet,
    },
    /// D54: an event of the change, written in its transaction; storage
    /// gives it its sequence once committed.
    Event(Box<NewEvent>),
}

/// What creating `user` writes besides its row: the invitation, when it
/// is sent one (D11), and what it tells (D54: `user.created`, then
/// `user.invited`).
pub fn of_user_creation(tell: &Teller, user: &User, invitation: Option<&NewLink>) -> Vec<Effect> {
    let mut effects: Vec<Effect> = invitation
        .map(|link| send(LinkKind::Invitation, &user.id, link))
        .into_iter()
        .collect();
    effects.push(Effect::Event(Box::new(tell.user_created(user))));
    if invitation.is_some() {
        effects.push(Effect::Event(Box::new(
            tell.user_invited(user, user.created_at),
        )));
    }
    effects
}

/// What re-sending `user`'s invitation at `at` writes (D11): a new link
/// (the old one dies) with its e-mail; it tells `user.invited` (D54).
pub fn of_reinvitation(tell: &Teller, user: &User, link: &NewLink, at: Timestamp) -> Vec<Effect> {
    vec![
        send(LinkKind::Invitation, &user.id, link),
        Effect::Event(Box::new(tell.user_invited(user, at))),
    ]
}

/// What a password-reset request that may send writes (D19): a new reset
/// link (an older one dies) with its e-mail.
pub fn of_reset_request(user: &UserId, link: &NewLink) -> Vec<Effect> {
    vec![send(LinkKind::Reset, user, link)]
}

fn send(kind: LinkKind, user: &UserId, link: &NewLink) -> Effect {
    Effect::SendLink {
        kind,
        user: user.clone(),
        link: Box::new(link.clone()),
    }
}

/// What a password reset through a link writes besides the password (D19):
/// the user's other reset links die, and their sessions and tokens end.
pub fn of_password_reset(user: &UserId) -> Vec<Effect> {
    vec![
        Effect::EndLinks {
            kind: LinkKind::Reset,
            user: user.clone(),
        },
        Effect::RevokeUser { user: user.clone() },
    ]
}

/// What creating `p` tells (D54).
pub fn of_product_creation(tell: &Teller, p: &Product) -> Vec<Effect> {
    vec![Effect::Event(Box::new(tell.product_created(p)))]
}

/// What a PATCH of the product `before` into `after` tells (D54; D18's
/// automatic status change is part of the same `product.updated`); nothing
/// when nothing changed.
pub fn of_product_update(
    tell: &Teller,
    before: &Product,
    after: &Product,
    changed: bool,
) -> Vec<Effect> {
    if !changed {
        return Vec::new();
    }
    vec![Effect::Event(Box::new(tell.product_updated(before, after)))]
}

/// What deleting the product `last` at `at` tells (D54).
pub fn of_product_deletion(tell: &Teller, last: &Product, at: Timestamp) -> Vec<Effect> {
    vec![Effect::Event(Box::new(tell.product_deleted(last, at)))]
}

/// What a PATCH of `current` into `change.user` writes besides the user's
/// row (D11, D13, D29, D46 revised). Nothing when nothing changed.
pub fn of_user_change(current: &User, change: &UserChange) -> Vec<Effect> {
    let mut effects = Vec::new();
    if !change.changed {
        return effects;
    }
    let id = &current.id;
    if change.cancels_invitation {
        effects.push(Effect::EndLinks {
            kind: LinkKind::Invitation,
            user: id.clone(),
        });
    }
    if let Some(inactive) = manage::owner_inactive_after(current, &change.user) {
        effects.push(Effect::OwnerStatus {
            owner: id.clone(),
            inactive,
        });
    }
    if change.revokes_tokens {
        effects.push(Effect::RevokeUser { user: id.clone() });
    }
    if let Some(cut) = manage::owned_keys_cut(current, Some(&change.user)) {
        effects.push(Effect::CutOwnedKeys {
            owner: id.clone(),
            cut,
        });
    }
    effects
}

/// What deleting `current` writes, its own row last (D13, D46 revised).
pub fn of_user_deletion(current: &User, plan: &Deletion) -> Vec<Effect> {
    let id = &current.id;
    let mut effects = Vec::new();
    if let Some(heir) = &plan.transfer_clients_to {
        effects.push(Effect::MoveOwnedClients {
            from: id.clone(),
            to: heir.clone(),
        });
    }
    effects.push(Effect::RevokeUser { user: id.clone() });
    if let Some(cut) = manage::owned_keys_cut(current, None) {
        effects.push(Effect::CutOwnedKeys {
            owner: id.clone(),
            cut,
        });
    }
    effects.push(Effect::DeleteUser { user: id.clone() });
    effects
}

/// What changing the application `old` writes besides its row (D46
/// revised): the move its owner change decided (`move_owner`), then the
/// narrowing when `keep` drops any of its scopes.
pub fn of_client_update(
    old: &Client,
    keep: ScopeSet,
    moved: Option<(UserId, Suspension)>,
) -> Vec<Effect> {
    let mut effects = Vec::new();
    if let Some((to, suspension)) = moved {
        effects.push(Effect::MoveClient {
            client: Box::new(old.clone()),
            to,
            suspension,
        });
    }
    let removed = ScopeSet::from_bits(old.scopes.bits() & !keep.bits());
    if !removed.is_empty() {
        effects.push(Effect::NarrowClient {
            client: old.id.clone(),
            keep,
            removed,
        });
    }
    effects
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Role;
    use crate::time::Timestamp;
    use crate::user::{UserPatch, UserStatus, apply_patch};
    use crate::values::{Email, Name};

    fn user(role: Role, status: UserStatus) -> User {
        User {
            id: UserId::generate(),
            email: Email::parse("e@example.com").unwrap(),
            name: Name::parse("E").unwrap(),
            role,
            status,
            created_at: Timestamp::from_millis(0),
            updated_at: Timestamp::from_millis(0),
            has_password: true,
        }
    }

    #[test]
    fn deactivating_an_admin_reaches_applications_tokens_and_keys() {
        let u = user(Role::Admin, UserStatus::Active);
        let patch = UserPatch {
            status: Some(UserStatus::Inactive),
            ..Default::default()
        };
        let change = apply_patch(&u, &patch, Timestamp::from_millis(1)).unwrap();
        assert_eq!(
            of_user_change(&u, &change),
            vec![
                Effect::OwnerStatus {
                    owner: u.id.clone(),
                    inactive: true
                },
                Effect::RevokeUser { user: u.id.clone() },
                Effect::CutOwnedKeys {
                    owner: u.id.clone(),
                    cut: KeyCut::All
                },
            ]
        );
    }

    #[test]
    fn a_patch_that_changes_nothing_has_no_effect() {
        let u = user(Role::Editor, UserStatus::Active);
        let change = apply_patch(&u, &UserPatch::default(), Timestamp::from_millis(1)).unwrap();
        assert!(of_user_change(&u, &change).is_empty());
    }

    #[test]
    fn a_deletion_moves_revokes_cuts_and_goes_last() {
        let u = user(Role::Editor, UserStatus::Active);
        let heir = UserId::generate();
        let plan = Deletion {
            transfer_clients_to: Some(heir.clone()),
        };
        let e = of_user_deletion(&u, &plan);
        assert_eq!(
            e.first(),
            Some(&Effect::MoveOwnedClients {
                from: u.id.clone(),
                to: heir
            })
        );
        assert!(e.contains(&Effect::RevokeUser { user: u.id.clone() }));
        assert_eq!(e.last(), Some(&Effect::DeleteUser { user: u.id.clone() }));
    }
}
