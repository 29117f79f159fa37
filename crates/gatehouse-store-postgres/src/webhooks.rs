//! PostgreSQL: webhook endpoints (D55).

use gatehouse_domain::EndpointId;
use gatehouse_domain::event::Teller;
use gatehouse_domain::webhook::{self, DisabledReason, Endpoint, EndpointPatch, Ordering};
use gatehouse_store::{SealedSecrets, WebhookStore, decode};
use sqlx_postgres::PgRow;

use crate::rows::{RowResult, corrupt};

use super::*;

const ENDPOINT_COLS: &str = "id, url, description, enabled_events, ordering, disabled_reason, owner_id, created_at, updated_at";

/// The class of the two-key advisory lock under which an organization's
/// endpoints are counted and inserted (the two-key space never meets the
/// one-key locks of revocations and sequencing).
const ENDPOINT_LOCK_CLASS: i32 = 55;

fn endpoint_row(r: &PgRow) -> RowResult<Endpoint> {
    let id_text: &str = r.try_get(0)?;
    let id = EndpointId::parse(id_text)
        .ok_or_else(|| corrupt("webhook_endpoints", "id", id_text, "is not a valid id"))?;
    let at = |column| ("webhook_endpoints", column, id.as_str());
    let patterns: &str = r.try_get(3)?;
    let enabled_events = decode::patterns(patterns)
        .map_err(|p| corrupt("webhook_endpoints", "enabled_events", id.as_str(), &p))?;
    let disabled = match r.try_get::<Option<&str>, _>(5)? {
        None => None,
        Some(t) => Some(DisabledReason::parse(t).ok_or_else(|| {
            corrupt(
                "webhook_endpoints",
                "disabled_reason",
                id.as_str(),
                &format!("holds {t:?}"),
            )
        })?),
    };
    Ok(Endpoint {
        url: r.try_get(1)?,
        description: r.try_get(2)?,
        enabled_events,
        ordering: crate::rows::decode(r, 4, at("ordering"), Ordering::parse)?,
        disabled,
        owner: r.try_get::<Option<String>, _>(6)?.map(UserId::from_trusted),
        created_at: Timestamp::from_millis(r.try_get(7)?),
        updated_at: Timestamp::from_millis(r.try_get(8)?),
        id,
    })
}

/// The endpoint, locked for the rest of the transaction.
async fn lock_endpoint(c: &mut PgConnection, org: &OrgId, id: &EndpointId) -> TxResult<Endpoint> {
    let row = query(&format!(
        "SELECT {ENDPOINT_COLS} FROM webhook_endpoints WHERE id = $1 AND org_id = $2 FOR UPDATE"
    ))
    .bind(id.as_str())
    .bind(org.as_str())
    .fetch_optional(&mut *c)
    .await?
    .ok_or(StoreError::NotFound)?;
    Ok(endpoint_row(&row)?)
}

/// Writes `e`'s changeable fields (its secrets apart).
async fn write_endpoint(c: &mut PgConnection, org: &OrgId, e: &Endpoint) -> TxResult<()> {
    query(
        "UPDATE webhook_endpoints SET url = $3, description = $4, enabled_events = $5, ordering = $6,
         disabled_reason = $7, owner_id = $8, updated_at = $9 WHERE id = $1 AND org_id = $2",
    )
    .bind(e.id.as_str())
    .bind(org.as_str())
    .bind(&e.url)
    .bind(&e.description)
    .bind(decode::patterns_text(&e.enabled_events))
    .bind(e.ordering.as_str())
    .bind(e.disabled.map(DisabledReason::as_str))
    .bind(e.owner.as_ref().map(UserId::as_str))
    .bind(e.updated_at.millis())
    .execute(&mut *c)
    .await?;
    Ok(())
}

/// D55: disables, in the transaction of the change that removes their
/// owner, the enabled endpoints `owner` owns; returns them as disabled,
/// oldest first (each tells `webhook_endpoint.disabled`).
pub(crate) async fn disable_owned_endpoints(
    c: &mut PgConnection,
    org: &OrgId,
    owner: &UserId,
    now: Timestamp,
) -> TxResult<Vec<Endpoint>> {
    let rows = query(&format!(
        "SELECT {ENDPOINT_COLS} FROM webhook_endpoints
         WHERE org_id = $1 AND owner_id = $2 AND disabled_reason IS NULL
         ORDER BY created_at, id FOR UPDATE"
    ))
    .bind(org.as_str())
    .bind(owner.as_str())
    .fetch_all(&mut *c)
    .await?;
    let mut disabled = Vec::with_capacity(rows.len());
    for row in &rows {
        let e = endpoint_row(row)?;
        if let Some(next) = webhook::disabled_for(&e, DisabledReason::OwnerRemoved, now) {
            write_endpoint(c, org, &next).await?;
            disabled.push(next);
        }
    }
    Ok(disabled)
}

