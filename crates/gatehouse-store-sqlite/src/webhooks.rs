//! SQLite: webhook endpoints (D55).

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

/// D55: disabling an endpoint, for any reason, cancels its pending
/// deliveries: each queued attempt is logged `cancelled`.
pub(crate) fn cancel_pending(
    c: &Connection,
    org: &OrgId,
    endpoint: &EndpointId,
) -> StoreResult<()> {
    for sql in [
        "UPDATE webhook_attempts SET error = 'cancelled', next_attempt_at = NULL
         WHERE id IN (SELECT attempt_id FROM webhook_deliveries WHERE endpoint_id = ?1 AND org_id = ?2)",
        "DELETE FROM webhook_deliveries WHERE endpoint_id = ?1 AND org_id = ?2",
    ] {
        c.prepare_cached(sql)
            .and_then(|mut s| s.execute(params![endpoint.as_str(), org.as_str()]))
            .map_err(db_err)?;
    }
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
            cancel_pending(c, org, &next.id)?;
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
                // Fan-out starts from here for an organization's first
                // endpoint (an endpoint gets the events after its creation).
                tx.prepare_cached(
                    "INSERT INTO webhook_cursors (org_id, last_sequence)
                     VALUES (?1, coalesce((SELECT last_sequence FROM event_heads WHERE org_id = ?1), 0))
                     ON CONFLICT (org_id) DO NOTHING",
                )
                .and_then(|mut s| s.execute([org.as_str()]))
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
                if next.disabled.is_some() && current.disabled.is_none() {
                    cancel_pending(tx, &org, &id)?;
                }
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
                for sql in [
                    "DELETE FROM webhook_deliveries WHERE endpoint_id = ?1 AND org_id = ?2",
                    "DELETE FROM webhook_attempts WHERE endpoint_id = ?1 AND org_id = ?2",
                    "DELETE FROM webhook_endpoints WHERE id = ?1 AND org_id = ?2",
                ] {
                    tx.prepare_cached(sql)
                        .and_then(|mut s| s.execute(params![id.as_str(), org.as_str()]))
                        .map_err(db_err)?;
                }
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

    async fn operator_find_endpoint(
        &self,
        id: &EndpointId,
    ) -> StoreResult<Option<(OrgId, Endpoint)>> {
        self.pool
            .read(|c| {
                c.prepare_cached(&format!(
                    "SELECT {ENDPOINT_COLS}, org_id FROM webhook_endpoints WHERE id = ?1"
                ))
                .and_then(|mut s| {
                    s.query_row([id.as_str()], |r| {
                        Ok((OrgId::from_trusted(r.get(9)?), endpoint_row(r)?))
                    })
                    .optional()
                })
                .map_err(db_err)
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

const ATTEMPT_COLS: &str = "id, endpoint_id, event_id, attempt, trigger, started_at, duration_ms, response_status, error, response_excerpt, next_attempt_at";

fn attempt_row(r: &Row<'_>) -> rusqlite::Result<Attempt> {
    let id = decode_id(r, 0, "webhook_attempts", AttemptId::parse)?;
    let at = |column| ("webhook_attempts", column, id.as_str());
    let error = match r.get::<_, Option<String>>(8)? {
        None => None,
        Some(t) => Some(AttemptError::parse(&t).ok_or_else(|| {
            corrupt(
                "webhook_attempts",
                "error",
                id.as_str(),
                &format!("holds {t:?}"),
            )
        })?),
    };
    Ok(Attempt {
        endpoint: decode(r, 1, at("endpoint_id"), EndpointId::parse)?,
        event: decode(r, 2, at("event_id"), EventId::parse)?,
        attempt: r.get(3)?,
        trigger: decode(r, 4, at("trigger"), Trigger::parse)?,
        started_at: r.get::<_, Option<i64>>(5)?.map(Timestamp::from_millis),
        duration_ms: r.get(6)?,
        response_status: r.get(7)?,
        error,
        response_excerpt: r.get(9)?,
        next_attempt_at: r.get::<_, Option<i64>>(10)?.map(Timestamp::from_millis),
        id,
    })
}

/// Queues attempt `attempt` of a delivery, due at `due`; returns its id.
#[allow(clippy::too_many_arguments)]
fn queue_attempt(
    c: &Connection,
    org: &str,
    endpoint: &str,
    event: &str,
    attempt: u32,
    trigger: Trigger,
    due: Timestamp,
) -> StoreResult<AttemptId> {
    let id = AttemptId::generate();
    c.prepare_cached(
        "INSERT INTO webhook_attempts (id, org_id, endpoint_id, event_id, attempt, trigger, next_attempt_at, shown_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?7)",
    )
    .and_then(|mut s| {
        s.execute(params![
            id.as_str(),
            org,
            endpoint,
            event,
            attempt,
            trigger.as_str(),
            due.millis()
        ])
    })
    .map_err(db_err)?;
    Ok(id)
}

/// Queues a delivery of `event` to `endpoint` (its first attempt due at
/// `now`); returns the queued attempt's id.
#[allow(clippy::too_many_arguments)]
fn queue_delivery_tx(
    c: &Connection,
    org: &str,
    endpoint: &str,
    event: &str,
    object: &str,
    sequence: i64,
    trigger: Trigger,
    now: Timestamp,
) -> StoreResult<AttemptId> {
    let attempt = queue_attempt(c, org, endpoint, event, 1, trigger, now)?;
    c.prepare_cached(
        "INSERT INTO webhook_deliveries (org_id, endpoint_id, event_id, ordering_key, sequence, trigger, attempts, attempt_id, next_attempt_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, 0, ?7, ?8)",
    )
    .and_then(|mut s| {
        s.execute(params![
            org,
            endpoint,
            event,
            object,
            sequence,
            trigger.as_str(),
            attempt.as_str(),
            now.millis()
        ])
    })
    .map_err(db_err)?;
    Ok(attempt)
}

fn get_attempt_tx(c: &Connection, id: &AttemptId) -> StoreResult<Attempt> {
    c.prepare_cached(&format!(
        "SELECT {ATTEMPT_COLS} FROM webhook_attempts WHERE id = ?1"
    ))
    .and_then(|mut s| s.query_row([id.as_str()], attempt_row))
    .map_err(db_err)
}

/// Fans `org`'s events after its cursor out to its enabled endpoints.
fn fan_out_org(
    c: &Connection,
    org: &str,
    after: i64,
    now: Timestamp,
    limit: u32,
) -> StoreResult<u64> {
    let events: Vec<(String, String, String, i64, i64)> = c
        .prepare_cached(
            "SELECT id, type, object_id, sequence, created_at FROM events
             WHERE org_id = ?1 AND sequence > ?2 ORDER BY sequence LIMIT ?3",
        )
        .and_then(|mut s| {
            s.query_map(params![org, after, limit], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
            })?
            .collect()
        })
        .map_err(db_err)?;
    let Some(last) = events.last().map(|e| e.3) else {
        return Ok(0);
    };
    let endpoints: Vec<(String, String, i64)> = c
        .prepare_cached(
            "SELECT id, enabled_events, created_at FROM webhook_endpoints
             WHERE org_id = ?1 AND disabled_reason IS NULL",
        )
        .and_then(|mut s| {
            s.query_map([org], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
                .collect()
        })
        .map_err(db_err)?;
    let endpoints: Vec<(String, Vec<gatehouse_domain::event::TypePattern>, i64)> = endpoints
        .into_iter()
        .map(|(id, p, at)| {
            decode::patterns(&p)
                .map(|p| (id.clone(), p, at))
                .map_err(|e| {
                    StoreError::Internal(format!("webhook_endpoints.enabled_events of {id} {e}"))
                })
        })
        .collect::<StoreResult<_>>()?;
    let mut made = 0;
    for (event, kind, object, sequence, created_at) in &events {
        let Some(kind) = gatehouse_domain::event::EventType::parse(kind) else {
            return Err(StoreError::Internal(format!(
                "events.type of {event} holds {kind:?}"
            )));
        };
        for (endpoint, patterns, since) in &endpoints {
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
            )?;
            made += 1;
        }
    }
    c.prepare_cached("UPDATE webhook_cursors SET last_sequence = ?2 WHERE org_id = ?1")
        .and_then(|mut s| s.execute(params![org, last]))
        .map_err(db_err)?;
    Ok(made)
}

#[async_trait]
impl DeliveryStore for SqliteStore {
    async fn fan_out(&self, now: Timestamp, limit: u32) -> StoreResult<u64> {
        // A read first: the single writer is not taken when nothing waits.
        let behind = self
            .pool
            .read(|c| {
                c.prepare_cached(
                    "SELECT EXISTS (SELECT 1 FROM webhook_cursors w JOIN event_heads h USING (org_id)
                     WHERE h.last_sequence > w.last_sequence)",
                )
                .and_then(|mut s| s.query_row([], |r| r.get::<_, bool>(0)))
                .map_err(db_err)
            })
            .await?;
        if !behind {
            return Ok(0);
        }
        self.pool
            .write(move |tx| {
                let cursors: Vec<(String, i64)> = tx
                    .prepare_cached(
                        "SELECT w.org_id, w.last_sequence FROM webhook_cursors w JOIN event_heads h USING (org_id)
                         WHERE h.last_sequence > w.last_sequence",
                    )
                    .and_then(|mut s| s.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?.collect())
                    .map_err(db_err)?;
                let mut made = 0;
                for (org, after) in cursors {
                    made += fan_out_org(tx, &org, after, now, limit)?;
                }
                Ok(made)
            })
            .await
    }

    async fn claim_deliveries(
        &self,
        node: &str,
        now: Timestamp,
        lease_until: Timestamp,
        max_in_flight: u32,
        limit: u32,
    ) -> StoreResult<Vec<Claimed>> {
        let due = self
            .pool
            .read(|c| {
                c.prepare_cached(
                    "SELECT EXISTS (SELECT 1 FROM webhook_deliveries
                     WHERE next_attempt_at <= ?1 AND (lease_until IS NULL OR lease_until < ?1))",
                )
                .and_then(|mut s| s.query_row([now.millis()], |r| r.get::<_, bool>(0)))
                .map_err(db_err)
            })
            .await?;
        if !due {
            return Ok(Vec::new());
        }
        let node = node.to_owned();
        self.pool
            .write(move |tx| {
                type Row = (i64, String, String, String, u32, String, String, String, String, String, i64);
                let candidates: Vec<Row> = tx
                    .prepare_cached(
                        // Fair across endpoints: at most `max_in_flight` due
                        // deliveries of each endpoint are candidates, and none
                        // that `per_object` holds back, so an endpoint with a
                        // long backlog (a slow or dead receiver) never fills
                        // the batch and delays another endpoint's deliveries.
                        "SELECT id, org_id, endpoint_id, event_id, attempts, attempt_id, trigger,
                                url, ordering, ordering_key, sequence FROM (
                           SELECT d.id, d.org_id, d.endpoint_id, d.event_id, d.attempts, d.attempt_id, d.trigger,
                                  e.url, e.ordering, d.ordering_key, d.sequence, d.next_attempt_at,
                                  row_number() OVER (PARTITION BY d.endpoint_id ORDER BY d.next_attempt_at, d.id) AS rank
                           FROM webhook_deliveries d JOIN webhook_endpoints e ON e.id = d.endpoint_id
                           WHERE d.next_attempt_at <= ?1 AND (d.lease_until IS NULL OR d.lease_until < ?1)
                             AND e.disabled_reason IS NULL
                             AND (e.ordering <> 'per_object' OR NOT EXISTS (
                                   SELECT 1 FROM webhook_deliveries p
                                   WHERE p.endpoint_id = d.endpoint_id AND p.ordering_key = d.ordering_key
                                     AND p.sequence < d.sequence))
                         ) WHERE rank <= ?3
                         ORDER BY next_attempt_at, id LIMIT ?2",
                    )
                    .and_then(|mut s| {
                        s.query_map(params![now.millis(), limit.saturating_mul(4), max_in_flight], |r| {
                            Ok((
                                r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?,
                                r.get(6)?, r.get(7)?, r.get(8)?, r.get(9)?, r.get(10)?,
                            ))
                        })?
                        .collect()
                    })
                    .map_err(db_err)?;
                let mut in_flight: std::collections::HashMap<String, u32> = tx
                    .prepare_cached(
                        "SELECT endpoint_id, count(*) FROM webhook_deliveries
                         WHERE lease_until >= ?1 GROUP BY endpoint_id",
                    )
                    .and_then(|mut s| {
                        s.query_map([now.millis()], |r| Ok((r.get(0)?, r.get(1)?)))?
                            .collect()
                    })
                    .map_err(db_err)?;
                let mut taken_keys = std::collections::HashSet::new();
                let mut claimed = Vec::new();
                for (id, org, endpoint, event, attempts, attempt_id, trigger, url, ordering, key, sequence) in candidates {
                    if claimed.len() >= limit as usize {
                        break;
                    }
                    let busy = in_flight.entry(endpoint.clone()).or_insert(0);
                    if *busy >= max_in_flight {
                        continue;
                    }
                    if ordering == Ordering::PerObject.as_str() {
                        // One undelivered event per object at a time.
                        if !taken_keys.insert((endpoint.clone(), key.clone())) {
                            continue;
                        }
                        let earlier: bool = tx
                            .prepare_cached(
                                "SELECT EXISTS (SELECT 1 FROM webhook_deliveries
                                 WHERE endpoint_id = ?1 AND ordering_key = ?2 AND sequence < ?3)",
                            )
                            .and_then(|mut s| {
                                s.query_row(params![endpoint, key, sequence], |r| r.get(0))
                            })
                            .map_err(db_err)?;
                        if earlier {
                            continue;
                        }
                    }
                    tx.prepare_cached(
                        "UPDATE webhook_deliveries SET lease_owner = ?2, lease_until = ?3 WHERE id = ?1",
                    )
                    .and_then(|mut s| s.execute(params![id, node, lease_until.millis()]))
                    .map_err(db_err)?;
                    *busy += 1;
                    let corrupt_text = |column: &str, v: &str| {
                        StoreError::Internal(format!("webhook_deliveries.{column} of {id} holds {v:?}"))
                    };
                    claimed.push(Claimed {
                        delivery: id,
                        org: OrgId::from_trusted(org),
                        endpoint: EndpointId::parse(&endpoint).ok_or_else(|| corrupt_text("endpoint_id", &endpoint))?,
                        url,
                        attempt_id: AttemptId::parse(&attempt_id).ok_or_else(|| corrupt_text("attempt_id", &attempt_id))?,
                        attempt: attempts + 1,
                        trigger: Trigger::parse(&trigger).ok_or_else(|| corrupt_text("trigger", &trigger))?,
                        event: EventId::parse(&event).ok_or_else(|| corrupt_text("event_id", &event))?,
                    });
                }
                Ok(claimed)
            })
            .await
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
        let (node, claimed, made, tell) =
            (node.to_owned(), claimed.clone(), made.clone(), tell.clone());
        self.pool
            .write(move |tx| {
                let owner: Option<Option<String>> = tx
                    .prepare_cached("SELECT lease_owner FROM webhook_deliveries WHERE id = ?1")
                    .and_then(|mut s| s.query_row([claimed.delivery], |r| r.get(0)).optional())
                    .map_err(db_err)?;
                if owner.flatten().as_deref() != Some(node.as_str()) {
                    // Cancelled, or taken over after the lease ran out.
                    return Ok(Finished::default());
                }
                let retry_at = match next {
                    Next::RetryAt(at) => Some(at),
                    _ => None,
                };
                tx.prepare_cached(
                    "UPDATE webhook_attempts SET started_at = ?2, duration_ms = ?3, response_status = ?4,
                     error = ?5, response_excerpt = ?6, next_attempt_at = ?7, shown_at = ?2 WHERE id = ?1",
                )
                .and_then(|mut s| {
                    s.execute(params![
                        claimed.attempt_id.as_str(),
                        made.started_at.millis(),
                        made.duration_ms,
                        made.response_status,
                        made.error.map(AttemptError::as_str),
                        made.excerpt,
                        retry_at.map(Timestamp::millis)
                    ])
                })
                .map_err(db_err)?;
                let org = claimed.org.as_str();
                match next {
                    Next::RetryAt(at) => {
                        let queued = queue_attempt(
                            tx,
                            org,
                            claimed.endpoint.as_str(),
                            claimed.event.as_str(),
                            claimed.attempt + 1,
                            claimed.trigger,
                            at,
                        )?;
                        tx.prepare_cached(
                            "UPDATE webhook_deliveries SET attempts = ?2, attempt_id = ?3, next_attempt_at = ?4,
                             lease_owner = NULL, lease_until = NULL WHERE id = ?1",
                        )
                        .and_then(|mut s| {
                            s.execute(params![claimed.delivery, claimed.attempt, queued.as_str(), at.millis()])
                        })
                        .map_err(db_err)?;
                    }
                    Next::Done | Next::Exhausted | Next::Gone => {
                        tx.prepare_cached("DELETE FROM webhook_deliveries WHERE id = ?1")
                            .and_then(|mut s| s.execute([claimed.delivery]))
                            .map_err(db_err)?;
                    }
                }
                let mut finished = Finished::default();
                if next == Next::Done {
                    tx.prepare_cached(
                        "UPDATE webhook_endpoints SET failing_since = NULL WHERE id = ?1 AND org_id = ?2",
                    )
                    .and_then(|mut s| s.execute(params![claimed.endpoint.as_str(), org]))
                    .map_err(db_err)?;
                    return Ok(finished);
                }
                // A failure: the endpoint's failing streak, and what it leads to.
                let state: Option<(i64, Option<i64>)> = tx
                    .prepare_cached(
                        "UPDATE webhook_endpoints SET failing_since = coalesce(failing_since, ?3)
                         WHERE id = ?1 AND org_id = ?2 RETURNING failing_since, failing_mailed_at",
                    )
                    .and_then(|mut s| {
                        s.query_row(
                            params![claimed.endpoint.as_str(), org, made.started_at.millis()],
                            |r| Ok((r.get(0)?, r.get(1)?)),
                        )
                        .optional()
                    })
                    .map_err(db_err)?;
                let Some((since, mailed)) = state else {
                    return Ok(finished);
                };
                let Some(current) = get_endpoint_tx(tx, &claimed.org, &claimed.endpoint)? else {
                    return Ok(finished);
                };
                match webhook::after_failure(
                    &current,
                    next,
                    Timestamp::from_millis(since),
                    mailed.map(Timestamp::from_millis),
                    disable_after,
                    made.started_at,
                ) {
                    AfterFailure::Disable(off) => {
                        write_endpoint(tx, &claimed.org, &off)?;
                        cancel_pending(tx, &claimed.org, &off.id)?;
                        let told = effect::of_endpoint_disabled(&tell, &off);
                        effects::apply(tx, &claimed.org, &told, made.started_at, None)?;
                        finished.disabled = Some(off);
                    }
                    AfterFailure::MailAdmins => {
                        tx.prepare_cached(
                            "UPDATE webhook_endpoints SET failing_mailed_at = ?3 WHERE id = ?1 AND org_id = ?2",
                        )
                        .and_then(|mut s| {
                            s.execute(params![claimed.endpoint.as_str(), org, made.started_at.millis()])
                        })
                        .map_err(db_err)?;
                        finished.mail_failing = Some(current);
                    }
                    AfterFailure::Nothing => {}
                }
                Ok(finished)
            })
            .await
    }

    async fn mail_admins(
        &self,
        org: &OrgId,
        subject: &str,
        body: &str,
        now: Timestamp,
    ) -> StoreResult<u64> {
        let (org, subject, body) = (org.clone(), subject.to_owned(), body.to_owned());
        self.pool
            .write(move |tx| {
                let admins: Vec<String> = tx
                    .prepare_cached(
                        "SELECT email FROM users WHERE org_id = ?1 AND role = 'admin' AND status = 'active'",
                    )
                    .and_then(|mut s| s.query_map([org.as_str()], |r| r.get(0))?.collect())
                    .map_err(db_err)?;
                for to in &admins {
                    crate::auth_state::enqueue_mail(
                        tx,
                        &gatehouse_store::OutboundEmail {
                            to: to.clone(),
                            subject: subject.clone(),
                            body: body.clone(),
                        },
                        now,
                    )?;
                }
                Ok(admins.len() as u64)
            })
            .await
    }

    async fn release_deliveries(&self, node: &str, deliveries: &[i64]) -> StoreResult<()> {
        if deliveries.is_empty() {
            return Ok(());
        }
        let (node, ids) = (node.to_owned(), deliveries.to_vec());
        self.pool
            .write(move |tx| {
                for id in ids {
                    tx.prepare_cached(
                        "UPDATE webhook_deliveries SET lease_owner = NULL, lease_until = NULL
                         WHERE id = ?1 AND lease_owner = ?2",
                    )
                    .and_then(|mut s| s.execute(params![id, node]))
                    .map_err(db_err)?;
                }
                Ok(())
            })
            .await
    }

    async fn release_orphaned_leases(&self) -> StoreResult<u64> {
        // One serving process per SQLite database (D44): a lease found at
        // its worker's start was left by a process that is gone.
        self.pool
            .write(|tx| {
                tx.prepare_cached(
                    "UPDATE webhook_deliveries SET lease_owner = NULL, lease_until = NULL
                     WHERE lease_owner IS NOT NULL",
                )
                .and_then(|mut s| s.execute([]))
                .map(|n| n as u64)
                .map_err(db_err)
            })
            .await
    }

    async fn list_attempts(
        &self,
        org: &OrgId,
        endpoint: &EndpointId,
        filter: &AttemptFilter,
        page: Page,
    ) -> StoreResult<Listing<Attempt>> {
        let mut w = String::from("org_id = ?1 AND endpoint_id = ?2");
        let mut args: Vec<rusqlite::types::Value> = vec![
            org.as_str().to_owned().into(),
            endpoint.as_str().to_owned().into(),
        ];
        if let Some(e) = &filter.event {
            args.push(e.as_str().to_owned().into());
            w.push_str(&format!(" AND event_id = ?{}", args.len()));
        }
        match filter.status {
            Some(AttemptStatus::Pending) => w.push_str(" AND started_at IS NULL AND error IS NULL"),
            Some(AttemptStatus::Succeeded) => w.push_str(
                " AND started_at IS NOT NULL AND error IS NULL AND response_status BETWEEN 200 AND 299",
            ),
            Some(AttemptStatus::Failed) => w.push_str(
                " AND (error IS NOT NULL OR (started_at IS NOT NULL AND (response_status IS NULL OR response_status NOT BETWEEN 200 AND 299)))",
            ),
            None => {}
        }
        if let Some(from) = filter.from {
            args.push(from.millis().into());
            w.push_str(&format!(" AND shown_at >= ?{}", args.len()));
        }
        if let Some(to) = filter.to {
            args.push(to.millis().into());
            w.push_str(&format!(" AND shown_at < ?{}", args.len()));
        }
        self.pool
            .read_blocking(move |c| {
                let total: i64 = c
                    .prepare(&format!("SELECT count(*) FROM webhook_attempts WHERE {w}"))
                    .and_then(|mut s| {
                        s.query_row(rusqlite::params_from_iter(args.iter()), |r| r.get(0))
                    })
                    .map_err(db_err)?;
                let items = c
                    .prepare(&format!(
                        "SELECT {ATTEMPT_COLS} FROM webhook_attempts WHERE {w}
                         ORDER BY shown_at DESC, id DESC LIMIT {} OFFSET {}",
                        page.limit, page.offset
                    ))
                    .and_then(|mut s| {
                        s.query_map(rusqlite::params_from_iter(args.iter()), attempt_row)?
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

    async fn insert_attempt(&self, org: &OrgId, a: &Attempt) -> StoreResult<()> {
        let (org, a) = (org.clone(), a.clone());
        self.pool
            .write(move |tx| {
                tx.prepare_cached(
                    "INSERT INTO webhook_attempts (id, org_id, endpoint_id, event_id, attempt, trigger, started_at,
                     duration_ms, response_status, error, response_excerpt, next_attempt_at, shown_at)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, coalesce(?7, ?12))",
                )
                .and_then(|mut s| {
                    s.execute(params![
                        a.id.as_str(),
                        org.as_str(),
                        a.endpoint.as_str(),
                        a.event.as_str(),
                        a.attempt,
                        a.trigger.as_str(),
                        a.started_at.map(Timestamp::millis),
                        a.duration_ms,
                        a.response_status,
                        a.error.map(AttemptError::as_str),
                        a.response_excerpt,
                        a.next_attempt_at.map(Timestamp::millis)
                    ])
                })
                .map_err(db_err)?;
                Ok(())
            })
            .await
    }

    async fn queue_delivery(
        &self,
        org: &OrgId,
        endpoint: &EndpointId,
        event: &EventId,
        trigger: Trigger,
        now: Timestamp,
    ) -> StoreResult<Attempt> {
        let (org, endpoint, event) = (org.clone(), endpoint.clone(), event.clone());
        self.pool
            .write(move |tx| {
                let (object, sequence): (String, i64) = tx
                    .prepare_cached(
                        "SELECT object_id, sequence FROM events WHERE id = ?1 AND org_id = ?2",
                    )
                    .and_then(|mut s| {
                        s.query_row(params![event.as_str(), org.as_str()], |r| {
                            Ok((r.get(0)?, r.get(1)?))
                        })
                        .optional()
                    })
                    .map_err(db_err)?
                    .ok_or(StoreError::NotFound)?;
                let id = queue_delivery_tx(
                    tx,
                    org.as_str(),
                    endpoint.as_str(),
                    event.as_str(),
                    &object,
                    sequence,
                    trigger,
                    now,
                )?;
                get_attempt_tx(tx, &id)
            })
            .await
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
        let (org, endpoint, patterns) = (org.clone(), endpoint.clone(), patterns.to_vec());
        self.pool
            .write(move |tx| {
                let events: Vec<(String, String, String, i64)> = tx
                    .prepare_cached(
                        "SELECT id, type, object_id, sequence FROM events
                         WHERE org_id = ?1 AND created_at >= ?2 AND created_at < ?3 ORDER BY sequence",
                    )
                    .and_then(|mut s| {
                        s.query_map(params![org.as_str(), since.millis(), until.millis()], |r| {
                            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
                        })?
                        .collect()
                    })
                    .map_err(db_err)?;
                let mut queued = 0u64;
                for (event, kind, object, sequence) in events {
                    if queued >= u64::from(limit) {
                        break;
                    }
                    let wanted = gatehouse_domain::event::EventType::parse(&kind)
                        .is_some_and(|k| webhook::wants(&patterns, k));
                    if !wanted {
                        continue;
                    }
                    if only_failed {
                        let latest: Option<Attempt> = tx
                            .prepare_cached(&format!(
                                "SELECT {ATTEMPT_COLS} FROM webhook_attempts WHERE endpoint_id = ?1 AND event_id = ?2
                                 ORDER BY shown_at DESC, id DESC LIMIT 1"
                            ))
                            .and_then(|mut s| {
                                s.query_row(params![endpoint.as_str(), event], attempt_row)
                                    .optional()
                            })
                            .map_err(db_err)?;
                        if latest.is_some_and(|a| a.status() != "failed") {
                            continue;
                        }
                    }
                    queue_delivery_tx(
                        tx,
                        org.as_str(),
                        endpoint.as_str(),
                        &event,
                        &object,
                        sequence,
                        Trigger::Replay,
                        now,
                    )?;
                    queued += 1;
                }
                Ok(queued)
            })
            .await
    }

    async fn has_webhooks(&self) -> StoreResult<bool> {
        self.pool
            .read(|c| {
                c.prepare_cached("SELECT EXISTS (SELECT 1 FROM webhook_cursors)")
                    .and_then(|mut s| s.query_row([], |r| r.get(0)))
                    .map_err(db_err)
            })
            .await
    }

    async fn queue_depth(&self) -> StoreResult<u64> {
        self.pool
            .read(|c| {
                c.prepare_cached("SELECT count(*) FROM webhook_deliveries")
                    .and_then(|mut s| s.query_row([], |r| r.get::<_, i64>(0)))
                    .map(|n| n as u64)
                    .map_err(db_err)
            })
            .await
    }
}
