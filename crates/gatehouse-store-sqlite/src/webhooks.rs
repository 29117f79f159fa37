//! SQLite: webhook endpoints (D55).

use gatehouse_domain::EndpointId;
use gatehouse_domain::event::Teller;
use gatehouse_domain::webhook::{self, DisabledReason, Endpoint, EndpointPatch, Ordering};
use gatehouse_store::{SealedSecrets, WebhookStore, decode};

use super::*;

pub(crate) const ENDPOINT_COLS: &str = "id, url, description, enabled_events, ordering, disabled_reason, owner_id, created_at, updated_at";

pub(crate) fn endpoint_row(r: &Row<'_>) -> rusqlite::Result<Endpoint> {
    let id = decode_id(r, 0, "webhook_endpoints", EndpointId::parse)?;
    let at = |column| ("webhook_endpoints", column, id.as_str());
    let patterns: String = r.get(3)?;
    let enabled_events = decode::patterns(&patterns)
        .map_err(|p| corrupt("webhook_endpoints", "enabled_events", id.as_str(), &p))?;
    let disabled = match r.get::<_, Option<String>>(5)? {
        None => None,
        Some(t) => Some(DisabledReason::parse(&t).ok_or_else(|| {
            corrupt(
                "webhook_endpoints",
                "disabled_reason",
                id.as_str(),
                &format!("holds {t:?}"),
            )
        })?),
    };
    Ok(Endpoint {
        url: r.get(1)?,
        description: r.get(2)?,
        enabled_events,
        ordering: decode(r, 4, at("ordering"), Ordering::parse)?,
        disabled,
        owner: r.get::<_, Option<String>>(6)?.map(UserId::from_trusted),
        created_at: Timestamp::from_millis(r.get(7)?),
        updated_at: Timestamp::from_millis(r.get(8)?),
        id,
    })
}

pub(crate) fn get_endpoint_tx(
    c: &Connection,
    org: &OrgId,
    id: &EndpointId,
) -> StoreResult<Option<Endpoint>> {
    c.prepare_cached(&format!(
        "SELECT {ENDPOINT_COLS} FROM webhook_endpoints WHERE id = ?1 AND org_id = ?2"
    ))
    .and_then(|mut s| {
        s.query_row(params![id.as_str(), org.as_str()], endpoint_row)
            .optional()
    })
    .map_err(db_err)
}

/// Writes `e`'s changeable fields (its secrets apart).
fn write_endpoint(c: &Connection, org: &OrgId, e: &Endpoint) -> StoreResult<()> {
    c.prepare_cached(
        "UPDATE webhook_endpoints SET url = ?3, description = ?4, enabled_events = ?5, ordering = ?6,
         disabled_reason = ?7, owner_id = ?8, updated_at = ?9 WHERE id = ?1 AND org_id = ?2",
    )
    .and_then(|mut s| {
        s.execute(params![
            e.id.as_str(),
            org.as_str(),
            e.url,
            e.description,
            decode::patterns_text(&e.enabled_events),
            e.ordering.as_str(),
            e.disabled.map(DisabledReason::as_str),
            e.owner.as_ref().map(UserId::as_str),
            e.updated_at.millis()
        ])
    })
    .map_err(db_err)?;
    Ok(())
}

/// D55: disables, in the transaction of the change that removes their
/// owner, the enabled endpoints `owner` owns; returns them as disabled,
/// oldest first (each tells `webhook_endpoint.disabled`).
pub(crate) fn disable_owned_endpoints(
    c: &Connection,
    org: &OrgId,
    owner: &UserId,
    now: Timestamp,
) -> StoreResult<Vec<Endpoint>> {
    let owned = c
        .prepare_cached(&format!(
            "SELECT {ENDPOINT_COLS} FROM webhook_endpoints
             WHERE org_id = ?1 AND owner_id = ?2 AND disabled_reason IS NULL
             ORDER BY created_at, id"
        ))
        .and_then(|mut s| {
            s.query_map(params![org.as_str(), owner.as_str()], endpoint_row)?
                .collect::<rusqlite::Result<Vec<_>>>()
        })
        .map_err(db_err)?;
    let mut disabled = Vec::with_capacity(owned.len());
    for e in owned {
        if let Some(next) = webhook::disabled_for(&e, DisabledReason::OwnerRemoved, now) {
            write_endpoint(c, org, &next)?;
            disabled.push(next);
        }
    }
    Ok(disabled)
}

