//! PostgreSQL: organizations: creating, reading, the `/v2/` preview flag, first-start bootstrap and the staging reset.

use super::*;

#[async_trait]
impl OrgStore for PgStore {
    async fn create_org(&self, org: &Organization) -> StoreResult<()> {
        write_tx!(self, |tx| insert_org(&mut tx, org).await)
    }
    async fn get_org(&self, org: &OrgId) -> StoreResult<Option<Organization>> {
        let row = query(&format!(
            "SELECT {ORG_COLS} FROM organizations WHERE id = $1"
        ))
        .bind(org.as_str())
        .fetch_optional(&self.pool)
        .await
        .map_err(db_err)?;
        row.as_ref().map(org_row).transpose().map_err(db_err)
    }
    async fn list_orgs(&self) -> StoreResult<Vec<Organization>> {
        let rows = query(&format!(
            "SELECT {ORG_COLS} FROM organizations ORDER BY created_at, id"
        ))
        .fetch_all(&self.pool)
        .await
        .map_err(db_err)?;
        rows.iter()
            .map(org_row)
            .collect::<Result<Vec<_>, _>>()
            .map_err(db_err)
    }
    async fn v2_preview(&self, org: &OrgId) -> StoreResult<bool> {
        let v: Option<bool> = query_scalar("SELECT v2_preview FROM organizations WHERE id = $1")
            .bind(org.as_str())
            .fetch_optional(&self.pool)
            .await
            .map_err(db_err)?;
        Ok(v.unwrap_or(false))
    }
    async fn set_v2_preview(&self, org: &OrgId, enabled: bool) -> StoreResult<()> {
        write_tx!(self, |tx| {
            let n = query("UPDATE organizations SET v2_preview = $1 WHERE id = $2")
                .bind(enabled)
                .bind(org.as_str())
                .execute(&mut *tx)
                .await?
                .rows_affected();
            if n == 0 {
                return Err(StoreError::NotFound.into());
            }
            Ok(())
        })
    }
    async fn write_org(
        &self,
        org: &OrgId,
        effects: &[gatehouse_domain::effect::Effect],
        now: Timestamp,
        tell: &gatehouse_domain::event::Teller,
    ) -> StoreResult<()> {
        write_tx!(self, |tx| {
            crate::effects::apply(&mut tx, org, effects, now, Some(tell)).await?;
            Ok(())
        })
    }
    fn orgs_version(&self) -> Option<u64> {
        self.orgs.version()
    }
    async fn bootstrap(&self, org: &Organization, client: &NewClient) -> StoreResult<bool> {
        write_tx!(self, |tx| {
            // D41, D44: nodes starting together on an empty database create
            // one organization. The table lock (which blocks writers of
            // organizations, not readers) makes "none exists yet" and the
            // insert one step.
            query("LOCK TABLE organizations IN SHARE ROW EXCLUSIVE MODE")
                .execute(&mut *tx)
                .await?;
            let any: bool = query_scalar("SELECT EXISTS (SELECT 1 FROM organizations)")
                .fetch_one(&mut *tx)
                .await?;
            if any {
                return Ok(false);
            }
            insert_org(&mut tx, org).await?;
            insert_client_row(
                &mut tx,
                &org.id,
                client,
                gatehouse_domain::client::Suspension::NONE,
            )
            .await?;
            Ok(true)
        })
    }
    async fn reset_to_fixture(
        &self,
        org: Option<&OrgId>,
        fixture: &gatehouse_domain::Fixture,
        now: Timestamp,
        tell: Option<&gatehouse_domain::event::Teller>,
    ) -> StoreResult<u64> {
        write_tx!(self, |tx| {
            // The organizations' rows, locked in id order: a concurrent
            // reset (another node) waits and then sees this one's result,
            // and so does a last-admin check (D13).
            let orgs: Vec<String> = match org {
                Some(o) => {
                    query_scalar("SELECT id FROM organizations WHERE id = $1 FOR NO KEY UPDATE")
                        .bind(o.as_str())
                        .fetch_all(&mut *tx)
                        .await?
                }
                None => {
                    query_scalar("SELECT id FROM organizations ORDER BY id FOR NO KEY UPDATE")
                        .fetch_all(&mut *tx)
                        .await?
                }
            };
            if org.is_some() && orgs.is_empty() {
                return Err(StoreError::NotFound.into());
            }
            let mut removed = Vec::new();
            for o in &orgs {
                let o = OrgId::from_trusted(o.clone());
                removed.extend(reset_org_tx(&mut tx, &o, fixture, now).await?);
                if let Some(tell) = tell {
                    // D33 continued, D54: one event tells mirrors to
                    // resynchronize.
                    let row = query(&format!(
                        "SELECT {ORG_COLS} FROM organizations WHERE id = $1"
                    ))
                    .bind(o.as_str())
                    .fetch_one(&mut *tx)
                    .await?;
                    let after = org_row(&row)?;
                    let told = effect::of_staging_reset(tell, &after, now);
                    crate::effects::apply(&mut tx, &o, &told, now, None).await?;
                }
            }
            // D13: the removed users' tokens die; revocations last.
            for id in &removed {
                auth_state::revoke_user_tokens(&mut tx, id, now).await?;
            }
            Ok(orgs.len() as u64)
        })
    }
}

