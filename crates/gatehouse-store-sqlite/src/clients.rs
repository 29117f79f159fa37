//! SQLite: client applications (D20, D22, D40).

use gatehouse_domain::event::Teller;

use super::*;

#[async_trait]
impl ClientStore for SqliteStore {
    async fn insert_client(
        &self,
        org: &OrgId,
        client: &NewClient,
        tell: &Teller,
    ) -> StoreResult<Client> {
        let (org, client, tell) = (org.clone(), client.clone(), tell.clone());
        self.pool
            .write(move |tx| {
                let owner = match &client.owner {
                    Some(id) => get_user_tx(tx, &org, id)?,
                    None => None,
                };
                let suspension = client::check_owner(client.owner.as_ref(), owner.as_ref())?;
                insert_client_row(tx, &org, &client, suspension)?;
                let made = Client {
                    id: client.id,
                    org,
                    name: client.name,
                    secret_hash: client.secret_hash,
                    previous_secret: None,
                    scopes: client.scopes,
                    redirect_uris: client.redirect_uris,
                    post_logout_redirect_uris: client.post_logout_redirect_uris,
                    admin_approved: client.admin_approved,
                    owner: client.owner,
                    created_at: client.created_at,
                    updated_at: client.created_at,
                    suspension,
                };
                let told = effect::of_client_creation(&tell, &made);
                crate::effects::apply(tx, &made.org, &told, made.created_at, None)?;
                Ok(made)
            })
            .await
    }
    async fn resolve_client(&self, id: &ClientId) -> StoreResult<Option<Client>> {
        self.pool
            .read(|c| {
                c.prepare_cached(&format!("SELECT {CLIENT_COLS} FROM clients WHERE id = ?1"))
                    .and_then(|mut s| s.query_row([id.as_str()], client_row).optional())
                    .map_err(db_err)
            })
            .await
    }
    async fn list_clients(&self, org: &OrgId) -> StoreResult<Vec<Client>> {
        let org = org.clone();
        self.pool
            .read(move |c| {
                c.prepare_cached(&format!(
                    "SELECT {CLIENT_COLS} FROM clients WHERE org_id = ?1 ORDER BY created_at, id"
                ))
                .and_then(|mut s| {
                    s.query_map([org.as_str()], client_row)?
                        .collect::<rusqlite::Result<Vec<_>>>()
                })
                .map_err(db_err)
            })
            .await
    }
    async fn update_client(
        &self,
        org: &OrgId,
        id: &ClientId,
        changes: &ClientChanges,
        now: Timestamp,
        tell: &Teller,
    ) -> StoreResult<Client> {
        let (org, id, ch, tell) = (org.clone(), id.clone(), changes.clone(), tell.clone());
        self.pool
            .write(move |tx| {
                let old = get_client_tx(tx, &org, &id)?.ok_or(StoreError::NotFound)?;
                let (new, _) = ch.apply(&old);
                let scopes = new.scopes;
                let moved = match &ch.owner {
                    Some(to) => {
                        // D46 (revised): the move, decided with both owners
                        // as they are in this transaction.
                        let current = match &old.owner {
                            Some(u) => get_user_tx(tx, &org, u)?,
                            None => None,
                        };
                        let found = get_user_tx(tx, &org, to)?;
                        let s = client::move_owner(&old, current.as_ref(), to, found.as_ref())?;
                        Some((to.clone(), s))
                    }
                    None => None,
                };
                let effects = effect::of_client_update(&old, scopes, moved);
                crate::effects::apply(tx, &org, &effects, now, None)?;
                tx.prepare_cached(
                    "UPDATE clients SET name = ?2, redirect_uris = ?3, post_logout_redirect_uris = ?4,
                        scopes = ?5, admin_approved = ?6, updated_at = ?7
                     WHERE id = ?1",
                )
                .and_then(|mut s| {
                    s.execute(params![
                        id.as_str(),
                        new.name,
                        new.redirect_uris.join("\n"),
                        new.post_logout_redirect_uris.join("\n"),
                        scopes.bits() as i64,
                        new.admin_approved,
                        now.millis(),
                    ])
                })
                .map_err(db_err)?;
                let new = read_client(tx, &id)?;
                // D54: one `application.updated` for the whole change.
                let told = effect::of_client_change(&tell, &old, &new, now);
                crate::effects::apply(tx, &org, &told, now, None)?;
                Ok(new)
            })
            .await
    }
    async fn delete_client(
        &self,
        org: &OrgId,
        id: &ClientId,
        now: Timestamp,
        tell: &Teller,
    ) -> StoreResult<()> {
        let (org, id, tell) = (org.clone(), id.clone(), tell.clone());
        self.pool
            .write(move |tx| {
                let last = get_client_tx(tx, &org, &id)?.ok_or(StoreError::NotFound)?;
                let effects = effect::of_client_deletion(&tell, &last, now);
                crate::effects::apply(tx, &org, &effects, now, None)
            })
            .await
    }
    async fn approve_admin(
        &self,
        org: &OrgId,
        id: &ClientId,
        tell: &Teller,
    ) -> StoreResult<Client> {
        let (org, id, tell) = (org.clone(), id.clone(), tell.clone());
        self.pool
            .write(move |tx| {
                let old = get_client_tx(tx, &org, &id)?.ok_or(StoreError::NotFound)?;
                let now = Timestamp::now();
                let admin = ScopeSet::EMPTY.with(Scope::Admin).bits() as i64;
                let n = tx
                    .prepare_cached("UPDATE clients SET admin_approved = 1, scopes = scopes | ?1, updated_at = ?4 WHERE id = ?2 AND org_id = ?3")
                    .and_then(|mut s| s.execute(params![admin, id.as_str(), org.as_str(), now.millis()]))
                    .map_err(db_err)?;
                if n == 0 {
                    return Err(StoreError::NotFound);
                }
                let new = read_client(tx, &id)?;
                let told = effect::of_client_change(&tell, &old, &new, now);
                crate::effects::apply(tx, &org, &told, now, None)?;
                Ok(new)
            })
            .await
    }
    async fn rotate_client_secret(
        &self,
        org: &OrgId,
        id: &ClientId,
        secret_hash: &[u8; 32],
        previous_until: Option<Timestamp>,
        tell: &Teller,
    ) -> StoreResult<Client> {
        let (org, id, hash, tell) = (org.clone(), id.clone(), *secret_hash, tell.clone());
        self.pool
            .write(move |tx| {
                let now = Timestamp::now();
                let old = get_client_tx(tx, &org, &id)?.ok_or(StoreError::NotFound)?;
                let suspension = client::check_rotation(&old, previous_until.is_some())?;
                tx.prepare_cached(
                    "UPDATE clients SET
                        previous_secret_hash = CASE WHEN ?3 IS NULL THEN NULL ELSE secret_hash END,
                        previous_secret_until = ?3,
                        secret_hash = ?4,
                        updated_at = ?5
                     WHERE id = ?1 AND org_id = ?2",
                )
                .and_then(|mut s| {
                    s.execute(params![
                        id.as_str(),
                        org.as_str(),
                        previous_until.map(Timestamp::millis),
                        hash.to_vec(),
                        now.millis()
                    ])
                })
                .map_err(db_err)?;
                let next = effect::Effect::SetSuspension {
                    client: Box::new(old),
                    next: suspension,
                };
                crate::effects::apply(tx, &org, &[next], now, None)?;
                let new = read_client(tx, &id)?;
                let told = effect::of_secret_rotation(&tell, &new, now);
                crate::effects::apply(tx, &org, &told, now, None)?;
                Ok(new)
            })
            .await
    }
    fn clients_version(&self) -> Option<u64> {
        self.pool.clients_version()
    }
}

