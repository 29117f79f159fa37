//! SQLite: organizations: creating, reading, the `/v2/` preview flag, first-start bootstrap and the staging reset.

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
                insert_client_row(tx, &org.id, &client)?;
                Ok(true)
            })
            .await
    }
    async fn reset_to_fixture(
        &self,
        org: Option<&OrgId>,
        fixture: &gatehouse_domain::Fixture,
        now: Timestamp,
    ) -> StoreResult<u64> {
        let (org, fixture) = (org.cloned(), fixture.clone());
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
                }
                Ok(orgs.len() as u64)
            })
            .await
    }
}
