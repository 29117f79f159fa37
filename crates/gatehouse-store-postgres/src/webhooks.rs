//! PostgreSQL: webhook endpoints (D55).

use gatehouse_domain::event::Teller;
use gatehouse_domain::webhook::{
    self, AfterFailure, Attempt, AttemptError, DisabledReason, Endpoint, EndpointPatch, Next,
    Ordering, Trigger,
};
use gatehouse_domain::{AttemptId, EndpointId, EventId};
use gatehouse_store::{
    AttemptFilter, AttemptStatus, Claimed, DeliveryStore, Finished, Made, SealedSecrets,
    WebhookStore, decode,
};
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

/// D55: disabling an endpoint, for any reason, cancels its pending
/// deliveries: each queued attempt is logged `cancelled`.
pub(crate) async fn cancel_pending(
    c: &mut PgConnection,
    org: &OrgId,
    endpoint: &EndpointId,
) -> TxResult<()> {
    for sql in [
        "UPDATE webhook_attempts SET error = 'cancelled', next_attempt_at = NULL
         WHERE id IN (SELECT attempt_id FROM webhook_deliveries WHERE endpoint_id = $1 AND org_id = $2)",
        "DELETE FROM webhook_deliveries WHERE endpoint_id = $1 AND org_id = $2",
    ] {
        query(sql)
            .bind(endpoint.as_str())
            .bind(org.as_str())
            .execute(&mut *c)
            .await?;
    }
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
            cancel_pending(c, org, &next.id).await?;
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
            // Fan-out starts from here for an organization's first endpoint.
            query(
                "INSERT INTO webhook_cursors (org_id, last_sequence)
                 VALUES ($1, coalesce((SELECT max(sequence) FROM events WHERE org_id = $1), 0))
                 ON CONFLICT (org_id) DO NOTHING",
            )
            .bind(org.as_str())
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
            if next.disabled.is_some() && current.disabled.is_none() {
                cancel_pending(&mut tx, org, id).await?;
            }
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
            for sql in [
                "DELETE FROM webhook_deliveries WHERE endpoint_id = $1 AND org_id = $2",
                "DELETE FROM webhook_attempts WHERE endpoint_id = $1 AND org_id = $2",
                "DELETE FROM webhook_endpoints WHERE id = $1 AND org_id = $2",
            ] {
                query(sql)
                    .bind(id.as_str())
                    .bind(org.as_str())
                    .execute(&mut *tx)
                    .await?;
            }
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

    async fn operator_find_endpoint(
        &self,
        id: &EndpointId,
    ) -> StoreResult<Option<(OrgId, Endpoint)>> {
        let row = query(&format!(
            "SELECT {ENDPOINT_COLS}, org_id FROM webhook_endpoints WHERE id = $1"
        ))
        .bind(id.as_str())
        .fetch_optional(&self.pool)
        .await
        .map_err(db_err)?;
        row.as_ref()
            .map(|r| -> RowResult<(OrgId, Endpoint)> {
                Ok((OrgId::from_trusted(r.try_get(9)?), endpoint_row(r)?))
            })
            .transpose()
            .map_err(db_err)
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

/// The advisory locks of fan-out and claims (one-key space; the
/// revocation and sequencer locks use other keys).
const FANOUT_LOCK: i64 = 0x5745_4246_414e_4f55; // "WEBFANOU"
const CLAIM_LOCK: i64 = 0x5745_4243_4c41_494d; // "WEBCLAIM"

const ATTEMPT_COLS: &str = "id, endpoint_id, event_id, attempt, trigger, started_at, duration_ms, response_status, error, response_excerpt, next_attempt_at";

fn attempt_row(r: &PgRow) -> RowResult<Attempt> {
    let id_text: &str = r.try_get(0)?;
    let id = AttemptId::parse(id_text)
        .ok_or_else(|| corrupt("webhook_attempts", "id", id_text, "is not a valid id"))?;
    let at = |column| ("webhook_attempts", column, id.as_str());
    let error = match r.try_get::<Option<&str>, _>(8)? {
        None => None,
        Some(t) => Some(AttemptError::parse(t).ok_or_else(|| {
            corrupt(
                "webhook_attempts",
                "error",
                id.as_str(),
                &format!("holds {t:?}"),
            )
        })?),
    };
    Ok(Attempt {
        endpoint: crate::rows::decode(r, 1, at("endpoint_id"), EndpointId::parse)?,
        event: crate::rows::decode(r, 2, at("event_id"), EventId::parse)?,
        attempt: u32::try_from(r.try_get::<i32, _>(3)?).unwrap_or(0),
        trigger: crate::rows::decode(r, 4, at("trigger"), Trigger::parse)?,
        started_at: r.try_get::<Option<i64>, _>(5)?.map(Timestamp::from_millis),
        duration_ms: r.try_get(6)?,
        response_status: r
            .try_get::<Option<i32>, _>(7)?
            .and_then(|s| u16::try_from(s).ok()),
        error,
        response_excerpt: r.try_get(9)?,
        next_attempt_at: r.try_get::<Option<i64>, _>(10)?.map(Timestamp::from_millis),
        id,
    })
}

/// Queues attempt `attempt` of a delivery, due at `due`; returns its id.
async fn queue_attempt(
    c: &mut PgConnection,
    org: &str,
    endpoint: &str,
    event: &str,
    attempt: u32,
    trigger: Trigger,
    due: Timestamp,
) -> TxResult<AttemptId> {
    let id = AttemptId::generate();
    query(
        "INSERT INTO webhook_attempts (id, org_id, endpoint_id, event_id, attempt, trigger, next_attempt_at, shown_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $7)",
    )
    .bind(id.as_str())
    .bind(org)
    .bind(endpoint)
    .bind(event)
    .bind(i32::try_from(attempt).unwrap_or(i32::MAX))
    .bind(trigger.as_str())
    .bind(due.millis())
    .execute(&mut *c)
    .await?;
    Ok(id)
}

/// Queues a delivery of `event` to `endpoint` (its first attempt due at
/// `now`); returns the queued attempt's id.
#[allow(clippy::too_many_arguments)]
async fn queue_delivery_tx(
    c: &mut PgConnection,
    org: &str,
    endpoint: &str,
    event: &str,
    object: &str,
    sequence: i64,
    trigger: Trigger,
    now: Timestamp,
) -> TxResult<AttemptId> {
    let attempt = queue_attempt(c, org, endpoint, event, 1, trigger, now).await?;
    query(
        "INSERT INTO webhook_deliveries (org_id, endpoint_id, event_id, ordering_key, sequence, trigger, attempts, attempt_id, next_attempt_at)
         VALUES ($1, $2, $3, $4, $5, $6, 0, $7, $8)",
    )
    .bind(org)
    .bind(endpoint)
    .bind(event)
    .bind(object)
    .bind(sequence)
    .bind(trigger.as_str())
    .bind(attempt.as_str())
    .bind(now.millis())
    .execute(&mut *c)
    .await?;
    Ok(attempt)
}

async fn fan_out_org(
    c: &mut PgConnection,
    org: &str,
    after: i64,
    now: Timestamp,
    limit: u32,
) -> TxResult<u64> {
    let events: Vec<(String, String, String, i64, i64)> = query_as(
        "SELECT id, type, object_id, sequence, created_at FROM events
         WHERE org_id = $1 AND sequence > $2 ORDER BY sequence LIMIT $3",
    )
    .bind(org)
    .bind(after)
    .bind(i64::from(limit))
    .fetch_all(&mut *c)
    .await?;
    let Some(last) = events.last().map(|e| e.3) else {
        return Ok(0);
    };
    let endpoints: Vec<(String, String, i64)> = query_as(
        "SELECT id, enabled_events, created_at FROM webhook_endpoints
         WHERE org_id = $1 AND disabled_reason IS NULL",
    )
    .bind(org)
    .fetch_all(&mut *c)
    .await?;
    let mut wanted = Vec::with_capacity(endpoints.len());
    for (id, p, at) in endpoints {
        let p = decode::patterns(&p).map_err(|e| {
            StoreError::Internal(format!("webhook_endpoints.enabled_events of {id} {e}"))
        })?;
        wanted.push((id, p, at));
    }
    let mut made = 0;
    for (event, kind, object, sequence, created_at) in &events {
        let Some(kind) = gatehouse_domain::event::EventType::parse(kind) else {
            return Err(
                StoreError::Internal(format!("events.type of {event} holds {kind:?}")).into(),
            );
        };
        for (endpoint, patterns, since) in &wanted {
            if *created_at < *since || !webhook::wants(patterns, kind) {
                continue;
            }
            queue_delivery_tx(
                c,
                org,
                endpoint,
                event,
                object,
                *sequence,
                Trigger::Scheduled,
                now,
            )
            .await?;
            made += 1;
        }
    }
    query("UPDATE webhook_cursors SET last_sequence = $2 WHERE org_id = $1")
        .bind(org)
        .bind(last)
        .execute(&mut *c)
        .await?;
    Ok(made)
}

#[async_trait]
impl DeliveryStore for PgStore {
    async fn fan_out(&self, now: Timestamp, limit: u32) -> StoreResult<u64> {
        let behind: bool = query_scalar(
            "SELECT EXISTS (SELECT 1 FROM webhook_cursors w JOIN event_heads h USING (org_id)
             WHERE h.last_sequence > w.last_sequence)",
        )
        .fetch_one(&self.pool)
        .await
        .map_err(db_err)?;
        if !behind {
            return Ok(0);
        }
        write_tx!(self, |tx| {
            // One process fans out at a time; the others skip this round.
            let mine: bool = query_scalar("SELECT pg_try_advisory_xact_lock($1)")
                .bind(FANOUT_LOCK)
                .fetch_one(&mut *tx)
                .await?;
            if !mine {
                return Ok(0);
            }
            let cursors: Vec<(String, i64)> = query_as(
                "SELECT w.org_id, w.last_sequence FROM webhook_cursors w JOIN event_heads h USING (org_id)
                 WHERE h.last_sequence > w.last_sequence",
            )
            .fetch_all(&mut *tx)
            .await?;
            let mut made = 0;
            for (org, after) in cursors {
                made += fan_out_org(&mut tx, &org, after, now, limit).await?;
            }
            Ok(made)
        })
    }

    async fn claim_deliveries(
        &self,
        node: &str,
        now: Timestamp,
        lease_until: Timestamp,
        max_in_flight: u32,
        limit: u32,
    ) -> StoreResult<Vec<Claimed>> {
        let due: bool = query_scalar(
            "SELECT EXISTS (SELECT 1 FROM webhook_deliveries
             WHERE next_attempt_at <= $1 AND (lease_until IS NULL OR lease_until < $1))",
        )
        .bind(now.millis())
        .fetch_one(&self.pool)
        .await
        .map_err(db_err)?;
        if !due {
            return Ok(Vec::new());
        }
        write_tx!(self, |tx| {
            // Claims one at a time across nodes: the per-endpoint counts
            // below stay true until this commits.
            query("SELECT pg_advisory_xact_lock($1)")
                .bind(CLAIM_LOCK)
                .execute(&mut *tx)
                .await?;
            type Row = (
                i64,
                String,
                String,
                String,
                i32,
                String,
                String,
                String,
                String,
                String,
                i64,
            );
            let candidates: Vec<Row> = query_as(
                // Fair across endpoints (see the SQLite backend): at most
                // `max_in_flight` due deliveries of each endpoint are
                // candidates, none that `per_object` holds back.
                "SELECT id, org_id, endpoint_id, event_id, attempts, attempt_id, trigger,
                        url, ordering, ordering_key, sequence FROM (
                   SELECT d.id, d.org_id, d.endpoint_id, d.event_id, d.attempts, d.attempt_id, d.trigger,
                          e.url, e.ordering, d.ordering_key, d.sequence, d.next_attempt_at,
                          row_number() OVER (PARTITION BY d.endpoint_id ORDER BY d.next_attempt_at, d.id) AS rank
                   FROM webhook_deliveries d JOIN webhook_endpoints e ON e.id = d.endpoint_id
                   WHERE d.next_attempt_at <= $1 AND (d.lease_until IS NULL OR d.lease_until < $1)
                     AND e.disabled_reason IS NULL
                     AND (e.ordering <> 'per_object' OR NOT EXISTS (
                           SELECT 1 FROM webhook_deliveries p
                           WHERE p.endpoint_id = d.endpoint_id AND p.ordering_key = d.ordering_key
                             AND p.sequence < d.sequence))
                 ) due WHERE rank <= $3
                 ORDER BY next_attempt_at, id LIMIT $2",
            )
            .bind(now.millis())
            .bind(i64::from(limit.saturating_mul(4)))
            .bind(i64::from(max_in_flight))
            .fetch_all(&mut *tx)
            .await?;
            let counts: Vec<(String, i64)> = query_as(
                "SELECT endpoint_id, count(*) FROM webhook_deliveries
                 WHERE lease_until >= $1 GROUP BY endpoint_id",
            )
            .bind(now.millis())
            .fetch_all(&mut *tx)
            .await?;
            let mut in_flight: std::collections::HashMap<String, u32> = counts
                .into_iter()
                .map(|(e, n)| (e, u32::try_from(n).unwrap_or(u32::MAX)))
                .collect();
            let mut taken_keys = std::collections::HashSet::new();
            let mut claimed = Vec::new();
            for (
                id,
                org,
                endpoint,
                event,
                attempts,
                attempt_id,
                trigger,
                url,
                ordering,
                key,
                sequence,
            ) in candidates
            {
                if claimed.len() >= limit as usize {
                    break;
                }
                let busy = in_flight.entry(endpoint.clone()).or_insert(0);
                if *busy >= max_in_flight {
                    continue;
                }
                if ordering == Ordering::PerObject.as_str() {
                    if !taken_keys.insert((endpoint.clone(), key.clone())) {
                        continue;
                    }
                    let earlier: bool = query_scalar(
                        "SELECT EXISTS (SELECT 1 FROM webhook_deliveries
                         WHERE endpoint_id = $1 AND ordering_key = $2 AND sequence < $3)",
                    )
                    .bind(&endpoint)
                    .bind(&key)
                    .bind(sequence)
                    .fetch_one(&mut *tx)
                    .await?;
                    if earlier {
                        continue;
                    }
                }
                query("UPDATE webhook_deliveries SET lease_owner = $2, lease_until = $3 WHERE id = $1")
                    .bind(id)
                    .bind(node)
                    .bind(lease_until.millis())
                    .execute(&mut *tx)
                    .await?;
                *busy += 1;
                let corrupt_text = |column: &str, v: &str| {
                    StoreError::Internal(format!("webhook_deliveries.{column} of {id} holds {v:?}"))
                };
                claimed.push(Claimed {
                    delivery: id,
                    org: OrgId::from_trusted(org),
                    endpoint: EndpointId::parse(&endpoint)
                        .ok_or_else(|| corrupt_text("endpoint_id", &endpoint))?,
                    url,
                    attempt_id: AttemptId::parse(&attempt_id)
                        .ok_or_else(|| corrupt_text("attempt_id", &attempt_id))?,
                    attempt: u32::try_from(attempts).unwrap_or(0) + 1,
                    trigger: Trigger::parse(&trigger)
                        .ok_or_else(|| corrupt_text("trigger", &trigger))?,
                    event: EventId::parse(&event)
                        .ok_or_else(|| corrupt_text("event_id", &event))?,
                });
            }
            Ok(claimed)
        })
    }

    async fn finish_attempt(
        &self,
        node: &str,
        claimed: &Claimed,
        made: &Made,
        next: Next,
        disable_after: std::time::Duration,
        tell: &Teller,
    ) -> StoreResult<Finished> {
        write_tx!(self, |tx| {
            let owner: Option<Option<String>> =
                query_scalar("SELECT lease_owner FROM webhook_deliveries WHERE id = $1 FOR UPDATE")
                    .bind(claimed.delivery)
                    .fetch_optional(&mut *tx)
                    .await?;
            if owner.flatten().as_deref() != Some(node) {
                return Ok(Finished::default());
            }
            let retry_at = match next {
                Next::RetryAt(at) => Some(at),
                _ => None,
            };
            query(
                "UPDATE webhook_attempts SET started_at = $2, duration_ms = $3, response_status = $4,
                 error = $5, response_excerpt = $6, next_attempt_at = $7, shown_at = $2 WHERE id = $1",
            )
            .bind(claimed.attempt_id.as_str())
            .bind(made.started_at.millis())
            .bind(made.duration_ms)
            .bind(made.response_status.map(i32::from))
            .bind(made.error.map(AttemptError::as_str))
            .bind(&made.excerpt)
            .bind(retry_at.map(Timestamp::millis))
            .execute(&mut *tx)
            .await?;
            let org = claimed.org.as_str();
            match next {
                Next::RetryAt(at) => {
                    let queued = queue_attempt(
                        &mut tx,
                        org,
                        claimed.endpoint.as_str(),
                        claimed.event.as_str(),
                        claimed.attempt + 1,
                        claimed.trigger,
                        at,
                    )
                    .await?;
                    query(
                        "UPDATE webhook_deliveries SET attempts = $2, attempt_id = $3, next_attempt_at = $4,
                         lease_owner = NULL, lease_until = NULL WHERE id = $1",
                    )
                    .bind(claimed.delivery)
                    .bind(i32::try_from(claimed.attempt).unwrap_or(i32::MAX))
                    .bind(queued.as_str())
                    .bind(at.millis())
                    .execute(&mut *tx)
                    .await?;
                }
                Next::Done | Next::Exhausted | Next::Gone => {
                    query("DELETE FROM webhook_deliveries WHERE id = $1")
                        .bind(claimed.delivery)
                        .execute(&mut *tx)
                        .await?;
                }
            }
            let mut finished = Finished::default();
            if next == Next::Done {
                query("UPDATE webhook_endpoints SET failing_since = NULL WHERE id = $1 AND org_id = $2 AND failing_since IS NOT NULL")
                    .bind(claimed.endpoint.as_str())
                    .bind(org)
                    .execute(&mut *tx)
                    .await?;
                return Ok(finished);
            }
            let state: Option<(i64, Option<i64>)> = query_as(
                "UPDATE webhook_endpoints SET failing_since = coalesce(failing_since, $3)
                 WHERE id = $1 AND org_id = $2 RETURNING failing_since, failing_mailed_at",
            )
            .bind(claimed.endpoint.as_str())
            .bind(org)
            .bind(made.started_at.millis())
            .fetch_optional(&mut *tx)
            .await?;
            let Some((since, mailed)) = state else {
                return Ok(finished);
            };
            let current = lock_endpoint(&mut tx, &claimed.org, &claimed.endpoint).await?;
            match webhook::after_failure(
                &current,
                next,
                Timestamp::from_millis(since),
                mailed.map(Timestamp::from_millis),
                disable_after,
                made.started_at,
            ) {
                AfterFailure::Disable(off) => {
                    write_endpoint(&mut tx, &claimed.org, &off).await?;
                    cancel_pending(&mut tx, &claimed.org, &off.id).await?;
                    let told = effect::of_endpoint_disabled(tell, &off);
                    crate::effects::apply(&mut tx, &claimed.org, &told, made.started_at, None)
                        .await?;
                    finished.disabled = Some(off);
                }
                AfterFailure::MailAdmins => {
                    query("UPDATE webhook_endpoints SET failing_mailed_at = $3 WHERE id = $1 AND org_id = $2")
                        .bind(claimed.endpoint.as_str())
                        .bind(org)
                        .bind(made.started_at.millis())
                        .execute(&mut *tx)
                        .await?;
                    finished.mail_failing = Some(current);
                }
                AfterFailure::Nothing => {}
            }
            Ok(finished)
        })
    }

    async fn mail_admins(
        &self,
        org: &OrgId,
        subject: &str,
        body: &str,
        now: Timestamp,
    ) -> StoreResult<u64> {
        let n = query(
            "INSERT INTO outbox (recipient, subject, body, created_at, next_attempt_at)
             SELECT email, $2, $3, $4, $4 FROM users
             WHERE org_id = $1 AND role = 'admin' AND status = 'active'",
        )
        .bind(org.as_str())
        .bind(subject)
        .bind(body)
        .bind(now.millis())
        .execute(&self.pool)
        .await
        .map_err(db_err)?
        .rows_affected();
        Ok(n)
    }

    async fn release_deliveries(&self, node: &str, deliveries: &[i64]) -> StoreResult<()> {
        if deliveries.is_empty() {
            return Ok(());
        }
        query(
            "UPDATE webhook_deliveries SET lease_owner = NULL, lease_until = NULL
             WHERE id = ANY($1) AND lease_owner = $2",
        )
        .bind(deliveries)
        .bind(node)
        .execute(&self.pool)
        .await
        .map_err(db_err)?;
        Ok(())
    }

    async fn release_orphaned_leases(&self) -> StoreResult<u64> {
        // Nodes share the database: a lease may be another node's, live;
        // one a dead node left runs out (the attempt timeout and a margin).
        Ok(0)
    }

    async fn list_attempts(
        &self,
        org: &OrgId,
        endpoint: &EndpointId,
        filter: &AttemptFilter,
        page: Page,
    ) -> StoreResult<Listing<Attempt>> {
        let status = match filter.status {
            Some(AttemptStatus::Pending) => " AND started_at IS NULL AND error IS NULL",
            Some(AttemptStatus::Succeeded) => {
                " AND started_at IS NOT NULL AND error IS NULL AND response_status BETWEEN 200 AND 299"
            }
            Some(AttemptStatus::Failed) => {
                " AND (error IS NOT NULL OR (started_at IS NOT NULL AND (response_status IS NULL OR response_status NOT BETWEEN 200 AND 299)))"
            }
            None => "",
        };
        let w = format!(
            "org_id = $1 AND endpoint_id = $2 AND ($3::text IS NULL OR event_id = $3)
             AND ($4::bigint IS NULL OR shown_at >= $4) AND ($5::bigint IS NULL OR shown_at < $5){status}"
        );
        let event = filter.event.as_ref().map(|e| e.as_str().to_owned());
        let (from, to) = (
            filter.from.map(Timestamp::millis),
            filter.to.map(Timestamp::millis),
        );
        snapshot_read!(self, |c| {
            let total: i64 =
                query_scalar(&format!("SELECT count(*) FROM webhook_attempts WHERE {w}"))
                    .bind(org.as_str())
                    .bind(endpoint.as_str())
                    .bind(&event)
                    .bind(from)
                    .bind(to)
                    .fetch_one(&mut *c)
                    .await?;
            let rows = query(&format!(
                "SELECT {ATTEMPT_COLS} FROM webhook_attempts WHERE {w}
                 ORDER BY shown_at DESC, id DESC LIMIT $6 OFFSET $7"
            ))
            .bind(org.as_str())
            .bind(endpoint.as_str())
            .bind(&event)
            .bind(from)
            .bind(to)
            .bind(i64::from(page.limit))
            .bind(i64::try_from(page.offset).unwrap_or(i64::MAX))
            .fetch_all(&mut *c)
            .await?;
            let items = rows
                .iter()
                .map(attempt_row)
                .collect::<Result<Vec<_>, _>>()?;
            Ok::<_, TxError>(Listing {
                items,
                total: total as u64,
            })
        })
    }

    async fn insert_attempt(&self, org: &OrgId, a: &Attempt) -> StoreResult<()> {
        query(
            "INSERT INTO webhook_attempts (id, org_id, endpoint_id, event_id, attempt, trigger, started_at,
             duration_ms, response_status, error, response_excerpt, next_attempt_at, shown_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, coalesce($7, $12))",
        )
        .bind(a.id.as_str())
        .bind(org.as_str())
        .bind(a.endpoint.as_str())
        .bind(a.event.as_str())
        .bind(i32::try_from(a.attempt).unwrap_or(i32::MAX))
        .bind(a.trigger.as_str())
        .bind(a.started_at.map(Timestamp::millis))
        .bind(a.duration_ms)
        .bind(a.response_status.map(i32::from))
        .bind(a.error.map(AttemptError::as_str))
        .bind(&a.response_excerpt)
        .bind(a.next_attempt_at.map(Timestamp::millis))
        .execute(&self.pool)
        .await
        .map_err(db_err)?;
        Ok(())
    }

    async fn queue_delivery(
        &self,
        org: &OrgId,
        endpoint: &EndpointId,
        event: &EventId,
        trigger: Trigger,
        now: Timestamp,
    ) -> StoreResult<Attempt> {
        write_tx!(self, |tx| {
            let (object, sequence): (String, i64) = query_as(
                "SELECT object_id, sequence FROM events
                 WHERE id = $1 AND org_id = $2 AND sequence IS NOT NULL",
            )
            .bind(event.as_str())
            .bind(org.as_str())
            .fetch_optional(&mut *tx)
            .await?
            .ok_or(StoreError::NotFound)?;
            let id = queue_delivery_tx(
                &mut tx,
                org.as_str(),
                endpoint.as_str(),
                event.as_str(),
                &object,
                sequence,
                trigger,
                now,
            )
            .await?;
            let row = query(&format!(
                "SELECT {ATTEMPT_COLS} FROM webhook_attempts WHERE id = $1"
            ))
            .bind(id.as_str())
            .fetch_one(&mut *tx)
            .await?;
            Ok(attempt_row(&row)?)
        })
    }

    async fn replay(
        &self,
        org: &OrgId,
        endpoint: &EndpointId,
        patterns: &[gatehouse_domain::event::TypePattern],
        since: Timestamp,
        until: Timestamp,
        only_failed: bool,
        now: Timestamp,
        limit: u32,
    ) -> StoreResult<u64> {
        write_tx!(self, |tx| {
            let events: Vec<(String, String, String, i64)> = query_as(
                "SELECT id, type, object_id, sequence FROM events
                 WHERE org_id = $1 AND created_at >= $2 AND created_at < $3 AND sequence IS NOT NULL
                 ORDER BY sequence",
            )
            .bind(org.as_str())
            .bind(since.millis())
            .bind(until.millis())
            .fetch_all(&mut *tx)
            .await?;
            let mut queued = 0u64;
            for (event, kind, object, sequence) in events {
                if queued >= u64::from(limit) {
                    break;
                }
                let wanted = gatehouse_domain::event::EventType::parse(&kind)
                    .is_some_and(|k| webhook::wants(patterns, k));
                if !wanted {
                    continue;
                }
                if only_failed {
                    let latest = query(&format!(
                        "SELECT {ATTEMPT_COLS} FROM webhook_attempts WHERE endpoint_id = $1 AND event_id = $2
                         ORDER BY shown_at DESC, id DESC LIMIT 1"
                    ))
                    .bind(endpoint.as_str())
                    .bind(&event)
                    .fetch_optional(&mut *tx)
                    .await?;
                    if let Some(row) = latest
                        && attempt_row(&row)?.status() != "failed"
                    {
                        continue;
                    }
                }
                queue_delivery_tx(
                    &mut tx,
                    org.as_str(),
                    endpoint.as_str(),
                    &event,
                    &object,
                    sequence,
                    Trigger::Replay,
                    now,
                )
                .await?;
                queued += 1;
            }
            Ok(queued)
        })
    }

    async fn has_webhooks(&self) -> StoreResult<bool> {
        query_scalar("SELECT EXISTS (SELECT 1 FROM webhook_cursors)")
            .fetch_one(&self.pool)
            .await
            .map_err(db_err)
    }

    async fn queue_depth(&self) -> StoreResult<u64> {
        let n: i64 = query_scalar("SELECT count(*) FROM webhook_deliveries")
            .fetch_one(&self.pool)
            .await
            .map_err(db_err)?;
        Ok(n as u64)
    }
}
