//! PostgreSQL: users of an organization and the D11/D13 rules applied in their transactions.

use gatehouse_domain::event::Teller;

use super::*;

#[async_trait]
impl UserStore for PgStore {
    async fn insert_user_with_link(
        &self,
        org: &OrgId,
        u: &NewUser,
        invitation: Option<&NewLink>,
        tell: &Teller,
    ) -> StoreResult<User> {
        let user = u.user();
        let sent = effect::of_user_creation(tell, &user, invitation);
        write_tx!(self, |tx| {
            insert_user_row(&mut tx, org, u, u.created_at).await?;
            effects::apply(&mut tx, org, &sent, u.created_at, None).await?;
            Ok(user.clone())
        })
    }
    async fn get_user(&self, org: &OrgId, id: &UserId) -> StoreResult<Option<User>> {
        self.reads.users.get(org, id.as_str()).await
    }
    async fn operator_find_user(&self, id: &UserId) -> StoreResult<Option<User>> {
        let row = query(&format!("SELECT {USER_COLS} FROM users WHERE id = $1"))
            .bind(id.as_str())
            .fetch_optional(&self.pool)
            .await
            .map_err(db_err)?;
        row.as_ref().map(user_row).transpose().map_err(db_err)
    }
    async fn list_users(
        &self,
        org: &OrgId,
        filter: &UserFilter,
        page: Page,
    ) -> StoreResult<Listing<User>> {
        let q = Filters::users(filter);
        snapshot_read!(self, |c| lists::page(c, &lists::USERS, org, &q, page).await)
    }
    async fn list_users_after(
        &self,
        org: &OrgId,
        filter: &UserFilter,
        after: Option<&UserId>,
        limit: u32,
    ) -> StoreResult<Option<Vec<User>>> {
        let q = Filters::users(filter);
        let after = after.map(UserId::as_str);
        read!(self, |c| lists::after(
            c,
            &lists::USERS,
            org,
            &q,
            after,
            limit
        )
        .await)
    }
    async fn update_user(
        &self,
        org: &OrgId,
        id: &UserId,
        patch: &UserPatch,
        now: Timestamp,
        tell: &Teller,
    ) -> StoreResult<UserChange> {
        write_tx!(self, |tx| {
            let current = lock_user(&mut tx, org, id)
                .await?
                .ok_or(StoreError::NotFound)?;
            let change = user::apply_patch(&current, patch, now)?;
            if !change.changed {
                return Ok(change);
            }
            let others = other_active_admins(&mut tx, org, &current, Some(&change.user)).await?;
            user::check_change(&current, &change.user, others)?;
            let u = &change.user;
            query(
                "UPDATE users SET name = $1, role = $2, status = $3, updated_at = $4
                 WHERE id = $5 AND org_id = $6",
            )
            .bind(u.name.as_str())
            .bind(u.role.as_str())
            .bind(u.status.as_str())
            .bind(u.updated_at.millis())
            .bind(id.as_str())
            .bind(org.as_str())
            .execute(&mut *tx)
            .await?;
            // D11, D13, D29, D46 (revised): what the change reaches.
            // D54: each record reached tells its event, the user's last.
            let effects = effect::of_user_change(tell, &current, &change);
            effects::apply(&mut tx, org, &effects, now, Some(tell)).await?;
            Ok(change)
        })
    }
    async fn delete_user_at(
        &self,
        org: &OrgId,
        id: &UserId,
        transfer_to: Option<&UserId>,
        now: Timestamp,
        tell: &Teller,
    ) -> StoreResult<()> {
        write_tx!(self, |tx| {
            let current = lock_user(&mut tx, org, id)
                .await?
                .ok_or(StoreError::NotFound)?;
            let others = other_active_admins(&mut tx, org, &current, None).await?;
            let owned: i64 =
                query_scalar("SELECT count(*) FROM clients WHERE org_id = $1 AND owner_id = $2")
                    .bind(org.as_str())
                    .bind(id.as_str())
                    .fetch_one(&mut *tx)
                    .await?;
            // The heir stays active until we commit.
            let heir = match transfer_to {
                Some(h) => user_with_lock(&mut tx, org, h, "FOR SHARE").await?,
                None => None,
            };
            let plan =
                user::check_delete(&current, others, owned as u64, transfer_to, heir.as_ref())?;
            // D13, D46 (revised): the applications move, the user's
            // sessions, tokens and keys end, the row goes last.
            let effects = effect::of_user_deletion(tell, &current, &plan, now);
            effects::apply(&mut tx, org, &effects, now, Some(tell)).await?;
            Ok(())
        })
    }
    async fn find_user_by_email(
        &self,
        org: &OrgId,
        email: &Email,
    ) -> StoreResult<Option<(User, Option<String>)>> {
        let row = query(&format!(
            "SELECT {USER_COLS}, password_hash FROM users WHERE org_id = $1 AND email_norm = $2"
        ))
        .bind(org.as_str())
        .bind(email.normalized())
        .fetch_optional(&self.pool)
        .await
        .map_err(db_err)?;
        row.map(|r| Ok((user_row(&r)?, r.try_get::<Option<String>, _>(8)?)))
            .transpose()
            .map_err(db_err)
    }
    async fn email_verified(&self, org: &OrgId, id: &UserId) -> StoreResult<bool> {
        let v: Option<bool> =
            query_scalar("SELECT email_verified FROM users WHERE org_id = $1 AND id = $2")
                .bind(org.as_str())
                .bind(id.as_str())
                .fetch_optional(&self.pool)
                .await
                .map_err(db_err)?;
        Ok(v.unwrap_or(false))
    }
    async fn reissue_invitation(
        &self,
        org: &OrgId,
        id: &UserId,
        link: &NewLink,
        tell: &Teller,
    ) -> StoreResult<()> {
        write_tx!(self, |tx| {
            let u = lock_user(&mut tx, org, id)
                .await?
                .ok_or(StoreError::NotFound)?;
            user::check_reinvite(&u)?;
            let now = Timestamp::now();
            effects::apply(
                &mut tx,
                org,
                &effect::of_reinvitation(tell, &u, link, now),
                now,
                None,
            )
            .await
        })
    }
}

