//! Applies a change's effects (`gatehouse_domain::effect`) inside its
//! transaction: the one place this backend writes what a user's change
//! reaches across aggregates, in the list's order, except that the
//! revocation records are written last: a record's id is taken under the
//! revocation lock, so writing them at the end holds that lock for the
//! shortest time and the feed's ids commit in order (D25, D44).
//!
//! The effects that reach a set of records (an owner's applications or
//! keys) tell one event for each record they change (D54's cascades), as
//! they change it, through the change's [`Teller`].

use std::borrow::Cow;

use gatehouse_domain::effect::Effect;
use gatehouse_domain::event::{NewEvent, Teller};
use gatehouse_domain::{
    Client, ClientId, OrgId, Role, ScopeSet, Timestamp, UserId, client, manage,
};
use gatehouse_store::{NewRevocation, StoreError};
use sqlx_core::query::query;
use sqlx_postgres::PgConnection;

use crate::rows::{CLIENT_COLS, client_row};
use crate::{TxResult, api_keys, auth_state};

/// Applies `effects` in order (revocation records last). `tell` is the
/// change's teller; a list whose cascades tell events needs one (an
/// internal error otherwise: a caller that builds such a list has its
/// teller).
pub(crate) async fn apply(
    c: &mut PgConnection,
    org: &OrgId,
    effects: &[Effect],
    now: Timestamp,
    tell: Option<&Teller>,
) -> TxResult<()> {
    let teller =
        || tell.ok_or_else(|| StoreError::Internal("a cascade applied without its teller".into()));
    let mut revocations: Vec<NewRevocation> = Vec::new();
    // The change's events, written together after every other row of the
    // list (one statement; see `events::insert_events`): an event still
    // follows its object's row, and the list's order is kept.
    let mut events: Vec<Cow<'_, NewEvent>> = Vec::new();
    for effect in effects {
        match effect {
            Effect::SendLink { kind, user, link } => {
                auth_state::insert_link(c, *kind, org, user, link, now).await?;
            }
            Effect::EndLinks { kind, user } => {
                auth_state::delete_links(c, *kind, user).await?;
            }
            Effect::OwnerStatus { owner, inactive } => {
                let tell = teller()?;
                for app in lock_owned_clients(c, org, owner).await? {
                    let next = client::owner_status_changed(&app, *inactive);
                    revocations.extend(set_suspension(c, &app, next, now).await?);
                    let after = Client {
                        suspension: next,
                        ..app.clone()
                    };
                    events.extend(tell.application_updated(&app, &after, now).map(Cow::Owned));
                }
            }
            Effect::MoveOwnedClients { from, to } => {
                let tell = teller()?;
                for app in lock_owned_clients(c, org, from).await? {
                    query("UPDATE clients SET owner_id = $2 WHERE id = $1")
                        .bind(app.id.as_str())
                        .bind(to.as_str())
                        .execute(&mut *c)
                        .await?;
                    let next = client::inherited(&app);
                    revocations.extend(set_suspension(c, &app, next, now).await?);
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
                for app in lock_owned_clients(c, org, owner).await? {
                    if let Some((after, revocation)) = narrow_owned(c, &app, *role, now).await? {
                        revocations.push(revocation);
                        events.extend(tell.application_updated(&app, &after, now).map(Cow::Owned));
                    }
                }
            }
            Effect::RevokeUser { user } => {
                auth_state::end_user_grants(c, user, now).await?;
                revocations.push(NewRevocation::user(user, now));
            }
            Effect::EndSessions { user, select } => {
                let tell = teller()?;
                let (ended, chains) =
                    crate::sessions::end_sessions(c, org, user, select, now).await?;
                for s in &ended {
                    events.push(Cow::Owned(tell.session_revoked(s, now)));
                }
                revocations.extend(chains);
            }
            Effect::CutOwnedKeys { owner, cut } => {
                let tell = teller()?;
                for key in api_keys::cut_owned_keys(c, org, owner, *cut, now).await? {
                    events.push(Cow::Owned(tell.api_key_revoked(&key, now)));
                }
            }
            Effect::DisableOwnedEndpoints { owner } => {
                let tell = teller()?;
                for e in crate::webhooks::disable_owned_endpoints(c, org, owner, now).await? {
                    events.push(Cow::Owned(tell.webhook_endpoint_disabled(&e)));
                }
            }
            Effect::DeleteUser { user } => {
                query("DELETE FROM users WHERE id = $1 AND org_id = $2")
                    .bind(user.as_str())
                    .bind(org.as_str())
                    .execute(&mut *c)
                    .await?;
            }
            Effect::MoveClient {
                client,
                to,
                suspension,
            } => {
                query("UPDATE clients SET owner_id = $2 WHERE id = $1")
                    .bind(client.id.as_str())
                    .bind(to.as_str())
                    .execute(&mut *c)
                    .await?;
                revocations.extend(set_suspension(c, client, *suspension, now).await?);
            }
            Effect::DeleteClient { client } => {
                for sql in [
                    "DELETE FROM refresh_tokens WHERE chain_id IN (SELECT id FROM refresh_chains WHERE client_id = $1)",
                    "DELETE FROM refresh_chains WHERE client_id = $1",
                    "DELETE FROM auth_codes WHERE client_id = $1",
                    "DELETE FROM consents WHERE client_id = $1",
                    "DELETE FROM clients WHERE id = $1",
                ] {
                    query(sql).bind(client.as_str()).execute(&mut *c).await?;
                }
                revocations.push(NewRevocation::client(client, now));
            }
            Effect::SetSuspension { client, next } => {
                revocations.extend(set_suspension(c, client, *next, now).await?);
            }
            Effect::NarrowClient {
                client,
                keep,
                removed,
            } => {
                revocations.push(narrow_client(c, client, *keep, *removed, now).await?);
            }
            Effect::SetOrganization { before, after } => {
                crate::orgs::set_org(c, org, before, after).await?;
            }
            Effect::Mail(mail) => auth_state::enqueue_mail(c, mail, now).await?,
            Effect::Event(e) => events.push(Cow::Borrowed(e)),
            Effect::Audit(entry) => {
                crate::audit::insert_audit(c, org, &gatehouse_store::AuditRow::of(entry)).await?;
            }
            mfa @ (Effect::PutTotp { .. }
            | Effect::PutPasskey { .. }
            | Effect::RemoveFactor { .. }
            | Effect::PutRecoveryCodes { .. }
            | Effect::RemoveMfa { .. }
            | Effect::NewMfaDeadline { .. }
            | Effect::SetSecurityPolicy { .. }) => crate::mfa::apply(c, org, mfa).await?,
        }
    }
    crate::events::insert_events(c, org, &events).await?;
    for r in &revocations {
        auth_state::insert_revocation(c, r).await?;
    }
    Ok(())
}

/// D46 (revised): the application keeps only `keep`: its refresh chains,
/// codes and consents carrying a `removed` scope end or shrink; the
/// revocation of exactly the access tokens carrying one is returned, for
/// the caller to write last.
async fn narrow_client(
    c: &mut PgConnection,
    client: &ClientId,
    keep: ScopeSet,
    removed: ScopeSet,
    now: Timestamp,
) -> TxResult<NewRevocation> {
    let keep = crate::bits(keep);
    query(
        "UPDATE refresh_chains SET revoked_at = $3
         WHERE client_id = $1 AND revoked_at IS NULL AND (scopes & ~$2::integer) <> 0",
    )
    .bind(client.as_str())
    .bind(keep)
    .bind(now.millis())
    .execute(&mut *c)
    .await?;
    query(
        "UPDATE refresh_tokens SET successor_sealed = NULL, successor_until = NULL
         WHERE chain_id IN (SELECT id FROM refresh_chains WHERE client_id = $1 AND revoked_at = $2)
           AND successor_until IS NOT NULL",
    )
    .bind(client.as_str())
    .bind(now.millis())
    .execute(&mut *c)
    .await?;
    query("DELETE FROM auth_codes WHERE client_id = $1 AND (scopes & ~$2::integer) <> 0")
        .bind(client.as_str())
        .bind(keep)
        .execute(&mut *c)
        .await?;
    query("UPDATE consents SET scopes = scopes & $2::integer WHERE client_id = $1")
        .bind(client.as_str())
        .bind(keep)
        .execute(&mut *c)
        .await?;
    query("DELETE FROM consents WHERE client_id = $1 AND scopes = 0")
        .bind(client.as_str())
        .execute(&mut *c)
        .await?;
    // D46 (revised): exactly the tokens carrying a removed scope.
    Ok(NewRevocation::client_scopes(client, removed, now))
}

/// D46, D29 (continued): `app` of a person now holding `role` keeps only the
/// scopes the role allows; the application as changed and the revocation
/// to write last, `None` when it keeps them all.
async fn narrow_owned(
    c: &mut PgConnection,
    app: &Client,
    role: Role,
    now: Timestamp,
) -> TxResult<Option<(Client, NewRevocation)>> {
    let Some(left) = manage::scopes_left_by_role(app.scopes, role) else {
        return Ok(None);
    };
    query("UPDATE clients SET scopes = $2, updated_at = $3 WHERE id = $1")
        .bind(app.id.as_str())
        .bind(crate::bits(left))
        .bind(now.millis())
        .execute(&mut *c)
        .await?;
    let removed = ScopeSet::from_bits(app.scopes.bits() & !left.bits());
    let revocation = narrow_client(c, &app.id, left, removed, now).await?;
    let after = Client {
        scopes: left,
        updated_at: now,
        ..app.clone()
    };
    Ok(Some((after, revocation)))
}

/// The clients of `org` that `owner` owns, locked for the rest of the
/// transaction.
async fn lock_owned_clients(
    c: &mut PgConnection,
    org: &OrgId,
    owner: &UserId,
) -> TxResult<Vec<Client>> {
    let rows = query(&format!(
        "SELECT {CLIENT_COLS} FROM clients WHERE org_id = $1 AND owner_id = $2
         ORDER BY created_at, id FOR UPDATE"
    ))
    .bind(org.as_str())
    .bind(owner.as_str())
    .fetch_all(&mut *c)
    .await?;
    Ok(rows.iter().map(client_row).collect::<Result<Vec<_>, _>>()?)
}

/// Writes the suspension a rule decided for `app` (D46 revised). One that
/// newly suspends it calls for a revocation of its access tokens so far
/// ([`client::Suspension::revokes_on`]), returned for the caller to write
/// last in the transaction (see `auth_state::insert_revocation`).
async fn set_suspension(
    c: &mut PgConnection,
    app: &Client,
    next: client::Suspension,
    now: Timestamp,
) -> TxResult<Option<NewRevocation>> {
    query("UPDATE clients SET owner_inactive = $2, rotation_required = $3 WHERE id = $1")
        .bind(app.id.as_str())
        .bind(next.owner_inactive)
        .bind(next.rotation_required)
        .execute(&mut *c)
        .await?;
    Ok(app
        .suspension
        .revokes_on(next)
        .then(|| NewRevocation::client(&app.id, now)))
}
