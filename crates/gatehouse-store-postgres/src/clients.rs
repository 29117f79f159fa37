//! PostgreSQL: client applications (D20, D22, D40).

use gatehouse_domain::event::Teller;

use super::*;

#[async_trait]
impl ClientStore for PgStore {
    async fn insert_client(
        &self,
        org: &OrgId,
        client: &NewClient,
        tell: &Teller,
    ) -> StoreResult<Client> {
        write_tx!(self, |tx| {
            let owner = match &client.owner {
                Some(id) => get_user_tx(&mut tx, org, id).await?,
                None => None,
            };
            let suspension = client::check_owner(client.owner.as_ref(), owner.as_ref())?;
            insert_client_row(&mut tx, org, client, suspension).await?;
            let made = Client {
                id: client.id.clone(),
                org: org.clone(),
                name: client.name.clone(),
                secret_hash: client.secret_hash,
                previous_secret: None,
                scopes: client.scopes,
                redirect_uris: client.redirect_uris.clone(),
                post_logout_redirect_uris: client.post_logout_redirect_uris.clone(),
                admin_approved: client.admin_approved,
                owner: client.owner.clone(),
                created_at: client.created_at,
                updated_at: client.created_at,
                suspension,
            };
            let told = effect::of_client_creation(tell, &made);
            crate::effects::apply(&mut tx, org, &told, made.created_at, None).await?;
            Ok(made)
        })
    }
    async fn resolve_client(&self, id: &ClientId) -> StoreResult<Option<Client>> {
        self.reads.clients.get(id.as_str()).await
    }
    async fn list_clients(&self, org: &OrgId) -> StoreResult<Vec<Client>> {
        let rows = query(&format!(
            "SELECT {CLIENT_COLS} FROM clients WHERE org_id = $1 ORDER BY created_at, id"
        ))
        .bind(org.as_str())
        .fetch_all(&self.pool)
        .await
        .map_err(db_err)?;
        rows.iter()
            .map(client_row)
            .collect::<Result<Vec<_>, _>>()
            .map_err(db_err)
    }
    async fn update_client(
        &self,
        org: &OrgId,
        id: &ClientId,
        changes: &ClientChanges,
        now: Timestamp,
        tell: &Teller,
    ) -> StoreResult<Client> {
        write_tx!(self, |tx| {
            let old = lock_client(&mut tx, org, id)
                .await?
                .ok_or(StoreError::NotFound)?;
            let (new, _) = changes.apply(&old);
            let scopes = new.scopes;
            let moved = match &changes.owner {
                Some(to) => {
                    // D46 (revised): the move, decided with both owners as
                    // they are in this transaction (the new one held active
                    // till commit).
                    let current = match &old.owner {
                        Some(u) => get_user_tx(&mut tx, org, u).await?,
                        None => None,
                    };
                    let found = user_with_lock(&mut tx, org, to, "FOR SHARE").await?;
                    let s = client::move_owner(&old, current.as_ref(), to, found.as_ref())?;
                    Some((to.clone(), s))
                }
                None => None,
            };
            // The move and the narrowing first (their revocations last of
            // them), so the row read back below is the application as it is.
            let effects = effect::of_client_update(&old, scopes, moved);
            crate::effects::apply(&mut tx, org, &effects, now, None).await?;
            let row = query(&format!(
                "UPDATE clients SET name = $2, redirect_uris = $3, post_logout_redirect_uris = $4,
                    scopes = $5, admin_approved = $6, updated_at = $7
                 WHERE id = $1 RETURNING {CLIENT_COLS}"
            ))
            .bind(id.as_str())
            .bind(&new.name)
            .bind(&new.redirect_uris)
            .bind(&new.post_logout_redirect_uris)
            .bind(bits(scopes))
            .bind(new.admin_approved)
            .bind(now.millis())
            .fetch_one(&mut *tx)
            .await?;
            let client = client_row(&row)?;
            // D54: one `application.updated` for the whole change.
            let told = effect::of_client_change(tell, &old, &client, now);
            crate::effects::apply(&mut tx, org, &told, now, None).await?;
            Ok(client)
        })
    }
    async fn delete_client(
        &self,
        org: &OrgId,
        id: &ClientId,
        now: Timestamp,
        tell: &Teller,
    ) -> StoreResult<()> {
        write_tx!(self, |tx| {
            let last = lock_client(&mut tx, org, id)
                .await?
                .ok_or(StoreError::NotFound)?;
            let effects = effect::of_client_deletion(tell, &last, now);
            crate::effects::apply(&mut tx, org, &effects, now, None).await?;
            Ok(())
        })
    }
    async fn approve_admin(
        &self,
        org: &OrgId,
        id: &ClientId,
        tell: &Teller,
    ) -> StoreResult<Client> {
        write_tx!(self, |tx| {
            let now = Timestamp::now();
            let old = lock_client(&mut tx, org, id)
                .await?
                .ok_or(StoreError::NotFound)?;
            let row = query(&format!(
                "UPDATE clients SET admin_approved = true, scopes = scopes | $1, updated_at = $4
                 WHERE id = $2 AND org_id = $3 RETURNING {CLIENT_COLS}"
            ))
            .bind(bits(ScopeSet::EMPTY.with(Scope::Admin)))
            .bind(id.as_str())
            .bind(org.as_str())
            .bind(now.millis())
            .fetch_optional(&mut *tx)
            .await?
            .ok_or(StoreError::NotFound)?;
            let new = client_row(&row)?;
            let told = effect::of_client_change(tell, &old, &new, now);
            crate::effects::apply(&mut tx, org, &told, now, None).await?;
            Ok(new)
        })
    }
    async fn rotate_client_secret(
        &self,
        org: &OrgId,
        id: &ClientId,
        secret_hash: &[u8; 32],
        previous_until: Option<Timestamp>,
        tell: &Teller,
    ) -> StoreResult<Client> {
        write_tx!(self, |tx| {
            let now = Timestamp::now();
            let old = lock_client(&mut tx, org, id)
                .await?
                .ok_or(StoreError::NotFound)?;
            // D46 (revised): an owed rotation takes no grace, and is lifted.
            let suspension = client::check_rotation(&old, previous_until.is_some())?;
            let next = effect::Effect::SetSuspension {
                client: Box::new(old),
                next: suspension,
            };
            crate::effects::apply(&mut tx, org, &[next], now, None).await?;
            // D20: the old secret keeps working until `previous_until`; none: at once.
            let row = query(&format!(
                "UPDATE clients SET
                     previous_secret_hash = CASE WHEN $3::bigint IS NULL THEN NULL ELSE secret_hash END,
                     previous_secret_until = $3::bigint,
                     secret_hash = $4,
                     updated_at = $5
                 WHERE id = $1 AND org_id = $2
                 RETURNING {CLIENT_COLS}"
            ))
            .bind(id.as_str())
            .bind(org.as_str())
            .bind(previous_until.map(Timestamp::millis))
            .bind(&secret_hash[..])
            .bind(now.millis())
            .fetch_one(&mut *tx)
            .await?;
            let new = client_row(&row)?;
            let told = effect::of_secret_rotation(tell, &new, now);
            crate::effects::apply(&mut tx, org, &told, now, None).await?;
            Ok(new)
        })
    }
}