#[async_trait]
impl WebhookStore for PgStore {
    async fn insert_endpoint(
        &self,
        org: &OrgId,
        e: &Endpoint,
        sealed_secret: &[u8],
        tell: &Teller,
    ) -> StoreResult<()> {
        let told = effect::of_endpoint_creation(tell, e);
        write_tx!(self, |tx| {
            // Concurrent creations in one organization count one at a time.
            query("SELECT pg_advisory_xact_lock($1, hashtext($2))")
                .bind(ENDPOINT_LOCK_CLASS)
                .bind(org.as_str())
                .execute(&mut *tx)
                .await?;
            let n: i64 = query_scalar("SELECT count(*) FROM webhook_endpoints WHERE org_id = $1")
                .bind(org.as_str())
                .fetch_one(&mut *tx)
                .await?;
            if n >= webhook::MAX_ENDPOINTS as i64 {
                return Err(StoreError::Rule(webhook::limit_reached()).into());
            }
            query(
                "INSERT INTO webhook_endpoints (id, org_id, url, description, enabled_events, ordering,
                 disabled_reason, owner_id, secret, created_at, updated_at)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
            )
            .bind(e.id.as_str())
            .bind(org.as_str())
            .bind(&e.url)
            .bind(&e.description)
            .bind(decode::patterns_text(&e.enabled_events))
            .bind(e.ordering.as_str())
            .bind(e.disabled.map(DisabledReason::as_str))
            .bind(e.owner.as_ref().map(UserId::as_str))
            .bind(sealed_secret)
            .bind(e.created_at.millis())
            .bind(e.updated_at.millis())
            .execute(&mut *tx)
            .await?;
            crate::effects::apply(&mut tx, org, &told, e.created_at, None).await
        })
    }

    async fn get_endpoint(&self, org: &OrgId, id: &EndpointId) -> StoreResult<Option<Endpoint>> {
        let row = query(&format!(
            "SELECT {ENDPOINT_COLS} FROM webhook_endpoints WHERE id = $1 AND org_id = $2"
        ))
        .bind(id.as_str())
        .bind(org.as_str())
        .fetch_optional(&self.pool)
        .await
        .map_err(db_err)?;
        row.as_ref().map(endpoint_row).transpose().map_err(db_err)
    }

    async fn list_endpoints(&self, org: &OrgId, page: Page) -> StoreResult<Listing<Endpoint>> {
        snapshot_read!(self, |c| {
            let total: i64 =
                query_scalar("SELECT count(*) FROM webhook_endpoints WHERE org_id = $1")
                    .bind(org.as_str())
                    .fetch_one(&mut *c)
                    .await?;
            let rows = query(&format!(
                "SELECT {ENDPOINT_COLS} FROM webhook_endpoints WHERE org_id = $1
                 ORDER BY created_at DESC, id DESC LIMIT $2 OFFSET $3"
            ))
            .bind(org.as_str())
            .bind(i64::from(page.limit))
            .bind(i64::try_from(page.offset).unwrap_or(i64::MAX))
            .fetch_all(&mut *c)
            .await?;
            let items = rows
                .iter()
                .map(endpoint_row)
                .collect::<Result<Vec<_>, _>>()?;
            Ok::<_, TxError>(Listing {
                items,
                total: total as u64,
            })
        })
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
        write_tx!(self, |tx| {
            let current = lock_endpoint(&mut tx, org, id).await?;
            let Some(next) = webhook::patched(&current, patch, by, now) else {
                return Ok(current);
            };
            write_endpoint(&mut tx, org, &next).await?;
            let told = effect::of_endpoint_update(tell, &current, &next);
            crate::effects::apply(&mut tx, org, &told, now, None).await?;
            Ok(next)
        })
    }

    async fn delete_endpoint(
        &self,
        org: &OrgId,
        id: &EndpointId,
        now: Timestamp,
        tell: &Teller,
    ) -> StoreResult<()> {
        write_tx!(self, |tx| {
            let last = lock_endpoint(&mut tx, org, id).await?;
            query("DELETE FROM webhook_endpoints WHERE id = $1 AND org_id = $2")
                .bind(id.as_str())
                .bind(org.as_str())
                .execute(&mut *tx)
                .await?;
            let told = effect::of_endpoint_deletion(tell, &last, now);
            crate::effects::apply(&mut tx, org, &told, now, None).await
        })
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
        write_tx!(self, |tx| {
            let current = lock_endpoint(&mut tx, org, id).await?;
            query(
                "UPDATE webhook_endpoints SET previous_secret = secret, previous_until = $3,
                 secret = $4, updated_at = $5 WHERE id = $1 AND org_id = $2",
            )
            .bind(id.as_str())
            .bind(org.as_str())
            .bind(previous_until.millis())
            .bind(sealed_secret)
            .bind(now.millis())
            .execute(&mut *tx)
            .await?;
            let next = Endpoint {
                updated_at: now,
                ..current.clone()
            };
            let told = effect::of_endpoint_update(tell, &current, &next);
            crate::effects::apply(&mut tx, org, &told, now, None).await?;
            Ok(next)
        })
    }

    async fn endpoint_secrets(
        &self,
        org: &OrgId,
        id: &EndpointId,
    ) -> StoreResult<Option<SealedSecrets>> {
        let row: Option<(Vec<u8>, Option<Vec<u8>>, Option<i64>)> = query_as(
            "SELECT secret, previous_secret, previous_until FROM webhook_endpoints
             WHERE id = $1 AND org_id = $2",
        )
        .bind(id.as_str())
        .bind(org.as_str())
        .fetch_optional(&self.pool)
        .await
        .map_err(db_err)?;
        Ok(row.map(|(current, previous, until)| SealedSecrets {
            current,
            previous: match (previous, until) {
                (Some(p), Some(u)) => Some((p, Timestamp::from_millis(u))),
                _ => None,
            },
        }))
    }
}
