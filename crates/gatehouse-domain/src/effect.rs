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
use crate::session::{Session, SessionSelect};
use crate::time::Timestamp;
use crate::user::{Deletion, Role, User, UserChange, UserStatus};
use crate::webhook::{self, Endpoint};

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
    /// application's access tokens so far. Each application it changes
    /// tells `application.updated` (D54).
    OwnerStatus { owner: UserId, inactive: bool },
    /// D13, D46 (revised): every application of `from` moves to `to`,
    /// suspended as `client::inherited` says (its secret may have left with
    /// the old owner); each tells `application.updated` (D54).
    MoveOwnedClients { from: UserId, to: UserId },
    /// D11, D13, D19, D29: the user's codes end, their refresh chains are
    /// revoked, and a `User` revocation covers their access tokens so far.
    /// Their browser sessions stay (a demotion keeps the sign-in); what
    /// ends them is [`Effect::EndSessions`].
    RevokeUser { user: UserId },
    /// D57: the user's sessions that `select` reaches end explicitly: each
    /// one still listed (its browser sign-in or a chain begun in it alive)
    /// has the chains begun in it revoked, with a `Chain` revocation for
    /// their access tokens, and tells `session.revoked` (D54); the rows go.
    EndSessions { user: UserId, select: SessionSelect },
    /// D46: API keys `owner` holds are revoked as `cut` says; each tells
    /// `api_key.revoked` (D54).
    CutOwnedKeys { owner: UserId, cut: KeyCut },
    /// D46, D29 (continued): every application `owner` holds loses the
    /// scopes `role` lacks (`manage::scopes_left_by_role`), as
    /// [`Effect::NarrowClient`] narrows one; each one narrowed tells
    /// `application.updated` (D54).
    NarrowOwnedClients { owner: UserId, role: Role },
    /// D55: every enabled webhook endpoint `owner` owns is disabled
    /// (`owner_removed`, `webhook::disabled_for`), its pending deliveries
    /// cancelled; each tells `webhook_endpoint.disabled` (D54).
    DisableOwnedEndpoints { owner: UserId },
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
    /// D56: `user`'s TOTP factor becomes `totp`, replacing any earlier one.
    PutTotp {
        user: UserId,
        totp: Box<crate::mfa::TotpFactor>,
    },
    /// D56: a passkey of `user` is stored; `handle` is the user handle its
    /// ceremony registered, which becomes the person's with their first
    /// passkey (it never changes after). Storage refuses it when the person
    /// has another handle (`Duplicate("passkey_handle")`: two first
    /// registrations at once) or ten passkeys already (`LimitReached`).
    PutPasskey {
        user: UserId,
        passkey: Box<crate::mfa::PasskeyFactor>,
        handle: Vec<u8>,
    },
    /// D56: the factor `id` of `user` goes.
    RemoveFactor { user: UserId, id: crate::MfaId },
    /// D56: `user`'s recovery codes become these digests (the old set dies).
    PutRecoveryCodes {
        user: UserId,
        digests: Vec<[u8; 32]>,
    },
    /// D56: every factor and recovery code of `user` goes (the admin reset).
    RemoveMfa { user: UserId },
    /// D56: `user` was promoted to admin; under `required_for_admins` that
    /// starts a new deadline (the one set earlier, if any, is forgotten and
    /// the next sign-in under the policy sets it).
    NewMfaDeadline { user: UserId },
    /// D56: the organization's policy becomes `policy`; the deadlines
    /// already set move as `deadlines` says.
    SetSecurityPolicy {
        policy: crate::mfa::SecurityPolicy,
        deadlines: crate::mfa::DeadlineChange,
    },
    /// Issue 32 (`gatehouse org rename`, `org plan`): the organization's
    /// name, or its plan and limits, become `after`'s — only what differs
    /// from `before`, so a rename and a plan change made at once by two
    /// operators both stand.
    SetOrganization {
        before: Box<crate::Organization>,
        after: Box<crate::Organization>,
    },
    /// An e-mail of the change (D19 continued: the password changed),
    /// queued in the outbox in its transaction.
    Mail(Box<crate::link::OutboundEmail>),
    /// D54: an event of the change, written in its transaction; storage
    /// gives it its sequence once committed.
    Event(Box<NewEvent>),
    /// D58: an audit entry of a change that tells no event (a security
    /// action), written unsealed in its transaction.
    Audit(Box<crate::audit::Entry>),
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
/// link (an older one dies) with its e-mail, and its audit entry
/// (`user.password_reset_requested`, D58) as made through `request`.
pub fn of_reset_request(
    user: &UserId,
    link: &NewLink,
    request: Option<&crate::event::RequestRef>,
    at: Timestamp,
) -> Vec<Effect> {
    vec![
        send(LinkKind::Reset, user, link),
        Effect::Audit(Box::new(crate::audit::reset_requested(user, request, at))),
    ]
}