pub(crate) async fn get_user_tx(
    c: &mut PgConnection,
    org: &OrgId,
    id: &UserId,
) -> TxResult<Option<User>> {
    let row = query(&format!(
        "SELECT {USER_COLS} FROM users WHERE id = $1 AND org_id = $2"
    ))
    .bind(id.as_str())
    .bind(org.as_str())
    .fetch_optional(&mut *c)
    .await?;
    Ok(row.as_ref().map(user_row).transpose()?)
}

/// The user, locked for the rest of the transaction (`FOR UPDATE`).
pub(crate) async fn lock_user(
    c: &mut PgConnection,
    org: &OrgId,
    id: &UserId,
) -> TxResult<Option<User>> {
    user_with_lock(c, org, id, "FOR UPDATE").await
}

pub(crate) async fn user_with_lock(
    c: &mut PgConnection,
    org: &OrgId,
    id: &UserId,
    lock: &str,
) -> TxResult<Option<User>> {
    let row = query(&format!(
        "SELECT {USER_COLS} FROM users WHERE id = $1 AND org_id = $2 {lock}"
    ))
    .bind(id.as_str())
    .bind(org.as_str())
    .fetch_optional(&mut *c)
    .await?;
    Ok(row.as_ref().map(user_row).transpose()?)
}

/// D13: the organization's active admins besides `before`, counted when
/// going to `after` (`None`: deleted) takes an active admin away
/// (`user::removes_active_admin`). Every transaction that may take away an
/// active admin first locks the organization's row (`FOR NO KEY UPDATE`,
/// which does not block inserts' foreign-key checks), so such transactions
/// run one at a time per organization and each counts what the previous one
/// committed: two concurrent demotions of the last two admins cannot both
/// succeed.
pub(crate) async fn other_active_admins(
    c: &mut PgConnection,
    org: &OrgId,
    before: &User,
    after: Option<&User>,
) -> TxResult<Option<u64>> {
    if !user::removes_active_admin(before, after) {
        return Ok(None);
    }
    query("SELECT 1 FROM organizations WHERE id = $1 FOR NO KEY UPDATE")
        .bind(org.as_str())
        .execute(&mut *c)
        .await?;
    let n: i64 = query_scalar(
        "SELECT count(*) FROM users WHERE org_id = $1 AND role = 'admin' AND status = 'active' AND id <> $2",
    )
    .bind(org.as_str())
    .bind(before.id.as_str())
    .fetch_one(&mut *c)
    .await?;
    Ok(Some(n as u64))
}

pub(crate) async fn insert_user_row(
    c: &mut PgConnection,
    org: &OrgId,
    u: &NewUser,
    updated_at: Timestamp,
) -> TxResult<()> {
    query(
        "INSERT INTO users (id, org_id, email, email_norm, name, role, status, password_hash, created_at, updated_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
    )
    .bind(u.id.as_str())
    .bind(org.as_str())
    .bind(u.email.as_str())
    .bind(u.email.normalized())
    .bind(u.name.as_str())
    .bind(u.role.as_str())
    .bind(u.status.as_str())
    .bind(u.password_hash.as_deref())
    .bind(u.created_at.millis())
    .bind(updated_at.millis())
    .execute(&mut *c)
    .await?;
    Ok(())
}
