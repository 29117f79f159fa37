//! PostgreSQL: client applications (D20, D22, D40).

use super::*;

#[async_trait]
impl ClientStore for PgStore {
    async fn insert_client(&self, org: &OrgId, client: &NewClient) -> StoreResult<Client> {
        write_tx!(self, |tx| {
            let owner = match &client.owner {
                Some(id) => get_user_tx(&mut tx, org, id).await?,
                None => None,
            };
            client::check_owner(client.owner.as_ref(), owner.as_ref())?;
            insert_client_row(&mut tx, org, client).await?;
            Ok(Client {
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
            })
        })
    }
    async fn resolve_client(&self, id: &ClientId) -> StoreResult<Option<Client>> {
        let row = query(&format!("SELECT {CLIENT_COLS} FROM clients WHERE id = $1"))
            .bind(id.as_str())
            .fetch_optional(&self.pool)
            .await
            .map_err(db_err)?;
        row.as_ref().map(client_row).transpose().map_err(db_err)
    }
    async fn approve_admin(&self, org: &OrgId, id: &ClientId) -> StoreResult<Client> {
        write_tx!(self, |tx| {
            let row = query(&format!(
                "UPDATE clients SET admin_approved = true, scopes = scopes | $1
                 WHERE id = $2 AND org_id = $3 RETURNING {CLIENT_COLS}"
            ))
            .bind(bits(ScopeSet::EMPTY.with(Scope::Admin)))
            .bind(id.as_str())
            .bind(org.as_str())
            .fetch_optional(&mut *tx)
            .await?
            .ok_or(StoreError::NotFound)?;
            Ok(client_row(&row)?)
        })
    }
    async fn rotate_client_secret(
        &self,
        org: &OrgId,
        id: &ClientId,
        secret_hash: &[u8; 32],
        previous_until: Option<Timestamp>,
    ) -> StoreResult<Client> {
        write_tx!(self, |tx| {
            // D20: the old secret keeps working until `previous_until`; none: at once.
            let row = query(&format!(
                "UPDATE clients SET
                     previous_secret_hash = CASE WHEN $3::bigint IS NULL THEN NULL ELSE secret_hash END,
                     previous_secret_until = $3::bigint,
                     secret_hash = $4
                 WHERE id = $1 AND org_id = $2 AND secret_hash IS NOT NULL
                 RETURNING {CLIENT_COLS}"
            ))
            .bind(id.as_str())
            .bind(org.as_str())
            .bind(previous_until.map(Timestamp::millis))
            .bind(&secret_hash[..])
            .fetch_optional(&mut *tx)
            .await?
            .ok_or(StoreError::NotFound)?;
            Ok(client_row(&row)?)
        })
    }
}

pub(crate) async fn insert_client_row(
    c: &mut PgConnection,
    org: &OrgId,
    n: &NewClient,
) -> TxResult<()> {
    let r = query(
        "INSERT INTO clients (id, org_id, name, secret_hash, scopes, redirect_uris, admin_approved, owner_id, created_at, post_logout_redirect_uris)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
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
