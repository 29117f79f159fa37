//! SQLite: organizations: creating, reading, changing (issue 32), the `/v2/` preview flag, first-start bootstrap and the staging reset.

use super::*;

#[async_trait]
impl OrgStore for SqliteStore {
    async fn create_org(&self, org: &Organization) -> StoreResult<()> {
        let org = org.clone();
        self.pool.write(move |tx| insert_org(tx, &org)).await
    }
    async fn get_org(&self, org: &OrgId) -> StoreResult<Option<Organization>> {
        self.pool
            .read(|c| {
                c.prepare_cached("SELECT id, name, plan, per_minute, per_second, created_at FROM organizations WHERE id = ?1")
                    .and_then(|mut s| s.query_row([org.as_str()], org_row).optional())
                    .map_err(db_err)
            })
            .await
    }
    async fn list_orgs(&self) -> StoreResult<Vec<Organization>> {
        self.pool
            .read(|c| {
                c.prepare_cached("SELECT id, name, plan, per_minute, per_second, created_at FROM organizations ORDER BY created_at, id")
                    .and_then(|mut s| s.query_map([], org_row)?.collect::<rusqlite::Result<Vec<_>>>())
                    .map_err(db_err)
            })
            .await
    }
    async fn v2_preview(&self, org: &OrgId) -> StoreResult<bool> {
        self.pool
            .read(|c| {
                c.prepare_cached("SELECT v2_preview FROM organizations WHERE id = ?1")
                    .and_then(|mut s| {
                        s.query_row([org.as_str()], |r| r.get::<_, bool>(0))
                            .optional()
                    })
                    .map(|v| v.unwrap_or(false))
                    .map_err(db_err)
            })
            .await
    }
    async fn set_v2_preview(&self, org: &OrgId, enabled: bool) -> StoreResult<()> {
        let org = org.clone();
        self.pool
            .write(move |tx| {
                let n = tx
                    .prepare_cached("UPDATE organizations SET v2_preview = ?1 WHERE id = ?2")
                    .and_then(|mut s| s.execute(params![enabled, org.as_str()]))
                    .map_err(db_err)?;
                if n == 0 {
                    Err(StoreError::NotFound)
                } else {
                    Ok(())
                }
            })
            .await
    }
    async fn write_org(
        &self,
        org: &OrgId,
        effects: &[gatehouse_domain::effect::Effect],
        now: Timestamp,
        tell: &gatehouse_domain::event::Teller,
    ) -> StoreResult<()> {
        let (org, effects, tell) = (org.clone(), effects.to_vec(), tell.clone());
        self.pool
            .write(move |tx| crate::effects::apply(tx, &org, &effects, now, Some(&tell)))
            .await
    }
    fn orgs_version(&self) -> Option<u64> {
        // The one generation of the database moves with organizations as
        // with clients (the writer's update hook watches both tables).
        self.pool.clients_version()
    }
    async fn bootstrap(&self, org: &Organization, client: &NewClient) -> StoreResult<bool> {
        let (org, client) = (org.clone(), client.clone());
        self.pool
            .write(move |tx| {
                let any: bool = tx
                    .query_row("SELECT EXISTS (SELECT 1 FROM organizations)", [], |r| {
                        r.get(0)
                    })
                    .map_err(db_err)?;
                if any {
                    return Ok(false);
                }
                insert_org(tx, &org)?;
                insert_client_row(
                    tx,
                    &org.id,
                    &client,
                    gatehouse_domain::client::Suspension::NONE,
                )?;
                Ok(true)
            })
            .await
    }
    async fn reset_to_fixture(
        &self,
        org: Option<&OrgId>,
        fixture: &gatehouse_domain::Fixture,
        now: Timestamp,
        tell: Option<&gatehouse_domain::event::Teller>,
    ) -> StoreResult<u64> {
        let (org, fixture, tell) = (org.cloned(), fixture.clone(), tell.cloned());
        self.pool
            .write(move |tx| {
                let orgs: Vec<String> = match &org {
                    Some(o) => {
                        let exists: bool = tx
                            .query_row(
                                "SELECT EXISTS (SELECT 1 FROM organizations WHERE id = ?1)",
                                [o.as_str()],
                                |r| r.get(0),
                            )
                            .map_err(db_err)?;
                        if !exists {
                            return Err(StoreError::NotFound);
                        }
                        vec![o.as_str().to_owned()]
                    }
                    None => {
                        let mut st = tx
                            .prepare("SELECT id FROM organizations ORDER BY id")
                            .map_err(db_err)?;

                        st.query_map([], |r| r.get::<_, String>(0))
                            .and_then(|rows| rows.collect::<Result<Vec<_>, _>>())
                            .map_err(db_err)?
                    }
                };
                for org in &orgs {
                    reset_org_tx(tx, org, &fixture, now)?;
                    if let Some(tell) = &tell {
                        // D33 continued, D54: one event tells mirrors to
                        // resynchronize.
                        let after = tx
                            .prepare_cached("SELECT id, name, plan, per_minute, per_second, created_at FROM organizations WHERE id = ?1")
                            .and_then(|mut s| s.query_row([org.as_str()], org_row))
                            .map_err(db_err)?;
                        let told = effect::of_staging_reset(tell, &after, now);
                        crate::effects::apply(tx, &after.id, &told, now, None)?;
                    }
                }
                Ok(orgs.len() as u64)
            })
            .await
    }
}