/// The client `id` as this transaction has just written it.
fn read_client(c: &Connection, id: &ClientId) -> StoreResult<Client> {
    c.prepare_cached(&format!("SELECT {CLIENT_COLS} FROM clients WHERE id = ?1"))
        .and_then(|mut s| s.query_row([id.as_str()], client_row))
        .map_err(db_err)
}

/// A client of `org` as it is in this transaction.
pub(crate) fn get_client_tx(
    c: &Connection,
    org: &OrgId,
    id: &ClientId,
) -> StoreResult<Option<Client>> {
    c.prepare_cached(&format!(
        "SELECT {CLIENT_COLS} FROM clients WHERE id = ?1 AND org_id = ?2"
    ))
    .and_then(|mut s| {
        s.query_row(params![id.as_str(), org.as_str()], client_row)
            .optional()
    })
    .map_err(db_err)
}

pub(crate) fn insert_client_row(
    c: &Connection,
    org: &OrgId,
    n: &NewClient,
    suspension: client::Suspension,
) -> StoreResult<()> {
    c.prepare_cached(
        "INSERT INTO clients (id, org_id, name, secret_hash, scopes, redirect_uris, admin_approved, owner_id, created_at, post_logout_redirect_uris, owner_inactive, rotation_required)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
    )
    .and_then(|mut s| {
        s.execute(params![
            n.id.as_str(),
            org.as_str(),
            n.name,
            n.secret_hash.map(|h| h.to_vec()),
            n.scopes.bits() as i64,
            n.redirect_uris.join("\n"),
            n.admin_approved,
            n.owner.as_ref().map(|u| u.as_str().to_owned()),
            n.created_at.millis(),
            n.post_logout_redirect_uris.join("\n"),
            suspension.owner_inactive,
            suspension.rotation_required,
        ])
    })
    .map_err(|e| match db_err(e) {
        StoreError::Internal(m) if m.contains("FOREIGN KEY") => StoreError::Rule(client::unknown_owner()),
        other => other,
    })?;
    Ok(())
}