pub(crate) async fn insert_org(c: &mut PgConnection, o: &Organization) -> TxResult<()> {
    query("INSERT INTO organizations (id, name, plan, per_minute, per_second, created_at) VALUES ($1, $2, $3, $4, $5, $6)")
        .bind(o.id.as_str())
        .bind(&o.name)
        .bind(o.plan.as_str())
        .bind(o.per_minute.map(i64::from))
        .bind(o.per_second.map(i64::from))
        .bind(o.created_at.millis())
        .execute(&mut *c)
        .await?;
    Ok(())
}

/// D33: one organization's users and products replaced by the fixture,
/// inside the caller's transaction (which holds the organization's row).
/// Returns the removed users, whose tokens the caller revokes last.
pub(crate) async fn reset_org_tx(
    c: &mut PgConnection,
    org: &OrgId,
    fixture: &gatehouse_domain::Fixture,
    now: Timestamp,
) -> TxResult<Vec<UserId>> {
    let removed: Vec<String> =
        query_scalar("SELECT id FROM users WHERE org_id = $1 ORDER BY id FOR UPDATE")
            .bind(org.as_str())
            .fetch_all(&mut *c)
            .await?;
    let removed: Vec<UserId> = removed.into_iter().map(UserId::from_trusted).collect();
    for id in &removed {
        auth_state::end_user_grants(c, id, now).await?;
    }
    // D33 (continued): the fixture's users come back without sessions; no
    // per-record events (one `staging.reset` tells mirrors).
    query("DELETE FROM sessions WHERE org_id = $1")
        .bind(org.as_str())
        .execute(&mut *c)
        .await?;
    // Client applications stay; an owner who disappears is cleared (D33),
    // and so is a suspension for that owner's inactivity (D46 revised; an
    // owed rotation stays owed).
    query("UPDATE clients SET owner_id = NULL, owner_inactive = false WHERE org_id = $1 AND owner_id IS NOT NULL")
        .bind(org.as_str())
        .execute(&mut *c)
        .await?;
    // D33 (continued): webhook endpoints stay, secrets, queue and log
    // included; one whose owner disappears keeps working, without owner.
    query(
        "UPDATE webhook_endpoints SET owner_id = NULL WHERE org_id = $1 AND owner_id IS NOT NULL",
    )
    .bind(org.as_str())
    .execute(&mut *c)
    .await?;
    for sql in [
        "DELETE FROM users WHERE org_id = $1",
        "DELETE FROM products WHERE org_id = $1",
    ] {
        query(sql).bind(org.as_str()).execute(&mut *c).await?;
    }
    for (i, f) in fixture.users.iter().enumerate() {
        // Newest first: the first fixture user gets the latest time.
        let at = now.plus_seconds(-(i as i64));
        let u = NewUser {
            id: UserId::generate(),
            email: f.email.clone(),
            name: f.name.clone(),
            role: f.role,
            status: f.status,
            // D53: the mock's fixture password; none elsewhere.
            password_hash: fixture.password_hash.clone(),
            created_at: at,
        };
        insert_user_row(c, org, &u, at).await?;
    }
    for (i, p) in fixture.products.iter().enumerate() {
        let p = p.clone().into_product(now.plus_seconds(-(i as i64)));
        insert_product_row(c, org, &p).await?;
    }
    Ok(removed)
}

/// Issue 32: the organization's name, or its plan and limits, become
/// `after`'s: only the columns that differ from `before`.
pub(crate) async fn set_org(
    c: &mut PgConnection,
    org: &OrgId,
    before: &Organization,
    after: &Organization,
) -> TxResult<()> {
    check_org(org, &after.id)?;
    let renamed = before.name != after.name;
    let replanned = (before.plan, before.per_minute, before.per_second)
        != (after.plan, after.per_minute, after.per_second);
    let n = query(
        "UPDATE organizations SET
            name = CASE WHEN $1 THEN $2 ELSE name END,
            plan = CASE WHEN $3 THEN $4 ELSE plan END,
            per_minute = CASE WHEN $3 THEN $5 ELSE per_minute END,
            per_second = CASE WHEN $3 THEN $6 ELSE per_second END
         WHERE id = $7",
    )
    .bind(renamed)
    .bind(&after.name)
    .bind(replanned)
    .bind(after.plan.as_str())
    .bind(after.per_minute.map(i64::from))
    .bind(after.per_second.map(i64::from))
    .bind(after.id.as_str())
    .execute(&mut *c)
    .await?
    .rows_affected();
    if n == 0 {
        Err(StoreError::NotFound.into())
    } else {
        Ok(())
    }
}