#[async_trait]
impl WebhookStore for SqliteStore {
    async fn insert_endpoint(
        &self,
        org: &OrgId,
        e: &Endpoint,
        sealed_secret: &[u8],
        tell: &Teller,
    ) -> StoreResult<()> {
        let told = effect::of_endpoint_creation(tell, e);
        let (org, e, secret) = (org.clone(), e.clone(), sealed_secret.to_vec());
        self.pool
            .write(move |tx| {
                // The single writer makes the count and the insert one step.
                let n: i64 = tx
                    .prepare_cached("SELECT count(*) FROM webhook_endpoints WHERE org_id = ?1")
                    .and_then(|mut s| s.query_row([org.as_str()], |r| r.get(0)))
                    .map_err(db_err)?;
                if n >= webhook::MAX_ENDPOINTS as i64 {
                    return Err(StoreError::Rule(webhook::limit_reached()));
                }
                tx.prepare_cached(
                    "INSERT INTO webhook_endpoints (id, org_id, url, description, enabled_events, ordering,
                     disabled_reason, owner_id, secret, created_at, updated_at)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
                )
                .and_then(|mut s| {
                    s.execute(params![
                        e.id.as_str(),
                        org.as_str(),
                        e.url,
                        e.description,
                        decode::patterns_text(&e.enabled_events),
                        e.ordering.as_str(),
                        e.disabled.map(DisabledReason::as_str),
                        e.owner.as_ref().map(UserId::as_str),
                        secret,
                        e.created_at.millis(),
                        e.updated_at.millis()
                    ])
                })
                .map_err(db_err)?;
                effects::apply(tx, &org, &told, e.created_at, None)
            })
            .await
    }

    async fn get_endpoint(&self, org: &OrgId, id: &EndpointId) -> StoreResult<Option<Endpoint>> {
        self.pool.read(|c| get_endpoint_tx(c, org, id)).await
    }

    async fn list_endpoints(&self, org: &OrgId, page: Page) -> StoreResult<Listing<Endpoint>> {
        let org = org.clone();
        self.pool
            .read(move |c| {
                let total: i64 = c
                    .prepare_cached("SELECT count(*) FROM webhook_endpoints WHERE org_id = ?1")
                    .and_then(|mut s| s.query_row([org.as_str()], |r| r.get(0)))
                    .map_err(db_err)?;
                let items = c
                    .prepare_cached(&format!(
                        "SELECT {ENDPOINT_COLS} FROM webhook_endpoints WHERE org_id = ?1
                         ORDER BY created_at DESC, id DESC LIMIT ?2 OFFSET ?3"
                    ))
                    .and_then(|mut s| {
                        s.query_map(
                            params![
                                org.as_str(),
                                i64::from(page.limit),
                                i64::try_from(page.offset).unwrap_or(i64::MAX)
                            ],
                            endpoint_row,
                        )?
                        .collect::<rusqlite::Result<Vec<_>>>()
                    })
                    .map_err(db_err)?;
                Ok(Listing {
                    items,
                    total: total as u64,
                })
            })
            .await
    }

    async fn update_endpoint(
        &self,
        org: &OrgId,
        id: &EndpointId,
        patch: &EndpointPatch,
        by: Option<&UserId>,
        now: Timestamp,
        tell: &Teller,
    ) -> StoreResult<Endpoint> {
        let (org, id, patch, by, tell) = (
            org.clone(),
            id.clone(),
            patch.clone(),
            by.cloned(),
            tell.clone(),
        );
        self.pool
            .write(move |tx| {
                let current = get_endpoint_tx(tx, &org, &id)?.ok_or(StoreError::NotFound)?;
                let Some(next) = webhook::patched(&current, &patch, by.as_ref(), now) else {
                    return Ok(current);
                };
                write_endpoint(tx, &org, &next)?;
                let told = effect::of_endpoint_update(&tell, &current, &next);
                effects::apply(tx, &org, &told, now, None)?;
                Ok(next)
            })
            .await
    }

    async fn delete_endpoint(
        &self,
        org: &OrgId,
        id: &EndpointId,
        now: Timestamp,
        tell: &Teller,
    ) -> StoreResult<()> {
        let (org, id, tell) = (org.clone(), id.clone(), tell.clone());
        self.pool
            .write(move |tx| {
                let last = get_endpoint_tx(tx, &org, &id)?.ok_or(StoreError::NotFound)?;
                tx.prepare_cached("DELETE FROM webhook_endpoints WHERE id = ?1 AND org_id = ?2")
                    .and_then(|mut s| s.execute(params![id.as_str(), org.as_str()]))
                    .map_err(db_err)?;
                let told = effect::of_endpoint_deletion(&tell, &last, now);
                effects::apply(tx, &org, &told, now, None)
            })
            .await
    }

    async fn rotate_endpoint_secret(
        &self,
        org: &OrgId,
        id: &EndpointId,
        sealed_secret: &[u8],
        previous_until: Timestamp,
        now: Timestamp,
        tell: &Teller,
    ) -> StoreResult<Endpoint> {
        let (org, id, secret, tell) = (
            org.clone(),
            id.clone(),
            sealed_secret.to_vec(),
            tell.clone(),
        );
        self.pool
            .write(move |tx| {
                let current = get_endpoint_tx(tx, &org, &id)?.ok_or(StoreError::NotFound)?;
                tx.prepare_cached(
                    "UPDATE webhook_endpoints SET previous_secret = secret, previous_until = ?3,
                     secret = ?4, updated_at = ?5 WHERE id = ?1 AND org_id = ?2",
                )
                .and_then(|mut s| {
                    s.execute(params![
                        id.as_str(),
                        org.as_str(),
                        previous_until.millis(),
                        secret,
                        now.millis()
                    ])
                })
                .map_err(db_err)?;
                let next = Endpoint {
                    updated_at: now,
                    ..current.clone()
                };
                let told = effect::of_endpoint_update(&tell, &current, &next);
                effects::apply(tx, &org, &told, now, None)?;
                Ok(next)
            })
            .await
    }

    async fn endpoint_secrets(
        &self,
        org: &OrgId,
        id: &EndpointId,
    ) -> StoreResult<Option<SealedSecrets>> {
        self.pool
            .read(|c| {
                c.prepare_cached(
                    "SELECT secret, previous_secret, previous_until FROM webhook_endpoints
                     WHERE id = ?1 AND org_id = ?2",
                )
                .and_then(|mut s| {
                    s.query_row(params![id.as_str(), org.as_str()], |r| {
                        let previous =
                            match (r.get::<_, Option<Vec<u8>>>(1)?, r.get::<_, Option<i64>>(2)?) {
                                (Some(p), Some(until)) => Some((p, Timestamp::from_millis(until))),
                                _ => None,
                            };
                        Ok(SealedSecrets {
                            current: r.get(0)?,
                            previous,
                        })
                    })
                    .optional()
                })
                .map_err(db_err)
            })
            .await
    }
}
