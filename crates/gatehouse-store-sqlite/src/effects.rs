//! Applies a change's effects (`gatehouse_domain::effect`) inside its
//! transaction: the one place this backend writes what a user's change
//! reaches across aggregates. The single writer makes the list atomic with
//! the change, in the list's order.

use gatehouse_domain::effect::Effect;
use gatehouse_domain::{OrgId, Timestamp, client};
use gatehouse_store::{LinkKind, StoreResult};
use rusqlite::{Connection, params};

use crate::{api_keys, auth_state, clients, db_err};

pub(crate) fn apply(
    c: &Connection,
    org: &OrgId,
    effects: &[Effect],
    now: Timestamp,
) -> StoreResult<()> {
    for effect in effects {
        match effect {
            Effect::CancelInvitation { user } => {
                auth_state::delete_links(c, LinkKind::Invitation, user)?;
            }
            Effect::OwnerStatus { owner, inactive } => {
                for app in clients::owned_clients_tx(c, org, owner)? {
                    let next = client::owner_status_changed(&app, *inactive);
                    clients::set_suspension(c, &app, next, now)?;
                }
            }
            Effect::MoveOwnedClients { from, to } => {
                for app in clients::owned_clients_tx(c, org, from)? {
                    c.prepare_cached("UPDATE clients SET owner_id = ?2 WHERE id = ?1")
                        .and_then(|mut s| s.execute(params![app.id.as_str(), to.as_str()]))
                        .map_err(db_err)?;
                    clients::set_suspension(c, &app, client::inherited(&app), now)?;
                }
            }
            Effect::RevokeUser { user } => auth_state::revoke_user(c, user, now)?,
            Effect::CutOwnedKeys { owner, cut } => {
                api_keys::cut_owned_keys(c, org, owner, *cut, now)?;
            }
            Effect::DeleteUser { user } => {
                c.prepare_cached("DELETE FROM users WHERE id = ?1 AND org_id = ?2")
                    .and_then(|mut s| s.execute(params![user.as_str(), org.as_str()]))
                    .map_err(db_err)?;
            }
        }
    }
    Ok(())
}
