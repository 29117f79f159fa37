//! Applies a change's effects (`gatehouse_domain::effect`) inside its
//! transaction: the one place this backend writes what a user's change
//! reaches across aggregates. The single writer makes the list atomic with
//! the change, in the list's order.
//!
//! The effects that reach a set of records (an owner's applications or
//! keys) tell one event for each record they change (D54's cascades), as
//! they change it, through the change's [`Teller`].

use std::borrow::Cow;

use gatehouse_domain::effect::Effect;
use gatehouse_domain::event::{NewEvent, Teller};
use gatehouse_domain::{Client, OrgId, Role, ScopeSet, Timestamp, UserId, client, manage};
use gatehouse_store::{NewRevocation, StoreError, StoreResult};
use rusqlite::{Connection, params};

use crate::pool::WriteTx;
use crate::rows::{CLIENT_COLS, client_row};
use crate::{api_keys, auth_state, db_err};

/// Applies `effects` in order. `tell` is the change's teller; a list whose
/// cascades tell events needs one (an internal error otherwise: a caller
/// that builds such a list has its teller).
pub(crate) fn apply(
    c: &WriteTx<'_, '_>,
    org: &OrgId,
    effects: &[Effect],
    now: Timestamp,
    tell: Option<&Teller>,
) -> StoreResult<()> {
    let teller =
        || tell.ok_or_else(|| StoreError::Internal("a cascade applied without its teller".into()));
    // The change's events, written together after every other row of the
    // list, in the list's order (`events::insert_events`: one sequence
    // update for them all).
    let mut events: Vec<Cow<'_, NewEvent>> = Vec::new();
    for effect in effects {
        match effect {
            Effect::SendLink { kind, user, link } => {
                auth_state::insert_link(c, *kind, org, user, link, now)?;
            }
            Effect::EndLinks { kind, user } => {
                auth_state::delete_links(c, *kind, user)?;
            }
            Effect::OwnerStatus { owner, inactive } => {
                let tell = teller()?;
                for app in owned_clients(c, org, owner)? {
                    let next = client::owner_status_changed(&app, *inactive);
                    set_suspension(c, &app, next, now)?;
                    let after = Client {
                        suspension: next,
                        ..app.clone()
                    };
                    events.extend(tell.application_updated(&app, &after, now).map(Cow::Owned));
                }
            }
            Effect::MoveOwnedClients { from, to } => {
                let tell = teller()?;
                for app in owned_clients(c, org, from)? {
                    c.prepare_cached("UPDATE clients SET owner_id = ?2 WHERE id = ?1")
                        .and_then(|mut s| s.execute(params![app.id.as_str(), to.as_str()]))
                        .map_err(db_err)?;
                    let next = client::inherited(&app);
                    set_suspension(c, &app, next, now)?;
                    let after = Client {
                        owner: Some(to.clone()),
                        suspension: next,
                        ..app.clone()
                    };
                    events.extend(tell.application_updated(&app, &after, now).map(Cow::Owned));
                }
            }
            Effect::NarrowOwnedClients { owner, role } => {
                let tell = teller()?;
                for app in owned_clients(c, org, owner)? {
                    if let Some(after) = narrow_owned(c, &app, *role, now)? {
                        events.extend(tell.application_updated(&app, &after, now).map(Cow::Owned));
                    }
                }
            }
            Effect::RevokeUser { user } => auth_state::revoke_user(c, user, now)?,
            Effect::EndSessions { user, select } => {
                let tell = teller()?;
                for ended in crate::sessions::end_sessions(c, org, user, select, now)? {
                    events.push(Cow::Owned(tell.session_revoked(&ended, now)));
                }
            }
            Effect::CutOwnedKeys { owner, cut } => {
                let tell = teller()?;
                for key in api_keys::cut_owned_keys(c, org, owner, *cut, now)? {
                    events.push(Cow::Owned(tell.api_key_revoked(&key, now)));
                }
            }
            Effect::DeleteUser { user } => {
                c.prepare_cached("DELETE FROM users WHERE id = ?1 AND org_id = ?2")
                    .and_then(|mut s| s.execute(params![user.as_str(), org.as_str()]))
                    .map_err(db_err)?;
            }
            Effect::MoveClient {
                client,
                to,
                suspension,
            } => {
                c.prepare_cached("UPDATE clients SET owner_id = ?2 WHERE id = ?1")
                    .and_then(|mut s| s.execute(params![client.id.as_str(), to.as_str()]))
                    .map_err(db_err)?;
                set_suspension(c, client, *suspension, now)?;
            }
            Effect::SetSuspension { client, next } => set_suspension(c, client, *next, now)?,
            Effect::DeleteClient { client } => {
                // Explicit rather than left to ON DELETE CASCADE, so nothing
                // depends on the connection's foreign-key setting.
                for sql in [
                    "DELETE FROM refresh_tokens WHERE chain_id IN (SELECT id FROM refresh_chains WHERE client_id = ?1)",
                    "DELETE FROM refresh_chains WHERE client_id = ?1",
                    "DELETE FROM auth_codes WHERE client_id = ?1",
                    "DELETE FROM consents WHERE client_id = ?1",
                    "DELETE FROM clients WHERE id = ?1",
                ] {
                    c.prepare_cached(sql)
                        .and_then(|mut s| s.execute([client.as_str()]))
                        .map_err(db_err)?;
                }
                auth_state::insert_revocation(c, &NewRevocation::client(client, now))?;
            }
            Effect::NarrowClient {
                client,
                keep,
                removed,
            } => narrow_client(c, client, *keep, *removed, now)?,
            Effect::DisableOwnedEndpoints { owner } => {
                let tell = teller()?;
                for e in crate::webhooks::disable_owned_endpoints(c, org, owner, now)? {
                    events.push(Cow::Owned(tell.webhook_endpoint_disabled(&e)));
                }
            }
            Effect::SetOrganization { before, after } => {
                crate::orgs::set_org(c, org, before, after)?;
            }
            Effect::Mail(mail) => auth_state::enqueue_mail(c, mail, now)?,
            Effect::Event(e) => events.push(Cow::Borrowed(e)),
            Effect::Audit(entry) => {
                crate::audit::insert_audit(c, org, &gatehouse_store::AuditRow::of(entry))?;
            }
            mfa @ (Effect::PutTotp { .. }
            | Effect::PutPasskey { .. }
            | Effect::RemoveFactor { .. }
            | Effect::PutRecoveryCodes { .. }
            | Effect::RemoveMfa { .. }
            | Effect::NewMfaDeadline { .. }
            | Effect::SetSecurityPolicy { .. }) => crate::mfa::apply(c, org, mfa)?,
        }
    }
    crate::events::insert_events(c, org, &events)
}

