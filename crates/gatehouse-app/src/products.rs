//! Products (interface.md §4.4, D16–D18).

use gatehouse_domain::{
    Listing, NewProduct, OrgId, Page, Product, ProductId, ProductPatch, Timestamp,
};

use gatehouse_domain::event::Origin;

use crate::Resource;
use crate::error::{AppError, AppResult, OrApp};
use crate::{App, ProductFilter};

impl App {
    pub async fn list_products(
        &self,
        org: &OrgId,
        filter: &ProductFilter,
        page: Page,
    ) -> AppResult<Listing<Product>> {
        // Issue 16: `q` and deep pages through the search index.
        if Self::searches(filter.q.is_some(), page) {
            return self.search_page::<Product>(org, filter, page).await;
        }
        product_store(self)
            .list_products(org, &filter.equality(), page)
            .await
            .or_app(Resource::Product)
    }

    /// D32: up to `limit` products after `after`; `None` when `after` is not in the list.
    pub async fn list_products_after(
        &self,
        org: &OrgId,
        filter: &ProductFilter,
        after: Option<&ProductId>,
        limit: u32,
    ) -> AppResult<Option<Vec<Product>>> {
        if filter.q.is_some() {
            return self
                .search_after::<Product>(org, filter, after, limit)
                .await;
        }
        product_store(self)
            .list_products_after(org, &filter.equality(), after, limit)
            .await
            .or_app(Resource::Product)
    }

    pub async fn get_product(&self, org: &OrgId, id: &ProductId) -> AppResult<Product> {
        product_store(self)
            .get_product(org, id)
            .await
            .or_app(Resource::Product)?
            .ok_or(AppError::NotFound(Resource::Product))
    }

    pub async fn create_product(
        &self,
        org: &OrgId,
        new: &NewProduct,
        origin: &Origin,
    ) -> AppResult<Product> {
        product_store(self)
            .insert_product(org, new, Timestamp::now(), &self.teller(origin))
            .await
            .or_app(Resource::Product)
    }

    pub async fn update_product(
        &self,
        org: &OrgId,
        id: &ProductId,
        patch: &ProductPatch,
        origin: &Origin,
    ) -> AppResult<Product> {
        product_store(self)
            .update_product(org, id, patch, Timestamp::now(), &self.teller(origin))
            .await
            .or_app(Resource::Product)
    }

    pub async fn delete_product(
        &self,
        org: &OrgId,
        id: &ProductId,
        origin: &Origin,
    ) -> AppResult<()> {
        product_store(self)
            .delete_product(org, id, Timestamp::now(), &self.teller(origin))
            .await
            .or_app(Resource::Product)
    }
}

/// This area's view of storage: the `ProductStore` trait only (issue 25).
fn product_store(app: &App) -> &dyn gatehouse_store::ProductStore {
    app.0.store.as_ref()
}