/// Issue 32, D40: the `orgs_version` of a node, moved by the notification
/// PostgreSQL sends at the commit of any change to `organizations`
/// (migration 31's trigger), so every node keeps organizations' names and
/// limits in memory and still applies `gatehouse org rename` or `org plan`
/// from its next request. The notification arrives a moment after the
/// commit (on loopback, well under a millisecond); a request in that moment
/// may still see the old plan or name.
///
/// While the listening connection is down (not yet connected, lost, being
/// replaced) there is no version: every read goes to the database, so a
/// notification missed meanwhile cannot leave a stale value behind. The
/// listener holds one connection of its own, beside the pool's.
pub(crate) struct OrgChanges {
    seen: std::sync::atomic::AtomicU64,
    live: std::sync::atomic::AtomicBool,
}

/// The channel of migration 31's trigger.
const ORG_CHANNEL: &str = "gatehouse_org_changes";

impl OrgChanges {
    /// Follows the changes through `listening` (a pool of one connection
    /// of its own), pinging through `pool`.
    pub(crate) fn follow(listening: &PgPool, pool: &PgPool) -> Arc<Self> {
        let changes = Arc::new(Self {
            seen: std::sync::atomic::AtomicU64::new(0),
            live: std::sync::atomic::AtomicBool::new(false),
        });
        // Outside a runtime (a store built by blocking code) nothing
        // listens: the version stays absent and every read is fresh.
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(listen(
                listening.clone(),
                pool.clone(),
                Arc::downgrade(&changes),
            ));
        }
        changes
    }

    pub(crate) fn version(&self) -> Option<u64> {
        use std::sync::atomic::Ordering;
        self.live
            .load(Ordering::Acquire)
            .then(|| self.seen.load(Ordering::Acquire))
    }

    fn moved(&self, live: bool) {
        use std::sync::atomic::Ordering;
        // The number moves before the flag says it may be trusted, and
        // whenever it stops being trusted: a value read while live never
        // stands for a moment when a change could be missed.
        self.seen.fetch_add(1, Ordering::AcqRel);
        self.live.store(live, Ordering::Release);
    }
}

/// How long a quiet listener goes before it is asked to prove itself, and
/// how long it has to hear its own ping.
const PING_EVERY: std::time::Duration = std::time::Duration::from_secs(15);
const PING_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Unix milliseconds, for the listener's last sign of life.
fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Keeps one listener running until the store is dropped. A connection
/// that is lost is replaced; one that silently stops delivering (a
/// half-open TCP connection after a failover or a partition never reports
/// an error) is found by a ping — a notification of its own on the channel,
/// sent through the pool every [`PING_EVERY`] — that it fails to hear
/// within [`PING_WAIT`]: then it is dropped and replaced. Between the loss
/// and the next listener, the node has no version. The listener's
/// connection is its own (`listening`), never one of the pool's.
async fn listen(listening: PgPool, pool: PgPool, changes: std::sync::Weak<OrgChanges>) {
    use std::sync::atomic::{AtomicU64, Ordering};
    loop {
        let heard = Arc::new(AtomicU64::new(now_ms()));
        let mut task = tokio::spawn(listen_once(
            listening.clone(),
            changes.clone(),
            heard.clone(),
        ));
        loop {
            tokio::select! {
                _ = &mut task => break,
                () = tokio::time::sleep(PING_EVERY) => {}
            }
            if changes.strong_count() == 0 {
                task.abort();
                return;
            }
            let asked = now_ms();
            // A ping that cannot be sent (the database is busy or away)
            // proves nothing either way: the listener's own loss, if any,
            // ends its task.
            let sent = query("SELECT pg_notify($1, 'ping')")
                .bind(ORG_CHANNEL)
                .execute(&pool)
                .await
                .is_ok();
            if !sent {
                continue;
            }
            tokio::time::sleep(PING_WAIT).await;
            if heard.load(Ordering::Acquire) < asked {
                tracing::warn!(
                    "the listener for organization changes stopped hearing; replacing it"
                );
                task.abort();
                break;
            }
        }
        match changes.upgrade() {
            Some(c) => c.moved(false),
            None => return,
        }
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    }
}

/// One listening connection, until it is lost (or its task aborted).
async fn listen_once(
    pool: PgPool,
    changes: std::sync::Weak<OrgChanges>,
    heard: Arc<std::sync::atomic::AtomicU64>,
) {
    use sqlx_postgres::PgListener;
    use std::sync::atomic::Ordering;
    let mut listener = match PgListener::connect_with(&pool).await {
        Ok(l) => l,
        Err(e) => {
            tracing::warn!(error = %e, "no connection to listen for organization changes");
            return;
        }
    };
    if let Err(e) = listener.listen(ORG_CHANNEL).await {
        tracing::warn!(error = %e, "listening for organization changes failed");
        return;
    }
    heard.store(now_ms(), Ordering::Release);
    match changes.upgrade() {
        Some(c) => c.moved(true),
        None => return,
    }
    loop {
        let got = listener.try_recv().await;
        heard.store(now_ms(), Ordering::Release);
        let Some(c) = changes.upgrade() else { return };
        match got {
            // A ping proves the connection, and changes nothing.
            Ok(Some(n)) if n.payload() == "ping" => {}
            Ok(Some(_)) => c.moved(true),
            // The connection was lost: notifications may have been missed
            // until a new one listens.
            Ok(None) | Err(_) => {
                c.moved(false);
                return;
            }
        }
    }
}
