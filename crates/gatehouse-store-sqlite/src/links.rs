//! SQLite: single-use links (D11, D19): invitations and password resets.

use gatehouse_domain::event::Teller;

use super::*;

#[async_trait]
impl LinkStore for SqliteStore {
    async fn resolve_link(
        &self,
        kind: LinkKind,
        digest: &[u8; 32],
    ) -> StoreResult<Option<LinkRecord>> {
        self.pool
            .read(|c| {
                let row = auth_state::link_row(c, kind, digest)?;
                let Some((org, user, expires_at, used_at)) = row else {
                    return Ok(None);
                };
                let Some(user) = get_user_tx(c, &org, &user)? else {
                    return Ok(None);
                };
                Ok(Some(LinkRecord {
                    kind,
                    org,
                    user,
                    expires_at,
                    used_at,
                }))
            })
            .await
    }
    async fn accept_invitation(
        &self,
        digest: &[u8; 32],
        password_hash: &str,
        now: Timestamp,
        tell: &Teller,
    ) -> StoreResult<User> {
        let (digest, hash, tell) = (*digest, password_hash.to_owned(), tell.clone());
        self.pool
            .write(move |tx| {
                let (org, u) = link_user(tx, LinkKind::Invitation, &digest, now)?;
                let id = u.id.clone();
                tx.prepare_cached("UPDATE users SET status = 'active', password_hash = ?1, updated_at = ?2, email_verified = 1 WHERE id = ?3 AND org_id = ?4")
                    .and_then(|mut s| s.execute(params![hash, now.millis().max(u.updated_at.millis()), id.as_str(), org.as_str()]))
                    .map_err(db_err)?;
                auth_state::use_link(tx, &digest, now)?;
                let after = get_user_tx(tx, &org, &id)?.ok_or(StoreError::NotFound)?;
                let told = effect::of_invitation_acceptance(&tell, &u, &after);
                crate::effects::apply(tx, &org, &told, now, None)?;
                Ok(after)
            })
            .await
    }
    async fn request_password_reset(
        &self,
        org: &OrgId,
        email: &Email,
        link: &NewLink,
        request: Option<&gatehouse_domain::event::RequestRef>,
    ) -> StoreResult<bool> {
        let (org, norm, link) = (org.clone(), email.normalized(), link.clone());
        let request = request.cloned();
        self.pool
            .write(move |tx| {
                let id: Option<String> = tx
                    .prepare_cached("SELECT id FROM users WHERE org_id = ?1 AND email_norm = ?2 AND status = 'active'")
                    .and_then(|mut s| s.query_row(params![org.as_str(), norm], |r| r.get(0)).optional())
                    .map_err(db_err)?;
                let Some(id) = id.map(UserId::from_trusted) else { return Ok(false) };
                let now = Timestamp::now();
                // D19 (revised): the rule decides on the sends it reads, in the
                // transaction that records this one.
                let since = now.plus_seconds(-gatehouse_domain::user::RESET_EMAIL_WINDOW_SECS);
                let recent: Vec<Timestamp> = tx
                    .prepare_cached("SELECT requested_at FROM reset_requests WHERE user_id = ?1 AND requested_at > ?2")
                    .and_then(|mut s| {
                        s.query_map(params![id.as_str(), since.millis()], |r| Ok(Timestamp::from_millis(r.get(0)?)))?
                            .collect::<Result<_, _>>()
                    })
                    .map_err(db_err)?;
                if !gatehouse_domain::user::reset_email_allowed(&recent, now) {
                    return Ok(false);
                }
                tx.prepare_cached("INSERT INTO reset_requests (user_id, requested_at) VALUES (?1, ?2)")
                    .and_then(|mut s| s.execute(params![id.as_str(), now.millis()]))
                    .map_err(db_err)?;
                let effects = effect::of_reset_request(&id, &link, request.as_ref(), now);
                crate::effects::apply(tx, &org, &effects, now, None)?;
                Ok(true)
            })
            .await
    }
    async fn reset_password(
        &self,
        digest: &[u8; 32],
        password_hash: &str,
        now: Timestamp,
        tell: &Teller,
    ) -> StoreResult<User> {
        let (digest, hash, tell) = (*digest, password_hash.to_owned(), tell.clone());
        self.pool
            .write(move |tx| {
                let (org, u) = link_user(tx, LinkKind::Reset, &digest, now)?;
                let id = u.id;
                tx.prepare_cached(
                    "UPDATE users SET password_hash = ?1, email_verified = 1 WHERE id = ?2 AND org_id = ?3",
                )
                .and_then(|mut s| s.execute(params![hash, id.as_str(), org.as_str()]))
                .map_err(db_err)?;
                auth_state::use_link(tx, &digest, now)?;
                // The user as updated, as a fresh read returns it.
                let after = get_user_tx(tx, &org, &id)?.ok_or(StoreError::NotFound)?;
                let effects = effect::of_password_reset(&tell, &after, now);
                // D57: the sessions a reset ends are told as its events
                // are, by the person the link was sent to.
                let by = tell.by_link(&id);
                crate::effects::apply(tx, &org, &effects, now, Some(&by))?;
                Ok(after)
            })
            .await
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
        let (org, user, hash, kept, mail, tell) = (
            org.clone(),
            user.clone(),
            password_hash.to_owned(),
            kept.clone(),
            mail.clone(),
            tell.clone(),
        );
        self.pool
            .write(move |tx| {
                let changed = tx
                    .prepare_cached(
                        "UPDATE users SET password_hash = ?1 WHERE id = ?2 AND org_id = ?3 AND status = 'active'",
                    )
                    .and_then(|mut s| s.execute(params![hash, user.as_str(), org.as_str()]))
                    .map_err(db_err)?;
                if changed == 0 {
                    return Err(StoreError::NotFound);
                }
                let after = get_user_tx(tx, &org, &user)?.ok_or(StoreError::NotFound)?;
                let effects = effect::of_password_change(&tell, &after, &kept, &mail, now);
                crate::effects::apply(tx, &org, &effects, now, Some(&tell))?;
                Ok(after)
            })
            .await
    }
}

/// The organization and user of a link of `kind` that may be used at `now`
/// (`link::usable`, D11, D19); used, expired, replaced and unknown links, and
/// links whose user is not in the state they are for, are `NotFound`.
pub(crate) fn link_user(
    c: &Connection,
    kind: LinkKind,
    digest: &[u8; 32],
    now: Timestamp,
) -> StoreResult<(OrgId, User)> {
    let (org, id, expires_at, used_at) =
        auth_state::link_row(c, kind, digest)?.ok_or(StoreError::NotFound)?;
    let u = get_user_tx(c, &org, &id)?.ok_or(StoreError::NotFound)?;
    if !link::usable(kind, used_at, expires_at, u.status, now) {
        return Err(StoreError::NotFound);
    }
    Ok((org, u))
}