pub(crate) fn insert_org(c: &Connection, o: &Organization) -> StoreResult<()> {
    c.prepare_cached(
        "INSERT INTO organizations (id, name, plan, per_minute, per_second, created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )
    .and_then(|mut s| {
        s.execute(params![o.id.as_str(), o.name, o.plan.as_str(), o.per_minute, o.per_second, o.created_at.millis()])
    })
    .map_err(db_err)?;
    Ok(())
}

/// D33: one organization's users and products replaced by the fixture, inside
/// the caller's transaction.
pub(crate) fn reset_org_tx(
    tx: &Connection,
    org: &str,
    fixture: &gatehouse_domain::Fixture,
    now: Timestamp,
) -> StoreResult<()> {
    let users: Vec<String> = tx
        .prepare_cached("SELECT id FROM users WHERE org_id = ?1")
        .and_then(|mut st| {
            st.query_map([org], |r| r.get::<_, String>(0))?
                .collect::<Result<Vec<_>, _>>()
        })
        .map_err(db_err)?;
    for id in &users {
        // D13: every code and token of a removed user dies.
        auth_state::revoke_user(tx, &UserId::from_trusted(id.clone()), now)?;
    }
    // D33 (continued): the fixture's users come back without sessions; no
    // per-record events (one `staging.reset` tells mirrors).
    tx.prepare_cached("DELETE FROM sessions WHERE org_id = ?1")
        .and_then(|mut st| st.execute([org]))
        .map_err(db_err)?;
    // Client applications stay; an owner who disappears is cleared (D33),
    // and so is a suspension for that owner's inactivity (D46 revised; an
    // owed rotation stays owed).
    tx.prepare_cached(
        "UPDATE clients SET owner_id = NULL, owner_inactive = 0 WHERE org_id = ?1 AND owner_id IS NOT NULL",
    )
    .and_then(|mut st| st.execute([org]))
    .map_err(db_err)?;
    // D33 (continued): webhook endpoints stay, secrets, queue and log
    // included; one whose owner disappears keeps working, without owner.
    tx.prepare_cached(
        "UPDATE webhook_endpoints SET owner_id = NULL WHERE org_id = ?1 AND owner_id IS NOT NULL",
    )
    .and_then(|mut st| st.execute([org]))
    .map_err(db_err)?;
    for sql in [
        "DELETE FROM users WHERE org_id = ?1",
        "DELETE FROM products WHERE org_id = ?1",
    ] {
        tx.prepare_cached(sql)
            .and_then(|mut st| st.execute([org]))
            .map_err(db_err)?;
    }
    for (i, f) in fixture.users.iter().enumerate() {
        tx.prepare_cached(
            "INSERT INTO users (id, org_id, email, email_norm, name, role, status, password_hash, created_at, updated_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?9, ?8, ?8)",
        )
        .and_then(|mut st| {
            st.execute(params![
                UserId::generate().as_str(),
                org,
                f.email.as_str(),
                f.email.normalized(),
                f.name.as_str(),
                f.role.as_str(),
                f.status.as_str(),
                // Newest first: the first fixture user gets the latest time.
                now.plus_seconds(-(i as i64)).millis(),
                // D53: the mock's fixture password; NULL elsewhere.
                fixture.password_hash.as_deref(),
            ])
        })
        .map_err(db_err)?;
    }
    for (i, p) in fixture.products.iter().enumerate() {
        let p = p.clone().into_product(now.plus_seconds(-(i as i64)));
        tx.prepare_cached(
            "INSERT INTO products (id, org_id, name, sku, price, stock, status, created_at, updated_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?8)",
        )
        .and_then(|mut st| {
            st.execute(params![
                p.id.as_str(),
                org,
                p.name.as_str(),
                p.sku.as_str(),
                p.price,
                p.stock,
                p.status.as_str(),
                p.created_at.millis(),
            ])
        })
        .map_err(db_err)?;
    }
    Ok(())
}

/// Issue 32: the organization's name, or its plan and limits, become
/// `after`'s: only the columns that differ from `before`.
pub(crate) fn set_org(
    c: &Connection,
    org: &OrgId,
    before: &Organization,
    after: &Organization,
) -> StoreResult<()> {
    check_org(org, &after.id)?;
    let renamed = before.name != after.name;
    let replanned = (before.plan, before.per_minute, before.per_second)
        != (after.plan, after.per_minute, after.per_second);
    let n = c
        .prepare_cached(
            "UPDATE organizations SET
                name = CASE WHEN ?1 THEN ?2 ELSE name END,
                plan = CASE WHEN ?3 THEN ?4 ELSE plan END,
                per_minute = CASE WHEN ?3 THEN ?5 ELSE per_minute END,
                per_second = CASE WHEN ?3 THEN ?6 ELSE per_second END
             WHERE id = ?7",
        )
        .and_then(|mut s| {
            s.execute(params![
                renamed,
                after.name,
                replanned,
                after.plan.as_str(),
                after.per_minute,
                after.per_second,
                after.id.as_str()
            ])
        })
        .map_err(db_err)?;
    if n == 0 {
        Err(StoreError::NotFound)
    } else {
        Ok(())
    }
}