/// D46 (revised): the application keeps only `keep`: its refresh chains,
/// codes and consents carrying a `removed` scope end or shrink, and a
/// revocation covers exactly the access tokens carrying one.
fn narrow_client(
    c: &Connection,
    client: &gatehouse_domain::ClientId,
    keep: ScopeSet,
    removed: ScopeSet,
    now: Timestamp,
) -> StoreResult<()> {
    let keep = keep.bits() as i64;
    for sql in [
        "UPDATE refresh_chains SET revoked_at = ?3
         WHERE client_id = ?1 AND revoked_at IS NULL AND (scopes & ~?2) <> 0",
        "UPDATE refresh_tokens SET successor_sealed = NULL, successor_until = NULL
         WHERE chain_id IN (SELECT id FROM refresh_chains WHERE client_id = ?1 AND revoked_at = ?3)
           AND ?2 = ?2",
        "DELETE FROM auth_codes WHERE client_id = ?1 AND (scopes & ~?2) <> 0 AND ?3 = ?3",
        "UPDATE consents SET scopes = scopes & ?2 WHERE client_id = ?1 AND ?3 = ?3",
        "DELETE FROM consents WHERE client_id = ?1 AND scopes = 0 AND ?2 = ?2 AND ?3 = ?3",
    ] {
        c.prepare_cached(sql)
            .and_then(|mut s| s.execute(params![client.as_str(), keep, now.millis()]))
            .map_err(db_err)?;
    }
    // D46 (revised): exactly the tokens carrying a removed scope.
    auth_state::insert_revocation(c, &NewRevocation::client_scopes(client, removed, now))?;
    Ok(())
}

/// D46, D29 (continued): `app` of a person now holding `role` keeps only the
/// scopes the role allows; the application as changed, `None` when it
/// keeps them all.
fn narrow_owned(
    c: &Connection,
    app: &Client,
    role: Role,
    now: Timestamp,
) -> StoreResult<Option<Client>> {
    let Some(left) = manage::scopes_left_by_role(app.scopes, role) else {
        return Ok(None);
    };
    c.prepare_cached("UPDATE clients SET scopes = ?2, updated_at = ?3 WHERE id = ?1")
        .and_then(|mut s| s.execute(params![app.id.as_str(), left.bits() as i64, now.millis()]))
        .map_err(db_err)?;
    let removed = ScopeSet::from_bits(app.scopes.bits() & !left.bits());
    narrow_client(c, &app.id, left, removed, now)?;
    Ok(Some(Client {
        scopes: left,
        updated_at: now,
        ..app.clone()
    }))
}

/// The clients of `org` that `owner` owns, as they are in this transaction.
fn owned_clients(c: &Connection, org: &OrgId, owner: &UserId) -> StoreResult<Vec<Client>> {
    c.prepare_cached(&format!(
        "SELECT {CLIENT_COLS} FROM clients WHERE org_id = ?1 AND owner_id = ?2 ORDER BY created_at, id"
    ))
    .and_then(|mut s| {
        s.query_map(params![org.as_str(), owner.as_str()], client_row)?
            .collect::<rusqlite::Result<Vec<_>>>()
    })
    .map_err(db_err)
}

/// Writes the suspension a rule decided for `app` (D46 revised); one that
/// newly suspends it also revokes its access tokens so far
/// ([`client::Suspension::revokes_on`]).
fn set_suspension(
    c: &Connection,
    app: &Client,
    next: client::Suspension,
    now: Timestamp,
) -> StoreResult<()> {
    c.prepare_cached(
        "UPDATE clients SET owner_inactive = ?2, rotation_required = ?3 WHERE id = ?1",
    )
    .and_then(|mut st| {
        st.execute(params![
            app.id.as_str(),
            next.owner_inactive,
            next.rotation_required
        ])
    })
    .map_err(db_err)?;
    if app.suspension.revokes_on(next) {
        auth_state::insert_revocation(c, &NewRevocation::client(&app.id, now))?;
    }
    Ok(())
}
