//! PostgreSQL: products of an organization (D17, D18).

use gatehouse_domain::event::Teller;

use super::*;

#[async_trait]
impl ProductStore for PgStore {
    async fn insert_product(
        &self,
        org: &OrgId,
        p: &NewProduct,
        now: Timestamp,
        tell: &Teller,
    ) -> StoreResult<Product> {
        let p = p.clone().into_product(now);
        let told = effect::of_product_creation(tell, &p);
        write_tx!(self, |tx| {
            insert_product_row(&mut tx, org, &p).await?;
            effects::apply(&mut tx, org, &told, now, None).await?;
            Ok(p.clone())
        })
    }
    async fn get_product(&self, org: &OrgId, id: &ProductId) -> StoreResult<Option<Product>> {
        self.reads.products.get(org, id.as_str()).await
    }
    async fn list_products(
        &self,
        org: &OrgId,
        filter: &ProductFilter,
        page: Page,
    ) -> StoreResult<Listing<Product>> {
        let q = Filters::products(filter);
        snapshot_read!(self, |c| lists::page(c, &lists::PRODUCTS, org, &q, page)
            .await)
    }
    async fn list_products_after(
        &self,
        org: &OrgId,
        filter: &ProductFilter,
        after: Option<&ProductId>,
        limit: u32,
    ) -> StoreResult<Option<Vec<Product>>> {
        let q = Filters::products(filter);
        let after = after.map(ProductId::as_str);
        read!(self, |c| lists::after(
            c,
            &lists::PRODUCTS,
            org,
            &q,
            after,
            limit
        )
        .await)
    }
    async fn update_product(
        &self,
        org: &OrgId,
        id: &ProductId,
        patch: &ProductPatch,
        now: Timestamp,
        tell: &Teller,
    ) -> StoreResult<Product> {
        write_tx!(self, |tx| {
            let current = lock_product(&mut tx, org, id)
                .await?
                .ok_or(StoreError::NotFound)?;
            let (next, changed) = product::apply_patch(&current, patch, now)?;
            if changed {
                query(
                    "UPDATE products SET name = $1, sku = $2, price = $3, stock = $4, status = $5,
                         updated_at = $6
                     WHERE id = $7 AND org_id = $8",
                )
                .bind(next.name.as_str())
                .bind(next.sku.as_str())
                .bind(next.price)
                .bind(next.stock)
                .bind(next.status.as_str())
                .bind(next.updated_at.millis())
                .bind(id.as_str())
                .bind(org.as_str())
                .execute(&mut *tx)
                .await?;
            }
            let told = effect::of_product_update(tell, &current, &next, changed);
            effects::apply(&mut tx, org, &told, now, None).await?;
            Ok(next)
        })
    }
    async fn delete_product(
        &self,
        org: &OrgId,
        id: &ProductId,
        now: Timestamp,
        tell: &Teller,
    ) -> StoreResult<()> {
        write_tx!(self, |tx| {
            let last = lock_product(&mut tx, org, id)
                .await?
                .ok_or(StoreError::NotFound)?;
            query("DELETE FROM products WHERE id = $1 AND org_id = $2")
                .bind(id.as_str())
                .bind(org.as_str())
                .execute(&mut *tx)
                .await?;
            effects::apply(
                &mut tx,
                org,
                &effect::of_product_deletion(tell, &last, now),
                now,
                None,
            )
            .await?;
            Ok(())
        })
    }
}

/// The product, locked for the rest of the transaction (`FOR UPDATE`).
async fn lock_product(
    c: &mut PgConnection,
    org: &OrgId,
    id: &ProductId,
) -> TxResult<Option<Product>> {
    let row = query(&format!(
        "SELECT {} FROM products WHERE id = $1 AND org_id = $2 FOR UPDATE",
        rows::PRODUCT_COLS,
    ))
    .bind(id.as_str())
    .bind(org.as_str())
    .fetch_optional(&mut *c)
    .await?;
    Ok(row.as_ref().map(rows::product_row).transpose()?)
}

pub(crate) async fn insert_product_row(
    c: &mut PgConnection,
    org: &OrgId,
    p: &Product,
) -> TxResult<()> {
    query(
        "INSERT INTO products (id, org_id, name, sku, price, stock, status, created_at, updated_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
    )
    .bind(p.id.as_str())
    .bind(org.as_str())
    .bind(p.name.as_str())
    .bind(p.sku.as_str())
    .bind(p.price)
    .bind(p.stock)
    .bind(p.status.as_str())
    .bind(p.created_at.millis())
    .bind(p.updated_at.millis())
    .execute(&mut *c)
    .await?;
    Ok(())
}
