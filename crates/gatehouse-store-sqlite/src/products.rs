//! SQLite: products of an organization (D17, D18).

use gatehouse_domain::event::Teller;

use super::*;

#[async_trait]
impl ProductStore for SqliteStore {
    async fn insert_product(
        &self,
        org: &OrgId,
        p: &NewProduct,
        now: Timestamp,
        tell: &Teller,
    ) -> StoreResult<Product> {
        let (org, p) = (org.clone(), p.clone().into_product(now));
        let told = effect::of_product_creation(tell, &p);
        self.pool
            .write(move |tx| {
                tx.prepare_cached(
                    "INSERT INTO products (id, org_id, name, sku, price, stock, status, created_at, updated_at)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?8)",
                )
                .and_then(|mut s| {
                    s.execute(params![
                        p.id.as_str(),
                        org.as_str(),
                        p.name.as_str(),
                        p.sku.as_str(),
                        p.price,
                        p.stock,
                        p.status.as_str(),
                        p.created_at.millis()
                    ])
                })
                .map_err(db_err)?;
                effects::apply(tx, &org, &told, now, None)?;
                Ok(p)
            })
            .await
    }
    async fn get_product(&self, org: &OrgId, id: &ProductId) -> StoreResult<Option<Product>> {
        self.pool.read(|c| get_product_tx(c, org, id)).await
    }
    async fn list_products(
        &self,
        org: &OrgId,
        filter: &ProductFilter,
        page: Page,
    ) -> StoreResult<Listing<Product>> {
        let (org, filter) = (org.clone(), filter.clone());
        self.pool
            .read_blocking(move |c| list_products_sync(c, &org, &filter, page))
            .await
    }
    async fn list_products_after(
        &self,
        org: &OrgId,
        filter: &ProductFilter,
        after: Option<&ProductId>,
        limit: u32,
    ) -> StoreResult<Option<Vec<Product>>> {
        let (w, after) = (product_where(org, filter), after.map(|a| a.to_string()));
        self.pool
            .read_blocking(move |c| {
                cursor_page(
                    c,
                    "products",
                    PRODUCT_COLS,
                    w,
                    after.as_deref(),
                    limit,
                    product_row,
                )
            })
            .await
    }
    async fn update_product(
        &self,
        org: &OrgId,
        id: &ProductId,
        patch: &ProductPatch,
        now: Timestamp,
        tell: &Teller,
    ) -> StoreResult<Product> {
        let (org, id, patch, tell) = (org.clone(), id.clone(), patch.clone(), tell.clone());
        self.pool
            .write(move |tx| {
                let current = get_product_tx(tx, &org, &id)?.ok_or(StoreError::NotFound)?;
                let (next, changed) = product::apply_patch(&current, &patch, now)?;
                if changed {
                    tx.prepare_cached(
                        "UPDATE products SET name = ?1, sku = ?2, price = ?3, stock = ?4, status = ?5, updated_at = ?6
                         WHERE id = ?7 AND org_id = ?8",
                    )
                    .and_then(|mut s| {
                        s.execute(params![
                            next.name.as_str(),
                            next.sku.as_str(),
                            next.price,
                            next.stock,
                            next.status.as_str(),
                            next.updated_at.millis(),
                            id.as_str(),
                            org.as_str()
                        ])
                    })
                    .map_err(db_err)?;
                }
                let told = effect::of_product_update(&tell, &current, &next, changed);
                effects::apply(tx, &org, &told, now, None)?;
                Ok(next)
            })
            .await
    }
    async fn delete_product(
        &self,
        org: &OrgId,
        id: &ProductId,
        now: Timestamp,
        tell: &Teller,
    ) -> StoreResult<()> {
        let (org, id, tell) = (org.clone(), id.clone(), tell.clone());
        self.pool
            .write(move |tx| {
                let last = get_product_tx(tx, &org, &id)?.ok_or(StoreError::NotFound)?;
                tx.prepare_cached("DELETE FROM products WHERE id = ?1 AND org_id = ?2")
                    .and_then(|mut s| s.execute(params![id.as_str(), org.as_str()]))
                    .map_err(db_err)?;
                effects::apply(
                    tx,
                    &org,
                    &effect::of_product_deletion(&tell, &last, now),
                    now,
                    None,
                )
            })
            .await
    }
}

pub(crate) fn get_product_tx(
    c: &Connection,
    org: &OrgId,
    id: &ProductId,
) -> StoreResult<Option<Product>> {
    c.prepare_cached(&format!(
        "SELECT {PRODUCT_COLS} FROM products WHERE id = ?1 AND org_id = ?2"
    ))
    .and_then(|mut s| {
        s.query_row(params![id.as_str(), org.as_str()], product_row)
            .optional()
    })
    .map_err(db_err)
}