fn send(kind: LinkKind, user: &UserId, link: &NewLink) -> Effect {
    Effect::SendLink {
        kind,
        user: user.clone(),
        link: Box::new(link.clone()),
    }
}

/// What a password reset through a link writes besides the password (D19):
/// the user's other reset links die, their sessions end (each telling
/// `session.revoked`, D57) and their tokens with them, and it tells
/// `user.password_changed` (D19 continued, D54) as done by the person the
/// link was sent to.
pub fn of_password_reset(tell: &Teller, user: &User, at: Timestamp) -> Vec<Effect> {
    vec![
        Effect::EndLinks {
            kind: LinkKind::Reset,
            user: user.id.clone(),
        },
        Effect::EndSessions {
            user: user.id.clone(),
            select: SessionSelect::All,
        },
        Effect::RevokeUser {
            user: user.id.clone(),
        },
        Effect::Event(Box::new(
            tell.by_link(&user.id).user_password_changed(user, at),
        )),
    ]
}

/// What a signed-in person changing their password (D19 continued) writes
/// besides it: their other sessions end (D57, each telling
/// `session.revoked`), the e-mail that tells them, then
/// `user.password_changed` (D54). The session they changed it in (`kept`),
/// and its chains, stay.
pub fn of_password_change(
    tell: &Teller,
    user: &User,
    kept: &crate::SessionId,
    mail: &crate::link::OutboundEmail,
    at: Timestamp,
) -> Vec<Effect> {
    vec![
        Effect::EndSessions {
            user: user.id.clone(),
            select: SessionSelect::AllBut(kept.clone()),
        },
        Effect::Mail(Box::new(mail.clone())),
        Effect::Event(Box::new(tell.user_password_changed(user, at))),
    ]
}

/// What a sign-in that began `session` in the browser, for `client`,
/// tells (D54, D57): `user.signed_in`.
pub fn of_sign_in(tell: &Teller, session: &Session, client: &crate::ids::ClientId) -> Vec<Effect> {
    vec![Effect::Event(Box::new(
        tell.user_signed_in(session, client),
    ))]
}

/// What an explicit end of `user`'s sessions that `select` reaches writes
/// (D57): the sessions end, each telling `session.revoked`.
pub fn of_session_end(user: &UserId, select: SessionSelect) -> Vec<Effect> {
    vec![Effect::EndSessions {
        user: user.clone(),
        select,
    }]
}

/// What a confirmed TOTP enrolment writes (D56): the factor (replacing an
/// earlier one, which tells `user.mfa_removed`), the e-mail that tells
/// the person, then `user.mfa_enrolled`.
pub fn of_totp_enrolment(
    tell: &Teller,
    user: &UserId,
    totp: crate::mfa::TotpFactor,
    replaced: Option<&crate::mfa::Factor>,
    mail: &crate::link::OutboundEmail,
) -> Vec<Effect> {
    let at = totp.factor.created_at;
    let enrolled = tell.user_mfa_enrolled(user, &totp.factor);
    let mut out = vec![Effect::PutTotp {
        user: user.clone(),
        totp: Box::new(totp),
    }];
    out.push(Effect::Mail(Box::new(mail.clone())));
    if let Some(old) = replaced {
        out.push(Effect::Event(Box::new(
            tell.user_mfa_removed(user, old, at),
        )));
    }
    out.push(Effect::Event(Box::new(enrolled)));
    out
}

