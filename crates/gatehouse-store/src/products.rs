//! Products of an organization (D17, D18).

use async_trait::async_trait;
use gatehouse_domain::event::Teller;
use gatehouse_domain::{
    Listing, NewProduct, OrgId, Page, Product, ProductId, ProductPatch, ProductStatus, Timestamp,
};

use crate::StoreResult;

/// The equality filter of the product list (interface.md §4.4). `q` (D17)
/// is not here: the application answers it from its in-memory index.
#[derive(Clone, Debug, Default)]
pub struct ProductFilter {
    pub status: Option<ProductStatus>,
}

/// Products of an organization (D17, D18). Every method takes the
/// organization (D2).
#[async_trait]
pub trait ProductStore: Send + Sync {
    /// Inserts the product with its events (D54, told by `tell`).
    async fn insert_product(
        &self,
        org: &OrgId,
        product: &NewProduct,
        now: Timestamp,
        tell: &Teller,
    ) -> StoreResult<Product>;
    async fn get_product(&self, org: &OrgId, id: &ProductId) -> StoreResult<Option<Product>>;
    async fn list_products(
        &self,
        org: &OrgId,
        filter: &ProductFilter,
        page: Page,
    ) -> StoreResult<Listing<Product>>;
    /// D32 cursor paging for products, like [`UserStore::list_users_after`].
    async fn list_products_after(
        &self,
        org: &OrgId,
        filter: &ProductFilter,
        after: Option<&ProductId>,
        limit: u32,
    ) -> StoreResult<Option<Vec<Product>>>;
    /// Applies `patch` (D18) with its events; a patch that changes nothing
    /// writes nothing, and tells nothing (D54).
    async fn update_product(
        &self,
        org: &OrgId,
        id: &ProductId,
        patch: &ProductPatch,
        now: Timestamp,
        tell: &Teller,
    ) -> StoreResult<Product>;
    /// Deletes the product with its event, which carries its last state.
    async fn delete_product(
        &self,
        org: &OrgId,
        id: &ProductId,
        now: Timestamp,
        tell: &Teller,
    ) -> StoreResult<()>;
}
