//! PostgreSQL: single-use links (D11, D19): invitations and password resets.

use gatehouse_domain::event::Teller;

use super::*;

#[async_trait]
impl LinkStore for PgStore {
    async fn resolve_link(
        &self,
        kind: LinkKind,
        digest: &[u8; 32],
    ) -> StoreResult<Option<LinkRecord>> {
        let row = query(&format!(
            "SELECT {}, t.org_id, t.expires_at, t.used_at
             FROM user_tokens t JOIN users u ON u.id = t.user_id AND u.org_id = t.org_id
             WHERE t.digest = $1 AND t.kind = $2",
            USER_COLS
                .split(", ")
                .map(|c| format!("u.{c}"))
                .collect::<Vec<_>>()
                .join(", ")
        ))
        .bind(&digest[..])
        .bind(kind.as_str())
        .fetch_optional(&self.pool)
        .await
        .map_err(db_err)?;
        let Some(r) = row else { return Ok(None) };
        let rec = (|| {
            Ok::<_, sqlx_core::Error>(LinkRecord {
                kind,
                user: user_row(&r)?,
                org: OrgId::from_trusted(r.try_get(8)?),
                expires_at: Timestamp::from_millis(r.try_get(9)?),
                used_at: r.try_get::<Option<i64>, _>(10)?.map(Timestamp::from_millis),
            })
        })()
        .map_err(db_err)?;
        Ok(Some(rec))
    }
    async fn accept_invitation(
        &self,
        digest: &[u8; 32],
        password_hash: &str,
        now: Timestamp,
        tell: &Teller,
    ) -> StoreResult<User> {
        write_tx!(self, |tx| {
            let (org, u) = link_user(&mut tx, LinkKind::Invitation, digest, now).await?;
            let id = u.id.clone();
            auth_state::use_link(&mut tx, digest, now).await?;
            query(
                "UPDATE users SET status = 'active', password_hash = $1, updated_at = $2, email_verified = true
                 WHERE id = $3 AND org_id = $4",
            )
            .bind(password_hash)
            .bind(now.millis().max(u.updated_at.millis()))
            .bind(id.as_str())
            .bind(org.as_str())
            .execute(&mut *tx)
            .await?;
            let after = get_user_tx(&mut tx, &org, &id)
                .await?
                .ok_or(StoreError::NotFound)?;
            let told = effect::of_invitation_acceptance(tell, &u, &after);
            crate::effects::apply(&mut tx, &org, &told, now, None).await?;
            Ok(after)
        })
    }
    async fn request_password_reset(
        &self,
        org: &OrgId,
        email: &Email,
        link: &NewLink,
        request: Option<&gatehouse_domain::event::RequestRef>,
    ) -> StoreResult<bool> {
        write_tx!(self, |tx| {
            let id: Option<String> = query_scalar(
                "SELECT id FROM users WHERE org_id = $1 AND email_norm = $2 AND status = 'active' FOR UPDATE",
            )
            .bind(org.as_str())
            .bind(email.normalized())
            .fetch_optional(&mut *tx)
            .await?;
            let Some(id) = id.map(UserId::from_trusted) else {
                return Ok(false);
            };
            let now = Timestamp::now();
            // D19 (revised): the rule decides on the sends it reads, in the
            // transaction that records this one (the user row is locked).
            let since = now.plus_seconds(-gatehouse_domain::user::RESET_EMAIL_WINDOW_SECS);
            let recent: Vec<i64> = query_scalar(
                "SELECT requested_at FROM reset_requests WHERE user_id = $1 AND requested_at > $2",
            )
            .bind(id.as_str())
            .bind(since.millis())
            .fetch_all(&mut *tx)
            .await?;
            let recent: Vec<Timestamp> = recent.into_iter().map(Timestamp::from_millis).collect();
            if !gatehouse_domain::user::reset_email_allowed(&recent, now) {
                return Ok(false);
            }
            query("INSERT INTO reset_requests (user_id, requested_at) VALUES ($1, $2)")
                .bind(id.as_str())
                .bind(now.millis())
                .execute(&mut *tx)
                .await?;
            crate::effects::apply(
                &mut tx,
                org,
                &effect::of_reset_request(&id, link, request, now),
                now,
                None,
            )
            .await?;
            Ok(true)
        })
    }
    async fn reset_password(
        &self,
        digest: &[u8; 32],
        password_hash: &str,
        now: Timestamp,
        tell: &Teller,
    ) -> StoreResult<User> {
        write_tx!(self, |tx| {
            let (org, u) = link_user(&mut tx, LinkKind::Reset, digest, now).await?;
            let id = u.id;
            auth_state::use_link(&mut tx, digest, now).await?;
            query("UPDATE users SET password_hash = $1, email_verified = true WHERE id = $2 AND org_id = $3")
                .bind(password_hash)
                .bind(id.as_str())
                .bind(org.as_str())
                .execute(&mut *tx)
                .await?;
            // The user as updated, as a fresh read returns it.
            let after = get_user_tx(&mut tx, &org, &id)
                .await?
                .ok_or(StoreError::NotFound)?;
            let effects = effect::of_password_reset(tell, &after, now);
            // D57: the sessions a reset ends are told as its events are,
            // by the person the link was sent to.
            let by = tell.by_link(&id);
            crate::effects::apply(&mut tx, &org, &effects, now, Some(&by)).await?;
            Ok(after)
        })
    }
    async fn change_password(
        &self,
        org: &OrgId,
        user: &UserId,
        password_hash: &str,
        kept: &gatehouse_domain::SessionId,
        mail: &gatehouse_domain::link::OutboundEmail,
        now: Timestamp,
        tell: &Teller,
    ) -> StoreResult<User> {
        write_tx!(self, |tx| {
            let changed = query(
                "UPDATE users SET password_hash = $1 WHERE id = $2 AND org_id = $3 AND status = 'active'",
            )
            .bind(password_hash)
            .bind(user.as_str())
            .bind(org.as_str())
            .execute(&mut *tx)
            .await?
            .rows_affected();
            if changed == 0 {
                return Err(StoreError::NotFound.into());
            }
            let after = get_user_tx(&mut tx, org, user)
                .await?
                .ok_or(StoreError::NotFound)?;
            let effects = effect::of_password_change(tell, &after, kept, mail, now);
            crate::effects::apply(&mut tx, org, &effects, now, Some(tell)).await?;
            Ok(after)
        })
    }
}

/// The organization and user of a link of `kind` that may be used at `now`
/// (`link::usable`, D11, D19), both locked; used, expired, replaced and
/// unknown links, and links whose user is not in the state they are for, are
/// `NotFound`.
pub(crate) async fn link_user(
    c: &mut PgConnection,
    kind: LinkKind,
    digest: &[u8; 32],
    now: Timestamp,
) -> TxResult<(OrgId, User)> {
    let (org, id, expires_at, used_at) = auth_state::lock_link(c, kind, digest)
        .await?
        .ok_or(StoreError::NotFound)?;
    let u = lock_user(c, &org, &id).await?.ok_or(StoreError::NotFound)?;
    if !link::usable(kind, used_at, expires_at, u.status, now) {
        return Err(StoreError::NotFound.into());
    }
    Ok((org, u))
}