/// What registering a passkey writes (D56): the passkey (and the person's
/// user handle with their first), the e-mail, `user.mfa_enrolled`.
pub fn of_passkey_registration(
    tell: &Teller,
    user: &UserId,
    passkey: crate::mfa::PasskeyFactor,
    handle: Vec<u8>,
    mail: &crate::link::OutboundEmail,
) -> Vec<Effect> {
    let enrolled = tell.user_mfa_enrolled(user, &passkey.factor);
    vec![
        Effect::PutPasskey {
            user: user.clone(),
            passkey: Box::new(passkey),
            handle,
        },
        Effect::Mail(Box::new(mail.clone())),
        Effect::Event(Box::new(enrolled)),
    ]
}

/// What removing one factor writes (D56): the factor goes, the person is
/// e-mailed, `user.mfa_removed` is told.
pub fn of_factor_removal(
    tell: &Teller,
    user: &UserId,
    factor: &crate::mfa::Factor,
    mail: &crate::link::OutboundEmail,
    at: Timestamp,
) -> Vec<Effect> {
    vec![
        Effect::RemoveFactor {
            user: user.clone(),
            id: factor.id.clone(),
        },
        Effect::Mail(Box::new(mail.clone())),
        Effect::Event(Box::new(tell.user_mfa_removed(user, factor, at))),
    ]
}

/// D56's admin reset (`DELETE /v1/users/{id}/mfa`, `gatehouse user
/// reset-mfa`): every factor and recovery code goes, the person's sessions
/// end and their tokens are revoked, they are e-mailed, and each factor
/// tells `user.mfa_removed`.
pub fn of_mfa_reset(
    tell: &Teller,
    user: &UserId,
    factors: &[crate::mfa::Factor],
    mail: &crate::link::OutboundEmail,
    at: Timestamp,
) -> Vec<Effect> {
    let mut out = vec![
        Effect::RemoveMfa { user: user.clone() },
        Effect::EndSessions {
            user: user.clone(),
            select: SessionSelect::All,
        },
        Effect::RevokeUser { user: user.clone() },
        Effect::Mail(Box::new(mail.clone())),
    ];
    out.extend(
        factors
            .iter()
            .map(|f| Effect::Event(Box::new(tell.user_mfa_removed(user, f, at)))),
    );
    out
}

/// What a change of the organization's policy writes (D56): the policy,
/// the deadlines it moves, and `organization.security_updated`.
pub fn of_policy_change(
    tell: &Teller,
    org: &crate::OrgId,
    before: &crate::mfa::SecurityPolicy,
    after: crate::mfa::SecurityPolicy,
    deadlines: crate::mfa::DeadlineChange,
) -> Vec<Effect> {
    vec![
        Effect::SetSecurityPolicy {
            policy: after,
            deadlines,
        },
        Effect::Event(Box::new(
            tell.organization_security_updated(org, before, &after),
        )),
    ]
}

/// What changing an organization from `before` to `after` writes: its row
/// and `organization.updated` (D54); nothing when nothing changed.
pub fn of_org_change(
    tell: &Teller,
    before: &crate::Organization,
    after: crate::Organization,
    now: Timestamp,
) -> Vec<Effect> {
    if *before == after {
        return Vec::new();
    }
    let event = tell.organization_updated(before, &after, now);
    vec![
        Effect::SetOrganization {
            before: Box::new(before.clone()),
            after: Box::new(after),
        },
        Effect::Event(Box::new(event)),
    ]
}