/// A client of `org`, locked for the rest of the transaction.
pub(crate) async fn lock_client(
    c: &mut PgConnection,
    org: &OrgId,
    id: &ClientId,
) -> TxResult<Option<Client>> {
    let row = query(&format!(
        "SELECT {CLIENT_COLS} FROM clients WHERE id = $1 AND org_id = $2 FOR UPDATE"
    ))
    .bind(id.as_str())
    .bind(org.as_str())
    .fetch_optional(&mut *c)
    .await?;
    Ok(row.as_ref().map(client_row).transpose()?)
}

pub(crate) async fn insert_client_row(
    c: &mut PgConnection,
    org: &OrgId,
    n: &NewClient,
    suspension: client::Suspension,
) -> TxResult<()> {
    let r = query(
        "INSERT INTO clients (id, org_id, name, secret_hash, scopes, redirect_uris, admin_approved, owner_id, created_at, post_logout_redirect_uris, owner_inactive, rotation_required)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)",
    )
    .bind(n.id.as_str())
    .bind(org.as_str())
    .bind(&n.name)
    .bind(n.secret_hash.as_ref().map(|h| &h[..]))
    .bind(bits(n.scopes))
    .bind(&n.redirect_uris)
    .bind(n.admin_approved)
    .bind(n.owner.as_ref().map(UserId::as_str))
    .bind(n.created_at.millis())
    .bind(&n.post_logout_redirect_uris)
    .bind(suspension.owner_inactive)
    .bind(suspension.rotation_required)
    .execute(&mut *c)
    .await;
    match r {
        Ok(_) => Ok(()),
        Err(sqlx_core::Error::Database(d)) if d.code().as_deref() == Some("23503") => {
            Err(client::unknown_owner().into())
        }
        Err(e) => Err(e.into()),
    }
}
