//! SQLite: users of an organization and the D11/D13 rules applied in their transactions.

use gatehouse_domain::event::Teller;

use super::*;

#[async_trait]
impl UserStore for SqliteStore {
    async fn insert_user_with_link(
        &self,
        org: &OrgId,
        u: &NewUser,
        invitation: Option<&NewLink>,
        tell: &Teller,
    ) -> StoreResult<User> {
        let user = u.user();
        let sent = effect::of_user_creation(tell, &user, invitation);
        let (org, u) = (org.clone(), u.clone());
        self.pool
            .write(move |tx| {
                tx.prepare_cached(
                    "INSERT INTO users (id, org_id, email, email_norm, name, role, status, password_hash, created_at, updated_at)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?9)",
                )
                .and_then(|mut s| {
                    s.execute(params![
                        u.id.as_str(),
                        org.as_str(),
                        u.email.as_str(),
                        u.email.normalized(),
                        u.name.as_str(),
                        u.role.as_str(),
                        u.status.as_str(),
                        u.password_hash,
                        u.created_at.millis(),
                    ])
                })
                .map_err(db_err)?;
                effects::apply(tx, &org, &sent, u.created_at, None)?;
                Ok(user)
            })
            .await
    }
    async fn get_user(&self, org: &OrgId, id: &UserId) -> StoreResult<Option<User>> {
        self.pool.read(|c| get_user_tx(c, org, id)).await
    }
    async fn operator_find_user(&self, id: &UserId) -> StoreResult<Option<User>> {
        let id = id.clone();
        self.pool
            .read(move |c| {
                c.prepare_cached(&format!("SELECT {USER_COLS} FROM users WHERE id = ?1"))
                    .and_then(|mut s| s.query_row([id.as_str()], user_row).optional())
                    .map_err(db_err)
            })
            .await
    }
    async fn list_users(
        &self,
        org: &OrgId,
        filter: &UserFilter,
        page: Page,
    ) -> StoreResult<Listing<User>> {
        let (org, filter) = (org.clone(), filter.clone());
        self.pool
            .read_blocking(move |c| list_users_sync(c, &org, &filter, page))
            .await
    }
    async fn list_users_after(
        &self,
        org: &OrgId,
        filter: &UserFilter,
        after: Option<&UserId>,
        limit: u32,
    ) -> StoreResult<Option<Vec<User>>> {
        let (w, after) = (user_where(org, filter), after.map(|a| a.to_string()));
        self.pool
            .read_blocking(move |c| {
                cursor_page(c, "users", USER_COLS, w, after.as_deref(), limit, user_row)
            })
            .await
    }
    async fn update_user(
        &self,
        org: &OrgId,
        id: &UserId,
        patch: &UserPatch,
        now: Timestamp,
        tell: &Teller,
    ) -> StoreResult<UserChange> {
        let (org, id, patch, tell) = (org.clone(), id.clone(), patch.clone(), tell.clone());
        self.pool
            .write(move |tx| {
                let current = get_user_tx(tx, &org, &id)?.ok_or(StoreError::NotFound)?;
                let change = user::apply_patch(&current, &patch, now)?;
                if !change.changed {
                    return Ok(change);
                }
                let others = user::removes_active_admin(&current, Some(&change.user))
                    .then(|| other_active_admins(tx, &org, &id))
                    .transpose()?;
                user::check_change(&current, &change.user, others)?;
                let u = &change.user;
                tx.prepare_cached(
                    "UPDATE users SET name = ?1, role = ?2, status = ?3, updated_at = ?4 WHERE id = ?5 AND org_id = ?6",
                )
                .and_then(|mut s| {
                    s.execute(params![u.name.as_str(), u.role.as_str(), u.status.as_str(), u.updated_at.millis(), id.as_str(), org.as_str()])
                })
                .map_err(db_err)?;
                // D11, D13, D29, D46 (revised): what the change reaches.
                // D54: each record reached tells its event, the user's last.
                let effects = effect::of_user_change(&tell, &current, &change);
                effects::apply(tx, &org, &effects, now, Some(&tell))?;
                Ok(change)
            })
            .await
    }
    async fn delete_user_at(
        &self,
        org: &OrgId,
        id: &UserId,
        transfer_to: Option<&UserId>,
        now: Timestamp,
        tell: &Teller,
    ) -> StoreResult<()> {
        let (org, id, heir, tell) = (org.clone(), id.clone(), transfer_to.cloned(), tell.clone());
        self.pool
            .write(move |tx| {
                let current = get_user_tx(tx, &org, &id)?.ok_or(StoreError::NotFound)?;
                let others = user::removes_active_admin(&current, None)
                    .then(|| other_active_admins(tx, &org, &id))
                    .transpose()?;
                let owned: i64 = tx
                    .prepare_cached(
                        "SELECT count(*) FROM clients WHERE org_id = ?1 AND owner_id = ?2",
                    )
                    .and_then(|mut s| s.query_row(params![org.as_str(), id.as_str()], |r| r.get(0)))
                    .map_err(db_err)?;
                let heir_row = match &heir {
                    Some(h) => get_user_tx(tx, &org, h)?,
                    None => None,
                };
                let plan = user::check_delete(
                    &current,
                    others,
                    owned as u64,
                    heir.as_ref(),
                    heir_row.as_ref(),
                )?;
                // D13, D46 (revised): the applications move, the user's
                // sessions, tokens and keys end, the row goes last.
                let effects = effect::of_user_deletion(&tell, &current, &plan, now);
                effects::apply(tx, &org, &effects, now, Some(&tell))?;
                Ok(())
            })
            .await
    }
    async fn find_user_by_email(
        &self,
        org: &OrgId,
        email: &Email,
    ) -> StoreResult<Option<(User, Option<String>)>> {
        let norm = email.normalized();
        self.pool
            .read(|c| {
                c.prepare_cached(&format!("SELECT {USER_COLS}, password_hash FROM users WHERE org_id = ?1 AND email_norm = ?2"))
                    .and_then(|mut s| {
                        s.query_row(params![org.as_str(), norm], |r| Ok((user_row(r)?, r.get::<_, Option<String>>(8)?)))
                            .optional()
                    })
                    .map_err(db_err)
            })
            .await
    }
    async fn email_verified(&self, org: &OrgId, id: &UserId) -> StoreResult<bool> {
        self.pool
            .read(|c| {
                c.prepare_cached("SELECT email_verified FROM users WHERE org_id = ?1 AND id = ?2")
                    .and_then(|mut s| {
                        s.query_row(params![org.as_str(), id.as_str()], |r| r.get::<_, bool>(0))
                            .optional()
                    })
                    .map(|v| v.unwrap_or(false))
                    .map_err(db_err)
            })
            .await
    }
    async fn reissue_invitation(
        &self,
        org: &OrgId,
        id: &UserId,
        link: &NewLink,
        tell: &Teller,
    ) -> StoreResult<()> {
        let (org, id, link, tell) = (org.clone(), id.clone(), link.clone(), tell.clone());
        self.pool
            .write(move |tx| {
                let u = get_user_tx(tx, &org, &id)?.ok_or(StoreError::NotFound)?;
                user::check_reinvite(&u)?;
                let now = Timestamp::now();
                effects::apply(
                    tx,
                    &org,
                    &effect::of_reinvitation(&tell, &u, &link, now),
                    now,
                    None,
                )
            })
            .await
    }
}

pub(crate) fn get_user_tx(c: &Connection, org: &OrgId, id: &UserId) -> StoreResult<Option<User>> {
    c.prepare_cached(&format!(
        "SELECT {USER_COLS} FROM users WHERE id = ?1 AND org_id = ?2"
    ))
    .and_then(|mut s| {
        s.query_row(params![id.as_str(), org.as_str()], user_row)
            .optional()
    })
    .map_err(db_err)
}

/// D13: the organization's active admins besides `id`, counted for
/// `user::check_change` / `user::check_delete` when the change takes an
/// active admin away (`user::removes_active_admin`). The single writer makes
/// the count and the write it guards atomic.
pub(crate) fn other_active_admins(c: &Connection, org: &OrgId, id: &UserId) -> StoreResult<u64> {
    c.prepare_cached(
        "SELECT count(*) FROM users WHERE org_id = ?1 AND role = 'admin' AND status = 'active' AND id <> ?2",
    )
    .and_then(|mut s| s.query_row(params![org.as_str(), id.as_str()], |r| r.get::<_, i64>(0)))
    .map(|n| n as u64)
    .map_err(db_err)
}