/// What accepting an invitation (`before`, pending, becoming `after`,
/// active) tells: `user.updated` (D54: acceptance is a status change), as
/// done by the person the invitation was sent to.
pub fn of_invitation_acceptance(tell: &Teller, before: &User, after: &User) -> Vec<Effect> {
    vec![Effect::Event(Box::new(
        tell.by_link(&after.id).user_updated(before, after),
    ))]
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

/// What creating the webhook endpoint `e` tells (D55):
/// `webhook_endpoint.created`.
pub fn of_endpoint_creation(tell: &Teller, e: &Endpoint) -> Vec<Effect> {
    vec![Effect::Event(Box::new(tell.webhook_endpoint_created(e)))]
}

/// What changing the endpoint `before` into `after` writes besides its row
/// (D55): `webhook_endpoint.updated`; when the change disables it, its
/// pending deliveries are cancelled, by the backend, with the row.
pub fn of_endpoint_update(tell: &Teller, before: &Endpoint, after: &Endpoint) -> Vec<Effect> {
    vec![Effect::Event(Box::new(
        tell.webhook_endpoint_updated(before, after),
    ))]
}

/// What the service disabling the endpoint (`gone`, `failing`) tells
/// (D55): `webhook_endpoint.disabled`, the endpoint as disabled.
pub fn of_endpoint_disabled(tell: &Teller, e: &Endpoint) -> Vec<Effect> {
    vec![Effect::Event(Box::new(tell.webhook_endpoint_disabled(e)))]
}

/// What deleting the endpoint `last` at `at` tells (D55):
/// `webhook_endpoint.deleted`.
pub fn of_endpoint_deletion(tell: &Teller, last: &Endpoint, at: Timestamp) -> Vec<Effect> {
    vec![Effect::Event(Box::new(
        tell.webhook_endpoint_deleted(last, at),
    ))]
}

/// What a PATCH of `current` into `change.user` writes besides the user's
/// row (D11, D13, D29, D46 revised), in D54's order: what the change does to
/// other resources first, each telling its own event as it is applied (a
/// deactivation: keys, then applications; a demotion: applications, then
/// keys), then `user.updated`. Nothing when nothing changed.
pub fn of_user_change(tell: &Teller, current: &User, change: &UserChange) -> Vec<Effect> {
    let mut effects = Vec::new();
    if !change.changed {
        return effects;
    }
    let (id, next) = (&current.id, &change.user);
    if change.cancels_invitation {
        effects.push(Effect::EndLinks {
            kind: LinkKind::Invitation,
            user: id.clone(),
        });
    }
    let cut = manage::owned_keys_cut(current, Some(next)).map(|cut| Effect::CutOwnedKeys {
        owner: id.clone(),
        cut,
    });
    let status = manage::owner_inactive_after(current, next).map(|inactive| Effect::OwnerStatus {
        owner: id.clone(),
        inactive,
    });
    let narrows = !ScopeSet::for_role(current.role).is_subset(ScopeSet::for_role(next.role));
    let narrow = narrows.then(|| Effect::NarrowOwnedClients {
        owner: id.clone(),
        role: next.role,
    });
    let disable = webhook::owner_removed(current, Some(next))
        .then(|| Effect::DisableOwnedEndpoints { owner: id.clone() });
    // D54's cascade order: a deactivation tells keys, applications, then
    // endpoints; a demotion applications, keys, then endpoints.
    let order = if status.is_some() {
        [cut, status, narrow, disable]
    } else {
        [narrow, cut, status, disable]
    };
    effects.extend(order.into_iter().flatten());
    // D57: a deactivation ends the person's sessions (each telling
    // `session.revoked`, after the other cascades, D54); a demotion only
    // revokes tokens, and the browser sign-in stays.
    if next.status == UserStatus::Inactive && current.status != UserStatus::Inactive {
        effects.push(Effect::EndSessions {
            user: id.clone(),
            select: SessionSelect::All,
        });
    }
    if change.revokes_tokens {
        effects.push(Effect::RevokeUser { user: id.clone() });
    }
    if next.role == Role::Admin && current.role != Role::Admin {
        effects.push(Effect::NewMfaDeadline { user: id.clone() });
    }
    effects.push(Effect::Event(Box::new(tell.user_updated(current, next))));
    effects
}

/// What deleting `current` at `at` writes, in D54's order: the user's keys
/// revoked and applications moved (each telling its event), the sessions
/// and tokens ended, the row, then `user.deleted` (D13, D46 revised).
pub fn of_user_deletion(
    tell: &Teller,
    current: &User,
    plan: &Deletion,
    at: Timestamp,
) -> Vec<Effect> {
    let id = &current.id;
    let mut effects = Vec::new();
    if let Some(cut) = manage::owned_keys_cut(current, None) {
        effects.push(Effect::CutOwnedKeys {
            owner: id.clone(),
            cut,
        });
    }
    if let Some(heir) = &plan.transfer_clients_to {
        effects.push(Effect::MoveOwnedClients {
            from: id.clone(),
            to: heir.clone(),
        });
    }
    // D55: whoever is deleted, the endpoints they own stop.
    if webhook::owner_removed(current, None) {
        effects.push(Effect::DisableOwnedEndpoints { owner: id.clone() });
    }
    effects.push(Effect::EndSessions {
        user: id.clone(),
        select: SessionSelect::All,
    });
    effects.push(Effect::RevokeUser { user: id.clone() });
    effects.push(Effect::DeleteUser { user: id.clone() });
    effects.push(Effect::Event(Box::new(tell.user_deleted(current, at))));
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

/// What the staging reset of `org` (as it is after) tells (D33 continued,
/// D54): one `staging.reset`, no per-record events.
pub fn of_staging_reset(tell: &Teller, org: &crate::Organization, at: Timestamp) -> Vec<Effect> {
    vec![Effect::Event(Box::new(tell.staging_reset(org, at)))]
}

/// What forgetting the consent `user` gave `client` at `at` tells (D49,
/// D54): `consent.revoked`, the consent as it was.
pub fn of_consent_revocation(
    tell: &Teller,
    user: &UserId,
    consent: &crate::Consent,
    client: &Client,
    at: Timestamp,
) -> Vec<Effect> {
    vec![Effect::Event(Box::new(
        tell.consent_revoked(user, consent, client, at),
    ))]
}

/// What revoking a chain of `user` with `client` for reuse tells (D24,
/// D26, D54): `refresh_token.reuse_detected`.
pub fn of_reuse(
    tell: &Teller,
    user: &UserId,
    client: &ClientId,
    sid: Option<&str>,
    trigger: crate::event::ReuseTrigger,
    at: Timestamp,
) -> Vec<Effect> {
    vec![Effect::Event(Box::new(
        tell.reuse_detected(user, client, sid, trigger, at),
    ))]
}

/// What registering the application `c` tells (D54).
pub fn of_client_creation(tell: &Teller, c: &Client) -> Vec<Effect> {
    vec![Effect::Event(Box::new(tell.application_created(c)))]
}

/// What a change of the application `before` into `after` at `at` tells
/// (D54): `application.updated`, unless nothing published changed.
pub fn of_client_change(
    tell: &Teller,
    before: &Client,
    after: &Client,
    at: Timestamp,
) -> Vec<Effect> {
    tell.application_updated(before, after, at)
        .map(|e| Effect::Event(Box::new(e)))
        .into_iter()
        .collect()
}

/// What deleting the application `last` at `at` writes: everything it
/// holds goes (D46, D47), then `application.deleted` (D54).
pub fn of_client_deletion(tell: &Teller, last: &Client, at: Timestamp) -> Vec<Effect> {
    vec![
        Effect::DeleteClient {
            client: last.id.clone(),
        },
        Effect::Event(Box::new(tell.application_deleted(last, at))),
    ]
}

/// What rotating the secret of `after` (as rotated) at `at` tells (D54):
/// `application.secret_rotated`, never the secret.
pub fn of_secret_rotation(tell: &Teller, after: &Client, at: Timestamp) -> Vec<Effect> {
    vec![Effect::Event(Box::new(
        tell.application_secret_rotated(after, at),
    ))]
}

/// What making the key `k` tells (D54; the record, never the key).
pub fn of_key_creation(tell: &Teller, k: &crate::ApiKey) -> Vec<Effect> {
    vec![Effect::Event(Box::new(tell.api_key_created(k)))]
}

/// What revoking `before` into `after` tells (D54): `api_key.revoked` when
/// the key was not revoked before (revoking twice changes nothing).
pub fn of_key_revocation(
    tell: &Teller,
    before: &crate::ApiKey,
    after: &crate::ApiKey,
) -> Vec<Effect> {
    match (before.revoked_at, after.revoked_at) {
        (None, Some(at)) => vec![Effect::Event(Box::new(tell.api_key_revoked(after, at)))],
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Role;
    use crate::event::{EventType, Origin, Publish};
    use crate::time::Timestamp;
    use crate::user::{UserPatch, UserStatus, apply_patch};
    use crate::values::{Email, Name};

    struct Plain;
    impl Publish for Plain {
        fn product(&self, p: &Product) -> String {
            format!(r#"{{"id":"{}"}}"#, p.id)
        }
        fn user(&self, u: &User) -> String {
            format!(
                r#"{{"id":"{}","role":"{}","status":"{}"}}"#,
                u.id,
                u.role.as_str(),
                u.status.as_str()
            )
        }
        fn application(&self, c: &Client) -> String {
            format!(r#"{{"id":"{}"}}"#, c.id)
        }
        fn api_key(&self, k: &crate::ApiKey) -> String {
            format!(r#"{{"id":"{}"}}"#, k.id)
        }
        fn organization(&self, o: &crate::Organization) -> String {
            format!(r#"{{"id":"{}"}}"#, o.id)
        }
        fn consent(&self, u: &UserId, _: &crate::Consent, c: &Client) -> String {
            format!(r#"{{"id":"{}","user_id":"{u}"}}"#, c.id)
        }
        fn webhook_endpoint(&self, e: &crate::webhook::Endpoint) -> String {
            format!(r#"{{"id":"{}"}}"#, e.id)
        }
        fn session(&self, s: &crate::session::Session) -> String {
            format!(r#"{{"id":"{}"}}"#, s.id)
        }
        fn event(&self, _: &crate::OrgId, e: &crate::event::Event) -> String {
            format!(r#"{{"id":"{}"}}"#, e.event.id)
        }
        fn factor(&self, u: &UserId, f: &crate::mfa::Factor) -> String {
            format!(r#"{{"id":"{}","user_id":"{u}"}}"#, f.id)
        }
        fn security(&self, p: &crate::mfa::SecurityPolicy) -> String {
            format!(r#"{{"mfa":"{}"}}"#, p.mfa.as_str())
        }
    }

    #[test]
    fn an_mfa_reset_ends_sessions_and_tokens_and_tells_each_factor() {
        let user = UserId::generate();
        let factor = crate::mfa::Factor {
            id: crate::MfaId::generate(),
            kind: crate::mfa::FactorKind::Totp,
            name: crate::mfa::TOTP_NAME.into(),
            created_at: Timestamp::from_unix_seconds(5),
            last_used_at: None,
        };
        let mail = crate::link::OutboundEmail {
            to: "a@example.com".into(),
            subject: "s".into(),
            body: "b".into(),
        };
        let out = of_mfa_reset(
            &tell(),
            &user,
            &[factor],
            &mail,
            Timestamp::from_unix_seconds(9),
        );
        assert!(matches!(out[0], Effect::RemoveMfa { .. }));
        assert!(matches!(
            out[1],
            Effect::EndSessions {
                select: SessionSelect::All,
                ..
            }
        ));
        assert!(matches!(out[2], Effect::RevokeUser { .. }));
        assert!(matches!(out[3], Effect::Mail(_)));
        assert_eq!(told(&out[4]), Some(EventType::UserMfaRemoved));
        assert_eq!(out.len(), 5);
    }

    fn tell() -> Teller {
        Teller::new(Origin::system(), std::sync::Arc::new(Plain))
    }

    fn told(e: &Effect) -> Option<EventType> {
        match e {
            Effect::Event(e) => Some(e.kind),
            _ => None,
        }
    }

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
        let e = of_user_change(&tell(), &u, &change);
        // D54: keys, then applications, then endpoints (D55), then the
        // user's own event.
        assert_eq!(
            e[..5],
            [
                Effect::CutOwnedKeys {
                    owner: u.id.clone(),
                    cut: KeyCut::All
                },
                Effect::OwnerStatus {
                    owner: u.id.clone(),
                    inactive: true
                },
                Effect::DisableOwnedEndpoints {
                    owner: u.id.clone()
                },
                // D57: the sessions end (each telling `session.revoked`)
                // after the other cascades, before the user's own event.
                Effect::EndSessions {
                    user: u.id.clone(),
                    select: SessionSelect::All,
                },
                Effect::RevokeUser { user: u.id.clone() },
            ]
        );
        assert_eq!(e.len(), 6);
        assert_eq!(told(&e[5]), Some(EventType::UserUpdated));
    }

    #[test]
    fn d54_demoting_narrows_applications_then_cuts_keys_then_tells_the_user() {
        let u = user(Role::Admin, UserStatus::Active);
        let patch = UserPatch {
            role: Some(Role::Viewer),
            ..Default::default()
        };
        let change = apply_patch(&u, &patch, Timestamp::from_millis(1)).unwrap();
        let e = of_user_change(&tell(), &u, &change);
        assert_eq!(
            e[0],
            Effect::NarrowOwnedClients {
                owner: u.id.clone(),
                role: Role::Viewer
            }
        );
        assert!(matches!(e[1], Effect::CutOwnedKeys { .. }), "{e:?}");
        // D55: demoted below admin, their endpoints stop, after the keys.
        assert_eq!(
            e[2],
            Effect::DisableOwnedEndpoints {
                owner: u.id.clone()
            }
        );
        assert_eq!(told(e.last().unwrap()), Some(EventType::UserUpdated));
        // D57: a demotion revokes tokens but ends no session.
        assert!(
            !e.iter().any(|x| matches!(x, Effect::EndSessions { .. })),
            "{e:?}"
        );
        // A promotion narrows nothing.
        let up = user(Role::Viewer, UserStatus::Active);
        let patch = UserPatch {
            role: Some(Role::Admin),
            ..Default::default()
        };
        let change = apply_patch(&up, &patch, Timestamp::from_millis(1)).unwrap();
        let e = of_user_change(&tell(), &up, &change);
        // D56: under `required_for_admins` a promotion starts a new deadline.
        assert!(matches!(e[0], Effect::NewMfaDeadline { .. }), "{e:?}");
        assert_eq!(e.len(), 2, "{e:?}");
    }

    #[test]
    fn a_patch_that_changes_nothing_has_no_effect() {
        let u = user(Role::Editor, UserStatus::Active);
        let change = apply_patch(&u, &UserPatch::default(), Timestamp::from_millis(1)).unwrap();
        assert!(of_user_change(&tell(), &u, &change).is_empty());
    }

    #[test]
    fn a_deletion_moves_revokes_cuts_and_goes_last() {
        let u = user(Role::Editor, UserStatus::Active);
        let heir = UserId::generate();
        let plan = Deletion {
            transfer_clients_to: Some(heir.clone()),
        };
        let e = of_user_deletion(&tell(), &u, &plan, Timestamp::from_millis(2));
        // D54: keys revoked, applications moved, then the user.
        assert!(matches!(e[0], Effect::CutOwnedKeys { .. }), "{e:?}");
        assert_eq!(
            e[1],
            Effect::MoveOwnedClients {
                from: u.id.clone(),
                to: heir
            }
        );
        assert_eq!(
            e[2],
            Effect::DisableOwnedEndpoints {
                owner: u.id.clone()
            },
            "D54: endpoints after applications"
        );
        assert!(e.contains(&Effect::RevokeUser { user: u.id.clone() }));
        // D54, D57: the sessions end (each telling `session.revoked`) after
        // the endpoints, before the row goes.
        assert_eq!(
            e[3],
            Effect::EndSessions {
                user: u.id.clone(),
                select: SessionSelect::All,
            }
        );
        assert_eq!(e[e.len() - 2], Effect::DeleteUser { user: u.id.clone() });
        assert_eq!(told(e.last().unwrap()), Some(EventType::UserDeleted));
    }
}
